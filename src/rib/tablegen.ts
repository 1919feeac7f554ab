// Seeded synthetic routing tables with the shape of a real Internet table, for benchmarks and tests when the real
// dump is not at hand. Pure: the same options always give the same table.
//
// Shape: prefix lengths follow a real tier-1 table (IPv4: /24 59.6%, /22 12.0%, /23 10.7%, ...; IPv6: /48 47%,
// /32 14%, /44 9%, /40 8%, the rest over /29../64) and about half of all prefixes are nested under a shorter one.
// Output is sorted like a table dump (comparePrefix order) and has no duplicates.
import { PrefixList } from './prefixlist.ts';
import { Trie } from './trie.ts';

/** Prefix counts of the real table in ../shared/data/tier1-table-2023.txt.gz. */
export const REAL_TABLE_COUNTS = { v4: 901_899, v6: 160_147 } as const;

/** mulberry32: a tiny, fast, well-mixed 32-bit PRNG. Returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Length weights (percent). The IPv4 "shorter" 0.5% is spread like the real table's /8../15; the real table's
// sliver of /25../32 (mostly /32) gets 0.2%.
const V4_WEIGHTS: [number, number][] = [
  [24, 59.6], [22, 12.0], [23, 10.7], [21, 5.6], [20, 4.7], [19, 2.8], [16, 1.5], [18, 1.5], [17, 0.9],
  [8, 0.002], [9, 0.002], [10, 0.005], [11, 0.013], [12, 0.036], [13, 0.07], [14, 0.14], [15, 0.232],
  [25, 0.01], [26, 0.005], [27, 0.01], [28, 0.01], [29, 0.01], [30, 0.005], [31, 0.005], [32, 0.145],
];
const V6_WEIGHTS: [number, number][] = [
  [48, 47], [32, 14], [44, 9], [40, 8],
  [29, 2.7], [30, 0.4], [31, 0.2], [33, 1.8], [34, 1.6], [35, 0.7], [36, 3.7], [37, 0.5], [38, 1.0], [39, 0.9],
  [41, 0.6], [42, 1.4], [43, 0.6], [45, 1.0], [46, 1.9], [47, 2.0], [52, 0.1], [56, 0.2], [60, 0.1], [64, 0.2],
];
// How prefixes are placed (tuned so that a generated table needs about as many trie nodes as the real one and
// about half of its prefixes are nested):
//  - shortest first; each prefix is "nested" with probability `nest` (inside a random shorter prefix already
//    placed, at a random position), else "free-standing" (covered by nothing shorter);
//  - with probability `sibling` a prefix goes next to (1..maxStep units from) one of the same length and kind
//    placed before, else anywhere (free-standing: in unicast space; nested: in a random shorter prefix). Real
//    tables are clustered like this (consecutive assignments out of one allocation) and the clustering is what
//    sets the trie's node count: these settings give ~175K nodes for IPv4 and ~98K for IPv6, like the real table.
interface Shape {
  nest: number;
  sibling: number;
  maxStep: number;
}
const SHAPE: Record<4 | 6, Shape> = {
  4: { nest: 0.5, sibling: 0.95, maxStep: 2 },
  6: { nest: 0.55, sibling: 0.95, maxStep: 2 },
};
// IPv6 free-standing prefixes go into the RIR blocks, as real ones do: 2001::/16, 2400::/12 (APNIC),
// 2600::/12 (ARIN), 2800::/12 (LACNIC), 2a00::/12 (RIPE NCC), 2c00::/12 (AFRINIC).
const V6_BLOCKS: [number, number][] = [
  [0x20010000, 16], [0x24000000, 12], [0x26000000, 12], [0x28000000, 12], [0x2a000000, 12], [0x2c000000, 12],
];

export interface TableGenOptions {
  seed?: number;
  /** Number of IPv4 prefixes (default: as many as the real table). */
  v4?: number;
  /** Number of IPv6 prefixes (default: as many as the real table). */
  v6?: number;
}

export interface GeneratedTable {
  v4: PrefixList;
  v6: PrefixList;
}

export function generateTable(options: TableGenOptions = {}): GeneratedTable {
  const seed = options.seed ?? 1;
  const v4 = options.v4 ?? REAL_TABLE_COUNTS.v4;
  const v6 = options.v6 ?? REAL_TABLE_COUNTS.v6;
  for (const [name, n] of [['v4', v4], ['v6', v6]] as const) {
    if (!Number.isInteger(n) || n < 0 || n > 10_000_000) throw new RangeError(`${name} count must be 0..10000000, got ${n}`);
  }
  return { v4: generateFamily(4, v4, mulberry32(seed)), v6: generateFamily(6, v6, mulberry32(seed ^ 0x9e3779b9)) };
}

function sampleLengths(weights: [number, number][], n: number, rnd: () => number): Uint8Array {
  const total = weights.reduce((s, [, w]) => s + w, 0);
  const cum: number[] = [];
  let acc = 0;
  for (const [, w] of weights) cum.push((acc += w / total));
  const lens = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    let j = 0;
    while (j < cum.length - 1 && r >= cum[j]) j++;
    lens[i] = weights[j][0];
  }
  return lens.sort(); // shortest first, so every prefix can find shorter parents already placed
}

/** Set bits [from, to) of the 128-bit key `w` to random values (bits past `to` stay zero). */
function randomBits(w: Uint32Array, from: number, to: number, rnd: () => number): void {
  for (let k = 0; k < 4; k++) {
    const lo = Math.max(from, k * 32);
    const hi = Math.min(to, k * 32 + 32);
    if (lo >= hi) continue;
    const span = hi - lo;
    const shift = k * 32 + 32 - hi;
    const mask = span === 32 ? 0xffffffff : (((1 << span) - 1) << shift) >>> 0;
    const r = Math.floor(rnd() * 4294967296) >>> 0;
    w[k] = ((w[k] & ~mask) | (r & mask)) >>> 0;
  }
}

/** Add `delta` units of a /len prefix to the key; false if it leaves the address space. */
function addUnits(w: Uint32Array, len: number, delta: number): boolean {
  let k = (len - 1) >> 5;
  let v = w[k] + delta * 2 ** (32 * (k + 1) - len);
  while (true) {
    const carry = Math.floor(v / 4294967296);
    w[k] = v - carry * 4294967296;
    if (carry === 0) return true;
    if (k === 0) return false;
    k--;
    v = w[k] + carry;
  }
}

function inUniverse(family: 4 | 6, w: Uint32Array): boolean {
  if (family === 4) {
    const first = w[0] >>> 24;
    return first >= 1 && first <= 223 && first !== 10 && first !== 127;
  }
  return V6_BLOCKS.some(([b, l]) => ((w[0] ^ b) >>> (32 - l)) === 0);
}

function generateFamily(family: 4 | 6, n: number, rnd: () => number): PrefixList {
  const shape = SHAPE[family];
  const lens = sampleLengths(family === 4 ? V4_WEIGHTS : V6_WEIGHTS, n, rnd);
  const placed = new PrefixList(family, n);
  // Prefixes of the current length, free-standing and nested, to place siblings next to.
  const free = new PrefixList(family, n);
  const inner = new PrefixList(family, n);
  // The prefixes placed so far: refuses duplicates and keeps free-standing prefixes out of shorter ones.
  const trie = new Trie(family);
  const w = new Uint32Array(4);

  const universe = (len: number): void => {
    if (family === 4) {
      let first: number;
      do first = 1 + Math.floor(rnd() * 223);
      while (first === 10 || first === 127);
      w[0] = (first << 24) >>> 0;
      w[1] = w[2] = w[3] = 0;
      randomBits(w, 8, len, rnd);
    } else {
      const [base, blen] = V6_BLOCKS[Math.floor(rnd() * V6_BLOCKS.length)];
      w[0] = base;
      w[1] = w[2] = w[3] = 0;
      randomBits(w, blen, len, rnd);
    }
  };

  let firstOfLen = 0; // index in `placed` of the first prefix with the current length: everything before is shorter
  let curLen = -1;
  for (let i = 0; i < n; i++) {
    const len = lens[i];
    if (len !== curLen) {
      curLen = len;
      firstOfLen = placed.count;
      free.count = 0;
      inner.count = 0;
    }
    let nested = firstOfLen > 0 && rnd() < shape.nest;
    for (let attempt = 0; ; attempt++) {
      if (nested) {
        if (inner.count > 0 && rnd() < shape.sibling) {
          // Next to another nested prefix of this length; still nested if something shorter covers it.
          const s = Math.floor(rnd() * inner.count);
          for (let k = 0; k < 4; k++) w[k] = inner.word(s, k);
          const step = 1 + Math.floor(rnd() * shape.maxStep);
          if (!addUnits(w, len, rnd() < 0.5 ? -step : step) || trie.lpmWords(w[0], w[1], w[2], w[3]) < 0) continue;
        } else {
          // Inside a random shorter prefix (uniform over those placed, so common lengths are common parents).
          const p = Math.floor(rnd() * firstOfLen);
          for (let k = 0; k < 4; k++) w[k] = placed.word(p, k);
          randomBits(w, placed.lens[p], len, rnd);
        }
        if (trie.getWords(w[0], w[1], w[2], w[3], len) < 0) {
          inner.push(w[0], w[1], w[2], w[3], len);
          break;
        }
        if (attempt > 16) nested = false; // crowded parents: stand free instead
        continue;
      }
      if (free.count > 0 && rnd() < shape.sibling) {
        const s = Math.floor(rnd() * free.count);
        for (let k = 0; k < 4; k++) w[k] = free.word(s, k);
        const step = 1 + Math.floor(rnd() * shape.maxStep);
        if (!addUnits(w, len, rnd() < 0.5 ? -step : step) || !inUniverse(family, w)) continue;
      } else universe(len);
      if (trie.lpmWords(w[0], w[1], w[2], w[3]) < 0) {
        free.push(w[0], w[1], w[2], w[3], len);
        break;
      }
      // Covered: try elsewhere; after many tries accept it nested (never a duplicate).
      if (attempt > 64 && trie.getWords(w[0], w[1], w[2], w[3], len) < 0) break;
    }
    trie.insertWords(w[0], w[1], w[2], w[3], len, placed.count);
    placed.push(w[0], w[1], w[2], w[3], len);
  }
  return sortList(placed);
}

/** The list in comparePrefix order (address words, then length). */
function sortList(list: PrefixList): PrefixList {
  const n = list.count;
  const out = new PrefixList(list.family, n);
  if (list.family === 4) {
    // Address * 64 + length is exact in a double and sorts natively.
    const keys = new Float64Array(n);
    for (let i = 0; i < n; i++) keys[i] = list.words[i] * 64 + list.lens[i];
    keys.sort();
    for (let i = 0; i < n; i++) out.push(Math.floor(keys[i] / 64), 0, 0, 0, keys[i] % 64);
    return out;
  }
  const idx = Array.from({ length: n }, (_, i) => i);
  const wd = list.words;
  idx.sort((a, b) => wd[a * 4] - wd[b * 4] || wd[a * 4 + 1] - wd[b * 4 + 1] || wd[a * 4 + 2] - wd[b * 4 + 2] ||
    wd[a * 4 + 3] - wd[b * 4 + 3] || list.lens[a] - list.lens[b]);
  for (const i of idx) out.push(wd[i * 4], wd[i * 4 + 1], wd[i * 4 + 2], wd[i * 4 + 3], list.lens[i]);
  return out;
}
