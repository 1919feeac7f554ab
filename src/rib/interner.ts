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
// An index slot: the id (low 24 bits) under 7 bits of its set's hash, so a probe reads a row only when the tags
// agree (the row has the whole hash). One Int32 per slot: half the index of an id and a hash side by side, which a
// full table's ~350k sets made 8 MB of memory that every probe misses in.
const SLOT_ID_BITS = 24;
const SLOT_ID_MASK = (1 << SLOT_ID_BITS) - 1;
const MAX_IDS = 1 << SLOT_ID_BITS;
const tagOf = (h: number): number => h >>> 25;
const slotOf = (h: number, id: number): number => (tagOf(h) << SLOT_ID_BITS) | id;

// A held set's row: its numbers in NUMS slots of an Int32Array segment (numSegs), its pointers in PTRS slots of an
// array segment (segs). Numbers kept in an array were boxed: a hash or a community of 2^30 and up is no small integer
// in V8, so every new set stored one or two heap numbers beside its row, each copied by the young-generation
// collector and then kept for good.
const NUMS = 5;
const N_HASH = 0;
const N_BITS = 1; // origin | MED present << 2 | LOCAL_PREF present << 3 | one community (a number) << 4
const N_MED = 2; // int32
const N_LP = 3; // int32
const N_COMM = 4; // the one community, as int32, when N_BITS says so
const ROW = 5;
const P_PATH = 0;
const P_FACTS = 1;
const P_NH = 2;
const P_COMM = 3; // the communities when they are a list (none: an empty list)
const P_RARE = 4;
const MED_SET = 4;
const LP_SET = 8;
const COMM_NUM = 16;
// Rows live in segments of ROWS_PER_SEG: a segment is made once, its pointer array over V8's large-object size
// (128 KiB: 8,192 rows of 5 compressed pointers are 160 KiB, so it is allocated where it stays, never copied by the
// young-generation collector), and never grown: one array grown by appends was copied at every growth, 25 MB at the
// end of a full table.
const SEG_SHIFT = 13;
const ROWS_PER_SEG = 1 << SEG_SHIFT;

const bitsOf = (a: AttrRecord): number =>
  a.origin | (a.med === undefined ? 0 : MED_SET) | (a.localPref === undefined ? 0 : LP_SET) | (typeof a.comm === 'number' ? COMM_NUM : 0);

/**
 * Hash-consing table for attribute sets with reference counts. intern() returns the one shared record for the
 * content and takes a reference; release() drops one, and the set leaves the table at zero. Each held set has a
 * small integer id (reused after release) so that compact stores hold a uint32 instead of an object pointer.
 *
 * A held set is a row in an array segment (its fields as a record has them: a few numbers and pointers to shared
 * paths, next hops and lists), and its record is made when first asked for (get, intern). A full table's ~350k sets are
 * interned by id from records that the decoder has just built and nobody keeps: stored as records, each one
 * survived two young-generation collections, copied each time, and a table load's GC was mostly that copying.
 * The index is a typed array: an open-addressing table (linear probing on the hash, load at most 1/2) of ids.
 */
export class AttrInterner {
  private segs: unknown[][] = [];
  private numSegs: Int32Array[] = [];
  // Records made so far, by id (undefined until asked for): the one instance per content while the set is held.
  private byId: (AttrRecord | undefined)[] = [];
  private refs = new Int32Array(256);
  private freeIds: number[] = [];
  // The index: one slot per Int32 (slotOf), EMPTY_SLOT or TOMBSTONE.
  private index = new Int32Array(1024).fill(EMPTY_SLOT);
  private mask = 1023; // slots - 1
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
    const v = this.numSegs[id >>> SEG_SHIFT];
    const n = (id & (ROWS_PER_SEG - 1)) * NUMS;
    const bits = v[n + N_BITS];
    const rec = Object.freeze(new AttrRecord(
      v[n + N_HASH],
      (bits & 3) as Origin,
      w[o + P_PATH] as AsPath,
      w[o + P_NH] as IP | null,
      bits & MED_SET ? v[n + N_MED] >>> 0 : undefined,
      bits & LP_SET ? v[n + N_LP] >>> 0 : undefined,
      bits & COMM_NUM ? v[n + N_COMM] : (w[o + P_COMM] as readonly number[]), // int32, as makeAttrs keeps it
      w[o + P_RARE] as RareAttrs,
      w[o + P_FACTS] as AsPathFacts,
    ));
    this.byId[id] = rec;
    return rec;
  }

  /** Whether held set `id` has `a`'s content: the row has it, record made or not. */
  private holds(id: number, a: AttrRecord): boolean {
    const v = this.numSegs[id >>> SEG_SHIFT];
    const n = (id & (ROWS_PER_SEG - 1)) * NUMS;
    const bits = v[n + N_BITS];
    if (v[n + N_HASH] !== a.hash || bits !== bitsOf(a) || v[n + N_MED] !== ((a.med ?? 0) | 0) || v[n + N_LP] !== ((a.localPref ?? 0) | 0)) return false;
    const w = this.segs[id >>> SEG_SHIFT];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    // (The bits agree, so both communities are a number or both a list.)
    return (bits & COMM_NUM ? v[n + N_COMM] === ((a.comm as number) | 0) : commEq(w[o + P_COMM] as readonly number[], a.comm)) &&
      pathEq(w[o + P_PATH] as AsPath, a.asPath) && ipEq(w[o + P_NH] as IP | null, a.nextHop) && rareEq(w[o + P_RARE] as RareAttrs, a.rareAttrs);
  }

  /** The id of a set equal to `a`, or -1. */
  private find(input: PathAttrs): number {
    const a = input instanceof AttrRecord ? input : (makeAttrs(input) as AttrRecord);
    const index = this.index;
    const mask = this.mask;
    const h = a.hash;
    const tag = tagOf(h);
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = index[i];
      if (v === EMPTY_SLOT) return EMPTY_SLOT;
      if (v >= 0 && v >>> SLOT_ID_BITS === tag && this.holds(v & SLOT_ID_MASK, a)) return v & SLOT_ID_MASK;
    }
  }

  private acquire(input: PathAttrs | AttrsInit, keep: boolean): number {
    // A record (makeAttrs, adoptAttrs) is normalised and carries its hash; anything else is normalised first.
    const a = input instanceof AttrRecord ? input : (makeAttrs(input) as AttrRecord);
    const index = this.index;
    const mask = this.mask;
    const h = a.hash;
    const tag = tagOf(h);
    let free = -1;
    let i = h & mask;
    for (; ; i = (i + 1) & mask) {
      const v = index[i];
      if (v === EMPTY_SLOT) break;
      if (v === TOMBSTONE) {
        if (free < 0) free = i;
        continue;
      }
      if (v >>> SLOT_ID_BITS !== tag) continue;
      const id = v & SLOT_ID_MASK;
      if (this.holds(id, a)) {
        this.refs[id]++;
        // A caller that keeps its record (intern) gives the content its record when none was made yet.
        if (keep && this.byId[id] === undefined) this.byId[id] = this.keep(a);
        return id;
      }
    }
    const id = this.freeIds.length > 0 ? this.freeIds.pop()! : this.byId.length;
    if (id >= MAX_IDS) throw new AttrError(`more than ${MAX_IDS} distinct attribute sets`);
    if (id >= this.refs.length) {
      const bigger = new Int32Array(this.refs.length * 2);
      bigger.set(this.refs);
      this.refs = bigger;
    }
    const k = id >>> SEG_SHIFT;
    if (k === this.segs.length) {
      this.segs.push(new Array<unknown>(ROWS_PER_SEG * ROW));
      this.numSegs.push(new Int32Array(ROWS_PER_SEG * NUMS));
    }
    const v = this.numSegs[k];
    const n = (id & (ROWS_PER_SEG - 1)) * NUMS;
    const bits = bitsOf(a);
    v[n + N_HASH] = h;
    v[n + N_BITS] = bits;
    v[n + N_MED] = (a.med ?? 0) | 0;
    v[n + N_LP] = (a.localPref ?? 0) | 0;
    v[n + N_COMM] = bits & COMM_NUM ? (a.comm as number) | 0 : 0;
    const w = this.segs[k];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    w[o + P_PATH] = a.asPath;
    w[o + P_FACTS] = a.facts;
    w[o + P_NH] = a.nextHop;
    w[o + P_COMM] = bits & COMM_NUM ? undefined : a.comm;
    w[o + P_RARE] = a.rareAttrs;
    this.byId[id] = keep ? this.keep(a) : undefined;
    this.refs[id] = 1;
    this.count++;
    const slots = mask + 1;
    if (free >= 0) {
      index[free] = slotOf(h, id);
    } else {
      index[i] = slotOf(h, id);
      if (++this.used * 2 > slots) this.rehash(this.count * 4 > slots ? slots * 2 : slots);
    }
    return id;
  }

  private drop(id: number): void {
    if (--this.refs[id] > 0) return;
    const w = this.segs[id >>> SEG_SHIFT];
    const o = (id & (ROWS_PER_SEG - 1)) * ROW;
    const h = this.numSegs[id >>> SEG_SHIFT][(id & (ROWS_PER_SEG - 1)) * NUMS + N_HASH];
    const index = this.index;
    const mask = this.mask;
    let i = h & mask;
    while (index[i] < 0 || (index[i] & SLOT_ID_MASK) !== id) i = (i + 1) & mask;
    // A tombstone keeps later entries of the probe chain reachable; the next rehash clears them.
    index[i] = TOMBSTONE;
    // The row's pointers go, so a freed id keeps nothing alive.
    w[o + P_PATH] = w[o + P_FACTS] = w[o + P_NH] = w[o + P_COMM] = w[o + P_RARE] = undefined;
    this.byId[id] = undefined;
    this.freeIds.push(id);
    this.count--;
  }

  /**
   * Rebuild the index with `size` slots (a power of two), dropping tombstones. The held sets are taken in id order,
   * their hashes from their rows (read in the order they lie in memory); only the writes land at random.
   */
  private rehash(size: number): void {
    const index = new Int32Array(size).fill(EMPTY_SLOT);
    const mask = size - 1;
    const top = this.byId.length;
    for (let id = 0; id < top; id++) {
      if (this.refs[id] <= 0) continue; // a freed id
      const h = this.numSegs[id >>> SEG_SHIFT][(id & (ROWS_PER_SEG - 1)) * NUMS + N_HASH];
      let i = h & mask;
      while (index[i] !== EMPTY_SLOT) i = (i + 1) & mask;
      index[i] = slotOf(h, id);
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
