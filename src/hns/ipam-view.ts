// What the HNS programmer needs from IPAM, read in one pass over the blocks: this node's addressing (gateway, host
// endpoint and subnet per pool: addressing.ts) and the addresses its allocations hold (for endpoint reconciliation).
// A thin adapter: the rules are in addressing.ts and the planner.
import { formatIP, ipAt, parsePrefix } from '../net/ip.ts';
import { affineHost } from '../ipam/block.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { type AddressingResult, hnsAddressing } from './addressing.ts';

export interface IpamView extends AddressingResult {
  /** Addresses allocated in this node's blocks (pods, the node's own handles), canonical text. */
  held: Set<string>;
  /** Pool name -> cidr, for every pool the store knows (config or not). */
  poolCidrs: Map<string, string>;
  /** This node's blocks, by pool. */
  blocksByPool: Map<string, string[]>;
}

export async function readIpamView(ipam: Ipam, host: string, singleNetwork: boolean): Promise<IpamView> {
  const pools = await ipam.listPools();
  const records = (await ipam.ds.blocks()).map((r) => r.value).filter((b) => affineHost(b) === host);
  const held = new Set<string>();
  const blocksByPool = new Map<string, string[]>();
  for (const b of records) {
    const p = parsePrefix(b.cidr);
    b.allocations.forEach((a, o) => {
      if (a !== null) held.add(formatIP(ipAt(p, o)));
    });
    let list = blocksByPool.get(b.pool);
    if (!list) blocksByPool.set(b.pool, (list = []));
    list.push(b.cidr);
  }
  const addressing = hnsAddressing(pools, records, singleNetwork);
  return { ...addressing, held, poolCidrs: new Map(pools.map((p) => [p.name, p.cidr])), blocksByPool };
}
