// The daemon's read-only answers about its parts: IPAM's pools and blocks with their utilisation, the best routes
// for `show route`, IPAM's settings as read, and the peers with the ones the cluster made marked. The status
// endpoint, the control socket, the overview and the metrics all draw from them; they change nothing.
import { describeAttrs } from '../bgp/codec/json.ts';
import type { PeerStatus } from '../bgp/peer.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { BlockInfo } from '../ipam/types.ts';
import { formatIP, formatPrefix, parseIP, parsePrefix, type Prefix } from '../net/ip.ts';
import type { Rib } from '../rib/rib.ts';
import type { PoolUsage } from './overview.ts';

/** /peers, with the peers the cluster made (node-to-node mesh, peer selectors) marked `mesh: true` for the page and `top`. */
export function peersWithRoles(peers: PeerStatus[], made: Set<string>): PeerStatus[] {
  return made.size ? peers.map((p) => (made.has(p.address) ? { ...p, mesh: true } : p)) : peers;
}

/** /ipam/config. Settings that cannot be read: the ones IPAM uses meanwhile (the last good), and why. */
export async function ipamConfigStatus(ipam: Ipam): Promise<unknown> {
  const { ipamConfigStatus } = await import('../ipam/calico/ipamconfig.ts');
  try {
    return await ipamConfigStatus(ipam.store, ipam.ds.layout);
  } catch (e) {
    const inForce = await ipam.ds.config().then((c) => c.value, () => null);
    return { layout: ipam.ds.layout.name, inForce: ipam.ds.keys.config, config: inForce, error: `${ipam.ds.keys.config} cannot be read: ${(e as Error).message}` };
  }
}

export async function blockUsage(ipam: Ipam, host?: string): Promise<(BlockInfo & { utilisation: number })[]> {
  const blocks = await ipam.blocks(host);
  return blocks.map((b) => ({ ...b, utilisation: ratio(b.allocated, b.size - b.reserved) }));
}

export async function poolUsage(ipam: Ipam): Promise<PoolUsage[]> {
  const [pools, blocks] = await Promise.all([ipam.listPools(), ipam.blocks()]);
  return pools.map((p) => {
    const mine = blocks.filter((b) => b.pool === p.name);
    const sum = (k: 'size' | 'allocated' | 'free' | 'reserved') => mine.reduce((n, b) => n + b[k], 0);
    const u = { size: sum('size'), allocated: sum('allocated'), free: sum('free'), reserved: sum('reserved') };
    return { name: p.name, cidr: p.cidr, blockSize: p.blockSize, disabled: p.disabled, blocks: mine.length, ...u,
      utilisation: ratio(u.allocated, u.size - u.reserved) };
  });
}

/** Best routes for `show route`: all, one prefix, or the longest match for an address. */
export function bestRoutes(rib: Rib | null, q: { prefix?: string; lpm?: string }): unknown[] {
  if (!rib) return [];
  const describe = (prefix: Prefix, best: { source: string; attrs: Parameters<typeof describeAttrs>[0] }) => {
    const a = describeAttrs(best.attrs, true);
    return { prefix: formatPrefix(prefix), source: best.source, nextHop: best.attrs.nextHop ? formatIP(best.attrs.nextHop) : null,
      asPath: a.AS_PATH ?? '', origin: a.ORIGIN ?? null, communities: [...(a.COMMUNITIES ?? []) as string[], ...(a.LARGE_COMMUNITY ?? []) as string[]] };
  };
  if (q.lpm) {
    const r = rib.lpm(parseIP(q.lpm));
    return r ? [describe(r.prefix, r.best)] : [];
  }
  if (q.prefix) {
    const p = parsePrefix(q.prefix);
    const paths = rib.paths(p);
    return paths.length ? [describe(p, paths[0])] : [];
  }
  const out: unknown[] = [];
  for (const r of rib.entries()) {
    out.push(describe(r.prefix, r.best));
    if (out.length >= 10_000) break;
  }
  return out;
}

function ratio(a: number, b: number): number {
  return b > 0 ? Math.round((a / b) * 10_000) / 10_000 : 0;
}
