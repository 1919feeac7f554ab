// One snapshot of everything an operator looks at first: the node, its peers, its pools and blocks (with the
// addresses it borrowed and from whom), the dataplane and the warnings. The status page (GET /overview) and
// `blockspeaker top` (control socket method show.overview) both draw from it, so one refresh is one request.
import type { PeerStatus } from '../bgp/peer.ts';
import type { BlockInfo } from '../ipam/types.ts';
import type { WarningsView } from './warnings.ts';
import { formatPrefix, maxLen, parsePrefix, prefixContainsPrefix, type Prefix } from '../net/ip.ts';

/** Pool utilisation, summed over the pool's blocks (computed in views.ts). */
export interface PoolUsage {
  name: string;
  cidr: string;
  blockSize: number;
  disabled: boolean;
  blocks: number;
  size: number;
  allocated: number;
  free: number;
  reserved: number;
  /** allocated / (size - reserved), 0..1. */
  utilisation: number;
}

export type PoolView = PoolUsage;

export type BlockView = BlockInfo & { utilisation: number };

/** An address this node holds in a block affine to another host (announced as a host route). */
export interface Borrowed {
  address: string;
  block: string | null;
  /** The host the block is affine to (null: the block has no affinity, or is gone). */
  from: string | null;
}

export interface Overview {
  /** When this snapshot was taken (ISO 8601). */
  at: string;
  node: {
    name: string;
    os: string;
    asn: number | null;
    routerId: string | null;
    version: string;
    startedAt: string;
    /** Seconds. */
    uptime: number;
    ready: boolean;
    /** The parts not ready yet (store, speaker, dataplane), or "stopping"; empty when ready. */
    notReady: string[];
  };
  /** /peers as it is: fields other parts add (roles, limits) reach the page and `top` untouched. */
  peers: PeerStatus[];
  /** Loc-RIB size. */
  routes: number;
  /** null when the config has no ipam section. */
  ipam: null | {
    pools: PoolView[];
    /** This node's affine blocks. */
    blocks: BlockView[];
    borrowed: Borrowed[];
    /** What this node announces from IPAM. */
    announced: string[];
  };
  dataplane: unknown;
  /** One entry per key with a count, bounded (src/daemon/warnings.ts). */
  warnings: WarningsView;
}

/** What the overview reads from the daemon. */
export interface OverviewSource {
  version: string;
  startedAt: number;
  now(): number;
  node(): { name: string; os: string };
  bgp(): { asn: number; routerId: string } | null;
  ready(): { ready: boolean; store: boolean; speaker: boolean; dataplane: boolean };
  peers(): PeerStatus[];
  routes(): number;
  /** null without IPAM. */
  pools(): Promise<PoolView[]> | null;
  /** Every block of every host; null without IPAM. */
  blocks(): Promise<BlockView[]> | null;
  announced(): readonly Prefix[];
  dataplane(): unknown;
  warnings(): WarningsView;
}

export async function overview(src: OverviewSource): Promise<Overview> {
  const now = src.now();
  const node = src.node();
  const bgp = src.bgp();
  const r = src.ready();
  const notReady = (['store', 'speaker', 'dataplane'] as const).filter((k) => !r[k]) as string[];
  if (!r.ready && notReady.length === 0) notReady.push('stopping');
  const poolsP = src.pools();
  const blocksP = src.blocks();
  let ipam: Overview['ipam'] = null;
  if (poolsP && blocksP) {
    const [pools, blocks] = await Promise.all([poolsP, blocksP]);
    const announced = src.announced();
    ipam = {
      pools,
      blocks: blocks.filter((b) => b.affinity === node.name),
      borrowed: borrowedFrom(announced, blocks, node.name),
      announced: announced.map(formatPrefix),
    };
  }
  return {
    at: new Date(now).toISOString(),
    node: {
      name: node.name, os: node.os, asn: bgp?.asn ?? null, routerId: bgp?.routerId ?? null, version: src.version,
      startedAt: new Date(src.startedAt).toISOString(), uptime: Math.max(0, Math.floor((now - src.startedAt) / 1000)),
      ready: r.ready, notReady,
    },
    peers: src.peers(),
    routes: src.routes(),
    ipam,
    dataplane: src.dataplane(),
    warnings: src.warnings(),
  };
}

/**
 * The host-length prefixes this node announces are the addresses it holds in other hosts' blocks (its own blocks
 * are announced as aggregates); each is matched to the block that holds it.
 */
export function borrowedFrom(announced: readonly Prefix[], blocks: readonly BlockInfo[], self: string): Borrowed[] {
  const parsed = blocks.map((b) => ({ b, p: parsePrefix(b.cidr) }));
  const out: Borrowed[] = [];
  for (const a of announced) {
    if (a.len !== maxLen(a.family)) continue;
    const hit = parsed.find((x) => prefixContainsPrefix(x.p, a));
    if (hit?.b.affinity === self) continue; // a /32 (/128) block of its own: a micropool, not a borrow
    out.push({ address: formatPrefix(a).split('/')[0], block: hit?.b.cidr ?? null, from: hit?.b.affinity ?? null });
  }
  return out;
}
