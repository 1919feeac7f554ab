// BGP-4 message decoder. Pure: bytes in, a DecodeResult out; it never throws for any input.
//
// Error handling follows RFC 4271 section 6 as revised by RFC 7606 (and RFC 6793 6 for AS4_PATH/AS4_AGGREGATOR,
// RFC 8092 6 for LARGE_COMMUNITY, RFC 7607 for AS 0). Every problem is classified as one of
//   - session reset: the result is a NOTIFICATION to send (code, subcode, data);
//   - treat-as-withdraw: every prefix the UPDATE carries is to be withdrawn (7606 2);
//   - attribute discard: the attribute is dropped and the UPDATE is otherwise used (7606 2).
// When several apply the strongest wins (7606 3 h). Problems are found by parsing; inside the decoder they unwind
// as CodecError and are converted at the entry point, as is any other exception (counted as `internal`).
import { type Family, IP, type Prefix } from '../../net/ip.ts';
import { adoptAttrs, normaliseAsPath, SegmentType, type AsPathFacts, withAttrs, type AsPath, type PathAttrs, type AsPathSegment, type AttrsInit, type ExtCommunity, type LargeCommunity, type Origin, type RawAttr } from '../../rib/attrs.ts';
import { PrefixList } from '../../rib/prefixlist.ts';
import {
  ErrorCode, HeaderSubcode, OpenSubcode, RouteRefreshSubcode, UpdateSubcode, CodecError, notificationError,
} from './errors.ts';
import {
  AS_TRANS, Afi, AttrFlag, AttrType, ATTR_FLAGS, ATTR_NAMES, BGP_VERSION, CapCode, HEADER_LEN, MIN_LEN, MsgType, PARAM_CAPABILITIES,
  PARAM_EXTENDED_LENGTH, Safi, maxMessageLen, type Capability, type Message, type MpReach, type MpUnreach,
  type OpenMessage, type SessionCodecOptions, type UpdateMessage,
} from './messages.ts';
import { AsPathCache, hashBytes } from './aspaths.ts';
import { readPrefixes4, readPrefixes6 } from './nlri.ts';

// ---- options and results ------------------------------------------------------------------------------------

export interface DecodeOptions extends SessionCodecOptions {
  /**
   * The peer is external (eBGP, not a confederation member): LOCAL_PREF, ORIGINATOR_ID and CLUSTER_LIST are then
   * discarded (RFC 7606 7.5, 7.9, 7.10). Default false.
   */
  external?: boolean;
  /**
   * Reusable prefix arrays. With a scratch, the PrefixLists of a decoded UPDATE are overwritten by the next
   * decode that uses the same scratch: consume them first (the ingest hot path). Without one, each decode
   * allocates its own.
   */
  scratch?: DecodeScratch;
}

/** One attribute problem in an UPDATE and what RFC 7606 says to do about it. */
export interface AttrProblem {
  /** Attribute type code (0 when the problem is in the attribute list itself). */
  readonly attrType: number;
  readonly action: 'discard' | 'withdraw';
  readonly reason: string;
  /** The NOTIFICATION RFC 4271 would have sent for it, for logs (absent when it is not an error, e.g. eBGP LOCAL_PREF). */
  readonly code?: number;
  readonly subcode?: number;
  readonly data?: Uint8Array;
}

export type DecodeResult =
  | { readonly action: 'ok'; readonly message: Message }
  /** The UPDATE is to be used without the discarded attributes (RFC 7606 2 "attribute discard"). */
  | { readonly action: 'attribute-discard'; readonly message: UpdateMessage; readonly problems: readonly AttrProblem[] }
  /**
   * Every prefix in the message is to be withdrawn (RFC 7606 2 "treat-as-withdraw"): message.withdrawn,
   * message.nlri, message.mpReach.nlri and message.mpUnreach.withdrawn. message.attrs is null.
   */
  | { readonly action: 'treat-as-withdraw'; readonly message: UpdateMessage; readonly problems: readonly AttrProblem[] }
  /**
   * Send this NOTIFICATION and close the session. `msgType` is the offending message's type when the header was
   * readable: when it is NOTIFICATION (3) nothing may be sent back (RFC 4271 6.4), just close. `internal` marks
   * an unexpected exception inside the decoder (a bug), converted to an Unspecific error.
   */
  | {
      readonly action: 'notification';
      readonly code: number;
      readonly subcode: number;
      readonly data: Uint8Array;
      readonly reason: string;
      readonly msgType: number | null;
      readonly internal?: true;
    };

export type NotificationResult = Extract<DecodeResult, { action: 'notification' }>;

const EMPTY = new Uint8Array(0);

// Slots of reusable prefix lists.
const W4 = 0, N4 = 1, R4 = 2, R6 = 3, U4 = 4, U6 = 5;

/** Reusable buffers for decoding many UPDATEs with few allocations. */
export class DecodeScratch {
  private readonly lists: (PrefixList | undefined)[] = [];
  /** Attribute types seen, stamped with `serial` (the current UPDATE's number). */
  readonly seen = new Uint32Array(256);
  serial = 0;
  /** Normalised AS paths of a 4-octet session by their wire bytes (see AsPathCache). */
  readonly asPaths = new AsPathCache();
  /** The last next hops decoded: consecutive UPDATEs from one peer nearly always share them. */
  nh4: IP | null = null;
  nh6: IP | null = null;
  /**
   * The path attributes of the last clean IPv4 UPDATE (classic NLRI, no MP attributes, no problems), its record
   * and the options it was decoded under. Many senders (BIRD among them) send one prefix per UPDATE with the same
   * attributes; an UPDATE whose attribute bytes and options are the same decodes to the same record, so it is
   * reused without decoding the attributes again.
   */
  lastBytes: Uint8Array = new Uint8Array(0);
  lastStart = 0;
  /**
   * The input buffers are never written after decoding (a session's socket chunks): the remembered attribute bytes
   * are then a reference into the last UPDATE's buffer instead of a copy (100 ms of a full table from BIRD, whose
   * one-prefix UPDATEs in hash order rarely repeat the last attributes). Off by default: a caller may reuse a buffer.
   */
  borrowInput = false;
  /** The decoding state, reused UPDATE after UPDATE (see UpdateParse). */
  parse: UpdateParse | null = null;
  /** A lone COMMUNITIES value: records keep it as a number, never this array (AttrRecord.comm). */
  readonly oneCommunity: number[] = [0];
  lastLen = -1;
  lastExternal = false;
  lastFourOctet = true;
  lastAttrs: PathAttrs | null = null;
  lastWireAttrs = 0;

  /** The remembered attributes when buf[s..e) (under `opts`) are the same bytes, else null. */
  sameAttrs(buf: Uint8Array, s: number, e: number, opts: DecodeOptions): PathAttrs | null {
    const len = e - s;
    if (len !== this.lastLen || this.lastAttrs === null || (opts.external === true) !== this.lastExternal ||
      (opts.fourOctetAs !== false) !== this.lastFourOctet) return null;
    const b = this.lastBytes;
    const o = this.lastStart;
    for (let i = 0; i < len; i++) if (b[o + i] !== buf[s + i]) return null;
    return this.lastAttrs;
  }

  remember(buf: Uint8Array, s: number, e: number, opts: DecodeOptions, attrs: PathAttrs, wireAttrs: number): void {
    const len = e - s;
    if (this.borrowInput) {
      this.lastBytes = buf;
      this.lastStart = s;
    } else {
      if (this.lastBytes.length < len || this.lastStart !== 0) this.lastBytes = new Uint8Array(Math.max(len, 256));
      this.lastStart = 0;
      // A byte loop, not set(subarray): a view object per UPDATE was 7% of a full table's allocation.
      const b = this.lastBytes;
      for (let i = 0; i < len; i++) b[i] = buf[s + i];
    }
    this.lastLen = len;
    this.lastExternal = opts.external === true;
    this.lastFourOctet = opts.fourOctetAs !== false;
    this.lastAttrs = attrs;
    this.lastWireAttrs = wireAttrs;
  }

  /** An empty list of `family` with room for `n` prefixes. */
  list(slot: number, family: Family, n: number): PrefixList {
    let l = this.lists[slot];
    if (l === undefined || l.lens.length < n) {
      l = new PrefixList(family, Math.max(n, 1024));
      this.lists[slot] = l;
    }
    l.count = 0;
    return l;
  }
}

function newList(opts: DecodeOptions, slot: number, family: Family, n: number): PrefixList {
  return opts.scratch ? opts.scratch.list(slot, family, n) : new PrefixList(family, Math.max(1, n));
}

// ---- small readers ------------------------------------------------------------------------------------------

const u16 = (b: Uint8Array, p: number): number => (b[p] << 8) | b[p + 1];
const u32 = (b: Uint8Array, p: number): number => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
const copy = (b: Uint8Array, s: number, e: number): Uint8Array => new Uint8Array(b.subarray(s, e));
const be16 = (n: number): Uint8Array => new Uint8Array([(n >>> 8) & 255, n & 255]);

function ipv6At(b: Uint8Array, p: number): IP {
  return new IP(6, u32(b, p), u32(b, p + 4), u32(b, p + 8), u32(b, p + 12));
}

/** The IPv4 address at b[p], sharing the scratch's last one when equal (IP objects are immutable). */
function ipv4Shared(b: Uint8Array, p: number, scratch: DecodeScratch | undefined): IP {
  const w = u32(b, p);
  if (scratch === undefined) return new IP(4, w);
  const last = scratch.nh4;
  if (last !== null && last.w0 === w) return last;
  return (scratch.nh4 = new IP(4, w));
}

function ipv6Shared(b: Uint8Array, p: number, scratch: DecodeScratch | undefined): IP {
  if (scratch === undefined) return ipv6At(b, p);
  const last = scratch.nh6;
  if (last !== null && last.w0 === u32(b, p) && last.w1 === u32(b, p + 4) && last.w2 === u32(b, p + 8) && last.w3 === u32(b, p + 12)) {
    return last;
  }
  return (scratch.nh6 = ipv6At(b, p));
}

// ---- header -------------------------------------------------------------------------------------------------

/**
 * Check the 19-octet header at buf[off] (RFC 4271 6.1). Returns null when it is acceptable, else the error. The
 * framer calls this as soon as a header has arrived, before the body.
 */
export function checkHeader(buf: Uint8Array, off: number, opts: SessionCodecOptions = {}): CodecError | null {
  for (let i = 0; i < 16; i++) {
    if (buf[off + i] !== 0xff) {
      return notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.CONNECTION_NOT_SYNCHRONIZED, 'marker is not all ones');
    }
  }
  const len = u16(buf, off + 16);
  const type = buf[off + 18];
  if (len < HEADER_LEN || len > maxMessageLen(type, opts.extendedMessage)) {
    return badLength(len, `length ${len} outside ${HEADER_LEN}..${maxMessageLen(type, opts.extendedMessage)}`);
  }
  if (type < MsgType.OPEN || type > MsgType.ROUTE_REFRESH) {
    return notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_TYPE, `unknown message type ${type}`, new Uint8Array([type]));
  }
  if (type === MsgType.KEEPALIVE && len !== HEADER_LEN) return badLength(len, `KEEPALIVE of length ${len}`);
  // ROUTE-REFRESH lengths are checked on the whole message (RFC 7313 5 wants it in the NOTIFICATION data).
  if (type !== MsgType.ROUTE_REFRESH && len < MIN_LEN[type]) return badLength(len, `type ${type} message of length ${len} < ${MIN_LEN[type]}`);
  return null;
}

function badLength(len: number, why: string): CodecError {
  return notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_LENGTH, why, be16(len));
}

// ---- entry point --------------------------------------------------------------------------------------------

/** Decode one whole message (header included; buf.length must equal its length field). Never throws. */
export function decodeMessage(buf: Uint8Array, opts: DecodeOptions = {}): DecodeResult {
  return decodeMessageAt(buf, 0, buf.length, opts);
}

/**
 * decodeMessage for the message at buf[off..off+n) (n must equal its length field), without a view of it: the
 * session decodes in place in the socket's chunk (Framer.pushAt), a Uint8Array less per UPDATE. Never throws.
 */
export function decodeMessageAt(buf: Uint8Array, off: number, n: number, opts: DecodeOptions = {}): DecodeResult {
  const msgType = n >= HEADER_LEN ? buf[off + 18] : null;
  try {
    if (n < HEADER_LEN) {
      throw notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_LENGTH, `only ${n} octets, less than a header`, be16(n));
    }
    const h = checkHeader(buf, off, opts);
    if (h) throw h;
    const len = u16(buf, off + 16);
    if (len !== n) {
      throw notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_LENGTH, `length field ${len} but ${n} octets`, be16(len));
    }
    switch (buf[off + 18]) {
      // UPDATEs are read in place (all their offsets are absolute); the rare others from a view of their own.
      case MsgType.UPDATE: return decodeUpdate(buf, off + HEADER_LEN, off + len, opts);
      case MsgType.OPEN: return { action: 'ok', message: decodeOpen(viewOf(buf, off, len), HEADER_LEN, len) };
      case MsgType.NOTIFICATION:
        return { action: 'ok', message: { type: 'notification', code: buf[off + 19], subcode: buf[off + 20], data: copy(buf, off + 21, off + len) } };
      case MsgType.KEEPALIVE: return { action: 'ok', message: { type: 'keepalive' } };
      default: return { action: 'ok', message: decodeRouteRefresh(viewOf(buf, off, len), len) };
    }
  } catch (e) {
    if (e instanceof CodecError) {
      return { action: 'notification', code: e.code, subcode: e.subcode, data: e.data, reason: e.reason, msgType };
    }
    const code = msgType === MsgType.OPEN ? ErrorCode.OPEN : msgType === MsgType.UPDATE ? ErrorCode.UPDATE : ErrorCode.MESSAGE_HEADER;
    return { action: 'notification', code, subcode: 0, data: EMPTY, reason: `internal error: ${String((e as Error)?.message ?? e)}`, msgType, internal: true };
  }
}

const viewOf = (b: Uint8Array, off: number, n: number): Uint8Array =>
  (off === 0 && n === b.length ? b : new Uint8Array(b.buffer, b.byteOffset + off, n));

// ---- ROUTE-REFRESH ------------------------------------------------------------------------------------------

function decodeRouteRefresh(buf: Uint8Array, len: number): Message {
  if (len !== 23) {
    // RFC 7313 5: the data is the complete ROUTE-REFRESH message.
    throw notificationError(ErrorCode.ROUTE_REFRESH, RouteRefreshSubcode.INVALID_MESSAGE_LENGTH, `ROUTE-REFRESH of length ${len}`, copy(buf, 0, len));
  }
  return { type: 'route-refresh', afi: u16(buf, 19), subtype: buf[21], safi: buf[22] };
}

// ---- OPEN ---------------------------------------------------------------------------------------------------

const openError = (sub: number, reason: string, data: Uint8Array = EMPTY) => notificationError(ErrorCode.OPEN, sub, reason, data);
const malformedOpen = (reason: string) => openError(OpenSubcode.UNSPECIFIC, reason);

function decodeOpen(buf: Uint8Array, p: number, end: number): OpenMessage {
  const version = buf[p];
  if (version !== BGP_VERSION) {
    // RFC 4271 6.2: data is the version we support (the largest below theirs, or our smallest), 2 octets.
    throw openError(OpenSubcode.UNSUPPORTED_VERSION, `version ${version}`, be16(BGP_VERSION));
  }
  const myAs = u16(buf, p + 1);
  const holdTime = u16(buf, p + 3);
  const bgpId = u32(buf, p + 5);
  let q = p + 10;
  let optLen = buf[p + 9];
  let extended = false;
  if (optLen === PARAM_EXTENDED_LENGTH && q < end && buf[q] === PARAM_EXTENDED_LENGTH) {
    // RFC 9072: non-extended length 255 followed by a type of 255, then a 2-octet length; parameters then use
    // 2-octet lengths too.
    if (q + 3 > end) throw malformedOpen('extended optional parameters length truncated');
    optLen = u16(buf, q + 1);
    q += 3;
    extended = true;
  }
  // Parameter problems are reported after the fixed-field checks, in RFC 4271 6.2's order.
  let paramError: CodecError | null = null;
  const caps: Capability[] = [];
  if (q + optLen !== end) paramError = malformedOpen(`optional parameters length ${optLen} does not match the message`);
  else {
    const hl = extended ? 3 : 2;
    while (q < end && !paramError) {
      if (q + hl > end) {
        paramError = malformedOpen('optional parameter header truncated');
        break;
      }
      const ptype = buf[q];
      const plen = extended ? u16(buf, q + 1) : buf[q + 1];
      const vs = q + hl;
      const ve = vs + plen;
      if (ve > end) {
        paramError = malformedOpen(`optional parameter ${ptype} overruns the message`);
        break;
      }
      if (ptype !== PARAM_CAPABILITIES) {
        paramError = openError(OpenSubcode.UNSUPPORTED_OPTIONAL_PARAMETER, `optional parameter type ${ptype}`);
        break;
      }
      paramError = decodeCapabilities(buf, vs, ve, caps);
      q = ve;
    }
  }
  // RFC 7607: AS 0 in an OPEN is Bad Peer AS.
  if (myAs === 0) throw openError(OpenSubcode.BAD_PEER_AS, 'My Autonomous System is 0');
  for (const c of caps) if (c.kind === 'four-octet-as' && c.asn === 0) throw openError(OpenSubcode.BAD_PEER_AS, '4-octet AS capability carries AS 0');
  // RFC 4271 6.2: hold times of one or two seconds MUST be rejected.
  if (holdTime === 1 || holdTime === 2) throw openError(OpenSubcode.UNACCEPTABLE_HOLD_TIME, `hold time ${holdTime}`);
  // RFC 6286 2.1: the BGP Identifier is a non-zero 32-bit value.
  if (bgpId === 0) throw openError(OpenSubcode.BAD_BGP_ID, 'BGP Identifier 0');
  if (paramError) throw paramError;
  return { type: 'open', version, myAs, holdTime, bgpId, capabilities: caps };
}

function badCapLength(code: number, len: number): CodecError {
  return malformedOpen(`capability ${code} has a bad length ${len}`);
}

function decodeCapabilities(buf: Uint8Array, p: number, end: number, out: Capability[]): CodecError | null {
  while (p < end) {
    if (p + 2 > end) return malformedOpen('capability header truncated');
    const code = buf[p];
    const len = buf[p + 1];
    const v = p + 2;
    if (v + len > end) return malformedOpen(`capability ${code} overruns its parameter`);
    switch (code) {
      case CapCode.MULTIPROTOCOL:
        if (len !== 4) return badCapLength(code, len);
        out.push({ kind: 'multiprotocol', afi: u16(buf, v), safi: buf[v + 3] });
        break;
      case CapCode.ROUTE_REFRESH:
        if (len !== 0) return badCapLength(code, len);
        out.push({ kind: 'route-refresh' });
        break;
      case CapCode.EXTENDED_MESSAGE:
        if (len !== 0) return badCapLength(code, len);
        out.push({ kind: 'extended-message' });
        break;
      case CapCode.FOUR_OCTET_AS:
        if (len !== 4) return badCapLength(code, len);
        out.push({ kind: 'four-octet-as', asn: u32(buf, v) });
        break;
      case CapCode.GRACEFUL_RESTART: {
        if (len < 2 || (len - 2) % 4 !== 0) return badCapLength(code, len);
        const families = [];
        for (let f = v + 2; f < v + len; f += 4) {
          families.push({ afi: u16(buf, f), safi: buf[f + 2], forwarding: (buf[f + 3] & 0x80) !== 0 });
        }
        out.push({
          kind: 'graceful-restart',
          restarting: (buf[v] & 0x80) !== 0,
          notification: (buf[v] & 0x40) !== 0,
          restartTime: u16(buf, v) & 0x0fff,
          families,
        });
        break;
      }
      default:
        out.push({ kind: 'unknown', code, value: copy(buf, v, v + len) });
    }
    p = v + len;
  }
  return null;
}

// ---- UPDATE -------------------------------------------------------------------------------------------------

const O = AttrFlag.OPTIONAL;
const T = AttrFlag.TRANSITIVE;

// Expected Optional/Transitive bits per recognised attribute, -1 for the others.
const EXPECTED_FLAGS = new Int16Array(256).fill(-1);
for (const [type, f] of Object.entries(ATTR_FLAGS)) EXPECTED_FLAGS[Number(type)] = f;

// Attributes whose errors are handled by attribute discard rather than treat-as-withdraw (RFC 7606 3 f, 7.6, 7.7 for
// ATOMIC_AGGREGATE and AGGREGATOR, RFC 6793 6 for AS4_PATH and AS4_AGGREGATOR).
const DISCARD_ON_ERROR = new Uint8Array(256); // by type code: a table, read for every attribute
for (const t of [AttrType.ATOMIC_AGGREGATE, AttrType.AGGREGATOR, AttrType.AS4_PATH, AttrType.AS4_AGGREGATOR]) DISCARD_ON_ERROR[t] = 1;

const updateError = (sub: number, reason: string, data: Uint8Array = EMPTY) => notificationError(ErrorCode.UPDATE, sub, reason, data);

const isConfed = (t: number) => t === SegmentType.AS_CONFED_SEQUENCE || t === SegmentType.AS_CONFED_SET;

/**
 * Parse AS_PATH / AS4_PATH segments (RFC 4271 4.3, RFC 6793). Returns an error reason for a malformed path as
 * defined by RFC 7606 7.2 (unknown segment type, overrun, lone trailing octet, empty segment) or AS 0 (RFC 7607).
 */
function parseAsPath(buf: Uint8Array, p: number, end: number, asnSize: 2 | 4, out: AsPathSegment[]): string | null {
  while (p < end) {
    if (end - p < 2) return 'a lone octet after the last segment';
    const type = buf[p];
    const n = buf[p + 1];
    if (type < 1 || type > 4) return `unknown segment type ${type}`;
    if (n === 0) return 'empty segment';
    const q = p + 2;
    if (q + n * asnSize > end) return 'segment overruns the attribute';
    const asns: number[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const a = asnSize === 4 ? u32(buf, q + 4 * i) : u16(buf, q + 2 * i);
      if (a === 0) return 'AS 0 in the path';
      asns[i] = a;
    }
    out.push({ type: type as SegmentType, asns });
    p = q + n * asnSize;
  }
  return null;
}

/** Number of ASNs in a path for RFC 6793 4.2.3: an AS_SET counts 1, confederation segments 0. */
function countAsns(path: AsPath): number {
  let n = 0;
  for (const s of path) n += s.type === SegmentType.AS_SEQUENCE ? s.asns.length : s.type === SegmentType.AS_SET ? 1 : 0;
  return n;
}

/**
 * RFC 6793 4.2.3: the AS path a 2-octet-AS session really meant. When AS_PATH holds fewer ASNs than AS4_PATH,
 * AS4_PATH is ignored; else the leading (AS_PATH count - AS4_PATH count) ASNs of AS_PATH, kept in their
 * segments, are prepended to AS4_PATH. AS4_PATH never carries confederation segments, so the leading ones of
 * AS_PATH are kept; any others (RFC 5065 puts them only at the front) are dropped.
 */
export function reconstructAsPath(asPath: AsPath, as4Path: AsPath): AsPath {
  const n = countAsns(asPath);
  const m = countAsns(as4Path);
  if (n < m) return asPath;
  let take = n - m;
  const out: AsPathSegment[] = [];
  let i = 0;
  while (i < asPath.length && isConfed(asPath[i].type)) out.push(asPath[i++]);
  for (; i < asPath.length && take > 0; i++) {
    const seg = asPath[i];
    if (isConfed(seg.type)) continue;
    if (seg.type === SegmentType.AS_SET) {
      out.push(seg);
      take -= 1;
    } else {
      const k = Math.min(take, seg.asns.length);
      out.push({ type: seg.type, asns: seg.asns.slice(0, k) });
      take -= k;
    }
  }
  return [...out, ...as4Path];
}

// A NEXT_HOP that can never be a host's address (RFC 4271 6.3 "syntactically incorrect"): 0.0.0.0, multicast,
// limited broadcast.
function badNextHop4(w: number): boolean {
  return w === 0 || w >>> 28 === 0xe || w === 0xffffffff;
}

/**
 * The attributes of one UPDATE as decoded, every field present from the start: one hidden class whatever order
 * the attributes arrive in, so adoptAttrs reads them monomorphically.
 */
class DecodedAttrs implements AttrsInit {
  origin: Origin | undefined = undefined;
  asPath: AsPath | undefined = undefined;
  nextHop: IP | null | undefined = undefined;
  nextHopLinkLocal: IP | null | undefined = undefined;
  med: number | undefined = undefined;
  localPref: number | undefined = undefined;
  atomicAggregate: boolean | undefined = undefined;
  aggregator: { asn: number; address: IP } | undefined = undefined;
  communities: number[] | undefined = undefined;
  extCommunities: ExtCommunity[] | undefined = undefined;
  largeCommunities: LargeCommunity[] | undefined = undefined;
  originatorId: number | undefined = undefined;
  clusterList: number[] | undefined = undefined;
  unknown: RawAttr[] | undefined = undefined;

  clear(): void {
    this.origin = this.asPath = this.nextHop = this.nextHopLinkLocal = this.med = this.localPref = undefined;
    this.atomicAggregate = this.aggregator = this.communities = this.extCommunities = this.largeCommunities = undefined;
    this.originatorId = this.clusterList = this.unknown = undefined;
  }
}

/**
 * One UPDATE's decoding state. A session's scratch keeps one and resets it per UPDATE (reset): built afresh, it
 * and its DecodedAttrs were a quarter of a full table's allocation. Nothing outside decodeUpdate keeps a
 * reference to either: records copy what they keep (build), the message takes mpReach/mpUnreach/problems, made
 * afresh per UPDATE.
 */
class UpdateParse {
  problems: AttrProblem[] | null = null; // made on the first problem (most UPDATEs have none)
  withdraw = false;
  readonly init = new DecodedAttrs();
  hasOrigin = false;
  /** Normalised when the session is 4-octet; as parsed (to be rebuilt with AS4_PATH, then normalised) when not. */
  asPath: AsPath | null = null;
  /** The path's length, neighbour AS and hash when the path came from the cache. */
  asPathFacts: AsPathFacts | undefined = undefined;
  nextHop: IP | null = null;
  nextHopInvalid = false;
  aggregator: { asn: number; address: IP } | null = null;
  as4Path: AsPathSegment[] | null = null;
  as4Aggregator: { asn: number; address: IP } | null = null;
  otherAttrs = 0; // attributes other than MP_REACH/MP_UNREACH seen (valid or not)
  mpReach: MpReach | null = null;
  mpUnreach: MpUnreach | null = null;

  constructor(
    public buf: Uint8Array,
    public opts: DecodeOptions,
  ) {}

  // The attribute being decoded: its first octet (flags) and the end of its value.
  attrStart = 0;
  attrEnd = 0;

  /** Ready for another UPDATE: every field as a new instance has it. */
  reset(buf: Uint8Array, opts: DecodeOptions): this {
    this.buf = buf;
    this.opts = opts;
    this.problems = null;
    this.withdraw = false;
    this.init.clear();
    this.hasOrigin = false;
    this.asPath = null;
    this.asPathFacts = undefined;
    this.nextHop = null;
    this.nextHopInvalid = false;
    this.aggregator = this.as4Aggregator = null;
    this.as4Path = null;
    this.otherAttrs = 0;
    this.mpReach = null;
    this.mpUnreach = null;
    this.attrStart = this.attrEnd = 0;
    return this;
  }

  problem(attrType: number, action: 'discard' | 'withdraw', reason: string, code?: number, subcode?: number, data?: Uint8Array): void {
    if (action === 'withdraw') this.withdraw = true;
    (this.problems ??= []).push(code === undefined ? { attrType, action, reason } : { attrType, action, reason, code, subcode, data });
  }

  /** The whole current attribute (flags, type, length, value): the data of most UPDATE NOTIFICATIONs. */
  attrData(): Uint8Array {
    return copy(this.buf, this.attrStart, this.attrEnd);
  }

  /** Attribute Length Error on the current attribute, handled as `action`. */
  lengthError(type: number, action: 'discard' | 'withdraw', why: string): void {
    this.problem(type, action, `${ATTR_NAMES[type]} ${why}`, ErrorCode.UPDATE, UpdateSubcode.ATTRIBUTE_LENGTH, this.attrData());
  }

  /** RFC 4760 7 / RFC 7606 7.11, 7.12: an MP attribute that cannot be parsed is a session reset. */
  mpError(reason: string): CodecError {
    return updateError(UpdateSubcode.OPTIONAL_ATTRIBUTE, reason, this.attrData());
  }
}

function decodeUpdate(buf: Uint8Array, start: number, end: number, opts: DecodeOptions): DecodeResult {
  // RFC 4271 6.3: lengths inconsistent with the message length are Malformed Attribute List (a session reset,
  // RFC 7606 3 b, j: the NLRI cannot be located).
  const wrl = u16(buf, start);
  const ws = start + 2;
  const we = ws + wrl;
  if (we + 2 > end) throw updateError(UpdateSubcode.MALFORMED_ATTRIBUTE_LIST, `withdrawn routes length ${wrl} overruns the message`);
  const tal = u16(buf, we);
  const as = we + 2;
  const ae = as + tal;
  if (ae > end) throw updateError(UpdateSubcode.MALFORMED_ATTRIBUTE_LIST, `total path attribute length ${tal} overruns the message`);

  // RFC 4271 6.3 / RFC 7606 3 i, 5.3: a syntactically incorrect NLRI or withdrawn routes field is a session reset.
  const withdrawn = newList(opts, W4, 4, wrl);
  if (!readPrefixes4(buf, ws, we, withdrawn)) throw updateError(UpdateSubcode.INVALID_NETWORK_FIELD, 'malformed withdrawn routes field');
  const nlri = newList(opts, N4, 4, end - ae);
  if (!readPrefixes4(buf, ae, end, nlri)) throw updateError(UpdateSubcode.INVALID_NETWORK_FIELD, 'malformed NLRI field');

  const scratch = opts.scratch;
  if (scratch !== undefined && nlri.count > 0) {
    const same = scratch.sameAttrs(buf, as, ae, opts);
    if (same !== null) {
      return { action: 'ok', message: { type: 'update', withdrawn, attrs: same, nlri, mpReach: null, mpUnreach: null, wireAttrs: scratch.lastWireAttrs } };
    }
  }
  const st = scratch !== undefined ? (scratch.parse ??= new UpdateParse(buf, opts)).reset(buf, opts) : new UpdateParse(buf, opts);
  // Attribute types seen in this UPDATE: a scratch table stamped with this message's serial needs no clearing.
  let seen: Uint32Array;
  let mark = 1;
  if (opts.scratch) {
    seen = opts.scratch.seen;
    mark = opts.scratch.serial = (opts.scratch.serial + 1) >>> 0 || 1;
    if (mark === 1) seen.fill(0);
  } else seen = new Uint32Array(256);
  let overrun: string | null = null;
  let pos = as;
  while (pos < ae) {
    // RFC 7606 4: an attribute header or value running past the Total Attribute Length is treat-as-withdraw,
    // and the total length is relied on to find the NLRI.
    if (ae - pos < 3) {
      overrun = 'attribute header truncated';
      break;
    }
    const flags = buf[pos];
    const type = buf[pos + 1];
    const ext = (flags & AttrFlag.EXTENDED_LENGTH) !== 0;
    const hl = ext ? 4 : 3;
    if (ae - pos < hl) {
      overrun = 'attribute header truncated';
      break;
    }
    const alen = ext ? u16(buf, pos + 2) : buf[pos + 2];
    const vs = pos + hl;
    const ve = vs + alen;
    if (ve > ae) {
      overrun = `${ATTR_NAMES[type] ?? `attribute ${type}`} length ${alen} overruns the path attributes`;
      break;
    }
    const attrStart = pos;
    pos = ve;
    if (seen[type] === mark) {
      // RFC 7606 3 g: a repeated MP_REACH_NLRI or MP_UNREACH_NLRI is a session reset; any other repeat is
      // discarded, the first occurrence kept.
      if (type === AttrType.MP_REACH_NLRI || type === AttrType.MP_UNREACH_NLRI) {
        throw updateError(UpdateSubcode.MALFORMED_ATTRIBUTE_LIST, `${ATTR_NAMES[type]} appears more than once`);
      }
      st.problem(type, 'discard', 'repeated attribute', ErrorCode.UPDATE, UpdateSubcode.MALFORMED_ATTRIBUTE_LIST);
      continue;
    }
    seen[type] = mark;
    st.attrStart = attrStart;
    st.attrEnd = ve;
    decodeAttr(st, flags, type, vs, ve);
  }
  if (overrun !== null) {
    st.otherAttrs++; // whatever it was, it is an attribute: this UPDATE is not End-of-RIB
    // Treat-as-withdraw needs the NLRI (RFC 7606 3 j). When nothing was found before the bad attribute and the
    // classic fields are empty, the UPDATE almost surely carried an MP_REACH/MP_UNREACH we cannot locate: reset.
    if (st.mpReach === null && st.mpUnreach === null && withdrawn.count === 0 && nlri.count === 0) {
      throw updateError(UpdateSubcode.MALFORMED_ATTRIBUTE_LIST, `${overrun}; no NLRI could be located`);
    }
    st.problem(0, 'withdraw', overrun, ErrorCode.UPDATE, UpdateSubcode.ATTRIBUTE_LENGTH);
  }

  const mpNlri = st.mpReach !== null && (st.mpReach.nlri.count > 0 || (st.mpReach.raw?.length ?? 0) > 0);
  if (!st.withdraw && (nlri.count > 0 || mpNlri)) {
    // RFC 4271 6.3 as revised by RFC 7606 3 d: a missing well-known attribute is treat-as-withdraw; NEXT_HOP is
    // needed only with classic NLRI (RFC 4760 3).
    if (!st.hasOrigin) missingAttr(st, AttrType.ORIGIN);
    if (st.asPath === null) missingAttr(st, AttrType.AS_PATH);
    if (nlri.count > 0 && st.nextHop === null && seen[AttrType.NEXT_HOP] !== mark) missingAttr(st, AttrType.NEXT_HOP);
  }
  if (st.nextHopInvalid && nlri.count > 0) {
    // RFC 7606 3 e, 7.3: a semantically wrong NEXT_HOP means the routes are ignored, without a NOTIFICATION.
    st.problem(AttrType.NEXT_HOP, 'withdraw', 'NEXT_HOP is not a usable host address', ErrorCode.UPDATE, UpdateSubcode.INVALID_NEXT_HOP);
  }

  let attrs = null;
  if (!st.withdraw && st.otherAttrs > 0) {
    let asPath: AsPath = st.asPath ?? [];
    let aggregator = st.aggregator;
    if (opts.fourOctetAs === false) {
      // RFC 6793 4.2.3: an AGGREGATOR that is not AS_TRANS means AS4_AGGREGATOR and AS4_PATH are ignored.
      if (aggregator !== null && aggregator.asn !== AS_TRANS) {
        st.as4Path = null;
      } else if (aggregator !== null && st.as4Aggregator !== null) {
        aggregator = st.as4Aggregator;
      }
      if (st.as4Path !== null && st.asPath !== null) asPath = reconstructAsPath(st.asPath, st.as4Path);
      asPath = normaliseAsPath(asPath);
      st.asPathFacts = undefined;
    }
    const init = st.init;
    init.asPath = asPath;
    if (aggregator) init.aggregator = aggregator;
    if (st.mpReach !== null && nlri.count === 0) {
      init.nextHop = st.mpReach.nextHop;
      init.nextHopLinkLocal = st.mpReach.nextHopLinkLocal;
    } else {
      init.nextHop = st.nextHop;
    }
    attrs = adoptAttrs(init, st.asPathFacts);
  }
  const message: UpdateMessage = { type: 'update', withdrawn, attrs, nlri, mpReach: st.mpReach, mpUnreach: st.mpUnreach, wireAttrs: st.otherAttrs };
  if (st.withdraw) return { action: 'treat-as-withdraw', message, problems: st.problems ?? [] };
  if (st.problems !== null) return { action: 'attribute-discard', message, problems: st.problems };
  // Only classic NLRI: MP attributes carry prefixes of their own, and without NLRI the NEXT_HOP checks were skipped.
  if (scratch !== undefined && attrs !== null && nlri.count > 0 && st.mpReach === null && st.mpUnreach === null) {
    scratch.remember(buf, as, ae, opts, attrs, st.otherAttrs);
  }
  return { action: 'ok', message };
}

function missingAttr(st: UpdateParse, t: number): void {
  st.problem(t, 'withdraw', `missing ${ATTR_NAMES[t]}`, ErrorCode.UPDATE, UpdateSubcode.MISSING_WELL_KNOWN, new Uint8Array([t]));
}

// No closures in here: this runs for every attribute of every UPDATE.
function decodeAttr(st: UpdateParse, flags: number, type: number, vs: number, ve: number): void {
  const buf = st.buf;
  const opts = st.opts;
  const alen = ve - vs;
  const expected = EXPECTED_FLAGS[type];
  const isMp = type === AttrType.MP_REACH_NLRI || type === AttrType.MP_UNREACH_NLRI;
  if (!isMp) st.otherAttrs++;

  if (expected < 0) {
    // Unrecognised attribute (RFC 4271 5, 6.3).
    if ((flags & O) === 0) {
      throw updateError(UpdateSubcode.UNRECOGNIZED_WELL_KNOWN, `unrecognised well-known attribute ${type}`, st.attrData());
    }
    if ((flags & T) !== 0) {
      // Passed on with the Partial bit set; the extended length bit is the encoder's business.
      (st.init.unknown ??= []).push({ flags: (flags & 0xe0) | AttrFlag.PARTIAL, type, value: buf.subarray(vs, ve) }); // makeAttrs copies
    }
    return; // optional non-transitive: quietly ignored
  }
  const action: 'discard' | 'withdraw' = DISCARD_ON_ERROR[type] === 1 ? 'discard' : 'withdraw';
  if ((flags & (O | T)) !== expected) {
    // RFC 7606 3 c: conflicting Optional/Transitive bits make the attribute malformed (treat-as-withdraw, or
    // discard for the attributes whose malformation is discarded). MP attributes are still parsed, so their
    // prefixes can be withdrawn.
    st.problem(type, action, `${ATTR_NAMES[type]} has flags 0x${flags.toString(16)}`, ErrorCode.UPDATE, UpdateSubcode.ATTRIBUTE_FLAGS, st.attrData());
    if (!isMp) return;
  }
  switch (type) {
    case AttrType.ORIGIN: // RFC 7606 7.1
      if (alen !== 1) return st.lengthError(type, action, `length ${alen}`);
      if (buf[vs] > 2) {
        return st.problem(type, 'withdraw', `undefined ORIGIN ${buf[vs]}`, ErrorCode.UPDATE, UpdateSubcode.INVALID_ORIGIN, st.attrData());
      }
      st.init.origin = buf[vs] as Origin;
      st.hasOrigin = true;
      return;
    case AttrType.AS_PATH: { // RFC 7606 7.2
      const four = opts.fourOctetAs !== false;
      const cache = four ? opts.scratch?.asPaths : undefined;
      if (cache !== undefined) {
        const h = hashBytes(buf, vs, ve);
        let k = cache.find(buf, vs, ve, h);
        if (k < 0) {
          const segs: AsPathSegment[] = [];
          const err = parseAsPath(buf, vs, ve, 4, segs);
          if (err) return st.problem(type, 'withdraw', `malformed AS_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
          k = cache.add(buf, vs, ve, h, normaliseAsPath(segs, true));
        }
        if (opts.external && cache.confed(k)) return confedFromExternal(st);
        st.asPath = cache.path(k);
        st.asPathFacts = cache.factsOf(k);
        return;
      }
      const segs: AsPathSegment[] = [];
      const err = parseAsPath(buf, vs, ve, four ? 4 : 2, segs);
      if (err) return st.problem(type, 'withdraw', `malformed AS_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
      if (opts.external && hasConfed(segs)) return confedFromExternal(st);
      // A 2-octet session's path may still be rebuilt from AS4_PATH: normalised after that.
      st.asPath = four ? normaliseAsPath(segs, true) : segs;
      return;
    }
    case AttrType.NEXT_HOP: // RFC 7606 7.3
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.nextHop = ipv4Shared(buf, vs, opts.scratch);
      st.nextHopInvalid = badNextHop4(st.nextHop.w0);
      return;
    case AttrType.MULTI_EXIT_DISC: // RFC 7606 7.4
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.med = u32(buf, vs);
      return;
    case AttrType.LOCAL_PREF: // RFC 7606 7.5
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.localPref = u32(buf, vs);
      return;
    case AttrType.ATOMIC_AGGREGATE: // RFC 7606 7.6
      if (alen !== 0) return st.lengthError(type, action, `length ${alen}`);
      st.init.atomicAggregate = true;
      return;
    case AttrType.AGGREGATOR: { // RFC 7606 7.7
      const four = opts.fourOctetAs !== false;
      if (alen !== (four ? 8 : 6)) return st.lengthError(type, action, `length ${alen} in a ${four ? '4' : '2'}-octet AS session`);
      const asn = four ? u32(buf, vs) : u16(buf, vs);
      if (asn === 0) return st.problem(type, 'discard', 'AGGREGATOR AS 0'); // RFC 7607 2
      st.aggregator = { asn, address: new IP(4, u32(buf, vs + (four ? 4 : 2))) };
      return;
    }
    case AttrType.COMMUNITIES: { // RFC 7606 7.8
      if (alen === 0 || alen % 4 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 4`);
      const cs: number[] = alen === 4 && opts.scratch !== undefined ? opts.scratch.oneCommunity : new Array(alen / 4);
      for (let i = 0; i < cs.length; i++) cs[i] = u32(buf, vs + 4 * i);
      st.init.communities = cs;
      return;
    }
    case AttrType.ORIGINATOR_ID: // RFC 7606 7.9
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.originatorId = u32(buf, vs);
      return;
    case AttrType.CLUSTER_LIST: { // RFC 7606 7.10
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen === 0 || alen % 4 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 4`);
      const ids: number[] = new Array(alen / 4);
      for (let i = 0; i < ids.length; i++) ids[i] = u32(buf, vs + 4 * i);
      st.init.clusterList = ids;
      return;
    }
    case AttrType.MP_REACH_NLRI:
      st.mpReach = decodeMpReach(st, vs, ve);
      return;
    case AttrType.MP_UNREACH_NLRI:
      st.mpUnreach = decodeMpUnreach(st, vs, ve);
      return;
    case AttrType.EXTENDED_COMMUNITIES: { // RFC 7606 7.14
      if (alen === 0 || alen % 8 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 8`);
      const xs: ExtCommunity[] = new Array(alen / 8);
      for (let i = 0; i < xs.length; i++) xs[i] = [u32(buf, vs + 8 * i), u32(buf, vs + 8 * i + 4)];
      st.init.extCommunities = xs;
      return;
    }
    case AttrType.LARGE_COMMUNITY: { // RFC 8092 6
      if (alen === 0 || alen % 12 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 12`);
      const ls: LargeCommunity[] = new Array(alen / 12);
      for (let i = 0; i < ls.length; i++) {
        const b = vs + 12 * i;
        ls[i] = [u32(buf, b), u32(buf, b + 4), u32(buf, b + 8)];
      }
      st.init.largeCommunities = ls;
      return;
    }
    case AttrType.AS4_PATH: { // RFC 6793 6: malformed AS4_PATH is attribute discard
      if (opts.fourOctetAs !== false) return st.problem(type, 'discard', 'AS4_PATH from a 4-octet AS speaker'); // RFC 6793 4.1
      const segs: AsPathSegment[] = [];
      const err = parseAsPath(buf, vs, ve, 4, segs);
      if (err) return st.problem(type, 'discard', `malformed AS4_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      if (hasConfed(segs)) {
        return st.problem(type, 'discard', 'AS4_PATH carries confederation segments', ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      }
      st.as4Path = segs;
      return;
    }
    case AttrType.AS4_AGGREGATOR: { // RFC 6793 6
      if (opts.fourOctetAs !== false) return st.problem(type, 'discard', 'AS4_AGGREGATOR from a 4-octet AS speaker');
      if (alen !== 8) return st.problem(type, 'discard', `AS4_AGGREGATOR length ${alen}`, ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      const asn = u32(buf, vs);
      if (asn === 0) return st.problem(type, 'discard', 'AS4_AGGREGATOR AS 0'); // RFC 7607 2
      st.as4Aggregator = { asn, address: new IP(4, u32(buf, vs + 4)) };
      return;
    }
  }
}

/**
 * RFC 5065 5 and RFC 7606 7.2: AS_CONFED_SEQUENCE/AS_CONFED_SET in an AS_PATH from a peer outside the
 * confederation make the AS_PATH malformed: treat-as-withdraw.
 */
function confedFromExternal(st: UpdateParse): void {
  st.problem(AttrType.AS_PATH, 'withdraw', 'AS_PATH from an external peer carries confederation segments', ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
}

function hasConfed(segs: readonly AsPathSegment[]): boolean {
  for (const g of segs) if (isConfed(g.type)) return true;
  return false;
}

function decodeMpReach(st: UpdateParse, vs: number, ve: number): MpReach {
  const { buf, opts } = st;
  if (ve - vs < 5) throw st.mpError('MP_REACH_NLRI too short');
  const afi = u16(buf, vs);
  const safi = buf[vs + 2];
  const nhl = buf[vs + 3];
  const nh = vs + 4;
  const ns = nh + nhl + 1; // after the reserved octet
  if (ns > ve) throw st.mpError(`MP_REACH_NLRI next hop length ${nhl} overruns the attribute`);
  const v4 = afi === Afi.IPV4 && safi === Safi.UNICAST;
  const v6 = afi === Afi.IPV6 && safi === Safi.UNICAST;
  if (!v4 && !v6) {
    return { afi, safi, nextHop: null, nextHopLinkLocal: null, nlri: newList(opts, R4, 4, 0), raw: copy(buf, vs + 3, ve) };
  }
  let nextHop: IP;
  let linkLocal: IP | null = null;
  if (nhl === 4 && v4) nextHop = ipv4Shared(buf, nh, opts.scratch);
  // IPv6 global (+ link-local) next hop (RFC 2545 3); for IPv4 NLRI this is RFC 8950.
  else if (nhl === 16 || nhl === 32) {
    nextHop = ipv6Shared(buf, nh, opts.scratch);
    if (nhl === 32) linkLocal = ipv6At(buf, nh + 16);
  } else {
    throw st.mpError(`MP_REACH_NLRI next hop length ${nhl} for AFI ${afi}`);
  }
  const nlri = v4 ? newList(opts, R4, 4, ve - ns) : newList(opts, R6, 6, ve - ns);
  const ok = v4 ? readPrefixes4(buf, ns, ve, nlri) : readPrefixes6(buf, ns, ve, nlri);
  if (!ok) throw st.mpError('malformed NLRI in MP_REACH_NLRI');
  return { afi, safi, nextHop, nextHopLinkLocal: linkLocal, nlri };
}

function decodeMpUnreach(st: UpdateParse, vs: number, ve: number): MpUnreach {
  const { buf, opts } = st;
  if (ve - vs < 3) throw st.mpError('MP_UNREACH_NLRI too short');
  const afi = u16(buf, vs);
  const safi = buf[vs + 2];
  const v4 = afi === Afi.IPV4 && safi === Safi.UNICAST;
  const v6 = afi === Afi.IPV6 && safi === Safi.UNICAST;
  if (!v4 && !v6) return { afi, safi, withdrawn: newList(opts, U4, 4, 0), raw: copy(buf, vs + 3, ve) };
  const list = v4 ? newList(opts, U4, 4, ve - vs - 3) : newList(opts, U6, 6, ve - vs - 3);
  const ok = v4 ? readPrefixes4(buf, vs + 3, ve, list) : readPrefixes6(buf, vs + 3, ve, list);
  if (!ok) throw st.mpError('malformed withdrawn routes in MP_UNREACH_NLRI');
  return { afi, safi, withdrawn: list };
}

// ---- conveniences -------------------------------------------------------------------------------------------

/** Announcements of one next hop: the prefixes and the attributes that apply to them. */
export interface Announcement {
  readonly attrs: PathAttrs;
  readonly prefixes: Prefix[];
}

/**
 * What an UPDATE result asks of the RIB, as Prefix objects (tests and tools; the ingest path reads the
 * PrefixLists). Classic NLRI and MP_REACH_NLRI NLRI are separate announcements when both are present, each with
 * its own next hop. Treat-as-withdraw turns everything into withdrawals. Null for other messages and errors.
 */
export function routeChanges(r: DecodeResult): { announce: Announcement[]; withdraw: Prefix[] } | null {
  if (r.action === 'notification' || r.message.type !== 'update') return null;
  const u = r.message;
  const withdraw = [...listPrefixes(u.withdrawn)];
  if (u.mpUnreach) withdraw.push(...listPrefixes(u.mpUnreach.withdrawn));
  const announce: Announcement[] = [];
  if (r.action === 'treat-as-withdraw') {
    withdraw.push(...listPrefixes(u.nlri));
    if (u.mpReach) withdraw.push(...listPrefixes(u.mpReach.nlri));
    return { announce, withdraw };
  }
  const attrs = u.attrs;
  if (attrs !== null && u.nlri.count > 0) announce.push({ attrs, prefixes: listPrefixes(u.nlri) });
  if (attrs !== null && u.mpReach && u.mpReach.nlri.count > 0) {
    // attrs already carries the MP next hop unless classic NLRI claimed it (RFC 4760 3).
    const mpAttrs = u.nlri.count > 0 ? withAttrs(attrs, { nextHop: u.mpReach.nextHop, nextHopLinkLocal: u.mpReach.nextHopLinkLocal }) : attrs;
    announce.push({ attrs: mpAttrs, prefixes: listPrefixes(u.mpReach.nlri) });
  }
  return { announce, withdraw };
}

function listPrefixes(l: PrefixList): Prefix[] {
  const out: Prefix[] = new Array(l.count);
  for (let i = 0; i < l.count; i++) out[i] = l.prefix(i);
  return out;
}

/** Decode and return the message, or throw the error as a CodecError-like Error (tests and tools only). */
export function decodeOrThrow(buf: Uint8Array, opts: DecodeOptions = {}): Message {
  const r = decodeMessage(buf, opts);
  if (r.action === 'notification') throw new CodecError(r.code, r.subcode, r.data, r.reason);
  if (r.action === 'treat-as-withdraw') throw new Error(`treat-as-withdraw: ${r.problems.map((p) => p.reason).join('; ')}`);
  return r.message;
}
