// Shared bits for the HNS tests: configs per mode, op summaries, a manual clock and timer queue.
import { type DesiredState, type HnsConfig, type HnsMode, type LocalBlock, type RemoteRoute, buildDesired } from '../../src/hns/desired.ts';
import type { HnsOp, ModifyNetworkRequest, NetRoute } from '../../src/hns/model.ts';
import type { Clock, Timers } from '../../src/hns/reconcile.ts';

export const MODES: HnsMode[] = ['l2bridge', 'l2tunnel', 'overlay'];
export const DR_MAC = '01-02-03-04-05-06';
export const ALIAS = 'vEthernet (Ethernet)';

/** Pool 10.0.0.0/16 (Windows blocks: Flags 3) and micropool 10.9.0.0/24 (Flags 0), cluster range 10.0.0.0/8. */
export function config(mode: HnsMode, extra: Partial<HnsConfig> = {}): HnsConfig {
  return {
    mode,
    network: 'pods',
    adapter: 'Ethernet',
    pools: [
      { cidr: '10.0.0.0/16', gateway: '10.0.0.1' },
      { cidr: '10.9.0.0/24', gateway: '10.9.0.1', reservation: { kind: 'none' } },
    ],
    ownedPrefixes: ['10.0.0.0/8'],
    vni: 4096,
    drMac: DR_MAC,
    ...extra,
  };
}

export function desired(
  mode: HnsMode,
  localBlocks: (string | LocalBlock)[],
  remotes: Record<string, string> = {},
  extra: Partial<HnsConfig> = {},
): DesiredState {
  const remoteRoutes: RemoteRoute[] = Object.entries(remotes).map(([prefix, nextHop]) => ({ prefix, nextHop }));
  return buildDesired({ config: config(mode, extra), localBlocks, remoteRoutes });
}

/** "op object" one-liners: what the plan does, for readable assertions. */
export function summary(ops: readonly HnsOp[]): string[] {
  return ops.map((o) => {
    if (o.op === 'create-network') return `create-network ${(o.body as { Name: string }).Name}`;
    if (o.op.endsWith('host-route')) {
      const r = o.body as NetRoute;
      return `${o.op} ${r.DestinationPrefix} via ${r.NextHop}`;
    }
    const s = (o.body as ModifyNetworkRequest).Settings as Record<string, unknown>;
    const items = (s.Subnets ?? s.IpSubnets ?? s.Policies) as Record<string, unknown>[];
    const what = items.map((i) => {
      const set = (i.Settings ?? {}) as Record<string, unknown>;
      if (i.Type === 'RemoteSubnetRoute') return `${set.DestinationPrefix} via ${set.ProviderAddress}`;
      return String(i.IpAddressPrefix ?? i.Type);
    });
    return `${o.op} ${what.join(',')}`;
  });
}

/** A clock and a timer queue that tests advance by hand. */
export class ManualTime implements Clock, Timers {
  private t = 0;
  private seq = 0;
  private queue: { at: number; id: number; fn: () => void }[] = [];
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.queue.push({ at: this.t + ms, id, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.queue = this.queue.filter((x) => x.id !== handle);
  }
  get pending(): number {
    return this.queue.length;
  }
  /** When the next timer fires, or null. */
  nextAt(): number | null {
    return this.queue.length ? Math.min(...this.queue.map((x) => x.at)) : null;
  }
  /** Advance to the next timer and fire it. False when none is pending. */
  fireNext(): boolean {
    if (this.queue.length === 0) return false;
    this.queue.sort((a, b) => a.at - b.at || a.id - b.id);
    const next = this.queue.shift()!;
    this.t = Math.max(this.t, next.at);
    next.fn();
    return true;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}
