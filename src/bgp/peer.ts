// One configured peer at run time: PeerState (its sessions, prefix filters and route policies, export queue, next
// hops, graceful-restart roles, error counts) and its status view (PeerStatus: what /peers and the metrics show).
// Its own file: the speaker, the listener, graceful restart, import and export all work on this state.
import type { BfdPeerStatus, BfdSource } from '../bfd/manager.ts';
import type { IP } from '../net/ip.ts';
import type { ExportPolicy, Rib } from '../rib/rib.ts';
import { ExportQueue } from './export-queue.ts';
import { MaxPrefixGuard, type MaxPrefixStatus } from './maxprefix.ts';
import { PeerErrors, type PeerErrorCounts } from './peer-errors.ts';
import { compilePrefixList, type PrefixFilter } from './prefix-filter.ts';
import { RoutePolicy } from './route-policy.ts';
import { u32ToIPv4, type AddressFamily, type NegotiatedCapabilities, type Session } from './session.ts';
import type { NormPeer } from './speaker-config.ts';

// ---- status -------------------------------------------------------------------------------------------------

export type SessionStateName = 'Idle' | 'Connect' | 'Active' | 'OpenSent' | 'OpenConfirm' | 'Established';

export interface PeerStatus {
  address: string;
  port: number;
  asn: number;
  type: 'ibgp' | 'ebgp';
  state: SessionStateName;
  /** When the current state was entered (ms since the epoch). */
  since: number;
  /** The last error (NOTIFICATION sent or received, TCP error), or null. Kept after recovery. */
  lastError: string | null;
  /** Seconds in Established; 0 when not Established. */
  uptime: number;
  /** The peer's BGP Identifier (dotted quad) once its OPEN arrived. */
  routerId: string | null;
  /** The current connection's addresses and ports (null when there is none). */
  localAddress: string | null;
  localPort: number | null;
  remotePort: number | null;
  /** Negotiated hold time (seconds) once OPENs are exchanged, else null. */
  holdTime: number | null;
  keepaliveTime: number | null;
  /** RFC 9687 SendHoldTime in effect (seconds; 0 = none) once OPENs are exchanged, else null. */
  sendHoldTime?: number | null;
  capabilities: NegotiatedCapabilities | null;
  prefixes: {
    /** Held from the peer (Adj-RIB-In), including ones import policy rejected. */
    received: number;
    /** Accepted by import policy and loop detection. */
    accepted: number;
    /** Advertised to the peer (Adj-RIB-Out). */
    sent: number;
    /** Kept from a previous session during a graceful restart, not yet refreshed. */
    stale: number;
  };
  messages: { received: number; sent: number; updatesReceived: number; updatesSent: number };
  /** RFC 7606 actions taken on this peer's UPDATEs. */
  errors: { treatAsWithdraw: number; attributeDiscard: number };
  /** Times the session went down after being Established. */
  flaps: number;
  /** Our graceful-restart time toward this peer (Calico maxRestartTime), null when GR is off with it. */
  restartTime?: number | null;
  /** We reflect routes to this peer as our route-reflector client. */
  routeReflectorClient?: boolean;
  /** Our AS on this session (the peer's localAsn, else the speaker's). */
  localAsn?: number;
  /** allowas-in count toward this peer (0: our AS in a path is a loop). */
  allowAsIn?: number;
  /** Export work not yet on the wire: prefixes waiting to be encoded, octets in the socket's buffer. */
  sendQueue: { prefixes: number; bytes: number };
  /** Max-prefix limits and the last time they closed the session; null when the peer has none. */
  maxPrefixes: MaxPrefixStatus | null;
  /** Errors since the speaker started, kept across sessions: kind -> detail -> count (src/bgp/peer-errors.ts). */
  errorCounts: PeerErrorCounts;
  /** The peer has a TCP-MD5 password (never the password itself). */
  md5?: boolean;
  /** GTSM hops, null when off. */
  ttlSecurity?: number | null;
  /** Why the peer is not started (TCP-MD5/GTSM unavailable here, password unreadable), or null. */
  refused?: string | null;
  /** Consecutive TCP connection attempts that did not connect (reset when one does). */
  connectAttempts?: number;
  /** The BFD session with this peer; null when it has none. */
  bfd?: BfdPeerStatus | null;
}

// ---- running state ----------------------------------------------------------------------------------------------

export class PeerState {
  session: Session | null = null;
  /** A second, incoming connection during collision detection (RFC 4271 6.8). */
  incoming: Session | null = null;
  established: Session | null = null;
  /** The prefix lists (./prefix-filter.ts); null accepts everything. */
  importFilter: PrefixFilter | null;
  exportFilter: PrefixFilter | null;
  /** The route policies after them (Calico BGPFilter rules, ./route-policy.ts); null: none. */
  importRoutePolicy: RoutePolicy | null = null;
  exportRoutePolicy: RoutePolicy | null = null;
  queue = new ExportQueue();
  /** Next hops towards this peer, from the established session. */
  nh4: IP | null = null;
  nh6: IP | null = null;
  nh6ll: IP | null = null;
  eorReceived = new Set<AddressFamily>();
  /** The peer's graceful restart capability on the last established session. */
  peerGr: NegotiatedCapabilities['gracefulRestart'] = null;
  /** Helper role: the peer's routes are held stale. */
  helping = false;
  grTimer: NodeJS.Timeout | null = null;
  /** Restarting-speaker role: our OPENs to this peer still carry the R bit. */
  restarting: boolean;
  warnedNoNextHop = new Set<AddressFamily>();
  /** The export policy of the established session `exportPolicyOf` (made once per session, not per flush). */
  exportPolicy: ExportPolicy | null = null;
  exportPolicyOf: Session | null = null;
  lastStatusKey = '';
  maxPrefix: MaxPrefixGuard | null;
  readonly errors = new PeerErrors();
  /** Why the peer is not started, or null (src/bgp/peer-security.ts). */
  refused: string | null = null;

  constructor(public cfg: NormPeer, restarting: boolean) {
    this.importFilter = compilePrefixList(cfg.importRules);
    this.exportFilter = compilePrefixList(cfg.exportRules);
    this.setRoutePolicies(cfg);
    this.restarting = restarting;
    this.maxPrefix = cfg.maxPrefixes ? new MaxPrefixGuard(cfg.maxPrefixes) : null;
  }

  get source(): string {
    return this.cfg.key;
  }

  /** Set when the peer starts (depends on our ASN too). */
  type: 'ibgp' | 'ebgp' = 'ebgp';

  setRoutePolicies(cfg: NormPeer): void {
    this.importRoutePolicy = cfg.policy.import?.length ? new RoutePolicy(cfg.policy.import) : null;
    this.exportRoutePolicy = cfg.policy.export?.length ? new RoutePolicy(cfg.policy.export) : null;
  }

}

// ---- status view ------------------------------------------------------------------------------------------------

/** What a Speaker emits. */
export interface SpeakerEvents {
  /** A peer changed state (or its status changed notably: session up/down, error). */
  peer: [status: PeerStatus];
  /**
   * The same moments as 'peer', with only the address and state: for a listener that needs no more, as building
   * the whole status for every transition of a hundred peers coming up was a hot function of its own.
   */
  state: [address: string, state: SessionStateName];
}

/** How many of `peers` there are, and how many are Established. */
export function countPeers(peers: Iterable<PeerState>): { configured: number; established: number } {
  let configured = 0;
  let established = 0;
  for (const p of peers) {
    configured++;
    if (peerState(p) === 'Established') established++;
  }
  return { configured, established };
}

/** A peer's state: its current session's (the established one, else the one trying), Idle with none. */
export function peerState(p: PeerState): SessionStateName {
  return (p.established ?? p.session)?.state ?? 'Idle';
}

/** The status view of a peer: its current session (the established one, else the one trying), counts from the RIB. */
export function peerStatus(p: PeerState, rib: Rib, now: () => number, bfd: BfdSource | null): PeerStatus {
  const s = p.established ?? p.session;
  const n = s?.negotiated ?? null;
  const connected = s && (s.state === 'OpenConfirm' || s.state === 'Established');
  const onWire = s && (connected || s.state === 'OpenSent');
  const counts = rib.hasSource(p.source) ? rib.counts(p.source) : null;
  const c = s?.counters;
  return {
    address: p.cfg.address,
    port: p.cfg.port,
    asn: p.cfg.asn,
    type: p.cfg.asn === p.cfg.localAs ? 'ibgp' : 'ebgp',
    state: peerState(p),
    since: s ? s.stateSince : now(),
    lastError: p.refused ?? s?.lastError ?? silentDrop(p, s) ?? null,
    uptime: s?.establishedAt != null ? Math.floor((now() - s.establishedAt) / 1000) : 0,
    routerId: s?.remoteOpen ? u32ToIPv4(s.remoteOpen.bgpId) : null,
    localAddress: onWire ? s.localAddress : null,
    localPort: onWire ? s.localPort : null,
    remotePort: onWire ? s.remotePort : null,
    holdTime: connected ? s.fsm.holdTime : null,
    keepaliveTime: connected ? s.fsm.keepaliveTime : null,
    sendHoldTime: connected ? s.fsm.sendHoldTime : null,
    capabilities: connected ? n : null,
    prefixes: {
      received: counts?.received ?? 0,
      accepted: counts?.accepted ?? 0,
      sent: p.established ? rib.adjRibOut(p.source).size : 0,
      stale: counts?.stale ?? 0,
    },
    messages: { received: c?.messagesIn ?? 0, sent: c?.messagesOut ?? 0, updatesReceived: c?.updatesIn ?? 0, updatesSent: c?.updatesOut ?? 0 },
    errors: { treatAsWithdraw: c?.treatAsWithdraw ?? 0, attributeDiscard: c?.attributeDiscard ?? 0 },
    flaps: s?.fsm.flaps ?? 0,
    sendQueue: {
      prefixes: p.queue.pendingPrefixes(),
      bytes: p.established?.bufferedBytes ?? 0,
    },
    maxPrefixes: p.maxPrefix?.status() ?? null,
    errorCounts: p.errors.snapshot(),
    restartTime: p.cfg.gr?.restartTime ?? null,
    routeReflectorClient: p.cfg.rrClient,
    md5: p.cfg.security.md5Key !== null,
    ttlSecurity: p.cfg.security.ttlSecurity,
    refused: p.refused,
    connectAttempts: s?.fsm.connectAttempts ?? 0,
    bfd: bfd?.status(p.cfg.address) ?? null,
    localAsn: p.cfg.localAs,
    allowAsIn: p.cfg.allowAsIn,
  };
}

/**
 * What a peer with TCP-MD5 stuck before TCP comes up most likely means: a SYN with a wrong or missing signature
 * is dropped without an answer (RFC 2385 2.0), so no error ever arrives to show.
 */
function silentDrop(p: PeerState, s: Session | null): string | undefined {
  const { md5Key, ttlSecurity } = p.cfg.security;
  if ((!md5Key && ttlSecurity === null) || !s || (s.state !== 'Connect' && s.state !== 'Active') || s.fsm.connectAttempts === 0) return undefined;
  // GTSM (RFC 5082 3): the kernel drops a segment below the minimum TTL as silently as a bad signature
  const why = [
    ...(md5Key ? ['with TCP-MD5, a wrong or missing password on either side drops the SYN without an answer'] : []),
    ...(ttlSecurity !== null ? [`with GTSM (ttlSecurity ${ttlSecurity}), a segment arriving with TTL below ${256 - ttlSecurity} (the peer more than ${ttlSecurity} hop(s) away, or not sending at TTL 255) is dropped without an answer`] : []),
  ];
  return `no TCP connection after ${s.fsm.connectAttempts} attempt(s): ${why.join('; ')}`;
}
