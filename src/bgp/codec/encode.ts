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
import { mpNextHopLen, newMessage, w16, w32, wIP } from './wire.ts';

export type EncodeOptions = SessionCodecOptions;

const EMPTY = new Uint8Array(0);

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

/**
 * Writes path attributes, or only measures them when `b` is null: the same code runs twice (count, then write)
 * so the two can never disagree. No closures: this runs once per attribute set on the export path.
 */
class AttrWriter {
  b: Uint8Array | null = null;
  p = 0;

  /** An attribute header for a value of `len` octets; Extended Length exactly when len > 255. */
  header(type: number, flags: number, len: number): void {
    const b = this.b;
    if (len > 255) {
      if (b) {
        b[this.p] = (flags & 0xe0) | AttrFlag.EXTENDED_LENGTH;
        b[this.p + 1] = type;
        w16(b, this.p + 2, len);
      }
      this.p += 4;
    } else {
      if (b) {
        b[this.p] = flags & 0xe0;
        b[this.p + 1] = type;
        b[this.p + 2] = len;
      }
      this.p += 3;
    }
  }
  u8(v: number): void {
    if (this.b) this.b[this.p] = v;
    this.p += 1;
  }
  u16(v: number): void {
    if (this.b) w16(this.b, this.p, v);
    this.p += 2;
  }
  u32(v: number): void {
    if (this.b) w32(this.b, this.p, v);
    this.p += 4;
  }
  bytes(v: Uint8Array): void {
    if (this.b) this.b.set(v, this.p);
    this.p += v.length;
  }
}

const isConfed = (t: number) => t === SegmentType.AS_CONFED_SEQUENCE || t === SegmentType.AS_CONFED_SET;

/** Octets of a path as sent: segments of at most 255 ASNs (longer ones split), optionally without confed ones. */
function asPathLen(path: AsPath, size: 2 | 4, confed: boolean): number {
  let n = 0;
  for (const s of path) {
    if (!confed && isConfed(s.type)) continue;
    n += 2 * Math.ceil(s.asns.length / 255) + size * s.asns.length;
  }
  return n;
}

function writeAsPath(w: AttrWriter, path: AsPath, size: 2 | 4, confed: boolean): void {
  for (const s of path) {
    if (!confed && isConfed(s.type)) continue;
    for (let i = 0; i < s.asns.length; i += 255) {
      const end = Math.min(s.asns.length, i + 255);
      w.u8(s.type);
      w.u8(end - i);
      for (let k = i; k < end; k++) {
        const a = s.asns[k];
        if (size === 4) w.u32(a);
        else w.u16(a > 0xffff ? AS_TRANS : a);
      }
    }
  }
}

// RFC 6793 4.2.2: AS4_PATH goes to a 2-octet speaker only when the path (confed segments aside) has an ASN that
// does not fit 2 octets.
function needsAs4Path(path: AsPath): boolean {
  for (const s of path) {
    if (isConfed(s.type)) continue;
    for (const a of s.asns) if (a > 0xffff) return true;
  }
  return false;
}

function emitUnknownBelow(w: AttrWriter, a: PathAttrs, next: { i: number }, type: number): void {
  const u = a.unknown;
  while (next.i < u.length && u[next.i].type < type) {
    const x = u[next.i++];
    w.header(x.type, x.flags, x.value.length);
    w.bytes(x.value);
  }
}

/** Every non-MP attribute of `a`, ascending by type code (RFC 4271 5); NEXT_HOP only when `nextHop`. */
function emitAttrs(w: AttrWriter, a: PathAttrs, four: boolean, nextHop: boolean): void {
  const next = { i: 0 };
  const size = four ? 4 : 2;
  w.header(AttrType.ORIGIN, ATTR_FLAGS[AttrType.ORIGIN], 1);
  w.u8(a.origin);
  w.header(AttrType.AS_PATH, ATTR_FLAGS[AttrType.AS_PATH], asPathLen(a.asPath, size, true));
  writeAsPath(w, a.asPath, size, true);
  if (nextHop) {
    w.header(AttrType.NEXT_HOP, ATTR_FLAGS[AttrType.NEXT_HOP], 4);
    w.u32(a.nextHop!.w0);
  }
  if (a.med !== undefined) {
    w.header(AttrType.MULTI_EXIT_DISC, ATTR_FLAGS[AttrType.MULTI_EXIT_DISC], 4);
    w.u32(a.med);
  }
  if (a.localPref !== undefined) {
    w.header(AttrType.LOCAL_PREF, ATTR_FLAGS[AttrType.LOCAL_PREF], 4);
    w.u32(a.localPref);
  }
  if (a.atomicAggregate) w.header(AttrType.ATOMIC_AGGREGATE, ATTR_FLAGS[AttrType.ATOMIC_AGGREGATE], 0);
  const agg = a.aggregator;
  if (agg !== undefined) {
    w.header(AttrType.AGGREGATOR, ATTR_FLAGS[AttrType.AGGREGATOR], four ? 8 : 6);
    if (four) w.u32(agg.asn);
    else w.u16(agg.asn > 0xffff ? AS_TRANS : agg.asn);
    w.u32(agg.address.w0);
  }
  if (a.communities.length > 0) {
    w.header(AttrType.COMMUNITIES, ATTR_FLAGS[AttrType.COMMUNITIES], 4 * a.communities.length);
    for (const c of a.communities) w.u32(c);
  }
  if (a.originatorId !== undefined) {
    w.header(AttrType.ORIGINATOR_ID, ATTR_FLAGS[AttrType.ORIGINATOR_ID], 4);
    w.u32(a.originatorId);
  }
  if (a.clusterList.length > 0) {
    w.header(AttrType.CLUSTER_LIST, ATTR_FLAGS[AttrType.CLUSTER_LIST], 4 * a.clusterList.length);
    for (const c of a.clusterList) w.u32(c);
  }
  emitUnknownBelow(w, a, next, AttrType.EXTENDED_COMMUNITIES);
  if (a.extCommunities.length > 0) {
    w.header(AttrType.EXTENDED_COMMUNITIES, ATTR_FLAGS[AttrType.EXTENDED_COMMUNITIES], 8 * a.extCommunities.length);
    for (const x of a.extCommunities) {
      w.u32(x[0]);
      w.u32(x[1]);
    }
  }
  if (!four) {
    // RFC 6793 4.2.2: towards a 2-octet AS speaker, 4-octet ASNs became AS_TRANS above; the real path and
    // aggregator travel in AS4_PATH (without confederation segments) and AS4_AGGREGATOR.
    if (needsAs4Path(a.asPath)) {
      w.header(AttrType.AS4_PATH, ATTR_FLAGS[AttrType.AS4_PATH], asPathLen(a.asPath, 4, false));
      writeAsPath(w, a.asPath, 4, false);
    }
    if (agg !== undefined && agg.asn > 0xffff) {
      w.header(AttrType.AS4_AGGREGATOR, ATTR_FLAGS[AttrType.AS4_AGGREGATOR], 8);
      w.u32(agg.asn);
      w.u32(agg.address.w0);
    }
  }
  emitUnknownBelow(w, a, next, AttrType.LARGE_COMMUNITY);
  if (a.largeCommunities.length > 0) {
    w.header(AttrType.LARGE_COMMUNITY, ATTR_FLAGS[AttrType.LARGE_COMMUNITY], 12 * a.largeCommunities.length);
    for (const x of a.largeCommunities) {
      w.u32(x[0]);
      w.u32(x[1]);
      w.u32(x[2]);
    }
  }
  emitUnknownBelow(w, a, next, 256);
}

function checkAttrs(a: PathAttrs, nextHop: boolean): void {
  if (nextHop && (a.nextHop === null || a.nextHop.family !== 4)) throw new EncodeError('IPv4 NLRI need an IPv4 next hop');
  if (a.aggregator !== undefined && a.aggregator.address.family !== 4) throw new EncodeError('AGGREGATOR address must be IPv4');
  for (const u of a.unknown) {
    if (ATTR_FLAGS[u.type] !== undefined) throw new EncodeError(`raw attribute with the recognised type ${u.type}`);
    if (u.value.length > 0xffff) throw new EncodeError(`attribute ${u.type} value of ${u.value.length} octets`);
  }
}

/** The path attributes of `a` as wire octets (without MP attributes); NEXT_HOP only when `nextHop`. */
export function encodePathAttributes(a: PathAttrs, opts: EncodeOptions = {}, nextHop = true): Uint8Array {
  checkAttrs(a, nextHop);
  const four = opts.fourOctetAs !== false;
  const w = new AttrWriter();
  emitAttrs(w, a, four, nextHop);
  for (const s of a.asPath) if (s.asns.length === 0) throw new EncodeError('empty AS_PATH segment');
  if (w.p > 0xffff) throw new EncodeError(`path attributes of ${w.p} octets`);
  const b = new Uint8Array(w.p);
  w.b = b;
  w.p = 0;
  emitAttrs(w, a, four, nextHop);
  return b;
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

/** An MP_REACH/MP_UNREACH attribute for a family we do not parse: AFI, SAFI, then the bytes as received. */
function rawMp(type: number, afi: number, safi: number, raw: Uint8Array): Piece {
  return fixed(type, 3 + raw.length, (b, p) => {
    b[w16(b, p, afi)] = safi;
    b.set(raw, p + 3);
  });
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
      pieces.push(rawMp(AttrType.MP_REACH_NLRI, mpr.afi, mpr.safi, mpr.raw));
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
      pieces.push(rawMp(AttrType.MP_UNREACH_NLRI, mpu.afi, mpu.safi, mpu.raw));
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
  let block: Uint8Array = EMPTY;
  if (u.attrs) {
    // NEXT_HOP goes with classic NLRI; with MP_REACH alone it is not sent (RFC 4760 3).
    const nh = u.attrs.nextHop;
    block = encodePathAttributes(u.attrs, opts, nh !== null && nh.family === 4 && (nr.count > 0 || !mpr));
  } else if (nr.count > 0) {
    throw new EncodeError('NLRI without path attributes');
  }
  for (const x of pieces) if (x.len > 0xffff) throw new EncodeError(`attribute ${x.type} of ${x.len} octets`);
  const wlen = prefixBytes(wr, 0, wr.count);
  const alen = pieces.reduce((s, x) => s + pieceLen(x), 0) + block.length;
  const nlen = prefixBytes(nr, 0, nr.count);
  const len = 23 + wlen + alen + nlen;
  checkLen(len, MsgType.UPDATE, opts, 'UPDATE');
  const b = newMessage(len, MsgType.UPDATE);
  let p = w16(b, 19, wlen);
  p = writePrefixes(b, p, wr, 0, wr.count, 4);
  p = w16(b, p, alen);
  for (const x of pieces) p = writePiece(b, p, x);
  b.set(block, p);
  writePrefixes(b, p + block.length, nr, 0, nr.count, 4);
  return b;
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
