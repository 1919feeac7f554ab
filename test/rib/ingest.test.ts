// Tests of the RIB ingest path and its supporting structures: Rib.updateList against per-prefix Rib.update, the
// RibChangeBatch change feed, export never reflecting a route to its own peer, the AttrInterner against a Map
// oracle, and Trie.insertWords(..., ifAbsent).
import t from 'tap';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { IP, Prefix, formatPrefix, parseIP, parsePrefix, prefixContainsIP, prefixOf, type Family } from '../../src/net/ip.ts';
import {
  AttrError, adoptAttrs, asSequence, asSet, attrsEqual, makeAttrs, withAttrs, type AttrsInit, type PathAttrs,
} from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import type { Path, PeerInfo } from '../../src/rib/bestpath.ts';
import { PrefixList } from '../../src/rib/prefixlist.ts';
import {
  Rib, RibChangeBatch, type ExportPolicy, type ExportUpdate, type RibChange, type RibOptions,
} from '../../src/rib/rib.ts';
import { Trie } from '../../src/rib/trie.ts';

// ---- shared fixtures ----------------------------------------------------------------------------------------

const P = parsePrefix;
const ebgp = (n: number): PeerInfo => ({ type: 'ebgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 + n });
const ibgp = (n: number): PeerInfo => ({ type: 'ibgp', routerId: n, address: parseIP(`192.0.2.${n}`), asn: 65000 });
const local: PeerInfo = { type: 'local', routerId: 99, address: null, asn: 65000 };

const SOURCES: [string, PeerInfo][] = [['p1', ebgp(1)], ['p2', ebgp(2)], ['p3', ibgp(3)], ['p4', ebgp(4)], ['lo', local]];
const SOURCE_NAMES = SOURCES.map(([n]) => n);

const nh4 = parseIP('192.0.2.254');
// Distinct contents; several rank equal for best-path selection (so multipath sets form), others win or lose on
// LOCAL_PREF, AS path length or MED.
const POOL_INITS: AttrsInit[] = [
  { asPath: [asSequence(65001)] },
  { asPath: [asSequence(65002)] },
  { asPath: [asSequence(65002)], communities: [7] },
  { asPath: [asSequence(65001, 65003)] },
  { asPath: [asSequence(65001)], med: 5 },
  { asPath: [asSequence(65001)], med: 1 },
  { asPath: [asSequence(65004)], localPref: 200 },
  { asPath: [asSet(1, 2)], nextHop: parseIP('192.0.2.253') },
];
const POOL: PathAttrs[] = POOL_INITS.map((i) => makeAttrs({ nextHop: nh4, ...i }));
const freshCopy = (k: number): PathAttrs => makeAttrs({ nextHop: nh4, ...POOL_INITS[k] });

/** A content key written independently of the code under test (every field, addresses as text). */
function contentKey(a: PathAttrs): string {
  return JSON.stringify({
    o: a.origin,
    p: a.asPath.map((s) => [s.type, [...s.asns]]),
    nh: a.nextHop?.toString() ?? null,
    ll: a.nextHopLinkLocal?.toString() ?? null,
    med: a.med ?? null,
    lp: a.localPref ?? null,
    aa: a.atomicAggregate,
    ag: a.aggregator ? [a.aggregator.asn, a.aggregator.address.toString()] : null,
    c: [...a.communities],
    x: a.extCommunities.map((x) => [...x]),
    l: a.largeCommunities.map((x) => [...x]),
    oid: a.originatorId ?? null,
    cl: [...a.clusterList],
    u: a.unknown.map((u) => [u.type, u.flags, Buffer.from(u.value).toString('hex')]),
  });
}

const describePath = (p: Path): string => `${p.source}${p.stale ? '(stale)' : ''}=${contentKey(p.attrs)}`;

function listOf(family: Family, prefixes: readonly Prefix[]): PrefixList {
  const l = new PrefixList(family, 1); // capacity 1: pushing grows it
  for (const p of prefixes) l.pushPrefix(p);
  return l;
}

function newRib(opts: RibOptions = {}): Rib {
  const rib = new Rib({ interner: new AttrInterner(), trie: { rootBits: 8 }, ...opts });
  for (const [name, peer] of SOURCES) rib.addSource(name, peer);
  return rib;
}

// Prefix pools that nest and repeat: a handful of IPv4 and IPv6 prefixes, the default routes included.
const v4Prefix = fc
  .tuple(fc.integer({ min: 0, max: 0xff }), fc.constantFrom(0, 8, 16, 23, 24, 25, 32))
  .map(([x, len]) => prefixOf(new IP(4, (0x0a000000 | (x << 8) | (x & 0x3)) >>> 0), len));
const v6Prefix = fc
  .tuple(fc.integer({ min: 0, max: 0xff }), fc.constantFrom(0, 32, 48, 64, 65, 127, 128))
  .map(([x, len]) => prefixOf(new IP(6, 0x20010db8, x << 8, 0, x & 3), len));
const prefixPools = fc.record({
  v4: fc.uniqueArray(v4Prefix, { minLength: 1, maxLength: 10, selector: formatPrefix }),
  v6: fc.uniqueArray(v6Prefix, { minLength: 1, maxLength: 10, selector: formatPrefix }),
});
type Pools = { v4: Prefix[]; v6: Prefix[] };
const poolOf = (pools: Pools, f: Family) => (f === 4 ? pools.v4 : pools.v6);

// ---- operations -----------------------------------------------------------------------------------------------

/** How the effective (post-policy) set relates to the received one. */
type EffKind = { k: 'same' } | { k: 'null' } | { k: 'other'; attr: number } | { k: 'equal-copy' };
type Op =
  | { k: 'update'; src: number; fam: Family; idxs: number[]; attr: number; copy: boolean; eff: EffKind; reject: number[] | null }
  | { k: 'withdraw'; src: number; fam: Family; idx: number }
  | { k: 'drop'; src: number }
  | { k: 'flush' };

function opArb(equalCopies: boolean): fc.Arbitrary<Op> {
  const effKinds: fc.Arbitrary<EffKind>[] = [
    fc.constant({ k: 'same' as const }),
    fc.constant({ k: 'same' as const }),
    fc.constant({ k: 'null' as const }),
    fc.nat({ max: POOL.length - 1 }).map((attr) => ({ k: 'other' as const, attr })),
  ];
  if (equalCopies) effKinds.push(fc.constant({ k: 'equal-copy' as const }));
  const src = fc.nat({ max: SOURCES.length - 1 });
  const fam = fc.constantFrom(4 as const, 6 as const);
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        k: fc.constant('update' as const),
        src,
        fam,
        idxs: fc.array(fc.nat(), { minLength: 0, maxLength: 8 }), // may repeat a prefix inside one list
        attr: fc.nat({ max: POOL.length - 1 }),
        copy: fc.boolean(),
        eff: fc.oneof(...effKinds),
        reject: fc.option(fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), { nil: null }),
      }),
    },
    { weight: 3, arbitrary: fc.record({ k: fc.constant('withdraw' as const), src, fam, idx: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ k: fc.constant('drop' as const), src }) },
    { weight: 2, arbitrary: fc.constant({ k: 'flush' as const }) },
  );
}

interface Resolved {
  source: string;
  family: Family;
  prefixes: Prefix[];
  attrs: PathAttrs;
  effective: PathAttrs | null;
  accept: ((p: Prefix) => boolean) | undefined;
}

/** The objects an update op stands for (made once, so both RIBs get the very same objects). */
function resolveUpdate(op: Extract<Op, { k: 'update' }>, pools: Pools): Resolved {
  const pool = poolOf(pools, op.fam);
  const attrs = op.copy ? freshCopy(op.attr) : POOL[op.attr];
  let effective: PathAttrs | null;
  switch (op.eff.k) {
    case 'same': effective = attrs; break;
    case 'null': effective = null; break;
    // Another pool entry: different content unless it is the same entry (then the very same object).
    case 'other': effective = op.eff.attr === op.attr ? attrs : POOL[op.eff.attr]; break;
    case 'equal-copy': effective = freshCopy(op.attr); break; // equal content, another object
  }
  let accept: ((p: Prefix) => boolean) | undefined;
  if (op.reject !== null) {
    const rejected = new Set(op.reject.map((i) => formatPrefix(pool[i % pool.length])));
    accept = (p) => !rejected.has(formatPrefix(p));
  }
  return { source: SOURCE_NAMES[op.src], family: op.fam, prefixes: op.idxs.map((i) => pool[i % pool.length]), attrs, effective, accept };
}

/** The whole visible state of a RIB over the prefix pools, as comparable text. */
function ribState(rib: Rib, pools: Pools): unknown {
  const prefixes = [...pools.v4, ...pools.v6];
  return {
    best: prefixes.map((p) => {
      const b = rib.best(p);
      return b ? describePath(b) : null;
    }),
    multipath: prefixes.map((p) => rib.multipath(p).map(describePath)),
    paths: prefixes.map((p) => rib.paths(p).map(describePath)),
    counts: SOURCE_NAMES.map((s) => rib.counts(s)),
    adjIn: SOURCE_NAMES.map((s) => [...rib.adjRibIn(s)].map((e) => [formatPrefix(e.prefix), contentKey(e.attrs), e.effective && contentKey(e.effective), e.stale])),
    entries: [...rib.entries()].map((r) => [formatPrefix(r.prefix), r.multipath.map(describePath)]),
    size: rib.size,
    prefixCount: rib.prefixCount,
    pathCount: rib.pathCount,
    interned: rib.interner.size,
  };
}

const batchText = (b: RibChangeBatch): string[] =>
  [...b].map((c) => `${c.type} ${formatPrefix(c.prefix)} ${c.best ? describePath(c.best) : '-'} ${c.multipath?.map(describePath).join(',') ?? '-'}`).sort();

/** updateList on one RIB, per-prefix update on another: equal at every step, nothing held after dropping all. */
function listVersusSingle(equalCopies: boolean) {
  return fc.property(
    prefixPools,
    fc.integer({ min: 1, max: 3 }),
    fc.boolean(),
    fc.array(opArb(equalCopies), { minLength: 1, maxLength: 40 }),
    (pools, maxPaths, subscribe, ops) => {
      const list = newRib({ bestPath: { maxPaths } });
      const single = newRib({ bestPath: { maxPaths } });
      const batches: [string[][], string[][]] = [[], []];
      if (subscribe) {
        list.subscribe((b) => batches[0].push(batchText(b)));
        single.subscribe((b) => batches[1].push(batchText(b)));
      }
      for (const op of ops) {
        switch (op.k) {
          case 'update': {
            const r = resolveUpdate(op, pools);
            list.updateList(r.source, listOf(r.family, r.prefixes), r.attrs, r.effective, r.accept);
            for (const p of r.prefixes) {
              const eff = r.effective !== null && (r.accept === undefined || r.accept(p)) ? r.effective : null;
              single.update(r.source, p, r.attrs, eff);
            }
            break;
          }
          case 'withdraw': {
            const pool = poolOf(pools, op.fam);
            const p = pool[op.idx % pool.length];
            assert.equal(list.withdraw(SOURCE_NAMES[op.src], p), single.withdraw(SOURCE_NAMES[op.src], p));
            break;
          }
          case 'drop':
            assert.equal(list.dropSource(SOURCE_NAMES[op.src]), single.dropSource(SOURCE_NAMES[op.src]));
            break;
          case 'flush':
            assert.equal(list.flush(), single.flush());
            break;
        }
        assert.deepEqual(ribState(list, pools), ribState(single, pools), `after ${JSON.stringify(op)}`);
      }
      list.flush();
      single.flush();
      assert.deepEqual(batches[0], batches[1], 'the same change batches');
      for (const rib of [list, single]) {
        for (const s of SOURCE_NAMES) rib.dropSource(s);
        rib.flush();
        assert.equal(rib.interner.size, 0, 'no attribute references left');
        assert.equal(rib.prefixCount, 0);
        assert.equal(rib.pathCount, 0);
        assert.equal(rib.size, 0);
      }
    },
  );
}

t.test('updateList equals per-prefix update (IPv4 and IPv6, maxPaths 1..3), and leaks nothing', async (t) => {
  fc.assert(listVersusSingle(false), { numRuns: 250 });
  t.pass('250 sequences');
});

// Regression: an `effective` equal in content to `attrs` but another object once took one reference too many
// (internId(effective) takes one, and the per-prefix retain counted as if it had not).

t.test('updateList with an effective set equal in content to attrs (another object)', async (t) => {
  const rib = newRib();
  const attrs = freshCopy(0);
  const effective = freshCopy(0);
  t.ok(attrs !== effective && attrsEqual(attrs, effective), 'equal content, two objects');
  rib.updateList('p1', listOf(4, [P('10.0.0.0/24'), P('10.0.1.0/24')]), attrs, effective);
  t.same(rib.counts('p1'), { received: 2, accepted: 2, best: 2, stale: 0 });
  t.equal(rib.interner.refCount(attrs), 4, 'two prefixes: one reference each for received and effective');
  rib.dropSource('p1');
  t.equal(rib.prefixCount, 0);
  t.equal(rib.pathCount, 0);
  t.equal(rib.interner.size, 0, 'nothing held once the source is dropped');
  // The property above with such effective sets too.
  const r = fc.check(listVersusSingle(true), { numRuns: 100 });
  const why = r.failed ? fc.defaultReportMessage(r)!.slice(0, 1500) : '';
  t.notOk(r.failed, `per-prefix and list ingest agree and leak nothing${why ? `\n${why}` : ''}`);
});

t.test('updateList: an empty list, a rejecting accept, and a re-sent list', async (t) => {
  const rib = newRib();
  const a = POOL[0];
  rib.updateList('p1', new PrefixList(4), a, a);
  t.equal(rib.interner.size, 0, 'an empty list takes no references');
  t.equal(rib.prefixCount, 0);
  const prefixes = [P('10.0.0.0/24'), P('10.0.1.0/24'), P('10.0.2.0/24')];
  const seen: string[] = [];
  rib.updateList('p1', listOf(4, prefixes), a, POOL[1], (p) => {
    seen.push(formatPrefix(p));
    return p.w0 !== prefixes[1].w0;
  });
  t.same(seen, prefixes.map(formatPrefix), 'accept asked once per prefix, in order');
  t.same(rib.counts('p1'), { received: 3, accepted: 2, best: 2, stale: 0 });
  t.equal(rib.best(prefixes[1]), undefined, 'the rejected prefix has no best');
  t.ok(rib.best(prefixes[0]) && attrsEqual(rib.best(prefixes[0])!.attrs, POOL[1]), 'accepted ones use the effective set');
  t.equal(rib.interner.refCount(a), 3, 'received set: one reference per prefix');
  t.equal(rib.interner.refCount(POOL[1]), 2, 'effective set: one per accepted prefix');
  rib.updateList('p1', listOf(4, prefixes), a, null, () => t.fail('accept is not asked when all are rejected'));
  t.same(rib.counts('p1'), { received: 3, accepted: 0, best: 0, stale: 0 });
  t.equal(rib.interner.refCount(POOL[1]), 0);
  rib.updateList('p1', listOf(4, prefixes), a, a);
  rib.updateList('p1', listOf(4, prefixes), a, a); // the same again: no change
  t.equal(rib.interner.refCount(a), 6);
  rib.dropSource('p1');
  t.equal(rib.interner.size, 0);
  t.equal(rib.prefixCount, 0);
});

// ---- the change feed ------------------------------------------------------------------------------------------

type Snapshot = Map<string, string[]>;
const snapshot = (rib: Rib): Snapshot => new Map([...rib.entries()].map((r) => [formatPrefix(r.prefix), r.multipath.map(describePath)]));

/** Check a batch against itself (every accessor) and against the diff of two snapshots. */
function checkBatch(b: RibChangeBatch, before: Snapshot, after: Snapshot, maxPaths: number): void {
  assert.ok(b instanceof RibChangeBatch);
  const all = [...b];
  assert.equal(all.length, b.length, 'iteration yields length changes');
  const got: string[] = [];
  for (let i = 0; i < b.length; i++) {
    const c = b.at(i);
    assert.equal(b.typeAt(i), c.type);
    assert.equal(formatPrefix(b.prefixAt(i)), formatPrefix(c.prefix));
    assert.equal(formatPrefix(all[i].prefix), formatPrefix(c.prefix));
    assert.equal(all[i].type, c.type);
    const key = formatPrefix(c.prefix);
    if (c.type === 'withdraw') {
      assert.equal(b.sourceAt(i), null, 'no source for a withdrawal');
      assert.equal(c.best, undefined);
      assert.equal(c.multipath, undefined);
    } else {
      assert.ok(c.best !== undefined);
      assert.equal(b.sourceAt(i), c.best.source);
      assert.equal(describePath(c.best), after.get(key)![0]);
      if (maxPaths > 1) assert.deepEqual(c.multipath!.map(describePath), after.get(key));
      else assert.equal(c.multipath, undefined);
    }
    got.push(`${c.type} ${key}`);
  }
  const want: string[] = [];
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    const x = before.get(key);
    const y = after.get(key);
    if (!x && y) want.push(`add ${key}`);
    else if (x && !y) want.push(`withdraw ${key}`);
    else if (x && y && JSON.stringify(x) !== JSON.stringify(y)) want.push(`replace ${key}`);
  }
  assert.deepEqual([...got].sort(), want.sort(), 'the batch is the net change since the last flush');
  assert.equal(new Set(got).size, got.length, 'each prefix at most once');
}

t.test('change feed: batch accessors agree with at(i), and the batch is the net change', async (t) => {
  let delivered = 0;
  fc.assert(
    fc.property(prefixPools, fc.integer({ min: 1, max: 3 }), fc.array(opArb(false), { minLength: 1, maxLength: 40 }), (pools, maxPaths, ops) => {
      const rib = newRib({ bestPath: { maxPaths } });
      let before: Snapshot = new Map();
      let calls = 0;
      const unsubscribe = rib.subscribe((b) => {
        calls++;
        checkBatch(b, before, snapshot(rib), maxPaths);
      });
      const flush = () => {
        const n = rib.flush();
        assert.ok(n >= 0);
        before = snapshot(rib);
      };
      for (const op of [...ops, { k: 'flush' } as Op]) {
        if (op.k === 'update') {
          const r = resolveUpdate(op, pools);
          // Half the updates through the list path, half per prefix: the feed must not care.
          if (op.copy) rib.updateList(r.source, listOf(r.family, r.prefixes), r.attrs, r.effective, r.accept);
          else for (const p of r.prefixes) rib.update(r.source, p, r.attrs, r.effective !== null && (!r.accept || r.accept(p)) ? r.effective : null);
        } else if (op.k === 'withdraw') rib.withdraw(SOURCE_NAMES[op.src], poolOf(pools, op.fam)[op.idx % poolOf(pools, op.fam).length]);
        else if (op.k === 'drop') rib.dropSource(SOURCE_NAMES[op.src]);
        else {
          const pending = rib.pendingCount;
          const c = calls;
          flush();
          assert.equal(rib.pendingCount, 0);
          if (pending === 0) assert.equal(calls, c, 'nothing pending, no batch');
        }
      }
      delivered += calls;
      unsubscribe();
      for (const s of SOURCE_NAMES) rib.dropSource(s);
      rib.flush();
      assert.equal(rib.interner.size, 0, 'the feed holds no references after its flush');
      assert.equal(rib.prefixCount, 0);
    }),
    { numRuns: 250 },
  );
  t.ok(delivered > 0, `${delivered} batches checked`);
});

t.test('change feed: withdrawn prefixes are readable inside the callback, even while the RIB grows', async (t) => {
  const rib = newRib();
  const gone = [P('10.0.0.0/24'), P('10.0.1.0/24'), P('fd00::/64'), P('0.0.0.0/0'), P('::/0')];
  for (const p of gone) rib.update('p1', p, POOL[0]);
  rib.flush();
  const fresh = Array.from({ length: 50 }, (_, i) => P(`172.16.${i}.0/24`));
  let seen: string[] = [];
  const off = rib.subscribe((b) => {
    // Grow the RIB first: new records must not take the withdrawn ones while this batch is being read.
    if (seen.length === 0) for (const p of fresh) rib.update('p2', p, POOL[1]);
    for (let i = 0; i < b.length; i++) {
      t.equal(b.typeAt(i), 'withdraw');
      t.equal(b.sourceAt(i), null);
      t.equal(formatPrefix(b.at(i).prefix), formatPrefix(b.prefixAt(i)));
      seen.push(formatPrefix(b.prefixAt(i)));
    }
  });
  t.equal(rib.dropSource('p1'), gone.length);
  t.equal(rib.prefixCount, gone.length, 'records kept until the flush');
  t.equal(rib.flush(), gone.length);
  t.same(seen.sort(), gone.map(formatPrefix).sort(), 'every withdrawn prefix read back correctly');
  t.equal(rib.prefixCount, fresh.length, 'withdrawn records freed after the callback');
  seen = [];
  const adds: string[] = [];
  off();
  rib.subscribe((b) => {
    for (const c of b) adds.push(`${c.type} ${formatPrefix(c.prefix)} ${c.best?.source}`);
  });
  // The change made inside the callback was kept (the last unsubscribe flushed it).
  for (const p of fresh) t.equal(rib.best(p)?.source, 'p2');
  // Records freed above are reused: the new prefixes read back as themselves.
  rib.update('p3', P('192.168.0.0/16'), POOL[2]);
  rib.update('p3', P('fd01::/48'), POOL[2]);
  rib.flush();
  t.same(adds.sort(), ['add 192.168.0.0/16 p3', 'add fd01::/48 p3']);
});

t.test('change feed: a subscriber that changes the RIB inside its callback loses nothing', async (t) => {
  for (const mode of ['manual', 'scheduled'] as const) {
    const queue: (() => void)[] = [];
    const rib = newRib(mode === 'scheduled' ? { schedule: (f) => queue.push(f) } : {});
    const p = P('10.0.0.0/24');
    const q = P('fd00:1::/64');
    const r = P('10.9.0.0/16');
    const batches: string[][] = [];
    let reacted = false;
    rib.subscribe((b) => {
      batches.push([...b].map((c) => `${c.type} ${formatPrefix(c.prefix)} ${c.best?.source ?? '-'}`).sort());
      if (reacted) return;
      reacted = true;
      rib.update('p2', q, POOL[3]); // a new prefix
      rib.withdraw('p1', p); // the prefix this very batch announces
      rib.update('p4', r, POOL[6]); // replaces the best of another prefix in this batch (LOCAL_PREF 200)
    });
    rib.update('p1', p, POOL[0]);
    rib.update('p1', r, POOL[0]);
    const run = () => {
      if (mode === 'manual') return rib.flush();
      t.equal(queue.length, 1, `${mode}: one flush scheduled`);
      queue.shift()!();
      return 0;
    };
    run();
    t.same(batches, [['add 10.0.0.0/24 p1', 'add 10.9.0.0/16 p1']], `${mode}: first batch`);
    t.equal(rib.pendingCount, 3, `${mode}: the callback's changes wait for the next flush`);
    run();
    t.same(batches[1], ['add fd00:1::/64 p2', 'replace 10.9.0.0/16 p4', 'withdraw 10.0.0.0/24 -'], `${mode}: they arrive in the next batch`);
    t.equal(rib.best(p), undefined);
    t.equal(rib.best(q)?.source, 'p2');
    t.equal(rib.best(r)?.source, 'p4');
    t.equal(rib.prefixCount, 2, `${mode}: the withdrawn prefix's record is freed`);
    t.equal(rib.pendingCount, 0);
    if (mode === 'scheduled') t.equal(queue.length, 0);
  }
});

// ---- export ---------------------------------------------------------------------------------------------------

// Drop MED on export; nothing for prefixes whose length is 3 mod 4.
const policy: ExportPolicy = (prefix, best) => (prefix.len % 4 === 3 ? null : withAttrs(best.attrs, { med: undefined }));

/** What `peer` should hold: the policy's result for every best path not learned from `peer`. */
function expectedOut(rib: Rib, peer: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const r of rib.entries()) {
    if (r.best.source === peer) continue;
    const a = policy(r.prefix, r.best, r.multipath);
    if (a !== null) m.set(formatPrefix(r.prefix), contentKey(a));
  }
  return m;
}

function actualOut(rib: Rib, peer: string): Map<string, string> {
  return new Map([...rib.adjRibOut(peer).entries()].map((e) => [formatPrefix(e.prefix), contentKey(e.attrs)]));
}

/** Apply an export update to a model of the peer's table, checking it only states real differences. */
function applyUpdate(model: Map<string, string>, u: ExportUpdate, rib: Rib, peer: string): void {
  for (const p of u.withdraw) {
    assert.ok(model.delete(formatPrefix(p)), `withdrawal of ${formatPrefix(p)} the peer did not have`);
  }
  for (const [attrs, prefixes] of u.announce) {
    for (const p of prefixes) {
      assert.notEqual(rib.best(p)?.source, peer, `${formatPrefix(p)} announced back to ${peer}, where its best path came from`);
      assert.notEqual(model.get(formatPrefix(p)), contentKey(attrs), 'announcement of what the peer already has');
      model.set(formatPrefix(p), contentKey(attrs));
    }
  }
}

const plainUpdate = (u: ExportUpdate) => ({
  announce: [...u.announce].map(([a, ps]) => [contentKey(a), ps.map(formatPrefix).sort()]).sort(),
  withdraw: u.withdraw.map(formatPrefix).sort(),
});

t.test('export never sends a route back to the peer its best path came from (batch, array, exportAll)', async (t) => {
  let announced = 0;
  let suppressed = 0;
  fc.assert(
    fc.property(prefixPools, fc.integer({ min: 1, max: 3 }), fc.array(opArb(false), { minLength: 1, maxLength: 40 }), (pools, maxPaths, ops) => {
      // Twin RIBs with the same history: one exports from the batch, the other from a plain RibChange[].
      const ribs = [newRib({ bestPath: { maxPaths } }), newRib({ bestPath: { maxPaths } })];
      const models = ribs.map(() => new Map(SOURCE_NAMES.map((s) => [s, new Map<string, string>()])));
      const peers = ['p1', 'p2', 'p3'];
      const updates: unknown[][] = [[], []];
      ribs.forEach((rib, k) => {
        rib.subscribe((b) => {
          const changes: RibChangeBatch | RibChange[] = k === 0 ? b : [...b];
          for (const peer of peers) {
            for (let i = 0; i < b.length; i++) if (b.sourceAt(i) === peer) suppressed++;
            const u = rib.exportChanges(peer, changes, policy);
            applyUpdate(models[k].get(peer)!, u, rib, peer);
            updates[k].push(plainUpdate(u));
          }
        });
      });
      for (const op of [...ops, { k: 'flush' } as Op]) {
        for (const rib of ribs) {
          if (op.k === 'update') {
            const r = resolveUpdate(op, pools);
            rib.updateList(r.source, listOf(r.family, r.prefixes), r.attrs, r.effective, r.accept);
          } else if (op.k === 'withdraw') rib.withdraw(SOURCE_NAMES[op.src], poolOf(pools, op.fam)[op.idx % poolOf(pools, op.fam).length]);
          else if (op.k === 'drop') rib.dropSource(SOURCE_NAMES[op.src]);
          else rib.flush();
        }
        if (op.k !== 'flush') continue;
        ribs.forEach((rib, k) => {
          for (const peer of peers) {
            const want = expectedOut(rib, peer);
            assert.deepEqual(actualOut(rib, peer), want, `Adj-RIB-Out of ${peer}`);
            assert.deepEqual(models[k].get(peer), want, `what ${peer} was sent adds up to its Adj-RIB-Out`);
            announced += want.size;
          }
          // exportAll after exportChanges: nothing left to send.
          const again = rib.exportAll('p1', policy);
          assert.equal(again.announce.size + again.withdraw.length, 0, 'exportAll finds no difference');
          // A peer kept up to date by exportAll alone reaches the same state.
          const model = models[k].get('p4')!;
          applyUpdate(model, rib.exportAll('p4', policy), rib, 'p4');
          assert.deepEqual(actualOut(rib, 'p4'), expectedOut(rib, 'p4'), 'Adj-RIB-Out of p4 (exportAll)');
          assert.deepEqual(model, expectedOut(rib, 'p4'));
        });
      }
      assert.deepEqual(updates[0], updates[1], 'the batch and the array export the same updates');
      ribs.forEach((rib, k) => {
        for (const s of SOURCE_NAMES) rib.dropSource(s);
        rib.flush();
        applyUpdate(models[k].get('p4')!, rib.exportAll('p4', policy), rib, 'p4');
        for (const peer of [...peers, 'p4']) {
          assert.equal(rib.adjRibOut(peer).size, 0, `${peer} has nothing left`);
          assert.equal(models[k].get(peer)!.size, 0, `${peer} was told to withdraw everything`);
        }
        for (const peer of [...peers, 'p4']) rib.clearAdjRibOut(peer);
        assert.equal(rib.interner.size, 0);
      });
    }),
    { numRuns: 200 },
  );
  t.ok(announced > 0 && suppressed > 0, `${announced} routes held by peers, ${suppressed} changes kept from their own peer`);
});

t.test('export: the best path moving to the peer withdraws the route from it', async (t) => {
  for (const form of ['batch', 'array'] as const) {
    const rib = newRib();
    const p = P('10.0.0.0/24');
    const sent: ExportUpdate[] = [];
    rib.subscribe((b) => sent.push(rib.exportChanges('p1', form === 'batch' ? b : [...b], policy)));
    rib.update('p2', p, POOL[0]);
    rib.flush();
    t.same(plainUpdate(sent[0]).announce.map((x) => x[1]), [['10.0.0.0/24']], `${form}: announced to p1`);
    rib.update('p1', p, POOL[6]); // LOCAL_PREF 200: p1's own path wins
    rib.flush();
    t.equal(rib.best(p)?.source, 'p1');
    t.same(plainUpdate(sent[1]), { announce: [], withdraw: ['10.0.0.0/24'] }, `${form}: withdrawn from p1`);
    t.equal(rib.adjRibOut('p1').size, 0);
    rib.withdraw('p1', p); // back to p2's path
    rib.flush();
    t.same(plainUpdate(sent[2]).announce.map((x) => x[1]), [['10.0.0.0/24']], `${form}: announced again`);
  }
});

// Regression: RibChangeBatch.sourceAt once answered from the flush-time state even after an earlier subscriber
// changed the RIB in its callback, so a later exportChanges(peer, batch) could send the peer its own route.

t.test('export after an earlier subscriber changed the RIB in its callback', async (t) => {
  for (const form of ['batch', 'array'] as const) {
    const rib = newRib();
    const p = P('10.0.0.0/24');
    let reacted = false;
    rib.subscribe(() => {
      if (reacted) return;
      reacted = true;
      rib.update('p2', p, POOL[6]); // LOCAL_PREF 200: p2's path becomes the best
    });
    const sent: ExportUpdate[] = [];
    rib.subscribe((b) => {
      if (form === 'batch' && b.typeAt(0) !== 'withdraw') {
        t.equal(b.sourceAt(0), b.at(0).best!.source, 'sourceAt agrees with at(i)');
      }
      const u = rib.exportChanges('p2', form === 'batch' ? b : [...b], policy);
      for (const [, prefixes] of u.announce) {
        for (const q of prefixes) {
          t.not(rib.best(q)?.source, 'p2', `${form}: ${formatPrefix(q)} not sent to p2, where its best path is from`);
        }
      }
      sent.push(u);
    });
    rib.update('p1', p, POOL[0]);
    rib.flush();
    t.equal(rib.best(p)?.source, 'p2');
    rib.flush(); // the change made in the callback
    t.equal(sent.length, 2, `${form}: two batches`);
    t.equal(rib.adjRibOut('p2').get(p), undefined, `${form}: in the end p2 does not hold its own route`);
  }
});

// ---- AttrInterner against a Map oracle ------------------------------------------------------------------------

// A small pool of contents, each with several distinct records and a plain AttrsInit.
const I_INITS: AttrsInit[] = [
  { nextHop: nh4 },
  { nextHop: nh4, med: 1 },
  { nextHop: nh4, med: 2 },
  { nextHop: nh4, asPath: [asSequence(1, 2)] },
  { nextHop: nh4, asPath: [asSet(2, 1)] },
  { nextHop: nh4, communities: [3, 1, 2] },
];
const REPS = 3;

type IOp =
  | { k: 'intern'; c: number; rep: number; init: boolean; byId: boolean }
  | { k: 'release'; c: number; byId: boolean; canonical: boolean }
  | { k: 'retain'; c: number; n: number }
  | { k: 'drain'; c: number }
  | { k: 'badId'; extra: number }
  | { k: 'bulk'; n: number };

const iop: fc.Arbitrary<IOp> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ k: fc.constant('intern' as const), c: fc.nat({ max: I_INITS.length - 1 }), rep: fc.nat({ max: REPS - 1 }), init: fc.boolean(), byId: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ k: fc.constant('release' as const), c: fc.nat({ max: I_INITS.length - 1 }), byId: fc.boolean(), canonical: fc.oneof(fc.constant(true), fc.constant(true), fc.constant(false)) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('retain' as const), c: fc.nat({ max: I_INITS.length - 1 }), n: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('drain' as const), c: fc.nat({ max: I_INITS.length - 1 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('badId' as const), extra: fc.nat({ max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('bulk' as const), n: fc.integer({ min: 600, max: 2500 }) }) },
);

interface Held {
  canon: PathAttrs;
  id: number;
  refs: number;
}

let bulkSerial = 0;

/**
 * Intern `n` new distinct contents and check them; release half in a shuffled order (tombstones pile up) and
 * re-intern equal copies of the other half (same ids while held, found past the tombstones); release the rest.
 */
function bulk(I: AttrInterner, n: number, baseSize: number, seed: number): void {
  const base = bulkSerial;
  bulkSerial += n;
  const mk = (i: number) => makeAttrs({ nextHop: nh4, localPref: 1000 + ((base + i) % 1_000_000_000), med: i });
  const recs: PathAttrs[] = [];
  for (let i = 0; i < n; i++) recs.push(mk(i));
  const ids = recs.map((r) => I.internId(r, true));
  assert.equal(new Set(ids).size, n, 'distinct contents get distinct ids');
  assert.equal(I.size, baseSize + n);
  for (let i = 0; i < n; i += 7) {
    assert.equal(I.get(ids[i]), recs[i]);
    assert.equal(I.idOf(recs[i]), ids[i]);
    assert.equal(I.refCount(recs[i]), 1);
  }
  const order = ids.map((_, i) => i).sort((a, b) => (((a * 2654435761 + seed) >>> 0) % 1009) - (((b * 2654435761 + seed) >>> 0) % 1009));
  const half = order.length >> 1;
  for (const i of order.slice(0, half)) I.releaseId(ids[i]);
  assert.equal(I.size, baseSize + n - half);
  for (const i of order.slice(half)) {
    assert.equal(I.internId(mk(i)), ids[i], 'an equal copy of a held content gets its id');
    assert.equal(I.refCount(recs[i]), 2);
  }
  for (const i of order.slice(0, half)) assert.equal(I.lookup(mk(i)), undefined, 'released content is gone');
  for (const i of order.slice(half)) {
    I.release(recs[i]);
    I.releaseId(ids[i]);
  }
  assert.equal(I.size, baseSize);
  for (let i = 0; i < n; i += 11) {
    assert.equal(I.lookup(recs[i]), undefined);
    assert.equal(I.refCount(recs[i]), 0);
  }
}

function checkInterner(I: AttrInterner, held: Map<string, Held>, reps: PathAttrs[][]): void {
  assert.equal(I.size, held.size, 'size');
  const ids = new Set<number>();
  for (let c = 0; c < reps.length; c++) {
    const h = held.get(contentKey(reps[c][0]));
    for (const r of reps[c]) {
      assert.equal(I.refCount(r), h ? h.refs : 0, 'refCount');
      assert.equal(I.lookup(r), h?.canon, 'lookup');
      assert.equal(I.idOf(r), h && h.canon === r ? h.id : -1, 'idOf');
    }
    if (h) {
      assert.equal(I.get(h.id), h.canon, 'get(id)');
      assert.equal(I.idOf(h.canon), h.id);
      assert.equal(I.refCount(h.canon), h.refs);
      ids.add(h.id);
    }
  }
  assert.equal(ids.size, held.size, 'held contents have distinct ids');
}

function runInterner(ops: IOp[], seed: number): number {
  const I = new AttrInterner();
  const held = new Map<string, Held>();
  const reps = I_INITS.map((init) => Array.from({ length: REPS }, () => makeAttrs(init)));
  const keys = reps.map((r) => contentKey(r[0]));
  let maxId = -1;
  let grew = 0;
  for (const op of ops) {
    switch (op.k) {
      case 'intern': {
        const input: PathAttrs | AttrsInit = op.init ? { ...I_INITS[op.c] } : reps[op.c][op.rep];
        const before = held.get(keys[op.c]);
        let id: number;
        let canon: PathAttrs;
        if (op.byId) {
          id = I.internId(input);
          canon = I.get(id);
        } else {
          canon = I.intern(input);
          id = I.idOf(canon);
        }
        if (before) {
          assert.equal(id, before.id, 'equal content, same id while held');
          assert.equal(canon, before.canon, 'equal content, same instance while held');
          before.refs++;
        } else {
          assert.equal(contentKey(canon), keys[op.c], 'the canonical instance has the content');
          for (const h of held.values()) assert.notEqual(h.id, id, 'a new content never takes a live id');
          held.set(keys[op.c], { canon, id, refs: 1 });
        }
        maxId = Math.max(maxId, id);
        break;
      }
      case 'release': {
        const h = held.get(keys[op.c]);
        if (!h) {
          assert.throws(() => I.release(reps[op.c][0]), AttrError, 'release of content not held');
          break;
        }
        if (op.byId) I.releaseId(h.id);
        else if (op.canonical) I.release(h.canon);
        else {
          const other = reps[op.c].find((r) => r !== h.canon)!;
          assert.throws(() => I.release(other), AttrError, 'release needs the canonical instance');
          break;
        }
        if (--h.refs === 0) held.delete(keys[op.c]);
        break;
      }
      case 'retain': {
        const h = held.get(keys[op.c]);
        if (!h) break;
        if (op.n === 1) I.retainId(h.id);
        else I.retainIdN(h.id, op.n);
        h.refs += op.n;
        break;
      }
      case 'drain': {
        const h = held.get(keys[op.c]);
        if (!h) break;
        while (h.refs > 0) {
          I.releaseId(h.id);
          h.refs--;
        }
        held.delete(keys[op.c]);
        assert.throws(() => I.releaseId(h.id), AttrError, 'a released id is unknown');
        assert.throws(() => I.retainId(h.id), AttrError);
        assert.throws(() => I.get(h.id), AttrError);
        break;
      }
      case 'badId': {
        const live = new Set([...held.values()].map((h) => h.id));
        let id = maxId + 1 + op.extra;
        while (live.has(id)) id++;
        assert.throws(() => I.releaseId(id), AttrError);
        assert.throws(() => I.retainIdN(id, 2), AttrError);
        break;
      }
      case 'bulk':
        bulk(I, op.n, held.size, seed);
        grew++;
        break;
    }
    checkInterner(I, held, reps);
  }
  return grew;
}

t.test('AttrInterner agrees with a Map oracle (ids reused, tombstones, growth)', async (t) => {
  let grew = 0;
  fc.assert(
    fc.property(fc.array(iop, { minLength: 1, maxLength: 120 }), fc.nat(), (ops, seed) => {
      grew += runInterner(ops, seed);
    }),
    { numRuns: 150 },
  );
  t.ok(grew > 0, `the table grew past hundreds of entries in ${grew} bulk steps`);
  // And once for certain: thousands of distinct sets between small-pool operations.
  const fixed: IOp[] = [
    { k: 'intern', c: 0, rep: 0, init: false, byId: false },
    { k: 'intern', c: 1, rep: 1, init: true, byId: true },
    { k: 'bulk', n: 6000 },
    { k: 'release', c: 0, byId: false, canonical: true },
    { k: 'intern', c: 0, rep: 2, init: false, byId: true },
    { k: 'bulk', n: 6000 },
    { k: 'drain', c: 1 },
    { k: 'intern', c: 1, rep: 0, init: false, byId: false },
    { k: 'drain', c: 0 },
    { k: 'drain', c: 1 },
  ];
  t.equal(runInterner(fixed, 1), 2, 'two bulk steps of 6000 ran with every check');
});

t.test('AttrInterner: released ids are reused; thousands of entries survive growth and rehashing', async (t) => {
  const I = new AttrInterner();
  const N = 5000;
  const recs = Array.from({ length: N }, (_, i) => makeAttrs({ nextHop: nh4, med: i, communities: [i % 13] }));
  const ids = recs.map((r) => I.internId(r, true));
  t.equal(I.size, N);
  t.equal(new Set(ids).size, N);
  let bad = 0;
  for (let i = 0; i < N; i++) if (I.get(ids[i]) !== recs[i] || I.lookup(makeAttrs({ nextHop: nh4, med: i, communities: [i % 13] })) !== recs[i]) bad++;
  t.equal(bad, 0, 'every entry found after growing');
  // Release every other one, intern new contents: they take released ids.
  const freed = new Set<number>();
  for (let i = 0; i < N; i += 2) {
    I.release(recs[i]);
    freed.add(ids[i]);
  }
  t.equal(I.size, N / 2);
  bad = 0;
  for (let i = 1; i < N; i += 2) if (I.internId(makeAttrs({ nextHop: nh4, med: i, communities: [i % 13] })) !== ids[i]) bad++;
  t.equal(bad, 0, 'equal copies of the survivors get their ids (found past the tombstones)');
  for (let i = 1; i < N; i += 2) I.releaseId(ids[i]);
  const news = Array.from({ length: N / 2 }, (_, i) => makeAttrs({ nextHop: nh4, med: N + i }));
  const newIds = news.map((r) => I.internId(r, true));
  t.ok(newIds.every((id) => freed.has(id)), 'new contents reuse released ids');
  t.equal(new Set(newIds).size, N / 2);
  bad = 0;
  for (let i = 1; i < N; i += 2) if (I.get(ids[i]) !== recs[i] || I.refCount(recs[i]) !== 1) bad++;
  for (let i = 0; i < N; i += 2) if (I.lookup(recs[i]) !== undefined) bad++;
  for (let i = 0; i < news.length; i++) if (I.idOf(news[i]) !== newIds[i]) bad++;
  t.equal(bad, 0, 'survivors intact, released gone, new ones found');
  for (const id of [...newIds, ...ids.filter((_, i) => i % 2 === 1)]) I.releaseId(id);
  t.equal(I.size, 0);
});

t.test('AttrInterner: a set interned by id is held as a row, and its record made once when asked for', async (t) => {
  const I = new AttrInterner();
  // Every kind of field a row keeps: numbers (MED and LOCAL_PREF at 0 and above 2^31), lists, rare attributes.
  const inits: AttrsInit[] = [
    { nextHop: nh4, med: 0, localPref: 0, communities: [5] },
    { nextHop: nh4, med: 0xfffffff0, localPref: 0x80000001, communities: [3, 1, 2], origin: 2 },
    { nextHop: null, asPath: [asSequence(65001, 65002)], atomicAggregate: true, clusterList: [7], originatorId: 9 },
    { nextHop: nh4, extCommunities: [[1, 2]], largeCommunities: [[1, 2, 3]], aggregator: { asn: 65003, address: nh4 } },
    {},
  ];
  const given = inits.map((i) => makeAttrs(i));
  const ids = given.map((a) => I.internId(a));
  for (let i = 0; i < inits.length; i++) {
    const got = I.get(ids[i]);
    t.not(got, given[i], `set ${i}: internId does not keep the record it was given`);
    t.ok(attrsEqual(got, given[i]) && got.hash === given[i].hash, `set ${i}: the record made from the row has the content`);
    t.same({ ...got, communities: got.communities, extCommunities: got.extCommunities, med: got.med, localPref: got.localPref },
      { ...given[i], communities: given[i].communities, extCommunities: given[i].extCommunities, med: given[i].med, localPref: given[i].localPref });
    t.ok(Object.isFrozen(got), 'frozen');
    t.equal(I.get(ids[i]), got, 'made once: the same record for every reader');
    t.equal(I.intern(given[i]), got, 'intern returns the record already made');
    t.equal(I.internId(makeAttrs(inits[i])), ids[i], 'an equal copy finds the row');
    t.equal(I.refCount(given[i]), 3);
  }
  // intern keeps its argument as the record when none was made yet (hit or miss).
  const fresh = makeAttrs({ nextHop: nh4, med: 77 });
  t.equal(I.intern(fresh), fresh, 'a new content: intern keeps the record it was given');
  const other = makeAttrs({ nextHop: nh4, med: 78 });
  const oid = I.internId(other);
  const copy = makeAttrs({ nextHop: nh4, med: 78 });
  t.equal(I.intern(copy), copy, 'a held content without a record: the record given becomes it');
  t.equal(I.get(oid), copy);
  // A released id's row keeps nothing; the id comes back for a new content with the new content's record.
  for (let k = 0; k < 3; k++) I.releaseId(ids[1]);
  t.throws(() => I.get(ids[1]), AttrError, 'a released id has no record');
  const reused = I.internId(makeAttrs({ nextHop: nh4, med: 1234 }));
  t.equal(reused, ids[1], 'the freed id is reused');
  t.equal(I.get(reused).med, 1234, 'with the new content, not the old record');
});

t.test('AttrInterner: a decoded record is frozen when it becomes a held set\'s record, and not before', async (t) => {
  const I = new AttrInterner();
  const decoded = adoptAttrs({ nextHop: nh4, med: 5, communities: [1] });
  t.notOk(Object.isFrozen(decoded), 'adoptAttrs (the decoder) leaves its record unfrozen');
  const id = I.internId(decoded);
  t.not(I.get(id), decoded, 'internId keeps a row, not the decoded record');
  t.ok(Object.isFrozen(I.get(id)), 'the record made from the row is frozen');
  t.notOk(Object.isFrozen(decoded), 'and the decoded one is left as it was');
  const kept = adoptAttrs({ nextHop: nh4, med: 6 });
  t.equal(I.intern(kept), kept, 'intern keeps a new content\'s record');
  t.ok(Object.isFrozen(kept), 'frozen as it becomes the held record');
  const other = adoptAttrs({ nextHop: nh4, med: 7 });
  const oid = I.internId(other);
  const again = adoptAttrs({ nextHop: nh4, med: 7 });
  t.equal(I.internId(again, true), oid);
  t.equal(I.get(oid), again, 'kept on a hit too, when no record was made yet');
  t.ok(Object.isFrozen(again));
});

t.test('AttrInterner: two contents with the same hash are kept apart', async (t) => {
  // Find a full 32-bit hash collision by a birthday search over two fields.
  const seen = new Map<number, number>();
  let pair: [number, number] | null = null;
  const rec = (i: number) => makeAttrs({ nextHop: nh4, med: i & 1023, localPref: i >>> 10 });
  for (let i = 0; i < 1_200_000 && pair === null; i++) {
    const h = rec(i).hash;
    const j = seen.get(h);
    if (j !== undefined) pair = [j, i];
    else seen.set(h, i);
  }
  if (pair === null) {
    t.fail('no hash collision found among 1.2M attribute sets');
    return;
  }
  const [a, b] = [rec(pair[0]), rec(pair[1])];
  t.equal(a.hash, b.hash, 'same hash');
  t.notOk(attrsEqual(a, b), 'different content');
  const I = new AttrInterner();
  const ia = I.internId(a, true);
  t.equal(I.lookup(b), undefined, 'a colliding content is not found');
  t.equal(I.refCount(b), 0);
  const ib = I.internId(b, true);
  t.not(ia, ib, 'different ids');
  t.equal(I.size, 2);
  t.equal(I.intern(rec(pair[0])), a);
  t.equal(I.intern(rec(pair[1])), b);
  t.equal(I.refCount(a), 2);
  t.equal(I.refCount(b), 2);
  I.releaseId(ia);
  I.releaseId(ia);
  t.equal(I.lookup(a), undefined);
  t.equal(I.lookup(rec(pair[1])), b, 'the other one is still found');
  t.equal(I.intern(rec(pair[0])) === a, false, 'a released content comes back as a new instance');
  t.equal(I.size, 2);
});

// ---- Trie.insertWords(..., ifAbsent) ------------------------------------------------------------------------------

const NONE = -1;

type TOp = { k: 'insert'; idx: number; value: number; ifAbsent: boolean } | { k: 'delete'; idx: number };

function trieProperty(family: Family) {
  const prefix = family === 4 ? v4Prefix : v6Prefix;
  const addr = family === 4
    ? fc.integer({ min: 0, max: 0xffff }).map((x) => new IP(4, (0x0a000000 | x) >>> 0))
    : fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.nat({ max: 3 })).map(([x, y]) => new IP(6, 0x20010db8, x, 0, y));
  return fc.property(
    fc.constantFrom(4, 8, 16),
    fc.uniqueArray(prefix, { minLength: 1, maxLength: 20, selector: formatPrefix }),
    fc.array(
      fc.oneof(
        { weight: 4, arbitrary: fc.record({ k: fc.constant('insert' as const), idx: fc.nat(), value: fc.nat({ max: 1000 }), ifAbsent: fc.oneof(fc.constant(true), fc.constant(true), fc.constant(false)) }) },
        { weight: 1, arbitrary: fc.record({ k: fc.constant('delete' as const), idx: fc.nat() }) },
      ),
      { maxLength: 60 },
    ),
    fc.array(addr, { minLength: 1, maxLength: 10 }),
    (rootBits, pool, ops, probes) => {
      const trie = new Trie(family, { rootBits });
      const oracle = new Map<string, number>();
      for (const op of ops) {
        const p = pool[op.idx % pool.length];
        const key = formatPrefix(p);
        const old = oracle.get(key) ?? NONE;
        if (op.k === 'delete') {
          assert.equal(trie.deleteWords(p.w0, p.w1, p.w2, p.w3, p.len), old);
          oracle.delete(key);
        } else {
          const r = trie.insertWords(p.w0, p.w1, p.w2, p.w3, p.len, op.value, op.ifAbsent);
          assert.equal(r, old, op.ifAbsent ? 'ifAbsent: the stored value, or -1 when absent' : 'the previous value');
          if (!(op.ifAbsent && old !== NONE)) oracle.set(key, op.value);
        }
        assert.equal(trie.size, oracle.size);
        for (const q of pool) assert.equal(trie.getWords(q.w0, q.w1, q.w2, q.w3, q.len), oracle.get(formatPrefix(q)) ?? NONE);
        // Longest-prefix match over the held prefixes, by brute force.
        for (const ip of probes) {
          let best: Prefix | null = null;
          for (const q of pool) if (oracle.has(formatPrefix(q)) && prefixContainsIP(q, ip) && (best === null || q.len > best.len)) best = q;
          assert.equal(trie.lpmWords(ip.w0, ip.w1, ip.w2, ip.w3), best === null ? NONE : oracle.get(formatPrefix(best)));
        }
      }
    },
  );
}

for (const family of [4, 6] as const) {
  t.test(`Trie.insertWords ifAbsent agrees with a Map oracle, IPv${family}`, async (t) => {
    fc.assert(trieProperty(family), { numRuns: 300 });
    t.pass('300 sequences');
  });
}

t.test('Trie.insertWords ifAbsent: explicit cases, default route included', async (t) => {
  for (const [family, text, other] of [[4, '10.1.0.0/16', '10.1.0.0/17'], [6, '2001:db8::/32', '2001:db8::/33']] as const) {
    const trie = new Trie(family, { rootBits: 8 });
    for (const pt of ['0.0.0.0/0', '::/0', text].filter((x) => (x.includes(':') ? 6 : 4) === family)) {
      const p = P(pt);
      t.equal(trie.insertWords(p.w0, p.w1, p.w2, p.w3, p.len, 7, true), NONE, `${pt}: absent, inserted`);
      t.equal(trie.get(p), 7);
      t.equal(trie.insertWords(p.w0, p.w1, p.w2, p.w3, p.len, 8, true), 7, `${pt}: present, stored value returned`);
      t.equal(trie.get(p), 7, `${pt}: value unchanged`);
      t.equal(trie.insertWords(p.w0, p.w1, p.w2, p.w3, p.len, 9, false), 7, `${pt}: plain insert replaces`);
      t.equal(trie.get(p), 9);
    }
    const o = P(other);
    t.equal(trie.insertWords(o.w0, o.w1, o.w2, o.w3, o.len, 3, true), NONE, 'a longer prefix under it is absent');
    t.equal(trie.size, 3);
    // The longest match for an address under both is the longer one; ifAbsent on the shorter does not disturb it.
    const ip = family === 4 ? parseIP('10.1.0.1') : parseIP('2001:db8::1');
    t.equal(trie.lpm(ip)?.value, 3);
    const p = P(text);
    trie.insertWords(p.w0, p.w1, p.w2, p.w3, p.len, 100, true);
    t.equal(trie.lpm(ip)?.value, 3);
    const outside = family === 4 ? parseIP('10.1.200.1') : parseIP('2001:db8:8000::1');
    t.equal(trie.lpm(outside)?.value, 9, 'the shorter prefix still covers the rest');
  }
});

t.test('Trie.insertWords ifAbsent across the root widening threshold', async (t) => {
  const trie = new Trie(4);
  const N = (1 << 17) + 5000; // well past the size at which the root table widens (2^15)
  let bad = 0;
  for (let i = 0; i < N; i++) if (trie.insertWords((0x0a000000 + i * 256) >>> 0, 0, 0, 0, 24, i, true) !== NONE) bad++;
  t.equal(bad, 0, 'every new prefix reported absent');
  t.equal(trie.size, N);
  for (let i = 0; i < N; i++) if (trie.insertWords((0x0a000000 + i * 256) >>> 0, 0, 0, 0, 24, i + 1, true) !== i) bad++;
  t.equal(bad, 0, 'every prefix present: its stored value returned');
  for (let i = 0; i < N; i += 3) if (trie.getWords((0x0a000000 + i * 256) >>> 0, 0, 0, 0, 24) !== i) bad++;
  for (let i = 0; i < N; i += 5) if (trie.lpmWords((0x0a000000 + i * 256 + 77) >>> 0, 0, 0, 0) !== i) bad++;
  t.equal(bad, 0, 'values unchanged');
  t.equal(trie.size, N);
});
