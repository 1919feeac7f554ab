// The RIB finds prefixes through a hash index and puts new records into the trie only when the trie is read (a
// longest-prefix match, a walk in prefix order), sorted. These tests read the trie between random announcements,
// withdrawals and flushes, so records are queued, withdrawn while queued, recycled and queued again, and compare every
// answer with a plain oracle: the prefixes held, and the longest of them that covers an address.
import t from 'tap';
import fc from 'fast-check';
import { IP, type Prefix, formatPrefix, parseIP, parsePrefix, prefixOf } from '../../src/net/ip.ts';
import { asSequence, makeAttrs } from '../../src/rib/attrs.ts';
import type { PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib } from '../../src/rib/rib.ts';

const peer = (n: number): PeerInfo => ({ type: 'ebgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 + n });
const attrs = makeAttrs({ nextHop: parseIP('192.0.2.254'), asPath: [asSequence(65001)] });

/** Whether `p` covers address words w (first `p.len` bits equal). */
function covers(p: Prefix, ip: IP): boolean {
  if (p.family !== ip.family) return false;
  const pw = [p.w0, p.w1, p.w2, p.w3];
  const aw = [ip.w0, ip.w1, ip.w2, ip.w3];
  for (let bit = 0; bit < p.len; bit++) {
    const k = bit >>> 5;
    const m = 1 << (31 - (bit & 31));
    if (((pw[k] & m) !== 0) !== ((aw[k] & m) !== 0)) return false;
  }
  return true;
}

function oracleLpm(held: Map<string, Prefix>, ip: IP): string | undefined {
  let best: Prefix | undefined;
  for (const p of held.values()) if (covers(p, ip) && (!best || p.len > best.len)) best = p;
  return best && formatPrefix(best);
}

// Nested and neighbouring prefixes of both families, so matches fall through to shorter covers.
const UNIVERSE = [
  '10.0.0.0/8', '10.0.0.0/16', '10.0.0.0/24', '10.0.1.0/24', '10.0.0.128/25', '10.0.0.1/32', '10.1.0.0/16',
  '10.128.0.0/9', '0.0.0.0/0', '192.168.0.0/16', '192.168.1.0/24', '172.16.0.0/12',
  '2001:db8::/32', '2001:db8::/48', '2001:db8:0:1::/64', '2001:db8::1/128', '::/0', 'fd00::/8',
].map(parsePrefix);
const ADDRS = ['10.0.0.1', '10.0.0.200', '10.0.1.7', '10.1.2.3', '10.200.0.1', '11.0.0.1', '192.168.1.1', '192.168.2.1',
  '172.20.0.1', '2001:db8::1', '2001:db8:0:1::5', '2001:db8:1::1', 'fd00::1', '2002::1'].map(parseIP);

type Op = { op: 'ann' | 'wd'; src: number; p: number } | { op: 'flush' } | { op: 'lpm'; a: number } | { op: 'walk' };

const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant('ann' as const), src: fc.integer({ min: 1, max: 2 }), p: fc.nat(UNIVERSE.length - 1) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('wd' as const), src: fc.integer({ min: 1, max: 2 }), p: fc.nat(UNIVERSE.length - 1) }) },
  { weight: 3, arbitrary: fc.constant({ op: 'flush' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('lpm' as const), a: fc.nat(ADDRS.length - 1) }) },
  { weight: 1, arbitrary: fc.constant({ op: 'walk' as const }) },
);

t.test('lookups, matches and walks agree with the oracle while records are queued, withdrawn and reused', async (t) => {
  let queuedThenGone = 0;
  fc.assert(
    fc.property(fc.array(arbOp, { minLength: 5, maxLength: 150 }), (ops) => {
      const rib = new Rib({ trie: { rootBits: 4 } });
      rib.addSource('p1', peer(1));
      rib.addSource('p2', peer(2));
      const bySource = [new Set<string>(), new Set<string>(), new Set<string>()];
      const held = () => {
        const m = new Map<string, Prefix>();
        for (const p of UNIVERSE) if (bySource[1].has(formatPrefix(p)) || bySource[2].has(formatPrefix(p))) m.set(formatPrefix(p), p);
        return m;
      };
      let sinceRead = new Set<string>();
      for (const o of ops) {
        if (o.op === 'ann') {
          rib.update(`p${o.src}`, UNIVERSE[o.p], attrs);
          bySource[o.src].add(formatPrefix(UNIVERSE[o.p]));
          sinceRead.add(formatPrefix(UNIVERSE[o.p]));
        } else if (o.op === 'wd') {
          rib.withdraw(`p${o.src}`, UNIVERSE[o.p]);
          bySource[o.src].delete(formatPrefix(UNIVERSE[o.p]));
        } else if (o.op === 'flush') {
          for (const k of sinceRead) if (!held().has(k)) queuedThenGone++;
          rib.flush();
        } else if (o.op === 'lpm') {
          const got = rib.lpm(ADDRS[o.a]);
          const want = oracleLpm(held(), ADDRS[o.a]);
          if ((got && formatPrefix(got.prefix)) !== want) throw new Error(`lpm(${ADDRS[o.a]}): ${got && formatPrefix(got.prefix)}, want ${want}`);
          sinceRead = new Set();
        } else {
          const got = [...rib.entries()].map((r) => formatPrefix(r.prefix));
          const want = [...held().keys()];
          if (JSON.stringify([...got].sort()) !== JSON.stringify([...want].sort())) throw new Error(`entries: ${got}, want ${want}`);
          sinceRead = new Set();
        }
        for (const p of UNIVERSE) {
          if (!!rib.best(p) !== held().has(formatPrefix(p))) throw new Error(`best(${formatPrefix(p)}) after ${o.op}`);
        }
      }
      rib.flush();
      const walk = [...rib.entries()].map((r) => formatPrefix(r.prefix));
      if (JSON.stringify(walk.sort()) !== JSON.stringify([...held().keys()].sort())) throw new Error('final walk');
    }),
    { numRuns: 300 },
  );
  t.ok(queuedThenGone > 0, `prefixes were announced and withdrawn with no read of the trie between (${queuedThenGone} times)`);
});

t.test('a bulk load in random order, partly withdrawn before the first read, matches like the oracle', async (t) => {
  // A seeded generator: the same table every run.
  let seed = 7;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const seen = new Map<string, Prefix>();
  while (seen.size < 30_000) {
    const v6 = rnd() < 0.15;
    const len = v6 ? 16 + Math.floor(rnd() * 33) : 8 + Math.floor(rnd() * 17);
    const w0 = Math.floor(rnd() * 2 ** 32);
    const p = prefixOf(v6 ? new IP(6, w0, Math.floor(rnd() * 2 ** 32), 0, 0) : new IP(4, w0), len);
    seen.set(formatPrefix(p), p);
  }
  const all = [...seen.values()];
  const rib = new Rib();
  rib.addSource('p1', peer(1));
  for (const p of all) rib.update('p1', p, attrs);
  const kept = new Map<string, Prefix>();
  all.forEach((p, i) => {
    if (i % 5 === 0) rib.withdraw('p1', p);
    else kept.set(formatPrefix(p), p);
  });
  rib.flush(); // empty records are recycled here, before the trie was ever read
  for (let i = 0; i < 1000; i++) rib.update('p1', all[i * 5], attrs); // recycled records, queued again
  for (let i = 0; i < 1000; i++) kept.set(formatPrefix(all[i * 5]), all[i * 5]);
  t.equal(rib.prefixCount, kept.size, `${kept.size} prefixes held`);
  let mismatches = 0;
  const byFamily = [[...kept.values()].filter((p) => p.family === 4), [...kept.values()].filter((p) => p.family === 6)];
  for (let i = 0; i < 2000; i++) {
    // Addresses inside held prefixes (so most match something) and random ones.
    const base = i % 2 === 0 ? byFamily[i % 4 === 0 ? 1 : 0][Math.floor(rnd() * byFamily[i % 4 === 0 ? 1 : 0].length)] : undefined;
    const ip = base
      ? new IP(base.family, (base.w0 | (Math.floor(rnd() * 2 ** 32) >>> Math.min(31, base.len))) >>> 0, base.family === 6 ? base.w1 : 0, 0, 0)
      : new IP(4, Math.floor(rnd() * 2 ** 32));
    const got = rib.lpm(ip);
    if ((got && formatPrefix(got.prefix)) !== oracleLpm(kept, ip)) mismatches++;
  }
  t.equal(mismatches, 0, '2,000 longest-prefix matches as the oracle says');
  const walk = [...rib.entries()].map((r) => formatPrefix(r.prefix));
  t.equal(walk.length, kept.size, 'the walk holds every prefix');
  t.same(new Set(walk), new Set(kept.keys()), 'and only those');
});

t.test('churn leaves the index and the trie queue the size they were', async (t) => {
  const rib = new Rib();
  rib.addSource('p1', peer(1));
  const ps = Array.from({ length: 3000 }, (_, i) => prefixOf(new IP(4, (0x0a000000 + i * 256) >>> 0), 24));
  for (const p of ps) rib.update('p1', p, attrs);
  rib.flush();
  // A load in prefix order leaves the index unbuilt until the first lookup (Table.append): build it, so the
  // comparison is between two complete tables.
  t.ok(rib.best(ps[0]), 'the first prefix found');
  const before = rib.memoryStats().records4;
  for (let round = 0; round < 100; round++) {
    for (const p of ps) rib.withdraw('p1', p);
    rib.flush();
    for (const p of ps) rib.update('p1', p, attrs);
    rib.flush();
    if (round % 10 === 0) rib.lpm(ps[round].ip);
  }
  t.equal(rib.prefixCount, ps.length, 'every prefix held again');
  // The trie queue may hold up to twice the table between reads (4 octets a record): no more than that.
  const after = rib.memoryStats().records4;
  t.ok(after <= before + 8 * ps.length, `record, index and queue bytes ${after}, ${before} after the first load`);
});
