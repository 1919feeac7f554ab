// The routing tables: Adj-RIB-In per source, the Loc-RIB with best path and multipath per prefix, Adj-RIB-Out per
// peer, and a batched change feed of best-path changes.
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
import { type Family, IP, Prefix, ipEquals } from '../net/ip.ts';
import { AttrInterner, defaultInterner, type PathAttrs } from './attrs.ts';
import { selectBest, type BestPathOptions, type Path, type PeerInfo } from './bestpath.ts';
import type { PrefixList } from './prefixlist.ts';
import { Table } from './table.ts';
import { BEST, EntryPool, MULTI, STALE } from './entry-pool.ts';
import { AdjRibOut, exportBatch, exportList, exportTable, type ExportHost } from './adj-rib-out.ts';
import type { ExportPolicy, ExportUpdate, ImportPolicy, RibChange, RibOptions, SourceCounts, SourceOptions } from './types.ts';

export { AdjRibOut } from './adj-rib-out.ts';
export type { ExportPolicy, ExportUpdate, ImportPolicy, RibChange, RibOptions, SourceCounts, SourceOptions } from './types.ts';

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

const NONE = -1;
const MAX_SOURCES = 0xffff;

// A reusable Path used as a best-path candidate, so selection allocates no path objects.
class Candidate implements Path {
  source = '';
  attrs!: PathAttrs;
  peer!: PeerInfo;
  stale = false;
  entry = NONE;
}

/**
 * The records touched since the last flush, with their best path before the first touch: typed arrays, no object
 * per prefix (a table load touches a million). The effective attribute ids named here are retained until the
 * flush, so an id cannot be recycled for other content while the batch compares against it.
 */
class PendingLog {
  keys = new Int32Array(1024); // record * 2 + family index
  beforeSrc = new Int32Array(1024); // source of the best path before, NONE when there was none
  beforeEff = new Int32Array(1024); // its effective attribute id
  /** Full [source, attrs id, ...] of the multipath set before, when it had more than one path. */
  readonly multi = new Map<number, number[]>();
  n = 0;

  push(key: number, src: number, eff: number): number {
    if (this.n === this.keys.length) {
      const grow = (a: Int32Array) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.keys = grow(this.keys);
      this.beforeSrc = grow(this.beforeSrc);
      this.beforeEff = grow(this.beforeEff);
    }
    const i = this.n++;
    this.keys[i] = key;
    this.beforeSrc[i] = src;
    this.beforeEff[i] = eff;
    return i;
  }
}

const CHANGE_TYPES = ['add', 'replace', 'withdraw'] as const;
const NO_EMPTIES = new Int32Array(0);
const ADD = 0;
const REPLACE = 1;
const WITHDRAW = 2;

/** What a change batch reads from its RIB (closures made once per Rib, so the batch needs no private access). */
interface BatchView {
  prefix(key: number): Prefix;
  sourceName(index: number): string;
  /** The best source of a record now (null when it has no best). */
  currentSource(key: number): string | null;
  /** A counter of RIB changes, to tell whether the RIB moved since a batch was made. */
  mutations(): number;
  change(key: number, type: RibChange['type'], prefix: Prefix): RibChange;
}

/**
 * One flush's best-path changes. Changes are materialised (Prefix and Path objects) only when read, so a
 * subscriber that needs few of them — an export to the very peer that sent the routes — costs no objects. Read it
 * inside the callback: afterwards the RIB has moved on.
 */
export class RibChangeBatch implements Iterable<RibChange> {
  /** @param keys record keys, @param types change types (0 add, 1 replace, 2 withdraw) */
  constructor(
    private readonly view: BatchView,
    private readonly keys: Int32Array,
    private readonly types: Uint8Array,
    private readonly sources: Int32Array,
    readonly length: number,
  ) {
    this.mutations = view.mutations();
  }

  private readonly mutations: number;
  // Objects already made, shared by every reader of the batch (100 peers exporting one batch made 100 copies of
  // each change before): valid while the RIB has not moved since they were made.
  private made: (RibChange | undefined)[] | null = null;
  private prefixes: (Prefix | undefined)[] | null = null;
  private madeAt = -1;

  /** Change `i` as an object (the same object for every reader while the RIB has not moved; do not modify it). */
  at(i: number): RibChange {
    this.checkMade();
    let ch = this.made![i];
    if (ch === undefined) ch = this.made![i] = this.view.change(this.keys[i], CHANGE_TYPES[this.types[i]], this.prefixAt(i));
    return ch;
  }

  typeAt(i: number): RibChange['type'] {
    return CHANGE_TYPES[this.types[i]];
  }

  /** The record key of change i (record * 2 + family index), for the Adj-RIB-Out. */
  keyAt(i: number): number {
    return this.keys[i];
  }

  prefixAt(i: number): Prefix {
    // Change i is about one prefix whatever the RIB does later: made once, read from the record while it is kept.
    this.prefixes ??= new Array<Prefix | undefined>(this.length);
    let p = this.prefixes[i];
    if (p === undefined) p = this.prefixes[i] = this.view.prefix(this.keys[i]);
    return p;
  }

  private checkMade(): void {
    const m = this.view.mutations();
    if (this.made === null || m !== this.madeAt) {
      this.made = new Array<RibChange | undefined>(this.length);
      this.madeAt = m;
    }
  }

  /** The source of the new best path; null for a withdrawal. No objects made. */
  sourceAt(i: number): string | null {
    // As decided at the flush, unless a subscriber has changed the RIB since: then as at(i) would read it.
    if (this.view.mutations() !== this.mutations) return this.view.currentSource(this.keys[i]);
    return this.types[i] === WITHDRAW ? null : this.view.sourceName(this.sources[i]);
  }

  *[Symbol.iterator](): IterableIterator<RibChange> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }
}

interface SourceState {
  name: string;
  peer: PeerInfo;
  policy: ImportPolicy | undefined;
  counts: SourceCounts;
  /** Of counts.received, the IPv6 routes (max-prefix limits are per family). */
  received6: number;
}

// ---- the RIB ------------------------------------------------------------------------------------------------

export class Rib {
  readonly interner: AttrInterner;
  private readonly maxPaths: number;
  private readonly bestOpts: BestPathOptions;
  private readonly schedule: ((flush: () => void) => void) | undefined;
  private readonly tables: [Table, Table];
  private readonly e = new EntryPool();

  private readonly sourceIdx = new Map<string, number>();
  private lastSrcName: string | null = null;
  private lastSrcIdx = NONE;
  private readonly sources: (SourceState | undefined)[] = [];
  private freeSources: number[] = [];
  private retiredSources: number[] = []; // freed during a batch; reusable after the flush

  private readonly subscribers = new Set<(batch: RibChangeBatch) => void>();
  private log = new PendingLog();
  private spareLog: PendingLog | null = new PendingLog();
  private emptyScratch = new Int32Array(1024);
  private scheduled = false;
  private mutationCount = 0; // best-path-relevant changes seen by capture(), for RibChangeBatch.sourceAt
  private readonly view: BatchView = {
    prefix: (key) => this.tables[key & 1].sharedPrefix(key >>> 1),
    sourceName: (index) => this.sources[index]!.name,
    currentSource: (key) => {
      const t = this.tables[key & 1];
      const r = key >>> 1;
      if (!t.isLive(r)) return null;
      const h = t.head(r);
      return h === NONE || !(this.e.flags(h) & BEST) ? null : this.sources[this.e.src(h)]!.name;
    },
    mutations: () => this.mutationCount,
    change: (key, type, prefix) => {
      const t = this.tables[key & 1];
      const r = key >>> 1;
      const ch: RibChange = { type, prefix };
      if (type !== 'withdraw') {
        const mp = this.multipathOf(t, r);
        ch.best = mp[0];
        if (this.maxPaths > 1) ch.multipath = mp;
      }
      return ch;
    },
  };

  private readonly adjOut = new Map<string, AdjRibOut>();

  // Scratch for selection (grown as needed, never shrunk).
  private readonly cands: Candidate[] = [];
  private readonly pool: Candidate[] = [];
  private listScratch = new Int32Array(16);

  constructor(opts: RibOptions = {}) {
    this.interner = opts.interner ?? defaultInterner;
    this.bestOpts = { ...opts.bestPath };
    this.maxPaths = Math.max(1, opts.bestPath?.maxPaths ?? 1);
    this.schedule = opts.schedule;
    this.tables = [new Table(4, opts.trie), new Table(6, opts.trie)];
    Object.assign(this.host, { interner: this.interner, maxPaths: this.maxPaths });
  }

  // ---- sources ----------------------------------------------------------------------------------------------

  /** Register a source (a peer, or a local one like 'ipam'/'static'). Re-adding keeps routes and updates info. */
  addSource(name: string, peer: PeerInfo, opts: SourceOptions = {}): void {
    const s = this.sourceIdx.get(name);
    if (s !== undefined) {
      const st = this.sources[s]!;
      if (st.counts.received > 0 && !samePeer(st.peer, peer)) {
        // Selection results depend on peer info; changing it under held routes would leave stale decisions.
        throw new Error(`source ${name} has routes; drop them before changing its peer info`);
      }
      st.peer = peer;
      st.policy = opts.importPolicy;
      return;
    }
    let idx = this.freeSources.pop();
    if (idx === undefined) {
      if (this.sources.length >= MAX_SOURCES) throw new Error(`too many sources (max ${MAX_SOURCES})`);
      idx = this.sources.length;
    }
    this.sources[idx] = { name, peer, policy: opts.importPolicy, counts: { received: 0, accepted: 0, best: 0, stale: 0 }, received6: 0 };
    this.sourceIdx.set(name, idx);
  }

  /** Drop a source's routes and forget it. */
  removeSource(name: string): void {
    const s = this.sourceIdx.get(name);
    if (s === undefined) return;
    this.dropSource(name);
    this.sourceIdx.delete(name);
    if (this.lastSrcName === name) this.lastSrcName = null;
    this.sources[s] = undefined;
    // An index still named in a pending batch must not be reused before that batch is flushed.
    if (this.log.n > 0) this.retiredSources.push(s);
    else this.freeSources.push(s);
  }

  /** Names of the registered sources. */
  sourceNames(): string[] {
    return [...this.sourceIdx.keys()];
  }

  peerInfo(name: string): PeerInfo | undefined {
    const s = this.sourceIdx.get(name);
    return s === undefined ? undefined : this.sources[s]!.peer;
  }

  /** Replace a source's import policy; call reimport() to apply it to routes already held. */
  setImportPolicy(name: string, policy: ImportPolicy | undefined): void {
    this.src(name).policy = policy;
  }

  counts(name: string): SourceCounts {
    return { ...this.src(name).counts };
  }

  /** Routes held from the source (Adj-RIB-In) per family. */
  receivedByFamily(name: string): { ipv4: number; ipv6: number } {
    const st = this.src(name);
    return { ipv4: st.counts.received - st.received6, ipv6: st.received6 };
  }

  private srcIndex(name: string): number {
    // The same source many times in a row is the ingest pattern (one peer's table).
    if (name === this.lastSrcName) return this.lastSrcIdx;
    const s = this.sourceIdx.get(name);
    if (s === undefined) throw new Error(`unknown RIB source ${JSON.stringify(name)}`);
    this.lastSrcName = name;
    this.lastSrcIdx = s;
    return s;
  }

  private src(name: string): SourceState {
    return this.sources[this.srcIndex(name)]!;
  }

  // ---- updates ----------------------------------------------------------------------------------------------

  /**
   * A route from `source`. The import policy (the source's, unless `effective` is given: the caller's own
   * post-policy attributes, or null for rejected) decides the candidate; the received attributes are kept.
   * Re-sending the same route is a no-op (besides clearing a stale mark).
   */
  update(source: string, prefix: Prefix, attrs: PathAttrs, effective?: PathAttrs | null): void {
    const s = this.srcIndex(source);
    const st = this.sources[s]!;
    const eff = effective !== undefined ? effective : st.policy ? st.policy(prefix, attrs, source) : attrs;
    // Intern before touching the table, so a bad record cannot leave an empty prefix behind.
    const rawId = this.interner.internId(attrs);
    const effId = eff === null ? NONE : eff === attrs ? (this.interner.retainId(rawId), rawId) : this.interner.internId(eff);
    const fi = prefix.family === 4 ? 0 : 1;
    this.put(s, st, fi, this.tables[fi].findOrAdd(prefix), rawId, effId);
  }

  /**
   * Every prefix of `list` from `source` with one attribute set (an UPDATE's NLRI): the ingest path. `effective`
   * is the post-policy attribute set for all of them (null: all rejected), `accept` an optional per-prefix filter
   * (false: rejected). The attribute sets are interned once for the whole list, and no Prefix object is made
   * unless `accept` needs one.
   */
  updateList(source: string, list: PrefixList, attrs: PathAttrs, effective: PathAttrs | null, accept?: (p: Prefix) => boolean): void {
    const n = list.count;
    if (n === 0) return;
    const s = this.srcIndex(source);
    const st = this.sources[s]!;
    const I = this.interner;
    const rawId = I.internId(attrs);
    const effId = effective === null ? NONE : effective === attrs ? rawId : I.internId(effective);
    // One reference per prefix: n on the raw set, n on the effective one (minus the ones acquire already took).
    if (n > 1) I.retainIdN(rawId, n - 1);
    // (internId took one on a distinct effective object even when its content, and so its id, is the raw set's.)
    if (effId !== NONE) I.retainIdN(effId, effective === attrs ? n : n - 1);
    let rejected = 0;
    const fi = list.family === 4 ? 0 : 1;
    const t = this.tables[fi];
    const words = list.words;
    const lens = list.lens;
    for (let i = 0; i < n; i++) {
      let eid = effId;
      if (eid !== NONE && accept !== undefined && !accept(list.prefix(i))) {
        eid = NONE;
        rejected++;
      }
      const r = fi === 0
        ? t.findOrAddWords(words[i], 0, 0, 0, lens[i])
        : t.findOrAddWords(words[4 * i], words[4 * i + 1], words[4 * i + 2], words[4 * i + 3], lens[i]);
      this.put(s, st, fi, r, rawId, eid);
    }
    for (let i = 0; i < rejected; i++) I.releaseId(effId);
  }

  /** Store a path of source `s` for record `r`; the references on rawId and effId are the caller's, handed over. */
  private put(s: number, st: SourceState, fi: number, r: number, rawId: number, effId: number): void {
    const t = this.tables[fi];
    const E = this.e;
    const head = t.head(r);
    if (head === NONE) {
      // A prefix with no paths yet (a table load): the new path is the list, and the best when it is a candidate.
      this.capture(fi, r, t);
      const e = E.alloc(s);
      t.setHead(r, e);
      E.setRaw(e, rawId);
      E.setEff(e, effId);
      st.counts.received++;
      st.received6 += fi;
      if (effId !== NONE) {
        E.setFlags(e, BEST | MULTI);
        st.counts.accepted++;
        st.counts.best++;
      }
      return;
    }
    let e = this.entryOf(head, s);
    if (e !== NONE && E.raw(e) === rawId && E.eff(e) === effId) {
      // Unchanged content: drop the references just taken, refresh the stale mark.
      this.interner.releaseId(rawId);
      if (effId !== NONE) this.interner.releaseId(effId);
      if (E.flags(e) & STALE) {
        E.setFlags(e, E.flags(e) & ~STALE);
        st.counts.stale--;
      }
      return;
    }
    this.capture(fi, r, t);
    if (e === NONE) {
      e = E.alloc(s);
      // New entries go after the head so an existing best stays first until reselection.
      const h = t.head(r);
      if (h === NONE) {
        E.setNext(e, NONE);
        t.setHead(r, e);
      } else {
        E.setNext(e, E.next(h));
        E.setNext(h, e);
      }
      st.counts.received++;
      st.received6 += fi;
    } else {
      this.interner.releaseId(E.raw(e));
      if (E.eff(e) !== NONE) {
        this.interner.releaseId(E.eff(e));
        st.counts.accepted--;
      }
      if (E.flags(e) & STALE) st.counts.stale--;
      E.setFlags(e, E.flags(e) & ~STALE);
    }
    E.setRaw(e, rawId);
    E.setEff(e, effId);
    if (effId !== NONE) st.counts.accepted++;
    this.reselect(t, r);
  }

  /** Withdraw `source`'s route for `prefix`. Returns false when it had none. */
  withdraw(source: string, prefix: Prefix): boolean {
    const s = this.srcIndex(source);
    const fi = prefix.family === 4 ? 0 : 1;
    const t = this.tables[fi];
    const r = t.find(prefix);
    if (r === NONE) return false;
    const e = this.entryOf(t.head(r), s);
    if (e === NONE) return false;
    this.capture(fi, r, t);
    this.unlink(t, r, e);
    this.reselect(t, r);
    this.dropIfEmpty(fi, t, r);
    return true;
  }

  /** Remove every route of a source (its session went down). Returns how many were removed. */
  dropSource(source: string): number {
    return this.removeWhere(this.srcIndex(source), 0);
  }

  /** Graceful restart (RFC 4724): mark every route of the source stale; they stay usable. */
  markStale(source: string): number {
    const s = this.srcIndex(source);
    const E = this.e;
    let n = 0;
    for (const t of this.tables) {
      for (let r = 0, top = t.highWater; r < top; r++) {
        if (!t.isLive(r)) continue;
        for (let e = t.head(r); e !== NONE; e = E.next(e)) {
          if (E.src(e) === s && !(E.flags(e) & STALE)) {
            E.setFlags(e, E.flags(e) | (STALE));
            n++;
          }
        }
      }
    }
    this.sources[s]!.counts.stale += n;
    return n;
  }

  /** End of graceful restart: remove the source's routes that were not refreshed since markStale. */
  sweepStale(source: string): number {
    return this.removeWhere(this.srcIndex(source), STALE);
  }

  /** Re-run the source's import policy over its Adj-RIB-In (after a policy change; no route refresh needed). */
  reimport(source: string): number {
    const s = this.srcIndex(source);
    const st = this.sources[s]!;
    const E = this.e;
    let changed = 0;
    for (let fi = 0; fi < 2; fi++) {
      const t = this.tables[fi];
      for (let r = 0, top = t.highWater; r < top; r++) {
        if (!t.isLive(r)) continue;
        const e = this.entryOf(t.head(r), s);
        if (e === NONE) continue;
        const raw = this.interner.get(E.raw(e));
        const prefix = t.prefix(r);
        const eff = st.policy ? st.policy(prefix, raw, source) : raw;
        const effId = eff === null ? NONE : this.interner.internId(eff);
        if (effId === E.eff(e)) {
          if (effId !== NONE) this.interner.releaseId(effId);
          continue;
        }
        this.capture(fi, r, t);
        if (E.eff(e) !== NONE) {
          this.interner.releaseId(E.eff(e));
          st.counts.accepted--;
        }
        E.setEff(e, effId);
        if (effId !== NONE) st.counts.accepted++;
        this.reselect(t, r);
        changed++;
      }
    }
    return changed;
  }

  private removeWhere(s: number, needFlags: number): number {
    const E = this.e;
    let n = 0;
    for (let fi = 0; fi < 2; fi++) {
      const t = this.tables[fi];
      // Walk the record arrays, not the trie: records are removed from the trie as they empty.
      for (let r = 0, top = t.highWater; r < top; r++) {
        if (!t.isLive(r)) continue;
        const e = this.entryOf(t.head(r), s);
        if (e === NONE || (E.flags(e) & needFlags) !== needFlags) continue;
        this.capture(fi, r, t);
        this.unlink(t, r, e);
        this.reselect(t, r);
        this.dropIfEmpty(fi, t, r);
        n++;
      }
    }
    return n;
  }

  private entryOf(head: number, s: number): number {
    const E = this.e;
    for (let e = head; e !== NONE; e = E.next(e)) if (E.src(e) === s) return e;
    return NONE;
  }

  private unlink(t: Table, r: number, e: number): void {
    const E = this.e;
    if (t.head(r) === e) t.setHead(r, E.next(e));
    else {
      let p = t.head(r);
      while (E.next(p) !== e) p = E.next(p);
      E.setNext(p, E.next(e));
    }
    const st = this.sources[E.src(e)]!;
    const c = st.counts;
    c.received--;
    if (t === this.tables[1]) st.received6--;
    if (E.eff(e) !== NONE) {
      c.accepted--;
      this.interner.releaseId(E.eff(e));
    }
    if (E.flags(e) & STALE) c.stale--;
    if (E.flags(e) & BEST) c.best--;
    this.interner.releaseId(E.raw(e));
    E.setFlags(e, 0);
    E.free(e);
  }

  private dropIfEmpty(fi: number, t: Table, r: number): void {
    // A prefix waiting in the batch keeps its record until flush, so later changes in the batch coalesce with it.
    if (t.unused(r)) t.remove(r);
  }

  /** Re-run selection for a record and reorder its list: best, rest of multipath, others. */
  private reselect(t: Table, r: number): void {
    const E = this.e;
    let n = 0;
    let m = 0;
    let list = this.listScratch;
    const h = t.head(r);
    if (h !== NONE && E.flags(h) & BEST) this.sources[E.src(h)]!.counts.best--;
    if (h !== NONE && E.next(h) === NONE) {
      // One path (most prefixes of a table learned from one peer): it is the best when it is a candidate at all.
      if (E.eff(h) === NONE) E.setFlags(h, E.flags(h) & ~(BEST | MULTI));
      else {
        E.setFlags(h, E.flags(h) | BEST | MULTI);
        this.sources[E.src(h)]!.counts.best++;
      }
      return;
    }
    for (let e = h; e !== NONE; e = E.next(e)) {
      if (m === list.length) {
        const bigger = new Int32Array(m * 2);
        bigger.set(list);
        list = this.listScratch = bigger;
      }
      list[m++] = e;
      E.setFlags(e, E.flags(e) & ~(BEST | MULTI));
      if (E.eff(e) === NONE) continue;
      const c = (this.pool[n] ??= new Candidate());
      const st = this.sources[E.src(e)]!;
      c.source = st.name;
      c.peer = st.peer;
      c.attrs = this.interner.get(E.eff(e));
      c.stale = (E.flags(e) & STALE) !== 0;
      c.entry = e;
      this.cands[n++] = c;
    }
    if (n === 0) return; // no candidate: no best; the list order does not matter
    this.cands.length = n;
    const sel = selectBest(this.cands, this.bestOpts)!;
    // Relink: selected entries first in selection order, then the rest in their old order.
    const mp = sel.multipath;
    let prev = mp[0].entry;
    t.setHead(r, prev);
    E.setFlags(prev, E.flags(prev) | BEST | MULTI);
    for (let i = 1; i < mp.length; i++) {
      const e = mp[i].entry;
      E.setFlags(e, E.flags(e) | MULTI);
      E.setNext(prev, e);
      prev = e;
    }
    for (let i = 0; i < m; i++) {
      const e = list[i];
      if (E.flags(e) & MULTI) continue;
      E.setNext(prev, e);
      prev = e;
    }
    E.setNext(prev, NONE);
    this.sources[E.src(sel.best.entry)]!.counts.best++;
  }

  // ---- change feed ------------------------------------------------------------------------------------------

  /**
   * Receive batches of best-path changes. Pending changes are flushed first, so a snapshot read right after
   * subscribing (entries()) plus the batches that follow describe the table exactly. Returns an unsubscribe.
   */
  subscribe(fn: (batch: RibChangeBatch) => void): () => void {
    this.flush();
    this.subscribers.add(fn);
    return () => {
      this.subscribers.delete(fn);
      if (this.subscribers.size === 0) this.flush();
    };
  }

  /** Deliver the net effect of the changes since the last flush to the subscribers. Returns the number of changes. */
  flush(): number {
    this.scheduled = false; // whoever calls it: a change from here on schedules the next flush
    const log = this.log;
    const n = log.n;
    if (n === 0) return 0;
    // Changes a subscriber makes while reading this batch start the next one.
    this.log = this.spareLog ?? new PendingLog();
    this.spareLog = null;
    const E = this.e;
    const keys = new Int32Array(n);
    const types = new Uint8Array(n);
    const srcs = new Int32Array(n);
    // Records left without paths (removed after delivery). Taken from the scratch while in use: a subscriber may
    // flush again from its callback.
    const empties = this.emptyScratch.length >= n ? this.emptyScratch : new Int32Array(n);
    this.emptyScratch = NO_EMPTIES;
    let c = 0;
    let ne = 0;
    for (let i = 0; i < n; i++) {
      const key = log.keys[i];
      const t = this.tables[key & 1];
      const r = key >>> 1;
      t.setPending(r, false);
      const h = t.head(r);
      if (h === NONE) empties[ne++] = key;
      const hasBest = h !== NONE && (E.flags(h) & BEST) !== 0;
      const before = log.beforeSrc[i];
      let type = -1;
      if (before === NONE) {
        if (hasBest) type = ADD;
      } else if (!hasBest) {
        type = WITHDRAW;
      } else if (E.src(h) !== before || E.eff(h) !== log.beforeEff[i] || !this.sameMultipath(h, log.multi.get(i))) {
        type = REPLACE;
      }
      if (type < 0) continue;
      keys[c] = key;
      types[c] = type;
      srcs[c++] = hasBest ? E.src(h) : NONE;
    }
    for (const s of this.retiredSources) this.freeSources.push(s);
    this.retiredSources = [];
    this.flushing++; // records the subscribers' Adj-RIB-Outs let go are recycled after the batch, not under it
    try {
      if (c > 0 && this.subscribers.size > 0) {
        const batch = new RibChangeBatch(this.view, keys, types, srcs, c);
        for (const fn of [...this.subscribers]) fn(batch);
      }
    } finally {
      this.flushing--;
    }
    // Only now: withdrawn prefixes keep their records (and so their words) while the subscribers read the batch.
    for (let i = 0; i < n; i++) if (log.beforeSrc[i] !== NONE) this.interner.releaseId(log.beforeEff[i]);
    for (let j = 0; j < ne; j++) {
      const t = this.tables[empties[j] & 1];
      const r = empties[j] >>> 1;
      if (t.unused(r)) t.remove(r);
    }
    if (this.flushing === 0) this.freeDeferred();
    this.emptyScratch = empties;
    for (const sig of log.multi.values()) for (let j = 3; j < sig.length; j += 2) this.interner.releaseId(sig[j]);
    log.multi.clear();
    log.n = 0;
    this.spareLog = log;
    return c;
  }

  /** Changes waiting for the next flush (prefixes touched in this batch). */
  get pendingCount(): number {
    return this.log.n;
  }

  private capture(fi: number, r: number, t: Table): void {
    this.mutationCount++;
    if (this.subscribers.size === 0 || t.isPending(r)) return;
    t.setPending(r, true);
    const E = this.e;
    const h = t.head(r);
    const key = r * 2 + fi;
    if (h === NONE || !(E.flags(h) & BEST)) this.log.push(key, NONE, NONE);
    else {
      const i = this.log.push(key, E.src(h), E.eff(h));
      this.interner.retainId(E.eff(h));
      const second = E.next(h);
      if (second !== NONE && E.flags(second) & MULTI) {
        // A multipath set: remember all of it (the head's pair included, for a plain comparison later).
        const sig = [E.src(h), E.eff(h)];
        for (let e = second; e !== NONE && E.flags(e) & MULTI; e = E.next(e)) {
          sig.push(E.src(e), E.eff(e));
          this.interner.retainId(E.eff(e));
        }
        this.log.multi.set(i, sig);
      }
    }
    if (this.log.n === 1 && this.schedule && !this.scheduled) {
      this.scheduled = true;
      this.schedule(() => this.flush());
    }
  }

  /** Whether the multipath set after the best entry `h` is the one recorded before (`before`: full sig or none). */
  private sameMultipath(h: number, before: number[] | undefined): boolean {
    const E = this.e;
    let j = 2;
    for (let e = E.next(h); e !== NONE && E.flags(e) & MULTI; e = E.next(e)) {
      if (before === undefined || j >= before.length || before[j] !== E.src(e) || before[j + 1] !== E.eff(e)) return false;
      j += 2;
    }
    return before === undefined || j === before.length;
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

  private hasBest(t: Table, r: number): boolean {
    const h = t.head(r);
    return h !== NONE && (this.e.flags(h) & BEST) !== 0;
  }

  private bestOf(t: Table, r: number): Path | undefined {
    return this.hasBest(t, r) ? this.pathOf(t.head(r)) : undefined;
  }

  private multipathOf(t: Table, r: number): Path[] {
    const out: Path[] = [];
    if (!this.hasBest(t, r)) return out;
    for (let e = t.head(r); e !== NONE && this.e.flags(e) & MULTI; e = this.e.next(e)) out.push(this.pathOf(e));
    return out;
  }

  private routeOf(t: Table, r: number): RibRoute {
    const multipath = this.multipathOf(t, r);
    return { prefix: t.prefix(r), best: multipath[0], multipath };
  }

  private pathOf(e: number): Path {
    const E = this.e;
    const st = this.sources[E.src(e)]!;
    return { source: st.name, attrs: this.interner.get(E.eff(e)), peer: st.peer, stale: (E.flags(e) & STALE) !== 0 };
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

  /** Recycle records an Adj-RIB-Out let go of during a flush, once the batch is done. */
  private freeDeferred(): void {
    const d = this.deferred;
    for (let i = 0; i < d.length; i++) {
      const t = this.tables[d[i] & 1];
      if (t.unused(d[i] >>> 1)) t.remove(d[i] >>> 1);
    }
    d.length = 0;
  }

  private flushing = 0;
  private readonly deferred: number[] = []; // record keys let go during a flush
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

function samePeer(a: PeerInfo, b: PeerInfo): boolean {
  return (
    a.type === b.type && a.routerId === b.routerId && a.asn === b.asn &&
    (a.address === b.address || (a.address !== null && b.address !== null && ipEquals(a.address, b.address)))
  );
}
