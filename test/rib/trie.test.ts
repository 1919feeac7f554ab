// Property tests of the radix trie against a brute-force oracle (a plain array of prefixes).
import t from 'tap';
import fc from 'fast-check';
import {
  IP, Prefix, type Family, comparePrefix, parseIP, parsePrefix, prefixContainsIP, prefixContainsPrefix, prefixEquals,
  prefixOf, wordMask,
} from '../../src/net/ip.ts';
import { Trie, type TrieEntry } from '../../src/rib/trie.ts';

// ---- arbitraries: small address spaces so prefixes nest and collide a lot ------------------------------------

const u32 = fc.integer({ min: 0, max: 0xffffffff });

// IPv4 words: mostly inside 10.0.0.0/16, sometimes anywhere.
const v4Word = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 0xffff }).map((x) => (0x0a000000 | x) >>> 0) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xff }).map((x) => (0x0a000000 | (x << 8) | x) >>> 0) },
  { weight: 1, arbitrary: u32 },
);
// IPv6 words: a few shared upper halves, low words from small sets, so long prefixes collide too.
const v6Words = fc.tuple(
  fc.constantFrom(0x20010db8, 0x20010db9, 0, 0xffffffff),
  fc.oneof(fc.constantFrom(0, 1, 0x80000000), u32),
  fc.oneof(fc.constantFrom(0, 0x12345678), u32),
  fc.oneof(fc.constantFrom(0, 1, 2, 3), fc.integer({ min: 0, max: 255 }), u32),
);
const v4Len = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 16, max: 32 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 32 }) },
);
const v6Len = fc.oneof(
  { weight: 2, arbitrary: fc.integer({ min: 28, max: 64 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 128 }) },
  { weight: 1, arbitrary: fc.integer({ min: 120, max: 128 }) },
);

function ipArb(family: Family): fc.Arbitrary<IP> {
  return family === 4 ? v4Word.map((w) => new IP(4, w)) : v6Words.map(([a, b, c, d]) => new IP(6, a, b, c, d));
}
function prefixArb(family: Family): fc.Arbitrary<Prefix> {
  return fc.tuple(ipArb(family), family === 4 ? v4Len : v6Len).map(([ip, len]) => prefixOf(ip, len));
}

type Op = { del: boolean; idx: number; value: number };
function scenarioArb(family: Family) {
  return fc.record({
    rootBits: fc.oneof({ weight: 7, arbitrary: fc.constantFrom(4, 8, 16) }, { weight: 1, arbitrary: fc.constant(20) }),
    pool: fc.array(prefixArb(family), { minLength: 1, maxLength: 40 }),
    ops: fc.array(
      fc.record({ del: fc.integer({ min: 0, max: 2 }).map((x) => x === 0), idx: fc.nat(), value: fc.integer({ min: 0, max: 1000 }) }),
      { maxLength: 120 },
    ),
    queries: fc.array(ipArb(family), { maxLength: 20 }),
  });
}

// ---- oracle ----------------------------------------------------------------------------------------------------

class Oracle {
  entries: TrieEntry[] = [];
  find(p: Prefix): number {
    return this.entries.findIndex((e) => prefixEquals(e.prefix, p));
  }
  insert(p: Prefix, v: number): number {
    const i = this.find(p);
    if (i >= 0) {
      const old = this.entries[i].value;
      this.entries[i].value = v;
      return old;
    }
    this.entries.push({ prefix: p, value: v });
    return -1;
  }
  delete(p: Prefix): number {
    const i = this.find(p);
    if (i < 0) return -1;
    const old = this.entries[i].value;
    this.entries.splice(i, 1);
    return old;
  }
  sorted(list = this.entries): TrieEntry[] {
    return [...list].sort((a, b) => comparePrefix(a.prefix, b.prefix));
  }
  lpm(ip: IP): TrieEntry | undefined {
    let best: TrieEntry | undefined;
    for (const e of this.entries) if (prefixContainsIP(e.prefix, ip) && (!best || e.prefix.len > best.prefix.len)) best = e;
    return best;
  }
  covering(x: Prefix): TrieEntry[] {
    return this.entries.filter((e) => prefixContainsPrefix(e.prefix, x)).sort((a, b) => a.prefix.len - b.prefix.len);
  }
  coveredBy(q: Prefix): TrieEntry[] {
    return this.sorted(this.entries.filter((e) => prefixContainsPrefix(q, e.prefix)));
  }
}

const show = (list: TrieEntry[] | undefined) => (list ?? []).map((e) => `${e.prefix}=${e.value}`);
const hostOf = (ip: IP) => prefixOf(ip, ip.family === 4 ? 32 : 128);

function rawLpm(trie: Trie, ip: IP): number {
  return ip.family === 4 ? trie.lpm4(ip.w0) : trie.lpm6(ip.w0, ip.w1, ip.w2, ip.w3);
}

/** Compare every query the trie answers with the oracle. */
function checkAll(trie: Trie, oracle: Oracle, queries: IP[], pool: Prefix[]): void {
  if (trie.size !== oracle.entries.length) throw new Error(`size ${trie.size} != ${oracle.entries.length}`);
  const all = show(oracle.sorted());
  const it = show([...trie.entries()]);
  if (JSON.stringify(it) !== JSON.stringify(all)) throw new Error(`iteration ${it} != ${all}`);
  for (const ip of [...queries, ...pool.map((p) => p.ip)]) {
    const want = oracle.lpm(ip);
    const raw = rawLpm(trie, ip);
    if (raw !== (want ? want.value : -1)) throw new Error(`lpm raw ${ip}: ${raw} != ${want?.value}`);
    const got = trie.lpm(ip);
    if (JSON.stringify(show(got && [got])) !== JSON.stringify(show(want && [want]))) {
      throw new Error(`lpm ${ip}: ${show(got && [got])} != ${show(want && [want])}`);
    }
    const cov = show(trie.covering(ip));
    const wantCov = show(oracle.covering(hostOf(ip)));
    if (JSON.stringify(cov) !== JSON.stringify(wantCov)) throw new Error(`covering ${ip}: ${cov} != ${wantCov}`);
  }
  // Batch lookups agree with single ones (enough addresses to use the lock-step groups and the remainder).
  const ips = [...queries, ...pool.map((p) => p.ip), ...queries, ...pool.map((p) => p.ip)];
  const out = new Int32Array(ips.length);
  if (trie.family === 4) trie.lpm4Batch(Uint32Array.from(ips, (ip) => ip.w0), out);
  else trie.lpm6Batch(Uint32Array.from(ips.flatMap((ip) => [ip.w0, ip.w1, ip.w2, ip.w3])), out);
  ips.forEach((ip, i) => {
    if (out[i] !== rawLpm(trie, ip)) throw new Error(`batch lpm ${ip}: ${out[i]} != ${rawLpm(trie, ip)}`);
  });
  for (const p of pool) {
    const want = oracle.find(p) >= 0 ? oracle.entries[oracle.find(p)].value : -1;
    if (trie.get(p) !== want) throw new Error(`get ${p}: ${trie.get(p)} != ${want}`);
    const cov = show(trie.covering(p));
    const wantCov = show(oracle.covering(p));
    if (JSON.stringify(cov) !== JSON.stringify(wantCov)) throw new Error(`covering ${p}: ${cov} != ${wantCov}`);
    const inside = show(trie.coveredBy(p));
    const wantInside = show(oracle.coveredBy(p));
    if (JSON.stringify(inside) !== JSON.stringify(wantInside)) throw new Error(`coveredBy ${p}: ${inside} != ${wantInside}`);
  }
}

for (const family of [4, 6] as Family[]) {
  t.test(`IPv${family}: random inserts and deletes match the oracle`, async (t) => {
    fc.assert(
      fc.property(scenarioArb(family), ({ rootBits, pool, ops, queries }) => {
        const trie = new Trie(family, { rootBits });
        const oracle = new Oracle();
        for (const op of ops) {
          const p = pool[op.idx % pool.length];
          const got = op.del ? trie.delete(p) : trie.insert(p, op.value);
          const want = op.del ? oracle.delete(p) : oracle.insert(p, op.value);
          if (got !== want) throw new Error(`${op.del ? 'delete' : 'insert'} ${p} returned ${got}, want ${want}`);
          // LPM on the pool addresses after every step catches stale pushed-down values early.
          for (const q of pool) {
            const w = oracle.lpm(q.ip);
            if (rawLpm(trie, q.ip) !== (w ? w.value : -1)) throw new Error(`lpm ${q.ip} after ${op.del ? 'del' : 'ins'} ${p}`);
          }
        }
        checkAll(trie, oracle, queries, pool);
        // Compaction keeps every answer and never needs more memory.
        const before = trie.memoryBytes();
        trie.compact();
        if (trie.memoryBytes() > before) throw new Error('compact grew memory');
        checkAll(trie, oracle, queries, pool);
        // And the trie keeps working after compaction.
        for (const p of pool.slice(0, 5)) {
          trie.insert(p, 7);
          oracle.insert(p, 7);
        }
        checkAll(trie, oracle, queries, pool);
      }),
      { numRuns: 300 },
    );
  });

  t.test(`IPv${family}: deleting everything gives all pool space back; re-inserting does not grow pools`, async (t) => {
    fc.assert(
      fc.property(fc.array(prefixArb(family), { minLength: 1, maxLength: 80 }), fc.constantFrom(4, 8, 16), (list, rootBits) => {
        const trie = new Trie(family, { rootBits });
        const empty = trie.poolStats();
        list.forEach((p, i) => trie.insert(p, i));
        const full = trie.poolStats();
        const mem = trie.memoryBytes();
        for (const p of list) trie.delete(p);
        const cleared = trie.poolStats();
        if (trie.size !== 0 || cleared.chunks !== empty.chunks || cleared.valueWords !== 0) {
          throw new Error(`not empty after delete-all: ${JSON.stringify(cleared)}`);
        }
        if (cleared.chunkHighWater > full.chunkHighWater || cleared.valueHighWater > full.valueHighWater) {
          throw new Error('deletes took new pool space');
        }
        // Re-inserting (in the same or another order) never grows the typed arrays, and free lists keep the
        // high-water marks bounded round after round (no leak).
        let order = list;
        for (let round = 0; round < 5; round++) {
          order.forEach((p) => trie.insert(p, 1));
          const again = trie.poolStats();
          if (trie.memoryBytes() > mem || again.chunkCapacity > full.chunkCapacity || again.valueCapacity > full.valueCapacity) {
            throw new Error(`re-insert grew pools: ${JSON.stringify(full)} -> ${JSON.stringify(again)}`);
          }
          if (again.chunkHighWater > full.chunkHighWater || again.valueHighWater > 2 * full.valueHighWater + 60) {
            throw new Error(`high water creeping: ${JSON.stringify(full)} -> ${JSON.stringify(again)}`);
          }
          for (const p of order) trie.delete(p);
          if (trie.size !== 0 || trie.poolStats().chunks !== empty.chunks) throw new Error('not empty');
          order = [...order].reverse();
        }
      }),
      { numRuns: 200 },
    );
    t.pass('pools stable');
  });
}

t.test('churn with random order does not grow pools without bound', async (t) => {
  // Insert/delete many random subsets of a fixed set: memory must settle, not creep up.
  let seed = 12345;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const set: Prefix[] = [];
  for (let i = 0; i < 3000; i++) {
    const len = 16 + Math.floor(rnd() * 17);
    set.push(prefixOf(new IP(4, (0x0a000000 | Math.floor(rnd() * 0x10000) << 0) >>> 0), len));
  }
  const trie = new Trie(4);
  set.forEach((p, i) => trie.insert(p, i));
  const mem = trie.memoryBytes();
  let peak = mem;
  for (let round = 0; round < 20; round++) {
    for (const p of set) if (rnd() < 0.5) trie.delete(p);
    for (const p of set) if (rnd() < 0.7) trie.insert(p, 1);
    peak = Math.max(peak, trie.memoryBytes());
  }
  t.ok(peak <= mem * 2, `memory stays bounded (${mem} -> peak ${peak})`);
});

t.test('examples', async (t) => {
  const trie = new Trie(4);
  const ps = ['0.0.0.0/0', '10.0.0.0/8', '10.1.0.0/16', '10.1.2.0/24', '10.1.2.128/25', '10.1.2.129/32'];
  ps.forEach((p, i) => t.equal(trie.insert(parsePrefix(p), i), -1));
  t.equal(trie.insert(parsePrefix('10.1.0.0/16'), 9), 2, 'insert returns the previous value');
  t.equal(trie.size, 6);
  t.equal(trie.lpm4(parseIP('10.1.2.130').w0), 4);
  t.equal(trie.lpm4(parseIP('10.1.2.130').w0 | 0), 4, 'signed int32 addresses work too');
  t.equal(trie.lpm(parseIP('10.1.3.1'))?.prefix.toString(), '10.1.0.0/16');
  t.equal(trie.lpm(parseIP('10.1.3.1'))?.value, 9);
  t.same(trie.covering(parsePrefix('10.1.2.128/26')).map((e) => `${e.prefix}`),
    ['0.0.0.0/0', '10.0.0.0/8', '10.1.0.0/16', '10.1.2.0/24', '10.1.2.128/25']);
  t.same(trie.coveredBy(parsePrefix('10.1.2.0/24')).map((e) => `${e.prefix}`),
    ['10.1.2.0/24', '10.1.2.128/25', '10.1.2.129/32']);
  t.equal(trie.delete(parsePrefix('0.0.0.0/0')), 0);
  t.equal(trie.lpm4(parseIP('11.0.0.1').w0), -1);
  t.equal(trie.delete(parsePrefix('0.0.0.0/0')), -1, 'deleting a missing prefix returns -1');
  t.throws(() => trie.insert(parsePrefix('::/0'), 1), RangeError);
  t.throws(() => trie.insert(parsePrefix('1.0.0.0/8'), -1), RangeError);
  t.throws(() => new Trie(4, { rootBits: 10 }), RangeError);

  const t6 = new Trie(6);
  t6.insert(parsePrefix('2001:db8::/32'), 1);
  t6.insert(parsePrefix('2001:db8:0:1::/64'), 2);
  t6.insert(parsePrefix('2001:db8:0:1::5/128'), 3);
  const a = parseIP('2001:db8:0:1::5');
  t.equal(t6.lpm6(a.w0, a.w1, a.w2, a.w3), 3);
  t.equal(t6.lpm(parseIP('2001:db8:0:1::6'))?.prefix.toString(), '2001:db8:0:1::/64');
  t.equal(t6.lpm(parseIP('2001:db9::'))?.prefix, undefined);
  t.same([...t6].map((e) => `${e.prefix}`), ['2001:db8::/32', '2001:db8:0:1::/64', '2001:db8:0:1::5/128']);
  t.equal(wordMask(0, 0), 0);
});

t.test('a big IPv4 trie widens its root table and keeps every answer', async (t) => {
  const { generateTable } = await import('../../src/rib/tablegen.ts');
  const { v4 } = generateTable({ seed: 3, v4: 140_000, v6: 0 });
  const wide = new Trie(4); // widens to a 20-bit root at 2^15 prefixes
  const narrow = new Trie(4, { maxRootBits: 16 });
  for (let i = 0; i < v4.count; i++) {
    wide.insertWords(v4.words[i], 0, 0, 0, v4.lens[i], i);
    narrow.insertWords(v4.words[i], 0, 0, 0, v4.lens[i], i);
  }
  t.equal(wide.rootWidth, 20, 'the big trie has a 20-bit root');
  t.equal(narrow.rootWidth, 16);
  t.equal(new Trie(4, { expectedSize: 1e6 }).rootWidth, 20, 'expectedSize picks the wide root up front');
  t.equal(new Trie(6, { expectedSize: 1e6 }).rootWidth, 16, 'IPv6 keeps 16 bits');
  t.equal(wide.size, v4.count);
  let diff = 0;
  let seed = 99;
  for (let i = 0; i < 200_000; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const a = i & 1 ? seed : (v4.words[seed % v4.count] | (seed & 0xff)) >>> 0;
    if (wide.lpm4(a) !== narrow.lpm4(a)) diff++;
  }
  t.equal(diff, 0, 'same LPM answers');
  const a = [...wide.entries()].map((e) => `${e.prefix}=${e.value}`);
  const b = [...narrow.entries()].map((e) => `${e.prefix}=${e.value}`);
  t.same(a, b, 'same entries in the same order');
  for (let i = 0; i < v4.count; i += 2) wide.deleteWords(v4.words[i], 0, 0, 0, v4.lens[i]);
  t.equal(wide.size, v4.count >> 1);
  t.equal(wide.get(v4.prefix(1)), 1);
  t.equal(wide.get(v4.prefix(0)), -1);
  t.throws(() => new Trie(4, { rootBits: 16, maxRootBits: 8 }), RangeError);
});
