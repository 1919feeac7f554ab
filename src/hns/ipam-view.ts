// What the HNS programmer needs from IPAM, read in one pass over the blocks: this node's addressing (gateway, host
// endpoint and subnet per pool: addressing.ts) and the addresses its allocations hold (for endpoint reconciliation).
// A thin adapter: the rules are in addressing.ts and the planner.
import { formatIP, ipAt, parsePrefix } from '../net/ip.ts';
import { affineHost } from '../ipam/block.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { Pool } from '../ipam/types.ts';
import { type AddressingResult, hnsAddressing } from './addressing.ts';

export interface IpamView extends AddressingResult {
  /** Addresses allocated in this node's blocks (pods, the node's own handles), canonical text. */
  held: Set<string>;
  /** Handle -> the addresses it holds in this node's blocks. */
  handles: Map<string, string[]>;
  /** Every pool the store knows (in the config or not). */
  storePools: Pool[];
  /** This node's blocks, by pool. */
  blocksByPool: Map<string, string[]>;
  /** Blocks affine to other nodes (the overlay's remote blocks), with their node. */
  remoteBlocks: { cidr: string; host: string }[];
}

/** `keep`: the gateways HNS holds now (addressing.ts keeps their blocks first). */
export async function readIpamView(ipam: Ipam, host: string, singleNetwork: boolean, keep?: ReadonlySet<string>): Promise<IpamView> {
  const pools = await ipam.listPools();
  const all = (await ipam.ds.blocks()).map((r) => r.value);
  const records = all.filter((b) => affineHost(b) === host);
  const remoteBlocks: { cidr: string; host: string }[] = [];
  for (const b of all) {
    const h = affineHost(b);
    if (h !== null && h !== host) remoteBlocks.push({ cidr: b.cidr, host: h });
  }
  const held = new Set<string>();
  const handles = new Map<string, string[]>();
  const blocksByPool = new Map<string, string[]>();
  for (const b of records) {
    const p = parsePrefix(b.cidr);
    b.allocations.forEach((a, o) => {
      if (a === null) return;
      const ip = formatIP(ipAt(p, o));
      held.add(ip);
      const handle = b.attributes[a]?.handle;
      if (!handle) return;
      let list = handles.get(handle);
      if (!list) handles.set(handle, (list = []));
      list.push(ip);
    });
    let list = blocksByPool.get(b.pool);
    if (!list) blocksByPool.set(b.pool, (list = []));
    list.push(b.cidr);
  }
  const addressing = hnsAddressing(pools, records, singleNetwork, keep);
  return { ...addressing, held, handles, storePools: pools, blocksByPool, remoteBlocks };
}
