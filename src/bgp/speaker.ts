// The BGP speaker: configured peers (active and passive), their sessions' lifecycle, reconfiguration, and the glue
// between sessions and the RIB. Sessions (src/bgp/session.ts) do the wire and the FSM; this file decides when
// routes move, like GoBGP's pkg/server over its FSM or BIRD's proto/bgp over nest. Its parts: the config and peer
// normalisation (speaker-config.ts), a peer's state and status (peer.ts), accepting connections and collision
// detection (listener.ts), graceful restart (graceful-restart.ts), UPDATEs in (peer-import.ts), routes out
// (peer-export.ts).
import { EventEmitter } from 'node:events';
import { formatIP, parsePrefix, formatPrefix, type IP, type Prefix } from '../net/ip.ts';
import { makeAttrs, type AttrsInit } from '../rib/attrs.ts';
import type { PeerInfo } from '../rib/bestpath.ts';
import { Rib } from '../rib/rib.ts';
import type { BfdSource } from '../bfd/manager.ts';
import { hostSocketOptions } from '../platform/sockopt.ts';
import { CeaseSubcode, ErrorCode, endOfRib, shutdownData, type AttrProblem, type UpdateMessage } from './codec/index.ts';
import { CommunityTagger, sameAdvertisements } from './communities.ts';
import { ExportPolicies } from './export-policy.ts';
import { FLUSH_GAP_MS, FlushPacer } from './flush-pacer.ts';
import type { DownInfo } from './fsm.ts';
import { clearGrTimer, endRestarting, GracefulRestart } from './graceful-restart.ts';
import { collision, Listener } from './listener.ts';
import { onlyKeyChanged } from './md5-rekey.ts';
import { countPeers, peerState, peerStatus, PeerState, type PeerStatus, type SessionStateName, type SpeakerEvents } from './peer.ts';
import { computeNextHops, Exporter } from './peer-export.ts';
import { Importer } from './peer-import.ts';
import { PeerSockets, wantsSocketOptions } from './peer-security.ts';
import { compilePrefixList, sameRules } from './prefix-filter.ts';
import { Session, familyOfAfi, ipv4ToU32, silentLogger, type AddressFamily } from './session.ts';
import {
  normalisePeer, normContext, peerSourceName, sameListen, sameSession,
  type Logger, type NormPeer, type SpeakerConfig, type SpeakerOptions, type SpeakerPeerConfig, type StopOptions,
} from './speaker-config.ts';

// ---- the speaker ------------------------------------------------------------------------------------------------

/** The RIB source of static and announce()d routes. */
export const LOCAL_SOURCE = 'local';

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
  private unsubscribe: (() => void) | null = null;
  private running = false;
  private readonly flushPacer: FlushPacer;
  private staticRoutes = new Set<string>();
  private readonly sessions = new Set<Session>();
  private readonly sockets: PeerSockets;
  /** Why peers with a password or ttlSecurity cannot run here (null: they can, or none has asked yet). */
  private sockoptRefusal: string | null = null;
  private tagger: CommunityTagger;
  /** Accepting connections (./listener.ts). */
  private readonly listener: Listener;
  /** Graceful restart's helper role (./graceful-restart.ts). */
  private readonly gr: GracefulRestart;
  /** Peers' UPDATEs into the RIB (./peer-import.ts). */
  private readonly importer: Importer;
  /** Routes out to peers (./peer-export.ts). */
  private readonly exporter: Exporter;
  /** Export policies per session, rewrites shared by peers of one kind (src/bgp/export-policy.ts). */
  private readonly exports = new ExportPolicies({
    clusterId: () => this.importer.clusterIdNum(),
    isRrClient: (src) => (src.address ? this.peerMap.get(this.addressKey(src.address))?.cfg.rrClient === true : false),
    tag: (prefix, a) => this.tagger.tag(prefix, a),
    warn: (m) => this.log.warn(m),
  });

  // peerMap's key of a source address, formatted once per address object (sources keep theirs for their life).
  private readonly addressKeys = new WeakMap<IP, string>();

  private addressKey(ip: IP): string {
    let k = this.addressKeys.get(ip);
    if (k === undefined) this.addressKeys.set(ip, (k = formatIP(ip)));
    return k;
  }

  constructor(cfg: SpeakerConfig, opts: SpeakerOptions = {}) {
    super();
    // The RIB's own flush requests go through the same pacer as the speaker's (src/bgp/flush-pacer.ts).
    this.flushPacer = new FlushPacer(() => this.rib.flush(), opts.flushGapMs ?? FLUSH_GAP_MS);
    this.rib = opts.rib ?? new Rib({ schedule: () => this.scheduleFlush(), scheduleFull: () => this.flushPacer.requestSoon() });
    this.log = opts.logger ?? silentLogger;
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
    this.restarted = opts.restarted === true;
    this.cfg = cfg;
    this.routerId = ipv4ToU32(cfg.routerId);
    this.sockets = new PeerSockets(opts.socketOptions ?? hostSocketOptions());
    this.tagger = new CommunityTagger(cfg.prefixAdvertisements);
    this.listener = new Listener({
      log: this.log,
      sockets: this.sockets,
      now: () => this.now(),
      running: () => this.running,
      peer: (key) => this.peerMap.get(key),
      newSession: (p, secondary) => this.newSession(p, secondary),
      forgetLater: (s) => this.forgetLater(s),
    });
    this.gr = new GracefulRestart(this.rib, this.log, () => this.scheduleFlush());
    this.importer = new Importer(this.rib, this.routerId, cfg);
    this.exporter = new Exporter(this.rib, this.peerMap, this.exports, this.log);
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
    this.unsubscribe = this.rib.subscribe((batch) => this.exporter.onRibChanges(batch));
    if (this.cfg.listen) await this.listener.listen(this.cfg.listen);
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
    const serverClosed = this.listener.close();
    for (const p of this.peerMap.values()) {
      for (const s of [p.session, p.incoming]) {
        if (!s) continue;
        if (graceful) s.stop({ code: ErrorCode.CEASE, subcode: CeaseSubcode.ADMIN_SHUTDOWN, data: shutdownData('speaker stopping') });
        else s.abort();
      }
      clearGrTimer(p);
      p.maxPrefix?.clear();
    }
    await Promise.all([...this.sessions].map((s) => s.whenClosed()));
    await serverClosed;
    this.listener.flushRefused(true);
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
    this.importer.setLocal(newRouterId, cfg);
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
      void this.listener.close();
      if (cfg.listen) await this.listener.listen(cfg.listen);
    }
    for (const [key, p] of [...this.peerMap]) {
      const n = next.get(key);
      if (!n) {
        this.log.info(`peer ${p.cfg.address}: removed from the configuration`);
        this.stopPeer(p, CeaseSubcode.PEER_DECONFIGURED);
        this.peerMap.delete(key);
        if (this.rib.hasSource(p.source)) this.rib.removeSource(p.source);
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
      p.setRoutePolicies(n);
      // A local timer, not in the OPEN: the running sessions take it (from the next time it is armed).
      for (const s of new Set([p.session, p.incoming])) if (s) s.fsm.cfg = { ...s.fsm.cfg, sendHoldTime: n.sendHoldTime };
      if (importChanged) {
        p.importFilter = compilePrefixList(n.importRules);
        if (this.rib.hasSource(p.source)) {
          this.rib.setImportPolicy(p.source, this.importer.policy(p));
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
        if (p.established) this.exporter.exportAllTo(p);
      }
    }
    if (!sameAdvertisements(old.prefixAdvertisements, cfg.prefixAdvertisements)) {
      // New communities on what we send: re-export to every session (only the changed routes go out).
      this.tagger = new CommunityTagger(cfg.prefixAdvertisements);
      for (const p of this.peerMap.values()) {
        if (p.established) this.exporter.exportAllTo(p);
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
    const errors = this.sockets.syncListener(this.listener.socket, peers.map((p) => ({ address: p.cfg.address, ip: p.cfg.ip, sec: p.cfg.security })));
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
    return [...this.peerMap.values()].map((p) => peerStatus(p, this.rib, this.now, this.bfd));
  }

  /** How many peers are configured and how many of them are Established (peers() builds every status). */
  peerCounts(): { configured: number; established: number } {
    return countPeers(this.peerMap.values());
  }

  /** The address and port the listener is bound to, or null when not listening. */
  listening(): { address: string; port: number } | null {
    return this.listener.address();
  }

  private emitStatus(p: PeerState): void {
    this.emit('state', p.cfg.address, peerState(p));
    if (this.listenerCount('peer') === 0) return;
    this.emit('peer', peerStatus(p, this.rib, this.now, this.bfd));
  }

  // ---- peers and sessions -------------------------------------------------------------------------------------

  private normPeer(p: SpeakerPeerConfig): NormPeer {
    return this.normPeerMemo(p, this.cfg, normContext(this.cfg));
  }

  /**
   * normalisePeer, remembered for frozen peer configs (they cannot have changed) under the same speaker-wide
   * settings: the cluster passes its whole mesh to reconfigure on every node event, and re-normalising and
   * comparing 50 unchanged peers was most of an old node's CPU for a join (bench/mesh-join-cpu.ts).
   */
  private normPeerMemo(p: SpeakerPeerConfig, cfg: SpeakerConfig, ctx: string): NormPeer {
    if (!Object.isFrozen(p)) return normalisePeer(p, cfg);
    const m = this.normMemo.get(p);
    if (m && m.ctx === ctx) return m.n;
    const n = normalisePeer(p, cfg);
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
    s.onOpen = (sess, open) => collision(p, sess, open, this.routerId, this.log);
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
    s.on('routeRefresh', (family, subtype) => this.exporter.onRouteRefresh(p, s, family, subtype));
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
    clearGrTimer(p);
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
    endRestarting(p);
    computeNextHops(p, s);
    const info: PeerInfo = { type: p.type, routerId: s.remoteOpen!.bgpId, address: p.cfg.ip, asn: p.cfg.asn };
    const known = this.rib.peerInfo(p.source);
    if (known && (known.routerId !== info.routerId || known.type !== info.type || known.asn !== info.asn)) {
      // Routes held under the old identity (stale from a restart) cannot be kept under a new one.
      this.rib.dropSource(p.source);
      this.gr.end(p);
    }
    this.rib.addSource(p.source, info, { importPolicy: this.importer.policy(p) });
    this.gr.peerBack(p, neg);
    p.peerGr = neg.gracefulRestart;
    p.maxPrefix?.reset();
    this.rib.clearAdjRibOut(p.source);
    this.exporter.exportAllTo(p);
    for (const f of neg.families) p.queue.pushEndOfRib(f);
    this.exporter.pump(p);
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
    this.gr.peerDown(p, info, this.running);
    this.scheduleFlush();
    this.emitStatus(p);
  }

  private onUpdate(p: PeerState, s: Session, m: UpdateMessage, action: string): void {
    if (s !== p.established) return;
    // RFC 7606 2: a treat-as-withdraw UPDATE is never End-of-RIB, whatever is left of it.
    const eor = action === 'treat-as-withdraw' ? null : endOfRib(m);
    if (eor) {
      const f = familyOfAfi(eor.afi, eor.safi);
      if (f) this.onEndOfRib(p, f);
      return;
    }
    if (this.importer.update(p, s.negotiated!.families, m, action) && p.maxPrefix) this.checkMaxPrefix(p, s);
    this.scheduleFlush();
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

  private onEndOfRib(p: PeerState, f: AddressFamily): void {
    p.eorReceived.add(f);
    this.log.debug(`peer ${p.cfg.address}: End-of-RIB ${f}`);
    this.gr.endOfRib(p);
    this.emitStatus(p);
  }

  private scheduleFlush(): void {
    this.flushPacer.request();
  }
}
