// The RIB's path store: the registered sources, every source's path per prefix (its Adj-RIB-In, with the import
// policy's verdict) in the per-family tables, and best-path selection, which keeps each prefix's list best first.
// Its own file: this is the ingest path; the change feed (change-feed.ts) and the facade (rib.ts) build on it.
import { type Prefix, ipEquals } from '../net/ip.ts';
import { type PathAttrs } from './attrs.ts';
import { AttrInterner, defaultInterner } from './interner.ts';
import { selectBest, type BestPathOptions, type Path, type PeerInfo } from './bestpath.ts';
import type { PrefixList } from './prefixlist.ts';
import { Table } from './table.ts';
import { BEST, EntryPool, MULTI, STALE } from './entry-pool.ts';
import type { ImportPolicy, RibOptions, SourceCounts, SourceOptions } from './types.ts';

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

interface SourceState {
  name: string;
  peer: PeerInfo;
  policy: ImportPolicy | undefined;
  counts: SourceCounts;
  /** Of counts.received, the IPv6 routes (max-prefix limits are per family). */
  received6: number;
}

/**
 * Sources, their paths per prefix and best-path selection: the layer of the RIB that ingest runs through. The change
 * feed (change-feed.ts) is built on it and hears of every change through capture(); Rib (rib.ts) is the class to use.
 */
export abstract class PathStore {
  readonly interner: AttrInterner;
  protected readonly maxPaths: number;
  private readonly bestOpts: BestPathOptions;
  protected readonly tables: [Table, Table];
  protected readonly e = new EntryPool();

  protected readonly sourceIdx = new Map<string, number>();
  private lastSrcName: string | null = null;
  private lastSrcIdx = NONE;
  protected readonly sources: (SourceState | undefined)[] = [];
  protected freeSources: number[] = [];
  protected retiredSources: number[] = []; // freed during a batch; reusable after the flush

  // Scratch for selection (grown as needed, never shrunk).
  private readonly cands: Candidate[] = [];
  private readonly pool: Candidate[] = [];
  private listScratch = new Int32Array(16);

  constructor(opts: RibOptions) {
    this.interner = opts.interner ?? defaultInterner;
    this.bestOpts = { ...opts.bestPath };
    this.maxPaths = Math.max(1, opts.bestPath?.maxPaths ?? 1);
    this.tables = [new Table(4, opts.trie), new Table(6, opts.trie)];
  }

  /** Called before record `r` changes: the change feed notes its best path before the batch's first change. */
  protected abstract capture(fi: number, r: number, t: Table): void;

  /** Changes waiting for the next flush (prefixes touched in this batch). */
  abstract get pendingCount(): number;

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
    if (this.pendingCount > 0) this.retiredSources.push(s);
    else this.freeSources.push(s);
  }

  /** Whether `name` is a registered source (a map lookup: the status view asks for every peer). */
  hasSource(name: string): boolean {
    return this.sourceIdx.has(name);
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

  protected srcIndex(name: string): number {
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
    if (n > 1) t.touchList(words, lens, n);
    for (let i = 0; i < n; i++) {
      let eid = effId;
      if (eid !== NONE && accept !== undefined && !accept(list.prefix(i))) {
        eid = NONE;
        rejected++;
      }
      // As int32 (| 0): a word of 128.0.0.0 or above read from the Uint32Array is not a small integer, and the first
      // one made V8 deoptimise this loop and the hashing it inlines.
      const r = fi === 0
        ? t.findOrAddWords(words[i] | 0, 0, 0, 0, lens[i])
        : t.findOrAddWords(words[4 * i] | 0, words[4 * i + 1] | 0, words[4 * i + 2] | 0, words[4 * i + 3] | 0, lens[i]);
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
      t.setHead(r, E.allocPath(s, effId !== NONE ? BEST | MULTI : 0, rawId, effId));
      const c = st.counts;
      c.received++;
      st.received6 += fi;
      if (effId !== NONE) {
        c.accepted++;
        c.best++;
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

  protected entryOf(head: number, s: number): number {
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

  // ---- a record's paths -------------------------------------------------------------------------------------

  protected hasBest(t: Table, r: number): boolean {
    const h = t.head(r);
    return h !== NONE && (this.e.flags(h) & BEST) !== 0;
  }

  protected multipathOf(t: Table, r: number): Path[] {
    const out: Path[] = [];
    if (!this.hasBest(t, r)) return out;
    for (let e = t.head(r); e !== NONE && this.e.flags(e) & MULTI; e = this.e.next(e)) out.push(this.pathOf(e));
    return out;
  }

  protected pathOf(e: number): Path {
    const E = this.e;
    const st = this.sources[E.src(e)]!;
    return { source: st.name, attrs: this.interner.get(E.eff(e)), peer: st.peer, stale: (E.flags(e) & STALE) !== 0 };
  }
}

function samePeer(a: PeerInfo, b: PeerInfo): boolean {
  return (
    a.type === b.type && a.routerId === b.routerId && a.asn === b.asn &&
    (a.address === b.address || (a.address !== null && b.address !== null && ipEquals(a.address, b.address)))
  );
}
