// BGP best-path selection (RFC 4271 9.1.2.2 plus the usual practice around it).
//
// Selection is done as the RFC describes it: a sequence of elimination steps over the *set* of candidates, not a
// pairwise comparator. MED is only comparable between paths from the same neighbour AS, which makes any pairwise
// "compare" non-transitive (A<B by MED, B<C by router ID, C<A by router ID is possible), so a sort would give an
// answer that depends on input order. Every step here is a function of the candidate set, and the last step is a
// total order, so the result never depends on the order the paths are given in.
import { IP, compareIP } from '../net/ip.ts';
import type { PathAttrs } from './attrs.ts';

/** Where a path came from: 'local' = originated on this host (IPAM blocks, static), else an iBGP or eBGP peer. */
export type PeerType = 'local' | 'ibgp' | 'ebgp';

export interface PeerInfo {
  readonly type: PeerType;
  /** The peer's BGP identifier (our own for local routes), uint32. */
  readonly routerId: number;
  /** The peer's address; null for local sources. */
  readonly address: IP | null;
  readonly asn: number;
}

/** One candidate path for a prefix. */
export interface Path {
  /** The source: a peer id, or a local source name such as 'local' or 'static'. Unique per prefix. */
  readonly source: string;
  readonly attrs: PathAttrs;
  readonly peer: PeerInfo;
  /** Kept across a graceful restart but not yet refreshed (RFC 4724); still usable for forwarding. */
  readonly stale: boolean;
}

export interface BestPathOptions {
  /** Size limit of the multipath (ECMP) set, best included. Default 1 (no ECMP). */
  maxPaths?: number;
  /** Compare MED across different neighbour ASes too (Cisco's always-compare-med). Default false. */
  alwaysCompareMed?: boolean;
}

/** The step that narrowed the candidates to the winner; for diagnostics and tests. */
export type DecidingStep =
  | 'only' | 'local' | 'localPref' | 'asPathLength' | 'origin' | 'med' | 'ebgp'
  | 'routerId' | 'clusterList' | 'peerAddress' | 'source';

export interface Selection<P extends Path = Path> {
  best: P;
  /** ECMP set with the best first, then the others in tie-break order; at most maxPaths long. */
  multipath: P[];
  decidedBy: DecidingStep;
}

export const DEFAULT_LOCAL_PREF = 100;

// RFC 4456 9: the ORIGINATOR_ID stands in for the router ID of a reflected route.
const routerIdOf = (p: Path): number => p.attrs.originatorId ?? p.peer.routerId;

// Keys of the "lowest wins" elimination steps. Module-level (no closures per call): selection runs on every
// route update.
const K_LOCAL_PREF = 0;
const K_AS_PATH = 1;
const K_ORIGIN = 2;
const K_MED = 3;

function keyOf(p: Path, k: number): number {
  switch (k) {
    case K_LOCAL_PREF: return -(p.attrs.localPref ?? DEFAULT_LOCAL_PREF); // highest wins
    case K_AS_PATH: return p.attrs.asPathLen;
    case K_ORIGIN: return p.attrs.origin;
    default: return p.attrs.med ?? 0; // RFC 4271 9.1.2.2 c: a missing MED is the lowest possible value
  }
}

/** Keep, in place, the candidates c[0..n) whose key is the minimum; returns the new count (order kept). */
function keepMin(c: Path[], n: number, k: number): number {
  let min = Infinity;
  for (let i = 0; i < n; i++) {
    const v = keyOf(c[i], k);
    if (v < min) min = v;
  }
  let m = 0;
  for (let i = 0; i < n; i++) if (keyOf(c[i], k) === min) c[m++] = c[i];
  return m;
}

/** Keep, in place, the candidates of one peer type when any is present; returns the new count. */
function keepType(c: Path[], n: number, type: PeerType, drop: PeerType | null): number {
  let any = false;
  for (let i = 0; i < n; i++) if (c[i].peer.type === type) { any = true; break; }
  if (!any) return n;
  let m = 0;
  for (let i = 0; i < n; i++) {
    const t = c[i].peer.type;
    if (drop === null ? t === type : t !== drop) c[m++] = c[i];
  }
  return m;
}

// Per-candidate "eliminated" marks for the MED step, reused between calls.
let medDrop = new Uint8Array(16);

/** RFC 4271 9.1.2.2 c: remove a path when another from the same neighbour AS has a lower MED. */
function keepMinMedPerAs(c: Path[], n: number): number {
  if (medDrop.length < n) medDrop = new Uint8Array(n * 2);
  // n is the number of paths for one prefix (a handful), so the quadratic scan beats building a map.
  for (let i = 0; i < n; i++) {
    const as = c[i].attrs.neighbourAsn;
    const med = keyOf(c[i], K_MED);
    let drop = 0;
    for (let j = 0; j < n; j++) {
      if (c[j].attrs.neighbourAsn === as && keyOf(c[j], K_MED) < med) { drop = 1; break; }
    }
    medDrop[i] = drop;
  }
  let m = 0;
  for (let i = 0; i < n; i++) if (!medDrop[i]) c[m++] = c[i];
  return m;
}

/**
 * Final tie-breaks after the RFC's elimination steps (the ones that make the order total): lowest router ID
 * (or ORIGINATOR_ID), shorter CLUSTER_LIST, lowest peer address, and as a last resort the source name so two
 * local sources without addresses still order deterministically.
 */
export function compareTieBreak(a: Path, b: Path): number {
  return (
    routerIdOf(a) - routerIdOf(b) ||
    a.attrs.clusterList.length - b.attrs.clusterList.length ||
    compareAddr(a.peer.address, b.peer.address) ||
    (a.source < b.source ? -1 : a.source > b.source ? 1 : 0)
  );
}

function compareAddr(a: IP | null, b: IP | null): number {
  if (a === b) return 0;
  if (a === null) return -1; // local sources (no address) first
  if (b === null) return 1;
  return compareIP(a, b);
}

/** Which tie-break field separated a from b (a < b). */
function tieBreakStep(a: Path, b: Path): DecidingStep {
  if (routerIdOf(a) !== routerIdOf(b)) return 'routerId';
  if (a.attrs.clusterList.length !== b.attrs.clusterList.length) return 'clusterList';
  if (compareAddr(a.peer.address, b.peer.address) !== 0) return 'peerAddress';
  return 'source';
}

/** Select the best path and the multipath set. Returns undefined for no candidates. */
export function selectBest<P extends Path>(paths: readonly P[], opts: BestPathOptions = {}): Selection<P> | undefined {
  const total = paths.length;
  if (total === 0) return undefined;
  if (total === 1) return { best: paths[0], multipath: [paths[0]], decidedBy: 'only' };
  const c = paths.slice() as Path[];
  let n = total;
  // The first step that leaves one candidate is the deciding one (once n is 1 every later step keeps it).
  let decidedBy: DecidingStep | undefined;

  // Routes this host originates (its blocks, static routes) beat anything learned.
  n = keepType(c, n, 'local', null);
  if (decidedBy === undefined && n === 1) decidedBy = 'local';
  // a) highest LOCAL_PREF (the degree of preference; import policy may set it on eBGP routes).
  n = keepMin(c, n, K_LOCAL_PREF);
  if (decidedBy === undefined && n === 1) decidedBy = 'localPref';
  // a) shortest AS_PATH (an AS_SET counts 1, confederation segments 0).
  n = keepMin(c, n, K_AS_PATH);
  if (decidedBy === undefined && n === 1) decidedBy = 'asPathLength';
  // b) lowest ORIGIN.
  n = keepMin(c, n, K_ORIGIN);
  if (decidedBy === undefined && n === 1) decidedBy = 'origin';
  // c) lowest MED, only among paths from the same neighbour AS (eliminate inside each group, keep the survivors).
  n = opts.alwaysCompareMed ? keepMin(c, n, K_MED) : keepMinMedPerAs(c, n);
  if (decidedBy === undefined && n === 1) decidedBy = 'med';
  // d) eBGP-learned over iBGP-learned.
  n = keepType(c, n, 'ebgp', 'ibgp');
  if (decidedBy === undefined && n === 1) decidedBy = 'ebgp';
  // e) lowest interior cost to the NEXT_HOP: skipped. This RIB has no IGP or next-hop resolution (next hops are
  //    on-link ToRs / reflectors), so all candidates are equal here. Paths still equal now are ECMP-equal.

  // f) and the usual extensions: router ID / ORIGINATOR_ID, CLUSTER_LIST length, peer address; then source name.
  c.length = n;
  if (n > 1) c.sort(compareTieBreak);
  if (decidedBy === undefined) decidedBy = tieBreakStep(c[0], c[1]);
  const max = Math.max(1, opts.maxPaths ?? 1);
  if (c.length > max) c.length = max;
  return { best: c[0] as P, multipath: c as P[], decidedBy };
}
