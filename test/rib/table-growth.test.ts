// The RIB's per-family record table (src/rib/table.ts) as a full table loads and churns: every prefix stays
// findable (against a Map as the oracle), the exact-match index stays at most half full without growing past what
// the records need, and reading an UPDATE's index slots ahead (touchList) changes no answer.
import t from 'tap';
import fc from 'fast-check';
import { Table } from '../../src/rib/table.ts';
import { mulberry32 } from '../../src/rib/tablegen.ts';

const NONE = -1;

/** `n` distinct random IPv4 prefixes (masked to their length), as words and lengths. */
function randomPrefixes(n: number, seed: number): { words: Uint32Array; lens: Uint8Array } {
  const rnd = mulberry32(seed);
  const seen = new Set<string>();
  const words = new Uint32Array(n);
  const lens = new Uint8Array(n);
  for (let i = 0; i < n;) {
    const len = 8 + Math.floor(rnd() * 25);
    const w = (Math.floor(rnd() * 2 ** 32) & (len === 32 ? -1 : ~(-1 >>> len))) >>> 0;
    const k = `${w}/${len}`;
    if (seen.has(k)) continue;
    seen.add(k);
    words[i] = w;
    lens[i++] = len;
  }
  return { words, lens };
}

t.test('a table loading 400,000 prefixes finds every one, its index at most half full and at most 16 slots a record', async (t) => {
  const n = 400_000;
  const { words, lens } = randomPrefixes(n, 7);
  const table = new Table(4, undefined);
  const ids = new Int32Array(n);
  // In UPDATE-sized lists, read ahead as the ingest path does.
  for (let i = 0; i < n; i += 3) {
    const m = Math.min(3, n - i);
    table.touchList(words.subarray(i), lens.subarray(i), m);
    for (let j = i; j < i + m; j++) ids[j] = table.findOrAddWords(words[j], 0, 0, 0, lens[j]);
  }
  t.equal(table.live, n, 'one record per prefix');
  let wrong = 0;
  for (let i = 0; i < n; i++) if (table.findWords(words[i], 0, 0, 0, lens[i]) !== ids[i] || table.findOrAddWords(words[i], 0, 0, 0, lens[i]) !== ids[i]) wrong++;
  t.equal(wrong, 0, 'every prefix found again, as the same record');
  t.equal(table.live, n, 'finding again adds nothing');
  t.ok(table.indexSlots >= 2 * n, `index at most half full (${table.indexSlots} slots)`);
  t.ok(table.indexSlots <= 16 * n, `index no bigger than 16 slots a record (${table.indexSlots} slots)`);
  const other = randomPrefixes(1000, 99);
  let absent = 0;
  const held = new Set<string>();
  for (let i = 0; i < n; i++) held.add(`${words[i]}/${lens[i]}`);
  for (let i = 0; i < 1000; i++) {
    const found = table.findWords(other.words[i], 0, 0, 0, other.lens[i]);
    if ((found === NONE) === !held.has(`${other.words[i]}/${other.lens[i]}`)) absent++;
  }
  t.equal(absent, 1000, 'prefixes never added are not found, added ones are');
});

t.test('churn at a steady size rebuilds the index without growing it again and again, and agrees with a Map', async (t) => {
  const rnd = mulberry32(3);
  const pool = randomPrefixes(1_000_000, 11);
  const table = new Table(4, undefined);
  const oracle = new Map<string, number>(); // prefix -> record
  const key = (i: number) => `${pool.words[i]}/${pool.lens[i]}`;
  const liveIdx: number[] = [];
  let next = 0;
  const add = (i: number) => {
    oracle.set(key(i), table.findOrAddWords(pool.words[i], 0, 0, 0, pool.lens[i]));
    liveIdx.push(i);
  };
  while (next < 200_000) add(next++);
  const loaded = table.indexSlots;
  // 40 rounds of 20,000 out and 20,000 in: enough tombstones to fill the index to half and force rebuilds.
  let rebuilt = 0;
  let lastUsed = -1;
  for (let round = 0; round < 40; round++) {
    for (let k = 0; k < 20_000; k++) {
      const at = Math.floor(rnd() * liveIdx.length);
      const i = liveIdx[at];
      liveIdx[at] = liveIdx[liveIdx.length - 1];
      liveIdx.pop();
      table.remove(oracle.get(key(i))!);
      oracle.delete(key(i));
    }
    for (let k = 0; k < 20_000; k++) add(next++);
    const used = (table as unknown as { used: number }).used;
    if (used < lastUsed) rebuilt++;
    lastUsed = used;
  }
  t.ok(rebuilt > 0, `the churn rebuilt the index (${rebuilt} times)`);
  t.equal(table.live, oracle.size, 'live records as many as the oracle holds');
  let wrong = 0;
  for (const i of liveIdx) if (table.findWords(pool.words[i], 0, 0, 0, pool.lens[i]) !== oracle.get(key(i))) wrong++;
  t.equal(wrong, 0, 'every held prefix found as its record');
  let stale = 0;
  for (let i = 0; i < next; i++) if (!oracle.has(key(i)) && table.findWords(pool.words[i], 0, 0, 0, pool.lens[i]) !== NONE) stale++;
  t.equal(stale, 0, 'no removed prefix is found');
  // A rebuild leaves the live records at most a quarter of the slots: the table loaded to 0.38 full grows once.
  t.ok(table.indexSlots <= 2 * loaded, `tombstones make the index grow at most once (${loaded} -> ${table.indexSlots} slots)`);
});

t.test('reading the slots ahead changes no answer (IPv4 and IPv6)', async (t) => {
  const arbPrefix = (family: 4 | 6) => fc.record({
    w: fc.array(fc.nat({ max: 7 }), { minLength: 4, maxLength: 4 }), // few distinct values: repeats within a list
    len: fc.integer({ min: 0, max: family === 4 ? 32 : 128 }),
  });
  for (const family of [4, 6] as const) {
    fc.assert(fc.property(fc.array(fc.array(arbPrefix(family), { minLength: 1, maxLength: 6 }), { maxLength: 40 }), (lists) => {
      const a = new Table(family, undefined);
      const b = new Table(family, undefined);
      const wpr = family === 4 ? 1 : 4;
      for (const list of lists) {
        const words = new Uint32Array(list.length * wpr);
        const lens = new Uint8Array(list.length);
        list.forEach((p, i) => {
          for (let k = 0; k < wpr; k++) words[i * wpr + k] = p.w[k] * 0x1000000;
          lens[i] = p.len;
        });
        a.touchList(words, lens, list.length);
        for (let i = 0; i < list.length; i++) {
          const o = i * wpr;
          const ra = wpr === 1 ? a.findOrAddWords(words[i], 0, 0, 0, lens[i]) : a.findOrAddWords(words[o], words[o + 1], words[o + 2], words[o + 3], lens[i]);
          const rb = wpr === 1 ? b.findOrAddWords(words[i], 0, 0, 0, lens[i]) : b.findOrAddWords(words[o], words[o + 1], words[o + 2], words[o + 3], lens[i]);
          if (ra !== rb) return false;
        }
      }
      return a.live === b.live;
    }), { numRuns: 200 });
    t.pass(`IPv${family}: the same records, with and without reading ahead`);
  }
});

t.test('a table sent in prefix order is appended without the index, which is complete at the first lookup', async (t) => {
  const n = 100_000;
  const { words, lens } = randomPrefixes(n, 5);
  // (address, length) order, as a router walking its own table sends it.
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => words[a] - words[b] || lens[a] - lens[b]);
  const table = new Table(4, undefined);
  const ids = new Int32Array(n);
  for (const i of order) ids[i] = table.findOrAddWords(words[i], 0, 0, 0, lens[i]);
  t.equal(table.live, n, 'one record per prefix');
  t.equal(table.indexSlots, 1024, 'the index was not touched: no probe, no rebuild');
  t.equal(table.findOrAddWords(words[order[n - 1]], 0, 0, 0, lens[order[n - 1]]), ids[order[n - 1]], 'the last prefix again is the same record');
  let wrong = 0;
  for (let i = 0; i < n; i++) if (table.findWords(words[i], 0, 0, 0, lens[i]) !== ids[i]) wrong++;
  t.equal(wrong, 0, 'every prefix found as its record');
  t.ok(table.indexSlots >= 2 * n && table.indexSlots <= 8 * n, `the index built at its size at the first lookup (${table.indexSlots} slots)`);
  t.equal(table.live, n, 'looking up adds nothing');
});

t.test('appending past the greatest prefix agrees with a Map under any mix of ordered runs, repeats and removals', async (t) => {
  // A small universe, so runs overlap what is held, prefixes repeat, and removed records are recycled.
  const arbPrefix = fc.record({ w: fc.array(fc.nat({ max: 5 }), { minLength: 4, maxLength: 4 }), len: fc.nat({ max: 3 }) });
  const arbOp = fc.oneof(
    fc.record({ op: fc.constant('run' as const), ps: fc.array(arbPrefix, { minLength: 1, maxLength: 12 }) }),
    fc.record({ op: fc.constant('add' as const), ps: fc.array(arbPrefix, { minLength: 1, maxLength: 3 }) }),
    fc.record({ op: fc.constant('remove' as const), pick: fc.nat() }),
    fc.record({ op: fc.constant('find' as const), ps: fc.array(arbPrefix, { minLength: 1, maxLength: 3 }) }),
  );
  for (const family of [4, 6] as const) {
    const wpr = family === 4 ? 1 : 4;
    // Words spread over the whole uint32 range (the top bit too: the order is unsigned).
    const word = (v: number) => (v * 0x33333333) >>> 0;
    const wordsOf = (p: { w: number[] }) => [0, 1, 2, 3].map((k) => (k < wpr ? word(p.w[k]) : 0));
    const cmp = (a: { w: number[]; len: number }, b: { w: number[]; len: number }) => {
      const x = wordsOf(a);
      const y = wordsOf(b);
      for (let k = 0; k < 4; k++) if (x[k] !== y[k]) return x[k] - y[k];
      return a.len - b.len;
    };
    fc.assert(fc.property(fc.array(arbOp, { maxLength: 40 }), (ops) => {
      const table = new Table(family, undefined);
      const held = new Map<string, number>();
      const key = (p: { w: number[]; len: number }) => `${wordsOf(p).join('.')}/${p.len}`;
      const add = (p: { w: number[]; len: number }): boolean => {
        const [a, b, c, d] = wordsOf(p);
        const r = table.findOrAddWords(a, b, c, d, p.len);
        const k = key(p);
        const had = held.get(k);
        if (had !== undefined) return r === had;
        if ([...held.values()].includes(r)) return false; // a new prefix must get a record of its own
        held.set(k, r);
        return true;
      };
      for (const o of ops) {
        if (o.op === 'run') {
          for (const p of [...o.ps].sort(cmp)) if (!add(p)) return false;
        } else if (o.op === 'add') {
          for (const p of o.ps) if (!add(p)) return false;
        } else if (o.op === 'remove') {
          if (held.size === 0) continue;
          const [k, r] = [...held.entries()][o.pick % held.size];
          table.remove(r);
          held.delete(k);
        } else {
          for (const p of o.ps) {
            const [a, b, c, d] = wordsOf(p);
            if (table.findWords(a, b, c, d, p.len) !== (held.get(key(p)) ?? NONE)) return false;
          }
        }
        if (table.live !== held.size) return false;
      }
      for (const [k, r] of held) {
        const [ws, len] = k.split('/');
        const [a, b, c, d] = ws.split('.').map(Number);
        if (table.findWords(a, b, c, d, Number(len)) !== r) return false;
      }
      return true;
    }), { numRuns: 300 });
    t.pass(`IPv${family}: every answer the Map's`);
  }
});
