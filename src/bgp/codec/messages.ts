// BGP-4 message model: wire constants and the decoded/encodable message types.
//
// Path attributes are the RIB's own record (src/rib/attrs.ts PathAttrs), so a decoded UPDATE goes into the RIB
// without translation. Prefixes of a decoded UPDATE are columnar (PrefixList: uint32 words + lengths), never one
// object per prefix.
import type { IP } from '../../net/ip.ts';
import type { PathAttrs } from '../../rib/attrs.ts';
import type { PrefixList } from '../../rib/prefixlist.ts';

// ---- wire constants -----------------------------------------------------------------------------------------

export const HEADER_LEN = 19;
/** RFC 4271 4.1. */
export const MAX_MESSAGE_LEN = 4096;
/** RFC 8654: with the extended message capability on both sides (not for OPEN and KEEPALIVE). */
export const MAX_EXTENDED_MESSAGE_LEN = 65535;
/** RFC 6793: the 2-octet stand-in for a 4-octet AS number. */
export const AS_TRANS = 23456;
export const BGP_VERSION = 4;

export const MsgType = { OPEN: 1, UPDATE: 2, NOTIFICATION: 3, KEEPALIVE: 4, ROUTE_REFRESH: 5 } as const;
export type MsgType = (typeof MsgType)[keyof typeof MsgType];

/** Minimum lengths per type (RFC 4271 4.2-4.5, RFC 2918 3). */
export const MIN_LEN: Readonly<Record<number, number>> = { 1: 29, 2: 23, 3: 21, 4: 19, 5: 23 };

export const AttrType = {
  ORIGIN: 1,
  AS_PATH: 2,
  NEXT_HOP: 3,
  MULTI_EXIT_DISC: 4,
  LOCAL_PREF: 5,
  ATOMIC_AGGREGATE: 6,
  AGGREGATOR: 7,
  COMMUNITIES: 8,
  ORIGINATOR_ID: 9,
  CLUSTER_LIST: 10,
  MP_REACH_NLRI: 14,
  MP_UNREACH_NLRI: 15,
  EXTENDED_COMMUNITIES: 16,
  AS4_PATH: 17,
  AS4_AGGREGATOR: 18,
  LARGE_COMMUNITY: 32,
} as const;

export const ATTR_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(AttrType).map(([k, v]) => [v, k]),
);

/** Attribute flag bits (RFC 4271 4.3). The low four bits are unused: zero when sent, ignored when received. */
export const AttrFlag = { OPTIONAL: 0x80, TRANSITIVE: 0x40, PARTIAL: 0x20, EXTENDED_LENGTH: 0x10 } as const;

/**
 * Optional/Transitive bits of each recognised attribute (RFC 4271 5, RFC 4760, 1997, 4360, 4456, 6793, 8092):
 * well-known ones are transitive and not optional.
 */
export const ATTR_FLAGS: Readonly<Record<number, number>> = {
  [AttrType.ORIGIN]: 0x40,
  [AttrType.AS_PATH]: 0x40,
  [AttrType.NEXT_HOP]: 0x40,
  [AttrType.MULTI_EXIT_DISC]: 0x80,
  [AttrType.LOCAL_PREF]: 0x40,
  [AttrType.ATOMIC_AGGREGATE]: 0x40,
  [AttrType.AGGREGATOR]: 0xc0,
  [AttrType.COMMUNITIES]: 0xc0,
  [AttrType.ORIGINATOR_ID]: 0x80,
  [AttrType.CLUSTER_LIST]: 0x80,
  [AttrType.MP_REACH_NLRI]: 0x80,
  [AttrType.MP_UNREACH_NLRI]: 0x80,
  [AttrType.EXTENDED_COMMUNITIES]: 0xc0,
  [AttrType.AS4_PATH]: 0xc0,
  [AttrType.AS4_AGGREGATOR]: 0xc0,
  [AttrType.LARGE_COMMUNITY]: 0xc0,
};

export const Afi = { IPV4: 1, IPV6: 2 } as const;
export const Safi = { UNICAST: 1 } as const;

export const CapCode = {
  MULTIPROTOCOL: 1,
  ROUTE_REFRESH: 2,
  EXTENDED_MESSAGE: 6,
  GRACEFUL_RESTART: 64,
  FOUR_OCTET_AS: 65,
} as const;

/** OPEN optional parameter types: 2 = capabilities (RFC 5492); 255 = extended length marker (RFC 9072). */
export const PARAM_CAPABILITIES = 2;
export const PARAM_EXTENDED_LENGTH = 255;

// ---- messages -----------------------------------------------------------------------------------------------

export interface MultiprotocolCap {
  readonly kind: 'multiprotocol';
  readonly afi: number;
  readonly safi: number;
}
export interface RouteRefreshCap {
  readonly kind: 'route-refresh';
}
export interface ExtendedMessageCap {
  readonly kind: 'extended-message';
}
export interface FourOctetAsCap {
  readonly kind: 'four-octet-as';
  readonly asn: number;
}
export interface GracefulRestartFamily {
  readonly afi: number;
  readonly safi: number;
  /** F bit: forwarding state for this family was preserved across the restart. */
  readonly forwarding: boolean;
}
export interface GracefulRestartCap {
  readonly kind: 'graceful-restart';
  /** R bit: the sender has restarted. */
  readonly restarting: boolean;
  /** N bit (RFC 8538): the sender supports graceful restart for NOTIFICATION messages. */
  readonly notification: boolean;
  /** Seconds, 0..4095. */
  readonly restartTime: number;
  readonly families: readonly GracefulRestartFamily[];
}
/** A capability we do not interpret, kept as raw bytes (RFC 5492: ignore what you do not understand). */
export interface UnknownCap {
  readonly kind: 'unknown';
  readonly code: number;
  readonly value: Uint8Array;
}
export type Capability =
  | MultiprotocolCap
  | RouteRefreshCap
  | ExtendedMessageCap
  | FourOctetAsCap
  | GracefulRestartCap
  | UnknownCap;

export interface OpenMessage {
  readonly type: 'open';
  readonly version: number;
  /** The 2-octet "My Autonomous System" field (AS_TRANS when the real AS needs 4 octets). */
  readonly myAs: number;
  readonly holdTime: number;
  /** BGP Identifier as uint32. */
  readonly bgpId: number;
  /** All capabilities of all capability parameters, in wire order. */
  readonly capabilities: readonly Capability[];
}

export interface MpReach {
  readonly afi: number;
  readonly safi: number;
  /** Null only for an AFI/SAFI we do not decode (then `raw` holds the attribute value). */
  readonly nextHop: IP | null;
  readonly nextHopLinkLocal: IP | null;
  readonly nlri: PrefixList;
  /** For an AFI/SAFI other than IPv4/IPv6 unicast: the attribute value after AFI/SAFI (nlri is then empty). */
  readonly raw?: Uint8Array;
}

export interface MpUnreach {
  readonly afi: number;
  readonly safi: number;
  readonly withdrawn: PrefixList;
  /** For an AFI/SAFI other than IPv4/IPv6 unicast: the withdrawn routes bytes (withdrawn is then empty). */
  readonly raw?: Uint8Array;
}

export interface UpdateMessage {
  readonly type: 'update';
  /** Classic IPv4 withdrawn routes. */
  readonly withdrawn: PrefixList;
  /**
   * The path attributes; null when the UPDATE carries none besides MP_REACH/MP_UNREACH (a pure withdrawal,
   * End-of-RIB) and under treat-as-withdraw.
   * attrs.nextHop is the next hop of the reachable NLRI: NEXT_HOP when the classic NLRI field is used (or there
   * is no MP_REACH_NLRI), else the MP_REACH_NLRI next hop(s) (RFC 4760 3: NEXT_HOP is then ignored).
   */
  readonly attrs: PathAttrs | null;
  /** Classic IPv4 NLRI. */
  readonly nlri: PrefixList;
  readonly mpReach: MpReach | null;
  readonly mpUnreach: MpUnreach | null;
  /**
   * Path attributes on the wire other than MP_REACH/MP_UNREACH, valid or not (set by the decoder). attrs is null
   * both for none and under treat-as-withdraw: this tells the two apart for End-of-RIB (RFC 4724 2).
   */
  readonly wireAttrs?: number;
}

export interface NotificationMessage {
  readonly type: 'notification';
  readonly code: number;
  readonly subcode: number;
  readonly data: Uint8Array;
}

export interface KeepaliveMessage {
  readonly type: 'keepalive';
}

export interface RouteRefreshMessage {
  readonly type: 'route-refresh';
  readonly afi: number;
  readonly safi: number;
  /** RFC 7313: 0 normal request, 1 BoRR, 2 EoRR; other values are to be ignored by the receiver. */
  readonly subtype: number;
}

export type Message = OpenMessage | UpdateMessage | NotificationMessage | KeepaliveMessage | RouteRefreshMessage;

// ---- session options ----------------------------------------------------------------------------------------

/** What the codec needs to know about the session (both directions). */
export interface SessionCodecOptions {
  /** Both sides advertised the 4-octet AS capability (RFC 6793). Default true. */
  fourOctetAs?: boolean;
  /** Both sides advertised the extended message capability (RFC 8654). Default false. */
  extendedMessage?: boolean;
}

/** The maximum length of a message of `type` for a session (RFC 8654: OPEN and KEEPALIVE stay at 4096). */
export function maxMessageLen(type: number, extendedMessage: boolean | undefined): number {
  return extendedMessage && type !== MsgType.OPEN && type !== MsgType.KEEPALIVE
    ? MAX_EXTENDED_MESSAGE_LEN
    : MAX_MESSAGE_LEN;
}

/** The AS a peer claims in its OPEN: the 4-octet AS capability when present, else My Autonomous System. */
export function peerAsOf(open: OpenMessage): number {
  for (const c of open.capabilities) if (c.kind === 'four-octet-as') return c.asn;
  return open.myAs;
}

/** Codec options for a session from the two OPENs (a capability counts only when both sides sent it). */
export function negotiatedOptions(local: OpenMessage, remote: OpenMessage): Required<SessionCodecOptions> {
  const has = (o: OpenMessage, kind: Capability['kind']) => o.capabilities.some((c) => c.kind === kind);
  return {
    fourOctetAs: has(local, 'four-octet-as') && has(remote, 'four-octet-as'),
    extendedMessage: has(local, 'extended-message') && has(remote, 'extended-message'),
  };
}

/**
 * End-of-RIB (RFC 4724 2): IPv4 unicast is an UPDATE with no withdrawn routes and no path attributes; others are
 * an UPDATE whose only attribute is an empty MP_UNREACH_NLRI. An UPDATE with any other attribute, even a malformed
 * one that made it treat-as-withdraw (attrs null), is never End-of-RIB (RFC 7606 2).
 */
export function endOfRib(u: UpdateMessage): { afi: number; safi: number } | null {
  if (u.withdrawn.count !== 0 || u.nlri.count !== 0 || u.mpReach !== null) return null;
  if ((u.wireAttrs ?? 0) !== 0) return null;
  if (u.mpUnreach === null) return u.attrs === null ? { afi: Afi.IPV4, safi: Safi.UNICAST } : null;
  if (u.attrs !== null || u.mpUnreach.withdrawn.count !== 0 || (u.mpUnreach.raw?.length ?? 0) !== 0) return null;
  return { afi: u.mpUnreach.afi, safi: u.mpUnreach.safi };
}
