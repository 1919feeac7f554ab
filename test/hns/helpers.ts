// Shared bits for the HNS tests: configs per mode, op summaries, a manual clock and timer queue.
import fc from 'fast-check';
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

// ---- random desired states -------------------------------------------------------------------------------

// Local blocks: per area k (10.0.k.0/24) one of: nothing, a /26, a /27, two /27s; micropool /30s and /32s.
// Remote blocks: /26s and /32s in 10.0.100.0/22 with one of four next hops.
const areas = [1, 2, 3, 4, 123, 200];
const shapes: string[][] = [[], ['/26'], ['/27'], ['/27', '+32/27']];
const micro = ['10.9.0.4/30', '10.9.0.8/30', '10.9.0.12/30', '10.9.0.64/32', '10.9.0.65/32'];
const remotesAll = ['10.0.100.0/26', '10.0.100.64/26', '10.0.101.0/26', '10.0.102.7/32', '10.0.102.8/32', '10.0.103.0/26'];
const hops = ['192.168.1.1', '192.168.1.2', '192.168.1.3', '192.168.1.4'];

export const stateArb = fc.record({
  shape: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: areas.length, maxLength: areas.length }),
  micro: fc.subarray(micro),
  remotes: fc.array(fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }), { minLength: remotesAll.length, maxLength: remotesAll.length }),
  microFlags: fc.boolean(),
});
export type StateSpec = typeof stateArb extends fc.Arbitrary<infer T> ? T : never;

export function fromSpec(mode: HnsMode, s: StateSpec): DesiredState {
  const blocks: (string | { cidr: string; reservation?: { kind: 'none' } | { kind: 'auto' } })[] = [];
  areas.forEach((k, i) => {
    for (const sh of shapes[s.shape[i]]) blocks.push(sh === '+32/27' ? `10.0.${k}.32/27` : `10.0.${k}.0${sh}`);
  });
  // microFlags: IPAM reports an auto reservation for the micropool's blocks (a flags change for /30s).
  for (const m of s.micro) blocks.push(s.microFlags ? { cidr: m, reservation: { kind: 'auto' } } : m);
  const remotes: Record<string, string> = {};
  s.remotes.forEach((h, i) => {
    if (h !== undefined) remotes[remotesAll[i]] = hops[h];
  });
  return desired(mode, blocks, remotes);
}

