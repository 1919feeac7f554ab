// The HNS addressing model (docs/reference/hns.md, "HNS addressing"), one pure function that the HNS desired state, the CNI result
// and the tests all ask, so the gateway a pod is given, the gateway HNS holds and the addresses IPAM reserves are
// the same by construction.
//
//  - multi-subnet network (default): each pool is one HNS Subnet (the pool's CIDR) whose default route's NextHop is
//    the gateway all the pool's blocks share on this node; every block of the pool on this node is an IpSubnet
//    under it. Pods get address/poolLen and that gateway.
//  - single network (`singleNetwork`, one block per host): the block is the Subnet and its only IpSubnet; pods get
//    address/blockLen.
// In both, the gateway is ordinal 1 and the host endpoint (`<network>_ep`) ordinal 2 of the node's first block in
// the pool: the block IPAM marked `hostReservation` when it created it (auto on Windows, perHost), else the lowest
// of the node's blocks that reserves both ordinals (blocks written by Calico reserve 0, 1, 2 and the last of every
// Windows block). A pool with no such block has no gateway here: it is reported, never guessed.
// `keep`: gateways HNS holds now. Calico's layout records no hostReservation (calico-node would drop a field of
// ours), so every Windows block there reserves .1 and .2; a block that holds a gateway in force stays the first one
// even when a lower block is claimed later, so pods' gateway never moves under them.
import { formatIP, ipAt, parsePrefix, prefixContainsPrefix, prefixSize, comparePrefix, type Prefix } from '../net/ip.ts';
import { HNS_GATEWAY_ORDINAL, HNS_HOST_ENDPOINT_ORDINAL } from './limits.ts';

export interface AddressingPool {
  name: string;
  cidr: string;
}

/** One of this node's blocks, as IPAM stores it. */
export interface AddressingBlock {
  cidr: string;
  pool: string;
  reserved: readonly number[];
  hostReservation?: boolean;
}

export interface PoolAddressing {
  pool: string;
  poolCidr: string;
  /** The HNS Subnet: the pool (multi-subnet) or the first block (single network). */
  subnet: string;
  /** The prefix length pods get (the Subnet's). */
  prefixLen: number;
  gateway: string;
  hostEndpoint: string;
  /** The block holding the gateway and the host endpoint. */
  firstBlock: string;
  /** Every block of the pool on this node (the IpSubnets), sorted. */
  blocks: string[];
}

export interface AddressingResult {
  pools: PoolAddressing[];
  /** Pools with blocks on this node that cannot be programmed, and why. */
  problems: { pool: string; reason: string }[];
}

export function hnsAddressing(pools: readonly AddressingPool[], blocks: readonly AddressingBlock[], singleNetwork = false,
  keep: ReadonlySet<string> = new Set()): AddressingResult {
  const out: AddressingResult = { pools: [], problems: [] };
  const byPool = new Map<string, { b: AddressingBlock; p: Prefix }[]>();
  for (const b of blocks) {
    let list = byPool.get(b.pool);
    if (!list) byPool.set(b.pool, (list = []));
    list.push({ b, p: parsePrefix(b.cidr) });
  }
  for (const pool of [...pools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const list = byPool.get(pool.name);
    if (!list?.length) continue;
    const poolPrefix = parsePrefix(pool.cidr);
    list.sort((x, y) => comparePrefix(x.p, y.p));
    const outside = list.find((x) => !prefixContainsPrefix(poolPrefix, x.p));
    if (outside) {
      out.problems.push({ pool: pool.name, reason: `block ${outside.b.cidr} is not inside the pool's ${pool.cidr}` });
      continue;
    }
    const holds = (x: { b: AddressingBlock; p: Prefix }) =>
      prefixSize(x.p) > HNS_HOST_ENDPOINT_ORDINAL && x.b.reserved.includes(HNS_GATEWAY_ORDINAL) && x.b.reserved.includes(HNS_HOST_ENDPOINT_ORDINAL);
    const first = list.find((x) => x.b.hostReservation && holds(x)) ?? list.find((x) => holds(x) && keep.has(formatIP(ipAt(x.p, HNS_GATEWAY_ORDINAL))))
      ?? list.find(holds);
    if (!first) {
      out.problems.push({
        pool: pool.name,
        reason: `no block of pool ${pool.name} on this node reserves ordinals ${HNS_GATEWAY_ORDINAL} and ${HNS_HOST_ENDPOINT_ORDINAL} for the HNS gateway and host endpoint (blocks: ${list.map((x) => x.b.cidr).join(', ')})`,
      });
      continue;
    }
    if (singleNetwork && list.length > 1) {
      out.problems.push({ pool: pool.name, reason: `singleNetwork: one block per host, this node holds ${list.length} in pool ${pool.name} (${list.map((x) => x.b.cidr).join(', ')})` });
      continue;
    }
    out.pools.push({
      pool: pool.name,
      poolCidr: poolPrefix.toString(),
      subnet: singleNetwork ? first.p.toString() : poolPrefix.toString(),
      prefixLen: singleNetwork ? first.p.len : poolPrefix.len,
      gateway: formatIP(ipAt(first.p, HNS_GATEWAY_ORDINAL)),
      hostEndpoint: formatIP(ipAt(first.p, HNS_HOST_ENDPOINT_ORDINAL)),
      firstBlock: first.p.toString(),
      blocks: list.map((x) => x.p.toString()),
    });
  }
  const known = new Set(pools.map((p) => p.name));
  for (const name of byPool.keys()) if (!known.has(name)) out.problems.push({ pool: name, reason: `pool ${name} is not known` });
  return out;
}
