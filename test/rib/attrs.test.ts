import t from 'tap';
import fc from 'fast-check';
import { parseIP } from '../../src/net/ip.ts';
import {
  AttrError, Origin, SegmentType, asPathLength, asSequence, asSet, attrsEqual, formatAsPath, makeAttrs, neighbourAs, originAs, withAttrs, type AttrsInit, asPathFacts, normaliseAsPath, prependAs,
} from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';

const nh = parseIP('10.0.0.1');

t.test('normalisation: set-like lists sorted and unique, sequences joined, empty segments dropped', async (t) => {
  const a = makeAttrs({
    asPath: [asSequence(1, 2), { type: SegmentType.AS_SEQUENCE, asns: [] }, asSequence(3), asSet(9, 7, 9)],
    communities: [5, 3, 5, 1],
    extCommunities: [[2, 1], [1, 9], [2, 1]],
    largeCommunities: [[1, 2, 3], [1, 1, 9]],
    nextHop: nh,
  });
  t.same(a.asPath, [asSequence(1, 2, 3), asSet(7, 9)]);
  t.same(a.communities, [1, 3, 5]);
  t.same(a.extCommunities, [[1, 9], [2, 1]]);
  t.same(a.largeCommunities, [[1, 1, 9], [1, 2, 3]]);
  t.equal(a.origin, Origin.IGP);
  t.ok(Object.isFrozen(a) && Object.isFrozen(a.asPath) && Object.isFrozen(a.asPath[0].asns));
  t.equal(formatAsPath(a.asPath), '1 2 3 {7 9}');
});

t.test('invalid values are refused', async (t) => {
  t.throws(() => makeAttrs({ med: -1 }), AttrError);
  t.throws(() => makeAttrs({ localPref: 2 ** 32 }), AttrError);
  t.throws(() => makeAttrs({ asPath: [asSequence(1.5)] }), AttrError);
  t.throws(() => makeAttrs({ origin: 3 as Origin }), AttrError);
  t.throws(() => makeAttrs({ unknown: [{ flags: 0xc0, type: 99, value: new Uint8Array([1]) }, { flags: 0xc0, type: 99, value: new Uint8Array() }] }), AttrError);
});

t.test('AS_PATH helpers', async (t) => {
  t.equal(asPathLength([asSequence(1, 2, 3)]), 3);
  t.equal(asPathLength([asSequence(1, 2), asSet(3, 4, 5)]), 3, 'AS_SET counts 1');
  t.equal(asPathLength([{ type: SegmentType.AS_CONFED_SEQUENCE, asns: [64512, 64513] }, asSequence(1)]), 1, 'confed counts 0');
  t.equal(asPathLength([{ type: SegmentType.AS_CONFED_SET, asns: [64512] }]), 0);
  t.equal(neighbourAs([{ type: SegmentType.AS_CONFED_SEQUENCE, asns: [64512] }, asSequence(7, 8)]), 7);
  t.equal(neighbourAs([]), 0);
  t.equal(originAs([asSequence(7, 8)]), 8);
  t.equal(originAs([asSequence(7), asSet(8, 9)]), undefined);
});

t.test('withAttrs replaces and clears fields', async (t) => {
  const a = makeAttrs({ med: 5, localPref: 200, nextHop: nh });
  const b = withAttrs(a, { med: undefined, communities: [1] });
  t.equal(b.med, undefined);
  t.equal(b.localPref, 200);
  t.same(b.communities, [1]);
  t.equal(a.med, 5, 'original untouched');
});

t.test('interning: equal content gives the same instance; refcounts free', async (t) => {
  const it = new AttrInterner();
  const init: AttrsInit = { asPath: [asSequence(65001, 65002)], nextHop: nh, communities: [2, 1] };
  const a = it.intern(init);
  const b = it.intern(makeAttrs({ ...init, communities: [1, 2, 2] }));
  t.equal(a, b, 'same instance');
  t.equal(it.size, 1);
  t.equal(it.refCount(a), 2);
  const c = it.intern({ ...init, med: 0 });
  t.not(c, a, 'MED 0 differs from absent MED');
  t.equal(it.size, 2);
  it.release(a);
  t.equal(it.refCount(a), 1);
  it.release(b);
  t.equal(it.refCount(a), 0);
  t.equal(it.size, 1, 'freed at zero references');
  t.equal(it.lookup(makeAttrs(init)), undefined);
  const a2 = it.intern(init);
  t.not(a2, a, 'a freed record is not resurrected');
  t.throws(() => it.release(a), AttrError, 'releasing a stale instance is an error');
  // ids are reused
  const id = it.idOf(a2);
  t.ok(id >= 0);
  t.equal(it.get(id), a2);
  it.releaseId(id);
  t.equal(it.size, 1);
  t.equal(it.internId({ originatorId: 1 }), id, 'freed id reused');
});

t.test('hash collisions are resolved by content comparison', async (t) => {
  // Find two different records whose 32-bit hashes collide (birthday bound: expected within ~100k records).
  // Two fields vary: hashing a single varying word is a bijection and never collides.
  const rec = (i: number): AttrsInit => ({ med: i % 1024, localPref: Math.floor(i / 1024) });
  const seen = new Map<number, number>();
  let pair: [number, number] | undefined;
  for (let i = 0; i < 1_000_000 && !pair; i++) {
    const h = makeAttrs(rec(i)).hash;
    const j = seen.get(h);
    if (j !== undefined) pair = [j, i];
    else seen.set(h, i);
  }
  if (!pair) return t.fail('no collision found');
  const it = new AttrInterner();
  const a = it.intern(rec(pair[0]));
  const b = it.intern(rec(pair[1]));
  t.equal(a.hash, b.hash, 'same hash');
  t.not(a, b, 'different instances');
  t.equal(it.intern(rec(pair[1])), b);
  t.equal(it.intern(rec(pair[0])), a);
  it.release(a);
  it.release(a);
  t.equal(it.size, 1);
  t.equal(it.lookup(makeAttrs(rec(pair[1]))), b, 'the other record survives in the bucket');
  t.equal(it.lookup(makeAttrs(rec(pair[0]))), undefined);
});

t.test('records whose only rare attribute is a link-local next hop share one rare-attributes object per address', async (t) => {
  const rare = (a: unknown) => (a as { rareAttrs: unknown }).rareAttrs;
  const six = { asPath: [asSequence(65001)], nextHop: parseIP('2001:db8::1') };
  const a = makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::1') });
  const b = makeAttrs({ ...six, med: 5, nextHopLinkLocal: parseIP('fe80::1') }); // another IP object, equal
  t.equal(rare(a), rare(b), 'one object for equal addresses');
  const c = makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::2') });
  t.not(rare(c), rare(a), 'another address, another object');
  t.equal(c.nextHopLinkLocal?.toString(), 'fe80::2');
  const d = makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::1'), atomicAggregate: true });
  t.not(rare(d), rare(a), 'with another rare attribute: its own');
  t.ok(d.atomicAggregate && d.nextHopLinkLocal?.toString() === 'fe80::1');
  // Interleaved, the shared objects still hash and intern by content.
  const it = new AttrInterner();
  const ids = [a, c, makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::1') }), makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::2') })]
    .map((x) => it.internId(x));
  t.same(ids, [ids[0], ids[1], ids[0], ids[1]], 'equal content, one set');
  t.not(ids[0], ids[1]);
  t.equal(makeAttrs({ ...six, nextHopLinkLocal: parseIP('fe80::1') }).hash, a.hash, 'the hash is the content\'s');
});

// ---- properties ---------------------------------------------------------------------------------------------

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const smallAsn = fc.integer({ min: 1, max: 6 });
const arbIP = fc.oneof(
  fc.integer({ min: 0, max: 3 }).map((n) => parseIP(`10.0.0.${n}`)),
  fc.integer({ min: 0, max: 3 }).map((n) => parseIP(`fd00::${n}`)),
);
// Link-local next hops: equal addresses as distinct IP objects, so sharing by content is exercised.
const arbLinkLocal = fc.integer({ min: 1, max: 2 }).map((n) => parseIP(`fe80::${n}`));
const arbInit: fc.Arbitrary<AttrsInit> = fc.record(
  {
    origin: fc.constantFrom(Origin.IGP, Origin.EGP, Origin.INCOMPLETE),
    nextHopLinkLocal: fc.option(arbLinkLocal, { nil: null }),
    asPath: fc.array(
      fc.record({ type: fc.constantFrom(1, 2, 3, 4) as fc.Arbitrary<1 | 2 | 3 | 4>, asns: fc.array(smallAsn, { maxLength: 3 }) }),
      { maxLength: 3 },
    ),
    nextHop: fc.option(arbIP, { nil: null }),
    med: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
    localPref: fc.option(fc.oneof(fc.constantFrom(100, 200), u32), { nil: undefined }),
    atomicAggregate: fc.boolean(),
    aggregator: fc.option(fc.record({ asn: smallAsn, address: arbIP }), { nil: undefined }),
    communities: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 4 }),
    extCommunities: fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 })), { maxLength: 3 }),
    largeCommunities: fc.array(fc.tuple(fc.constant(1), fc.integer({ min: 0, max: 2 }), fc.constant(0)), { maxLength: 3 }),
    originatorId: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
    clusterList: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 3 }),
    unknown: fc.uniqueArray(
      fc.record({ flags: fc.constant(0xc0), type: fc.integer({ min: 100, max: 102 }), value: fc.uint8Array({ maxLength: 3, max: 2 }) }),
      { selector: (r) => r.type, maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);

// A canonical description of the content, independent of the implementation, to judge equality by.
function canon(init: AttrsInit): string {
  const a = makeAttrs(init);
  return JSON.stringify({ ...a, hash: 0, unknown: a.unknown.map((u) => [u.flags, u.type, [...u.value]]) });
}

t.test('property: intern is idempotent and returns one instance per content', async (t) => {
  fc.assert(
    fc.property(arbInit, (init) => {
      const it = new AttrInterner();
      const a = it.intern(init);
      const b = it.intern(a);
      const c = it.intern(makeAttrs(init));
      return a === b && b === c && it.size === 1 && it.refCount(a) === 3;
    }),
  );
  t.pass('property holds');
});

t.test('property: different content gives different instances, same content the same', async (t) => {
  fc.assert(
    fc.property(arbInit, arbInit, (x, y) => {
      const it = new AttrInterner();
      const a = it.intern(x);
      const b = it.intern(y);
      const same = canon(x) === canon(y);
      return same === (a === b) && same === attrsEqual(makeAttrs(x), makeAttrs(y)) && it.size === (same ? 1 : 2);
    }),
    { numRuns: 2000 },
  );
  t.pass('property holds');
});

t.test('property: releasing every reference empties the table', async (t) => {
  fc.assert(
    fc.property(fc.array(arbInit, { maxLength: 30 }), (inits) => {
      const it = new AttrInterner();
      const got = inits.map((i) => it.intern(i));
      const distinct = new Set(inits.map(canon)).size;
      if (it.size !== distinct) return false;
      for (const g of got.reverse()) it.release(g);
      return it.size === 0;
    }),
  );
  t.pass('property holds');
});

// withAttrs takes a record's unchanged fields as they are (they are normalised already) and prependAs memoises the
// eBGP prepend: the oracle for both is building the record afresh from plain values.
const json = (a: unknown) => JSON.stringify(a, (_k, v: unknown) => (v instanceof Uint8Array ? [...v] : v));

t.test('property: withAttrs on a record equals makeAttrs of the merged fields', async (t) => {
  const keys = ['origin', 'asPath', 'nextHop', 'med', 'localPref', 'atomicAggregate', 'aggregator', 'communities', 'extCommunities',
    'largeCommunities', 'originatorId', 'clusterList', 'unknown'] as const;
  fc.assert(
    fc.property(arbInit, arbInit, fc.subarray([...keys]), fc.boolean(), (x, y, pick, clear) => {
      const a = makeAttrs(x);
      const changes: Record<string, unknown> = {};
      for (const k of pick) changes[k] = clear ? undefined : (y as Record<string, unknown>)[k];
      const fresh = makeAttrs({
        origin: a.origin, asPath: a.asPath, nextHop: a.nextHop, nextHopLinkLocal: a.nextHopLinkLocal, med: a.med, localPref: a.localPref,
        atomicAggregate: a.atomicAggregate, aggregator: a.aggregator, communities: [...a.communities], extCommunities: a.extCommunities,
        largeCommunities: a.largeCommunities, originatorId: a.originatorId, clusterList: a.clusterList, unknown: a.unknown, ...changes,
      });
      const got = withAttrs(a, changes as AttrsInit);
      return json(got) === json(fresh) && attrsEqual(got, fresh) && got.hash === fresh.hash && Object.isFrozen(got);
    }),
    { numRuns: 1000 },
  );
  t.pass('property holds');
});

t.test('property: prependAs is the normalised prepend, memoised per path', async (t) => {
  fc.assert(
    fc.property(arbInit, fc.integer({ min: 1, max: 6 }), fc.integer({ min: 7, max: 9 }), (x, asn, other) => {
      const path = makeAttrs(x).asPath;
      const want = normaliseAsPath([asSequence(asn), ...path]);
      const p1 = prependAs(path, asn);
      const p2 = prependAs(path, asn);
      const q = prependAs(path, other); // another ASN is computed afresh, not the memo's
      const viaRecord = withAttrs(makeAttrs(x), { asPath: p1 });
      return json(p1) === json(want) && p1 === p2 && Object.isFrozen(p1) &&
        json(q) === json(normaliseAsPath([asSequence(other), ...path])) &&
        json((viaRecord as unknown as { facts: unknown }).facts) === json(asPathFacts(want)) && attrsEqual(viaRecord, withAttrs(makeAttrs(x), { asPath: [asSequence(asn), ...path] }));
    }),
    { numRuns: 1000 },
  );
  t.pass('property holds');
});
