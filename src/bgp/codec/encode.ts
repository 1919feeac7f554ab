// BGP-4 message encoder. Pure: values in, Buffers out. Bad input (a caller bug, not peer data) throws EncodeError.
//
// Attributes are written MP_REACH_NLRI / MP_UNREACH_NLRI first (RFC 7606 5.1), then in ascending type code
// (RFC 4271 5), with the Extended Length bit exactly when a value exceeds 255 octets.
import { type IP } from '../../net/ip.ts';
import { SegmentType, type AsPath, type PathAttrs } from '../../rib/attrs.ts';
import { EncodeError } from './errors.ts';
import {
  AS_TRANS, Afi, AttrFlag, AttrType, ATTR_FLAGS, BGP_VERSION, CapCode, HEADER_LEN, MsgType, PARAM_CAPABILITIES,
  PARAM_EXTENDED_LENGTH, Safi, maxMessageLen, type Capability, type Message, type OpenMessage,
  type SessionCodecOptions,
} from './messages.ts';
import { PrefixReader, prefixWireLen, writePrefix, writePrefix4, type PrefixSource } from './nlri.ts';

export type EncodeOptions = SessionCodecOptions;

const EMPTY = new Uint8Array(0);

// ---- low-level writers --------------------------------------------------------------------------------------

function w16(b: Uint8Array, p: number, v: number): number {
  b[p] = v >>> 8;
  b[p + 1] = v;
  return p + 2;
}

function w32(b: Uint8Array, p: number, v: number): number {
  b[p] = v >>> 24;
  b[p + 1] = v >>> 16;
  b[p + 2] = v >>> 8;
  b[p + 3] = v;
  return p + 4;
}

function wIP(b: Uint8Array, p: number, ip: IP): number {
  p = w32(b, p, ip.w0);
  if (ip.family === 6) {
    p = w32(b, p, ip.w1);
    p = w32(b, p, ip.w2);
    p = w32(b, p, ip.w3);
  }
  return p;
}

/** A message buffer of `len` octets with the header filled in. */
function newMessage(len: number, type: number): Buffer {
  const b = Buffer.allocUnsafe(len);
  b.fill(0xff, 0, 16);
  w16(b, 16, len);
  b[18] = type;
  return b;
}

function checkLen(len: number, type: number, opts: EncodeOptions, what: string): void {
  const max = maxMessageLen(type, opts.extendedMessage);
  if (len > max) throw new EncodeError(`${what} needs ${len} octets, more than the ${max} allowed`);
}

// ---- simple messages ----------------------------------------------------------------------------------------

export function encodeKeepalive(): Buffer {
  return newMessage(HEADER_LEN, MsgType.KEEPALIVE);
}

/** A NOTIFICATION; data that would not fit is cut (the message itself must go out). */
export function encodeNotification(code: number, subcode: number, data: Uint8Array = EMPTY, opts: EncodeOptions = {}): Buffer {
  const room = maxMessageLen(MsgType.NOTIFICATION, opts.extendedMessage) - 21;
  const d = data.length > room ? data.subarray(0, room) : data;
  const b = newMessage(21 + d.length, MsgType.NOTIFICATION);
  b[19] = code;
  b[20] = subcode;
  b.set(d, 21);
  return b;
}

/** ROUTE-REFRESH (RFC 2918; subtype per RFC 7313, 0 for a plain request). */
export function encodeRouteRefresh(afi: number, safi: number, subtype = 0): Buffer {
  const b = newMessage(23, MsgType.ROUTE_REFRESH);
  w16(b, 19, afi);
  b[21] = subtype;
  b[22] = safi;
  return b;
}

// ---- OPEN ---------------------------------------------------------------------------------------------------

/** One capability as <code, length, value> (RFC 5492 4); also the form for Unsupported Capability data. */
export function encodeCapability(c: Capability): Uint8Array {
  let code: number;
  let value: Uint8Array;
  switch (c.kind) {
    case 'multiprotocol':
      code = CapCode.MULTIPROTOCOL;
      value = new Uint8Array(4);
      w16(value, 0, c.afi);
      value[3] = c.safi;
      break;
    case 'route-refresh':
      code = CapCode.ROUTE_REFRESH;
      value = EMPTY;
      break;
    case 'extended-message':
      code = CapCode.EXTENDED_MESSAGE;
      value = EMPTY;
      break;
    case 'four-octet-as':
      code = CapCode.FOUR_OCTET_AS;
      value = new Uint8Array(4);
      w32(value, 0, c.asn);
      break;
    case 'graceful-restart': {
      code = CapCode.GRACEFUL_RESTART;
      if (!(c.restartTime >= 0 && c.restartTime <= 0xfff)) throw new EncodeError(`restart time ${c.restartTime} outside 0..4095`);
      value = new Uint8Array(2 + 4 * c.families.length);
      w16(value, 0, (c.restarting ? 0x8000 : 0) | (c.notification ? 0x4000 : 0) | c.restartTime);
      c.families.forEach((f, i) => {
        w16(value, 2 + 4 * i, f.afi);
        value[4 + 4 * i] = f.safi;
        value[5 + 4 * i] = f.forwarding ? 0x80 : 0;
      });
      break;
    }
    default:
      code = c.code;
      value = c.value;
  }
  if (value.length > 255) throw new EncodeError(`capability ${code} value of ${value.length} octets`);
  const out = new Uint8Array(2 + value.length);
  out[0] = code;
  out[1] = value.length;
  out.set(value, 2);
  return out;
}

export type OpenInit = Omit<OpenMessage, 'type' | 'version'> & { version?: number };

/** An OPEN with all capabilities in one Capabilities parameter (RFC 9072 extended form when over 255 octets). */
export function encodeOpen(o: OpenInit): Buffer {
  const caps = o.capabilities.map(encodeCapability);
  const capLen = caps.reduce((s, c) => s + c.length, 0);
  let params: Uint8Array;
  let p: number;
  if (capLen === 0) {
    params = EMPTY;
    p = 0;
  } else if (capLen + 2 <= 255) {
    params = new Uint8Array(2 + capLen);
    params[0] = PARAM_CAPABILITIES;
    params[1] = capLen;
    p = 2;
  } else {
    // RFC 9072: Non-Ext OP Len 255 (the length octet below), Non-Ext OP Type 255, a 2-octet length, then
    // parameters as <type, 2-octet length, value>.
    params = new Uint8Array(3 + 3 + capLen);
    params[0] = PARAM_EXTENDED_LENGTH;
    w16(params, 1, 3 + capLen);
    params[3] = PARAM_CAPABILITIES;
    w16(params, 4, capLen);
    p = 6;
  }
  for (const c of caps) {
    params.set(c, p);
    p += c.length;
  }
  const len = 29 + params.length;
  checkLen(len, MsgType.OPEN, {}, 'OPEN');
  const b = newMessage(len, MsgType.OPEN);
  b[19] = o.version ?? BGP_VERSION;
  w16(b, 20, o.myAs);
  w16(b, 22, o.holdTime);
  w32(b, 24, o.bgpId);
  b[28] = params.length > 255 ? PARAM_EXTENDED_LENGTH : params.length;
  b.set(params, 29);
  return b;
}

// ---- path attributes ----------------------------------------------------------------------------------------

interface Piece {
  flags: number;
  type: number;
  len: number;
  write(b: Uint8Array, p: number): void;
}

const pieceLen = (x: Piece) => (x.len > 255 ? 4 : 3) + x.len;

function writePiece(b: Uint8Array, p: number, x: Piece): number {
  if (x.len > 255) {
    b[p] = x.flags | AttrFlag.EXTENDED_LENGTH;
    b[p + 1] = x.type;
    w16(b, p + 2, x.len);
    p += 4;
  } else {
    b[p] = x.flags & ~AttrFlag.EXTENDED_LENGTH;
    b[p + 1] = x.type;
    b[p + 2] = x.len;
    p += 3;
  }
  x.write(b, p);
  return p + x.len;
}

const fixed = (type: number, len: number, write: (b: Uint8Array, p: number) => void): Piece => ({
  flags: ATTR_FLAGS[type], type, len, write,
});

/** Segments as sent: at most 255 ASNs each (longer ones split into consecutive segments of the same type). */
function wireSegments(path: AsPath, keep: (t: number) => boolean): { type: number; asns: readonly number[] }[] {
  const out: { type: number; asns: readonly number[] }[] = [];
  for (const s of path) {
    if (!keep(s.type)) continue;
    for (let i = 0; i < s.asns.length; i += 255) out.push({ type: s.type, asns: s.asns.slice(i, i + 255) });
  }
  return out;
}

function asPathPiece(type: number, segs: { type: number; asns: readonly number[] }[], size: 2 | 4): Piece {
  const len = segs.reduce((s, g) => s + 2 + g.asns.length * size, 0);
  return fixed(type, len, (b, p) => {
    for (const g of segs) {
      b[p++] = g.type;
      b[p++] = g.asns.length;
      for (const a of g.asns) p = size === 4 ? w32(b, p, a) : w16(b, p, a > 0xffff ? AS_TRANS : a);
    }
  });
}

const isConfed = (t: number) => t === SegmentType.AS_CONFED_SEQUENCE || t === SegmentType.AS_CONFED_SET;

/** The non-MP attributes of `a` as pieces in type order. NEXT_HOP is included only when `nextHop`. */
function attrPieces(a: PathAttrs, opts: EncodeOptions, nextHop: boolean): Piece[] {
  const four = opts.fourOctetAs !== false;
  const out: Piece[] = [];
  out.push(fixed(AttrType.ORIGIN, 1, (b, p) => (b[p] = a.origin)));
  out.push(asPathPiece(AttrType.AS_PATH, wireSegments(a.asPath, () => true), four ? 4 : 2));
  if (nextHop) {
    const nh = a.nextHop;
    if (nh === null || nh.family !== 4) throw new EncodeError('IPv4 NLRI need an IPv4 next hop');
    out.push(fixed(AttrType.NEXT_HOP, 4, (b, p) => w32(b, p, nh.w0)));
  }
  if (a.med !== undefined) out.push(fixed(AttrType.MULTI_EXIT_DISC, 4, (b, p) => w32(b, p, a.med!)));
  if (a.localPref !== undefined) out.push(fixed(AttrType.LOCAL_PREF, 4, (b, p) => w32(b, p, a.localPref!)));
  if (a.atomicAggregate) out.push(fixed(AttrType.ATOMIC_AGGREGATE, 0, () => {}));
  const agg = a.aggregator;
  if (agg !== undefined) {
    if (agg.address.family !== 4) throw new EncodeError('AGGREGATOR address must be IPv4');
    if (four) {
      out.push(fixed(AttrType.AGGREGATOR, 8, (b, p) => w32(b, w32(b, p, agg.asn), agg.address.w0)));
    } else {
      out.push(fixed(AttrType.AGGREGATOR, 6, (b, p) => w32(b, w16(b, p, agg.asn > 0xffff ? AS_TRANS : agg.asn), agg.address.w0)));
    }
  }
  if (a.communities.length > 0) {
    out.push(fixed(AttrType.COMMUNITIES, 4 * a.communities.length, (b, p) => {
      for (const c of a.communities) p = w32(b, p, c);
    }));
  }
  if (a.originatorId !== undefined) out.push(fixed(AttrType.ORIGINATOR_ID, 4, (b, p) => w32(b, p, a.originatorId!)));
  if (a.clusterList.length > 0) {
    out.push(fixed(AttrType.CLUSTER_LIST, 4 * a.clusterList.length, (b, p) => {
      for (const c of a.clusterList) p = w32(b, p, c);
    }));
  }
  if (a.extCommunities.length > 0) {
    out.push(fixed(AttrType.EXTENDED_COMMUNITIES, 8 * a.extCommunities.length, (b, p) => {
      for (const [hi, lo] of a.extCommunities) p = w32(b, w32(b, p, hi), lo);
    }));
  }
  if (!four) {
    // RFC 6793 4.2.2: towards a 2-octet AS speaker, 4-octet ASNs become AS_TRANS and the real path and aggregator
    // travel in AS4_PATH (without confederation segments) and AS4_AGGREGATOR.
    const segs = wireSegments(a.asPath, (t) => !isConfed(t));
    if (segs.some((g) => g.asns.some((x) => x > 0xffff))) out.push(asPathPiece(AttrType.AS4_PATH, segs, 4));
    if (agg !== undefined && agg.asn > 0xffff) {
      out.push(fixed(AttrType.AS4_AGGREGATOR, 8, (b, p) => w32(b, w32(b, p, agg.asn), agg.address.w0)));
    }
  }
  if (a.largeCommunities.length > 0) {
    out.push(fixed(AttrType.LARGE_COMMUNITY, 12 * a.largeCommunities.length, (b, p) => {
      for (const [g, l1, l2] of a.largeCommunities) p = w32(b, w32(b, w32(b, p, g), l1), l2);
    }));
  }
  for (const u of a.unknown) {
    if (ATTR_FLAGS[u.type] !== undefined) throw new EncodeError(`raw attribute with the recognised type ${u.type}`);
    if (u.value.length > 0xffff) throw new EncodeError(`attribute ${u.type} value of ${u.value.length} octets`);
    out.push({ flags: u.flags & 0xe0, type: u.type, len: u.value.length, write: (b, p) => b.set(u.value, p) });
  }
  out.sort((x, y) => x.type - y.type);
  return out;
}

function piecesBytes(pieces: Piece[]): Uint8Array {
  const b = new Uint8Array(pieces.reduce((s, x) => s + pieceLen(x), 0));
  let p = 0;
  for (const x of pieces) p = writePiece(b, p, x);
  return b;
}

/** The path attributes of `a` as wire octets (without MP attributes); NEXT_HOP only when `nextHop`. */
export function encodePathAttributes(a: PathAttrs, opts: EncodeOptions = {}, nextHop = true): Uint8Array {
  return piecesBytes(attrPieces(a, opts, nextHop));
}

// ---- prefixes -----------------------------------------------------------------------------------------------

function prefixBytes(r: PrefixReader, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n += prefixWireLen(r.len(i));
  return n;
}

function writePrefixes(b: Uint8Array, p: number, r: PrefixReader, from: number, to: number, family: 4 | 6): number {
  for (let i = from; i < to; i++) {
    if (r.family(i) !== family) throw new EncodeError(`IPv${r.family(i)} prefix where IPv${family} was expected`);
    p = family === 4 ? writePrefix4(b, p, r.word(i, 0), r.len(i)) : writePrefix(b, p, r.word(i, 0), r.word(i, 1), r.word(i, 2), r.word(i, 3), r.len(i));
  }
  return p;
}

function familyOf(afi: number, safi: number): 4 | 6 {
  if (safi === Safi.UNICAST && afi === Afi.IPV4) return 4;
  if (safi === Safi.UNICAST && afi === Afi.IPV6) return 6;
  throw new EncodeError(`AFI ${afi} SAFI ${safi} is not supported`);
}

function mpNextHopLen(nextHop: IP | null, linkLocal: IP | null | undefined): number {
  if (nextHop === null) throw new EncodeError('MP_REACH_NLRI needs a next hop');
  if (nextHop.family === 4) {
    if (linkLocal) throw new EncodeError('a link-local next hop needs an IPv6 global next hop');
    return 4;
  }
  if (linkLocal && linkLocal.family !== 6) throw new EncodeError('the link-local next hop must be IPv6');
  return linkLocal ? 32 : 16;
}

// ---- UPDATE -------------------------------------------------------------------------------------------------

/** Everything one UPDATE can carry; a decoded UpdateMessage is also an UpdateInput. */
export interface UpdateInput {
  /** IPv4 withdrawn routes (classic field). */
  withdrawn?: PrefixSource;
  attrs?: PathAttrs | null;
  /** IPv4 NLRI (classic field); needs attrs with an IPv4 next hop. */
  nlri?: PrefixSource;
  mpReach?: {
    afi: number;
    safi: number;
    nextHop: IP | null;
    nextHopLinkLocal?: IP | null;
    nlri: PrefixSource;
    /** For other AFI/SAFI: the attribute value after AFI/SAFI, sent as is. */
    raw?: Uint8Array;
  } | null;
  mpUnreach?: { afi: number; safi: number; withdrawn: PrefixSource; raw?: Uint8Array } | null;
}

/** One UPDATE with exactly the given content; throws EncodeError when it does not fit one message. */
export function encodeUpdate(u: UpdateInput, opts: EncodeOptions = {}): Buffer {
  const wr = new PrefixReader(u.withdrawn ?? []);
  const nr = new PrefixReader(u.nlri ?? []);
  const pieces: Piece[] = [];
  const mpr = u.mpReach ?? null;
  const mpu = u.mpUnreach ?? null;
  if (mpr) {
    if (mpr.raw) {
      const raw = mpr.raw;
      pieces.push(fixed(AttrType.MP_REACH_NLRI, 3 + raw.length, (b, p) => {
        b[w16(b, p, mpr.afi)] = mpr.safi;
        b.set(raw, p + 3);
      }));
    } else {
      const fam = familyOf(mpr.afi, mpr.safi);
      const r = new PrefixReader(mpr.nlri);
      const nhl = mpNextHopLen(mpr.nextHop, mpr.nextHopLinkLocal);
      pieces.push(fixed(AttrType.MP_REACH_NLRI, 5 + nhl + prefixBytes(r, 0, r.count), (b, p) => {
        p = w16(b, p, mpr.afi);
        b[p++] = mpr.safi;
        b[p++] = nhl;
        p = wIP(b, p, mpr.nextHop!);
        if (nhl === 32) p = wIP(b, p, mpr.nextHopLinkLocal!);
        b[p++] = 0;
        writePrefixes(b, p, r, 0, r.count, fam);
      }));
    }
  }
  if (mpu) {
    if (mpu.raw) {
      const raw = mpu.raw;
      pieces.push(fixed(AttrType.MP_UNREACH_NLRI, 3 + raw.length, (b, p) => {
        b[w16(b, p, mpu.afi)] = mpu.safi;
        b.set(raw, p + 3);
      }));
    } else {
      const fam = familyOf(mpu.afi, mpu.safi);
      const r = new PrefixReader(mpu.withdrawn);
      pieces.push(fixed(AttrType.MP_UNREACH_NLRI, 3 + prefixBytes(r, 0, r.count), (b, p) => {
        p = w16(b, p, mpu.afi);
        b[p++] = mpu.safi;
        writePrefixes(b, p, r, 0, r.count, fam);
      }));
    }
  }
  if (u.attrs) {
    // NEXT_HOP goes with classic NLRI; with MP_REACH alone it is not sent (RFC 4760 3).
    const nh = u.attrs.nextHop;
    pieces.push(...attrPieces(u.attrs, opts, nh !== null && nh.family === 4 && (nr.count > 0 || !mpr)));
  } else if (nr.count > 0) {
    throw new EncodeError('NLRI without path attributes');
  }
  for (const x of pieces) if (x.len > 0xffff) throw new EncodeError(`attribute ${x.type} of ${x.len} octets`);
  const wlen = prefixBytes(wr, 0, wr.count);
  const alen = pieces.reduce((s, x) => s + pieceLen(x), 0);
  const nlen = prefixBytes(nr, 0, nr.count);
  const len = 23 + wlen + alen + nlen;
  checkLen(len, MsgType.UPDATE, opts, 'UPDATE');
  const b = newMessage(len, MsgType.UPDATE);
  let p = w16(b, 19, wlen);
  p = writePrefixes(b, p, wr, 0, wr.count, 4);
  p = w16(b, p, alen);
  for (const x of pieces) p = writePiece(b, p, x);
  writePrefixes(b, p, nr, 0, nr.count, 4);
  return b;
}

/** How many prefixes from `from` fit in `room` octets; at least one or an error. */
function fitCount(r: PrefixReader, idx: readonly number[], from: number, room: number): number {
  let used = 0;
  let i = from;
  while (i < idx.length) {
    const n = prefixWireLen(r.len(idx[i]));
    if (used + n > room) break;
    used += n;
    i++;
  }
  if (i === from) throw new EncodeError(`no room for a prefix: ${room} octets left in the UPDATE`);
  return i - from;
}

function splitFamilies(r: PrefixReader): { v4: number[]; v6: number[] } {
  const v4: number[] = [];
  const v6: number[] = [];
  for (let i = 0; i < r.count; i++) (r.family(i) === 4 ? v4 : v6).push(i);
  return { v4, v6 };
}

function writeIndexed(b: Uint8Array, p: number, r: PrefixReader, idx: readonly number[], from: number, to: number): number {
  for (let k = from; k < to; k++) {
    const i = idx[k];
    p = r.family(i) === 4
      ? writePrefix4(b, p, r.word(i, 0), r.len(i))
      : writePrefix(b, p, r.word(i, 0), r.word(i, 1), r.word(i, 2), r.word(i, 3), r.len(i));
  }
  return p;
}

function indexedBytes(r: PrefixReader, idx: readonly number[], from: number, to: number): number {
  let n = 0;
  for (let k = from; k < to; k++) n += prefixWireLen(r.len(idx[k]));
  return n;
}

/**
 * Announce `prefixes` with `attrs` in as few UPDATEs as fit (4096 octets, or 65535 with extended messages).
 * IPv4 prefixes go in the classic NLRI field with NEXT_HOP = attrs.nextHop (IPv4); IPv6 prefixes in
 * MP_REACH_NLRI with attrs.nextHop (IPv6 global) and attrs.nextHopLinkLocal if set.
 */
export function encodeUpdates(attrs: PathAttrs, prefixes: PrefixSource, opts: EncodeOptions = {}): Buffer[] {
  const r = new PrefixReader(prefixes);
  const { v4, v6 } = splitFamilies(r);
  const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
  const out: Buffer[] = [];
  if (v4.length > 0) {
    const block = encodePathAttributes(attrs, opts, true);
    const room = max - 23 - block.length;
    for (let k = 0; k < v4.length;) {
      const n = fitCount(r, v4, k, room);
      const nlen = indexedBytes(r, v4, k, k + n);
      const b = newMessage(23 + block.length + nlen, MsgType.UPDATE);
      w16(b, 19, 0);
      w16(b, 21, block.length);
      b.set(block, 23);
      writeIndexed(b, 23 + block.length, r, v4, k, k + n);
      out.push(b);
      k += n;
    }
  }
  if (v6.length > 0) {
    const nh = attrs.nextHop;
    if (nh === null || nh.family !== 6) throw new EncodeError('IPv6 NLRI need an IPv6 next hop');
    const ll = attrs.nextHopLinkLocal;
    const nhl = mpNextHopLen(nh, ll);
    const block = encodePathAttributes(attrs, opts, false);
    // Room assumes the 4-octet attribute header; a short MP_REACH then uses 3 and the message is one octet less.
    const room = max - 23 - block.length - 4 - 5 - nhl;
    for (let k = 0; k < v6.length;) {
      const n = fitCount(r, v6, k, room);
      const vlen = 5 + nhl + indexedBytes(r, v6, k, k + n);
      const from = k;
      const mp: Piece = fixed(AttrType.MP_REACH_NLRI, vlen, (b, p) => {
        p = w16(b, p, Afi.IPV6);
        b[p++] = Safi.UNICAST;
        b[p++] = nhl;
        p = wIP(b, p, nh);
        if (ll) p = wIP(b, p, ll);
        b[p++] = 0;
        writeIndexed(b, p, r, v6, from, from + n);
      });
      const alen = pieceLen(mp) + block.length;
      const b = newMessage(23 + alen, MsgType.UPDATE);
      w16(b, 19, 0);
      w16(b, 21, alen);
      const p = writePiece(b, 23, mp);
      b.set(block, p);
      out.push(b);
      k += n;
    }
  }
  return out;
}

/** Withdraw `prefixes` in as few UPDATEs as fit: IPv4 in the withdrawn routes field, IPv6 in MP_UNREACH_NLRI. */
export function encodeWithdrawals(prefixes: PrefixSource, opts: EncodeOptions = {}): Buffer[] {
  const r = new PrefixReader(prefixes);
  const { v4, v6 } = splitFamilies(r);
  const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
  const out: Buffer[] = [];
  for (let k = 0; k < v4.length;) {
    const n = fitCount(r, v4, k, max - 23);
    const wlen = indexedBytes(r, v4, k, k + n);
    const b = newMessage(23 + wlen, MsgType.UPDATE);
    w16(b, 19, wlen);
    w16(b, writeIndexed(b, 21, r, v4, k, k + n), 0);
    out.push(b);
    k += n;
  }
  for (let k = 0; k < v6.length;) {
    const n = fitCount(r, v6, k, max - 23 - 4 - 3);
    const from = k;
    const mp: Piece = fixed(AttrType.MP_UNREACH_NLRI, 3 + indexedBytes(r, v6, k, k + n), (b, p) => {
      p = w16(b, p, Afi.IPV6);
      b[p++] = Safi.UNICAST;
      writeIndexed(b, p, r, v6, from, from + n);
    });
    const b = newMessage(23 + pieceLen(mp), MsgType.UPDATE);
    w16(b, 19, 0);
    w16(b, 21, pieceLen(mp));
    writePiece(b, 23, mp);
    out.push(b);
    k += n;
  }
  return out;
}

/** End-of-RIB (RFC 4724 2): an empty UPDATE for IPv4 unicast, else an UPDATE with an empty MP_UNREACH_NLRI. */
export function encodeEndOfRib(afi: number = Afi.IPV4, safi: number = Safi.UNICAST): Buffer {
  if (afi === Afi.IPV4 && safi === Safi.UNICAST) {
    const b = newMessage(23, MsgType.UPDATE);
    b.fill(0, 19, 23);
    return b;
  }
  const b = newMessage(29, MsgType.UPDATE);
  w16(b, 19, 0);
  w16(b, 21, 6);
  b[23] = ATTR_FLAGS[AttrType.MP_UNREACH_NLRI];
  b[24] = AttrType.MP_UNREACH_NLRI;
  b[25] = 3;
  w16(b, 26, afi);
  b[28] = safi;
  return b;
}

// ---- any message --------------------------------------------------------------------------------------------

/** Encode any message model (decoded messages re-encode to the same octets when they came from this encoder). */
export function encodeMessage(m: Message, opts: EncodeOptions = {}): Buffer {
  switch (m.type) {
    case 'open': return encodeOpen(m);
    case 'update': return encodeUpdate(m, opts);
    case 'notification': return encodeNotification(m.code, m.subcode, m.data, opts);
    case 'keepalive': return encodeKeepalive();
    case 'route-refresh': return encodeRouteRefresh(m.afi, m.safi, m.subtype);
  }
}
