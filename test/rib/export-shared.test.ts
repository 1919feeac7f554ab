// The allocation cuts on the export path (100 peers): a value-only trie walk, change objects shared by
// every reader of a batch, and exportAll without per-route objects — each against a simple oracle.
import t from 'tap';
import fc from 'fast-check';
import { Prefix, formatPrefix, parseIP } from '../../src/net/ip.ts';
import { asSequence, makeAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import type { Path, PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib, type ExportPolicy, type ExportUpdate, type RibChangeBatch } from '../../src/rib/rib.ts';
import { Trie } from '../../src/rib/trie.ts';

const ebgp = (n: number): PeerInfo => ({ type: 'ebgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 + n });
const nh = parseIP('192.0.2.254');
const v4 = (w: number, len: number) => new Prefix(4, len === 0 ? 0 : (w & (0xffffffff << (32 - len))) >>> 0, 0, 0, 0, len);
const v6 = (w: number, len: number) => new Prefix(6, 0x20010db8, len <= 32 ? 0 : w >>> 0, 0, 0, len);
const arbPrefix = fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 0xffff }).map((x) => (0x0a000000 | (x << 8)) >>> 0), fc.integer({ min: 0, max: 32 })).map(([w, l]) => v4(w, l)),
  fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 32, max: 64 })).map(([w, l]) => {
    const p = v6(w, l);
    return new Prefix(6, p.w0, l === 32 ? 0 : (p.w1 & (0xffffffff << (64 - l))) >>> 0, 0, 0, l);
  }),
);

t.test('Trie.forEachValue gives the values in entries() order', async (t) => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 40 })), { maxLength: 300 }), fc.array(arbPrefix, { minLength: 1, maxLength: 40 }),
    fc.constantFrom(4, 8, 16), (ops, pool, rootBits) => {
      const tries = { 4: new Trie(4, { rootBits }), 6: new Trie(6, { rootBits }) };
      for (const [add, i] of ops) {
        const p = pool[i % pool.length];
        if (add) tries[p.family].insert(p, i);
        else tries[p.family].delete(p);
      }
      for (const tr of Object.values(tries)) {
        const got: number[] = [];
        tr.forEachValue((v) => got.push(v));
        t.strictSame(got, [...tr.entries()].map((e) => e.value));
      }
    }), { numRuns: 200 });
});

// A random table from three sources, with attributes drawn from a small set so that routes share them.
const arbTable = fc.array(fc.tuple(fc.integer({ min: 1, max: 3 }), arbPrefix, fc.integer({ min: 0, max: 3 }), fc.boolean()), { maxLength: 80 });
const attrSet = (k: number, src: number): PathAttrs => makeAttrs({ nextHop: nh, asPath: [asSequence(65000 + src, ...Array(k).fill(64512))] });

function load(rib: Rib, ops: [number, Prefix, number, boolean][]): void {
  for (const [src, p, k, withdraw] of ops) {
    if (withdraw) rib.withdraw(`p${src}`, p);
    else rib.update(`p${src}`, p, attrSet(k, src));
  }
}

function newRib(maxPaths = 1): Rib {
  const rib = new Rib({ interner: new AttrInterner(), trie: { rootBits: 8 }, bestPath: { maxPaths } });
  for (const n of [1, 2, 3, 4]) rib.addSource(`p${n}`, ebgp(n));
  return rib;
}

// The export policy: prepends our AS, rejects paths of length 3; records what it was asked.
function policyOf(interner: AttrInterner, seen?: string[]): ExportPolicy {
  return (prefix, best, multipath) => {
    seen?.push(`${formatPrefix(prefix)} ${best.source} ${multipath.length}`);
    if (best.attrs.asPath[0].asns.length === 3) return null;
    return interner.intern({ ...best.attrs, asPath: [asSequence(65010, ...best.attrs.asPath[0].asns)] });
  };
}

const flat = (u: ExportUpdate) => ({
  announce: [...u.announce].flatMap(([a, ps]) => ps.map((p) => `${formatPrefix(p)} ${a.asPath[0].asns.join(' ')}`)).sort(),
  withdraw: u.withdraw.map(formatPrefix).sort(),
});

t.test('exportAll equals the oracle built from entries(), for every peer, with and without multipath', async (t) => {
  fc.assert(fc.property(arbTable, arbTable, fc.constantFrom(1, 2), (first, second, maxPaths) => {
    const rib = newRib(maxPaths);
    load(rib, first);
    for (const peer of ['p1', 'p4']) {
      const seen: string[] = [];
      const u = rib.exportAll(peer, policyOf(rib.interner, seen));
      // Oracle: every route with a best path not from `peer`, through the policy, in prefix order.
      const want: string[] = [];
      const asked: string[] = [];
      for (const r of rib.entries()) {
        if (r.best.source === peer) continue;
        asked.push(`${formatPrefix(r.prefix)} ${r.best.source} ${r.multipath.length}`);
        if (r.best.attrs.asPath[0].asns.length === 3) continue;
        want.push(`${formatPrefix(r.prefix)} 65010 ${r.best.attrs.asPath[0].asns.join(' ')}`);
      }
      // (In record order, not prefix order: the full export walks the record arrays, not the trie.)
      t.strictSame([...seen].sort(), [...asked].sort(), 'the policy is asked once about each route');
      t.strictSame(flat(u), { announce: want.sort(), withdraw: [] });
    }
    // After more changes, exportAll sends exactly the difference against what the peer was sent.
    const before = new Map([...rib.adjRibOut('p4').entries()].map((e) => [formatPrefix(e.prefix), e.attrs]));
    load(rib, second);
    const u = rib.exportAll('p4', policyOf(rib.interner));
    const after = new Map<string, PathAttrs>();
    for (const r of rib.entries()) {
      if (r.best.source === 'p4' || r.best.attrs.asPath[0].asns.length === 3) continue;
      after.set(formatPrefix(r.prefix), rib.interner.intern({ ...r.best.attrs, asPath: [asSequence(65010, ...r.best.attrs.asPath[0].asns)] }));
    }
    const announce = [...after].filter(([p, a]) => before.get(p) !== a).map(([p, a]) => `${p} ${a.asPath[0].asns.join(' ')}`).sort();
    const withdraw = [...before.keys()].filter((p) => !after.has(p)).sort();
    t.strictSame(flat(u), { announce, withdraw });
  }), { numRuns: 150 });
});

t.test('a batch hands every reader the same change objects, and fresh ones once the RIB has moved', async (t) => {
  const rib = newRib();
  const reads: unknown[][] = [];
  let moved: { before: unknown; after: unknown; best: string | undefined } | null = null;
  const read = (b: RibChangeBatch) => Array.from({ length: b.length }, (_, i) => b.at(i));
  rib.subscribe((b) => reads.push(read(b)));
  rib.subscribe((b) => reads.push(read(b)));
  rib.subscribe((b) => {
    // A subscriber that changes the RIB while reading: later reads describe the RIB as it is now.
    const i = Array.from({ length: b.length }, (_, j) => j).find((j) => formatPrefix(b.prefixAt(j)) === '10.0.1.0/24');
    if (i === undefined) return;
    const before = b.at(i);
    rib.update('p2', b.prefixAt(i), attrSet(0, 2));
    moved = { before, after: b.at(i), best: b.at(i).best?.source };
  });
  for (let i = 0; i < 4; i++) rib.update('p1', v4(0x0a000000 + (i << 8), 24), attrSet(1, 1));
  rib.flush();
  t.equal(reads.length, 2);
  t.equal(reads[0].length, 4);
  for (let i = 0; i < 4; i++) t.equal(reads[0][i], reads[1][i], `change ${i}: one object for both readers`);
  t.ok(moved, 'the third subscriber saw the prefix');
  t.not(moved!.before, moved!.after, 'a new object after the RIB moved');
  t.equal(moved!.best, 'p2', 'and it says what the RIB holds now');
});

t.test('the one-path multipath array is only valid during the policy call', async (t) => {
  const rib = newRib();
  rib.update('p1', v4(0x0a000000, 24), attrSet(1, 1));
  rib.update('p2', v4(0x0a000100, 24), attrSet(1, 2));
  const got: Path[][] = [];
  rib.exportAll('p4', (_p, best, mp) => {
    got.push([...mp]);
    t.equal(mp[0], best);
    return null;
  });
  t.same(got.map((m) => m.map((p) => p.source)), [['p1'], ['p2']]);
});
