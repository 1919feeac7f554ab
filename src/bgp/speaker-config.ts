// The speaker's configuration: what its caller passes (SpeakerConfig with its peers, SpeakerOptions) and each
// peer's settings normalised once (NormPeer: defaults filled in, lists and limits checked), which the rest of the
// speaker reads. Its own file: the daemon and the config loader use these types without the speaker's machinery.
import type { BfdSource } from '../bfd/manager.ts';
import { formatIP, parseIP, type IP } from '../net/ip.ts';
import type { SocketOptionsHost } from '../platform/sockopt.ts';
import type { Rib } from '../rib/rib.ts';
import type { PrefixAdvertisement } from './communities.ts';
import { normMaxPrefixes, type MaxPrefixesConfig, type MaxPrefixLimits } from './maxprefix.ts';
import { peerSecurity, type PeerSecurity } from './peer-security.ts';
import type { SecretSource } from '../store/etcd-auth.ts';
import { compilePrefixList, type PrefixRule } from './prefix-filter.ts';
import { RoutePolicy, type PolicyRule } from './route-policy.ts';
import type { AddressFamily, SessionLogger } from './session.ts';

// ---- configuration ----------------------------------------------------------------------------------------------

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
  password?: SecretSource;
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

/** The speaker's logger: the one its sessions take (src/bgp/session.ts). */
export type Logger = SessionLogger;

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

export interface StopOptions {
  /**
   * true (default): send Cease/Administrative Shutdown to every peer, which then drops our routes.
   * false: close the connections without a NOTIFICATION, as a crash would: graceful-restart peers keep our routes
   * as stale (restart then with { restarted: true }).
   */
  graceful?: boolean;
}

// ---- normalised peers -------------------------------------------------------------------------------------------

/** The RIB source name of a configured peer: its address in canonical text. */
export function peerSourceName(address: string): string {
  return formatIP(parseIP(address));
}

/** The largest timer setTimeout keeps (2^31 - 1 ms), in whole seconds. */
const MAX_TIMER_SECONDS = 2147483;

export interface NormPeer {
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

/** A peer's settings with every default filled in, its lists and limits checked (throws, naming the peer). */
export function normalisePeer(p: SpeakerPeerConfig, cfg: SpeakerConfig): NormPeer {
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

/** The speaker-wide settings normalisePeer reads, as a key for the speaker's memo of normalised peers. */
export function normContext(cfg: SpeakerConfig): string {
  return JSON.stringify([cfg.asn, cfg.gracefulRestart || null, cfg.listen ? cfg.listen.address : null]);
}

/** Settings that need a new session when they change (everything but the policies). */
export function sameSession(a: NormPeer, b: NormPeer): boolean {
  const strip = (n: NormPeer) => ({ ...n, ip: undefined, importRules: undefined, exportRules: undefined, allowAsIn: undefined, policy: undefined, sendHoldTime: undefined });
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}

export function sameListen(a: SpeakerConfig['listen'], b: SpeakerConfig['listen']): boolean {
  if (a === false || b === false) return a === b;
  return a.address === b.address && a.port === b.port;
}
