// The decoder's state: its options, the scratch a session reuses UPDATE after UPDATE (DecodeScratch) and one
// UPDATE's parse state (UpdateParse and its DecodedAttrs). Its own file: the UPDATE decoder (decode.ts) and the
// attribute decoders (decode-attrs.ts) both work on this state.
import { type Family, type IP } from '../../net/ip.ts';
import type { AsPath, AsPathFacts, AsPathSegment, AttrsInit, ExtCommunity, LargeCommunity, Origin, PathAttrs, RawAttr } from '../../rib/attrs.ts';
import { PrefixList } from '../../rib/prefixlist.ts';
import { ErrorCode, UpdateSubcode, CodecError, notificationError } from './errors.ts';
import { ATTR_NAMES, type MpReach, type MpUnreach, type SessionCodecOptions, type UpdateMessage } from './messages.ts';
import { AsPathCache } from './aspaths.ts';
import { EMPTY, copy } from './wire.ts';

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

// Slots of reusable prefix lists.
export const W4 = 0, N4 = 1, R4 = 2, R6 = 3, U4 = 4, U6 = 5;

/** Reusable buffers for decoding many UPDATEs with few allocations. */
export class DecodeScratch {
  // Every slot present from the start: a read past the end of the array would throw optimised code away (V8's
  // "out of bounds" deopt) the first time an UPDATE needs a slot not used before, such as MP_REACH's IPv6 list.
  private readonly lists: (PrefixList | undefined)[] = [undefined, undefined, undefined, undefined, undefined, undefined];
  /** Attribute types seen, stamped with `serial` (the current UPDATE's number). */
  readonly seen = new Uint32Array(256);
  serial = 0;
  /** Normalised AS paths of a 4-octet session by their wire bytes (see AsPathCache). */
  readonly asPaths = new AsPathCache();
  /** The last next hops decoded: consecutive UPDATEs from one peer nearly always share them. */
  nh4: IP | null = null;
  nh6: IP | null = null;
  /** The last IPv6 link-local next hop (a 32-octet MP_REACH next hop's second half). */
  ll6: IP | null = null;
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
  /**
   * The message and result of a clean UPDATE, refilled by every decode with this scratch (like the prefix lists:
   * consume them first). One object each per UPDATE was a third of a full table's allocation.
   */
  readonly update = new ScratchUpdate();
  readonly ok = { action: 'ok' as const, message: this.update };
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

/** An UpdateMessage the scratch refills (DecodeScratch.update); every field present from the start. */
export class ScratchUpdate implements UpdateMessage {
  readonly type = 'update' as const;
  withdrawn: PrefixList = EMPTY_LIST;
  attrs: PathAttrs | null = null;
  nlri: PrefixList = EMPTY_LIST;
  mpReach: MpReach | null = null;
  mpUnreach: MpUnreach | null = null;
  wireAttrs = 0;

  fill(withdrawn: PrefixList, attrs: PathAttrs | null, nlri: PrefixList, mpReach: MpReach | null, mpUnreach: MpUnreach | null, wireAttrs: number): this {
    this.withdrawn = withdrawn;
    this.attrs = attrs;
    this.nlri = nlri;
    this.mpReach = mpReach;
    this.mpUnreach = mpUnreach;
    this.wireAttrs = wireAttrs;
    return this;
  }
}

const EMPTY_LIST = new PrefixList(4, 1);

export function newList(opts: DecodeOptions, slot: number, family: Family, n: number): PrefixList {
  return opts.scratch ? opts.scratch.list(slot, family, n) : new PrefixList(family, Math.max(1, n));
}

export const updateError = (sub: number, reason: string, data: Uint8Array = EMPTY) => notificationError(ErrorCode.UPDATE, sub, reason, data);

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
export class UpdateParse {
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
