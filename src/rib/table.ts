// The per-family prefix records of the RIB (src/rib/rib.ts): one record per prefix held, found through a hash index,
// with the trie for longest-prefix matches and ordered walks filled from a queue when it is read.
import { type Family, Prefix } from '../net/ip.ts';
import { Trie, type TrieOptions } from './trie.ts';

const NONE = -1;
// Records are kept in fixed-size segments: growing never copies (as the RIB's path entries are).
const SEG_SHIFT = 14;
const SEG = 1 << SEG_SHIFT;
const SEG_MASK = SEG - 1;
const FREE_LEN = 255; // record length marker for a free record
const LEN_MASK = 0xff;
const PENDING = 0x100; // record flag: in the change feed's current batch
const QUEUED = 0x200; // record flag: in the table's queue for the trie, not in the trie yet
// The exact-match index: open addressing, one Int32 per slot holding a record id (low 24 bits) and 7 bits of the
// prefix's hash above it, so a probe reads a record only when the tags agree.
const EMPTY_SLOT = -1;
const TOMB_SLOT = -2;
const SLOT_ID_BITS = 24;
const SLOT_ID_MASK = (1 << SLOT_ID_BITS) - 1;
const MAX_RECORDS = 1 << SLOT_ID_BITS;

function hash4(w0: number, len: number): number {
  let h = Math.imul(w0 ^ Math.imul(len + 1, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 15;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 13);
}

function hash6(w0: number, w1: number, w2: number, w3: number, len: number): number {
  let h = hash4(w0, len);
  h = Math.imul(h ^ w1, 0x85ebca6b);
  h ^= h >>> 15;
  h = Math.imul(h ^ w2, 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h ^ w3, 0x85ebca6b);
  return h ^ (h >>> 16);
}

/** An index slot: the record id under 7 bits of its prefix's hash (the tag a probe compares first). */
const slotOf = (h: number, r: number): number => ((h >>> 25) << SLOT_ID_BITS) | r;

const SHARED_PREFIXES = 1 << 16; // records per family whose Prefix object is kept for sharing (Table.sharedPrefix)

/**
 * Prefix records of one family, in segments of Int32Array: [address words (1 for IPv4, 4 for IPv6), length,
 * head entry]. Length 255 marks a free record; free records are chained through their head field.
 *
 * A prefix is found by a hash index over the records, not by the trie: a table arriving in a router's own order
 * (BIRD sends by attribute set, so prefixes come scattered over the address space) made every trie insert a walk of
 * cache misses, ~0.5 us a prefix. New records are queued for the trie instead, and the queue goes in sorted, so
 * consecutive inserts share their path, the first time the trie is read (a longest-prefix match, a walk in prefix
 * order), which a table load never does.
 *
 * The index is lazy too, for a table sent in prefix order (most routers walk their own table to send it): a prefix
 * after every prefix added so far cannot be held, so it gets a record with no probe, and the index takes those
 * records in at the first lookup, built once at its final size instead of doubled again and again on the way.
 */
export class Table {
  private trieStore: Trie;
  private index = new Int32Array(1024).fill(EMPTY_SLOT);
  private mask = 1023;
  private used = 0; // slots holding a record or a tombstone
  private queue = new Int32Array(256);
  private queued = 0;
  private readonly wpr: number; // address words per record
  private readonly stride: number;
  private segs: Int32Array[] = [];
  private top = 0;
  private freeHead = NONE;
  live = 0;
  // Records [appendFrom, top) were added past every prefix the table had held (see append()), and are not in the
  // index yet; -1 when every record is. The greatest prefix the table has ever been given: its words (top bit
  // flipped, so signed order is unsigned order) and length. Never lowered: a removal only makes the check stricter.
  private appendFrom = NONE;
  private max0 = -0x80000000;
  private max1 = -0x80000000;
  private max2 = -0x80000000;
  private max3 = -0x80000000;
  private maxLen = -1;
  // How many Adj-RIB-Outs hold each record (a segment made when its first record is held): a held record keeps
  // its id, so the Adj-RIB-Outs can be arrays indexed by it.
  private pinSegs: (Int32Array | undefined)[] = [];
  // One immutable Prefix per record for the exports and the change feed, shared by every peer's queue (100 peers
  // made 100 copies of each). Bounded: a full table keeps making fresh ones past the first SHARED_PREFIXES records
  // rather than holding a million objects for good.
  private shared: (Prefix | undefined)[] = [];

  constructor(readonly family: Family, private readonly trieOpts: TrieOptions | undefined) {
    this.trieStore = new Trie(family, trieOpts);
    this.wpr = family === 4 ? 1 : 4;
    this.stride = this.wpr + 2;
  }

  /** The trie of the live records (value: record id), with every queued record put in first. */
  get trie(): Trie {
    if (this.queued > 0) this.drain();
    return this.trieStore;
  }

  /** Slots of the exact-match index (memory figures and tests). */
  get indexSlots(): number {
    return this.index.length;
  }

  get highWater(): number {
    return this.top;
  }

  find(p: Prefix): number {
    return this.findWords(p.w0 | 0, p.w1 | 0, p.w2 | 0, p.w3 | 0, p.len);
  }

  findWords(w0: number, w1: number, w2: number, w3: number, len: number): number {
    if (this.appendFrom !== NONE) this.completeIndex();
    const h = this.wpr === 1 ? hash4(w0, len) : hash6(w0, w1, w2, w3, len);
    const tag = h >>> 25;
    const index = this.index;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = index[i];
      if (v === EMPTY_SLOT) return NONE;
      if (v >>> SLOT_ID_BITS === tag && this.holds(v & SLOT_ID_MASK, w0, w1, w2, w3, len)) return v & SLOT_ID_MASK;
    }
  }

  /** Whether live record `r` is the prefix. */
  private holds(r: number, w0: number, w1: number, w2: number, w3: number, len: number): boolean {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride;
    if (s[o] !== (w0 | 0)) return false;
    if (this.wpr === 1) return (s[o + 1] & LEN_MASK) === len;
    return s[o + 1] === (w1 | 0) && s[o + 2] === (w2 | 0) && s[o + 3] === (w3 | 0) && (s[o + 4] & LEN_MASK) === len;
  }

  private hashOf(r: number): number {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride;
    return this.wpr === 1 ? hash4(s[o], s[o + 1] & LEN_MASK) : hash6(s[o], s[o + 1], s[o + 2], s[o + 3], s[o + 4] & LEN_MASK);
  }

  /**
   * Rebuild the index at a size where the live records fill at most a quarter of it (tombstones dropped). The
   * records are read in id order, so only the writes into the new index are scattered.
   */
  private rehash(): void {
    // (Growing 4x past 131,072 records halved the rebuilds of a table load but left a 900k-prefix IPv4 table in a
    // 16 MB index instead of 8: +10 MB of peak RSS for no CPU the bench could tell from its noise.)
    let size = 1024;
    while (size < this.live * 4) size *= 2;
    const index = new Int32Array(size).fill(EMPTY_SLOT);
    const mask = size - 1;
    for (let r = 0; r < this.top; r++) {
      if (!this.isLive(r)) continue;
      const h = this.hashOf(r);
      let k = h & mask;
      while (index[k] !== EMPTY_SLOT) k = (k + 1) & mask;
      index[k] = slotOf(h, r);
    }
    this.index = index;
    this.mask = mask;
    this.used = this.live;
    this.appendFrom = NONE;
  }

  /**
   * Whether the prefix comes after every prefix the table has been given, in (address, length) order: then it
   * cannot be held already.
   */
  private beyondMax(w0: number, w1: number, w2: number, w3: number, len: number): boolean {
    const a = w0 ^ 0x80000000;
    if (a !== this.max0) return a > this.max0;
    if (this.wpr === 4) {
      const b = w1 ^ 0x80000000;
      if (b !== this.max1) return b > this.max1;
      const c = w2 ^ 0x80000000;
      if (c !== this.max2) return c > this.max2;
      const d = w3 ^ 0x80000000;
      if (d !== this.max3) return d > this.max3;
    }
    return len > this.maxLen;
  }

  private setMax(w0: number, w1: number, w2: number, w3: number, len: number): void {
    this.max0 = w0 ^ 0x80000000;
    this.max1 = w1 ^ 0x80000000;
    this.max2 = w2 ^ 0x80000000;
    this.max3 = w3 ^ 0x80000000;
    this.maxLen = len;
  }

  /**
   * A new record for a prefix that cannot be held (beyondMax), left out of the index until something looks a prefix
   * up: a table arriving in prefix order (a router walking its own table) then costs no probe of the index per
   * prefix, and the index is built once, at its final size, instead of being rebuilt at every doubling.
   */
  private append(w0: number, w1: number, w2: number, w3: number, len: number): number {
    const r = this.top;
    if (r >= MAX_RECORDS) throw new Error(`RIB: more than ${MAX_RECORDS} IPv${this.family} prefixes`);
    if (r === this.segs.length * SEG) this.segs.push(new Int32Array(SEG * this.stride));
    this.top++;
    if (this.appendFrom === NONE) this.appendFrom = r;
    this.setMax(w0, w1, w2, w3, len);
    this.fill(r, w0, w1, w2, w3, len);
    return r;
  }

  /** Put the appended records into the index: all at once when it must grow anyway, else one by one. */
  private completeIndex(): void {
    const from = this.appendFrom;
    this.appendFrom = NONE;
    if ((this.used + this.top - from) * 2 > this.index.length) {
      this.rehash();
      return;
    }
    const index = this.index;
    const mask = this.mask;
    for (let r = from; r < this.top; r++) {
      if (!this.isLive(r)) continue;
      const h = this.hashOf(r);
      let k = h & mask;
      while (index[k] >= 0) k = (k + 1) & mask;
      if (index[k] === EMPTY_SLOT) this.used++;
      index[k] = slotOf(h, r);
    }
  }

  /** Take record `r` (whose prefix hashes to `h`) out of the index. */
  private unindex(r: number, h: number): void {
    if (this.appendFrom !== NONE) this.completeIndex();
    const index = this.index;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const v = index[i];
      if (v === EMPTY_SLOT) throw new Error(`RIB: record ${r} is not in the index`);
      if (v >= 0 && (v & SLOT_ID_MASK) === r) {
        index[i] = TOMB_SLOT;
        return;
      }
    }
  }

  /**
   * Put the queued records into the trie in address order. The queue is read in its own order (record ids, mostly
   * ascending), each record's flag cleared and its first word and length taken; a radix sort on the word then gives
   * the order in which consecutive inserts share their path through the trie.
   */
  private drain(): void {
    const n = this.queued;
    const queue = this.queue;
    this.queued = 0;
    const wpr = this.wpr;
    let keys = new Uint32Array(n);
    let ids = new Int32Array(n);
    let lens = new Uint8Array(n);
    let m = 0;
    for (let i = 0; i < n; i++) {
      const r = queue[i];
      const s = this.segs[r >>> SEG_SHIFT];
      const o = (r & SEG_MASK) * this.stride;
      const lw = s[o + wpr];
      // Removed while queued (and perhaps reused, and queued again further on): only a flagged record goes in, once.
      if (lw === FREE_LEN || (lw & QUEUED) === 0) continue;
      s[o + wpr] = lw & ~QUEUED;
      keys[m] = s[o];
      ids[m] = r;
      lens[m++] = lw & LEN_MASK;
    }
    if (this.queue.length > 4096) this.queue = new Int32Array(256);
    const opts = this.trieOpts;
    // A first bulk load sizes the trie for what it will hold (no widening, no regrowth on the way).
    if (this.trieStore.size === 0 && m >= 4096 && opts?.rootBits === undefined && opts?.expectedSize === undefined) {
      this.trieStore = new Trie(this.family, { ...opts, expectedSize: this.live });
    }
    if (m >= 64) {
      // Two counting passes of 16 bits each.
      for (let shift = 0; shift < 32; shift += 16) {
        const count = new Int32Array(65537);
        for (let i = 0; i < m; i++) count[((keys[i] >>> shift) & 0xffff) + 1]++;
        for (let b = 1; b <= 65536; b++) count[b] += count[b - 1];
        const k2 = new Uint32Array(m);
        const i2 = new Int32Array(m);
        const l2 = new Uint8Array(m);
        for (let i = 0; i < m; i++) {
          const at = count[(keys[i] >>> shift) & 0xffff]++;
          k2[at] = keys[i];
          i2[at] = ids[i];
          l2[at] = lens[i];
        }
        keys = k2;
        ids = i2;
        lens = l2;
      }
    }
    const trie = this.trieStore;
    if (wpr === 1) {
      for (let k = 0; k < m; k++) trie.insertWords(keys[k], 0, 0, 0, lens[k], ids[k]);
    } else {
      for (let k = 0; k < m; k++) {
        const r = ids[k];
        const s = this.segs[r >>> SEG_SHIFT];
        const o = (r & SEG_MASK) * this.stride;
        trie.insertWords(keys[k], s[o + 1] >>> 0, s[o + 2] >>> 0, s[o + 3] >>> 0, lens[k], r);
      }
    }
  }

  head(r: number): number {
    return this.segs[r >>> SEG_SHIFT][(r & SEG_MASK) * this.stride + this.wpr + 1];
  }

  setHead(r: number, e: number): void {
    this.segs[r >>> SEG_SHIFT][(r & SEG_MASK) * this.stride + this.wpr + 1] = e;
  }

  isLive(r: number): boolean {
    return this.segs[r >>> SEG_SHIFT][(r & SEG_MASK) * this.stride + this.wpr] !== FREE_LEN;
  }

  /** Whether the record is in the change feed's current batch (a bit above the length in the length word). */
  isPending(r: number): boolean {
    return (this.segs[r >>> SEG_SHIFT][(r & SEG_MASK) * this.stride + this.wpr] & PENDING) !== 0;
  }

  setPending(r: number, on: boolean): void {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride + this.wpr;
    s[o] = on ? s[o] | PENDING : s[o] & ~PENDING;
  }

  /**
   * Read the index slots where the first `n` prefixes of an UPDATE's list (words: 1 per IPv4 prefix, 4 per IPv6)
   * start their probes, and nothing else. In a table load each probe is a cache miss on a random slot; loads that do
   * not depend on each other overlap, where one findOrAddWords after another waits for every miss in turn.
   */
  touchList(words: Uint32Array, lens: Uint8Array, n: number): void {
    // A list that starts past every prefix held is appended (findOrAddWords): nothing to read ahead.
    if (this.wpr === 1 ? this.beyondMax(words[0] | 0, 0, 0, 0, lens[0]) : this.beyondMax(words[0] | 0, words[1] | 0, words[2] | 0, words[3] | 0, lens[0])) return;
    const index = this.index;
    const mask = this.mask;
    let sink = 0;
    if (this.wpr === 1) for (let i = 0; i < n; i++) sink ^= index[hash4(words[i] | 0, lens[i]) & mask];
    else for (let i = 0; i < n; i++) sink ^= index[hash6(words[4 * i] | 0, words[4 * i + 1] | 0, words[4 * i + 2] | 0, words[4 * i + 3] | 0, lens[i]) & mask];
    this.touched = sink; // kept, so the loads are not optimised away
  }

  /** (See touchList.) */
  touched = 0;

  /** The record for `p`, created (empty) if absent. */
  findOrAdd(p: Prefix): number {
    return this.findOrAddWords(p.w0 | 0, p.w1 | 0, p.w2 | 0, p.w3 | 0, p.len);
  }

  findOrAddWords(w0: number, w1: number, w2: number, w3: number, len: number): number {
    if (this.beyondMax(w0, w1, w2, w3, len)) return this.append(w0, w1, w2, w3, len);
    if (this.appendFrom !== NONE) this.completeIndex();
    if ((this.used + 1) * 2 > this.index.length) this.rehash();
    const h = this.wpr === 1 ? hash4(w0, len) : hash6(w0, w1, w2, w3, len);
    const tag = h >>> 25;
    const index = this.index;
    const mask = this.mask;
    let slot = -1; // the first tombstone on the way, reused when the prefix is absent
    let i = h & mask;
    for (; ; i = (i + 1) & mask) {
      const v = index[i];
      if (v === EMPTY_SLOT) break;
      if (v === TOMB_SLOT) {
        if (slot < 0) slot = i;
      } else if (v >>> SLOT_ID_BITS === tag && this.holds(v & SLOT_ID_MASK, w0, w1, w2, w3, len)) return v & SLOT_ID_MASK;
    }
    let r = this.freeHead;
    if (r === NONE) {
      r = this.top;
      if (r >= MAX_RECORDS) throw new Error(`RIB: more than ${MAX_RECORDS} IPv${this.family} prefixes`);
      if (r === this.segs.length * SEG) this.segs.push(new Int32Array(SEG * this.stride));
      this.top++;
    } else this.freeHead = this.head(r);
    if (slot < 0) {
      slot = i;
      this.used++;
    }
    index[slot] = slotOf(h, r);
    this.fill(r, w0, w1, w2, w3, len);
    return r;
  }

  /** A new record's words and length, live and queued for the trie. */
  private fill(r: number, w0: number, w1: number, w2: number, w3: number, len: number): void {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride;
    s[o] = w0;
    if (this.wpr === 4) {
      s[o + 1] = w1;
      s[o + 2] = w2;
      s[o + 3] = w3;
    }
    s[o + this.wpr] = len | QUEUED;
    s[o + this.wpr + 1] = NONE;
    this.live++;
    // Bounded: a record withdrawn and announced again while queued is queued twice, so a table that churns and is
    // never read would grow the queue without end. Past twice the table, the queue goes into the trie.
    if (this.queued >= 4096 && this.queued >= 2 * this.live) this.drain();
    if (this.queued === this.queue.length) {
      const q = new Int32Array(this.queue.length * 2);
      q.set(this.queue);
      this.queue = q;
    }
    this.queue[this.queued++] = r;
  }

  pins(r: number): number {
    // Bounds first: optimised code that reads past an array's end is thrown away (V8's "out of bounds" deopt).
    const k = r >>> SEG_SHIFT;
    const s = k < this.pinSegs.length ? this.pinSegs[k] : undefined;
    return s === undefined ? 0 : s[r & SEG_MASK];
  }

  /** Add `d` (+1 or -1) to the record's holders; returns the new count. */
  pin(r: number, d: number): number {
    const k = r >>> SEG_SHIFT;
    let s = k < this.pinSegs.length ? this.pinSegs[k] : undefined;
    if (s === undefined) {
      while (this.pinSegs.length <= k) this.pinSegs.push(undefined);
      s = this.pinSegs[k] = new Int32Array(SEG);
    }
    return (s[r & SEG_MASK] += d);
  }

  /** Whether a record can be recycled: no paths, not in the current batch, held by no Adj-RIB-Out. */
  unused(r: number): boolean {
    return this.isLive(r) && this.head(r) === NONE && !this.isPending(r) && this.pins(r) === 0;
  }

  /** Remove an (empty, unheld) record from the trie and recycle it. */
  remove(r: number): void {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride;
    const lw = s[o + this.wpr];
    const len = lw & LEN_MASK;
    if (this.pins(r) !== 0) throw new Error(`RIB: record ${r} recycled while an Adj-RIB-Out holds it`);
    this.unindex(r, this.hashOf(r));
    // A queued record never reached the trie: the drain skips it once its length word says free.
    if ((lw & QUEUED) === 0) {
      if (this.wpr === 1) this.trieStore.deleteWords(s[o] >>> 0, 0, 0, 0, len);
      else this.trieStore.deleteWords(s[o] >>> 0, s[o + 1] >>> 0, s[o + 2] >>> 0, s[o + 3] >>> 0, len);
    }
    s[o + this.wpr] = FREE_LEN;
    s[o + this.wpr + 1] = this.freeHead;
    if (r < this.shared.length) this.shared[r] = undefined;
    this.freeHead = r;
    this.live--;
  }

  prefix(r: number): Prefix {
    const s = this.segs[r >>> SEG_SHIFT];
    const o = (r & SEG_MASK) * this.stride;
    return this.wpr === 1
      ? new Prefix(4, s[o] >>> 0, 0, 0, 0, s[o + 1] & LEN_MASK)
      : new Prefix(6, s[o] >>> 0, s[o + 1] >>> 0, s[o + 2] >>> 0, s[o + 3] >>> 0, s[o + 4] & LEN_MASK);
  }

  /** The record's prefix, one shared object per record (do not modify it). */
  sharedPrefix(r: number): Prefix {
    if (r >= SHARED_PREFIXES) return this.prefix(r);
    let p = this.shared[r];
    if (p === undefined) {
      while (this.shared.length <= r) this.shared.push(undefined);
      p = this.shared[r] = this.prefix(r);
    }
    return p;
  }

  recordBytes(): number {
    let n = this.segs.length * SEG * this.stride * 4 + this.index.byteLength + this.queue.byteLength;
    for (const p of this.pinSegs) if (p) n += p.byteLength;
    return n;
  }

  /** The trie's bytes as it is (the queue not put in). */
  trieBytes(): number {
    return this.trieStore.memoryBytes();
  }
}

