// Radix trie for one address family, laid out for V8: every node lives in typed-array pools, keys are uint32 words.
//
// Layout (a multibit trie with leaf pushing, plus an exact record of the stored prefixes):
//  - The trie is made of 16-slot "chunks" of stride 4: a chunk at depth d looks at address bits d..d+3.
//  - `tbl` (Int32Array, 16 entries per chunk) holds, per slot, either a child chunk (encoded -(base + 2)) or the
//    final answer for that slot: the value of the longest stored prefix covering it, or -1. Values are pushed down
//    into children, so a lookup is a plain descent that stops at the first non-pointer: no backtracking.
//  - The top levels (depths 0 .. rootBits-4) are fixed and always present; the chunks at depth rootBits-4 are laid
//    out so that their slots are tbl[0 .. 2^rootBits), so a lookup starts with tbl[addr >>> (32 - rootBits)].
//    rootBits is 16 (256 KiB); IPv4 tries switch to 20 (4 MiB) once they are big: on a full table a /24 lookup is
//    then two loads (root slot, one chunk) instead of three.
//  - A chunk at depth d owns the stored prefixes of lengths d+1..d+4 (30 possible positions, heap-numbered).
//    `ownBits` marks which are present and `ownBlk` points at a block of their values in the `vals` pool (one word
//    per present position, in position order; found with a popcount). The /0 prefix is held in `defVal`.
//  - Free lists: freed chunks are chained through their slot 0; freed value blocks are chained per block size.
//    When the value pool runs out it is compacted, if that makes room, before it is grown: churn does not grow
//    the pools. Deleting a prefix collapses chunks left with no prefixes and no children.
//
// Values are integers 0..2^31-1 chosen by the caller (typically an index into the caller's own route table); -1
// means "no route".
import { type Family, IP, Prefix, maxLen, wordMask } from '../net/ip.ts';

/** A stored prefix and its value. */
export interface TrieEntry {
  prefix: Prefix;
  value: number;
}

/** Typed-array pool usage, for tests and benchmarks. */
export interface TriePoolStats {
  /** Chunks in use (fixed top levels included). */
  chunks: number;
  /** Chunks the tbl array has room for. */
  chunkCapacity: number;
  /** Highest chunk index ever handed out + 1 (free chunks below it are reused first). */
  chunkHighWater: number;
  /** Value words in live blocks (including unused room in blocks kept after a delete). */
  valueWords: number;
  valueCapacity: number;
  valueHighWater: number;
  freeValueWords: number;
}

export interface TrieOptions {
  /** Bits resolved by the first, directly indexed level: 4, 8, 12, 16 or 20 (default 16: 256 KiB of fixed table). */
  rootBits?: number;
  /**
   * Root width to switch to once the trie holds 2^17 prefixes (one rebuild). Default 20 for IPv4 (a 4 MiB root
   * table saves a memory load per lookup on full tables), rootBits for IPv6 (no gain there).
   */
  maxRootBits?: number;
  /** Expected number of prefixes: picks the root width up front and pre-sizes the pools (no rebuild, no regrowth). */
  expectedSize?: number;
}

const NONE = -1;
const MAX_VALUE = 0x7fffffff;
// Size at which a trie switches to its widest root table (maxRootBits). The rebuild walks and re-inserts every
// prefix, so it is cheapest early: at 2^17 it was ~0.3 s of a full table arriving in BIRD's (hash) order, at 2^15
// it is a quarter of that; the 4 MiB root is paid only by tries of 32k prefixes and more (a Calico node holds a few
// thousand routes).
const WIDEN_AT = 1 << 15;
// ORDER lists the 30 positions and 16 child slots of a chunk in comparePrefix order (a pre-order walk of the
// 4-level binary tree inside the chunk, each full-depth position followed by its child chunk).
const ORDER = new Int8Array(46);
const SUB_START = new Int8Array(30); // ORDER index range of the subtree under each position
const SUB_END = new Int8Array(30);
const POS_K = new Int8Array(30); // relative length 1..4 of a position
const POS_B = new Int8Array(30); // its k bits
// COVER_GT[k * 16 + s]: bitmask of positions longer than k that cover slot s.
const COVER_GT = new Int32Array(5 * 16);
{
  let at = 0;
  const visit = (k: number, b: number): void => {
    const pos = k > 0 ? (1 << k) - 2 + b : -1;
    if (pos >= 0) {
      POS_K[pos] = k;
      POS_B[pos] = b;
      SUB_START[pos] = at;
      ORDER[at++] = pos;
    }
    if (k === 4) ORDER[at++] = 30 + b;
    else {
      visit(k + 1, b * 2);
      visit(k + 1, b * 2 + 1);
    }
    if (pos >= 0) SUB_END[pos] = at;
  };
  visit(0, 0);
  for (let k = 0; k <= 4; k++) {
    for (let s = 0; s < 16; s++) {
      let m = 0;
      for (let kk = k + 1; kk <= 4; kk++) m |= 1 << ((1 << kk) - 2 + (s >> (4 - kk)));
      COVER_GT[k * 16 + s] = m;
    }
  }
}

function popcnt(x: number): number {
  x = x - ((x >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}

/** The 4-bit group of the key starting at bit `d` (d a multiple of 4). */
function nibAt(kw: Uint32Array, d: number): number {
  return (kw[d >>> 5] >>> (28 - (d & 31))) & 15;
}

const notReady = (): number => NONE;

function makeLpm4(t: Int32Array, rootShift: number): (addr: number) => number {
  if (rootShift === 12) {
    // The full-table shape (20-bit root), with constant shifts.
    return (addr: number): number => {
      let e = t[addr >>> 12];
      const m = (e + 1) >> 31;
      e = (t[((-2 - e) | ((addr >>> 8) & 15)) & m] & m) | (e & ~m);
      if (e > -2) return e;
      e = t[(-2 - e) | ((addr >>> 4) & 15)];
      if (e > -2) return e;
      return t[(-2 - e) | (addr & 15)];
    };
  }
  return (addr: number): number => {
    let s = rootShift;
    let e = t[addr >>> s];
    // The first step below the root is taken without a branch: a non-pointer reads slot 0 and is kept. Whether
    // the root slot is a pointer is a coin flip per address, and mispredicting it keeps the CPU from overlapping
    // consecutive lookups; branch-free, a full-table lookup loop runs about twice as fast.
    s -= 4;
    const m = (e + 1) >> 31; // -1 for a pointer (<= -2), 0 for a value or -1
    e = (t[((-2 - e) | ((addr >>> s) & 15)) & m] & m) | (e & ~m);
    while (e <= -2) {
      s -= 4;
      e = t[(-2 - e) | ((addr >>> s) & 15)];
    }
    return e;
  };
}

function makeLpm6(t: Int32Array, rootShift: number): (w0: number, w1: number, w2: number, w3: number) => number {
  return (w0: number, w1: number, w2: number, w3: number): number => {
    let s = rootShift;
    let e = t[w0 >>> s];
    while (e <= -2 && s > 0) {
      s -= 4;
      e = t[(-2 - e) | ((w0 >>> s) & 15)];
    }
    if (e > -2) return e;
    for (s = 28; s >= 0; s -= 4) {
      e = t[(-2 - e) | ((w1 >>> s) & 15)];
      if (e > -2) return e;
    }
    for (s = 28; s >= 0; s -= 4) {
      e = t[(-2 - e) | ((w2 >>> s) & 15)];
      if (e > -2) return e;
    }
    for (s = 28; s >= 0; s -= 4) {
      e = t[(-2 - e) | ((w3 >>> s) & 15)];
      if (e > -2) return e;
    }
    return e;
  };
}

export class Trie {
  readonly family: Family;
  private readonly bits: number;
  private readonly maxRootBits: number;
  // Layout of the fixed top levels; changed only by widen().
  private rootBits = 0;
  private rootShift = 0;
  private fixedChunks = 0;
  private topBase = 0; // tbl base of the depth-0 chunk
  private levelOffset: number[] = []; // first chunk index of each fixed level, by depth/4

  private tbl!: Int32Array;
  private ownBits!: Int32Array;
  private ownBlk!: Int32Array;
  private ownCap!: Uint8Array;
  private chunkCap = 0;
  private chunkTop = 0;
  private chunkFree = NONE;
  private liveChunks = 0;

  private vals!: Int32Array;
  private valTop = 0;
  private valFree = new Int32Array(31).fill(NONE); // free block chains by size 1..30
  private valFreeWords = 0;
  private bumpedSinceCompact = Infinity;

  private defVal = NONE;
  private count = 0;
  private readonly kw = new Uint32Array(4); // scratch key for the generic (non-hot) paths
  // Path of the last walk (chunk bases and nibbles), for collapsing after a delete.
  private readonly pathC = new Int32Array(33);
  private readonly pathN = new Int32Array(33);

  constructor(family: Family, options: TrieOptions = {}) {
    if (family !== 4 && family !== 6) throw new RangeError(`family must be 4 or 6, got ${String(family)}`);
    const expected = Math.max(0, Math.floor(options.expectedSize ?? 0));
    const maxRootBits = options.maxRootBits ?? (family === 4 ? Math.max(20, options.rootBits ?? 16) : options.rootBits ?? 16);
    const rootBits = options.rootBits ?? (expected >= WIDEN_AT ? maxRootBits : 16);
    for (const [name, v] of [['rootBits', rootBits], ['maxRootBits', maxRootBits]] as const) {
      if (![4, 8, 12, 16, 20].includes(v)) throw new RangeError(`${name} must be 4, 8, 12, 16 or 20, got ${v}`);
    }
    if (maxRootBits < rootBits) throw new RangeError(`maxRootBits ${maxRootBits} is below rootBits ${rootBits}`);
    this.family = family;
    this.bits = maxLen(family);
    this.maxRootBits = maxRootBits;
    // Pool sizes for an expected table: full tables need about n/5 chunks for IPv4 and 2n/3 for IPv6.
    const chunks = Math.ceil(expected * (family === 4 ? 0.2 : 0.67));
    this.layout(rootBits, Math.max(64, chunks), Math.max(256, expected));
  }

  /** Fresh, empty pools for a root of `rootBits` bits, with room for `extraChunks` and `valueWords`. */
  private layout(rootBits: number, extraChunks: number, valueWords: number): void {
    this.rootBits = rootBits;
    this.rootShift = 32 - rootBits;
    // Fixed levels: the deepest one (depth rootBits-4) at chunk indexes 0.., the ones above it after.
    this.levelOffset = [];
    let idx = 1 << (rootBits - 4);
    this.levelOffset[(rootBits - 4) / 4] = 0;
    for (let d = rootBits - 8; d >= 0; d -= 4) {
      this.levelOffset[d / 4] = idx;
      idx += 1 << d;
    }
    this.fixedChunks = idx;
    this.topBase = this.levelOffset[0] * 16;
    this.chunkCap = idx + extraChunks;
    this.tbl = new Int32Array(this.chunkCap * 16);
    this.ownBits = new Int32Array(this.chunkCap);
    this.ownBlk = new Int32Array(this.chunkCap);
    this.ownCap = new Uint8Array(this.chunkCap);
    this.vals = new Int32Array(valueWords);
    this.chunkTop = idx;
    this.liveChunks = idx;
    this.chunkFree = NONE;
    this.valTop = 0;
    this.valFree.fill(NONE);
    this.valFreeWords = 0;
    this.defVal = NONE;
    this.count = 0;
    this.initFixed();
    this.relink();
  }

  /**
   * Rebuild with a wider root table. A big table pays a fixed 4 MiB for a 2^20-entry IPv4 root and saves a
   * dependent memory load on most lookups; small tries never pay it.
   */
  private widen(rootBits: number): void {
    const n = this.count;
    const words = new Uint32Array(n * 4);
    const lens = new Uint8Array(n);
    const values = new Int32Array(n);
    let i = 0;
    for (const e of this.iterate(undefined)) {
      const p = e.prefix;
      words[i * 4] = p.w0;
      words[i * 4 + 1] = p.w1;
      words[i * 4 + 2] = p.w2;
      words[i * 4 + 3] = p.w3;
      lens[i] = p.len;
      values[i++] = e.value;
    }
    this.layout(rootBits, Math.max(64, this.liveChunks - this.fixedChunks), Math.max(256, this.valTop));
    for (let j = 0; j < n; j++) {
      this.insertWords(words[j * 4], words[j * 4 + 1], words[j * 4 + 2], words[j * 4 + 3], lens[j], values[j]);
    }
  }

  private initFixed(): void {
    this.tbl.fill(NONE, 0, this.fixedChunks * 16);
    this.ownBits.fill(0, 0, this.fixedChunks);
    this.ownBlk.fill(NONE, 0, this.fixedChunks);
    this.ownCap.fill(0, 0, this.fixedChunks);
    // Link each fixed chunk above the root level to its 16 fixed children.
    for (let d = 0; d < this.rootBits - 4; d += 4) {
      const off = this.levelOffset[d / 4];
      const childOff = this.levelOffset[d / 4 + 1];
      for (let key = 0; key < 1 << d; key++) {
        for (let n = 0; n < 16; n++) this.tbl[(off + key) * 16 + n] = -2 - (childOff + key * 16 + n) * 16;
      }
    }
  }

  /** Number of stored prefixes. */
  get size(): number {
    return this.count;
  }

  /** Bits resolved by the root table (grows to maxRootBits once the trie is big). */
  get rootWidth(): number {
    return this.rootBits;
  }

  // ---- hot path: longest-prefix match on raw words --------------------------------------------------------------

  /**
   * Longest-prefix match for an IPv4 address (uint32 or int32); returns the value or -1.
   * (lpm4 and lpm6 are closures over the current table, remade whenever the table is reallocated: V8 runs them
   * markedly faster than methods reading this.tbl. Call them as trie.lpm4(a); do not keep the function across
   * updates.)
   */
  lpm4: (addr: number) => number = notReady;

  /** Longest-prefix match for an IPv6 address given as four words, most significant first; value or -1. */
  lpm6: (w0: number, w1: number, w2: number, w3: number) => number = notReady;

  private relink(): void {
    this.lpm4 = makeLpm4(this.tbl, this.rootShift);
    this.lpm6 = makeLpm6(this.tbl, this.rootShift);
  }

  /**
   * lpm4 for many addresses at once: out[i] = lpm4(addrs[i]) for i < count. Eight lookups advance in lock step,
   * so their memory loads overlap; several times faster than single calls when the table does not fit in cache.
   */
  lpm4Batch(addrs: Uint32Array | Int32Array, out: Int32Array, count: number = addrs.length): void {
    const t = this.tbl;
    const rs = this.rootShift;
    let i = 0;
    for (; i + 8 <= count; i += 8) {
      const a0 = addrs[i], a1 = addrs[i + 1], a2 = addrs[i + 2], a3 = addrs[i + 3];
      const a4 = addrs[i + 4], a5 = addrs[i + 5], a6 = addrs[i + 6], a7 = addrs[i + 7];
      let e0 = t[a0 >>> rs], e1 = t[a1 >>> rs], e2 = t[a2 >>> rs], e3 = t[a3 >>> rs];
      let e4 = t[a4 >>> rs], e5 = t[a5 >>> rs], e6 = t[a6 >>> rs], e7 = t[a7 >>> rs];
      for (let s = rs - 4; s >= 0; s -= 4) {
        if (e0 > -2 && e1 > -2 && e2 > -2 && e3 > -2 && e4 > -2 && e5 > -2 && e6 > -2 && e7 > -2) break;
        if (e0 <= -2) e0 = t[(-2 - e0) | ((a0 >>> s) & 15)];
        if (e1 <= -2) e1 = t[(-2 - e1) | ((a1 >>> s) & 15)];
        if (e2 <= -2) e2 = t[(-2 - e2) | ((a2 >>> s) & 15)];
        if (e3 <= -2) e3 = t[(-2 - e3) | ((a3 >>> s) & 15)];
        if (e4 <= -2) e4 = t[(-2 - e4) | ((a4 >>> s) & 15)];
        if (e5 <= -2) e5 = t[(-2 - e5) | ((a5 >>> s) & 15)];
        if (e6 <= -2) e6 = t[(-2 - e6) | ((a6 >>> s) & 15)];
        if (e7 <= -2) e7 = t[(-2 - e7) | ((a7 >>> s) & 15)];
      }
      out[i] = e0; out[i + 1] = e1; out[i + 2] = e2; out[i + 3] = e3;
      out[i + 4] = e4; out[i + 5] = e5; out[i + 6] = e6; out[i + 7] = e7;
    }
    for (; i < count; i++) out[i] = this.lpm4(addrs[i]);
  }

  /** lpm6 for many addresses: `words` holds four words per address; out[i] gets the value or -1. */
  lpm6Batch(words: Uint32Array | Int32Array, out: Int32Array, count: number = words.length >> 2): void {
    const t = this.tbl;
    const rs = this.rootShift;
    let i = 0;
    for (; i + 4 <= count; i += 4) {
      const b = i * 4;
      let e0 = t[words[b] >>> rs], e1 = t[words[b + 4] >>> rs], e2 = t[words[b + 8] >>> rs], e3 = t[words[b + 12] >>> rs];
      for (let pos = 32 - rs; pos < 128; pos += 4) {
        if (e0 > -2 && e1 > -2 && e2 > -2 && e3 > -2) break;
        const w = b + (pos >>> 5);
        const s = 28 - (pos & 31);
        if (e0 <= -2) e0 = t[(-2 - e0) | ((words[w] >>> s) & 15)];
        if (e1 <= -2) e1 = t[(-2 - e1) | ((words[w + 4] >>> s) & 15)];
        if (e2 <= -2) e2 = t[(-2 - e2) | ((words[w + 8] >>> s) & 15)];
        if (e3 <= -2) e3 = t[(-2 - e3) | ((words[w + 12] >>> s) & 15)];
      }
      out[i] = e0; out[i + 1] = e1; out[i + 2] = e2; out[i + 3] = e3;
    }
    for (; i < count; i++) {
      const b = i * 4;
      out[i] = this.lpm6(words[b], words[b + 1], words[b + 2], words[b + 3]);
    }
  }

  /** Longest-prefix match on raw words for either family (w1..w3 ignored for IPv4). */
  lpmWords(w0: number, w1: number, w2: number, w3: number): number {
    return this.family === 4 ? this.lpm4(w0) : this.lpm6(w0, w1, w2, w3);
  }

  // ---- updates ---------------------------------------------------------------------------------------------------

  /** Store `value` (0..2^31-1) for `prefix`; returns the previous value or -1. */
  insert(prefix: Prefix, value: number): number {
    this.checkPrefix(prefix);
    if (!Number.isInteger(value) || value < 0 || value > MAX_VALUE) {
      throw new RangeError(`trie value must be an integer 0..${MAX_VALUE}, got ${value}`);
    }
    return this.insertWords(prefix.w0, prefix.w1, prefix.w2, prefix.w3, prefix.len, value);
  }

  /**
   * insert() on raw words; bits past `len` are ignored. No validation: len and value must be in range. With
   * `ifAbsent`, a prefix already stored keeps its value (find-or-insert in one walk); the result says which.
   */
  insertWords(w0: number, w1: number, w2: number, w3: number, len: number, value: number, ifAbsent = false): number {
    if (this.count >= WIDEN_AT && this.rootBits < this.maxRootBits) this.widen(this.maxRootBits);
    this.loadKey(w0, w1, w2, w3, len);
    if (len === 0) {
      const old = this.defVal;
      if (old !== NONE && ifAbsent) return old;
      if (old === NONE) this.count++;
      if (old !== value) {
        this.defVal = value;
        this.pushInto(this.topBase, value);
      }
      return old;
    }
    const kw = this.kw;
    const d = ((len - 1) >> 2) << 2;
    const k = len - d;
    let depth = this.fixedDepth(d);
    let c = this.fixedBase(depth, kw[0]);
    for (; depth < d; depth += 4) {
      const n = nibAt(kw, depth);
      const e = this.tbl[c + n];
      if (e <= -2) c = -2 - e;
      else {
        // A new chunk starts with the value that was pushed into this slot: that is what it inherits.
        const nc = this.allocChunk(e);
        this.tbl[c + n] = -2 - nc;
        c = nc;
      }
    }
    const ci = c >> 4;
    const b = nibAt(kw, d) >> (4 - k);
    const pos = (1 << k) - 2 + b;
    const bits = this.ownBits[ci];
    let old = NONE;
    if (bits & (1 << pos)) {
      const at = this.ownBlk[ci] + popcnt(bits & ((1 << pos) - 1));
      old = this.vals[at];
      if (old === value || ifAbsent) return old;
      this.vals[at] = value;
    } else {
      this.insertOwned(ci, pos, value);
      this.count++;
    }
    // Push the new value into the slots where this prefix is now the longest owned cover.
    const own = this.ownBits[ci];
    const lo = b << (4 - k);
    const hi = lo + (1 << (4 - k));
    for (let s = lo; s < hi; s++) {
      if (own & COVER_GT[k * 16 + s]) continue;
      const e = this.tbl[c + s];
      if (e <= -2) this.pushInto(-2 - e, value);
      else this.tbl[c + s] = value;
    }
    return old;
  }

  /** Remove `prefix`; returns its value, or -1 when it was not stored. Unneeded chunks are freed. */
  delete(prefix: Prefix): number {
    this.checkPrefix(prefix);
    return this.deleteWords(prefix.w0, prefix.w1, prefix.w2, prefix.w3, prefix.len);
  }

  /** delete() on raw words; bits past `len` are ignored. */
  deleteWords(w0: number, w1: number, w2: number, w3: number, len: number): number {
    this.loadKey(w0, w1, w2, w3, len);
    if (len === 0) {
      const old = this.defVal;
      if (old !== NONE) {
        this.count--;
        this.defVal = NONE;
        this.pushInto(this.topBase, NONE);
      }
      return old;
    }
    const kw = this.kw;
    const d = ((len - 1) >> 2) << 2;
    const k = len - d;
    let c = this.topBase;
    let inh = this.defVal;
    let level = 0;
    for (let depth = 0; depth < d; depth += 4) {
      const n = nibAt(kw, depth);
      const e = this.tbl[c + n];
      if (e > -2) return NONE;
      const ob = this.ownedBest(c, n);
      if (ob !== NONE) inh = ob;
      this.pathC[level] = c;
      this.pathN[level] = n;
      level++;
      c = -2 - e;
    }
    const ci = c >> 4;
    const b = nibAt(kw, d) >> (4 - k);
    const pos = (1 << k) - 2 + b;
    if (!(this.ownBits[ci] & (1 << pos))) return NONE;
    const old = this.removeOwned(ci, pos);
    this.count--;
    // The slots this prefix was the longest cover of now take the next shorter cover (or the inherited value).
    const own = this.ownBits[ci];
    const lo = b << (4 - k);
    const hi = lo + (1 << (4 - k));
    for (let s = lo; s < hi; s++) {
      if (own & COVER_GT[k * 16 + s]) continue;
      let nv = this.ownedBest(c, s);
      if (nv === NONE) nv = inh;
      const e = this.tbl[c + s];
      if (e <= -2) this.pushInto(-2 - e, nv);
      else this.tbl[c + s] = nv;
    }
    // Collapse chunks left with no prefixes and no children: their slots all hold the inherited value.
    while (level > 0 && c >> 4 >= this.fixedChunks && this.ownBits[c >> 4] === 0 && !this.hasChild(c)) {
      level--;
      const parent = this.pathC[level];
      this.tbl[parent + this.pathN[level]] = this.tbl[c];
      this.freeChunk(c);
      c = parent;
    }
    return old;
  }

  /** Remove everything. Pools keep their capacity. */
  clear(): void {
    this.tbl.fill(0);
    this.chunkTop = this.fixedChunks;
    this.liveChunks = this.fixedChunks;
    this.chunkFree = NONE;
    this.initFixed();
    this.valTop = 0;
    this.valFree.fill(NONE);
    this.valFreeWords = 0;
    this.defVal = NONE;
    this.count = 0;
  }

  // ---- queries ---------------------------------------------------------------------------------------------------

  /** Exact match: the value stored for `prefix`, or -1. */
  get(prefix: Prefix): number {
    this.checkPrefix(prefix);
    return this.getWords(prefix.w0, prefix.w1, prefix.w2, prefix.w3, prefix.len);
  }

  /** get() on raw words; bits past `len` are ignored. */
  getWords(w0: number, w1: number, w2: number, w3: number, len: number): number {
    if (len === 0) return this.defVal;
    this.loadKey(w0, w1, w2, w3, len);
    const kw = this.kw;
    const d = ((len - 1) >> 2) << 2;
    const k = len - d;
    let depth = this.fixedDepth(d);
    let c = this.fixedBase(depth, kw[0]);
    for (; depth < d; depth += 4) {
      const e = this.tbl[c + nibAt(kw, depth)];
      if (e > -2) return NONE;
      c = -2 - e;
    }
    const pos = (1 << k) - 2 + (nibAt(kw, d) >> (4 - k));
    const bits = this.ownBits[c >> 4];
    if (!(bits & (1 << pos))) return NONE;
    return this.vals[this.ownBlk[c >> 4] + popcnt(bits & ((1 << pos) - 1))];
  }

  has(prefix: Prefix): boolean {
    return this.get(prefix) !== NONE;
  }

  /** Longest-prefix match for an address, with the matching prefix. */
  lpm(ip: IP): TrieEntry | undefined {
    if (ip.family !== this.family) throw new RangeError(`IPv${ip.family} address given to an IPv${this.family} trie`);
    let found: TrieEntry | undefined;
    this.walkCovering(ip.w0, ip.w1, ip.w2, ip.w3, this.bits, (len, value) => {
      found = { prefix: this.makePrefix(len), value };
    });
    return found;
  }

  /** Every stored prefix that contains the address or prefix `x` (a prefix contains itself), shortest first. */
  covering(x: IP | Prefix): TrieEntry[] {
    if (x.family !== this.family) throw new RangeError(`IPv${x.family} key given to an IPv${this.family} trie`);
    const len = x instanceof Prefix ? x.len : this.bits;
    const out: TrieEntry[] = [];
    this.walkCovering(x.w0, x.w1, x.w2, x.w3, len, (l, value) => out.push({ prefix: this.makePrefix(l), value }));
    return out;
  }

  /** Every stored prefix inside `prefix` (itself included), in comparePrefix order. */
  coveredBy(prefix: Prefix): TrieEntry[] {
    this.checkPrefix(prefix);
    return [...this.iterate(prefix)];
  }

  /** All entries in comparePrefix order (address, then shorter first). Do not modify the trie while iterating. */
  entries(): IterableIterator<TrieEntry> {
    return this.iterate(undefined);
  }

  [Symbol.iterator](): IterableIterator<TrieEntry> {
    return this.iterate(undefined);
  }

  forEach(fn: (prefix: Prefix, value: number) => void): void {
    for (const e of this.iterate(undefined)) fn(e.prefix, e.value);
  }

  /**
   * Every stored value in entries() order, without the prefixes: no object per entry (for callers that keep the
   * prefix elsewhere, like the RIB's records; a full export to each new peer walks the table this way).
   */
  forEachValue(fn: (value: number) => void): void {
    if (this.defVal !== NONE) fn(this.defVal);
    const sc = new Int32Array(34); // chunk base
    const si = new Int32Array(34); // next ORDER index (or child slot, for a chunk without prefixes)
    const sm = new Int8Array(34); // 1: the chunk has no prefixes of its own, visit its 16 child slots only
    sc[0] = this.topBase;
    sm[0] = this.ownBits[this.topBase >> 4] === 0 ? 1 : 0;
    let sp = 1;
    while (sp > 0) {
      const f = sp - 1;
      if (si[f] >= (sm[f] === 1 ? 16 : 46)) {
        sp--;
        continue;
      }
      const o = sm[f] === 1 ? 30 + si[f]++ : ORDER[si[f]++];
      const c = sc[f];
      if (o < 30) {
        const ci = c >> 4;
        const bits = this.ownBits[ci];
        if (bits & (1 << o)) fn(this.vals[this.ownBlk[ci] + popcnt(bits & ((1 << o) - 1))]);
      } else {
        const e = this.tbl[c + o - 30];
        if (e <= -2) {
          const g = sp++;
          sc[g] = -2 - e;
          si[g] = 0;
          sm[g] = this.ownBits[sc[g] >> 4] === 0 ? 1 : 0;
        }
      }
    }
  }

  // ---- memory ----------------------------------------------------------------------------------------------------

  /** Bytes held by this trie's typed arrays (allocated capacity, not just the used part). */
  memoryBytes(): number {
    return (
      this.tbl.byteLength +
      this.ownBits.byteLength +
      this.ownBlk.byteLength +
      this.ownCap.byteLength +
      this.vals.byteLength +
      this.valFree.byteLength
    );
  }

  /** Bytes the live chunks and value words need (what memoryBytes() would be with no spare capacity). */
  usedBytes(): number {
    return this.liveChunks * (16 * 4 + 4 + 4 + 1) + (this.valTop - this.valFreeWords) * 4 + this.valFree.byteLength;
  }

  poolStats(): TriePoolStats {
    return {
      chunks: this.liveChunks,
      chunkCapacity: this.chunkCap,
      chunkHighWater: this.chunkTop,
      valueWords: this.valTop - this.valFreeWords,
      valueCapacity: this.vals.length,
      valueHighWater: this.valTop,
      freeValueWords: this.valFreeWords,
    };
  }

  /**
   * Renumber live chunks densely in depth-first order and trim every pool to fit. Worth calling after a bulk
   * load (it improves lookup locality and gives back the doubling slack); later inserts grow the pools again.
   */
  compact(): void {
    const live = this.liveChunks;
    const tbl = new Int32Array(live * 16);
    const ownBits = new Int32Array(live);
    const ownBlk = new Int32Array(live);
    const ownCap = new Uint8Array(live);
    let valWords = 0;
    for (let ci = 0; ci < this.chunkTop; ci++) if (this.ownCap[ci] > 0) valWords += popcnt(this.ownBits[ci]);
    // A little room on top (1/64) so that ordinary churn right after a compaction does not double the pool.
    const vals = new Int32Array(valWords + Math.max(64, valWords >> 6));
    let vTop = 0;
    let next = this.fixedChunks;
    const copyOwn = (from: number, to: number): void => {
      const bits = this.ownBits[from];
      ownBits[to] = bits;
      if (bits === 0) {
        ownBlk[to] = NONE;
        return;
      }
      const n = popcnt(bits);
      vals.set(this.vals.subarray(this.ownBlk[from], this.ownBlk[from] + n), vTop);
      ownBlk[to] = vTop;
      ownCap[to] = n;
      vTop += n;
    };
    // Breadth first: chunks end up grouped by depth (the upper levels, hit by most lookups, stay dense) and the
    // children of one chunk are adjacent.
    const qFrom = new Int32Array(live);
    const qTo = new Int32Array(live);
    let qTail = 0;
    for (let ci = 0; ci < this.fixedChunks; ci++) {
      copyOwn(ci, ci);
      qFrom[qTail] = ci;
      qTo[qTail++] = ci;
    }
    for (let qHead = 0; qHead < qTail; qHead++) {
      const from = qFrom[qHead];
      const to = qTo[qHead];
      for (let n = 0; n < 16; n++) {
        const e = this.tbl[from * 16 + n];
        const childFrom = (-2 - e) >> 4;
        if (e <= -2 && childFrom >= this.fixedChunks) {
          const childTo = next++;
          tbl[to * 16 + n] = -2 - childTo * 16;
          copyOwn(childFrom, childTo);
          qFrom[qTail] = childFrom;
          qTo[qTail++] = childTo;
        } else tbl[to * 16 + n] = e;
      }
    }
    this.tbl = tbl;
    this.ownBits = ownBits;
    this.ownBlk = ownBlk;
    this.ownCap = ownCap;
    this.vals = vals;
    this.chunkCap = live;
    this.chunkTop = next;
    this.chunkFree = NONE;
    this.valTop = vTop;
    this.valFree.fill(NONE);
    this.valFreeWords = 0;
    this.bumpedSinceCompact = Infinity; // exactly full now: the first time room runs out, compacting is right
    this.relink();
  }

  // ---- internals -------------------------------------------------------------------------------------------------

  private checkPrefix(p: Prefix): void {
    if (p.family !== this.family) throw new RangeError(`IPv${p.family} prefix given to an IPv${this.family} trie`);
  }

  /**
   * The fixed top levels are laid out by key, so a walk can start at the deepest fixed level at or above depth
   * `d` instead of following links down to it (four or five dependent loads saved per exact lookup or insert).
   */
  private fixedDepth(d: number): number {
    const deepest = this.rootBits - 4;
    return d < deepest ? d : deepest;
  }

  /** tbl base of the fixed chunk at `depth` (a fixed level) on the way to a key whose first word is `w0`. */
  private fixedBase(depth: number, w0: number): number {
    return depth === 0 ? this.topBase : (this.levelOffset[depth >> 2] + (w0 >>> (32 - depth))) * 16;
  }

  private loadKey(w0: number, w1: number, w2: number, w3: number, len: number): void {
    const kw = this.kw;
    kw[0] = w0 & wordMask(len, 0);
    kw[1] = w1 & wordMask(len, 1);
    kw[2] = w2 & wordMask(len, 2);
    kw[3] = w3 & wordMask(len, 3);
  }

  /** A Prefix of length `len` from the scratch key. */
  private makePrefix(len: number): Prefix {
    const kw = this.kw;
    return new Prefix(
      this.family,
      (kw[0] & wordMask(len, 0)) >>> 0,
      (kw[1] & wordMask(len, 1)) >>> 0,
      (kw[2] & wordMask(len, 2)) >>> 0,
      (kw[3] & wordMask(len, 3)) >>> 0,
      len,
    );
  }

  /** Value of the longest prefix owned by chunk `c` that covers slot `s`, or -1. */
  private ownedBest(c: number, s: number): number {
    const ci = c >> 4;
    const bits = this.ownBits[ci];
    if (bits === 0) return NONE;
    const m = bits & COVER_GT[s];
    if (m === 0) return NONE;
    const pos = 31 - Math.clz32(m); // longer positions have higher numbers
    return this.vals[this.ownBlk[ci] + popcnt(bits & ((1 << pos) - 1))];
  }

  /** A new inherited value `v` for chunk `c`: write it to every slot not covered by c's own prefixes. */
  private pushInto(c: number, v: number): void {
    const bits = this.ownBits[c >> 4];
    const t = this.tbl;
    for (let s = 0; s < 16; s++) {
      if (bits & COVER_GT[s]) continue;
      const e = t[c + s];
      if (e <= -2) this.pushInto(-2 - e, v);
      else t[c + s] = v;
    }
  }

  private hasChild(c: number): boolean {
    const t = this.tbl;
    for (let s = 0; s < 16; s++) if (t[c + s] <= -2) return true;
    return false;
  }

  /** Calls fn(len, value) for each stored prefix covering the key, shortest first, up to length maxLen. */
  private walkCovering(
    w0: number, w1: number, w2: number, w3: number, limit: number,
    fn: (len: number, value: number) => void,
  ): void {
    this.loadKey(w0, w1, w2, w3, limit);
    if (this.defVal !== NONE) fn(0, this.defVal);
    const kw = this.kw;
    let c = this.topBase;
    for (let d = 0; d < limit; d += 4) {
      const n = nibAt(kw, d);
      const ci = c >> 4;
      const bits = this.ownBits[ci];
      if (bits !== 0) {
        for (let k = 1; k <= 4 && d + k <= limit; k++) {
          const pos = (1 << k) - 2 + (n >> (4 - k));
          if (bits & (1 << pos)) fn(d + k, this.vals[this.ownBlk[ci] + popcnt(bits & ((1 << pos) - 1))]);
        }
      }
      const e = this.tbl[c + n];
      if (e > -2) break;
      c = -2 - e;
    }
  }

  /** Entries inside `within` (or all), in comparePrefix order; a depth-first walk with an explicit stack. */
  private *iterate(within: Prefix | undefined): Generator<TrieEntry, void, undefined> {
    const fam = this.family;
    const sc = new Int32Array(34); // chunk base
    const sd = new Int32Array(34); // depth
    const si = new Int32Array(34); // next ORDER index
    const se = new Int32Array(34); // end ORDER index
    const sm = new Int8Array(34); // 1: the chunk has no prefixes of its own, visit its 16 child slots only
    const sk = new Uint32Array(34 * 4); // key words of the chunk (bits below its depth)
    let sp = 0;
    if (this.count === 0) return;
    const len0 = within ? within.len : 0;
    if (len0 === 0) {
      if (this.defVal !== NONE) yield { prefix: new Prefix(fam, 0, 0, 0, 0, 0), value: this.defVal };
      sc[0] = this.topBase;
      sd[0] = 0;
      si[0] = 0;
      se[0] = 46;
      sp = 1;
    } else {
      const p = within!;
      this.loadKey(p.w0, p.w1, p.w2, p.w3, p.len);
      const kw = this.kw;
      const d = ((len0 - 1) >> 2) << 2;
      const k = len0 - d;
      let c = this.topBase;
      for (let depth = 0; depth < d; depth += 4) {
        const e = this.tbl[c + nibAt(kw, depth)];
        if (e > -2) return;
        c = -2 - e;
      }
      const pos = (1 << k) - 2 + (nibAt(kw, d) >> (4 - k));
      sc[0] = c;
      sd[0] = d;
      si[0] = SUB_START[pos];
      se[0] = SUB_END[pos];
      for (let i = 0; i < 4; i++) sk[i] = kw[i] & wordMask(d, i);
      sp = 1;
    }
    while (sp > 0) {
      const f = sp - 1;
      if (si[f] >= se[f]) {
        sp--;
        continue;
      }
      // A chunk without prefixes of its own only has children to visit (most of a wide root level is like that).
      const o = sm[f] === 1 ? 30 + si[f]++ : ORDER[si[f]++];
      const c = sc[f];
      const d = sd[f];
      const wi = d >>> 5;
      const shift = 28 - (d & 31);
      if (o < 30) {
        const ci = c >> 4;
        const bits = this.ownBits[ci];
        if (bits & (1 << o)) {
          const k = POS_K[o];
          const w = [sk[f * 4], sk[f * 4 + 1], sk[f * 4 + 2], sk[f * 4 + 3]];
          w[wi] = (w[wi] | ((POS_B[o] << (4 - k)) << shift)) >>> 0;
          const value = this.vals[this.ownBlk[ci] + popcnt(bits & ((1 << o) - 1))];
          yield { prefix: new Prefix(fam, w[0], w[1], w[2], w[3], d + k), value };
        }
      } else {
        const n = o - 30;
        const e = this.tbl[c + n];
        // Skip a child with nothing below it: only the fixed top levels have such chunks (others are collapsed),
        // and a 16-bit root has 4,096 of them, so a walk of a small table would visit them all (~6 ms).
        if (e <= -2 && !this.emptyChunk(-2 - e)) {
          const g = sp++;
          sc[g] = -2 - e;
          sd[g] = d + 4;
          si[g] = 0;
          sm[g] = this.ownBits[sc[g] >> 4] === 0 ? 1 : 0;
          se[g] = sm[g] === 1 ? 16 : 46;
          for (let i = 0; i < 4; i++) sk[g * 4 + i] = sk[f * 4 + i];
          sk[g * 4 + wi] = (sk[g * 4 + wi] | (n << shift)) >>> 0;
        }
      }
    }
  }

  /** The chunk holds no prefix and no child: nothing to visit below it. */
  private emptyChunk(base: number): boolean {
    if (this.ownBits[base >> 4] !== 0) return false;
    const tbl = this.tbl;
    for (let i = base; i < base + 16; i++) if (tbl[i] <= -2) return false;
    return true;
  }

  // ---- pools -----------------------------------------------------------------------------------------------------

  /** A chunk with all 16 slots set to `fill`; returns its tbl base. */
  private allocChunk(fill: number): number {
    let ci = this.chunkFree;
    if (ci !== NONE) this.chunkFree = this.tbl[ci * 16];
    else {
      if (this.chunkTop === this.chunkCap) this.growChunks();
      ci = this.chunkTop++;
    }
    const base = ci * 16;
    const tbl = this.tbl;
    for (let i = base; i < base + 16; i++) tbl[i] = fill; // a loop: fill() costs more than 16 stores
    this.ownBits[ci] = 0;
    this.ownBlk[ci] = NONE;
    this.ownCap[ci] = 0;
    this.liveChunks++;
    return base;
  }

  private freeChunk(base: number): void {
    const ci = base >> 4;
    this.tbl[base] = this.chunkFree;
    this.chunkFree = ci;
    this.liveChunks--;
  }

  private growChunks(): void {
    const cap = this.chunkCap * 2;
    const tbl = new Int32Array(cap * 16);
    tbl.set(this.tbl);
    this.tbl = tbl;
    const ob = new Int32Array(cap);
    ob.set(this.ownBits);
    this.ownBits = ob;
    const bl = new Int32Array(cap);
    bl.set(this.ownBlk);
    this.ownBlk = bl;
    const oc = new Uint8Array(cap);
    oc.set(this.ownCap);
    this.ownCap = oc;
    this.chunkCap = cap;
    this.relink();
  }

  private insertOwned(ci: number, pos: number, value: number): void {
    const bits = this.ownBits[ci];
    const n = popcnt(bits);
    const r = popcnt(bits & ((1 << pos) - 1));
    const cap0 = this.ownCap[ci];
    if (n === cap0 && n > 0 && this.valFree[n + 1] === NONE && this.ownBlk[ci] + n === this.valTop &&
        this.valTop < this.vals.length) {
      // No free block of the next size, and this one ends at the top of the pool: grow it in place (bulk loads
      // fill one chunk at a time, so this keeps the pool free of holes).
      this.valTop++;
      this.bumpedSinceCompact++;
      this.ownCap[ci] = n + 1;
    }
    if (n < this.ownCap[ci]) {
      const blk = this.ownBlk[ci];
      const v = this.vals;
      // Blocks hold at most 30 values: plain loops beat copyWithin's call overhead by far.
      for (let i = blk + n; i > blk + r; i--) v[i] = v[i - 1];
      v[blk + r] = value;
    } else {
      const nb = this.allocVals(n + 1); // may compact the pool: read this owner's block afterwards
      const blk = this.ownBlk[ci];
      const cap = this.ownCap[ci];
      const v = this.vals;
      if (n > 0) {
        for (let i = 0; i < r; i++) v[nb + i] = v[blk + i];
        for (let i = r; i < n; i++) v[nb + i + 1] = v[blk + i];
        this.freeVals(blk, cap);
      }
      v[nb + r] = value;
      this.ownBlk[ci] = nb;
      this.ownCap[ci] = n + 1;
    }
    this.ownBits[ci] = bits | (1 << pos);
  }

  private removeOwned(ci: number, pos: number): number {
    const bits = this.ownBits[ci];
    const n = popcnt(bits);
    const r = popcnt(bits & ((1 << pos) - 1));
    const blk = this.ownBlk[ci];
    const cap = this.ownCap[ci];
    const v = this.vals;
    const old = v[blk + r];
    this.ownBits[ci] = bits & ~(1 << pos);
    if (n === 1) {
      this.freeVals(blk, cap);
      this.ownBlk[ci] = NONE;
      this.ownCap[ci] = 0;
      return old;
    }
    v.copyWithin(blk + r, blk + r + 1, blk + n);
    // Move to a smaller free block when one is at hand; never take new pool space on a delete.
    const smaller = this.valFree[n - 1];
    if (cap > n - 1 && smaller !== NONE) {
      this.valFree[n - 1] = v[smaller];
      this.valFreeWords -= n - 1;
      v.copyWithin(smaller, blk, blk + n - 1);
      this.freeVals(blk, cap);
      this.ownBlk[ci] = smaller;
      this.ownCap[ci] = n - 1;
    }
    return old;
  }

  private allocVals(size: number): number {
    const head = this.valFree[size];
    if (head !== NONE) {
      this.valFree[size] = this.vals[head];
      this.valFreeWords -= size;
      return head;
    }
    if (this.valTop + size > this.vals.length) {
      // Compact rather than grow when that makes room, unless the last compaction was recent (then the pool is
      // really full, and compacting again and again would cost more than growing).
      const cap = this.vals.length;
      if (this.valTop - this.valFreeWords + size <= cap && this.bumpedSinceCompact >= cap >> 5) this.compactVals();
      if (this.valTop + size > this.vals.length) {
        const grown = new Int32Array(Math.max(this.vals.length * 2, this.valTop + size));
        grown.set(this.vals);
        this.vals = grown;
      }
    }
    const at = this.valTop;
    this.valTop += size;
    this.bumpedSinceCompact += size;
    return at;
  }

  private freeVals(blk: number, size: number): void {
    this.vals[blk] = this.valFree[size];
    this.valFree[size] = blk;
    this.valFreeWords += size;
  }

  /** Slide every live value block down to the start of the pool (same capacity), dropping free blocks. */
  private compactVals(): void {
    const fresh = new Int32Array(this.vals.length);
    let top = 0;
    for (let ci = 0; ci < this.chunkTop; ci++) {
      if (this.ownCap[ci] === 0) continue;
      const n = popcnt(this.ownBits[ci]);
      const blk = this.ownBlk[ci];
      const v = this.vals;
      for (let i = 0; i < n; i++) fresh[top + i] = v[blk + i];
      this.ownBlk[ci] = top;
      this.ownCap[ci] = n;
      top += n;
    }
    this.vals = fresh;
    this.valTop = top;
    this.valFree.fill(NONE);
    this.valFreeWords = 0;
    this.bumpedSinceCompact = 0;
  }
}
