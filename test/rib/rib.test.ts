import t from 'tap';
import fc from 'fast-check';
import { Prefix, formatPrefix, parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';
import { asSequence, attrsEqual, makeAttrs, withAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import { FULL_BATCH } from '../../src/rib/change-feed.ts';
import { selectBest, type Path, type PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib, type ExportPolicy, type ExportUpdate, type ImportPolicy, type RibChange } from '../../src/rib/rib.ts';

const P = parsePrefix;
const ebgp = (n: number): PeerInfo => ({ type: 'ebgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 + n });
const ibgp = (n: number): PeerInfo => ({ type: 'ibgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 });
const local: PeerInfo = { type: 'local', routerId: 99, address: null, asn: 65000 };
const nh = parseIP('192.0.2.254');
const A = (init: Parameters<typeof makeAttrs>[0]) => makeAttrs({ nextHop: nh, ...init });

function newRib(opts: ConstructorParameters<typeof Rib>[0] = {}) {
  const interner = new AttrInterner();
  const rib = new Rib({ interner, trie: { rootBits: 8 }, ...opts });
  return { rib, interner };
}

t.test('update, best, paths, lpm, withdraw, counts', async (t) => {
  const { rib, interner } = newRib();
  rib.addSource('p1', ebgp(1));
  rib.addSource('p2', ebgp(2));
  const long = A({ asPath: [asSequence(65001, 1, 2)] });
  const short = A({ asPath: [asSequence(65002, 1)] });
  rib.update('p1', P('10.0.0.0/8'), long);
  rib.update('p2', P('10.0.0.0/8'), short);
  rib.update('p1', P('10.1.0.0/16'), long);
  t.equal(rib.best(P('10.0.0.0/8'))!.source, 'p2');
  t.same(rib.paths(P('10.0.0.0/8')).map((p) => p.source), ['p2', 'p1'], 'best first');
  t.equal(rib.lpm(parseIP('10.1.2.3'))!.prefix.toString(), '10.1.0.0/16');
  t.equal(rib.lpm(parseIP('10.2.2.3'))!.prefix.toString(), '10.0.0.0/8');
  t.equal(rib.lpm(parseIP('11.0.0.1')), undefined);
  t.same(rib.counts('p1'), { received: 2, accepted: 2, best: 1, stale: 0 });
  t.same(rib.counts('p2'), { received: 1, accepted: 1, best: 1, stale: 0 });
  t.equal(rib.size, 2);
  t.equal(interner.size, 2, 'two distinct attribute sets held once each');
  t.ok(rib.withdraw('p2', P('10.0.0.0/8')));
  t.notOk(rib.withdraw('p2', P('10.0.0.0/8')), 'second withdraw is a no-op');
  t.equal(rib.best(P('10.0.0.0/8'))!.source, 'p1');
  t.equal(interner.size, 1, 'unused attribute set freed');
  t.equal(rib.dropSource('p1'), 2);
  t.equal(rib.prefixCount, 0);
  t.equal(interner.size, 0);
  t.throws(() => rib.update('nope', P('10.0.0.0/8'), long), /unknown RIB source/);
});

t.test('local routes win; IPv6 kept apart', async (t) => {
  const { rib } = newRib();
  rib.addSource('ipam', local);
  rib.addSource('p1', ebgp(1));
  rib.update('p1', P('fd00::/64'), A({ localPref: 1000 }));
  rib.update('ipam', P('fd00::/64'), makeAttrs({}));
  t.equal(rib.best(P('fd00::/64'))!.source, 'ipam');
  t.equal(rib.lpm(parseIP('fd00::1'))!.best.source, 'ipam');
  t.equal(rib.lpm(parseIP('10.0.0.1')), undefined);
  t.same([...rib.entries(6)].map((r) => r.prefix.toString()), ['fd00::/64']);
  t.same([...rib.entries(4)], []);
});

t.test('change feed: batched, coalesced to the net effect, delivered by the scheduler', async (t) => {
  const queue: (() => void)[] = [];
  const { rib } = newRib({ schedule: (f) => queue.push(f) });
  rib.addSource('p1', ebgp(1));
  rib.addSource('p2', ebgp(2));
  const batches: RibChange[][] = [];
  rib.subscribe((b) => batches.push([...b]));
  const a1 = A({ med: 1 });
  const a2 = A({ med: 2 });
  rib.update('p1', P('10.0.0.0/24'), a1);
  rib.update('p1', P('10.0.0.0/24'), a2); // coalesces into one add with a2
  rib.update('p1', P('10.0.1.0/24'), a1);
  rib.withdraw('p1', P('10.0.1.0/24')); // add + withdraw in one batch: nothing
  t.equal(queue.length, 1, 'scheduled once per batch');
  t.equal(batches.length, 0, 'nothing delivered before the flush');
  queue.shift()!();
  t.equal(batches.length, 1);
  t.same(batches[0].map((c) => [c.type, c.prefix.toString(), c.best?.source]), [['add', '10.0.0.0/24', 'p1']]);
  t.equal(batches[0][0].best!.attrs.med, 2);

  rib.update('p1', P('10.0.0.0/24'), a1);
  rib.update('p1', P('10.0.0.0/24'), a2); // back to what it was: no change
  rib.update('p2', P('10.0.0.0/24'), A({ med: 3, asPath: [asSequence(9)] })); // not better (higher router id)
  rib.update('p1', P('10.0.0.0/24'), a2); // resend: no change at all
  queue.shift()!();
  t.equal(batches.length, 1, 'a batch with no net change delivers nothing');

  rib.withdraw('p1', P('10.0.0.0/24')); // p2 takes over: replace
  rib.update('p1', P('10.9.0.0/16'), a1);
  queue.shift()!();
  t.same(batches[1].map((c) => [c.type, c.prefix.toString(), c.best?.source]), [
    ['replace', '10.0.0.0/24', 'p2'],
    ['add', '10.9.0.0/16', 'p1'],
  ]);
  rib.dropSource('p2');
  rib.dropSource('p1');
  queue.shift()!();
  t.same(batches[2].map((c) => [c.type, c.prefix.toString(), c.best]), [
    ['withdraw', '10.0.0.0/24', undefined],
    ['withdraw', '10.9.0.0/16', undefined],
  ]);
  t.equal(rib.prefixCount, 0, 'records freed at the flush');
});

t.test('graceful restart: stale routes stay usable until swept; refreshed ones survive', async (t) => {
  const { rib } = newRib();
  rib.addSource('p1', ebgp(1));
  const a = A({});
  rib.update('p1', P('10.0.0.0/24'), a);
  rib.update('p1', P('10.0.1.0/24'), a);
  t.equal(rib.markStale('p1'), 2);
  t.equal(rib.best(P('10.0.0.0/24'))!.stale, true);
  t.equal(rib.counts('p1').stale, 2);
  rib.update('p1', P('10.0.0.0/24'), a); // re-sent after restart
  t.equal(rib.best(P('10.0.0.0/24'))!.stale, false);
  t.equal(rib.sweepStale('p1'), 1);
  t.ok(rib.best(P('10.0.0.0/24')));
  t.equal(rib.best(P('10.0.1.0/24')), undefined);
  t.same(rib.counts('p1'), { received: 1, accepted: 1, best: 1, stale: 0 });
});

t.test('import policy: rejected routes kept in Adj-RIB-In; reimport applies a new policy', async (t) => {
  const { rib } = newRib();
  const reject666: ImportPolicy = (_p, a) => (a.communities.includes(666) ? null : withAttrs(a, { localPref: 50 }));
  rib.addSource('p1', ebgp(1), { importPolicy: reject666 });
  rib.addSource('p2', ebgp(2));
  rib.update('p1', P('10.0.0.0/8'), A({}));
  rib.update('p1', P('10.0.0.0/24'), A({ communities: [666] }));
  rib.update('p2', P('10.0.0.0/8'), A({ asPath: [asSequence(1, 2, 3)] }));
  t.equal(rib.best(P('10.0.0.0/8'))!.source, 'p2', 'localPref 50 from policy loses');
  t.equal(rib.best(P('10.0.0.0/24')), undefined);
  t.equal(rib.lpm(parseIP('10.0.0.1'))!.prefix.toString(), '10.0.0.0/8', 'lpm skips a prefix with no usable path');
  const adj = [...rib.adjRibIn('p1')];
  t.same(adj.map((x) => [x.prefix.toString(), x.effective === null]), [['10.0.0.0/8', false], ['10.0.0.0/24', true]]);
  t.equal(adj[0].attrs.localPref, undefined, 'Adj-RIB-In keeps the received attributes');
  t.same(rib.counts('p1'), { received: 2, accepted: 1, best: 0, stale: 0 });
  rib.setImportPolicy('p1', undefined);
  t.equal(rib.reimport('p1'), 2);
  t.equal(rib.best(P('10.0.0.0/8'))!.source, 'p1');
  t.equal(rib.best(P('10.0.0.0/24'))!.source, 'p1');
  t.equal(rib.reimport('p1'), 0, 'nothing changes the second time');
  // A caller that runs policy itself passes the result.
  rib.update('p2', P('10.0.0.0/24'), A({}), null);
  t.equal(rib.paths(P('10.0.0.0/24')).length, 1);
});

t.test('ECMP: multipath set in queries and change events', async (t) => {
  const queue: (() => void)[] = [];
  const { rib } = newRib({ bestPath: { maxPaths: 4 }, schedule: (f) => queue.push(f) });
  for (const n of [1, 2, 3]) rib.addSource(`p${n}`, ebgp(n));
  const batches: RibChange[][] = [];
  rib.subscribe((b) => batches.push([...b]));
  rib.update('p2', P('10.0.0.0/24'), A({ asPath: [asSequence(2, 9)] }));
  rib.update('p1', P('10.0.0.0/24'), A({ asPath: [asSequence(1, 9)] }));
  rib.update('p3', P('10.0.0.0/24'), A({ asPath: [asSequence(3, 8, 9)] }));
  queue.shift()!();
  t.same(rib.multipath(P('10.0.0.0/24')).map((p) => p.source), ['p1', 'p2']);
  t.same(batches[0][0].multipath!.map((p) => p.source), ['p1', 'p2']);
  rib.update('p3', P('10.0.0.0/24'), A({ asPath: [asSequence(3, 9)] })); // joins the set, best unchanged
  queue.shift()!();
  t.equal(batches[1][0].type, 'replace', 'a multipath change is a replace');
  t.same(batches[1][0].multipath!.map((p) => p.source), ['p1', 'p2', 'p3']);
});

t.test('Adj-RIB-Out: export sends only differences', async (t) => {
  const { rib, interner } = newRib();
  rib.addSource('p1', ebgp(1));
  rib.addSource('p2', ebgp(2));
  const batches: RibChange[][] = [];
  rib.subscribe((b) => batches.push([...b]));
  // Export strips MED: a best-path change that only changes MED exports nothing.
  const policy: ExportPolicy = (_p, best) => (best.source === 'p2' ? null : withAttrs(best.attrs, { med: undefined }));
  rib.update('p1', P('10.0.0.0/24'), A({ med: 5 }));
  rib.update('p1', P('10.0.1.0/24'), A({ med: 5 }));
  rib.flush();
  const first = rib.exportChanges('p2', batches.shift()!, policy);
  t.equal(first.announce.size, 1, 'both prefixes share one attribute set: one UPDATE');
  t.same([...first.announce.values()][0].map(formatPrefix), ['10.0.0.0/24', '10.0.1.0/24']);
  rib.update('p1', P('10.0.0.0/24'), A({ med: 7 }));
  rib.flush();
  const second = rib.exportChanges('p2', batches.shift()!, policy);
  t.same(second, { announce: new Map(), withdraw: [] }, 'unchanged after policy: nothing sent');
  t.same(rib.exportAll('p2', policy), { announce: new Map(), withdraw: [] }, 'full resync sends nothing either');
  rib.update('p2', P('10.0.0.0/24'), A({ localPref: 200 })); // p2 wins, policy does not export it
  rib.flush();
  const third = rib.exportChanges('p2', batches.shift()!, policy);
  t.same(third.withdraw.map(formatPrefix), ['10.0.0.0/24']);
  t.equal(rib.adjRibOut('p2').size, 1);
  rib.clearAdjRibOut('p2');
  rib.dropSource('p1');
  rib.dropSource('p2');
  rib.flush();
  t.equal(interner.size, 0, 'no attribute references leak');
});

// ---- property: RIB vs. a brute-force oracle -------------------------------------------------------------------

const PREFIXES = ['0.0.0.0/0', '10.0.0.0/8', '10.0.0.0/16', '10.0.0.0/24', '10.1.0.0/16', '10.0.0.128/25', '::/0', 'fd00::/16', 'fd00::/64', 'fd00:1::/32'].map(P);
const PROBES = ['10.0.0.1', '10.0.0.200', '10.1.2.3', '10.2.0.0', '11.0.0.0', 'fd00::1', 'fd00:1::1', 'fe80::1'].map(parseIP);
const SOURCES: [string, PeerInfo][] = [['local', local], ['e1', ebgp(1)], ['e2', ebgp(2)], ['i3', ibgp(3)], ['e4', ebgp(4)]];
const ATTRS: PathAttrs[] = [
  A({ asPath: [asSequence(65001, 7)] }),
  A({ asPath: [asSequence(65001, 7)], med: 10 }),
  A({ asPath: [asSequence(65002, 7)], med: 5 }),
  A({ asPath: [asSequence(65002)], localPref: 120 }),
  A({ asPath: [asSequence(65003, 6, 7)], communities: [666] }),
  A({ asPath: [asSequence(65003, 7)], originatorId: 1, clusterList: [1] }),
  // Numbers of 2^31 and up (a community of AS 65535, MED and LOCAL_PREF near the top): the interner keeps them as
  // int32 and must give back what makeAttrs made.
  A({ asPath: [asSequence(65001, 7)], communities: [0xffff029a], med: 0xfffffff0 }),
  A({ asPath: [asSequence(65002, 7)], communities: [0xfde80064, 0xffff029a], localPref: 0x80000001 }),
];
// e4's import policy rejects community 666 and raises LOCAL_PREF on the rest.
const e4Policy: ImportPolicy = (_p, a) => (a.communities.includes(666) ? null : withAttrs(a, { localPref: 110 }));
// Export policy: strip MED (so some best-path changes export nothing) and never export iBGP-learned routes.
const exportPolicy: ExportPolicy = (_p, best) => (best.peer.type === 'ibgp' ? null : withAttrs(best.attrs, { med: undefined }));

type Op =
  | { op: 'update'; s: number; p: number; a: number }
  | { op: 'withdraw'; s: number; p: number }
  | { op: 'drop' | 'stale' | 'sweep' | 'reimport'; s: number }
  | { op: 'flush' };

const arbOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ op: fc.constant('update' as const), s: fc.nat(4), p: fc.nat(PREFIXES.length - 1), a: fc.nat(ATTRS.length - 1) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('withdraw' as const), s: fc.nat(4), p: fc.nat(PREFIXES.length - 1) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom('drop' as const, 'stale' as const, 'sweep' as const, 'reimport' as const), s: fc.nat(4) }) },
  { weight: 2, arbitrary: fc.constant({ op: 'flush' as const }) },
);

interface OracleRoute { raw: PathAttrs; eff: PathAttrs | null; stale: boolean }

t.test('property: RIB matches a brute-force oracle; the feed replays to the best table; export sends only changes', async (t) => {
  fc.assert(
    fc.property(fc.array(arbOp, { maxLength: 80, size: 'max' }), fc.integer({ min: 1, max: 3 }), (ops, maxPaths) => {
      const { rib, interner } = newRib({ bestPath: { maxPaths } });
      for (const [name, peer] of SOURCES) rib.addSource(name, peer, name === 'e4' ? { importPolicy: e4Policy } : {});
      const key = (p: Prefix) => formatPrefix(p);
      const oracle = new Map<string, Map<string, OracleRoute>>(); // prefix -> source -> route
      const replay = new Map<string, { source: string; attrs: PathAttrs; multipath: string[] }>();
      const peerHas = new Map<string, PathAttrs>(); // what the export peer was sent
      const peerName = 'e1';

      const applyBatch = (batch: Iterable<RibChange>): void => {
        for (const ch of batch) {
          const k = key(ch.prefix);
          if (ch.type === 'add' && replay.has(k)) throw new Error(`add for present ${k}`);
          if (ch.type !== 'add' && !replay.has(k)) throw new Error(`${ch.type} for absent ${k}`);
          if (ch.type === 'withdraw') replay.delete(k);
          else replay.set(k, { source: ch.best!.source, attrs: ch.best!.attrs, multipath: (ch.multipath ?? [ch.best!]).map((p) => p.source) });
        }
        const u: ExportUpdate = rib.exportChanges(peerName, batch, exportPolicy);
        for (const [attrs, prefixes] of u.announce) {
          for (const p of prefixes) {
            const old = peerHas.get(key(p));
            if (old && attrsEqual(old, attrs)) throw new Error(`re-announced unchanged ${key(p)}`);
            peerHas.set(key(p), attrs);
          }
        }
        for (const p of u.withdraw) if (!peerHas.delete(key(p))) throw new Error(`withdraw of unsent ${key(p)}`);
      };
      rib.subscribe(applyBatch);

      const oracleBest = (k: string) => {
        const routes = oracle.get(k);
        if (!routes) return undefined;
        const paths: Path[] = [];
        for (const [source, r] of routes) {
          if (r.eff) paths.push({ source, attrs: r.eff, peer: SOURCES.find((s) => s[0] === source)![1], stale: r.stale });
        }
        return selectBest(paths, { maxPaths });
      };

      for (const o of ops) {
        const src = o.op === 'flush' ? '' : SOURCES[o.s][0];
        switch (o.op) {
          case 'update': {
            const k = key(PREFIXES[o.p]);
            const raw = ATTRS[o.a];
            rib.update(src, PREFIXES[o.p], raw);
            const eff = src === 'e4' ? e4Policy(PREFIXES[o.p], raw, src) : raw;
            if (!oracle.has(k)) oracle.set(k, new Map());
            oracle.get(k)!.set(src, { raw, eff, stale: false });
            break;
          }
          case 'withdraw': {
            const had = oracle.get(key(PREFIXES[o.p]))?.delete(src) ?? false;
            if (rib.withdraw(src, PREFIXES[o.p]) !== had) return false;
            break;
          }
          case 'drop':
          case 'sweep': {
            let n = 0;
            for (const routes of oracle.values()) {
              const r = routes.get(src);
              if (r && (o.op === 'drop' || r.stale)) { routes.delete(src); n++; }
            }
            if ((o.op === 'drop' ? rib.dropSource(src) : rib.sweepStale(src)) !== n) return false;
            break;
          }
          case 'stale':
            rib.markStale(src);
            for (const routes of oracle.values()) { const r = routes.get(src); if (r) r.stale = true; }
            break;
          case 'reimport':
            if (rib.reimport(src) !== 0) return false; // policies never change here
            break;
          case 'flush':
            rib.flush();
            break;
        }
        for (const [k, routes] of oracle) if (routes.size === 0) oracle.delete(k);

        // Best, multipath and candidates per prefix match the oracle after every operation.
        const bests = new Map(PREFIXES.map((p) => [key(p), oracleBest(key(p))]));
        for (const p of PREFIXES) {
          const want = bests.get(key(p));
          const got = rib.best(p);
          if (!want !== !got) return false;
          if (want && got) {
            if (want.best.source !== got.source || !attrsEqual(want.best.attrs, got.attrs) || want.best.stale !== got.stale) return false;
            const mp = rib.multipath(p).map((x) => x.source).join();
            if (mp !== want.multipath.map((x) => x.source).join()) return false;
          }
          const n = [...(oracle.get(key(p))?.values() ?? [])].filter((r) => r.eff).length;
          if (rib.paths(p).length !== n) return false;
        }
        // LPM matches a brute-force scan.
        for (const ip of PROBES) {
          let want: Prefix | undefined;
          for (const p of PREFIXES) if (prefixContainsIP(p, ip) && bests.get(key(p)) && (!want || p.len > want.len)) want = p;
          const got = rib.lpm(ip);
          if ((want ? key(want) : undefined) !== (got ? key(got.prefix) : undefined)) return false;
        }
        // Per-source counts.
        for (const [name] of SOURCES) {
          const c = rib.counts(name);
          let received = 0, accepted = 0, stale = 0, best = 0;
          for (const [k, routes] of oracle) {
            const r = routes.get(name);
            if (!r) continue;
            received++;
            if (r.eff) accepted++;
            if (r.stale) stale++;
            if (bests.get(k)?.best.source === name) best++;
          }
          if (c.received !== received || c.accepted !== accepted || c.stale !== stale || c.best !== best) return false;
        }
      }
      rib.flush();
      // The replayed feed is exactly the current best table.
      const table = [...rib.entries()];
      if (table.length !== replay.size) return false;
      for (const r of table) {
        const x = replay.get(key(r.prefix));
        if (!x || x.source !== r.best.source || x.attrs !== r.best.attrs) return false;
        if (x.multipath.join() !== r.multipath.map((p) => p.source).join()) return false;
      }
      // What the peer was sent is exactly the export policy applied to the best table, and a full resync is empty.
      const expected = new Map<string, PathAttrs>();
      // (A route is never sent back to the peer its best path came from.)
      for (const r of table) {
        const a = r.best.source === peerName ? null : exportPolicy(r.prefix, r.best, r.multipath);
        if (a) expected.set(key(r.prefix), a);
      }
      if (expected.size !== peerHas.size) return false;
      for (const [k, a] of expected) if (!peerHas.has(k) || !attrsEqual(peerHas.get(k)!, a)) return false;
      const resync = rib.exportAll(peerName, exportPolicy);
      if (resync.announce.size !== 0 || resync.withdraw.length !== 0) return false;
      // Everything released: no attribute or record leaks.
      rib.clearAdjRibOut(peerName);
      for (const [name] of SOURCES) rib.dropSource(name);
      rib.flush();
      return interner.size === 0 && rib.prefixCount === 0 && rib.pathCount === 0 && replay.size === 0;
    }),
    { numRuns: 500 },
  );
  t.pass('property holds');
});

t.test('source registry', async (t) => {
  const { rib } = newRib();
  t.notOk(rib.hasSource('p1'));
  rib.addSource('p1', ebgp(1));
  t.ok(rib.hasSource('p1'), 'hasSource after addSource');
  t.notOk(rib.hasSource('p2'));
  rib.update('p1', P('10.0.0.0/8'), A({}));
  t.throws(() => rib.addSource('p1', ebgp(5)), /has routes/);
  rib.addSource('p1', ebgp(1), {}); // same info: fine
  rib.removeSource('p1');
  t.same(rib.sourceNames(), []);
  t.notOk(rib.hasSource('p1'), 'and not after removeSource');
  t.equal(rib.prefixCount, 0);
  rib.addSource('p2', ebgp(2));
  t.same(rib.peerInfo('p2'), ebgp(2));
});



t.test('a batch that reaches FULL_BATCH changes asks for a flush at once, once', async (t) => {
  const scheduled: string[] = [];
  let pending: (() => void) | null = null;
  const rib = new Rib({
    schedule: (flush) => { scheduled.push('paced'); pending = flush; },
    scheduleFull: (flush) => { scheduled.push('full'); pending = flush; },
  });
  rib.addSource('p', { type: 'ebgp', routerId: 2, address: parseIP('192.0.2.2'), asn: 65002 });
  let delivered = 0;
  rib.subscribe((b) => { delivered += b.length; });
  const a = makeAttrs({ nextHop: parseIP('192.0.2.2'), asPath: [asSequence(65002)] });
  const prefix = (i: number) => new Prefix(4, (0x0a000000 + i * 256) >>> 0, 0, 0, 0, 24);
  for (let i = 0; i < FULL_BATCH - 1; i++) rib.update('p', prefix(i), a);
  t.same(scheduled, ['paced'], 'a batch under the bound waits for the paced flush');
  rib.update('p', prefix(FULL_BATCH - 1), a);
  t.same(scheduled, ['paced', 'full'], 'the change that fills it asks for a flush at once');
  for (let i = FULL_BATCH; i < FULL_BATCH + 100; i++) rib.update('p', prefix(i), a);
  t.same(scheduled, ['paced', 'full'], 'and only that one');
  pending!();
  t.equal(delivered, FULL_BATCH + 100, 'the flush delivers the whole batch');
  rib.update('p', prefix(FULL_BATCH + 100), a);
  t.same(scheduled, ['paced', 'full', 'paced'], 'the next batch starts paced again');
  const plain = new Rib({ schedule: () => { scheduled.push('plain'); } });
  plain.addSource('p', { type: 'ebgp', routerId: 2, address: parseIP('192.0.2.2'), asn: 65002 });
  plain.subscribe(() => {});
  for (let i = 0; i < FULL_BATCH + 1; i++) plain.update('p', prefix(i), a);
  t.equal(scheduled.filter((s) => s === 'plain').length, 1, 'without scheduleFull a big batch just waits');
});
