// Node deletion cleanup on Calico's layout: when a Node resource goes away, its block affinities are released at
// once (empty blocks deleted, blocks still holding addresses left non-affine, as Calico's releaseBlockAffinity
// does), and the addresses it still holds are released once it has stayed gone for a grace period (so a node
// that is re-registered, or whose pods are still being drained, keeps them). Without this, addresses of deleted
// nodes leak, which is how Calico users lose pools. Every write is the allocator's own compare-and-swap, so several
// daemons may sweep at once.
import type { Ipam } from '../ipam.ts';
import type { Watcher } from '../../store/types.ts';
import { formatIP, ipAt, parsePrefix } from '../../net/ip.ts';

/** The daemon's grace period: a deleted Node's addresses are released once it has been gone this long. */
export const NODE_GONE_GRACE_MS = 15 * 60_000;

export interface NodeCleanupOptions {
  /** How long a node must stay gone before the addresses it holds are released. */
  graceMs: number;
  now?: () => number;
  log?: (msg: string) => void;
}

export interface SweepResult {
  affinitiesReleased: string[];
  handlesReleased: string[];
  addressesReleased: string[];
}

export class NodeCleanup {
  /** Node -> when this sweeper first saw it gone while it still held addresses. */
  private readonly goneSince = new Map<string, number>();
  private watcher: Watcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private readonly now: () => number;

  constructor(
    private readonly ipam: Ipam,
    private readonly opts: NodeCleanupOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  /** One pass over affinities and blocks. */
  async sweep(): Promise<SweepResult> {
    const out: SweepResult = { affinitiesReleased: [], handlesReleased: [], addressesReleased: [] };
    const nodes = new Set((await this.ipam.ds.hosts()).map((h) => h.name));
    for (const { value: a } of await this.ipam.ds.affinities()) {
      if (nodes.has(a.host)) continue;
      try {
        await this.ipam.releaseAffinity(a.cidr, a.host);
        out.affinitiesReleased.push(`${a.host} ${a.cidr}`);
        this.opts.log?.(`node ${a.host} is gone: released its affinity to ${a.cidr}`);
      } catch (e) {
        this.opts.log?.(`node ${a.host} is gone: could not release its affinity to ${a.cidr}: ${(e as Error).message}`);
      }
    }
    const now = this.now();
    const handles = new Set<string>();
    const bare: string[] = [];
    const holding = new Set<string>();
    for (const { value: b } of await this.ipam.ds.blocks()) {
      const prefix = parsePrefix(b.cidr);
      b.allocations.forEach((idx, o) => {
        if (idx === null) return;
        const attr = b.attributes[idx];
        if (attr.host === '' || nodes.has(attr.host)) return;
        holding.add(attr.host);
        const since = this.goneSince.get(attr.host) ?? now;
        this.goneSince.set(attr.host, since);
        if (now - since < this.opts.graceMs) return;
        if (attr.handle) handles.add(attr.handle);
        else bare.push(formatIP(ipAt(prefix, o)));
      });
    }
    for (const n of [...this.goneSince.keys()]) if (!holding.has(n)) this.goneSince.delete(n);
    for (const h of handles) {
      out.addressesReleased.push(...(await this.ipam.releaseByHandle(h)));
      out.handlesReleased.push(h);
    }
    if (bare.length) out.addressesReleased.push(...(await this.ipam.releaseIPs(bare)).released);
    if (out.addressesReleased.length) this.opts.log?.(`released ${out.addressesReleased.length} addresses (${handles.size} handles) of nodes gone for over ${Math.round(this.opts.graceMs / 1000)} s`);
    return out;
  }

  /** Sweep when a Node resource is deleted under `nodesPrefix`, and every `intervalMs` (the grace period ends). */
  start(nodesPrefix: string, intervalMs: number): void {
    const kick = () => {
      this.running = this.running.then(() => this.sweep()).catch((e) => this.opts.log?.(`node cleanup: ${(e as Error).message}`));
    };
    this.ipam.store.revision().then((rev) => {
      this.watcher = this.ipam.store.watch(nodesPrefix, rev, (events) => {
        if (events.some((e) => e.type === 'delete')) kick();
      });
    }, (e) => this.opts.log?.(`node cleanup: cannot watch ${nodesPrefix}: ${(e as Error).message}`));
    this.timer = setInterval(kick, intervalMs);
    this.timer.unref();
    kick();
  }

  async stop(): Promise<void> {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
