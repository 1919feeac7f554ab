// A per-session cache of decoded AS paths, keyed by their wire bytes.
//
// A full table has ~350k distinct attribute sets but far fewer distinct AS paths (a few thousand to a few hundred
// thousand). Decoding a path means arrays per segment, normalising, and then walking it again for its length,
// neighbour AS and hash whenever a record is built; with the wire bytes as the key all of that happens once per
// distinct path, and the records that share a path share one frozen object. The bytes live in one arena and the
// index is an open-addressing table of entry numbers, so a hit touches two or three cache lines and allocates
// nothing. The same bytes always decode to the same path, so an entry never goes stale; the cache is simply
// emptied when it reaches its size limit (records keep their paths).
import { SegmentType, asPathFacts, type AsPath, type AsPathFacts } from '../../rib/attrs.ts';

const MAX_ENTRIES = 1 << 16;
/**
 * Also emptied past this many octets of paths: the decoded paths (8-octet numbers per ASN) cost a few times their
 * wire bytes, and a peer sending many long distinct paths (the live fuzzer does) would otherwise hold hundreds of
 * MB per session under the entry limit alone. 65,536 typical paths (~30 octets) are ~2 MB: the entry limit comes
 * first for real tables.
 */
const MAX_ARENA = 8 << 20;
const EMPTY = -1;

export class AsPathCache {
  // Sized for a few hundred paths and doubled as needed (up to MAX_ENTRIES): a daemon with a hundred small peers
  // must not pay a full table's cache per session.
  private index = new Int32Array(512).fill(EMPTY); // load <= 1/2
  private mask = 511;
  private hashes = new Int32Array(256);
  private offsets = new Int32Array(256);
  private lengths = new Uint16Array(256);
  /** 1 when the entry's path has an AS_CONFED_SEQUENCE or AS_CONFED_SET segment (checked once per path, not per UPDATE). */
  private confeds = new Uint8Array(256);
  private arena = new Uint8Array(4096);
  private arenaTop = 0;
  private readonly paths: AsPath[] = [];
  private readonly facts: AsPathFacts[] = [];
  private n = 0;

  /** Entries held. */
  get size(): number {
    return this.n;
  }

  /** The entry for the value b[s..e) (whose hashBytes is `h`), or -1. */
  find(b: Uint8Array, s: number, e: number, h: number): number {
    const len = e - s;
    for (let i = h & this.mask; ; i = (i + 1) & this.mask) {
      const k = this.index[i];
      if (k === EMPTY) return EMPTY;
      if (this.hashes[k] !== h || this.lengths[k] !== len) continue;
      const a = this.arena;
      const o = this.offsets[k];
      let j = 0;
      while (j < len && a[o + j] === b[s + j]) j++;
      if (j === len) return k;
    }
  }

  path(k: number): AsPath {
    return this.paths[k];
  }

  factsOf(k: number): AsPathFacts {
    return this.facts[k];
  }

  /** Whether the entry's path carries confederation segments. */
  confed(k: number): boolean {
    return this.confeds[k] === 1;
  }

  /** Remember that b[s..e) (hash `h`, at most 65,535 octets: an attribute value) decodes to `path`; returns the entry. */
  add(b: Uint8Array, s: number, e: number, h: number, path: AsPath): number {
    const len = e - s;
    if (this.n === MAX_ENTRIES || this.arenaTop + len > MAX_ARENA) this.clear();
    else if (this.n === this.hashes.length) this.grow();
    if (this.arenaTop + len > this.arena.length) {
      const bigger = new Uint8Array(Math.max(this.arena.length * 2, this.arenaTop + len));
      bigger.set(this.arena.subarray(0, this.arenaTop));
      this.arena = bigger;
    }
    const k = this.n++;
    this.arena.set(b.subarray(s, e), this.arenaTop);
    this.offsets[k] = this.arenaTop;
    this.lengths[k] = len;
    this.hashes[k] = h;
    this.arenaTop += len;
    this.paths[k] = path;
    this.facts[k] = asPathFacts(path);
    this.confeds[k] = hasConfedSegment(path) ? 1 : 0;
    let i = h & this.mask;
    while (this.index[i] !== EMPTY) i = (i + 1) & this.mask;
    this.index[i] = k;
    return k;
  }

  private grow(): void {
    const cap = this.hashes.length * 2;
    const widen = <T extends Int32Array | Uint16Array | Uint8Array>(a: T, make: (n: number) => T): T => {
      const b = make(cap);
      b.set(a);
      return b;
    };
    this.hashes = widen(this.hashes, (n) => new Int32Array(n));
    this.offsets = widen(this.offsets, (n) => new Int32Array(n));
    this.lengths = widen(this.lengths, (n) => new Uint16Array(n));
    this.confeds = widen(this.confeds, (n) => new Uint8Array(n));
    this.index = new Int32Array(cap * 2).fill(EMPTY);
    this.mask = cap * 2 - 1;
    for (let k = 0; k < this.n; k++) {
      let i = this.hashes[k] & this.mask;
      while (this.index[i] !== EMPTY) i = (i + 1) & this.mask;
      this.index[i] = k;
    }
  }

  clear(): void {
    this.index.fill(EMPTY);
    this.paths.length = 0;
    this.facts.length = 0;
    this.n = 0;
    this.arenaTop = 0;
  }
}

function hasConfedSegment(path: AsPath): boolean {
  for (const g of path) if (g.type === SegmentType.AS_CONFED_SEQUENCE || g.type === SegmentType.AS_CONFED_SET) return true;
  return false;
}

/** FNV-1a over b[s..e), as a small integer. */
export function hashBytes(b: Uint8Array, s: number, e: number): number {
  let h = 0x811c9dc5 | 0;
  for (let i = s; i < e; i++) h = Math.imul(h ^ b[i], 0x01000193);
  return h;
}
