// The BGP speaker: configured peers (active and passive), a listener, connection collision detection, and the
// glue between sessions and the RIB (import policy into Adj-RIB-In, export from the change feed through each
// peer's Adj-RIB-Out). Sessions (src/bgp/session.ts) do the wire and the FSM; this file decides what routes go
// where, like GoBGP's pkg/server over its FSM or BIRD's proto/bgp over nest.
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import * as os from 'node:os';
import { IP, type Prefix, formatIP, formatPrefix, parseIP, parseIPWithLen, parsePrefix, prefixContainsIP, prefixOf } from '../net/ip.ts';
import { makeAttrs, withAttrs, type AttrsInit, type PathAttrs } from '../rib/attrs.ts';
import type { PeerInfo } from '../rib/bestpath.ts';
import type { PrefixList } from '../rib/prefixlist.ts';
import { Rib, type ExportPolicy, type ImportPolicy, type RibChangeBatch } from '../rib/rib.ts';
import {
  CeaseSubcode, ErrorCode, encodeNotification, endOfRib, shutdownData,
  type AttrProblem, type OpenMessage, type UpdateMessage,
} from './codec/index.ts';
import type { DownInfo } from './fsm.ts';
import { MaxPrefixGuard, normMaxPrefixes, type MaxPrefixesConfig, type MaxPrefixLimits, type MaxPrefixStatus } from './maxprefix.ts';
import { PeerErrors, type PeerErrorCounts } from './peer-errors.ts';
import { PeerSockets, peerSecurity, wantsSocketOptions, type PeerSecurity } from './peer-security.ts';
import type { SecretSource as PasswordSource } from '../store/etcd-auth.ts';
import { onlyKeyChanged } from './md5-rekey.ts';
import { hostSocketOptions, type SocketOptionsHost } from '../platform/sockopt.ts';
import { compilePrefixList, sameRules, type PrefixFilter, type PrefixRule } from './prefix-filter.ts';
import { clusterLoop } from './reflect.ts';
import { CommunityTagger, sameAdvertisements, type PrefixAdvertisement } from './communities.ts';
import { ownAsLoop } from './loops.ts';
import { ExportQueue } from './export-queue.ts';
import { RoutePolicy, type PolicyRule } from './route-policy.ts';
import { FLUSH_GAP_MS, FlushPacer } from './flush-pacer.ts';
import { PeerExports } from './export-policy.ts';
import { RefusedLog, REFUSED_LOG_INTERVAL_MS, type RefusedLine } from './refused-log.ts';
import {
  Session, familyOfAfi, ipv4ToU32, silentLogger, u32ToIPv4, type AddressFamily, type NegotiatedCapabilities,
} from './session.ts';

// ---- configuration ----------------------------------------------------------------------------------------------

import type { BfdPeerStatus, BfdSource } from '../bfd/manager.ts';
export type { AddressFamily, NegotiatedCapabilities } from './session.ts';
/**
 * One prefix-list rule: matches prefixes inside `prefix` whose length is in ge..le (both absent: exactly the
 * rule's length; only le: rule length..le; only ge: ge..max). Lists are evaluated first match wins; a prefix
 * that matches no rule is rejected. An absent list accepts everything.
 */
export type { PrefixRule } from './prefix-filter.ts';

export interface PeerGracefulRestart {
  /** Seconds (0..4095). */
  restartTime: number;
}

export interface SpeakerPeerConfig {
  /** The peer's address (IPv4 or IPv6 text); identifies the peer, unique within a config. */
  address: string;
  asn: number;
  /** The peer's TCP port (where we connect to). Default 179. */
  port?: number;
  /** Families negotiated with this peer (MP-BGP). Default: the family of `address`. */
  families?: AddressFamily[];
  /** Proposed hold time in seconds; 0 = no keepalives; 1-2 are invalid. Default 90. */
  holdTime?: number;
  /**
   * RFC 9687 SendHoldTime, seconds: octets waiting this long without any write reaching the peer close the session
   * (Send Hold Timer Expired). Default: the larger of 480 and twice the negotiated hold time. 0 = off; when set, more
   * than holdTime. No timer with hold time 0.
   */
  sendHoldTime?: number;
  /** Never connect, only accept the peer's connection. Default false. */
  passive?: boolean;
  /**
   * false: no graceful restart with this peer. Default: the speaker's gracefulRestart (off when that is off).
   * true means "on, with the speaker's restart time".
   */
  gracefulRestart?: PeerGracefulRestart | boolean;
  /** Import prefix list (what we accept from the peer). Absent = accept everything. */
  import?: PrefixRule[];
  /** Export prefix list (what we send to the peer). Absent = export everything. */
  export?: PrefixRule[];
  /** Maximum prefixes held from the peer, for each family or per family (src/bgp/maxprefix.ts). Absent = no limit. */
  maxPrefixes?: MaxPrefixesConfig;
  /** TCP-MD5 (RFC 2385): where the password is; read when the peer is (re)configured, never logged or shown. */
  password?: PasswordSource;
  /** GTSM (RFC 5082): the peer is at most this many hops away; we send at TTL 255 and accept only >= 256 - hops. */
  ttlSecurity?: number;

  // ---- tuning (not in the config file; defaults suit production) ----
  /** Source address of our connections. Default: the listen address when it is a specific one, else the OS's. */
  localAddress?: string;
  /** First ConnectRetry interval in seconds (doubles per failed attempt, with jitter). Default 5. */
  connectRetry?: number;
  /** Cap of the ConnectRetry and IdleHold backoff, seconds. Default 120. */
  connectRetryMax?: number;
  /** First IdleHold interval after a session failure (damping of a flapping peer doubles it). Default 1. */
  idleHold?: number;
  /** DelayOpen (RFC 4271 8.1.1): seconds to wait for the peer's OPEN before sending ours. Default 0 = off. */
  delayOpen?: number;
  /** Explicit next hops sent to this peer instead of the session's local address. */
  nextHop?: { ipv4?: string; ipv6?: string; ipv6LinkLocal?: string };
  /** Towards an iBGP peer, also set NEXT_HOP to ourselves on routes learned from eBGP. Default false. */
  nextHopSelf?: boolean;
  /** With SpeakerConfig.clusterId: this iBGP peer is a route-reflector client (RFC 4456). */
  routeReflectorClient?: boolean;
  /** allowas-in: accept routes whose AS_PATH holds our AS up to this many times. Default 0 (any = loop, dropped). */
  allowAsIn?: number;
  /** Our AS toward this peer (its OPEN, the AS prepended toward it, iBGP/eBGP) when not the speaker's. */
  localAsn?: number;
  /** Route policy after the prefix lists (Calico BGPFilter rules; src/bgp/route-policy.ts). */
  policy?: { import?: PolicyRule[]; export?: PolicyRule[] };
}

export interface SpeakerConfig {
  asn: number;
  /** Our BGP Identifier, dotted quad. */
  routerId: string;
  /**
   * Where to accept connections. false: never accept. Port 0 binds an ephemeral port (tests; see
   * Speaker.listening()): the config file's "port 0 = never" is mapped to false by src/config.
   */
  listen: { address: string; port: number } | false;
  /** Graceful restart (RFC 4724) as restarting speaker and helper; false/absent = off. */
  gracefulRestart?: PeerGracefulRestart | false;
  peers: SpeakerPeerConfig[];
  /** Static prefixes announced as local routes (source 'local'). */
  announce?: string[];
  /** Route reflector cluster ID (dotted quad): reflect between clients and non-clients (src/bgp/reflect.ts). */
  clusterId?: string;
  /** Communities added to every exported route inside a CIDR (Calico prefixAdvertisements; src/bgp/communities.ts). */
  prefixAdvertisements?: PrefixAdvertisement[];
}

// ---- options ------------------------------------------------------------------------------------------------

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface SpeakerOptions {
  /** The RIB to use (shared with the daemon and the route programmer). Default: a new one. */
  rib?: Rib;
  /**
   * Least time between two RIB flushes (exports) while changes keep arriving, ms (src/bgp/flush-pacer.ts; default
   * FLUSH_GAP_MS). A change after a quiet spell is flushed on the next turn of the event loop regardless.
   */
  flushGapMs?: number;
  /** Default: silent. */
  logger?: Logger;
  /** Uniform [0, 1): jitter of ConnectRetry/IdleHold timers. Default Math.random. */
  random?: () => number;
  /**
   * We are restarting after a crash or an upgrade (graceful restart, restarting speaker role): our OPENs carry
   * the Restart State (R) bit and the Forwarding State (F) bit for every family, so GR-capable peers keep our
   * routes until we re-send them and End-of-RIB. The caller decides (e.g. a marker file it wrote while running
   * and removes on a clean stop). Only the first session with each peer uses R.
   */
  restarted?: boolean;
  /** Clock for PeerStatus.since/uptime and the refused-connection log's minute, ms since the epoch. Default Date.now. */
  now?: () => number;
  /** TCP-MD5/GTSM socket options (src/platform/sockopt.ts). Default: this OS's (Windows refuses such peers). */
  socketOptions?: SocketOptionsHost;
  /** BFD sessions (src/bfd/): a failure of a peer's session tears its BGP session down; status in /peers. */
  bfd?: BfdSource;
}

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

export interface StopOptions {
  /**
   * true (default): send Cease/Administrative Shutdown to every peer, which then drops our routes.
   * false: close the connections without a NOTIFICATION, as a crash would: graceful-restart peers keep our routes
   * as stale (restart then with { restarted: true }).
   */
  graceful?: boolean;
}

export interface SpeakerEvents {
  /** A peer changed state (or its status changed notably: session up/down, error). */
  peer: [status: PeerStatus];
}

// ---- the speaker ------------------------------------------------------------------------------------------------

/** The RIB source name of a configured peer: its address in canonical text. */
export function peerSourceName(address: string): string {
  return formatIP(parseIP(address));
}

/** The RIB source of static and announce()d routes. */
export const LOCAL_SOURCE = 'local';

/** How long a helper waits for End-of-RIB after the restarting peer came back (FRR's stalepath-time). */
const STALE_PATH_TIME = 360;

/** The largest timer setTimeout keeps (2^31 - 1 ms), in whole seconds. */
const MAX_TIMER_SECONDS = 2147483;

interface NormPeer {
  key: string;
  address: string;
  ip: IP;
  asn: number;
  port: number;
  families: AddressFamily[];
  holdTime: number;
  /** undefined: RFC 9687's default (from the negotiated hold time). */
  sendHoldTime: number | undefined;
  passive: boolean;
  /** Our restart time towards this peer; null = no GR with it. */
  gr: { restartTime: number } | null;
  importRules: PrefixRule[] | undefined;
  exportRules: PrefixRule[] | undefined;
  localAddress: string | undefined;
  connectRetry: number;
  connectRetryMax: number;
  idleHold: number;
  delayOpen: number;
  nextHop: { ipv4?: string; ipv6?: string; ipv6LinkLocal?: string };
  nextHopSelf: boolean;
  maxPrefixes: MaxPrefixLimits | null;
  rrClient: boolean;
  /** TCP-MD5 key and GTSM hops (src/bgp/peer-security.ts); the key serialises as a fingerprint only. */
  security: PeerSecurity;
  allowAsIn: number;
  /** Our AS on this session: the peer's localAsn, else the speaker's. */
  localAs: number;
  policy: { import?: PolicyRule[]; export?: PolicyRule[] };
}

class PeerState {
  session: Session | null = null;
  /** A second, incoming connection during collision detection (RFC 4271 6.8). */
  incoming: Session | null = null;
  established: Session | null = null;
  importFilter: PrefixFilter | null;
  exportFilter: PrefixFilter | null;
  importRP: RoutePolicy | null = null;
  exportRP: RoutePolicy | null = null;
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
    this.setPolicy(cfg);
    this.restarting = restarting;
    this.maxPrefix = cfg.maxPrefixes ? new MaxPrefixGuard(cfg.maxPrefixes) : null;
  }

  get source(): string {
    return this.cfg.key;
  }

  /** Set when the peer starts (depends on our ASN too). */
  type: 'ibgp' | 'ebgp' = 'ebgp';

  setPolicy(cfg: NormPeer): void {
    this.importRP = cfg.policy.import?.length ? new RoutePolicy(cfg.policy.import) : null;
    this.exportRP = cfg.policy.export?.length ? new RoutePolicy(cfg.policy.export) : null;
  }

}

/**
 * A BGP-4 speaker. Lifecycle: new Speaker(cfg, opts) → (announce() local routes) → await start() → ... →
 * await stop(). Routes learned from peers are in `rib` under source peerSourceName(address); local routes are
 * under LOCAL_SOURCE, and any other RIB source with PeerInfo type 'local' (e.g. the daemon's IPAM routes) is
 * exported like them. Announce local routes before start() so that the first table sent to each peer (and its
 * End-of-RIB) already holds them.
 */
export class Speaker extends EventEmitter<SpeakerEvents> {
  /** The RIB (Loc-RIB, Adj-RIB-In per peer, Adj-RIB-Out per peer); query it for routes. */
  readonly rib: Rib;
  private cfg: SpeakerConfig;
  private routerId: number;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly restarted: boolean;
  private readonly peerMap = new Map<string, PeerState>();
  private server: net.Server | null = null;
  private unsubscribe: (() => void) | null = null;
  private running = false;
  private readonly flushPacer: FlushPacer;
  private staticRoutes = new Set<string>();
  private readonly sessions = new Set<Session>();
  private readonly sockets: PeerSockets;
  /** Connections from addresses that are not peers: counted, logged at most once a minute per address. */
  private readonly refusedLog = new RefusedLog();
  private refusedTimer: NodeJS.Timeout | null = null;
  /** Why peers with a password or ttlSecurity cannot run here (null: they can, or none has asked yet). */
  private sockoptRefusal: string | null = null;
  private tagger: CommunityTagger;
  /** Export policies per session, rewrites shared by peers of one kind (src/bgp/export-policy.ts). */
  private readonly exports = new PeerExports({
    clusterId: () => this.clusterIdNum(),
    isRrClient: (src) => (src.address ? this.peerMap.get(this.addressKey(src.address))?.cfg.rrClient === true : false),
    tag: (prefix, a) => this.tagger.tag(prefix, a),
    warn: (m) => this.log.warn(m),
  });

  constructor(cfg: SpeakerConfig, opts: SpeakerOptions = {}) {
    super();
    // The RIB's own flush requests go through the same pacer as the speaker's (src/bgp/flush-pacer.ts).
    this.flushPacer = new FlushPacer(() => this.rib.flush(), opts.flushGapMs ?? FLUSH_GAP_MS);
    this.rib = opts.rib ?? new Rib({ schedule: () => this.scheduleFlush() });
    this.log = opts.logger ?? silentLogger;
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
    this.restarted = opts.restarted === true;
    this.cfg = cfg;
    this.routerId = ipv4ToU32(cfg.routerId);
    this.sockets = new PeerSockets(opts.socketOptions ?? hostSocketOptions());
    this.tagger = new CommunityTagger(cfg.prefixAdvertisements);
    for (const p of cfg.peers) {
      const n = this.normPeer(p);
      if (this.peerMap.has(n.key)) throw new Error(`peer ${n.address} configured twice`);
      this.peerMap.set(n.key, new PeerState(n, this.restarted));
    }
    this.rib.addSource(LOCAL_SOURCE, this.localPeerInfo());
    this.setStatic(cfg.announce ?? []);
    this.bfd = opts.bfd ?? null;
    this.bfd?.onDown((address, reason) => this.onBfdDown(address, reason));
  }

  private readonly bfd: BfdSource | null;

  /**
   * BFD says the path to the peer failed (RFC 5882 4.2): close its session now instead of waiting for the hold
   * timer, with Cease as BIRD does; the FSM reconnects when the path is back. Counted as error kind bfd-down.
   */
  private onBfdDown(address: string, reason: string): void {
    const p = this.peerMap.get(peerSourceName(address));
    if (!p || !this.running) return;
    for (const s of [p.session, p.incoming]) {
      if (!s || (s.state !== 'OpenSent' && s.state !== 'OpenConfirm' && s.state !== 'Established')) continue;
      this.log.warn(`peer ${p.cfg.address}: ${reason}: closing the ${s.state} session`);
      p.errors.add('bfd-down', s.state);
      s.dispatch({ type: 'AutomaticStop', notification: { code: ErrorCode.CEASE, subcode: 0 } });
      s.lastError = reason;
    }
  }

  // ---- lifecycle ----------------------------------------------------------------------------------------------

  /** Bind the listener (if any) and start every peer. Resolves once listening. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = this.rib.subscribe((batch) => this.onRibChanges(batch));
    if (this.cfg.listen) await this.listen(this.cfg.listen);
    await this.prepareSockets([...this.peerMap.values()].map((p) => p.cfg));
    this.syncListenerKeys();
    for (const p of this.peerMap.values()) this.startPeer(p);
  }

  /** Stop all sessions and the listener. Resolves when every socket is closed. */
  async stop(opts: StopOptions = {}): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const graceful = opts.graceful !== false;
    // server.close() completes only when every accepted connection has closed: start it, close them, then wait.
    const serverClosed = this.closeServer();
    for (const p of this.peerMap.values()) {
      for (const s of [p.session, p.incoming]) {
        if (!s) continue;
        if (graceful) s.stop({ code: ErrorCode.CEASE, subcode: CeaseSubcode.ADMIN_SHUTDOWN, data: shutdownData('speaker stopping') });
        else s.abort();
      }
      this.clearGrTimer(p);
      p.maxPrefix?.clear();
    }
    await Promise.all([...this.sessions].map((s) => s.whenClosed()));
    await serverClosed;
    this.flushRefused(true);
    for (const p of this.peerMap.values()) {
      for (const s of [p.session, p.incoming]) if (s) this.forget(s);
      p.session = p.incoming = p.established = null;
      p.queue.clear();
    }
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  /**
   * Apply a new configuration. Peers whose session settings did not change keep their sessions; a changed import
   * policy is re-applied to the Adj-RIB-In and a ROUTE-REFRESH is sent; a changed export policy re-exports
   * (only differences are sent); removed peers get Cease/Peer De-configured; changed peers get Cease/Other
   * Configuration Change and restart; new peers start; a changed ASN or router ID restarts every session; a
   * changed listen address rebinds; static routes are diffed.
   */
  async reconfigure(cfg: SpeakerConfig): Promise<void> {
    const old = this.cfg;
    const next = new Map<string, NormPeer>();
    const ctx = normContext(cfg);
    for (const p of cfg.peers) {
      const n = this.normPeerMemo(p, cfg, ctx);
      if (next.has(n.key)) throw new Error(`peer ${n.address} configured twice`);
      next.set(n.key, n);
    }
    await this.prepareSockets(next.values());
    const newRouterId = ipv4ToU32(cfg.routerId);
    const everything = cfg.asn !== old.asn || newRouterId !== this.routerId;
    this.cfg = cfg;
    this.routerId = newRouterId;
    if (everything) {
      // The RIB keeps a source's identity fixed while it holds routes: take ours out and put them back.
      const mine = [...this.rib.adjRibIn(LOCAL_SOURCE)].map((e) => [e.prefix, e.attrs] as const);
      this.rib.removeSource(LOCAL_SOURCE);
      this.rib.addSource(LOCAL_SOURCE, this.localPeerInfo());
      for (const [prefix, attrs] of mine) this.rib.update(LOCAL_SOURCE, prefix, attrs);
      this.scheduleFlush();
    }
    if (this.running && !sameListen(old.listen, cfg.listen)) {
      // Stop accepting on the old address; sessions it accepted carry on (their close ends the old server).
      void this.closeServer();
      if (cfg.listen) await this.listen(cfg.listen);
    }
    for (const [key, p] of [...this.peerMap]) {
      const n = next.get(key);
      if (!n) {
        this.log.info(`peer ${p.cfg.address}: removed from the configuration`);
        this.stopPeer(p, CeaseSubcode.PEER_DECONFIGURED);
        this.peerMap.delete(key);
        if (this.rib.sourceNames().includes(p.source)) this.rib.removeSource(p.source);
        this.rib.clearAdjRibOut(p.source);
        this.scheduleFlush();
        continue;
      }
      // The very object this peer runs with (a frozen peer config passed again, see normPeerMemo): unchanged.
      if (n === p.cfg && !everything) continue;
      // A new password and nothing else: the key is replaced on the running session (./md5-rekey.ts).
      const sessionChanged = everything || !sameSession(p.cfg, n);
      const rekeyed = sessionChanged && !everything && onlyKeyChanged(p.cfg, n, sameSession) && this.rekeySessions(p, n);
      if (sessionChanged && !rekeyed) {
        this.log.info(`peer ${p.cfg.address}: session settings changed, restarting it`);
        this.stopPeer(p, CeaseSubcode.OTHER_CONFIG_CHANGE);
        const fresh = new PeerState(n, false);
        this.peerMap.set(key, fresh);
        if (this.running) this.startPeer(fresh);
        continue;
      }
      const importChanged = !sameRules(p.cfg.importRules, n.importRules) || p.cfg.allowAsIn !== n.allowAsIn ||
        JSON.stringify(p.cfg.policy.import) !== JSON.stringify(n.policy.import);
      const exportChanged = !sameRules(p.cfg.exportRules, n.exportRules) || JSON.stringify(p.cfg.policy.export) !== JSON.stringify(n.policy.export);
      p.cfg = n;
      p.setPolicy(n);
      // A local timer, not in the OPEN: the running sessions take it (from the next time it is armed).
      for (const s of new Set([p.session, p.incoming])) if (s) s.fsm.cfg = { ...s.fsm.cfg, sendHoldTime: n.sendHoldTime };
      if (importChanged) {
        p.importFilter = compilePrefixList(n.importRules);
        if (this.rib.sourceNames().includes(p.source)) {
          this.rib.setImportPolicy(p.source, this.importPolicy(p));
          // The Adj-RIB-In holds what the peer sent before policy, so the new policy applies at once; the
          // ROUTE-REFRESH also resynchronises with a peer whose table we may have missed parts of.
          this.rib.reimport(p.source);
          this.scheduleFlush();
        }
        const s = p.established;
        if (s) for (const f of s.negotiated?.families ?? []) s.sendRouteRefresh(f);
      }
      if (exportChanged) {
        p.exportFilter = compilePrefixList(n.exportRules);
        if (p.established) this.exportAllTo(p);
      }
    }
    if (!sameAdvertisements(old.prefixAdvertisements, cfg.prefixAdvertisements)) {
      // New communities on what we send: re-export to every session (only the changed routes go out).
      this.tagger = new CommunityTagger(cfg.prefixAdvertisements);
      for (const p of this.peerMap.values()) {
        if (p.established) this.exportAllTo(p);
      }
    }
    for (const [key, n] of next) {
      if (this.peerMap.has(key)) continue;
      const p = new PeerState(n, false);
      this.peerMap.set(key, p);
      if (this.running) this.startPeer(p);
    }
    if (this.running) this.syncListenerKeys();
    this.setStatic(cfg.announce ?? []);
  }

  // ---- TCP-MD5 and GTSM (src/bgp/peer-security.ts) -------------------------------------------------------------

  /** Load the native socket options when a peer needs them; remember why they cannot be had. */
  private async prepareSockets(peers: Iterable<NormPeer>): Promise<void> {
    if ([...peers].some((n) => wantsSocketOptions(n.security))) this.sockoptRefusal = await this.sockets.prepare();
  }

  /** Put the peers' keys on the listener (a peer whose key cannot be set is refused). */
  private syncListenerKeys(): void {
    const peers = [...this.peerMap.values()].filter((p) => !p.refused && !this.refusal(p));
    const errors = this.sockets.syncListener(this.server, peers.map((p) => ({ address: p.cfg.address, ip: p.cfg.ip, sec: p.cfg.security })));
    for (const [address, why] of errors) {
      const p = this.peerMap.get(address);
      if (!p) continue;
      this.log.error(`peer ${address}: refused: ${why}`);
      this.stopPeer(p, CeaseSubcode.OTHER_CONFIG_CHANGE);
      p.refused = why;
      this.emitStatus(p);
    }
  }

  /** Why this peer cannot run here, or null. */
  private refusal(p: PeerState): string | null {
    const sec = p.cfg.security;
    // The OS first: on Windows the password file does not matter, the option does not exist.
    if (wantsSocketOptions(sec) && this.sockoptRefusal) return this.sockoptRefusal;
    return sec.problem;
  }

  // ---- local routes -------------------------------------------------------------------------------------------

  /** Announce a local route (source LOCAL_SOURCE); attrs default to ORIGIN IGP, empty AS_PATH. */
  announce(prefix: Prefix | string, attrs?: AttrsInit): void {
    const p = typeof prefix === 'string' ? parsePrefix(prefix) : prefix;
    this.rib.update(LOCAL_SOURCE, p, makeAttrs({ ...attrs }));
    this.scheduleFlush();
  }

  /** Withdraw a local route. Returns false when it was not announced. */
  withdraw(prefix: Prefix | string): boolean {
    const p = typeof prefix === 'string' ? parsePrefix(prefix) : prefix;
    const had = this.rib.withdraw(LOCAL_SOURCE, p);
    if (had) this.scheduleFlush();
    return had;
  }

  private setStatic(list: readonly string[]): void {
    const next = new Set(list.map((t) => formatPrefix(parsePrefix(t))));
    for (const t of this.staticRoutes) if (!next.has(t)) this.withdraw(t);
    for (const t of next) if (!this.staticRoutes.has(t)) this.announce(t);
    this.staticRoutes = next;
  }

  // ---- status -------------------------------------------------------------------------------------------------

  /** Status of every configured peer, in config order. */
  peers(): PeerStatus[] {
    return [...this.peerMap.values()].map((p) => this.status(p));
  }

  /** The address and port the listener is bound to, or null when not listening. */
  listening(): { address: string; port: number } | null {
    const a = this.server?.address();
    return a && typeof a === 'object' ? { address: stripMapped(a.address), port: a.port } : null;
  }

  private status(p: PeerState): PeerStatus {
    const s = p.established ?? p.session;
    const n = s?.negotiated ?? null;
    const connected = s && (s.state === 'OpenConfirm' || s.state === 'Established');
    const onWire = s && (connected || s.state === 'OpenSent');
    const counts = this.rib.sourceNames().includes(p.source) ? this.rib.counts(p.source) : null;
    const c = s?.counters;
    return {
      address: p.cfg.address,
      port: p.cfg.port,
      asn: p.cfg.asn,
      type: p.cfg.asn === p.cfg.localAs ? 'ibgp' : 'ebgp',
      state: s?.state ?? 'Idle',
      since: s ? s.stateSince : this.now(),
      lastError: p.refused ?? s?.lastError ?? silentDrop(p, s) ?? null,
      uptime: s?.establishedAt != null ? Math.floor((this.now() - s.establishedAt) / 1000) : 0,
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
        sent: p.established ? this.rib.adjRibOut(p.source).size : 0,
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
      bfd: this.bfd?.status(p.cfg.address) ?? null,
      localAsn: p.cfg.localAs,
      allowAsIn: p.cfg.allowAsIn,
    };
  }

  private emitStatus(p: PeerState): void {
    if (this.listenerCount('peer') === 0) return;
    this.emit('peer', this.status(p));
  }

  // ---- peers and sessions -------------------------------------------------------------------------------------

  private normPeer(p: SpeakerPeerConfig): NormPeer {
    return this.normPeerMemo(p, this.cfg, normContext(this.cfg));
  }

  /**
   * normPeerWith, remembered for frozen peer configs (they cannot have changed) under the same speaker-wide
   * settings: the cluster passes its whole mesh to reconfigure on every node event, and re-normalising and
   * comparing 50 unchanged peers was most of an old node's CPU for a join (bench/mesh-join-cpu.ts).
   */
  private normPeerMemo(p: SpeakerPeerConfig, cfg: SpeakerConfig, ctx: string): NormPeer {
    if (!Object.isFrozen(p)) return this.normPeerWith(p, cfg);
    const m = this.normMemo.get(p);
    if (m && m.ctx === ctx) return m.n;
    const n = this.normPeerWith(p, cfg);
    this.normMemo.set(p, { ctx, n });
    return n;
  }

  private normMemo = new WeakMap<SpeakerPeerConfig, { ctx: string; n: NormPeer }>();

  /**
   * Read every peer's password again (a password file was rotated) and apply what changed as reconfigure does: a
   * changed key is replaced on the running session where the OS allows (./md5-rekey.ts), else the session restarts.
   */
  async refreshPasswords(): Promise<void> {
    this.normMemo = new WeakMap(); // frozen (cluster) peer configs are normalised, and their files read, again
    await this.reconfigure(this.cfg);
  }

  /** Put `n`'s TCP-MD5 key on every socket the peer has now; false (then it restarts) when one cannot take it. */
  private rekeySessions(p: PeerState, n: NormPeer): boolean {
    try {
      for (const s of new Set([p.session, p.incoming, p.established])) {
        const sock = s?.tcpSocket;
        if (sock && !sock.destroyed) this.sockets.rekey(sock, n.ip, n.security, n.address);
      }
    } catch (e) {
      this.log.warn(`peer ${n.address}: cannot replace its TCP-MD5 key on the running session (${(e as Error).message}); restarting it`);
      return false;
    }
    this.log.info(`peer ${n.address}: TCP-MD5 key replaced on the running session (not restarted)`);
    return true;
  }

  private normPeerWith(p: SpeakerPeerConfig, cfg: SpeakerConfig): NormPeer {
    const ip = parseIP(p.address);
    const address = formatIP(ip);
    const global = cfg.gracefulRestart || null;
    let gr: NormPeer['gr'] = null;
    if (p.gracefulRestart === false) gr = null;
    else if (typeof p.gracefulRestart === 'object') gr = { restartTime: p.gracefulRestart.restartTime };
    else if (p.gracefulRestart === true) gr = { restartTime: global ? global.restartTime : 120 };
    else gr = global ? { restartTime: global.restartTime } : null;
    const holdTime = p.holdTime ?? 90;
    if (holdTime !== 0 && (holdTime < 3 || holdTime > 65535)) throw new Error(`peer ${address}: hold time ${holdTime} must be 0 or 3..65535`);
    const sendHoldTime = p.sendHoldTime;
    // RFC 9687 4: a non-zero SendHoldTime MUST be greater than the hold time. (setTimeout's limit caps it.)
    if (sendHoldTime !== undefined && !(sendHoldTime === 0 || (sendHoldTime > holdTime && sendHoldTime <= MAX_TIMER_SECONDS))) {
      throw new Error(`peer ${address}: sendHoldTime ${sendHoldTime} must be 0 (off) or more than holdTime (${holdTime}), at most ${MAX_TIMER_SECONDS}`);
    }
    // Validate the lists now, so a bad config fails at construction, not at the first route.
    compilePrefixList(p.import);
    compilePrefixList(p.export);
    new RoutePolicy([...p.policy?.import ?? [], ...p.policy?.export ?? []]);
    let maxPrefixes: MaxPrefixLimits | null;
    try {
      maxPrefixes = normMaxPrefixes(p.maxPrefixes);
    } catch (e) {
      throw new Error(`peer ${address}: ${(e as Error).message}`);
    }
    let security: PeerSecurity;
    try {
      security = peerSecurity(p);
    } catch (e) {
      throw new Error(`peer ${address}: ${(e as Error).message}`);
    }
    const listenAddr = cfg.listen && cfg.listen.address !== '0.0.0.0' && cfg.listen.address !== '::' ? cfg.listen.address : undefined;
    return {
      key: address,
      address,
      ip,
      asn: p.asn,
      port: p.port ?? 179,
      families: p.families && p.families.length > 0 ? [...p.families] : [ip.family === 4 ? 'ipv4' : 'ipv6'],
      holdTime,
      sendHoldTime,
      passive: p.passive === true,
      gr,
      importRules: p.import,
      exportRules: p.export,
      localAddress: p.localAddress ?? listenAddr,
      connectRetry: p.connectRetry ?? 5,
      connectRetryMax: p.connectRetryMax ?? 120,
      idleHold: p.idleHold ?? 1,
      rrClient: p.routeReflectorClient === true,
      allowAsIn: p.allowAsIn ?? 0,
      localAs: p.localAsn ?? cfg.asn,
      policy: { ...p.policy },
      delayOpen: p.delayOpen ?? 0,
      nextHop: { ...p.nextHop },
      nextHopSelf: p.nextHopSelf === true,
      maxPrefixes,
      security,
    };
  }

  private localPeerInfo(): PeerInfo {
    return { type: 'local', routerId: this.routerId, address: null, asn: this.cfg.asn };
  }

  private newSession(p: PeerState, secondary: boolean): Session {
    const c = p.cfg;
    const s = new Session({
      peerAddress: c.address,
      peerPort: c.port,
      peerAs: c.asn,
      localAs: c.localAs,
      routerId: this.routerId,
      localAddress: c.localAddress,
      openSocket: wantsSocketOptions(c.security) ? () => this.sockets.openConnecting(c.ip, c.address, c.security) : undefined,
      families: c.families,
      // F bit always: the routes we announce are the node's own, and forwarding to them survives our restart.
      gracefulRestart: c.gr ? { restartTime: c.gr.restartTime, restarting: p.restarting, forwarding: true } : null,
      fsm: {
        holdTime: c.holdTime,
        sendHoldTime: c.sendHoldTime,
        connectRetryTime: c.connectRetry,
        connectRetryMax: c.connectRetryMax,
        idleHoldTime: c.idleHold,
        delayOpenTime: c.delayOpen,
        passive: c.passive || secondary,
        autoRestart: !secondary,
        random: this.random,
      },
      logger: this.log,
      name: `peer ${c.address}${secondary ? ' (incoming)' : ''}`,
    });
    this.sessions.add(s);
    s.onOpen = (sess, open) => this.collision(p, sess, open);
    s.on('state', (from, to) => this.onState(p, s, from, to));
    s.on('established', () => this.onEstablished(p, s));
    s.on('down', (info) => {
      if (info.notification) p.errors.addNotification(info.notification.direction, info.notification.code, info.notification.subcode);
      this.onDown(p, s, info);
    });
    s.updateHandler = (m, action, problems: readonly AttrProblem[]) => {
      if (action !== 'ok' && problems) p.errors.addProblems(problems);
      this.onUpdate(p, s, m, action);
    };
    s.on('routeRefresh', (family, subtype) => this.onRouteRefresh(p, s, family, subtype));
    return s;
  }

  private startPeer(p: PeerState): void {
    p.type = p.cfg.asn === p.cfg.localAs ? 'ibgp' : 'ebgp';
    p.refused = this.refusal(p);
    if (p.refused) {
      // Never a session that silently cannot come up: the reason is the peer's state in /peers and in the log.
      this.log.error(`peer ${p.cfg.address}: not started: ${p.refused}`);
      this.emitStatus(p);
      return;
    }
    p.session = this.newSession(p, false);
    p.session.start(p.cfg.passive);
    this.emitStatus(p);
  }

  private stopPeer(p: PeerState, subcode: number): void {
    for (const s of [p.session, p.incoming]) {
      if (!s) continue;
      s.stop({ code: ErrorCode.CEASE, subcode });
      this.forgetLater(s);
    }
    this.clearGrTimer(p);
    p.maxPrefix?.clear();
    p.session = p.incoming = p.established = null;
    p.queue.clear();
  }

  /** Drop a session object once its socket has closed. */
  private forgetLater(s: Session): void {
    void s.whenClosed().then(() => this.forget(s));
  }

  private forget(s: Session): void {
    s.abort();
    s.removeAllListeners();
    s.onOpen = null;
    this.sessions.delete(s);
  }

  private onState(p: PeerState, s: Session, from: SessionStateName, to: SessionStateName): void {
    const connected = (x: SessionStateName) => x === 'OpenSent' || x === 'OpenConfirm' || x === 'Established';
    if (s === p.incoming && connected(from) && !connected(to)) {
      // A losing or failed second connection: nothing more to do with it.
      p.incoming = null;
      this.forgetLater(s);
      return;
    }
    if (s === p.session) this.emitStatus(p);
  }

  // ---- listener -----------------------------------------------------------------------------------------------

  private listen(l: { address: string; port: number }): Promise<void> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((sock) => this.onConnection(sock));
      server.once('error', reject);
      // A route reflector's clients (or a mesh) reconnect all at once after a restart: Node's default backlog of
      // 511 overflowed with 1,000 clients while the event loop was busy reflecting (bench:bgp-reflector), and each
      // dropped SYN costs that client a retry. The kernel caps it at net.core.somaxconn (4096 by default).
      server.listen({ host: l.address, port: l.port, backlog: LISTEN_BACKLOG }, () => {
        server.off('error', reject);
        server.on('error', (e) => this.log.error(`listener: ${e.message}`));
        this.server = server;
        this.log.info(`listening on ${l.address} port ${(server.address() as net.AddressInfo).port}`);
        resolve();
      });
    });
  }

  /** Count a refused connection; log it if the address's minute is up (src/bgp/refused-log.ts). */
  private noteRefused(address: string): void {
    const line = this.refusedLog.note(address, this.now());
    if (line) this.logRefused(line);
    this.armRefusedFlush();
  }

  /** Counts of addresses that then go quiet are logged when their minute is up (checked once a minute). */
  private armRefusedFlush(): void {
    if (this.refusedTimer || !this.refusedLog.waiting()) return;
    this.refusedTimer = setTimeout(() => {
      this.refusedTimer = null;
      this.flushRefused(false);
      this.armRefusedFlush();
    }, REFUSED_LOG_INTERVAL_MS);
    this.refusedTimer.unref();
  }

  private flushRefused(all: boolean): void {
    if (all && this.refusedTimer) {
      clearTimeout(this.refusedTimer);
      this.refusedTimer = null;
    }
    for (const line of this.refusedLog.flush(this.now(), all)) this.logRefused(line);
  }

  private logRefused(l: RefusedLine): void {
    const what = l.count === 1 ? 'connection' : `${l.count} connections`;
    if (l.address === null) this.log.info(`${what} refused from other addresses: not configured peers (not logged one by one)`, { count: l.count });
    else this.log.info(`${what} from ${l.address} refused: not a configured peer`, { from: l.address, count: l.count });
  }

  private closeServer(): Promise<void> {
    const srv = this.server;
    this.server = null;
    if (!srv) return Promise.resolve();
    return new Promise((resolve) => srv.close(() => resolve()));
  }

  private onConnection(sock: net.Socket): void {
    const remote = sock.remoteAddress ? stripMapped(sock.remoteAddress) : '';
    let key: string;
    try {
      key = peerSourceName(remote);
    } catch {
      sock.destroy();
      return;
    }
    const p = this.peerMap.get(key);
    if (!p) {
      // Not a peer: closed at once, nothing read or sent (as BIRD does), so a scan costs a socket for a moment only.
      sock.on('error', () => {});
      sock.destroy();
      this.noteRefused(key);
      return;
    }
    const s = p.session;
    if (!s || !this.running) {
      // RFC 4486: a connection we will not use gets Cease/Connection Rejected.
      this.log.info(`connection from ${remote} rejected: ${p.refused ? `peer refused (${p.refused})` : 'peer not running'}`);
      rejectSocket(sock);
      return;
    }
    const st = s.state;
    if (st === 'Idle') {
      if (!s.fsm.enabled || s.fsm.damped || !s.fsm.isRunning('IdleHold')) {
        this.log.info(`connection from ${remote} rejected: peer is ${s.fsm.damped ? 'damped' : 'stopped'}`);
        rejectSocket(sock);
        return;
      }
    }
    if (wantsSocketOptions(p.cfg.security)) {
      try {
        this.sockets.onAccepted(sock, p.cfg.ip, p.cfg.security);
      } catch (e) {
        this.log.error(`connection from ${remote} rejected: ${(e as Error).message}`);
        rejectSocket(sock);
        return;
      }
    }
    if (st === 'Idle' || st === 'Active') {
      s.accept(sock);
      return;
    }
    // We have a connection of our own, or one on its way (Connect): run the new one in its own FSM until its OPEN
    // tells us which one to keep (collision detection), or that the peer restarted. Dropping our own attempt
    // instead would be symmetric: two speakers connecting at once would each kill the other's connection.
    if (p.incoming) {
      const old = p.incoming;
      p.incoming = null;
      old.stop({ code: ErrorCode.CEASE, subcode: CeaseSubcode.CONNECTION_COLLISION });
      this.forgetLater(old);
    }
    const second = this.newSession(p, true);
    p.incoming = second;
    second.start(true);
    second.accept(sock);
  }

  /**
   * RFC 4271 6.8 collision detection, at the OPEN of connection `s`. Returns false to dump `s`; may dump the other
   * connection instead. RFC 4724 4.2: an OPEN from a peer whose previous session is still Established means the peer
   * restarted: the old session goes as if its TCP had failed (its routes become stale when GR was negotiated).
   */
  private collision(p: PeerState, s: Session, open: OpenMessage): boolean {
    const other = s === p.session ? p.incoming : p.session;
    if (!other || other.state === 'Idle' || other.state === 'Connect' || other.state === 'Active') return true;
    if (other.state === 'Established') {
      if (open.capabilities.some((c) => c.kind === 'graceful-restart') && p.peerGr) {
        this.log.info(`peer ${p.cfg.address}: new OPEN while Established: the peer restarted (graceful restart)`);
        other.dispatch({ type: 'TcpConnectionFails', reason: 'peer restarted (new connection while Established)' });
        return true;
      }
      this.log.info(`peer ${p.cfg.address}: collision with the Established session: new connection closed`);
      return false;
    }
    if (s.incoming === other.incoming) {
      // Two connections in the same direction (an earlier one the peer gave up on but we still hold): the newer
      // one is what the peer is using now.
      other.dispatch({ type: 'OpenCollisionDump' });
      return true;
    }
    // The connection initiated by the side with the higher BGP Identifier survives (RFC 6286 2.3: on equal
    // identifiers, the higher AS number).
    const peerId = open.bgpId >>> 0;
    const localWins = this.routerId !== peerId ? this.routerId > peerId : p.cfg.localAs > p.cfg.asn;
    const keep = localWins ? (s.incoming ? other : s) : (s.incoming ? s : other);
    this.log.info(`peer ${p.cfg.address}: connection collision, keeping the ${keep.incoming ? 'incoming' : 'outgoing'} connection`);
    if (keep === s) {
      other.dispatch({ type: 'OpenCollisionDump' });
      return true;
    }
    return false;
  }

  // ---- session events -----------------------------------------------------------------------------------------

  private onEstablished(p: PeerState, s: Session): void {
    if (s === p.incoming) {
      // The second connection won: it becomes the peer's session, with the peer's restart behaviour.
      const old = p.session;
      p.incoming = null;
      p.session = s;
      s.fsm.cfg = { ...s.fsm.cfg, autoRestart: true, passive: p.cfg.passive };
      s.cfg = { ...s.cfg, name: `peer ${p.cfg.address}` };
      if (old && old !== s) {
        old.abort();
        this.forget(old);
      }
    }
    if (s !== p.session) return;
    const neg = s.negotiated!;
    p.established = s;
    p.queue.clear();
    p.eorReceived.clear();
    p.warnedNoNextHop.clear();
    // Our R bit is for the first session after our restart only.
    if (p.restarting) {
      p.restarting = false;
      for (const x of [p.session, p.incoming]) if (x?.cfg.gracefulRestart) x.cfg.gracefulRestart = { ...x.cfg.gracefulRestart, restarting: false };
    }
    this.computeNextHops(p, s);
    const info: PeerInfo = { type: p.type, routerId: s.remoteOpen!.bgpId, address: p.cfg.ip, asn: p.cfg.asn };
    const known = this.rib.peerInfo(p.source);
    if (known && (known.routerId !== info.routerId || known.type !== info.type || known.asn !== info.asn)) {
      // Routes held under the old identity (stale from a restart) cannot be kept under a new one.
      this.rib.dropSource(p.source);
      this.endHelping(p);
    }
    this.rib.addSource(p.source, info, { importPolicy: this.importPolicy(p) });
    if (p.helping) {
      this.clearGrTimer(p);
      const gr = neg.gracefulRestart;
      // RFC 4724 4.2: without GR in the new OPEN, or without the F bit for a family, stale routes go at once.
      if (!gr || neg.families.some((f) => !gr.forwarding.includes(f))) {
        this.log.info(`peer ${p.cfg.address}: back without preserved forwarding state: stale routes removed`);
        this.sweep(p);
      } else {
        p.grTimer = setTimeout(() => {
          p.grTimer = null;
          this.log.warn(`peer ${p.cfg.address}: no End-of-RIB within ${STALE_PATH_TIME}s: stale routes removed`);
          this.sweep(p);
        }, STALE_PATH_TIME * 1000);
      }
    }
    p.peerGr = neg.gracefulRestart;
    p.maxPrefix?.reset();
    this.rib.clearAdjRibOut(p.source);
    this.exportAllTo(p);
    for (const f of neg.families) p.queue.pushEndOfRib(f);
    this.pump(p);
    this.emitStatus(p);
  }

  private onDown(p: PeerState, s: Session, info: DownInfo): void {
    if (!info.wasEstablished || s !== p.established) {
      if (s === p.session) this.emitStatus(p);
      return;
    }
    p.established = null;
    p.queue.clear();
    this.rib.clearAdjRibOut(p.source);
    const gr = p.peerGr;
    if (gr && info.notification === null && gr.restartTime > 0 && this.running) {
      // RFC 4724 4.2 helper: keep the peer's routes, marked stale, until it returns or the restart time passes.
      const n = this.rib.markStale(p.source);
      p.helping = true;
      this.log.info(`peer ${p.cfg.address}: down (${info.reason}); graceful restart: keeping ${n} routes as stale for up to ${gr.restartTime}s`);
      this.clearGrTimer(p);
      p.grTimer = setTimeout(() => {
        p.grTimer = null;
        this.log.warn(`peer ${p.cfg.address}: did not come back within its restart time: stale routes removed`);
        this.sweep(p);
      }, gr.restartTime * 1000);
    } else {
      this.log.info(`peer ${p.cfg.address}: down (${info.reason})`);
      if (this.rib.sourceNames().includes(p.source)) this.rib.dropSource(p.source);
      this.endHelping(p);
    }
    this.scheduleFlush();
    this.emitStatus(p);
  }

  private sweep(p: PeerState): void {
    if (this.rib.sourceNames().includes(p.source)) {
      const n = this.rib.sweepStale(p.source);
      if (n > 0) this.log.info(`peer ${p.cfg.address}: ${n} stale routes removed`);
    }
    this.endHelping(p);
    this.scheduleFlush();
  }

  private endHelping(p: PeerState): void {
    p.helping = false;
    this.clearGrTimer(p);
  }

  private clearGrTimer(p: PeerState): void {
    if (p.grTimer) clearTimeout(p.grTimer);
    p.grTimer = null;
  }

  private onUpdate(p: PeerState, s: Session, m: UpdateMessage, action: string): void {
    if (s !== p.established) return;
    const src = p.source;
    const fams = s.negotiated!.families;
    const v4 = fams.includes('ipv4');
    // RFC 7606 2: a treat-as-withdraw UPDATE is never End-of-RIB, whatever is left of it.
    const eor = action === 'treat-as-withdraw' ? null : endOfRib(m);
    if (eor) {
      const f = familyOfAfi(eor.afi, eor.safi);
      if (f) this.onEndOfRib(p, f);
      return;
    }
    if (v4) this.withdrawList(src, m.withdrawn);
    if (m.mpUnreach && familyOk(m.mpUnreach.afi, m.mpUnreach.safi, fams)) this.withdrawList(src, m.mpUnreach.withdrawn);
    if (action === 'treat-as-withdraw' || m.attrs === null) {
      // RFC 7606 2: every prefix the UPDATE carries is withdrawn.
      if (v4) this.withdrawList(src, m.nlri);
      if (m.mpReach && familyOk(m.mpReach.afi, m.mpReach.safi, fams)) this.withdrawList(src, m.mpReach.nlri);
    } else {
      // The import policy (importPolicy's two halves): the attributes' half once per UPDATE, the prefix list per prefix.
      const attrs = m.attrs;
      const loop = this.importedAttrs(p, attrs) === null;
      if (v4 && m.nlri.count > 0) this.ingestList(p, m.nlri, attrs, loop);
      const mp = m.mpReach;
      if (mp && mp.nlri.count > 0 && familyOk(mp.afi, mp.safi, fams)) {
        // attrs.nextHop is the classic NEXT_HOP when the UPDATE also has classic NLRI.
        const a = m.nlri.count > 0 ? withAttrs(attrs, { nextHop: mp.nextHop, nextHopLinkLocal: mp.nextHopLinkLocal }) : attrs;
        this.ingestList(p, mp.nlri, a, loop);
      }
      if (p.maxPrefix) this.checkMaxPrefix(p, s);
    }
    this.scheduleFlush();
  }

  /** One UPDATE's prefixes into the RIB. A method, not a closure per UPDATE: that was 16% of a full table's allocation. */
  private ingestList(p: PeerState, list: PrefixList, a: PathAttrs, loop: boolean): void {
    const src = p.source;
    // A route policy may change attributes per prefix: that peer's UPDATEs take the per-prefix path.
    if (!p.importRP || loop) {
      this.rib.updateList(src, list, a, loop ? null : a, p.importFilter ? p.importFilter.acceptor : undefined);
      return;
    }
    const pol = this.importPolicy(p);
    for (let i = 0; i < list.count; i++) {
      const prefix = list.prefix(i);
      this.rib.update(src, prefix, a, pol(prefix, a, src));
    }
  }

  /** Close the session when the peer holds more prefixes than allowed (RFC 4486 Cease 1); restart it later. */
  private checkMaxPrefix(p: PeerState, s: Session): void {
    const over = p.maxPrefix!.check(this.rib.receivedByFamily(p.source), s.negotiated!.families, (msg) => this.log.warn(`peer ${p.cfg.address}: ${msg}`));
    if (!over) return;
    p.errors.add('max-prefix', over.family);
    const restart = p.maxPrefix!.limits.restart;
    this.log.error(`peer ${p.cfg.address}: ${over.count} ${over.family} prefixes exceed the limit ${over.limit}: closing the session` +
      (restart > 0 ? `, restart in ${restart}s` : ', restart on reconfiguration'));
    s.stop(over.notification);
    p.maxPrefix!.tripped(over, this.now(), () => {
      if (!this.running || this.peerMap.get(p.cfg.key) !== p) return;
      this.log.info(`peer ${p.cfg.address}: max-prefix restart time passed: starting the session again`);
      for (const old of [p.session, p.incoming]) if (old) this.forgetLater(old);
      p.session = p.incoming = null;
      this.startPeer(p);
    });
  }

  private withdrawList(src: string, list: PrefixList): void {
    for (let i = 0; i < list.count; i++) this.rib.withdraw(src, list.prefix(i));
  }

  private onEndOfRib(p: PeerState, f: AddressFamily): void {
    p.eorReceived.add(f);
    this.log.debug(`peer ${p.cfg.address}: End-of-RIB ${f}`);
    const fams = p.established?.negotiated?.families ?? [];
    if (p.helping && fams.every((x) => p.eorReceived.has(x))) {
      this.log.info(`peer ${p.cfg.address}: End-of-RIB after restart: removing routes it did not re-send`);
      this.sweep(p);
    }
    this.emitStatus(p);
  }

  private onRouteRefresh(p: PeerState, s: Session, family: AddressFamily, subtype: number): void {
    if (s !== p.established || subtype !== 0) return;
    // RFC 2918: re-send the whole Adj-RIB-Out of the family.
    const groups = new Map<PathAttrs, Prefix[]>();
    for (const { prefix, attrs } of this.rib.adjRibOut(p.source).entries()) {
      if ((prefix.family === 4 ? 'ipv4' : 'ipv6') !== family) continue;
      const l = groups.get(attrs);
      if (l) l.push(prefix);
      else groups.set(attrs, [prefix]);
    }
    this.log.info(`peer ${p.cfg.address}: route refresh ${family}: re-sending ${[...groups.values()].reduce((n, l) => n + l.length, 0)} routes`);
    for (const [attrs, prefixes] of groups) p.queue.pushAnnounce(attrs, prefixes);
    this.pump(p);
  }

  // ---- import -------------------------------------------------------------------------------------------------

  // The import policy in two halves, so the ingest path can apply the first once per UPDATE: the attributes
  // (dropped when they loop back to us), then the peer's prefix list.
  private importedAttrs(p: PeerState, attrs: PathAttrs): PathAttrs | null {
    const c = p.cfg;
    // Our AS, and the peer's local AS when it differs (RFC 4271 9.1.2, allowas-in).
    const loop = isLoop(attrs, this.routerId) || ownAsLoop(attrs, this.cfg.asn, c.allowAsIn) ||
      (c.localAs !== this.cfg.asn && ownAsLoop(attrs, c.localAs, c.allowAsIn)) || clusterLoop(attrs, this.clusterIdNum());
    return loop ? null : attrs;
  }

  // Asked per route and peer on export (and per UPDATE on import): parsed once per configured text, not per call.
  private clusterIdText: string | undefined = undefined;
  private clusterIdValue: number | undefined = undefined;

  private clusterIdNum(): number | undefined {
    const text = this.cfg.clusterId;
    if (text !== this.clusterIdText) {
      this.clusterIdText = text;
      this.clusterIdValue = text ? ipv4ToU32(text) : undefined;
    }
    return this.clusterIdValue;
  }

  // peerMap's key of a source address, formatted once per address object (sources keep theirs for their life).
  private readonly addressKeys = new WeakMap<IP, string>();

  private addressKey(ip: IP): string {
    let k = this.addressKeys.get(ip);
    if (k === undefined) this.addressKeys.set(ip, (k = formatIP(ip)));
    return k;
  }

  private importPolicy(p: PeerState): ImportPolicy {
    return (prefix, attrs) => {
      if (this.importedAttrs(p, attrs) === null) return null;
      if (p.importFilter && !p.importFilter.accepts(prefix)) return null;
      return p.importRP ? p.importRP.evaluate(prefix, attrs, { peerType: p.type, fromPeer: true }) : attrs;
    };
  }

  // ---- export -------------------------------------------------------------------------------------------------

  private onRibChanges(batch: RibChangeBatch): void {
    for (const p of this.peerMap.values()) {
      if (!p.established) continue;
      p.queue.push(this.rib.exportChanges(p.source, batch, this.exportPolicyFor(p)));
      this.pump(p);
    }
  }

  private exportAllTo(p: PeerState): void {
    p.queue.push(this.rib.exportAll(p.source, this.exportPolicyFor(p)));
    this.pump(p);
  }

  /** The session's export policy: it reads the peer's filters, route policy and our tagger when called, so it
   * stays right across reconfiguration; what it fixes (families, local AS, peer type) is the session's. */
  private exportPolicyFor(p: PeerState): ExportPolicy {
    if (p.exportPolicy === null || p.exportPolicyOf !== p.established) {
      p.exportPolicy = this.exports.policy(p, p.established?.negotiated?.families ?? []);
      p.exportPolicyOf = p.established;
    }
    return p.exportPolicy;
  }

  private computeNextHops(p: PeerState, s: Session): void {
    const nh = p.cfg.nextHop;
    const local = s.localIP();
    p.nh4 = nh.ipv4 ? parseIP(nh.ipv4) : local?.family === 4 ? local : null;
    p.nh6ll = nh.ipv6LinkLocal ? parseIP(nh.ipv6LinkLocal) : null;
    if (nh.ipv6) p.nh6 = parseIP(nh.ipv6);
    else if (local?.family === 6) {
      p.nh6 = local;
      if (!p.nh6ll && s.localAddress) p.nh6ll = linkLocalFor(s.localAddress, p.cfg.ip);
      if (p.nh6ll && isLinkLocal(local)) p.nh6ll = null;
    } else if (local?.family === 4) {
      // IPv6 routes over an IPv4 session: the IPv4-mapped address, as BIRD and FRR do.
      p.nh6 = new IP(6, 0, 0, 0xffff, local.w0);
    } else p.nh6 = null;
  }

  // ---- the write pump (src/bgp/export-queue.ts): UPDATEs are encoded only while the socket takes them -------------

  private pump(p: PeerState): void {
    const s = p.established;
    if (!s) return;
    const neg = s.negotiated!;
    const opts = { fourOctetAs: neg.fourOctetAs, extendedMessage: neg.extendedMessage, selfNextHop4: p.nh4, selfNextHop6: p.nh6, selfNextHop6ll: p.nh6ll };
    p.queue.pump(s, opts, {
      error: (m) => this.log.error(`peer ${p.cfg.address}: cannot encode UPDATE: ${m}`),
      endOfRibSent: (f) => this.log.debug(`peer ${p.cfg.address}: sent End-of-RIB ${f}`),
      resume: (from) => {
        if (p.established === from) this.pump(p);
      },
    });
  }

  private scheduleFlush(): void {
    this.flushPacer.request();
  }
}

// ---- helpers ------------------------------------------------------------------------------------------------------

/** The BGP listener's accept queue (see listen). */
const LISTEN_BACKLOG = 4096;

/** Our own reflected route (RFC 4456 8); own AS in the path is ownAsLoop (src/bgp/loops.ts, with allowas-in). */
function isLoop(attrs: PathAttrs, routerId: number): boolean {
  return attrs.originatorId === routerId;
}


function familyOk(afi: number, safi: number, fams: readonly AddressFamily[]): boolean {
  const f = familyOfAfi(afi, safi);
  return f !== null && fams.includes(f);
}

function stripMapped(a: string): string {
  return a.startsWith('::ffff:') && net.isIPv4(a.slice(7)) ? a.slice(7) : a;
}

function sameListen(a: SpeakerConfig['listen'], b: SpeakerConfig['listen']): boolean {
  if (a === false || b === false) return a === b;
  return a.address === b.address && a.port === b.port;
}

/** Settings that need a new session when they change (everything but the policies). */
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

/** The speaker-wide settings normPeerWith reads, as a key for normPeerMemo. */
function normContext(cfg: SpeakerConfig): string {
  return JSON.stringify([cfg.asn, cfg.gracefulRestart || null, cfg.listen ? cfg.listen.address : null]);
}

function sameSession(a: NormPeer, b: NormPeer): boolean {
  const strip = (n: NormPeer) => ({ ...n, ip: undefined, importRules: undefined, exportRules: undefined, allowAsIn: undefined, policy: undefined, sendHoldTime: undefined });
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}

function rejectSocket(sock: net.Socket): void {
  sock.on('error', () => {});
  sock.end(encodeNotification(ErrorCode.CEASE, CeaseSubcode.CONNECTION_REJECTED));
  setTimeout(() => sock.destroy(), 2000).unref();
}

function isLinkLocal(ip: IP): boolean {
  return ip.family === 6 && ip.w0 >>> 22 === 0x3fa; // fe80::/10
}

/** Our link-local address on the interface that holds `localAddress`, when `peer` is on that link. */
function linkLocalFor(localAddress: string, peer: IP): IP | null {
  for (const addrs of Object.values(os.networkInterfaces())) {
    if (!addrs) continue;
    const mine = addrs.find((a) => a.family === 'IPv6' && a.address === localAddress);
    if (!mine || !mine.cidr) continue;
    const { ip, len } = parseIPWithLen(mine.cidr);
    const onLink = isLinkLocal(peer) || prefixContainsIP(prefixOf(ip, len), peer);
    if (!onLink) return null;
    const ll = addrs.find((a) => a.family === 'IPv6' && a.address.startsWith('fe80'));
    return ll ? parseIP(ll.address.split('%')[0]) : null;
  }
  return null;
}
