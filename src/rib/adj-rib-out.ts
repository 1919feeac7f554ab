// The Adj-RIB-Out (what was advertised to each peer) and the export functions that keep it: a batch of best-path
// changes, or the whole table, run through a peer's export policy, and only the difference goes out.
//
// An Adj-RIB-Out is a per-family array indexed by the RIB's own record id (the Loc-RIB record of the prefix), holding
// the interned attribute id sent plus one, 0 when nothing was (so a fresh segment needs no fill). A segment is a
// Uint16Array while every id in it fits (a route reflector's client holds a few thousand routes with a few thousand
// attribute sets: 2 octets a route), and becomes an Int32Array the first time one does not (a full table). A route
// export is then an array read and write, where a per-peer trie cost ~160 KB per peer and a trie walk per route.
// The id stays the prefix's while any Adj-RIB-Out holds it: every entry pins its record (a count per record in the
// RIB), and a record is recycled only once it has no paths, is out of the change batch and no Adj-RIB-Out pins it.
import type { Family, Prefix } from '../net/ip.ts';
import type { PathAttrs } from './attrs.ts';
import type { AttrInterner } from './interner.ts';
import type { Path } from './bestpath.ts';
import type { ExportPolicy, ExportUpdate, RibChange } from './types.ts';

const NONE = -1;
// 1,024 records per segment (2 KB narrow, 4 KB wide), made on first write: a route reflector's client session
// holding 2,000 routes pays 4 KB; a full table still takes only ~1,000 segments.
const SEG_SHIFT = 10;
// Largest id + 1 a narrow segment holds.
const NARROW_MAX = 0xffff;
type Segment = Uint16Array | Int32Array;
const SEG = 1 << SEG_SHIFT;
const SEG_MASK = SEG - 1;

const famIndex = (f: Family): number => (f === 4 ? 0 : 1);

/** What the Adj-RIB-Out and the exports read from the RIB: records by family index (0 IPv4, 1 IPv6). */
export interface RecordHost {
  readonly interner: AttrInterner;
  /** The record of `p`, or NONE; with `create`, an empty record is made when absent. */
  recordOf(p: Prefix, create: boolean): number;
  /** The prefix of a live record. */
  prefixOf(fi: number, r: number): Prefix;
  /** One more Adj-RIB-Out holds the record (it is not recycled while held). */
  pin(fi: number, r: number): void;
  /** One fewer holds it; a record left without paths and holders is recycled (after the batch, during a flush). */
  unpin(fi: number, r: number): void;
}

/** The RIB side of a full export: the table walked in prefix order, best paths as objects. */
export interface ExportHost extends RecordHost {
  readonly maxPaths: number;
  /** The source index of a record's best path, NONE when it has none (or the record is free). */
  bestSource(fi: number, r: number): number;
  /** The source index of a source name, NONE when unknown. */
  sourceIndex(name: string): number;
  /** Call fn(fi, r) for every record with a best path (IPv4 first, in record order). */
  forEachBest(fn: (fi: number, r: number) => void): void;
  /** The best path of a record as an object; consecutive records with the same best path may share one. */
  bestPath(fi: number, r: number): Path;
  multipath(fi: number, r: number): Path[];
}

/** The parts of a RibChangeBatch an export reads (no objects made for routes it does not send). */
export interface ChangeBatchView {
  readonly length: number;
  keyAt(i: number): number;
  sourceAt(i: number): string | null;
  prefixAt(i: number): Prefix;
  at(i: number): RibChange;
}

const SAME = 0;
const ANNOUNCE = 1;
const WITHDRAW = 2;

/** What we advertised to one peer: record -> interned attributes, so export sends only differences. */
export class AdjRibOut {
  private readonly segs: [(Segment | undefined)[], (Segment | undefined)[]] = [[], []];
  private readonly counts = [0, 0];
  // The last policy output and its interned id (a reference of our own keeps the id from being recycled): the
  // export policy returns the same object for the same input, so most routes skip the interner's hash probe.
  private lastIn: PathAttrs | null = null;
  private lastId = NONE;
  private setId = NONE; // the id the last setAt wrote


  constructor(private readonly host: RecordHost) {}

  get size(): number {
    return this.counts[0] + this.counts[1];
  }

  /** Routes held of a family index. */
  countOf(fi: number): number {
    return this.counts[fi];
  }

  get(prefix: Prefix): PathAttrs | undefined {
    const fi = famIndex(prefix.family);
    if (this.counts[fi] === 0) return undefined;
    const r = this.host.recordOf(prefix, false);
    const id = r === NONE ? NONE : this.idAt(fi, r);
    return id === NONE ? undefined : this.host.interner.get(id);
  }

  /** The attribute id held for record `r`, NONE when none. */
  idAt(fi: number, r: number): number {
    // Bounds first: a read past the end is undefined all the same, but optimised code that meets one is thrown
    // away (V8's "out of bounds" deopt), and a peer's first export meets one for every record it never held.
    const segs = this.segs[fi];
    const k = r >>> SEG_SHIFT;
    if (k >= segs.length) return NONE;
    const s = segs[k];
    return s === undefined ? NONE : s[r & SEG_MASK] - 1;
  }

  /**
   * Record that `attrs` (null: nothing) is now what the peer should have for `prefix`. Returns 'announce' or
   * 'withdraw' when that differs from what it has, null when unchanged.
   */
  set(prefix: Prefix, attrs: PathAttrs | null): 'announce' | 'withdraw' | null {
    // A prefix the Loc-RIB does not hold (a caller's own list) gets an empty record, pinned while held.
    const r = this.host.recordOf(prefix, attrs !== null);
    if (r === NONE) return null;
    const res = this.setAt(famIndex(prefix.family), r, attrs);
    return res === ANNOUNCE ? 'announce' : res === WITHDRAW ? 'withdraw' : null;
  }

  /** set() by record; returns SAME, ANNOUNCE or WITHDRAW. */
  setAt(fi: number, r: number, attrs: PathAttrs | null): number {
    const segs = this.segs[fi];
    const k = r >>> SEG_SHIFT;
    let s = k < segs.length ? segs[k] : undefined; // in bounds: see idAt
    const old = s === undefined ? NONE : s[r & SEG_MASK] - 1;
    const interner = this.host.interner;
    if (attrs === null) {
      if (old === NONE) return SAME;
      s![r & SEG_MASK] = 0;
      interner.releaseId(old);
      this.counts[fi]--;
      this.host.unpin(fi, r);
      return WITHDRAW;
    }
    let id: number;
    if (attrs === this.lastIn) {
      id = this.lastId;
      interner.retainId(id);
    } else {
      id = interner.internId(attrs, true);
      if (this.lastIn !== null) interner.releaseId(this.lastId);
      interner.retainId(id);
      this.lastIn = attrs;
      this.lastId = id;
    }
    if (id === old) {
      interner.releaseId(id);
      return SAME;
    }
    if (s === undefined) {
      while (segs.length <= k) segs.push(undefined);
      s = segs[k] = id < NARROW_MAX ? new Uint16Array(SEG) : new Int32Array(SEG);
    } else if (id >= NARROW_MAX && s.BYTES_PER_ELEMENT === 2) {
      const wide = new Int32Array(SEG);
      wide.set(s);
      s = segs[k] = wide;
    }
    s[r & SEG_MASK] = id + 1;
    this.setId = id;
    if (old !== NONE) interner.releaseId(old);
    else {
      this.counts[fi]++;
      this.host.pin(fi, r);
    }
    return ANNOUNCE;
  }

  /** set() and add the result to an ExportUpdate. */
  applyTo(u: ExportUpdate, prefix: Prefix, attrs: PathAttrs | null): void {
    const res = this.set(prefix, attrs);
    if (res !== null) this.record(u, res === 'announce' ? ANNOUNCE : WITHDRAW, prefix);
  }

  /** Add the outcome of the last setAt (about `prefix`) to an ExportUpdate. */
  record(u: ExportUpdate, res: number, prefix: Prefix): void {
    if (res === WITHDRAW) u.withdraw.push(prefix);
    else if (res === ANNOUNCE) {
      const canon = this.host.interner.get(this.setId);
      const list = u.announce.get(canon);
      if (list) list.push(prefix);
      else u.announce.set(canon, [prefix]);
    }
  }

  /** Call fn(fi, r, id) for every route held. */
  forEachHeld(fn: (fi: number, r: number, id: number) => void): void {
    for (let fi = 0; fi < 2; fi++) {
      if (this.counts[fi] === 0) continue;
      const segs = this.segs[fi];
      for (let k = 0; k < segs.length; k++) {
        const s = segs[k];
        if (s === undefined) continue;
        for (let j = 0; j < SEG; j++) if (s[j] !== 0) fn(fi, (k << SEG_SHIFT) | j, s[j] - 1);
      }
    }
  }

  /** Everything advertised (IPv4 first, then IPv6, in record order). */
  *entries(): IterableIterator<{ prefix: Prefix; attrs: PathAttrs }> {
    const held: number[] = [];
    this.forEachHeld((fi, r, id) => held.push(fi, r, id));
    for (let i = 0; i < held.length; i += 3) {
      yield { prefix: this.host.prefixOf(held[i], held[i + 1]), attrs: this.host.interner.get(held[i + 2]) };
    }
  }

  /** Forget everything (releasing the attribute references and the records). */
  clear(): void {
    const interner = this.host.interner;
    this.forEachHeld((fi, r, id) => {
      interner.releaseId(id);
      this.host.unpin(fi, r);
    });
    for (const segs of this.segs) segs.length = 0;
    this.counts[0] = this.counts[1] = 0;
    if (this.lastIn !== null) interner.releaseId(this.lastId);
    this.lastIn = null;
    this.lastId = NONE;
  }

  /** Bytes of the typed arrays. */
  bytes(): number {
    let n = 0;
    for (const segs of this.segs) for (const s of segs) if (s) n += s.byteLength;
    return n;
  }
}

// The multipath argument of an export policy when there is one path: one array reused for every call (a policy
// reads it during the call only), where a fresh [best] per route per peer was most of an export's garbage.
const ONE: Path[] = [];
function oneOf(best: Path): readonly Path[] {
  ONE[0] = best;
  return ONE;
}

/**
 * A batch of best-path changes through a peer's export policy and Adj-RIB-Out. A route whose best path came from
 * `peer` itself is never sent back to it, decided from the source name alone (a table learned from the peer costs
 * no change objects).
 */
export function exportBatch(out: AdjRibOut, peer: string, changes: ChangeBatchView, policy: ExportPolicy): ExportUpdate {
  const u: ExportUpdate = { announce: new Map(), withdraw: [] };
  for (let i = 0; i < changes.length; i++) {
    const key = changes.keyAt(i);
    const fi = key & 1;
    const r = key >>> 1;
    let attrs: PathAttrs | null = null;
    if (changes.sourceAt(i) === peer) {
      if (out.countOf(fi) === 0 || out.idAt(fi, r) === NONE) continue;
    } else {
      const ch = changes.at(i);
      if (ch.best) attrs = policy(ch.prefix, ch.best, ch.multipath ?? oneOf(ch.best));
      else if (out.idAt(fi, r) === NONE) continue;
    }
    // The prefix first: a withdrawal may let the record go (outside a flush, at once).
    const prefix = changes.prefixAt(i);
    const res = out.setAt(fi, r, attrs);
    if (res !== SAME) out.record(u, res, prefix);
  }
  return u;
}

/** Changes as objects (a test's list, or a batch spread into one) through the policy and Adj-RIB-Out. */
export function exportList(out: AdjRibOut, peer: string, changes: Iterable<RibChange>, policy: ExportPolicy): ExportUpdate {
  const u: ExportUpdate = { announce: new Map(), withdraw: [] };
  for (const ch of changes) {
    const attrs = ch.best && ch.best.source !== peer ? policy(ch.prefix, ch.best, ch.multipath ?? [ch.best]) : null;
    out.applyTo(u, ch.prefix, attrs);
  }
  return u;
}

/**
 * Full export to a peer (session up, route refresh, policy change): everything that differs from its Adj-RIB-Out,
 * the policy asked once per route (in record order). Routes whose best path came from `peer` are not sent back to it.
 */
export function exportTable(host: ExportHost, out: AdjRibOut, peer: string, policy: ExportPolicy): ExportUpdate {
  const u: ExportUpdate = { announce: new Map(), withdraw: [] };
  const self = host.sourceIndex(peer);
  const hadRoutes = out.size > 0; // a session that just came up has none: nothing it holds can be gone
  const multi = host.maxPaths > 1;
  host.forEachBest((fi, r) => {
    let attrs: PathAttrs | null = null;
    if (host.bestSource(fi, r) === self) {
      if (!hadRoutes || out.idAt(fi, r) === NONE) return;
    } else {
      const prefix = host.prefixOf(fi, r);
      if (multi) {
        const mp = host.multipath(fi, r);
        attrs = policy(prefix, mp[0], mp);
      } else {
        const best = host.bestPath(fi, r);
        attrs = policy(prefix, best, oneOf(best));
      }
      const res = out.setAt(fi, r, attrs);
      if (res !== SAME) out.record(u, res, prefix);
      return;
    }
    const prefix = host.prefixOf(fi, r);
    if (out.setAt(fi, r, null) === WITHDRAW) u.withdraw.push(prefix);
  });
  if (hadRoutes) {
    // Held routes whose prefix has no best path any more (their records are pinned, so still the same prefix).
    const gone: number[] = [];
    out.forEachHeld((fi, r) => {
      if (host.bestSource(fi, r) === NONE) gone.push(fi, r);
    });
    for (let i = 0; i < gone.length; i += 2) {
      const prefix = host.prefixOf(gone[i], gone[i + 1]);
      if (out.setAt(gone[i], gone[i + 1], null) === WITHDRAW) u.withdraw.push(prefix);
    }
  }
  return u;
}
