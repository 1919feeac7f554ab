// Overlay remote routes from the datastore (pure): every block affine to another node becomes one remote route via
// that node's published provider address, carrying that node's own DR MAC (the planner turns each into a
// RemoteSubnetRoute policy). A node that has published no facts gets no route for its blocks, and is reported, so
// /dataplane can say why its pods are unreachable. Routes learnt over BGP (the RIB) still serve prefixes no store
// block covers (e.g. another cluster's), with this node's configured DR MAC as before.
import { type Prefix, comparePrefix, parsePrefix } from '../net/ip.ts';
import { type RemoteRoute, overlapsSorted } from './desired.ts';

export interface OverlayBlock {
  cidr: string;
  /** The node the block is affine to. */
  host: string;
}

export interface OverlayFacts {
  providerAddress: string;
  drMac: string;
}

export interface OverlayMissing {
  node: string;
  blocks: string[];
  reason: string;
}

export interface OverlayRoutes {
  routes: RemoteRoute[];
  /** Nodes with blocks but no published facts: no route, one entry per node (sorted by name). */
  missing: OverlayMissing[];
}

/** Remote routes for other nodes' blocks. `self`'s blocks are local, never remote. */
export function overlayRoutes(blocks: Iterable<OverlayBlock>, facts: ReadonlyMap<string, OverlayFacts>, self: string): OverlayRoutes {
  const routes: RemoteRoute[] = [];
  const missing = new Map<string, string[]>();
  for (const b of blocks) {
    if (b.host === self) continue;
    const f = facts.get(b.host);
    if (!f) {
      let list = missing.get(b.host);
      if (!list) missing.set(b.host, (list = []));
      list.push(b.cidr);
      continue;
    }
    routes.push({ prefix: b.cidr, nextHop: f.providerAddress, drMac: f.drMac });
  }
  return {
    routes,
    missing: [...missing].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([node, list]) => ({ node, blocks: list.sort(), reason: 'no provider address and DR MAC published for this node' })),
  };
}

/**
 * The store's routes, then the RIB's routes that overlap no store block of another node (those blocks are the
 * store's to route, or to leave unrouted when their node published nothing).
 */
export function mergeOverlay(store: OverlayRoutes, storeBlocks: readonly OverlayBlock[], self: string, rib: Iterable<RemoteRoute>): RemoteRoute[] {
  // Blocks never overlap one another, so a sorted list and a binary search answer "overlaps any".
  const covered: Prefix[] = storeBlocks.filter((b) => b.host !== self).map((b) => parsePrefix(b.cidr)).sort(comparePrefix);
  const out = [...store.routes];
  for (const r of rib) {
    const p = typeof r.prefix === 'string' ? parsePrefix(r.prefix) : r.prefix;
    if (!overlapsSorted(covered, p)) out.push(r);
  }
  return out;
}
