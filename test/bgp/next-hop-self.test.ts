// Next hop self as a marker in exported attributes (src/bgp/codec/next-hop-self.ts): the packer writes the
// session's own address in its place, so what goes on the wire is exactly what the attributes with that address
// would have given.
import fc from 'fast-check';
import t from 'tap';
import {
  EncodeError, NEXT_HOP_SELF4, NEXT_HOP_SELF6, UpdatePacker, decodeMessage, type PackOptions,
} from '../../src/bgp/codec/index.ts';
import { IP, parseIP, parsePrefix, prefixOf, type Prefix } from '../../src/net/ip.ts';
import { attrsEqual, makeAttrs, withAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';
import { attrs4, attrs6, prefix4, prefix6 } from './codec-helpers.ts';

const hostV4 = fc.integer({ min: 0x01000000, max: 0xdfffffff }).map((w) => new IP(4, w));
const u32 = fc.integer({ min: 0, max: 0xffffffff });
const ipv6 = fc.tuple(u32, u32, u32, u32).map(([a, b, c, d]) => new IP(6, a, b, c, d));

function pack(attrs: PathAttrs, prefixes: Prefix[], opts: PackOptions): Buffer {
  const k = new UpdatePacker(256);
  k.announce(attrs, prefixes, opts);
  return k.take();
}

t.test('IPv4: the marker packed with a session address gives the bytes of that address in the attributes', async (t) => {
  fc.assert(fc.property(fc.boolean(), attrs4(true), hostV4, fc.array(prefix4, { minLength: 1, maxLength: 1500 }), (four, a, nh, prefixes) => {
    const opts = { fourOctetAs: four, extendedMessage: prefixes.length % 2 === 0 };
    const want = pack(withAttrs(a, { nextHop: nh }), prefixes, opts);
    const got = pack(withAttrs(a, { nextHop: NEXT_HOP_SELF4 }), prefixes, { ...opts, selfNextHop4: nh });
    t.equal(got.compare(want), 0);
  }), { numRuns: 150 });
});

t.test('IPv6: the marker packed with a session address (and link-local) gives the bytes of those in the attributes', async (t) => {
  fc.assert(fc.property(attrs6(true), ipv6, fc.option(ipv6, { nil: null }), fc.array(prefix6, { minLength: 1, maxLength: 600 }), (a, nh, ll, prefixes) => {
    const want = pack(withAttrs(a, { nextHop: nh, nextHopLinkLocal: ll }), prefixes, {});
    const got = pack(withAttrs(a, { nextHop: NEXT_HOP_SELF6, nextHopLinkLocal: null }), prefixes, { selfNextHop6: nh, selfNextHop6ll: ll });
    t.equal(got.compare(want), 0);
  }), { numRuns: 150 });
});

t.test('one marked record serves sessions with different addresses, each UPDATE carrying its own', async (t) => {
  const a = makeAttrs({ asPath: [{ type: 2, asns: [65000, 65101] }], nextHop: NEXT_HOP_SELF4, med: 5 });
  const prefixes = Array.from({ length: 2000 }, (_, i) => prefixOf(new IP(4, ((20 << 24) | (i << 8)) >>> 0), 24));
  for (const addr of ['10.101.1.1', '10.101.1.2', '192.0.2.254']) {
    const bytes = pack(a, prefixes, { selfNextHop4: parseIP(addr) });
    let at = 0;
    let n = 0;
    while (at < bytes.length) {
      const len = bytes.readUInt16BE(at + 16);
      const r = decodeMessage(bytes.subarray(at, at + len));
      const m = r.action === 'ok' && r.message.type === 'update' ? r.message : null;
      t.equal(m?.attrs?.nextHop?.toString(), addr, `UPDATE ${n} to ${addr}: NEXT_HOP ${addr}`);
      at += len;
      n++;
    }
    t.ok(n > 1, `${n} UPDATEs for ${addr}`);
  }
});

t.test('a marker with no address of ours for the session is refused, naming what is missing; nothing is packed', async (t) => {
  const k = new UpdatePacker(256);
  const p4 = parsePrefix('10.0.0.0/8');
  t.throws(() => k.announce(makeAttrs({ nextHop: NEXT_HOP_SELF4 }), [p4], {}), new EncodeError('IPv4 NLRI with next hop self, but no IPv4 next hop of ours on this session'));
  const p6 = parsePrefix('2001:db8::/32');
  t.throws(() => k.announce(makeAttrs({ nextHop: NEXT_HOP_SELF6 }), [p6], { selfNextHop6: null }), /IPv6 NLRI with next hop self, but no IPv6 next hop of ours/);
  t.equal(k.bytes, 0, 'nothing appended');
});

t.test('the markers equal no real address: an interner keeps marked records apart from 0.0.0.0 and :: ones', async (t) => {
  const i = new AttrInterner();
  const self4 = i.intern(makeAttrs({ nextHop: NEXT_HOP_SELF4 }));
  const zero4 = i.intern(makeAttrs({ nextHop: parseIP('0.0.0.0') }));
  const self6 = i.intern(makeAttrs({ nextHop: NEXT_HOP_SELF6 }));
  const zero6 = i.intern(makeAttrs({ nextHop: parseIP('::') }));
  t.not(self4, zero4);
  t.not(self6, zero6);
  t.notOk(attrsEqual(self4, zero4));
  t.ok(attrsEqual(self4, makeAttrs({ nextHop: NEXT_HOP_SELF4 })), 'two marked records with the same content are equal');
  t.equal(i.intern(makeAttrs({ nextHop: NEXT_HOP_SELF4 })), self4, 'and intern to one');
  t.ok(self4.nextHop === NEXT_HOP_SELF4 && self6.nextHop === NEXT_HOP_SELF6, 'the interned records hold the markers themselves');
  t.ok(zero4.nextHop !== NEXT_HOP_SELF4 && zero6.nextHop !== NEXT_HOP_SELF6, 'and the zero-address ones do not');
  t.equal(String(NEXT_HOP_SELF4), 'self (IPv4)');
});
