// The array Adj-RIB-Out (src/rib/adj-rib-out.ts) indexed by the RIB's record ids, against a Map<prefix, attrs>
// oracle per peer, over random announce / withdraw / flush / full export / session reset / source drop sequences on
// a small prefix set, so records are freed and reused all the time. A record recycled while an Adj-RIB-Out holds it
// throws in the RIB; the oracle catches an entry that follows a reused id to another prefix.
import t from 'tap';
import fc from 'fast-check';
import { Prefix, formatPrefix, parseIP } from '../../src/net/ip.ts';
import { asSequence, makeAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import type { PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib, type ExportPolicy, type ExportUpdate } from '../../src/rib/rib.ts';

const ebgp = (n: number): PeerInfo => ({ type: 'ebgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 + n });
const nh = parseIP('192.0.2.254');
const UNIVERSE: Prefix[] = [
  ...Array.from({ length: 6 }, (_, i) => new Prefix(4, (0x0a000000 | (i << 8)) >>> 0, 0, 0, 0, 24)),
  new Prefix(4, 0x0a000000, 0, 0, 0, 16),
  new Prefix(6, 0x20010db8, 0, 0, 0, 32),
  new Prefix(6, 0x20010db8, 0x00010000, 0, 0, 48),
];
const attrSet = (k: number, src: number): PathAttrs =>
  makeAttrs({ nextHop: nh, med: k, asPath: [asSequence(65000 + src, ...Array(k % 3).fill(64512))] });
const key = (a: PathAttrs) => `${a.asPath.map((s) => s.asns.join(' ')).join('|')}/${a.med ?? '-'}`;

// Prepends 65010 and drops MED: the same object for the same input (as the speaker's export cache does), except on
// /16s, which get a fresh equal object every time; rejects paths with two 64512s.
function makePolicy(): ExportPolicy {
  const cache = new Map<PathAttrs, PathAttrs>();
  const rewrite = (a: PathAttrs) => makeAttrs({ nextHop: nh, asPath: [asSequence(65010, ...a.asPath[0].asns)] });
  return (prefix, best) => {
    if (best.attrs.asPath[0].asns.length === 3) return null;
    if (prefix.len === 16) return rewrite(best.attrs);
    let out = cache.get(best.attrs);
    if (!out) cache.set(best.attrs, (out = rewrite(best.attrs)));
    return out;
  };
}

type Op =
  | { op: 'ann'; src: number; p: number; k: number }
  | { op: 'wd'; src: number; p: number }
  | { op: 'flush' }
  | { op: 'all'; peer: number }
  | { op: 'down'; peer: number }
  | { op: 'up'; peer: number }
  | { op: 'drop'; src: number };

const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('ann' as const), src: fc.integer({ min: 1, max: 3 }), p: fc.nat(UNIVERSE.length - 1), k: fc.nat(5) }) },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('wd' as const), src: fc.integer({ min: 1, max: 3 }), p: fc.nat(UNIVERSE.length - 1) }) },
  { weight: 3, arbitrary: fc.constant({ op: 'flush' as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('all' as const), peer: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('down' as const), peer: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('up' as const), peer: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop' as const), src: fc.integer({ min: 1, max: 3 }) }) },
);

/** Apply an export update to the oracle, failing on a change that is not one. */
function apply(model: Map<string, string>, u: ExportUpdate): string | null {
  for (const p of u.withdraw) if (!model.delete(formatPrefix(p))) return `withdrawal of ${formatPrefix(p)}, not held`;
  for (const [a, ps] of u.announce) {
    for (const p of ps) {
      if (model.get(formatPrefix(p)) === key(a)) return `announcement of ${formatPrefix(p)} unchanged`;
      model.set(formatPrefix(p), key(a));
    }
  }
  return null;
}

// An interner already holding 65,530 attribute sets: the ids the runs make straddle 65,535, the largest a narrow
// (Uint16) Adj-RIB-Out segment holds, so segments start narrow and are widened under held routes.
function primedInterner(): AttrInterner {
  const interner = new AttrInterner();
  for (let i = 0; i < 65_530; i++) interner.internId(makeAttrs({ nextHop: nh, med: 1_000_000 + i, asPath: [] }));
  return interner;
}

for (const primed of [false, true]) t.test(`the array Adj-RIB-Out matches a Map oracle through record reuse, flushes, resets and full exports${primed ? ' (attribute ids around 65,535: narrow segments widened)' : ''}`, async (t) => {
  let reused = 0;
  let heldAfterLoss = 0;
  let wideIds = 0;
  const shared = primed ? primedInterner() : null;
  fc.assert(
    fc.property(fc.array(arbOp, { minLength: 10, maxLength: 120, size: 'medium' }), fc.boolean(), (ops, listForm) => {
      const interner = shared ?? new AttrInterner();
      const base = interner.size;
      const rib = new Rib({ interner, trie: { rootBits: 4 } });
      for (const n of [1, 2, 3]) rib.addSource(`p${n}`, ebgp(n));
      const policy = makePolicy();
      const models = new Map<string, Map<string, string>>();
      // p1..p3 are sources and peers kept up to date by the change feed (p2 in list form when listForm); p4 is
      // only ever given full exports, so it holds routes long after the Loc-RIB lost them.
      const live = new Set<string>();
      const fail = (msg: string) => {
        throw new Error(msg);
      };
      rib.subscribe((b) => {
        for (const peer of live) {
          const u = rib.exportChanges(peer, listForm && peer === 'p2' ? [...b] : b, policy);
          const err = apply(models.get(peer)!, u);
          if (err) fail(`${peer} (feed): ${err}`);
        }
      });
      const check = (what: string) => {
        for (const [peer, model] of models) {
          const out = rib.adjRibOut(peer);
          const got = new Map([...out.entries()].map((e) => [formatPrefix(e.prefix), key(e.attrs)]));
          if (JSON.stringify([...got].sort()) !== JSON.stringify([...model].sort())) {
            fail(`${what}: ${peer} holds ${JSON.stringify([...got])}, sent ${JSON.stringify([...model])}`);
          }
          if (out.size !== model.size) fail(`${what}: ${peer} size ${out.size}, oracle ${model.size}`);
          for (const p of UNIVERSE) {
            const a = out.get(p);
            if ((a ? key(a) : undefined) !== model.get(formatPrefix(p))) fail(`${what}: ${peer} get(${formatPrefix(p)})`);
          }
        }
      };
      const expected = (peer: string) => {
        const m = new Map<string, string>();
        for (const r of rib.entries()) {
          if (r.best.source === peer) continue;
          const a = policy(r.prefix, r.best, r.multipath);
          if (a) m.set(formatPrefix(r.prefix), key(a));
        }
        return m;
      };
      const full = (peer: string) => {
        if (!models.has(peer)) models.set(peer, new Map());
        const err = apply(models.get(peer)!, rib.exportAll(peer, policy));
        if (err) fail(`${peer} (exportAll): ${err}`);
      };
      let prevCount = 0;
      for (const o of ops) {
        switch (o.op) {
          case 'ann':
            rib.update(`p${o.src}`, UNIVERSE[o.p], attrSet(o.k, o.src));
            break;
          case 'wd':
            rib.withdraw(`p${o.src}`, UNIVERSE[o.p]);
            break;
          case 'flush':
            rib.flush();
            break;
          case 'all':
            full(`p${o.peer}`);
            break;
          case 'down':
            rib.clearAdjRibOut(`p${o.peer}`);
            models.delete(`p${o.peer}`);
            live.delete(`p${o.peer}`);
            break;
          case 'up':
            if (o.peer === 4 || live.has(`p${o.peer}`)) full(`p${o.peer}`);
            else {
              rib.clearAdjRibOut(`p${o.peer}`);
              models.set(`p${o.peer}`, new Map());
              live.add(`p${o.peer}`);
              full(`p${o.peer}`);
            }
            break;
          case 'drop':
            rib.dropSource(`p${o.src}`);
            break;
        }
        check(o.op);
        if (rib.prefixCount > prevCount) reused++;
        prevCount = rib.prefixCount;
        for (const p of UNIVERSE) if (models.get('p4')?.has(formatPrefix(p)) && !rib.best(p)) heldAfterLoss++;
        for (const m of models.keys()) rib.adjRibOut(m).forEachHeld((_fi, _r, id) => { if (id >= 0xffff) wideIds++; });
      }
      // Settled: after a flush and a full export, every peer holds exactly the policy's view of the Loc-RIB.
      rib.flush();
      for (const peer of models.keys()) full(peer);
      check('settled');
      for (const peer of models.keys()) {
        const want = expected(peer);
        const got = models.get(peer)!;
        if (JSON.stringify([...got].sort()) !== JSON.stringify([...want].sort())) fail(`settled: ${peer} differs from the Loc-RIB`);
      }
      // Nothing leaks: with every route and every Adj-RIB-Out gone, no record and no attribute set is left.
      for (const peer of [...models.keys()]) rib.clearAdjRibOut(peer);
      for (const n of [1, 2, 3]) rib.dropSource(`p${n}`);
      rib.flush();
      if (rib.prefixCount !== 0) fail(`${rib.prefixCount} records left`);
      if (interner.size !== base) fail(`${interner.size - base} attribute sets left`);
    }),
    { numRuns: primed ? 100 : 200 },
  );
  t.ok(reused > 0, `records were freed and made again (${reused} times)`);
  if (primed) t.ok(wideIds > 0, `Adj-RIB-Outs held ids past a narrow segment's range (${wideIds} times)`);
  t.ok(heldAfterLoss > 0, `an Adj-RIB-Out held routes the Loc-RIB had lost (${heldAfterLoss} times)`);
});

t.test('a record an Adj-RIB-Out holds keeps its prefix until withdrawn, then is recycled', async (t) => {
  const interner = new AttrInterner();
  const rib = new Rib({ interner, trie: { rootBits: 4 } });
  rib.addSource('p1', ebgp(1));
  const policy = makePolicy();
  const a = UNIVERSE[0];
  const b = UNIVERSE[1];
  rib.update('p1', a, attrSet(0, 1));
  rib.flush();
  t.equal(rib.exportAll('p4', policy).announce.size, 1, 'p4 is sent a');
  rib.withdraw('p1', a);
  rib.flush();
  t.equal(rib.prefixCount, 1, 'a has no path, but p4 still holds its record');
  rib.update('p1', b, attrSet(1, 1));
  rib.flush();
  t.equal(rib.prefixCount, 2, 'b got a record of its own, not a\'s');
  t.equal(rib.adjRibOut('p4').get(b), undefined, 'p4 holds nothing for b');
  t.ok(rib.adjRibOut('p4').get(a), 'p4 still holds a');
  const u = rib.exportAll('p4', policy);
  t.strictSame(u.withdraw.map(formatPrefix), ['10.0.0.0/24'], 'the full export withdraws a');
  t.strictSame([...u.announce.values()].flat().map(formatPrefix), ['10.0.1.0/24'], 'and announces b');
  t.equal(rib.prefixCount, 1, 'a\'s record is recycled once no Adj-RIB-Out holds it');
  rib.clearAdjRibOut('p4');
  rib.dropSource('p1');
  rib.flush();
  t.equal(rib.prefixCount, 0);
  t.equal(interner.size, 0, 'no attribute set leaks');
});

t.test('peers share one Prefix object per route, in full exports and in the change feed', async (t) => {
  const rib = new Rib({ interner: new AttrInterner(), trie: { rootBits: 4 } });
  rib.addSource('p1', ebgp(1));
  const policy = makePolicy();
  const fed: ExportUpdate[] = [];
  rib.subscribe((b) => {
    for (const peer of ['p2', 'p3']) fed.push(rib.exportChanges(peer, b, policy));
  });
  for (const p of UNIVERSE.slice(0, 4)) rib.update('p1', p, attrSet(0, 1));
  rib.flush();
  const listed = (u: ExportUpdate) => [...u.announce.values()].flat();
  t.equal(listed(fed[0]).length, 4);
  for (let i = 0; i < 4; i++) t.equal(listed(fed[0])[i], listed(fed[1])[i], `feed: route ${i} is one object for both peers`);
  const a = listed(rib.exportAll('p4', policy));
  const b = listed(rib.exportAll('p5', policy));
  t.strictSame(a.map(formatPrefix), UNIVERSE.slice(0, 4).map(formatPrefix));
  for (let i = 0; i < 4; i++) t.equal(a[i], b[i], `exportAll: route ${i} is one object for both peers`);
  t.equal(a[0], listed(fed[0]).find((p) => formatPrefix(p) === formatPrefix(a[0])), 'and the same object the feed sent');
});
