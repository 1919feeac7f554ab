// Route reflection (RFC 4456), the pure part: which iBGP-learned routes a reflector passes on, what it adds, and
// what it must drop. The speaker asks these when it has a cluster ID; without one iBGP routes never go to iBGP peers.
import { withAttrs, type PathAttrs } from '../rib/attrs.ts';

/** RFC 4456 6: from a client, to every iBGP peer (clients and non-clients); from a non-client, to clients only. */
export function reflects(fromClient: boolean, toClient: boolean): boolean {
  return fromClient || toClient;
}

/**
 * The attributes of a reflected route: ORIGINATOR_ID set to the router ID of the peer it came from unless already
 * there; our cluster ID prepended to CLUSTER_LIST.
 */
export function reflectedAttrs(a: PathAttrs, sourceRouterId: number, clusterId: number): PathAttrs {
  // Memoised per record (records are immutable): a reflector sends each route to every client, and building the
  // record per client was a third of its CPU with 1,000 clients (bench:bgp-reflector). The last source and cluster
  // ID are kept: a record comes from one source, and a speaker has one cluster ID.
  const hit = reflected.get(a);
  if (hit !== undefined && hit.sourceRouterId === sourceRouterId && hit.clusterId === clusterId) return hit.out;
  const out = withAttrs(a, {
    originatorId: a.originatorId ?? sourceRouterId,
    clusterList: [clusterId, ...a.clusterList],
  });
  reflected.set(a, { sourceRouterId, clusterId, out });
  return out;
}

const reflected = new WeakMap<PathAttrs, { sourceRouterId: number; clusterId: number; out: PathAttrs }>();

/** RFC 4456 8: a reflector ignores a route whose CLUSTER_LIST holds its own cluster ID (a loop). */
export function clusterLoop(a: PathAttrs, clusterId: number | undefined): boolean {
  return clusterId !== undefined && a.clusterList.includes(clusterId);
}
