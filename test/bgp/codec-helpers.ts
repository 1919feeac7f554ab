// Shared by the codec tests and test/bgp/fuzz.ts: byte builders for hand-made messages, fast-check arbitraries
// for every message type, and a comparable plain form of decoded messages.
import fc from 'fast-check';
import { IP, Prefix, prefixOf, formatPrefix } from '../../src/net/ip.ts';
import { makeAttrs, SegmentType, type AsPathSegment, type AttrsInit, type PathAttrs } from '../../src/rib/attrs.ts';
import type { PrefixList } from '../../src/rib/prefixlist.ts';
import { type Capability, type Message, type OpenMessage, type UpdateMessage } from '../../src/bgp/codec/messages.ts';
import type { UpdateInput } from '../../src/bgp/codec/encode.ts';

// ---- byte builders ------------------------------------------------------------------------------------------

export const hex = (s: string): Buffer => Buffer.from(s.replace(/[\s_]/g, ''), 'hex');
const bytes = (b: Buffer | string): Buffer => (typeof b === 'string' ? hex(b) : b);

/** A whole message: marker, length (computed unless given), type, body. */
export function msg(type: number, body: Buffer | string = '', lengthField?: number): Buffer {
  const b = bytes(body);
  const h = Buffer.alloc(19, 0xff);
  h.writeUInt16BE(lengthField ?? 19 + b.length, 16);
  h[18] = type;
  return Buffer.concat([h, b]);
}

/** One path attribute; a 2-octet length when flags carry the Extended Length bit (0x10). */
export function attr(flags: number, type: number, value: Buffer | string = ''): Buffer {
  const v = bytes(value);
  if (flags & 0x10) {
    const h = Buffer.from([flags, type, 0, 0]);
    h.writeUInt16BE(v.length, 2);
    return Buffer.concat([h, v]);
  }
  return Buffer.concat([Buffer.from([flags, type, v.length]), v]);
}

/** An UPDATE from raw fields: withdrawn routes octets, attributes, NLRI octets. */
export function update(p: { withdrawn?: Buffer | string; attrs?: (Buffer | string)[]; nlri?: Buffer | string } = {}): Buffer {
  const w = bytes(p.withdrawn ?? '');
  const a = Buffer.concat((p.attrs ?? []).map(bytes));
  const n = bytes(p.nlri ?? '');
  const wl = Buffer.alloc(2);
  wl.writeUInt16BE(w.length);
  const al = Buffer.alloc(2);
  al.writeUInt16BE(a.length);
  return msg(2, Buffer.concat([wl, w, al, a, n]));
}

/** The usual well-formed attributes (4-octet AS session). */
export const ORIGIN = attr(0x40, 1, '00');
export const AS_PATH = attr(0x40, 2, '02 01 0000fde9'); // AS_SEQUENCE 65001
export const AS_PATH2 = attr(0x40, 2, '02 01 fde9'); // the same in a 2-octet session
export const NEXT_HOP = attr(0x40, 3, '0a000001'); // 10.0.0.1
export const NLRI = '18 c0a801 10 0a01'; // 192.168.1.0/24, 10.1.0.0/16

/** An MP_REACH_NLRI for IPv6 unicast with next hop fd00::1 and the given NLRI octets. */
export function mpReach6(nlri: string, nextHop = 'fd000000000000000000000000000001'): Buffer {
  return attr(0x90, 14, `0002 01 ${(nextHop.length / 2).toString(16).padStart(2, '0')} ${nextHop} 00 ${nlri}`);
}

export function open(p: { version?: number; myAs?: number; hold?: number; id?: number; params?: Buffer | string } = {}): Buffer {
  const prm = bytes(p.params ?? '');
  const b = Buffer.alloc(10);
  b[0] = p.version ?? 4;
  b.writeUInt16BE(p.myAs ?? 65001, 1);
  b.writeUInt16BE(p.hold ?? 90, 3);
  b.writeUInt32BE(p.id ?? 0x0a000001, 5);
  b[9] = prm.length;
  return msg(1, Buffer.concat([b, prm]));
}

// ---- arbitraries --------------------------------------------------------------------------------------------

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const asn2 = fc.integer({ min: 1, max: 0xffff });
const asn4 = fc.integer({ min: 0x10000, max: 0xffffffff });
const asnAny = fc.oneof(asn2, asn4);
const ipv4 = u32.map((w) => new IP(4, w));
// A unicast-looking host address (NEXT_HOP must not be 0, multicast or broadcast).
const hostV4 = fc.integer({ min: 0x01000000, max: 0xdfffffff }).map((w) => new IP(4, w));
const ipv6 = fc.tuple(u32, u32, u32, u32).map(([a, b, c, d]) => new IP(6, a, b, c, d));

export const prefix4 = fc.tuple(u32, fc.integer({ min: 0, max: 32 })).map(([w, l]) => prefixOf(new IP(4, w), l));
export const prefix6 = fc.tuple(ipv6, fc.integer({ min: 0, max: 128 })).map(([ip, l]) => prefixOf(ip, l));

function segment(asn: fc.Arbitrary<number>, types: SegmentType[], maxLen = 12): fc.Arbitrary<AsPathSegment> {
  return fc.record({
    type: fc.constantFrom(...types),
    asns: fc.array(asn, { minLength: 1, maxLength: maxLen }),
  });
}

const ALL_SEGMENTS = [SegmentType.AS_SET, SegmentType.AS_SEQUENCE, SegmentType.AS_CONFED_SEQUENCE, SegmentType.AS_CONFED_SET];

/** AS paths for a 4-octet session: any segments, sometimes a sequence longer than 255 (split on the wire). */
export const asPath4 = fc.oneof(
  { weight: 9, arbitrary: fc.array(segment(asnAny, ALL_SEGMENTS), { maxLength: 5 }) },
  { weight: 1, arbitrary: fc.array(asnAny, { minLength: 256, maxLength: 600 }).map((asns) => [{ type: SegmentType.AS_SEQUENCE, asns }]) },
);

/**
 * AS paths for a 2-octet session that survive the AS_TRANS/AS4_PATH round trip: confederation segments only in
 * front and with 2-octet ASNs (they are never carried in AS4_PATH, RFC 6793 4.2.2).
 */
export const asPath2 = fc
  .tuple(
    fc.array(segment(asn2, [SegmentType.AS_CONFED_SEQUENCE, SegmentType.AS_CONFED_SET], 4), { maxLength: 2 }),
    fc.array(segment(asnAny, [SegmentType.AS_SET, SegmentType.AS_SEQUENCE]), { maxLength: 5 }),
  )
  .map(([c, s]) => [...c, ...s]);

const unknownType = fc.integer({ min: 19, max: 255 }).filter((t) => t !== 32);

function attrsInit(fourOctetAs: boolean, nextHop: fc.Arbitrary<{ nextHop: IP; nextHopLinkLocal: IP | null }>): fc.Arbitrary<AttrsInit> {
  return fc
    .record({
      origin: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
      asPath: fourOctetAs ? asPath4 : asPath2,
      nh: nextHop,
      med: fc.option(u32, { nil: undefined }),
      localPref: fc.option(u32, { nil: undefined }),
      atomicAggregate: fc.boolean(),
      aggregator: fc.option(fc.record({ asn: asnAny, address: ipv4 }), { nil: undefined }),
      communities: fc.array(u32, { maxLength: 20 }),
      extCommunities: fc.array(fc.tuple(u32, u32), { maxLength: 8 }),
      largeCommunities: fc.array(fc.tuple(u32, u32, u32), { maxLength: 8 }),
      originatorId: fc.option(u32, { nil: undefined }),
      clusterList: fc.array(u32, { maxLength: 6 }),
      // Received unknown optional transitive attributes carry the Partial bit; some are long (extended length).
      unknown: fc.uniqueArray(
        fc.record({ flags: fc.constant(0xe0), type: unknownType, value: fc.uint8Array({ maxLength: 300 }) }),
        { maxLength: 2, selector: (u) => u.type },
      ),
    })
    .map(({ nh, ...r }) => {
      let aggregator = r.aggregator;
      // RFC 6793 4.2.3: towards a 2-octet speaker an AGGREGATOR that is not AS_TRANS makes the receiver ignore
      // AS4_PATH; keep such aggregators to paths without 4-octet ASNs (that case has its own test).
      if (!fourOctetAs && aggregator && aggregator.asn <= 0xffff && r.asPath.some((s) => s.asns.some((a) => a > 0xffff))) {
        aggregator = { ...aggregator, asn: aggregator.asn + 0x10000 };
      }
      return { ...r, aggregator, nextHop: nh.nextHop, nextHopLinkLocal: nh.nextHopLinkLocal };
    });
}

const nh4 = hostV4.map((nextHop) => ({ nextHop, nextHopLinkLocal: null as IP | null }));
const nh6 = fc.tuple(ipv6, fc.option(ipv6, { nil: null })).map(([nextHop, nextHopLinkLocal]) => ({ nextHop, nextHopLinkLocal }));

export const attrs4 = (fourOctetAs: boolean): fc.Arbitrary<PathAttrs> => attrsInit(fourOctetAs, nh4).map(makeAttrs);
export const attrs6 = (fourOctetAs: boolean): fc.Arbitrary<PathAttrs> => attrsInit(fourOctetAs, nh6).map(makeAttrs);

/** UPDATE contents of every shape: classic IPv4, MP IPv6 (with or without withdrawals), pure withdrawals, EoR. */
export function updateInput(fourOctetAs: boolean): fc.Arbitrary<UpdateInput> {
  const p4 = fc.array(prefix4, { maxLength: 40 });
  const p6 = fc.array(prefix6, { maxLength: 30 });
  return fc.oneof(
    fc.record({ withdrawn: p4, attrs: attrs4(fourOctetAs), nlri: p4 }),
    fc.record({ withdrawn: p4, attrs: fc.constant(null), nlri: fc.constant([]) }),
    fc.tuple(attrs6(fourOctetAs), p6, fc.option(p6, { nil: null })).map(([a, n, w]) => ({
      attrs: a,
      mpReach: { afi: 2, safi: 1, nextHop: a.nextHop, nextHopLinkLocal: a.nextHopLinkLocal, nlri: n },
      mpUnreach: w === null ? null : { afi: 2, safi: 1, withdrawn: w },
    })),
    p6.map((w) => ({ attrs: null, mpUnreach: { afi: 2, safi: 1, withdrawn: w } })),
  );
}

const capability: fc.Arbitrary<Capability> = fc.oneof(
  fc.record({ kind: fc.constant('multiprotocol' as const), afi: fc.integer({ min: 0, max: 0xffff }), safi: fc.integer({ min: 0, max: 255 }) }),
  fc.constant({ kind: 'route-refresh' as const }),
  fc.constant({ kind: 'extended-message' as const }),
  fc.record({ kind: fc.constant('four-octet-as' as const), asn: fc.integer({ min: 1, max: 0xffffffff }) }),
  fc.record({
    kind: fc.constant('graceful-restart' as const),
    restarting: fc.boolean(),
    notification: fc.boolean(),
    restartTime: fc.integer({ min: 0, max: 4095 }),
    families: fc.array(
      fc.record({ afi: fc.integer({ min: 0, max: 0xffff }), safi: fc.integer({ min: 0, max: 255 }), forwarding: fc.boolean() }),
      { maxLength: 4 },
    ),
  }),
  fc.record({
    kind: fc.constant('unknown' as const),
    code: fc.integer({ min: 0, max: 255 }).filter((c) => ![1, 2, 6, 64, 65].includes(c)),
    value: fc.uint8Array({ maxLength: 24 }),
  }),
);

export const openMessage: fc.Arbitrary<OpenMessage> = fc.record({
  type: fc.constant('open' as const),
  version: fc.constant(4),
  myAs: fc.integer({ min: 1, max: 0xffff }),
  holdTime: fc.oneof(fc.constant(0), fc.integer({ min: 3, max: 0xffff })),
  bgpId: fc.integer({ min: 1, max: 0xffffffff }),
  // Up to 30 capabilities: enough to need the RFC 9072 extended parameter length now and then.
  capabilities: fc.array(capability, { maxLength: 30 }),
});

export const otherMessage: fc.Arbitrary<Message> = fc.oneof(
  fc.record({
    type: fc.constant('notification' as const),
    code: fc.integer({ min: 1, max: 7 }),
    subcode: fc.integer({ min: 0, max: 255 }),
    data: fc.uint8Array({ maxLength: 64 }),
  }),
  fc.constant({ type: 'keepalive' as const }),
  fc.record({
    type: fc.constant('route-refresh' as const),
    afi: fc.integer({ min: 0, max: 0xffff }),
    safi: fc.integer({ min: 0, max: 255 }),
    subtype: fc.integer({ min: 0, max: 255 }),
  }),
);

// ---- comparable forms ---------------------------------------------------------------------------------------

const strs = (src: readonly Prefix[] | PrefixList | undefined): string[] => {
  if (!src) return [];
  if (Array.isArray(src)) return (src as readonly Prefix[]).map(formatPrefix);
  const l = src as PrefixList;
  const out: string[] = [];
  for (let i = 0; i < l.count; i++) out.push(l.format(i));
  return out;
};

/** A deep-comparable form of an UPDATE (input or decoded): prefixes as strings, addresses as strings. */
export function plainUpdate(u: UpdateInput | UpdateMessage): unknown {
  const a = u.attrs ?? null;
  return {
    withdrawn: strs(u.withdrawn),
    nlri: strs(u.nlri),
    attrs: a === null ? null : {
      ...a,
      hash: undefined,
      nextHop: a.nextHop?.toString() ?? null,
      nextHopLinkLocal: a.nextHopLinkLocal?.toString() ?? null,
      aggregator: a.aggregator ? { asn: a.aggregator.asn, address: a.aggregator.address.toString() } : null,
      unknown: a.unknown.map((x) => ({ ...x, value: Buffer.from(x.value).toString('hex') })),
    },
    mpReach: u.mpReach
      ? {
          afi: u.mpReach.afi,
          safi: u.mpReach.safi,
          nextHop: u.mpReach.nextHop?.toString() ?? null,
          nextHopLinkLocal: u.mpReach.nextHopLinkLocal?.toString() ?? null,
          nlri: strs(u.mpReach.nlri),
        }
      : null,
    mpUnreach: u.mpUnreach ? { afi: u.mpUnreach.afi, safi: u.mpUnreach.safi, withdrawn: strs(u.mpUnreach.withdrawn) } : null,
  };
}

/** A deep-comparable form of any message. */
export function plainMessage(m: Message): unknown {
  if (m.type === 'update') return { type: 'update', ...(plainUpdate(m) as object) };
  return JSON.parse(JSON.stringify(m, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v)));
}
