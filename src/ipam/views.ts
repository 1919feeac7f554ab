// Read-only summaries of what IPAM holds: the blocks with their counts, and the routes a host announces. Its own
// file because they only read the store (no pass, no transaction).
import { comparePrefix, hostPrefix, ipAt, prefixContainsPrefix, type Prefix } from '../net/ip.ts';
import { affineHost, blockCounts } from './block.ts';
import { pfx } from './cidr-cache.ts';
import type { IpamStore } from './datastore.ts';
import type { BlockInfo, RouteView } from './types.ts';

/** Every block (or a host's affine ones) with its counts. */
export async function blockInfos(ds: IpamStore, host?: string): Promise<BlockInfo[]> {
  const all = await ds.blocks();
  return all
    .map((v) => v.value)
    .filter((b) => host === undefined || affineHost(b) === host)
    .map((b) => {
      const c = blockCounts(b);
      return { cidr: b.cidr, pool: b.pool, affinity: affineHost(b), os: b.os, borrowable: b.borrowable, ...c };
    });
}

/** What the host announces: its confirmed affine blocks, plus host routes for addresses it holds elsewhere. */
export async function hostRoutes(ds: IpamStore, host: string): Promise<RouteView> {
  const pools = await ds.pools();
  const exported = (cidr: Prefix): boolean => {
    const p = pools.find((x) => prefixContainsPrefix(pfx(x.cidr), cidr));
    return !p || !p.disableBGPExport;
  };
  const aggregates = (await ds.affinities(host))
    .filter((a) => a.value.state === 'confirmed' && exported(pfx(a.value.cidr)))
    .map((a) => pfx(a.value.cidr));
  const hosts: Prefix[] = [];
  for (const { value: b } of await ds.blocks()) {
    if (affineHost(b) === host) continue;
    const prefix = pfx(b.cidr);
    if (!exported(prefix)) continue;
    b.allocations.forEach((idx, o) => {
      if (idx !== null && b.attributes[idx].host === host) hosts.push(hostPrefix(ipAt(prefix, o)));
    });
  }
  const sortText = (ps: Prefix[]) => ps.sort(comparePrefix).map(String);
  return { aggregates: sortText(aggregates), hosts: sortText(hosts) };
}
