// The BGP speaker: configured peers (active and passive), a listener, connection collision detection, and the
// glue between sessions and the RIB (import policy into Adj-RIB-In, export from the change feed through each
// peer's Adj-RIB-Out). Sessions (src/bgp/session.ts) do the wire and the FSM; this file decides what routes go
// where, like GoBGP's pkg/server over its FSM or BIRD's proto/bgp over nest.
import { EventEmitter } from 'node:events';
import type { Prefix } from '../net/ip.ts';
import type { AttrsInit } from '../rib/attrs.ts';
import { Rib } from '../rib/rib.ts';

// ---- configuration ----------------------------------------------------------------------------------------------

export type AddressFamily = 'ipv4' | 'ipv6';

/**
 * One prefix-list rule: matches prefixes inside `prefix` whose length is in ge..le (both absent: exactly the
 * rule's length; only le: rule length..le; only ge: ge..max). Lists are evaluated first match wins; a prefix
 * that matches no rule is rejected. An absent list accepts everything.
 */
export interface PrefixRule {
  prefix: string;
  ge?: number;
  le?: number;
  /** Default 'accept'. */
  action?: 'accept' | 'reject';
}

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
  /** Clock for PeerStatus.since/uptime, ms since the epoch. Default Date.now. */
  now?: () => number;
}

// ---- status -------------------------------------------------------------------------------------------------

export type SessionStateName = 'Idle' | 'Connect' | 'Active' | 'OpenSent' | 'OpenConfirm' | 'Established';

export interface NegotiatedCapabilities {
  /** Families both sides announced (and we are configured for). */
  families: AddressFamily[];
  routeRefresh: boolean;
  fourOctetAs: boolean;
  extendedMessage: boolean;
  /** The peer's graceful restart capability, when both sides do graceful restart. */
  gracefulRestart: {
    restartTime: number;
    /** The peer's R bit. */
    restarting: boolean;
    /** Families the peer preserves forwarding for (F bit). */
    forwarding: AddressFamily[];
  } | null;
}

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
  /** Our address on the current connection. */
  localAddress: string | null;
  /** Negotiated hold time (seconds) once OPENs are exchanged, else null. */
  holdTime: number | null;
  keepaliveTime: number | null;
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
  return address;
}

/** The RIB source of static and announce()d routes. */
export const LOCAL_SOURCE = 'local';

/**
 * A BGP-4 speaker. Lifecycle: new Speaker(cfg, opts) → (announce() local routes) → await start() → ... →
 * await stop(). Routes learned from peers are in `rib` under source peerSourceName(address); local routes are
 * under LOCAL_SOURCE, and any other RIB source with PeerInfo type 'local' (e.g. the daemon's IPAM routes) is
 * exported like them.
 */
export class Speaker extends EventEmitter<SpeakerEvents> {
  /** The RIB (Loc-RIB, Adj-RIB-In per peer, Adj-RIB-Out per peer); query it for routes. */
  readonly rib: Rib;

  constructor(cfg: SpeakerConfig, opts: SpeakerOptions = {}) {
    super();
    this.rib = opts.rib ?? new Rib();
    void cfg;
  }

  /** Bind the listener (if any) and start every peer. Resolves once listening. */
  async start(): Promise<void> {
    throw new Error('not implemented yet');
  }

  /** Stop all sessions and the listener. Resolves when every socket is closed. */
  async stop(_opts: StopOptions = {}): Promise<void> {
    throw new Error('not implemented yet');
  }

  /**
   * Apply a new configuration. Peers whose session settings did not change keep their sessions; a changed import
   * policy is re-applied to the Adj-RIB-In and a ROUTE-REFRESH is sent; a changed export policy re-exports
   * (only differences are sent); removed peers get Cease/Peer De-configured; changed peers get Cease/Other
   * Configuration Change and restart; new peers start; a changed ASN or router ID restarts every session; a
   * changed listen address rebinds; static routes are diffed.
   */
  async reconfigure(_cfg: SpeakerConfig): Promise<void> {
    throw new Error('not implemented yet');
  }

  /** Announce a local route (source LOCAL_SOURCE); attrs default to ORIGIN IGP, empty AS_PATH. */
  announce(_prefix: Prefix | string, _attrs?: AttrsInit): void {
    throw new Error('not implemented yet');
  }

  /** Withdraw a local route. Returns false when it was not announced. */
  withdraw(_prefix: Prefix | string): boolean {
    throw new Error('not implemented yet');
  }

  /** Status of every configured peer, in config order. */
  peers(): PeerStatus[] {
    return [];
  }

  /** The address and port the listener is bound to, or null when not listening. */
  listening(): { address: string; port: number } | null {
    return null;
  }
}
