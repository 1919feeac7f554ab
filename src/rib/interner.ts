// The attribute interner: hash-consing of attribute sets with reference counts and small integer ids, which the
// RIB's tables hold instead of pointers. Its own file: the records (attrs.ts) are what routes carry; this is how
// the RIB keeps one of each content, as rows rather than objects.
import type { IP } from '../net/ip.ts';
import {
  AttrError, AttrRecord, commEq, ipEq, makeAttrs, pathEq, rareEq,
  type AsPath, type AsPathFacts, type AttrsInit, type Origin, type PathAttrs, type RareAttrs,
} from './attrs.ts';

const EMPTY_SLOT = -1;
const TOMBSTONE = -2;

// A held set's row, ROW slots of a segment of AttrInterner.segs: its fields as a record has them, without the record.
const ROW = 9;
const R_HASH = 0;
const R_BITS = 1; // origin | MED present << 2 | LOCAL_PREF present << 3
const R_MED = 2; // int32
const R_LP = 3; // int32
const R_PATH = 4;
const R_FACTS = 5;
const R_NH = 6;
const R_COMM = 7;
const R_RARE = 8;
const MED_SET = 4;
const LP_SET = 8;
// Rows live in segments of ROWS_PER_SEG: a segment is made once, over V8's large-object size (so it is allocated
// where it stays, never copied by the young-generation collector), and never grown: one array grown by appends
// was copied at every growth, 25 MB at the end of a full table.
const SEG_SHIFT = 12;
const ROWS_PER_SEG = 1 << SEG_SHIFT;

const bitsOf = (a: AttrRecord): number => a.origin | (a.med === undefined ? 0 : MED_SET) | (a.localPref === undefined ? 0 : LP_SET);

/**
 * Hash-consing table for attribute sets with reference counts. intern() returns the one shared record for the
 * content and takes a reference; release() drops one, and the set leaves the table at zero. Each held set has a
 * small integer id (reused after release) so that compact stores hold a uint32 instead of an object pointer.
 *
 * A held set is a row in an array segment (its fields as a record has them: a few numbers and pointers to shared
 * paths, next hops and lists), and its record is made when first asked for (get, intern). A full table's ~350k sets are
 * interned by id from records that the decoder has just built and nobody keeps: stored as records, each one
 * survived two young-generation collections, copied each time, and a table load's GC was mostly that copying.
 * The index is typed arrays: an open-addressing table (linear probing on the hash, load at most 1/2) of ids.
 */
export class AttrInterner {
  private segs: unknown[][] = [];
  // Records made so far, by id (undefined until asked for): the one instance per content while the set is held.
  private byId: (AttrRecord | undefined)[] = [];
  private refs = new Int32Array(256);
  private freeIds: number[] = [];
  // The index: slot i is index[2i] (an id, EMPTY_SLOT or TOMBSTONE) and index[2i+1] (that set's hash), side by
  // side so a probe costs one cache miss, not two (a table arriving in random order misses on every probe).
  private index = new Int32Array(1024).fill(EMPTY_SLOT);
  private mask = 511; // slots - 1
  private used = 0; // live ids plus tombstones in the index
  private count = 0;

  /** Number of distinct sets held. */
  get size(): number {
    return this.count;
  }

  /** The canonical record for `a`'s content, taking one reference. A new content's record is `a` itself. */
  intern(a: PathAttrs | AttrsInit): PathAttrs {
    return this.get(this.acquire(a, true));
  }

  /**
   * The id of `a`'s content, taking one reference. `a` is not kept (the RIB holds ids; get() makes the record
   * when one is wanted), unless `keep`: then it becomes the canonical record of a content not held before.
   */
  internId(a: PathAttrs | AttrsInit, keep = false): number {
    return this.acquire(a, keep);
  }

  /** The canonical record equal to `a` if held, without taking a reference. */
  lookup(a: PathAttrs): PathAttrs | undefined {
    const id = this.find(a);
    return id === EMPTY_SLOT ? undefined : this.get(id);
  }

  /** Drop one reference taken by intern/internId/retain. */
  release(a: PathAttrs): void {
    const id = this.find(a);
    if (id === EMPTY_SLOT || this.byId[id] !== a) throw new AttrError('release of attributes that are not interned here');
    this.drop(id);
  }

  releaseId(id: number): void {
    this.live(id, 'release');
    this.drop(id);
  }

  /** Take one more reference on a held set by id. */
  retainId(id: number): void {
    this.live(id, 'retain');
    this.refs[id]++;
  }

  /** Take `n` more references on a held set by id (one per prefix of an UPDATE). */
  retainIdN(id: number, n: number): void {
    this.live(id, 'retain');
    this.refs[id] += n;
  }

  /** The record of this id (which must be live), made from its row the first time. */
  get(id: number): PathAttrs {
    const a = id >= 0 && id < this.byId.length ? this.byId[id] : undefined;
    if (a !== undefined) return a;
    this.live(id, 'unknown');
    return this.materialise(id);
  }

  /** The id of a held canonical record, or -1. */
  idOf(a: PathAttrs): number {
    const id = this.find(a);
    return id !== EMPTY_SLOT && this.byId[id] === a ? id : -1;
  }

  /** References currently held on `a`'s content (0 when not held). */
  refCount(a: PathAttrs): number {
    const id = this.find(a);
    return id === EMPTY_SLOT ? 0 : this.refs[id];
  }

  /** `a` as a held set's record: frozen (adoptAttrs leaves the decoder's records unfrozen until then). */
  private keep(a: AttrRecord): AttrRecord {
    return Object.isFrozen(a) ? a : Object.freeze(a);
  }

  private live(id: number, what: string): void {
    if (!(id >= 0 && id < this.byId.length && this.refs[id] > 0)) {
      throw new AttrError(what === 'unknown' ? `unknown attribute id ${id}` : `${what} of unknown attribute id ${id}`);
    }
  }

  private materialise(id: number): AttrRecord {
    const w = this.segs[id >>> SEG_SHIFT];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    const bits = w[o + R_BITS] as number;
    const rec = Object.freeze(new AttrRecord(
      w[o + R_HASH] as number,
      (bits & 3) as Origin,
      w[o + R_PATH] as AsPath,
      w[o + R_NH] as IP | null,
      bits & MED_SET ? (w[o + R_MED] as number) >>> 0 : undefined,
      bits & LP_SET ? (w[o + R_LP] as number) >>> 0 : undefined,
      w[o + R_COMM] as number | readonly number[],
      w[o + R_RARE] as RareAttrs,
      w[o + R_FACTS] as AsPathFacts,
    ));
    this.byId[id] = rec;
    return rec;
  }

  /** Whether held set `id` has `a`'s content (its hash already matched): the row has it, record made or not. */
  private holds(id: number, a: AttrRecord): boolean {
    const w = this.segs[id >>> SEG_SHIFT];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    return w[o + R_BITS] === bitsOf(a) && w[o + R_MED] === ((a.med ?? 0) | 0) && w[o + R_LP] === ((a.localPref ?? 0) | 0) &&
      pathEq(w[o + R_PATH] as AsPath, a.asPath) && ipEq(w[o + R_NH] as IP | null, a.nextHop) &&
      commEq(w[o + R_COMM] as number | readonly number[], a.comm) && rareEq(w[o + R_RARE] as RareAttrs, a.rareAttrs);
  }

  /** The id of a set equal to `a`, or -1. */
  private find(input: PathAttrs): number {
    const a = input instanceof AttrRecord ? input : (makeAttrs(input) as AttrRecord);
    const index = this.index;
    const mask = this.mask;
    const h = a.hash;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const id = index[2 * i];
      if (id === EMPTY_SLOT) return EMPTY_SLOT;
      if (id === TOMBSTONE || index[2 * i + 1] !== h) continue;
      if (this.holds(id, a)) return id;
    }
  }

  private acquire(input: PathAttrs | AttrsInit, keep: boolean): number {
    // A record (makeAttrs, adoptAttrs) is normalised and carries its hash; anything else is normalised first.
    const a = input instanceof AttrRecord ? input : (makeAttrs(input) as AttrRecord);
    const index = this.index;
    const mask = this.mask;
    const h = a.hash;
    let free = -1;
    let i = h & mask;
    for (; ; i = (i + 1) & mask) {
      const id = index[2 * i];
      if (id === EMPTY_SLOT) break;
      if (id === TOMBSTONE) {
        if (free < 0) free = i;
        continue;
      }
      if (index[2 * i + 1] !== h) continue;
      if (this.holds(id, a)) {
        this.refs[id]++;
        // A caller that keeps its record (intern) gives the content its record when none was made yet.
        if (keep && this.byId[id] === undefined) this.byId[id] = this.keep(a);
        return id;
      }
    }
    const id = this.freeIds.length > 0 ? this.freeIds.pop()! : this.byId.length;
    if (id >= this.refs.length) {
      const bigger = new Int32Array(this.refs.length * 2);
      bigger.set(this.refs);
      this.refs = bigger;
    }
    const k = id >>> SEG_SHIFT;
    if (k === this.segs.length) this.segs.push(new Array<unknown>(ROWS_PER_SEG * ROW));
    const w = this.segs[k];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    w[o + R_HASH] = h;
    w[o + R_BITS] = bitsOf(a);
    w[o + R_MED] = (a.med ?? 0) | 0;
    w[o + R_LP] = (a.localPref ?? 0) | 0;
    w[o + R_PATH] = a.asPath;
    w[o + R_FACTS] = a.facts;
    w[o + R_NH] = a.nextHop;
    w[o + R_COMM] = a.comm;
    w[o + R_RARE] = a.rareAttrs;
    this.byId[id] = keep ? this.keep(a) : undefined;
    this.refs[id] = 1;
    this.count++;
    const slots = mask + 1;
    if (free >= 0) {
      index[2 * free] = id;
      index[2 * free + 1] = h;
    } else {
      index[2 * i] = id;
      index[2 * i + 1] = h;
      if (++this.used * 2 > slots) this.rehash(this.count * 4 > slots ? slots * 2 : slots);
    }
    return id;
  }

  private drop(id: number): void {
    if (--this.refs[id] > 0) return;
    const w = this.segs[id >>> SEG_SHIFT];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    const h = w[o + R_HASH] as number;
    const index = this.index;
    const mask = this.mask;
    let i = h & mask;
    while (index[2 * i] !== id) i = (i + 1) & mask;
    // A tombstone keeps later entries of the probe chain reachable; the next rehash clears them.
    index[2 * i] = TOMBSTONE;
    // The row's pointers go, so a freed id keeps nothing alive.
    w[o + R_PATH] = w[o + R_FACTS] = w[o + R_NH] = w[o + R_COMM] = w[o + R_RARE] = undefined;
    this.byId[id] = undefined;
    this.freeIds.push(id);
    this.count--;
  }

  /** Rebuild the index with `size` slots (a power of two), dropping tombstones. */
  private rehash(size: number): void {
    const index = new Int32Array(2 * size).fill(EMPTY_SLOT);
    const mask = size - 1;
    const old = this.index;
    for (let j = 0; j < old.length; j += 2) {
      const id = old[j];
      if (id < 0) continue;
      const h = old[j + 1];
      let i = h & mask;
      while (index[2 * i] !== EMPTY_SLOT) i = (i + 1) & mask;
      index[2 * i] = id;
      index[2 * i + 1] = h;
    }
    this.index = index;
    this.mask = mask;
    this.used = this.count;
  }
}

/** The process-wide table that BGP sessions and the RIB share unless told otherwise. */
export const defaultInterner = new AttrInterner();

/** Intern into the process-wide table (takes a reference). */
export function intern(a: PathAttrs | AttrsInit): PathAttrs {
  return defaultInterner.intern(a);
}

/** Release a reference taken with intern(). */
export function release(a: PathAttrs): void {
  defaultInterner.release(a);
}
