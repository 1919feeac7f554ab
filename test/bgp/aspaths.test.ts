// Tests of the per-session AS path cache (src/bgp/codec/aspaths.ts), its use by the UPDATE decoder
// (DecodeScratch.asPaths), and the AS path facts that attribute records carry (asPathFacts, adoptAttrs).
import t from 'tap';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { IP, prefixOf, type Prefix } from '../../src/net/ip.ts';
import {
  SegmentType, adoptAttrs, asPathFacts, asPathLength, asSequence, asSet, attrsEqual, makeAttrs, neighbourAs, normaliseAsPath, type AsPath, type AsPathSegment, type AttrsInit, type PathAttrs,
} from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import { AsPathCache, hashBytes } from '../../src/bgp/codec/aspaths.ts';
import {
  DecodeScratch, decodeMessage, encodeUpdate, encodeUpdates, type DecodeOptions, type DecodeResult, type UpdateMessage,
} from '../../src/bgp/codec/index.ts';
import { NEXT_HOP, ORIGIN, attr, plainUpdate, update, updateInput } from './codec-helpers.ts';

// ---- helpers ------------------------------------------------------------------------------------------------

/** The UPDATE of an 'ok' decode result (throws otherwise, so fast-check reports the input). */
function okUpdate(r: DecodeResult): UpdateMessage {
  if (r.action !== 'ok') throw new Error(`expected ok, got ${r.action}: ${JSON.stringify({ ...r, message: undefined })}`);
  if (r.message.type !== 'update') throw new Error(`expected an UPDATE, got ${r.message.type}`);
  return r.message;
}

function attrsOf(r: DecodeResult): PathAttrs {
  const a = okUpdate(r).attrs;
  if (a === null) throw new Error('UPDATE without attributes');
  return a;
}

const hexOf = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** Reference FNV-1a (32 bit), written independently of the code under test: BigInt arithmetic mod 2^32. */
function fnv1aRef(b: Uint8Array): number {
  let h = 0x811c9dc5n;
  for (const x of b) h = ((h ^ BigInt(x)) * 0x01000193n) & 0xffffffffn;
  return Number(h);
}

/** AS_PATH length by the RFC 4271 9.1.2.2 a / RFC 5065 rules, as an oracle (sets 1, confederation segments 0). */
function lengthOracle(path: AsPath): number {
  let n = 0;
  for (const s of path) {
    if (s.type === SegmentType.AS_SEQUENCE) n += s.asns.length;
    else if (s.type === SegmentType.AS_SET) n += 1;
  }
  return n;
}

/** First ASN of the first AS_SEQUENCE, 0 when there is none. */
function neighbourOracle(path: AsPath): number {
  const seq = path.find((s) => s.type === SegmentType.AS_SEQUENCE);
  return seq ? seq.asns[0] : 0;
}

/** A deep, mutable copy of a path (adoptAttrs and normaliseAsPath(.., true) may take the arrays over). */
const copyPath = (p: AsPath): AsPathSegment[] => p.map((s) => ({ type: s.type, asns: [...s.asns] }));

// ---- arbitraries --------------------------------------------------------------------------------------------

// Small ASNs (sets then have duplicates), 2-octet and 4-octet ones; never 0 (RFC 7607).
const asn = fc.oneof(
  fc.integer({ min: 1, max: 20 }),
  fc.integer({ min: 1, max: 0xffff }),
  fc.integer({ min: 0x10000, max: 0xffffffff }),
);
const seqOrSet: fc.Arbitrary<AsPathSegment> = fc
  .tuple(fc.boolean(), fc.array(asn, { minLength: 1, maxLength: 12 }))
  .map(([seq, asns]) => (seq ? asSequence(...asns) : asSet(...asns)));
/** Valid AS_PATHs for a 4-octet session made of AS_SEQUENCE and AS_SET segments; now and then > 255 ASNs. */
const asPathArb: fc.Arbitrary<AsPathSegment[]> = fc.oneof(
  { weight: 9, arbitrary: fc.array(seqOrSet, { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.array(asn, { minLength: 256, maxLength: 600 }).map((a) => [asSequence(...a)]) },
);
/** Any segment type (confederation ones too), for the facts of a path. */
const anySegment: fc.Arbitrary<AsPathSegment> = fc.record({
  type: fc.constantFrom(SegmentType.AS_SET, SegmentType.AS_SEQUENCE, SegmentType.AS_CONFED_SEQUENCE, SegmentType.AS_CONFED_SET),
  asns: fc.array(asn, { minLength: 0, maxLength: 8 }),
});

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const hostV4 = fc.integer({ min: 0x01000000, max: 0xdfffffff }).map((w) => new IP(4, w));
const v6 = fc.tuple(u32, u32, u32, u32).map(([a, b, c, d]) => new IP(6, a, b, c, d));
const prefix4 = fc.tuple(u32, fc.integer({ min: 0, max: 32 })).map(([w, l]) => prefixOf(new IP(4, w), l));
const prefix6 = fc.tuple(v6, fc.integer({ min: 0, max: 128 })).map(([ip, l]) => prefixOf(ip, l));

/** An attribute set around `path` and prefixes to announce with it (IPv4 classic NLRI or IPv6 MP_REACH). */
const announcement = (path: fc.Arbitrary<AsPath>) =>
  fc
    .record({
      v6: fc.boolean(),
      nh4: hostV4,
      nh6: v6,
      asPath: path,
      origin: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
      med: fc.option(u32, { nil: undefined }),
      communities: fc.array(u32, { maxLength: 4 }),
      p4: fc.array(prefix4, { minLength: 1, maxLength: 5 }),
      p6: fc.array(prefix6, { minLength: 1, maxLength: 5 }),
    })
    .map((r) => ({
      attrs: makeAttrs({
        asPath: r.asPath, origin: r.origin, med: r.med, communities: r.communities, nextHop: r.v6 ? r.nh6 : r.nh4,
      }),
      prefixes: (r.v6 ? r.p6 : r.p4) as Prefix[],
    }));

const FOUR: DecodeOptions = { fourOctetAs: true };
const RUNS = 300;

// ---- the decoder with a scratch -----------------------------------------------------------------------------

t.test('4-octet session: decoding through a scratch equals decoding without one, and repeats share the path', async (t) => {
  const shared = new DecodeScratch(); // lives across all runs: later runs hit entries of earlier ones
  let messages = 0;
  fc.assert(
    fc.property(announcement(asPathArb), ({ attrs, prefixes }) => {
      for (const buf of encodeUpdates(attrs, prefixes, { fourOctetAs: true })) {
        messages++;
        const plain = attrsOf(decodeMessage(buf, FOUR));
        assert.ok(attrsEqual(plain, attrs), 'decode(encode(attrs)) equals attrs');
        const scratch = new DecodeScratch();
        const first = attrsOf(decodeMessage(buf, { ...FOUR, scratch }));
        const second = attrsOf(decodeMessage(buf, { ...FOUR, scratch }));
        for (const a of [first, second]) {
          assert.ok(attrsEqual(a, plain), 'scratch decode equals plain decode');
          assert.equal(a.hash, plain.hash);
          assert.deepEqual(a.asPath, plain.asPath);
          assert.equal(a.asPathLen, asPathLength(plain.asPath));
          assert.equal(a.neighbourAsn, neighbourAs(plain.asPath));
        }
        assert.ok(second.asPath === first.asPath, 'the second decode returns the cached path object');
        const s1 = attrsOf(decodeMessage(buf, { ...FOUR, scratch: shared }));
        const s2 = attrsOf(decodeMessage(buf, { ...FOUR, scratch: shared }));
        assert.ok(attrsEqual(s1, plain) && attrsEqual(s2, plain), 'long-lived scratch decode equals plain decode');
        assert.ok(s1.asPath === s2.asPath);
        assert.ok(Object.isFrozen(first.asPath), 'a shared path is frozen');
      }
    }),
    { numRuns: RUNS },
  );
  t.ok(messages >= RUNS, `${messages} UPDATEs decoded three ways`);
  t.ok(shared.asPaths.size > 0, 'the long-lived cache holds paths');
});

t.test('UPDATEs with one AS path and different other attributes share one path object', async (t) => {
  let checked = 0;
  fc.assert(
    fc.property(asPathArb, fc.array(fc.tuple(hostV4, fc.option(u32, { nil: undefined })), { minLength: 2, maxLength: 5 }), (path, variants) => {
      const scratch = new DecodeScratch();
      const decoded = variants.map(([nh, med]) => {
        const attrs = makeAttrs({ asPath: path, nextHop: nh, med });
        const [buf] = encodeUpdates(attrs, [prefixOf(nh, 24)]);
        const a = attrsOf(decodeMessage(buf, { ...FOUR, scratch }));
        assert.ok(attrsEqual(a, attrsOf(decodeMessage(buf, FOUR))));
        assert.ok(attrsEqual(a, attrs));
        return a;
      });
      for (const a of decoded) assert.ok(a.asPath === decoded[0].asPath, 'one frozen path for every record');
      checked++;
    }),
    { numRuns: 150 },
  );
  t.equal(checked, 150);
});

t.test('decoding many different paths through one scratch never confuses them', async (t) => {
  fc.assert(
    fc.property(fc.array(announcement(asPathArb), { minLength: 2, maxLength: 25 }), fc.nat(), (anns, seed) => {
      const scratch = new DecodeScratch();
      const bufs = anns.flatMap(({ attrs, prefixes }) => encodeUpdates(attrs, prefixes));
      // Each message twice, in an order that interleaves them.
      const order = [...bufs.keys(), ...bufs.keys()].sort((a, b) => ((a * 7919 + seed) % 97) - ((b * 7919 + seed) % 97));
      for (const i of order) {
        const a = attrsOf(decodeMessage(bufs[i], { ...FOUR, scratch }));
        assert.ok(attrsEqual(a, attrsOf(decodeMessage(bufs[i], FOUR))), `message ${i}`);
      }
    }),
    { numRuns: 100 },
  );
  t.pass('100 sequences');
});

t.test('a malformed AS_PATH is never cached: every decode reports it', async (t) => {
  const scratch = new DecodeScratch();
  const bad = update({ attrs: [ORIGIN, attr(0x40, 2, '02 02 0000fde9 00000000'), NEXT_HOP], nlri: '18 c0a801' }); // AS 0
  const good = update({ attrs: [ORIGIN, attr(0x40, 2, '02 02 0000fde9 0000fdea'), NEXT_HOP], nlri: '18 c0a801' });
  for (let i = 0; i < 3; i++) {
    const r = decodeMessage(bad, { ...FOUR, scratch });
    t.equal(r.action, 'treat-as-withdraw', `bad path, decode ${i + 1}`);
    if (r.action === 'treat-as-withdraw') t.equal(r.message.attrs, null);
    const g = attrsOf(decodeMessage(good, { ...FOUR, scratch }));
    t.same(g.asPath, [{ type: SegmentType.AS_SEQUENCE, asns: [65001, 65002] }], `good path, decode ${i + 1}`);
  }
  t.equal(scratch.asPaths.size, 1, 'only the good path is held');
});

t.test('a scratch keeps decoding correctly past the cache size limit', async (t) => {
  // One template UPDATE whose AS_PATH is a single AS_SEQUENCE of one ASN; the ASN octets are patched per message.
  const MARK = 'deadbeef';
  const template = update({ attrs: [ORIGIN, attr(0x40, 2, `02 01 ${MARK}`), NEXT_HOP], nlri: '18 c0a801' });
  const at = template.indexOf(Buffer.from(MARK, 'hex'));
  t.ok(at > 0, 'ASN position found');
  const N = (1 << 16) + 3000; // more distinct paths than the cache holds
  const asnOf = (i: number) => (0x10000 + i * 7) >>> 0;
  const scratch = new DecodeScratch();
  const buf = Buffer.from(template);
  const firstPaths: AsPath[] = [];
  let wrong = 0;
  let compared = 0;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < N; i++) {
      buf.writeUInt32BE(asnOf(i), at);
      const a = attrsOf(decodeMessage(buf, { ...FOUR, scratch }));
      if (a.asPath.length !== 1 || a.asPath[0].asns.length !== 1 || a.asPath[0].asns[0] !== asnOf(i) || a.asPathLen !== 1 || a.neighbourAsn !== asnOf(i)) wrong++;
      if (pass === 0 && i < 100) firstPaths.push(a.asPath);
      if (i % 251 === 0) {
        compared++;
        if (!attrsEqual(a, attrsOf(decodeMessage(buf, FOUR)))) wrong++;
      }
    }
    t.ok(scratch.asPaths.size <= 1 << 16, `pass ${pass + 1}: the cache stays within its limit (${scratch.asPaths.size})`);
  }
  t.equal(wrong, 0, `${2 * N} decodes, ${compared} compared with plain decodes, all correct`);
  // Records keep their paths when the cache is emptied.
  t.same(firstPaths.map((p) => p[0].asns[0]), Array.from({ length: 100 }, (_, i) => asnOf(i)));
});

t.test('a long-lived scratch: repeated-attribute detection stays per UPDATE, across its serial wrapping', async (t) => {
  const MED = attr(0x80, 4, '00000005');
  const once = update({ attrs: [ORIGIN, attr(0x40, 2, '02 01 0000fde9'), NEXT_HOP, MED], nlri: '18 c0a801' });
  const twice = update({ attrs: [ORIGIN, attr(0x40, 2, '02 01 0000fde9'), NEXT_HOP, MED, MED], nlri: '18 c0a801' });
  const noNextHop = update({ attrs: [ORIGIN, attr(0x40, 2, '02 01 0000fde9'), MED], nlri: '18 c0a801' });
  const scratch = new DecodeScratch();
  const results: string[] = [];
  // Start just below the wrap of the per-UPDATE serial (a public field of the scratch).
  scratch.serial = 0xffffffff - 4;
  for (let i = 0; i < 10; i++) {
    for (const [name, buf] of [['once', once], ['twice', twice], ['noNextHop', noNextHop]] as const) {
      const plain = decodeMessage(buf, FOUR);
      const r = decodeMessage(buf, { ...FOUR, scratch });
      t.equal(r.action, plain.action, `${name} #${i}: same outcome as without a scratch`);
      if (r.action !== 'notification' && plain.action !== 'notification') {
        t.same(r.message.type === 'update' && r.message.attrs ? plainUpdate(r.message) : null,
          plain.message.type === 'update' && plain.message.attrs ? plainUpdate(plain.message) : null);
      }
      results.push(`${name}:${r.action}`);
    }
  }
  t.ok(results.every((r) => r.startsWith('once:ok') || r.startsWith('twice:attribute-discard') || r.startsWith('noNextHop:treat-as-withdraw')),
    'once ok, twice discards the repeat, a missing NEXT_HOP is noticed, every time');
  t.ok(scratch.serial < 100, 'the serial wrapped during the test');
  // Stamps left from the first UPDATEs of a session must not count once the serial comes round to them again.
  const fresh = new DecodeScratch();
  for (let i = 0; i < 12; i++) t.equal(decodeMessage(once, { ...FOUR, scratch: fresh }).action, 'ok');
  fresh.serial = 0xffffffff - 3; // as if four billion UPDATEs later
  let wrong = 0;
  for (let i = 0; i < 20; i++) if (decodeMessage(noNextHop, { ...FOUR, scratch: fresh }).action !== 'treat-as-withdraw') wrong++;
  t.equal(wrong, 0, 'a missing NEXT_HOP is noticed on every UPDATE after the wrap');
});

// ---- 2-octet sessions ---------------------------------------------------------------------------------------

t.test('2-octet session with AS4_PATH: the same with and without a scratch', async (t) => {
  const TWO: DecodeOptions = { fourOctetAs: false, extendedMessage: true };
  const shared = new DecodeScratch();
  let withAs4 = 0;
  let n = 0;
  fc.assert(
    fc.property(updateInput(false), announcement(asPathArb), (u, four) => {
      const buf = encodeUpdate(u, TWO);
      const plain = okUpdate(decodeMessage(buf, TWO));
      const fresh = new DecodeScratch();
      for (const scratch of [fresh, fresh, shared, shared]) {
        const m = okUpdate(decodeMessage(buf, { ...TWO, scratch }));
        assert.deepEqual(plainUpdate(m), plainUpdate(plain));
        if (plain.attrs !== null) assert.ok(m.attrs !== null && attrsEqual(m.attrs, plain.attrs));
        // The same scratch serves a 4-octet session in between: neither disturbs the other.
        const [fbuf] = encodeUpdates(four.attrs, four.prefixes);
        assert.ok(attrsEqual(attrsOf(decodeMessage(fbuf, { ...FOUR, scratch })), four.attrs));
      }
      if (u.attrs) {
        n++;
        assert.ok(plain.attrs !== null && attrsEqual(plain.attrs, u.attrs), 'round trip through AS_TRANS and AS4_PATH');
        const needsAs4 = u.attrs.asPath.some((s) => s.type <= SegmentType.AS_SEQUENCE && s.asns.some((a) => a > 0xffff));
        if (needsAs4) withAs4++;
      }
    }),
    { numRuns: 300 },
  );
  t.ok(n > 0 && withAs4 > 0, `${n} announcements, ${withAs4} of them carried AS4_PATH`);
});

t.test('2-octet session: AS_PATH with AS_TRANS rebuilt from AS4_PATH (RFC 6793 4.2.3), with a scratch', async (t) => {
  const TWO: DecodeOptions = { fourOctetAs: false };
  // AS_PATH: AS_SEQUENCE 23456 (AS_TRANS) 65001; AS4_PATH: AS_SEQUENCE 200000 65001.
  const buf = update({
    attrs: [ORIGIN, attr(0x40, 2, '02 02 5ba0 fde9'), NEXT_HOP, attr(0xc0, 17, '02 02 00030d40 0000fde9')],
    nlri: '18 c0a801',
  });
  const scratch = new DecodeScratch();
  const plain = attrsOf(decodeMessage(buf, TWO));
  t.same(plain.asPath, [{ type: SegmentType.AS_SEQUENCE, asns: [200000, 65001] }]);
  for (let i = 0; i < 3; i++) {
    const a = attrsOf(decodeMessage(buf, { ...TWO, scratch }));
    t.ok(attrsEqual(a, plain), `decode ${i + 1} with the scratch`);
    t.equal(a.asPathLen, 2);
    t.equal(a.neighbourAsn, 200000);
  }
  // Without AS4_PATH the same AS_PATH keeps AS_TRANS.
  const noAs4 = update({ attrs: [ORIGIN, attr(0x40, 2, '02 02 5ba0 fde9'), NEXT_HOP], nlri: '18 c0a801' });
  t.same(attrsOf(decodeMessage(noAs4, { ...TWO, scratch })).asPath, [{ type: SegmentType.AS_SEQUENCE, asns: [23456, 65001] }]);
});

// ---- AsPathCache on its own ---------------------------------------------------------------------------------

const pathFor = (b: Uint8Array): AsPath => normaliseAsPath([asSequence(...Array.from(b, (x) => x + 1))]);

t.test('hashBytes is FNV-1a over the range, as a 32-bit signed integer', async (t) => {
  // Published FNV-1a 32-bit test vectors.
  const vectors: [string, number][] = [['', 0x811c9dc5], ['a', 0xe40c292c], ['foobar', 0xbf9cf968]];
  for (const [s, want] of vectors) {
    const b = Buffer.from(s, 'latin1');
    t.equal(hashBytes(b, 0, b.length) >>> 0, want, `FNV-1a("${s}")`);
  }
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (mid, pre, post) => {
      const b = new Uint8Array([...pre, ...mid, ...post]);
      const h = hashBytes(b, pre.length, pre.length + mid.length);
      assert.equal(h, h | 0, 'a signed 32-bit integer');
      assert.equal(h >>> 0, fnv1aRef(mid));
      assert.equal(h, hashBytes(mid, 0, mid.length), 'only the range counts');
    }),
  );
});

t.test('AsPathCache: find / add / path / factsOf round trip, keyed by content not position', async (t) => {
  const c = new AsPathCache();
  t.equal(c.size, 0);
  const key = new Uint8Array([9, 9, 2, 1, 0, 0, 0xfd, 0xe9, 9]); // value at [2, 8)
  const h = hashBytes(key, 2, 8);
  t.equal(c.find(key, 2, 8, h), -1, 'miss when empty');
  const path = pathFor(key.subarray(2, 8));
  const k = c.add(key, 2, 8, h, path);
  t.ok(k >= 0);
  t.equal(c.size, 1);
  t.equal(c.find(key, 2, 8, h), k, 'hit');
  t.equal(c.path(k), path, 'the very path object');
  t.same(c.factsOf(k), asPathFacts(path));
  t.equal(c.factsOf(k).len, asPathLength(path));
  t.equal(c.factsOf(k).neighbour, neighbourAs(path));
  // The same octets elsewhere (another buffer, another offset) find the entry; a later change to the caller's
  // buffer does not change what the cache holds.
  const elsewhere = new Uint8Array([7, 2, 1, 0, 0, 0xfd, 0xe9]);
  t.equal(c.find(elsewhere, 1, 7, h), k);
  key.fill(0);
  t.equal(c.find(elsewhere, 1, 7, h), k, 'the cache keeps its own copy of the octets');
  t.equal(c.find(key, 2, 8, hashBytes(key, 2, 8)), -1, 'other octets miss');
  // The empty value is a key like any other.
  const empty = new Uint8Array(4);
  t.equal(c.find(empty, 2, 2, hashBytes(empty, 2, 2)), -1);
  const ke = c.add(empty, 2, 2, hashBytes(empty, 2, 2), normaliseAsPath([]));
  t.equal(c.find(new Uint8Array(0), 0, 0, hashBytes(empty, 0, 0)), ke);
  t.same(c.path(ke), []);
  t.equal(c.find(elsewhere, 1, 7, h), k, 'earlier entry still found');
  c.clear();
  t.equal(c.size, 0);
  t.equal(c.find(elsewhere, 1, 7, h), -1, 'clear empties it');
});

t.test('AsPathCache agrees with a Map oracle over random adds and finds', async (t) => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.uint8Array({ maxLength: 12 }), { minLength: 1, maxLength: 30, selector: hexOf }),
      fc.array(fc.tuple(fc.boolean(), fc.nat(), fc.nat({ max: 4 })), { maxLength: 80 }),
      (keys, ops) => {
        const c = new AsPathCache();
        const oracle = new Map<string, AsPath>();
        for (const [add, ki, off] of ops) {
          const v = keys[ki % keys.length];
          const b = new Uint8Array(off + v.length + 3).fill(0xaa);
          b.set(v, off);
          const h = hashBytes(b, off, off + v.length);
          const k = c.find(b, off, off + v.length, h);
          const want = oracle.get(hexOf(v));
          if (want === undefined) assert.equal(k, -1);
          else {
            assert.ok(k >= 0);
            assert.equal(c.path(k), want);
            assert.deepEqual(c.factsOf(k), asPathFacts(want));
          }
          if (add && want === undefined) {
            const p = pathFor(v);
            const nk = c.add(b, off, off + v.length, h, p);
            assert.equal(c.path(nk), p);
            oracle.set(hexOf(v), p);
          }
          assert.equal(c.size, oracle.size);
        }
      },
    ),
    { numRuns: 200 },
  );
  t.pass('200 sequences');
});

t.test('AsPathCache: values forced to one hash are kept apart (a collision is only a miss)', async (t) => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.uint8Array({ maxLength: 10 }), { minLength: 2, maxLength: 12, selector: hexOf }),
      fc.integer({ min: -0x80000000, max: 0x7fffffff }),
      fc.nat(),
      (values, h, held) => {
        const c = new AsPathCache();
        const n = 1 + (held % (values.length - 1)); // add some, keep at least one out
        const paths = values.map(pathFor);
        const ids = values.slice(0, n).map((v, i) => c.add(v, 0, v.length, h, paths[i]));
        assert.equal(new Set(ids).size, n, 'distinct entries');
        for (let i = 0; i < values.length; i++) {
          const k = c.find(values[i], 0, values[i].length, h);
          if (i < n) {
            assert.equal(k, ids[i]);
            assert.equal(c.path(k), paths[i], 'never another value\'s path');
          } else assert.equal(k, -1, 'a value not added misses even with a colliding hash');
        }
      },
    ),
    { numRuns: 200 },
  );
  // Deliberate near misses: same length differing in the last octet, and one value a prefix of the other.
  const c = new AsPathCache();
  const h = 12345;
  const a = new Uint8Array([2, 1, 0, 0, 0xfd, 0xe9]);
  const b = new Uint8Array([2, 1, 0, 0, 0xfd, 0xea]);
  const ab = new Uint8Array([...a, 2, 1, 0, 0, 0, 1]);
  const pa = pathFor(a);
  const pab = pathFor(ab);
  const ka = c.add(a, 0, a.length, h, pa);
  t.equal(c.find(b, 0, b.length, h), -1, 'same length, one octet different: miss');
  t.equal(c.find(ab, 0, ab.length, h), -1, 'longer value starting with a cached one: miss');
  t.equal(c.find(ab, 0, a.length, h), ka, 'its leading part is the cached value');
  const kab = c.add(ab, 0, ab.length, h, pab);
  t.equal(c.path(c.find(ab, 0, ab.length, h)), pab);
  t.equal(c.path(c.find(a, 0, a.length, h)), pa);
  t.not(ka, kab);
});

t.test('AsPathCache empties itself when full and still answers correctly', async (t) => {
  const LIMIT = 1 << 16;
  const c = new AsPathCache();
  const keyOf = (i: number) => new Uint8Array([i >>> 24, (i >>> 16) & 255, (i >>> 8) & 255, i & 255, i & 7]);
  const paths: AsPath[] = [];
  const entries: number[] = [];
  for (let i = 0; i < LIMIT; i++) {
    const b = keyOf(i);
    paths.push(Object.freeze([Object.freeze({ type: SegmentType.AS_SEQUENCE, asns: Object.freeze([i + 1]) })]));
    entries.push(c.add(b, 0, b.length, hashBytes(b, 0, b.length), paths[i]));
  }
  t.equal(c.size, LIMIT, 'full');
  let bad = 0;
  for (let i = 0; i < LIMIT; i += 13) {
    const b = keyOf(i);
    const k = c.find(b, 0, b.length, hashBytes(b, 0, b.length));
    if (k !== entries[i] || c.path(k) !== paths[i]) bad++;
  }
  t.equal(bad, 0, 'every entry found while full');
  // One more: the cache starts over.
  const extra = 3000;
  for (let i = LIMIT; i < LIMIT + extra; i++) {
    const b = keyOf(i);
    paths.push(Object.freeze([Object.freeze({ type: SegmentType.AS_SEQUENCE, asns: Object.freeze([i + 1]) })]));
    entries.push(c.add(b, 0, b.length, hashBytes(b, 0, b.length), paths[i]));
    if (i === LIMIT) t.equal(c.size, 1, 'emptied on the add past the limit');
  }
  t.equal(c.size, extra);
  let wrong = 0;
  let hits = 0;
  for (let i = 0; i < LIMIT + extra; i++) {
    const b = keyOf(i);
    const k = c.find(b, 0, b.length, hashBytes(b, 0, b.length));
    if (k < 0) {
      if (i >= LIMIT) wrong++; // added after the reset: must be found
      continue;
    }
    hits++;
    if (c.path(k) !== paths[i] || c.factsOf(k).neighbour !== i + 1) wrong++;
  }
  t.equal(wrong, 0, 'no wrong path, and everything added since the reset is found');
  t.equal(hits, extra, 'entries from before the reset are misses');
  t.equal(paths[5][0].asns[0], 6, 'paths handed out earlier are untouched');
});

// ---- AS path facts and records ------------------------------------------------------------------------------

t.test('asPathFacts matches asPathLength / neighbourAs and the RFC rules', async (t) => {
  fc.assert(
    fc.property(fc.array(anySegment, { maxLength: 8 }), (raw) => {
      const path = normaliseAsPath(copyPath(raw));
      const f = asPathFacts(path);
      assert.equal(f.len, asPathLength(path));
      assert.equal(f.neighbour, neighbourAs(path));
      assert.equal(f.len, lengthOracle(path));
      assert.equal(f.neighbour, neighbourOracle(path));
      assert.equal(f.hash, f.hash | 0, 'hash is a 32-bit integer');
      // Normalisation does not change the length or the neighbour (sets: duplicates do not count).
      const nonEmpty = raw.filter((s) => s.asns.length > 0);
      assert.equal(f.neighbour, neighbourOracle(nonEmpty));
      // Equal normal forms give equal facts; the path written differently (sets reversed, a sequence split in
      // two) has the same normal form.
      const rewritten = normaliseAsPath(
        raw.flatMap((s): AsPathSegment[] => {
          if (s.type === SegmentType.AS_SET || s.type === SegmentType.AS_CONFED_SET) return [{ type: s.type, asns: [...s.asns].reverse() }];
          const cut = s.asns.length >> 1;
          return [{ type: s.type, asns: s.asns.slice(0, cut) }, { type: s.type, asns: s.asns.slice(cut) }];
        }),
      );
      assert.deepEqual(rewritten, path);
      assert.deepEqual(asPathFacts(rewritten), f);
      const rec = makeAttrs({ asPath: raw });
      assert.equal(rec.asPathLen, f.len);
      assert.equal(rec.neighbourAsn, f.neighbour);
    }),
    { numRuns: 500 },
  );
  t.pass('500 paths');
});

const attrsInitArb: fc.Arbitrary<AttrsInit> = fc.record(
  {
    origin: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
    asPath: fc.array(anySegment.filter((s) => s.asns.length > 0), { maxLength: 5 }),
    nextHop: fc.oneof(hostV4, v6),
    nextHopLinkLocal: fc.option(v6, { nil: null }),
    med: u32,
    localPref: u32,
    atomicAggregate: fc.boolean(),
    aggregator: fc.record({ asn: fc.integer({ min: 1, max: 0xffffffff }), address: hostV4 }),
    communities: fc.array(fc.oneof(u32, fc.integer({ min: 0, max: 5 })), { maxLength: 8 }),
    extCommunities: fc.array(fc.tuple(u32, u32), { maxLength: 3 }),
    largeCommunities: fc.array(fc.tuple(u32, u32, u32), { maxLength: 3 }),
    originatorId: u32,
    clusterList: fc.array(u32, { maxLength: 3 }),
    unknown: fc.uniqueArray(
      fc.record({ flags: fc.constant(0xe0), type: fc.integer({ min: 100, max: 255 }), value: fc.uint8Array({ maxLength: 16 }) }),
      { maxLength: 2, selector: (u) => u.type },
    ),
  },
  { requiredKeys: ['asPath'] },
);

/** What the codec hands adoptAttrs: the same content, in fresh arrays, with the path already normalised. */
function freshInit(init: AttrsInit): AttrsInit {
  return {
    ...init,
    asPath: normaliseAsPath(copyPath(init.asPath ?? [])),
    communities: init.communities && [...init.communities],
    extCommunities: init.extCommunities?.map((x) => [x[0], x[1]] as [number, number]),
    largeCommunities: init.largeCommunities?.map((x) => [x[0], x[1], x[2]] as [number, number, number]),
    clusterList: init.clusterList && [...init.clusterList],
    unknown: init.unknown?.map((u) => ({ ...u, value: new Uint8Array(u.value) })),
  };
}

t.test('makeAttrs and adoptAttrs (with or without precomputed facts) build equal records', async (t) => {
  fc.assert(
    fc.property(attrsInitArb, (init) => {
      const made = makeAttrs(init);
      const adoptedInit = freshInit(init);
      const facts = asPathFacts(adoptedInit.asPath!);
      const adopted = adoptAttrs(adoptedInit, facts);
      const adoptedNoFacts = adoptAttrs(freshInit(init));
      for (const a of [adopted, adoptedNoFacts]) {
        assert.equal(a.hash, made.hash, 'equal hash');
        assert.ok(attrsEqual(a, made) && attrsEqual(made, a), 'attrsEqual both ways');
        assert.equal(a.asPathLen, made.asPathLen);
        assert.equal(a.neighbourAsn, made.neighbourAsn);
        assert.deepEqual(a.asPath, made.asPath);
        assert.deepEqual(a.communities, made.communities);
      }
      assert.ok(adopted.asPath === adoptedInit.asPath, 'adoptAttrs keeps the normalised path it was given');
      // One content, one interned instance.
      const interner = new AttrInterner();
      const canon = interner.intern(made);
      assert.ok(interner.intern(adopted) === canon);
      assert.ok(interner.intern(adoptedNoFacts) === canon);
      assert.equal(interner.size, 1);
      assert.equal(interner.refCount(made), 3);
    }),
    { numRuns: 400 },
  );
  t.pass('400 attribute sets');
});

t.test('records that differ only in their AS path do not compare equal', async (t) => {
  fc.assert(
    fc.property(asPathArb, asPathArb, hostV4, (p, q, nh) => {
      const np = normaliseAsPath(copyPath(p));
      const nq = normaliseAsPath(copyPath(q));
      fc.pre(JSON.stringify(np) !== JSON.stringify(nq));
      const a = makeAttrs({ asPath: p, nextHop: nh });
      const b = adoptAttrs({ asPath: nq, nextHop: nh }, asPathFacts(nq));
      assert.ok(!attrsEqual(a, b));
      assert.ok(attrsEqual(a, adoptAttrs({ asPath: np, nextHop: nh }, asPathFacts(np))));
    }),
    { numRuns: 300 },
  );
  t.pass('300 pairs');
});
