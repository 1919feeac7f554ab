// The routing tables: Adj-RIB-In per source, the Loc-RIB with best path and multipath per prefix, Adj-RIB-Out per
// peer, and a batched change feed of best-path changes. This file is the facade: the Rib class with its queries
// and Adj-RIB-Outs. Below it are the change feed (change-feed.ts) and the path store (path-store.ts: sources,
// updates and best-path selection, over the path entries of entry-pool.ts); the shared types are in types.ts.
//
// Storage is built for a full Internet table (~1.3M prefixes x ~3 paths) in little memory:
//  - per family, a table of *records* (src/rib/table.ts; a record's index is stable for the prefix's life), found
//    through a hash index, with a radix trie for longest-prefix matches and ordered walks;
//  - a record holds the prefix's words and the head of a linked list of path entries;
//  - a path entry (src/rib/entry-pool.ts) is 16 bytes in typed arrays: source index, received (Adj-RIB-In)
//    attribute id, effective (post-import-policy) attribute id, next entry, flags. Attribute ids come from an
//    AttrInterner, so the few thousand distinct attribute sets are the only objects. Path objects are only built
//    for callers.
// The list is kept ordered: best first, then the rest of the multipath set, then the others.
//
// The change feed is pure: changes are collected per prefix (the state before the first change in the batch is
// remembered), and flush() delivers the net effect of the batch. A caller-supplied scheduler decides when flush
// runs (setImmediate, a microtask, or never and the caller flushes by hand).
import { type Family, IP, Prefix } from '../net/ip.ts';
import type { PathAttrs } from './attrs.ts';
import type { AttrInterner } from './interner.ts';
import type { Path } from './bestpath.ts';
import type { Table } from './table.ts';
import { STALE } from './entry-pool.ts';
import { ChangeFeed, RibChangeBatch } from './change-feed.ts';
import { AdjRibOut, exportBatch, exportList, exportTable, type ExportHost } from './adj-rib-out.ts';
import type { ExportPolicy, ExportUpdate, RibChange, RibOptions } from './types.ts';

export { AdjRibOut } from './adj-rib-out.ts';
export { RibChangeBatch } from './change-feed.ts';
export type { ExportPolicy, ExportUpdate, ImportPolicy, RibChange, RibOptions, SourceCounts, SourceOptions } from './types.ts';

const NONE = -1;

export interface RibRoute {
  prefix: Prefix;
  best: Path;
  multipath: Path[];
}

export interface AdjRibInEntry {
  prefix: Prefix;
  /** As received. */
  attrs: PathAttrs;
  /** After import policy; null when the policy rejected it. */
  effective: PathAttrs | null;
  stale: boolean;
}

/**
 * The RIB: sources and their routes (path-store.ts), the change feed (change-feed.ts), and here the queries and the
 * Adj-RIB-Outs. The one class the rest of the program uses.
 */
export class Rib extends ChangeFeed {
  private readonly adjOut = new Map<string, AdjRibOut>();

  constructor(opts: RibOptions = {}) {
    super(opts);
    Object.assign(this.host, { interner: this.interner, maxPaths: this.maxPaths });
  }

  // ---- queries ----------------------------------------------------------------------------------------------

  /** Number of prefixes with a best path. */
  get size(): number {
    let n = 0;
    for (const c of this.sources) if (c) n += c.counts.best;
    return n;
  }

  /** Number of prefixes held (with or without a usable path). */
  get prefixCount(): number {
    return this.tables[0].live + this.tables[1].live;
  }

  best(prefix: Prefix): Path | undefined {
    const t = this.table(prefix.family);
    const r = t.find(prefix);
    return r === NONE ? undefined : this.bestOf(t, r);
  }

  /** The ECMP set (best first); empty when there is no best. */
  multipath(prefix: Prefix): Path[] {
    const t = this.table(prefix.family);
    const r = t.find(prefix);
    return r === NONE ? [] : this.multipathOf(t, r);
  }

  /** All accepted candidate paths for a prefix, best first. */
  paths(prefix: Prefix): Path[] {
    const t = this.table(prefix.family);
    const r = t.find(prefix);
    const out: Path[] = [];
    if (r === NONE) return out;
    for (let e = t.head(r); e !== NONE; e = this.e.next(e)) if (this.e.eff(e) !== NONE) out.push(this.pathOf(e));
    return out;
  }

  /** Longest-prefix match over prefixes that have a best path. */
  lpm(ip: IP): RibRoute | undefined {
    const t = this.table(ip.family);
    const r = t.trie.lpmWords(ip.w0, ip.w1, ip.w2, ip.w3);
    if (r === NONE) return undefined;
    if (this.hasBest(t, r)) return this.routeOf(t, r);
    // The longest match holds only rejected paths (or is waiting for a flush): try the shorter covers.
    const covers = t.trie.covering(ip);
    for (let i = covers.length - 1; i >= 0; i--) if (this.hasBest(t, covers[i].value)) return this.routeOf(t, covers[i].value);
    return undefined;
  }

  /** Prefixes with a best path, in prefix order (IPv4 first). Do not modify the RIB while iterating. */
  *entries(family?: Family): IterableIterator<RibRoute> {
    for (const t of this.tables) {
      if (family !== undefined && t.family !== family) continue;
      for (const { value: r } of t.trie.entries()) if (this.hasBest(t, r)) yield this.routeOf(t, r);
    }
  }

  /** What a source sent (Adj-RIB-In), in prefix order. Do not modify the RIB while iterating. */
  *adjRibIn(source: string): IterableIterator<AdjRibInEntry> {
    const s = this.srcIndex(source);
    const E = this.e;
    for (const t of this.tables) {
      for (const { prefix, value: r } of t.trie.entries()) {
        const e = this.entryOf(t.head(r), s);
        if (e === NONE) continue;
        yield {
          prefix,
          attrs: this.interner.get(E.raw(e)),
          effective: E.eff(e) === NONE ? null : this.interner.get(E.eff(e)),
          stale: (E.flags(e) & STALE) !== 0,
        };
      }
    }
  }

  /** Bytes held in typed arrays (tries, records, path entries); excludes attribute objects. */
  memoryBytes(): number {
    const [t4, t6] = this.tables;
    return t4.trieBytes() + t6.trieBytes() + t4.recordBytes() + t6.recordBytes() + this.e.bytes();
  }

  /** Give back the tries' spare pool capacity (worth doing after a bulk load, e.g. at End-of-RIB). */
  compact(): void {
    for (const t of this.tables) t.trie.compact();
  }

  /** Typed-array bytes by part, for the status endpoint and benchmarks. */
  memoryStats(): { trie4: number; trie6: number; records4: number; records6: number; paths: number } {
    const [t4, t6] = this.tables;
    return {
      trie4: t4.trieBytes(),
      trie6: t6.trieBytes(),
      records4: t4.recordBytes(),
      records6: t6.recordBytes(),
      paths: this.e.bytes(),
    };
  }

  /** Path entries held (all sources). */
  get pathCount(): number {
    return this.e.live;
  }

  private table(f: Family): Table {
    return this.tables[f === 4 ? 0 : 1];
  }

  private bestOf(t: Table, r: number): Path | undefined {
    return this.hasBest(t, r) ? this.pathOf(t.head(r)) : undefined;
  }

  private routeOf(t: Table, r: number): RibRoute {
    const multipath = this.multipathOf(t, r);
    return { prefix: t.prefix(r), best: multipath[0], multipath };
  }

  // ---- Adj-RIB-Out (adj-rib-out.ts) -------------------------------------------------------------------------

  /** The Adj-RIB-Out of a peer (created on first use). */
  adjRibOut(peer: string): AdjRibOut {
    let a = this.adjOut.get(peer);
    if (!a) this.adjOut.set(peer, (a = new AdjRibOut(this.host)));
    return a;
  }

  /** Forget what was advertised to a peer (its session ended). */
  clearAdjRibOut(peer: string): void {
    this.adjOut.get(peer)?.clear();
    this.adjOut.delete(peer);
  }

  /**
   * Run a batch of changes through a peer's export policy and Adj-RIB-Out; returns only what differs from what
   * the peer already has. A route whose best path came from `peer` itself is never sent back to it (with a
   * RibChangeBatch, decided without building the change).
   */
  exportChanges(peer: string, changes: RibChangeBatch | Iterable<RibChange>, policy: ExportPolicy): ExportUpdate {
    const out = this.adjRibOut(peer);
    return changes instanceof RibChangeBatch ? exportBatch(out, peer, changes, policy) : exportList(out, peer, changes, policy);
  }

  /**
   * Full export to a peer (session up, route refresh): everything that differs from its Adj-RIB-Out. As in
   * exportChanges, routes whose best path came from `peer` are not sent back to it.
   */
  exportAll(peer: string, policy: ExportPolicy): ExportUpdate {
    return exportTable(this.host, this.adjRibOut(peer), peer, policy);
  }

  private lastPath: Path | null = null;
  private lastSrc = NONE;
  private lastEff = NONE;
  private lastFlags = 0;

  // What the Adj-RIB-Outs and the exports read: records, pins and best paths, without the RIB's internals.
  private readonly host: ExportHost = {
    interner: null as unknown as AttrInterner, // set in the constructor (field initialisers run before it)
    maxPaths: 1,
    recordOf: (p, create) => {
      const t = this.table(p.family);
      return create ? t.findOrAdd(p) : t.find(p);
    },
    prefixOf: (fi, r) => this.tables[fi].sharedPrefix(r),
    pin: (fi, r) => {
      this.tables[fi].pin(r, 1);
    },
    unpin: (fi, r) => {
      const t = this.tables[fi];
      if (t.pin(r, -1) !== 0 || !t.unused(r)) return;
      if (this.flushing > 0) this.deferred.push(r * 2 + fi);
      else t.remove(r);
    },
    bestSource: (fi, r) => {
      const t = this.tables[fi];
      return t.isLive(r) && this.hasBest(t, r) ? this.e.src(t.head(r)) : NONE;
    },
    sourceIndex: (name) => this.sourceIdx.get(name) ?? NONE,
    forEachBest: (fn) => {
      // The record arrays, not the trie: a trie walk scans the fixed root level (65,536 slots by default) whatever
      // the table holds, and every session that comes up walks it (100 peers: 14% of the bgperf CPU).
      this.lastPath = null;
      for (let fi = 0; fi < 2; fi++) {
        const t = this.tables[fi];
        for (let r = 0, top = t.highWater; r < top; r++) if (t.isLive(r) && this.hasBest(t, r)) fn(fi, r);
      }
      this.lastPath = null;
    },
    bestPath: (fi, r) => {
      // Consecutive routes with the same best path (one peer's UPDATE, one local aggregate run) share one object.
      const E = this.e;
      const h = this.tables[fi].head(r);
      const src = E.src(h);
      const eff = E.eff(h);
      const flags = E.flags(h) & STALE;
      if (this.lastPath === null || src !== this.lastSrc || eff !== this.lastEff || flags !== this.lastFlags) {
        this.lastPath = this.pathOf(h);
        this.lastSrc = src;
        this.lastEff = eff;
        this.lastFlags = flags;
      }
      return this.lastPath;
    },
    multipath: (fi, r) => this.multipathOf(this.tables[fi], r),
  };
}
