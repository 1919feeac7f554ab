// The types the RIB's parts and its Adj-RIB-Outs all speak (src/rib/rib.ts re-exports them): what an import and an
// export policy are, one best-path change, what is to be sent to one peer, the RIB's options and a source's counts.
import type { Prefix } from '../net/ip.ts';
import type { PathAttrs } from './attrs.ts';
import type { AttrInterner } from './interner.ts';
import type { BestPathOptions, Path } from './bestpath.ts';
import type { TrieOptions } from './trie.ts';

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

export interface RibOptions {
  /** Attribute table shared with the BGP codec; defaults to the process-wide one. */
  interner?: AttrInterner;
  /** maxPaths (ECMP set size, default 1) and alwaysCompareMed. */
  bestPath?: BestPathOptions;
  /** Called once when a batch gets its first change; it must arrange for `flush` to run later. */
  schedule?: (flush: () => void) => void;
  /**
   * Called when a batch reaches FULL_BATCH changes (a table loading): `flush` should run on the next turn rather
   * than when `schedule`'s pacing would have it. Without it, a batch waits for `schedule` whatever its size.
   */
  scheduleFull?: (flush: () => void) => void;
  /** Options for the Loc-RIB tries (e.g. a smaller rootBits for small tables and tests). */
  trie?: TrieOptions;
}

export interface SourceOptions {
  /** Applied to every received route; null rejects it (kept in Adj-RIB-In, not a candidate). */
  importPolicy?: ImportPolicy;
}

export interface SourceCounts {
  /** Routes held from the source (Adj-RIB-In). */
  received: number;
  /** Of those, accepted by import policy (candidates). */
  accepted: number;
  /** Of those, currently selected as best. */
  best: number;
  /** Of those, marked stale (graceful restart) and not yet refreshed. */
  stale: number;
}
