// BGP best-path selection (RFC 4271 9.1.2.2 plus the usual practice around it).
//
// Selection is done as the RFC describes it: a sequence of elimination steps over the *set* of candidates, not a
// pairwise comparator. MED is only comparable between paths from the same neighbour AS, which makes any pairwise
// "compare" non-transitive (A<B by MED, B<C by router ID, C<A by router ID is possible), so a sort would give an
// answer that depends on input order. Every step here is a function of the candidate set, and the last step is a
// total order, so the result never depends on the order the paths are given in.
import { IP, compareIP } from '../net/ip.ts';
import { asPathLength, neighbourAs, type PathAttrs } from './attrs.ts';

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

const localPrefOf = (p: Path): number => p.attrs.localPref ?? DEFAULT_LOCAL_PREF;
// RFC 4271 9.1.2.2 c: a missing MED is treated as the lowest possible value.
const medOf = (p: Path): number => p.attrs.med ?? 0;
// RFC 4456 9: the ORIGINATOR_ID stands in for the router ID of a reflected route.
const routerIdOf = (p: Path): number => p.attrs.originatorId ?? p.peer.routerId;

/** Keep the candidates whose key is the minimum. */
function keepMin<P extends Path>(c: P[], key: (p: P) => number): P[] {
  let min = Infinity;
  for (const p of c) {
    const k = key(p);
    if (k < min) min = k;
  }
  // Fast path: nothing eliminated means the same array comes back, so callers can compare lengths cheaply.
  let all = true;
  for (const p of c) if (key(p) !== min) { all = false; break; }
  return all ? c : c.filter((p) => key(p) === min);
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
  if (paths.length === 0) return undefined;
  if (paths.length === 1) return { best: paths[0], multipath: [paths[0]], decidedBy: 'only' };
  let decidedBy: DecidingStep | undefined;
  let c = paths.slice();
  const step = (name: DecidingStep, next: P[]): void => {
    if (decidedBy === undefined && next.length === 1) decidedBy = name;
    c = next;
  };

  // Routes this host originates (its blocks, static routes) beat anything learned.
  if (c.some((p) => p.peer.type === 'local')) step('local', c.filter((p) => p.peer.type === 'local'));
  // a) highest LOCAL_PREF (degree of preference; eBGP routes get the default, which import policy may set).
  step('localPref', keepMin(c, (p) => -localPrefOf(p)));
  // a) shortest AS_PATH.
  step('asPathLength', keepMin(c, (p) => asPathLength(p.attrs.asPath)));
  // b) lowest ORIGIN.
  step('origin', keepMin(c, (p) => p.attrs.origin));
  // c) lowest MED, only among paths from the same neighbour AS: group, eliminate inside each group, keep survivors.
  step('med', opts.alwaysCompareMed ? keepMin(c, medOf) : medWithinGroups(c));
  // d) eBGP-learned over iBGP-learned.
  if (c.some((p) => p.peer.type === 'ebgp')) step('ebgp', c.filter((p) => p.peer.type !== 'ibgp'));
  // e) lowest interior cost to the NEXT_HOP: skipped. This RIB has no IGP or next-hop resolution (next hops are
  //    on-link ToRs / reflectors), so all candidates are equal here. Paths still equal now are ECMP-equal.
  const equal = c;

  // f) and the usual extensions: router ID / ORIGINATOR_ID, CLUSTER_LIST length, peer address; then source name.
  const ordered = equal.length === 1 ? equal : equal.slice().sort(compareTieBreak);
  const best = ordered[0];
  if (decidedBy === undefined) decidedBy = tieBreakStep(best, ordered[1]);
  const max = Math.max(1, opts.maxPaths ?? 1);
  return { best, multipath: ordered.slice(0, max), decidedBy };
}

function medWithinGroups<P extends Path>(c: P[]): P[] {
  if (c.length === 1) return c;
  const minByAs = new Map<number, number>();
  for (const p of c) {
    const as = neighbourAs(p.attrs.asPath);
    const m = medOf(p);
    const cur = minByAs.get(as);
    if (cur === undefined || m < cur) minByAs.set(as, m);
  }
  let all = true;
  for (const p of c) if (medOf(p) !== minByAs.get(neighbourAs(p.attrs.asPath))) { all = false; break; }
  return all ? c : c.filter((p) => medOf(p) === minByAs.get(neighbourAs(p.attrs.asPath)));
}
