// Properties of src/net/ip.ts checked against independent oracles: ipaddr.js for parsing, BigInt arithmetic for
// masks, offsets and subnets, and a small RFC 5952 formatter written here from the RFC text.
import t from 'tap';
import fc from 'fast-check';
import assert from 'node:assert/strict';
import ipaddr from 'ipaddr.js';
import {
  AddressError,
  IP,
  Prefix,
  compareIP,
  comparePrefix,
  formatIP,
  formatPrefix,
  hostPrefix,
  ipAt,
  ipEquals,
  offsetOf,
  parseIP,
  parseIPWithLen,
  parsePrefix,
  parsePrefixOrIP,
  prefixContainsIP,
  prefixContainsPrefix,
  prefixEquals,
  prefixOf,
  prefixSize,
  prefixesOverlap,
  subnetAt,
  subnetCount,
  subnetIndexOf,
  type Family,
} from '../../src/net/ip.ts';

const RUNS = { numRuns: 500 };

type T = Parameters<Parameters<typeof t.test>[0]>[0];

// Inside properties, plain assertions (one tap assertion per property, not thousands).
const ck = {
  equal: (x: unknown, y: unknown, m?: string) => assert.equal(x, y, m),
  ok: (x: unknown, m?: string) => assert.ok(x, m),
  notOk: (x: unknown, m?: string) => assert.ok(!x, m),
  same: (x: unknown, y: unknown, m?: string) => assert.deepEqual(x, y, m),
  type: (x: unknown, c: new (...args: never[]) => unknown, m?: string) => assert.ok(x instanceof c, m ?? `expected ${c.name}, got ${String(x)}`),
  match: (x: string, re: RegExp, m?: string) => assert.match(x, re, m),
};

/** Run a fast-check property and report it as one tap assertion carrying the counterexample on failure. */
function holds(t: T, prop: fc.IProperty<any>, opts: fc.Parameters<any> = RUNS): void {
  const r = fc.check(prop, opts);
  t.notOk(r.failed, r.failed ? `${String(r.errorInstance)}\n${fc.defaultReportMessage(r)}` : `property holds (${r.numRuns} runs)`);
  t.ok(r.numRuns > 0, 'property ran');
}

// ---- BigInt model ---------------------------------------------------------------------------------------------

type A = { family: Family; v: bigint };
type P = { family: Family; v: bigint; len: number };

const bits = (f: Family): number => (f === 4 ? 32 : 128);
const all = (f: Family): bigint => (1n << BigInt(bits(f))) - 1n;
/** Network mask of length len as a BigInt. */
const mask = (f: Family, len: number): bigint => all(f) ^ ((1n << BigInt(bits(f) - len)) - 1n);

function toBig(x: { family: Family; w0: number; w1: number; w2: number; w3: number }): bigint {
  if (x.family === 4) return BigInt(x.w0);
  return (BigInt(x.w0) << 96n) | (BigInt(x.w1) << 64n) | (BigInt(x.w2) << 32n) | BigInt(x.w3);
}
function words(f: Family, v: bigint): [number, number, number, number] {
  if (f === 4) return [Number(v), 0, 0, 0];
  return [Number((v >> 96n) & 0xffffffffn), Number((v >> 64n) & 0xffffffffn), Number((v >> 32n) & 0xffffffffn), Number(v & 0xffffffffn)];
}
const mkIP = (a: A): IP => new IP(a.family, ...words(a.family, a.v));
const mkPrefix = (p: P): Prefix => new Prefix(p.family, ...words(p.family, p.v), p.len);
const groups = (v: bigint): number[] => Array.from({ length: 8 }, (_, i) => Number((v >> BigInt(112 - 16 * i)) & 0xffffn));

/** RFC 5952 section 4: lower-case hex, no leading zeros, the longest run (>= 2) of zero groups as "::", first on ties. */
function rfc5952(v: bigint): string {
  const g = groups(v);
  let bestAt = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [bestAt, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  if (bestLen < 2) return hex(g);
  return `${hex(g.slice(0, bestAt))}::${hex(g.slice(bestAt + bestLen))}`;
}
/** Text of an address per the oracles: dotted quad for v4 (by hand), RFC 5952 for v6 (by hand). */
function text(a: A): string {
  if (a.family === 4) return [24n, 16n, 8n, 0n].map((s) => String((a.v >> s) & 255n)).join('.');
  return rfc5952(a.v);
}
/** BigInt of an ipaddr.js parse (independent of src/net/ip.ts). */
function oracleBig(s: string): A {
  const x = ipaddr.parse(s);
  const bytes = x.toByteArray();
  return { family: x.kind() === 'ipv4' ? 4 : 6, v: bytes.reduce((acc, b) => (acc << 8n) | BigInt(b), 0n) };
}

// ---- arbitraries ----------------------------------------------------------------------------------------------

const v4 = fc.integer({ min: 0, max: 0xffffffff }).map((n): A => ({ family: 4, v: BigInt(n) }));
// Groups biased to 0 and 0xffff so zero runs (and their ties) and carries show up often.
const group = fc.oneof(
  { weight: 4, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.constant(0xffff) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
);
const v6 = fc.array(group, { minLength: 8, maxLength: 8 }).map((gs): A => ({ family: 6, v: gs.reduce((acc, x) => (acc << 16n) | BigInt(x), 0n) }));
const addr = fc.oneof(v4, v6);
const lenFor = (f: Family) => fc.integer({ min: 0, max: bits(f) });
const prefixArb: fc.Arbitrary<P> = addr.chain((a) => lenFor(a.family).map((len) => ({ family: a.family, v: a.v & mask(a.family, len), len })));

// ---- parsing and formatting -----------------------------------------------------------------------------------

t.test('IPv4 parse/format round trip', async (t) => {
  holds(
    t,
    fc.property(v4, (a) => {
      const s = text(a);
      const ip = parseIP(s);
      ck.equal(ip.family, 4);
      ck.equal(toBig(ip), a.v, s);
      ck.equal(formatIP(ip), s);
      ck.equal(ip.toString(), ipaddr.parse(s).toString());
      ck.ok(ipEquals(ip, mkIP(a)));
    }),
    RUNS,
  );
});

t.test('IPv6 parse/format round trip, RFC 5952 output', async (t) => {
  holds(
    t,
    fc.property(v6, fc.integer({ min: 0, max: 3 }), (a, style) => {
      const parts = groups(a.v);
      const o = new ipaddr.IPv6(parts);
      // Feed it every spelling: full fixed-length, normalized, upper-case, and the canonical one.
      const fixed = parts.map((x) => x.toString(16).padStart(4, '0')).join(':');
      const input = [fixed, o.toNormalizedString(), fixed.toUpperCase(), rfc5952(a.v)][style];
      const ip = parseIP(input);
      ck.equal(ip.family, 6);
      ck.equal(toBig(ip), a.v, input);
      const out = formatIP(ip);
      ck.equal(out, rfc5952(a.v), `RFC 5952 text of ${input}`);
      ck.equal(out, o.toRFC5952String(), 'ipaddr.js agrees');
      ck.equal(oracleBig(out).v, a.v, 'ipaddr.js reads the output back to the same address');
    }),
    RUNS,
  );
});

t.test('RFC 5952 examples', async (t) => {
  // Section 4.2.2 (one 16-bit zero field is not shortened), 4.2.3 (longest run; first on a tie), 4.3 (lower case).
  const cases: [string, string][] = [
    ['2001:db8:0:0:0:0:2:1', '2001:db8::2:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:DB8::AAAA', '2001:db8::aaaa'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['fd00:0000:0000:0000:0000:0000:ffff:ffff', 'fd00::ffff:ffff'],
  ];
  for (const [input, want] of cases) t.equal(formatIP(parseIP(input)), want, input);
});

t.test('parseIP refuses non-strict and malformed forms', async (t) => {
  for (const s of ['', '10.1', '10.0.0', '010.0.0.1', '0x0a.0.0.1', '1.2.3.4.5', '10.0.0.256', '256.0.0.0', 'abc', '1.2.3.4/32',
    'fe80::1%eth0', ':::', '1::2::3', '12345::', 'g::1', '1:2:3:4:5:6:7:8:9']) {
    t.throws(() => parseIP(s), AddressError, JSON.stringify(s));
  }
});

t.test('parsePrefix round trip and agreement with ipaddr.js', async (t) => {
  holds(
    t,
    fc.property(prefixArb, (p) => {
      const s = `${text(p)}/${p.len}`;
      const got = parsePrefix(s);
      ck.equal(got.family, p.family);
      ck.equal(got.len, p.len);
      ck.equal(toBig(got), p.v, s);
      ck.equal(formatPrefix(got), s);
      ck.equal(got.toString(), s);
      ck.equal(toBig(got.ip), p.v);
      ck.ok(prefixEquals(got, mkPrefix(p)));
      const [oa, olen] = ipaddr.parseCIDR(s);
      ck.equal(olen, p.len);
      ck.equal(oracleBig(oa.toString()).v, p.v);
      // A bare address is a host prefix; with a slash it is parsed as a prefix.
      ck.ok(prefixEquals(parsePrefixOrIP(s), got));
    }),
    RUNS,
  );
});

t.test('parsePrefix refuses host bits and names the network', async (t) => {
  holds(
    t,
    fc.property(
      addr.chain((a) => fc.tuple(fc.constant(a), fc.integer({ min: 0, max: bits(a.family) - 1 }))),
      ([a, len]) => {
        fc.pre((a.v & ~mask(a.family, len) & all(a.family)) !== 0n);
        const s = `${text(a)}/${len}`;
        const net = `${text({ family: a.family, v: a.v & mask(a.family, len) })}/${len}`;
        let err: unknown;
        try {
          parsePrefix(s);
        } catch (e) {
          err = e;
        }
        ck.type(err, AddressError, s);
        ck.match((err as Error).message, /host bits/);
        ck.ok((err as Error).message.includes(net), `"${(err as Error).message}" names ${net}`);
        // parseIPWithLen accepts the same text and keeps the host bits.
        const w = parseIPWithLen(s);
        ck.equal(toBig(w.ip), a.v);
        ck.equal(w.len, len);
      },
    ),
    RUNS,
  );
  t.throws(() => parsePrefix('10.0.0.1/24'), { name: 'AddressError', message: /10\.0\.0\.0\/24/ });
  t.throws(() => parsePrefix('fd00::1/64'), { name: 'AddressError', message: /fd00::\/64/ });
});

t.test('parsePrefix refuses lengths out of range and garbage', async (t) => {
  t.throws(() => parsePrefix('10.0.0.0/33'), { name: 'AddressError', message: /33/ });
  t.throws(() => parsePrefix('::/129'), { name: 'AddressError', message: /129/ });
  t.throws(() => parsePrefix('10.0.0.0/-1'), AddressError);
  t.throws(() => parsePrefix('10.0.0.0/1000'), AddressError);
  for (const s of ['', '10.0.0', '10.0.0.256/24', '1.2.3.4/', 'abc', 'fe80::1%eth0/64', '/24', '10.0.0.0', '10.0.0.0/24/1',
    '10.0.0.0/2 4', '10.0.0.0/x', '10.0.0/24', '::/1e2', '10.0.0.0/0x10']) {
    t.throws(() => parsePrefix(s), AddressError, JSON.stringify(s));
  }
  // Lengths at the boundaries are fine.
  t.equal(parsePrefix('0.0.0.0/0').len, 0);
  t.equal(parsePrefix('255.255.255.255/32').len, 32);
  t.equal(parsePrefix('::/0').len, 0);
  t.equal(parsePrefix('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128').len, 128);
});

t.test('parsePrefix on arbitrary text: only AddressError, and anything accepted agrees with ipaddr.js', async (t) => {
  const chars = fc.constantFrom(...'0123456789abcdefABCDEF.:/%x-'.split(''));
  const junk = fc.oneof(
    fc.string({ unit: chars, maxLength: 24 }),
    // Near misses of valid prefixes: splice a random character into one.
    fc.tuple(prefixArb, fc.nat(), chars).map(([p, at, c]) => {
      const s = `${text(p)}/${p.len}`;
      const i = at % (s.length + 1);
      return s.slice(0, i) + c + s.slice(i);
    }),
  );
  holds(
    t,
    fc.property(junk, (s) => {
      let p: Prefix;
      try {
        p = parsePrefix(s);
      } catch (e) {
        ck.type(e, AddressError, JSON.stringify(s));
        return;
      }
      const [oa, olen] = ipaddr.parseCIDR(s);
      ck.equal(p.len, olen, s);
      ck.equal(toBig(p), oracleBig(oa.toString()).v, s);
      ck.equal(toBig(p) & mask(p.family, p.len), toBig(p), 'no host bits');
    }),
    { numRuns: 2000 },
  );
});

t.test('prefixOf and hostPrefix match BigInt masks', async (t) => {
  holds(
    t,
    fc.property(addr.chain((a) => fc.tuple(fc.constant(a), lenFor(a.family))), ([a, len]) => {
      const p = prefixOf(mkIP(a), len);
      ck.equal(p.len, len);
      ck.equal(toBig(p), a.v & mask(a.family, len));
      ck.ok(prefixContainsIP(p, mkIP(a)));
      const h = hostPrefix(mkIP(a));
      ck.equal(h.len, bits(a.family));
      ck.equal(toBig(h), a.v);
    }),
    RUNS,
  );
  t.throws(() => prefixOf(parseIP('10.0.0.1'), 33), AddressError);
  t.throws(() => prefixOf(parseIP('::1'), 129), AddressError);
  t.throws(() => prefixOf(parseIP('::1'), -1), AddressError);
});

// ---- containment ------------------------------------------------------------------------------------------------

// Two addresses of one family that often share a long common prefix (so containment is neither always nor never).
const relatedPair = addr.chain((a) =>
  fc.tuple(fc.constant(a), fc.integer({ min: 0, max: bits(a.family) }), fc.bigInt({ min: 0n, max: all(a.family) })).map(
    ([a, keep, noise]): [A, A] => [a, { family: a.family, v: (a.v & mask(a.family, keep)) | (noise & ~mask(a.family, keep) & all(a.family)) }],
  ),
);
const bigContains = (p: P, v: bigint): boolean => (v & mask(p.family, p.len)) === p.v;

t.test('prefixContainsIP / prefixContainsPrefix / prefixesOverlap agree with BigInt masks', async (t) => {
  holds(
    t,
    fc.property(relatedPair, lenFor(4), lenFor(4), ([a, b], la, lb) => {
      const W = bits(a.family);
      const lenA = a.family === 4 ? la : Math.min(W, la * 4);
      const lenB = a.family === 4 ? lb : Math.min(W, lb * 4);
      const pa: P = { family: a.family, v: a.v & mask(a.family, lenA), len: lenA };
      const pb: P = { family: b.family, v: b.v & mask(b.family, lenB), len: lenB };
      const A = mkPrefix(pa);
      const B = mkPrefix(pb);
      ck.equal(prefixContainsIP(A, mkIP(b)), bigContains(pa, b.v));
      ck.equal(prefixContainsIP(B, mkIP(a)), bigContains(pb, a.v));
      const aInB = pb.len <= pa.len && bigContains(pb, pa.v);
      const bInA = pa.len <= pb.len && bigContains(pa, pb.v);
      ck.equal(prefixContainsPrefix(A, B), bInA);
      ck.equal(prefixContainsPrefix(B, A), aInB);
      ck.equal(prefixesOverlap(A, B), aInB || bInA);
      ck.equal(prefixesOverlap(B, A), aInB || bInA);
      // Overlap as ranges: [start, end] intersect.
      const end = (p: P) => p.v + (1n << BigInt(W - p.len)) - 1n;
      ck.equal(prefixesOverlap(A, B), pa.v <= end(pb) && pb.v <= end(pa));
    }),
    { numRuns: 1000 },
  );
});

t.test('containment never crosses families', async (t) => {
  holds(
    t,
    fc.property(v4, v6, fc.integer({ min: 0, max: 32 }), (a, b, len) => {
      const p4 = mkPrefix({ family: 4, v: a.v & mask(4, len), len });
      const p6 = mkPrefix({ family: 6, v: b.v & mask(6, len), len });
      ck.notOk(prefixContainsIP(p4, mkIP(b)));
      ck.notOk(prefixContainsIP(p6, mkIP(a)));
      ck.notOk(prefixContainsPrefix(p4, p6));
      ck.notOk(prefixContainsPrefix(p6, p4));
      ck.notOk(prefixesOverlap(p4, p6));
    }),
    RUNS,
  );
  // ::/0 does not contain IPv4 addresses, and 0.0.0.0/0 does not contain ::ffff:a.b.c.d.
  t.notOk(prefixContainsIP(parsePrefix('::/0'), parseIP('10.0.0.1')));
  t.notOk(prefixContainsIP(parsePrefix('0.0.0.0/0'), parseIP('::ffff:10.0.0.1')));
});

// ---- offsets ---------------------------------------------------------------------------------------------------

// A prefix with at most 52 host bits, and an offset inside it, biased to the word-boundary values.
const offsetCase = addr.chain((a) => {
  const W = bits(a.family);
  return fc.integer({ min: 0, max: Math.min(52, W) }).chain((h) => {
    const size = 2 ** h;
    const special = [0, size - 1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 16 - 1, 2 ** 16].filter((x) => x < size);
    return fc
      .oneof(fc.constantFrom(...special), fc.integer({ min: 0, max: size - 1 }))
      .map((off) => ({ p: { family: a.family, v: a.v & mask(a.family, W - h), len: W - h } as P, off }));
  });
});

t.test('ipAt and offsetOf are inverse and match BigInt addition', async (t) => {
  holds(
    t,
    fc.property(offsetCase, ({ p, off }) => {
      const P = mkPrefix(p);
      const ip = ipAt(P, off);
      ck.equal(ip.family, p.family);
      ck.equal(toBig(ip), p.v + BigInt(off), `${formatPrefix(P)} + ${off}`);
      ck.ok(prefixContainsIP(P, ip));
      ck.equal(offsetOf(P, ip), off);
      ck.equal(prefixSize(P), 2 ** (bits(p.family) - p.len));
    }),
    { numRuns: 1000 },
  );
});

t.test('ipAt/offsetOf across 32-bit word boundaries', async (t) => {
  // fd00::/64 walking across the w3 -> w2 boundary, and fd00::/96 up to its last address.
  const p64 = parsePrefix('fd00::/64');
  for (const [off, want] of [
    [0xfffffffe, 'fd00::ffff:fffe'],
    [0xffffffff, 'fd00::ffff:ffff'],
    [0x100000000, 'fd00::1:0:0'],
    [0x100000001, 'fd00::1:0:1'],
    [2 ** 52 - 1, 'fd00::f:ffff:ffff:ffff'],
  ] as const) {
    t.equal(formatIP(ipAt(p64, off)), want, `fd00::/64 + ${off}`);
    t.equal(offsetOf(p64, parseIP(want)), off, `offset of ${want}`);
  }
  const p96 = parsePrefix('fd00::ffff:0:0/96');
  t.equal(formatIP(ipAt(p96, 0xffffffff)), 'fd00::ffff:ffff:ffff');
  t.equal(offsetOf(p96, parseIP('fd00::ffff:ffff:ffff')), 0xffffffff);
  // A /76 (52 host bits) whose host part spans three words.
  const p76 = parsePrefix('2001:db8:0:1:fff0::/76');
  t.equal(formatIP(ipAt(p76, 2 ** 52 - 1)), '2001:db8:0:1:ffff:ffff:ffff:ffff');
  t.equal(offsetOf(p76, parseIP('2001:db8:0:1:ffff:ffff:ffff:ffff')), 2 ** 52 - 1);
  const p4 = parsePrefix('0.0.0.0/0');
  t.equal(formatIP(ipAt(p4, 0xffffffff)), '255.255.255.255');
  t.equal(offsetOf(p4, parseIP('255.255.255.255')), 0xffffffff);
  t.equal(offsetOf(parsePrefix('10.0.0.0/8'), parseIP('10.255.255.255')), 2 ** 24 - 1);
});

t.test('ipAt/offsetOf from a base with low bits set carry through every word (ranges such as fd00::ffff:ffff + n)', async (t) => {
  // Ranges are walked from arbitrary start addresses, so ipAt must be plain 128-bit addition with carries.
  holds(
    t,
    fc.property(v6, fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (base, off) => {
      fc.pre(base.v + BigInt(off) <= all(6));
      const p = new Prefix(6, ...words(6, base.v), 76);
      const ip = ipAt(p, off);
      ck.equal(toBig(ip), base.v + BigInt(off));
      ck.equal(offsetOf(p, ip), off);
    }),
    { numRuns: 1000 },
  );
  const p = new Prefix(6, ...words(6, oracleBig('fd00::ffff:ffff').v), 96);
  t.equal(formatIP(ipAt(p, 1)), 'fd00::1:0:0');
  const q = new Prefix(6, ...words(6, oracleBig('fd00::ffff:ffff:ffff:ffff').v), 64);
  t.equal(formatIP(ipAt(q, 1)), 'fd00:0:0:1::');
  t.equal(formatIP(ipAt(q, 2 ** 32 + 1)), 'fd00::1:0:1:0:0'); // fd00:0:0:1:0:1:0:0, first of two tied zero runs
  t.equal(offsetOf(q, parseIP('fd00:0:0:1:0:1:0:0')), 2 ** 32 + 1);
});

// ---- subnets -----------------------------------------------------------------------------------------------------

// A pool prefix, a subnet length inside it, and an index < min(count, 2^53), biased to big indexes and edges.
const subnetCase = prefixArb.chain((p) => {
  const W = bits(p.family);
  return fc.integer({ min: p.len, max: W }).chain((subLen) => {
    const countBig = 1n << BigInt(subLen - p.len);
    const maxIndex = Number(countBig < 2n ** 53n ? countBig - 1n : 2n ** 53n - 1n);
    const special = [0, maxIndex, 2 ** 32 - 1, 2 ** 32, 2 ** 40, 2 ** 48 + 12345].filter((x) => x <= maxIndex);
    return fc
      .oneof(fc.constantFrom(...special), fc.integer({ min: 0, max: maxIndex }))
      .chain((index) =>
        // An address inside that subnet: its first, its last, or any.
        fc.bigInt({ min: 0n, max: (1n << BigInt(W - subLen)) - 1n }).map((within) => ({ p, subLen, index, within })),
      );
  });
});

t.test('subnetAt / subnetIndexOf / subnetCount agree with BigInt arithmetic', async (t) => {
  holds(
    t,
    fc.property(subnetCase, ({ p, subLen, index, within }) => {
      const W = bits(p.family);
      const P = mkPrefix(p);
      ck.equal(subnetCount(P, subLen), Number(1n << BigInt(subLen - p.len)));
      const s = subnetAt(P, subLen, index);
      const want = p.v + (BigInt(index) << BigInt(W - subLen));
      ck.equal(s.family, p.family);
      ck.equal(s.len, subLen);
      ck.equal(toBig(s), want, `${formatPrefix(P)} /${subLen} #${index}`);
      ck.ok(prefixContainsPrefix(P, s));
      const inside = mkIP({ family: p.family, v: want + within });
      ck.equal(subnetIndexOf(P, subLen, inside), index, `index of ${formatIP(inside)}`);
      ck.equal(subnetIndexOf(P, subLen, s.ip), index);
    }),
    { numRuns: 1000 },
  );
});

t.test('IPv6 pools with far more than 2^53 blocks: fd00::/48 in /122 blocks', async (t) => {
  const pool = parsePrefix('fd00::/48');
  t.equal(subnetCount(pool, 122), 2 ** 74);
  const base = toBig(pool);
  holds(
    t,
    fc.property(fc.oneof(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })), fc.integer({ min: 0, max: 63 }), (index, o) => {
      const s = subnetAt(pool, 122, index);
      const want = base + (BigInt(index) << 6n);
      ck.equal(toBig(s), want);
      ck.equal(formatPrefix(s), `${rfc5952(want)}/122`);
      ck.equal(subnetIndexOf(pool, 122, mkIP({ family: 6, v: want + BigInt(o) })), index);
      ck.equal(toBig(ipAt(s, o)), want + BigInt(o));
      ck.equal(offsetOf(s, ipAt(s, o)), o);
    }),
    RUNS,
  );
  t.equal(formatPrefix(subnetAt(pool, 122, 2 ** 40)), 'fd00::4000:0:0/122'); // 2^40 << 6 = 2^46: bit 14 of group 5
  t.equal(formatPrefix(subnetAt(pool, 122, 2 ** 26 - 1)), 'fd00::ffff:ffc0/122');
  t.equal(formatPrefix(subnetAt(pool, 122, 2 ** 26)), 'fd00::1:0:0/122');
  t.equal(formatPrefix(subnetAt(parsePrefix('10.0.0.0/8'), 26, 2 ** 18 - 1)), '10.255.255.192/26');
  t.equal(subnetIndexOf(parsePrefix('10.0.0.0/8'), 26, parseIP('10.255.255.200')), 2 ** 18 - 1);
});

// ---- ordering ---------------------------------------------------------------------------------------------------

const keyCompare = (a: P, b: P): number =>
  a.family - b.family || (a.v < b.v ? -1 : a.v > b.v ? 1 : 0) || a.len - b.len;

t.test('comparePrefix is the total order (family, address, length)', async (t) => {
  // Prefixes that often share addresses so ties on the address are decided by length.
  const near = fc.oneof(prefixArb, relatedPair.chain(([a]) => lenFor(a.family).map((len): P => ({ family: a.family, v: a.v & mask(a.family, len), len }))));
  holds(
    t,
    fc.property(near, near, (a, b) => {
      const A = mkPrefix(a);
      const B = mkPrefix(b);
      const c = comparePrefix(A, B);
      ck.equal(Math.sign(c), Math.sign(keyCompare(a, b)), `${A} vs ${B}`);
      ck.equal(Math.sign(comparePrefix(B, A)), -Math.sign(c) || 0);
      ck.equal(c === 0, prefixEquals(A, B));
      const ci = compareIP(A.ip, B.ip);
      ck.equal(Math.sign(ci), Math.sign(a.family - b.family || (a.v < b.v ? -1 : a.v > b.v ? 1 : 0)));
    }),
    { numRuns: 1000 },
  );
  holds(
    t,
    fc.property(fc.array(near, { maxLength: 40 }), (ps) => {
      const got = ps.map(mkPrefix).sort(comparePrefix).map(String);
      const want = [...ps].sort(keyCompare).map((p) => mkPrefix(p).toString());
      ck.same(got, want);
    }),
    { numRuns: 200 },
  );
  // Same address, shorter first; IPv4 before IPv6.
  const sorted = ['fd00::/64', '10.0.0.0/24', '10.0.0.0/8', '::/0', '9.255.255.255/32'].map(parsePrefix).sort(comparePrefix).map(String);
  t.same(sorted, ['9.255.255.255/32', '10.0.0.0/8', '10.0.0.0/24', '::/0', 'fd00::/64']);
});
