// The types the RIB and its Adj-RIB-Outs both speak (src/rib/rib.ts re-exports them): what an import and an export
// policy are, one best-path change, and what is to be sent to one peer.
import type { Prefix } from '../net/ip.ts';
import type { PathAttrs } from './attrs.ts';
import type { Path } from './bestpath.ts';

export type ImportPolicy = (prefix: Prefix, attrs: PathAttrs, source: string) => PathAttrs | null;
/** `multipath` is valid during the call only (with one path it is an array the RIB reuses). */
export type ExportPolicy = (prefix: Prefix, best: Path, multipath: readonly Path[]) => PathAttrs | null;

/**
 * The net change of one prefix's best path (or multipath set) over a batch. Stale marks (graceful restart) and
 * changes among non-selected paths produce no event.
 */
export interface RibChange {
  type: 'add' | 'replace' | 'withdraw';
  prefix: Prefix;
  /** The new best path; absent on withdraw. */
  best?: Path;
  /** The ECMP set (best first); only when maxPaths > 1 and not a withdraw. */
  multipath?: Path[];
}

/** Routes to send to one peer: announcements grouped by attribute set (one UPDATE each), and withdrawals. */
export interface ExportUpdate {
  announce: Map<PathAttrs, Prefix[]>;
  withdraw: Prefix[];
}
