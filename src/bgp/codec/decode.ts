// BGP-4 message decoder. Pure: bytes in, a DecodeResult out; it never throws for any input.
//
// Error handling follows RFC 4271 section 6 as revised by RFC 7606 (and RFC 6793 6 for AS4_PATH/AS4_AGGREGATOR,
// RFC 8092 6 for LARGE_COMMUNITY, RFC 7607 for AS 0). Every problem is classified as one of
//   - session reset: the result is a NOTIFICATION to send (code, subcode, data);
//   - treat-as-withdraw: every prefix the UPDATE carries is to be withdrawn (7606 2);
//   - attribute discard: the attribute is dropped and the UPDATE is otherwise used (7606 2).
// When several apply the strongest wins (7606 3 h). Problems are found by parsing; inside the decoder they unwind
// as CodecError and are converted at the entry point, as is any other exception (counted as `internal`).
//
// This file: the entry point, the header, ROUTE-REFRESH and the UPDATE's fields. OPEN is decode-open.ts, the path
// attributes decode-attrs.ts, the options and the state reused UPDATE after UPDATE decode-state.ts.
import { type Prefix } from '../../net/ip.ts';
import { adoptAttrs, normaliseAsPath, withAttrs, type AsPath, type PathAttrs } from '../../rib/attrs.ts';
import type { PrefixList } from '../../rib/prefixlist.ts';
import {
  ErrorCode, HeaderSubcode, RouteRefreshSubcode, UpdateSubcode, CodecError, notificationError,
} from './errors.ts';
import {
  AS_TRANS, AttrFlag, AttrType, ATTR_NAMES, HEADER_LEN, MIN_LEN, MsgType, maxMessageLen, type Message,
  type SessionCodecOptions, type UpdateMessage,
} from './messages.ts';
import { readPrefixes4 } from './nlri.ts';
import { N4, W4, UpdateParse, newList, updateError, type AttrProblem, type DecodeOptions } from './decode-state.ts';
import { decodeOpen } from './decode-open.ts';
import { decodeAttr, reconstructAsPath } from './decode-attrs.ts';
import { EMPTY, be16, copy, u16 } from './wire.ts';

// ---- results ------------------------------------------------------------------------------------------------

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
 * decodeMessage for the message at buf[off..off+n) (n must equal its length field), without a view of it: decoded
 * in place in the chunk it came in, a Uint8Array less per UPDATE. Never throws.
 */
export function decodeMessageAt(buf: Uint8Array, off: number, n: number, opts: DecodeOptions = {}): DecodeResult {
  return decodeAt(buf, off, n, opts, true);
}

/**
 * decodeMessageAt for a message a Framer (under the same options) has handed out: the Framer checked its header
 * (marker, length, type) when the header came in and cut the message to its length, so only the body is decoded.
 * A session's every message takes this path (checking each header twice was ~2% of the CPU of a table sent one
 * prefix per UPDATE).
 */
export function decodeFramedAt(buf: Uint8Array, off: number, n: number, opts: DecodeOptions = {}): DecodeResult {
  return decodeAt(buf, off, n, opts, false);
}

function decodeAt(buf: Uint8Array, off: number, n: number, opts: DecodeOptions, checkHead: boolean): DecodeResult {
  const msgType = n >= HEADER_LEN ? buf[off + 18] : null;
  try {
    if (checkHead) {
      if (n < HEADER_LEN) {
        throw notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_LENGTH, `only ${n} octets, less than a header`, be16(n));
      }
      const h = checkHeader(buf, off, opts);
      if (h) throw h;
      const len = u16(buf, off + 16);
      if (len !== n) {
        throw notificationError(ErrorCode.MESSAGE_HEADER, HeaderSubcode.BAD_MESSAGE_LENGTH, `length field ${len} but ${n} octets`, be16(len));
      }
    }
    const len = n;
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

// ---- UPDATE -------------------------------------------------------------------------------------------------

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
      scratch.update.fill(withdrawn, same, nlri, null, null, scratch.lastWireAttrs);
      return scratch.ok;
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
  if (scratch !== undefined && !st.withdraw && st.problems === null) {
    // The usual case, in the scratch's message (see DecodeScratch.update). Remembered only with classic NLRI alone:
    // MP attributes carry prefixes of their own, and without NLRI the NEXT_HOP checks were skipped.
    if (attrs !== null && nlri.count > 0 && st.mpReach === null && st.mpUnreach === null) {
      scratch.remember(buf, as, ae, opts, attrs, st.otherAttrs);
    }
    scratch.update.fill(withdrawn, attrs, nlri, st.mpReach, st.mpUnreach, st.otherAttrs);
    return scratch.ok;
  }
  const message: UpdateMessage = { type: 'update', withdrawn, attrs, nlri, mpReach: st.mpReach, mpUnreach: st.mpUnreach, wireAttrs: st.otherAttrs };
  if (st.withdraw) return { action: 'treat-as-withdraw', message, problems: st.problems ?? [] };
  if (st.problems !== null) return { action: 'attribute-discard', message, problems: st.problems };
  return { action: 'ok', message };
}

function missingAttr(st: UpdateParse, t: number): void {
  st.problem(t, 'withdraw', `missing ${ATTR_NAMES[t]}`, ErrorCode.UPDATE, UpdateSubcode.MISSING_WELL_KNOWN, new Uint8Array([t]));
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