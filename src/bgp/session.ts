// The session adapter: one peer's FSM (src/bgp/fsm.ts) driven by a real TCP connection. It owns the socket, the
// Framer and the codec options; carries out the FSM's actions (connect, send, timers via setTimeout, close);
// checks the peer's OPEN and negotiates capabilities; turns every decoded message, and every malformed one, into
// an FSM event (a malformed message gets the codec's exact NOTIFICATION before the close). Routes are not its
// business: decoded UPDATEs go out as 'update' events to the speaker.
//
// Writes are corked within a tick and the socket's own buffer is the only queue here: `writable` tells the
// speaker whether to produce more UPDATEs, 'drain' when to resume, so a flood never buffers unboundedly.
// For RFC 9687's Send Hold Timer (kept by the FSM) this file only reports what the socket does: octets left waiting
// after a write (WritePending), and each write that then reached the kernel (WriteProgress).
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { IP, parseIP, formatIP } from '../net/ip.ts';
import {
  AS_TRANS, Afi, Safi, DecodeScratch, Framer, decodeFramedAt, encodeKeepalive, encodeNotification, encodeOpen,
  encodeRouteRefresh, encodeEndOfRib, ErrorCode, HeaderSubcode, OpenSubcode, errorCodeName, errorSubcodeName, shutdownMessage, validateOpen,
  negotiatedOptions, peerAsOf, encodeCapability, MsgType, type Capability, type DecodeOptions, type DecodeResult,
  type OpenMessage, type UpdateMessage, type AttrProblem, type NotificationMessage,
} from './codec/index.ts';
import { Fsm, timerEvent, type DownInfo, type FsmAction, type FsmConfig, type FsmEvent, type Notif, type State, type TimerName } from './fsm.ts';

export type AddressFamily = 'ipv4' | 'ipv6';

export const FAMILY_AFI: Record<AddressFamily, number> = { ipv4: Afi.IPV4, ipv6: Afi.IPV6 };

export function familyOfAfi(afi: number, safi: number): AddressFamily | null {
  if (safi !== Safi.UNICAST) return null;
  return afi === Afi.IPV4 ? 'ipv4' : afi === Afi.IPV6 ? 'ipv6' : null;
}

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

export interface SessionLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const silentLogger: SessionLogger = { debug() {}, info() {}, warn() {}, error() {} };

export interface SessionConfig {
  /** The peer's address and TCP port (for connecting), and AS. */
  peerAddress: string;
  peerPort: number;
  peerAs: number;
  localAs: number;
  /** Our BGP Identifier as uint32. */
  routerId: number;
  /** Source address for our connections. */
  localAddress?: string;
  /**
   * Makes the unconnected socket we connect from (TCP-MD5/GTSM options set before connect(); src/bgp/peer-security.ts).
   * Absent: a plain one. A throw fails the attempt (ConnectRetry tries again) with its message as lastError.
   */
  openSocket?: () => net.Socket;
  families: AddressFamily[];
  /** Our graceful restart capability; null = not advertised. */
  gracefulRestart: { restartTime: number; restarting: boolean; forwarding: boolean } | null;
  /** FSM settings. */
  fsm: FsmConfig;
  logger?: SessionLogger;
  /** Label for logs. */
  name?: string;
}

export interface SessionEvents {
  state: [from: State, to: State];
  /** The peer's OPEN passed the checks; collision detection happens in the speaker's `onOpen` hook. */
  established: [negotiated: NegotiatedCapabilities];
  update: [msg: UpdateMessage, result: DecodeResult['action'], problems: readonly AttrProblem[]];
  routeRefresh: [family: AddressFamily, subtype: number];
  down: [info: DownInfo];
  drain: [];
}

/**
 * Socket write buffer above which `writable` turns false (the speaker stops producing UPDATEs). The kernel's socket
 * buffer takes most of a burst; this is what may wait in Node's on top, per peer: with 100 slow peers and the
 * pump's 64 KiB steps, at most ~12 MB (it was 256 KiB: ~31 MB).
 */
const HIGH_WATER = 64 * 1024;
/**
 * A read shorter than this that carried UPDATEs pauses reading for GATHER_MS, so that the next read takes what the
 * peer sent meanwhile in one go. A sender that writes as it walks its table (BIRD) otherwise arrives in reads of
 * ~2 KB: a full table in ~30,000 of them, each costing ~18 us (a wakeup, a system call, a buffer and an event of its
 * own: npm run bench:socket-reads). The pause delays nothing already read, and at most GATHER_MS what comes next.
 */
const GATHER_BELOW = 16 * 1024;
const GATHER_MS = 1;
/** How long a closing socket may take to flush its last NOTIFICATION before it is destroyed. */
const CLOSE_GRACE_MS = 2000;

let sessionIds = 0;

const NO_PROBLEMS: readonly AttrProblem[] = Object.freeze([]);

/**
 * One decoder scratch for every session of the process: decoding is synchronous and each UPDATE is handed to the
 * 'update' listeners, which consume its prefix lists, before the next decode, whichever session that is. Per
 * session it cost ~20 KB (prefix lists, the attribute table, an AS path cache) that a hundred quiet peers paid
 * for nothing; one cache of AS paths by wire bytes also serves every 4-octet session (the bytes decode alike).
 */
const sharedScratch = new DecodeScratch();

// Socket chunks are never written after they arrive (each read gets a fresh buffer; a message split across reads
// is copied once into its own): the scratch may keep references into them.
sharedScratch.borrowInput = true;

// Every session's decode options are built here, in one property order: one hidden class for all of them, where a
// spread of the previous options gave each session a map of its own (a thousand on a route reflector) and made
// the decoder's reads of them megamorphic.
function codecOptions(fourOctetAs: boolean, extendedMessage: boolean, external: boolean): DecodeOptions {
  return { scratch: sharedScratch, fourOctetAs, extendedMessage, external };
}

/** A running FSM timer: its deadline (performance.now() ms) and the timeout that checks it. */
interface ArmedTimer {
  due: number;
  handle: NodeJS.Timeout;
}

export class Session extends EventEmitter<SessionEvents> {
  readonly id = ++sessionIds;
  readonly fsm: Fsm;
  cfg: SessionConfig;
  private readonly log: SessionLogger;
  private socket: net.Socket | null = null;
  /** The socket was accepted (the peer connected to us) rather than connected by us. */
  incoming = false;
  private framer = new Framer();
  private decodeOpts: DecodeOptions = codecOptions(true, false, false);
  private readonly timers = new Map<TimerName, ArmedTimer>();
  private corked = false;
  private processing: UpdateMessage | null = null;
  private processingAction: DecodeResult['action'] = 'ok';
  private processingProblems: readonly AttrProblem[] = [];
  private pendingHold = 0; // hold time to restart the timer with once the current read is processed
  private refreshFamily: AddressFamily | null = null;
  private refreshSubtype = 0;
  private dispatching = false;
  private queued: FsmEvent[] = [];
  private readonly closing = new Set<net.Socket>();
  /** WritePending was reported for the current socket and no WriteProgress has emptied it since. */
  private writeWaiting = false;
  /** The SendHoldTime the FSM last armed (for the log line when it expires). */
  private sendHoldArmed = 0;
  /** Write callback of the current socket: progress for the Send Hold Timer. */
  private onWritten: (err?: Error | null) => void = () => {};

  localOpen: OpenMessage | null = null;
  remoteOpen: OpenMessage | null = null;
  negotiated: NegotiatedCapabilities | null = null;
  localAddress: string | null = null;
  remoteAddress: string | null = null;
  localPort: number | null = null;
  remotePort: number | null = null;
  lastError: string | null = null;
  stateSince = Date.now();
  establishedAt: number | null = null;
  readonly counters = {
    messagesIn: 0, messagesOut: 0, updatesIn: 0, updatesOut: 0, treatAsWithdraw: 0, attributeDiscard: 0,
    /** Times reading was paused to gather a stream of UPDATEs into fewer reads (GATHER_BELOW). */
    readPauses: 0,
  };

  /**
   * Called with the peer's valid OPEN before the FSM sees it (connection collision detection, RFC 4271 6.8).
   * Return false to dump this connection (Cease/Connection Collision Resolution).
   */
  onOpen: ((s: Session, open: OpenMessage) => boolean) | null = null;

  constructor(cfg: SessionConfig) {
    super();
    this.cfg = cfg;
    this.fsm = new Fsm(cfg.fsm);
    this.log = cfg.logger ?? silentLogger;
  }

  get state(): State {
    return this.fsm.state;
  }

  get name(): string {
    return this.cfg.name ?? this.cfg.peerAddress;
  }

  /** Octets written and not yet handed to the kernel. */
  get bufferedBytes(): number {
    return this.socket?.writableLength ?? 0;
  }

  /** True while the socket's buffer is below the high-water mark (produce more UPDATEs). */
  get writable(): boolean {
    const s = this.socket;
    return s !== null && !s.destroyed && s.writableLength < HIGH_WATER;
  }

  // ---- control ------------------------------------------------------------------------------------------------

  /** ManualStart (passive: listen only). */
  start(passive = false): void {
    this.dispatch(passive || this.cfg.fsm.passive ? { type: 'ManualStart_with_PassiveTcpEstablishment' } : { type: 'ManualStart' });
  }

  /** ManualStop with a Cease NOTIFICATION (Administrative Shutdown unless given). */
  stop(notification?: Notif): void {
    this.dispatch({ type: 'ManualStop', notification });
  }

  /** Close without NOTIFICATION, as if the process had died (graceful restart tests, non-graceful stop). */
  abort(): void {
    for (const t of [...this.timers.keys()]) this.clearTimer(t);
    const s = this.socket;
    this.socket = null;
    if (s) {
      s.removeAllListeners('data');
      s.destroy();
    }
    this.fsm.enabled = false;
  }

  /** Feed any FSM event (collision dump, tests). */
  dispatch(ev: FsmEvent): void {
    // Actions can cause events (a failed write closes the socket); queue them so each runs to completion.
    if (this.dispatching) {
      this.queued.push(ev);
      return;
    }
    this.dispatching = true;
    try {
      this.run(this.fsm.handle(ev));
      while (this.queued.length > 0) this.run(this.fsm.handle(this.queued.shift()!));
    } finally {
      this.dispatching = false;
    }
  }

  /**
   * Take an accepted connection. In Idle/Connect/Active it becomes this session's connection (an outgoing attempt
   * in progress is abandoned); otherwise the FSM ignores it and the caller must deal with it (collision).
   * Returns false when the FSM refused it (the socket has then been closed).
   */
  accept(socket: net.Socket): boolean {
    if (this.state === 'Connect' || this.state === 'Active' || this.state === 'Idle') {
      if (this.socket) this.dropSocket(this.socket, false);
      this.attach(socket, true);
      this.dispatch({ type: 'TcpConnectionConfirmed' });
      if (this.socket !== socket) return false;
      return true;
    }
    return false;
  }

  /** The TCP socket under the session (its TCP-MD5 key is replaced on it: src/bgp/md5-rekey.ts). */
  get tcpSocket(): net.Socket | null {
    return this.socket;
  }

  // ---- sending ------------------------------------------------------------------------------------------------

  /** Send `buf`, which holds `updates` whole UPDATE messages back to back, in one write (Established only). */
  sendPacked(buf: Buffer, updates: number): void {
    if (this.state !== 'Established') return;
    // Already one buffer of many messages: corking it would only add a copy into the stream's list and a writev.
    this.write(buf, updates, false);
    this.counters.updatesOut += updates;
  }

  /** End-of-RIB for a family (RFC 4724 2). */
  sendEndOfRib(family: AddressFamily): void {
    if (this.state !== 'Established') return;
    this.write(encodeEndOfRib(FAMILY_AFI[family], Safi.UNICAST));
  }

  sendRouteRefresh(family: AddressFamily): boolean {
    if (this.state !== 'Established' || !this.negotiated?.routeRefresh) return false;
    this.write(encodeRouteRefresh(FAMILY_AFI[family], Safi.UNICAST));
    return true;
  }

  private write(b: Buffer, messages = 1, cork = true): void {
    const s = this.socket;
    if (!s || s.destroyed || !s.writable) return;
    // (Uncorked, a write goes out at once: still after anything corked earlier in this tick, which it joins.)
    if (!this.corked && cork) {
      // Batch every message of this tick into as few TCP segments as possible.
      this.corked = true;
      s.cork();
      process.nextTick(() => {
        this.corked = false;
        s.uncork();
        this.checkPending(s);
      });
    }
    this.counters.messagesOut += messages;
    s.write(b, this.onWritten);
    if (!this.corked) this.checkPending(s);
  }

  /** After a write was handed to the socket: octets the kernel did not take at once start the Send Hold Timer. */
  private checkPending(s: net.Socket): void {
    // (A write the kernel takes whole is done before write() returns: writableLength is back to 0.)
    if (this.writeWaiting || this.socket !== s || s.writableLength === 0) return;
    this.writeWaiting = true;
    this.dispatch({ type: 'WritePending' });
  }

  /** A write of socket `s` completed (its octets are in the kernel): progress, when octets were waiting. */
  private writeDone(s: net.Socket, err?: Error | null): void {
    if (err || !this.writeWaiting || this.socket !== s) return;
    const pending = s.writableLength > 0;
    if (!pending) this.writeWaiting = false;
    this.dispatch({ type: 'WriteProgress', pending });
  }

  // ---- actions ------------------------------------------------------------------------------------------------

  private run(actions: FsmAction[]): void {
    for (const a of actions) {
      switch (a.type) {
        case 'connect': this.connect(); break;
        case 'disconnect': this.disconnect(a.abort === true); break;
        case 'sendOpen': this.sendOpen(); break;
        case 'sendKeepalive': this.write(encodeKeepalive()); break;
        case 'sendNotification': {
          const what = `sent NOTIFICATION ${describeNotification(a)}`;
          this.lastError = what;
          if (a.code === ErrorCode.SEND_HOLD_TIMER_EXPIRED) {
            // RFC 9687 3.3: an error in the log; the NOTIFICATION itself will most likely never get through.
            this.log.error(`${this.name}: send hold timer expired: nothing could be written to the socket for ${this.sendHoldArmed}s, ` +
              `${this.bufferedBytes} octets waiting (RFC 9687); closing the session`);
          }
          this.log.warn(`${this.name}: ${what}`);
          this.write(encodeNotification(a.code, a.subcode, a.data, this.decodeOpts));
          break;
        }
        case 'startTimer':
          if (a.timer === 'SendHold') this.sendHoldArmed = a.seconds;
          this.setTimer(a.timer, a.seconds);
          break;
        case 'stopTimer': this.clearTimer(a.timer); break;
        case 'established': this.onEstablished(); break;
        case 'down':
          // A NOTIFICATION was already recorded when sent or received.
          if (!a.info.notification) this.lastError = a.info.reason;
          this.establishedAt = null;
          this.safeEmit('down', a.info);
          break;
        case 'deliverUpdate':
          if (this.processing) this.deliverUpdate(this.processing, this.processingAction, this.processingProblems);
          break;
        case 'deliverRouteRefresh':
          if (this.refreshFamily) this.safeEmit('routeRefresh', this.refreshFamily, this.refreshSubtype);
          break;
        case 'state':
          this.stateSince = Date.now();
          this.log.debug(`${this.name}: ${a.from} -> ${a.to}`);
          this.safeEmit('state', a.from, a.to);
          break;
      }
    }
  }

  /**
   * Emit to the speaker; a throwing handler (a bug there, or a route the RIB refuses) must not take the process
   * down from inside a socket callback: it is logged and, while connected, the session is reset with a Cease.
   */
  private safeEmit<K extends keyof SessionEvents>(event: K, ...args: SessionEvents[K]): void {
    try {
      (this.emit as (e: K, ...a: SessionEvents[K]) => boolean)(event, ...args);
    } catch (e) {
      this.handlerFailed(event, e);
    }
  }

  private handlerFailed(event: string, e: unknown): void {
    this.log.error(`${this.name}: ${event} handler failed: ${(e as Error)?.stack ?? String(e)}`);
    if (this.socket) this.dispatch({ type: 'AutomaticStop', notification: { code: ErrorCode.CEASE, subcode: 0 } });
  }

  /**
   * The speaker's UPDATE handler, called directly: no event and no argument lists per UPDATE (two arrays each,
   * through safeEmit and emit). Without one, 'update' listeners get the event as before.
   */
  updateHandler: ((...args: SessionEvents['update']) => void) | null = null;

  private deliverUpdate(m: UpdateMessage, action: DecodeResult['action'], problems: readonly AttrProblem[]): void {
    const h = this.updateHandler;
    if (h === null) {
      this.safeEmit('update', m, action, problems);
      return;
    }
    try {
      h(m, action, problems);
    } catch (e) {
      this.handlerFailed('update', e);
    }
  }

  private setTimer(t: TimerName, seconds: number): void {
    const ms = Math.max(0, Math.round(seconds * 1000));
    const due = performance.now() + ms;
    const cur = this.timers.get(t);
    if (cur !== undefined && due >= cur.due) {
      // Pushed later (the hold timer, on every message): move the deadline only; the armed timeout re-arms itself
      // for the rest when it fires early. A setTimeout per UPDATE was a measurable share of a table load.
      cur.due = due;
      return;
    }
    if (cur !== undefined) clearTimeout(cur.handle);
    const armed: ArmedTimer = { due, handle: undefined as unknown as NodeJS.Timeout };
    const fire = (): void => {
      const left = armed.due - performance.now();
      if (left > 1) {
        armed.handle = setTimeout(fire, Math.ceil(left));
        return;
      }
      this.timers.delete(t);
      this.dispatch(timerEvent(t));
    };
    armed.handle = setTimeout(fire, ms);
    this.timers.set(t, armed);
  }

  private clearTimer(t: TimerName): void {
    const cur = this.timers.get(t);
    if (cur !== undefined) clearTimeout(cur.handle);
    this.timers.delete(t);
  }

  private connect(): void {
    if (this.socket) this.dropSocket(this.socket, false);
    const family = net.isIP(this.cfg.peerAddress);
    const local = this.cfg.localAddress && net.isIP(this.cfg.localAddress) === family ? this.cfg.localAddress : undefined;
    let s: net.Socket;
    try {
      s = this.cfg.openSocket ? this.cfg.openSocket() : new net.Socket();
    } catch (e) {
      this.lastError = `TCP: ${(e as Error).message}`;
      this.dispatch({ type: 'TcpConnectionFails', reason: this.lastError });
      return;
    }
    this.attach(s, false);
    s.connect({ host: this.cfg.peerAddress, port: this.cfg.peerPort, localAddress: local });
    s.once('connect', () => {
      if (this.socket !== s) return;
      this.noteAddresses(s);
      this.dispatch({ type: 'Tcp_CR_Acked' });
    });
  }

  private attach(s: net.Socket, incoming: boolean): void {
    this.socket = s;
    this.incoming = incoming;
    this.writeWaiting = false;
    this.onWritten = (err) => this.writeDone(s, err);
    this.framer = new Framer();
    this.decodeOpts = codecOptions(true, false, false);
    this.localOpen = null;
    this.remoteOpen = null;
    this.negotiated = null;
    s.setNoDelay(true);
    if (incoming) this.noteAddresses(s);
    s.on('data', (chunk: Buffer) => {
      if (this.socket === s) this.onData(chunk);
    });
    s.on('error', (err: Error) => {
      if (this.socket !== s) return;
      this.lastError = `TCP: ${err.message}`;
    });
    s.on('close', () => {
      if (this.socket !== s) return;
      this.socket = null;
      this.dispatch({ type: 'TcpConnectionFails', reason: this.lastError?.startsWith('TCP:') ? this.lastError : 'TCP connection closed by peer' });
    });
  }

  private noteAddresses(s: net.Socket): void {
    this.localAddress = s.localAddress ? stripMapped(s.localAddress) : null;
    this.remoteAddress = s.remoteAddress ? stripMapped(s.remoteAddress) : null;
    this.localPort = s.localPort ?? null;
    this.remotePort = s.remotePort ?? null;
  }

  private disconnect(abort = false): void {
    const s = this.socket;
    this.socket = null;
    if (s) this.dropSocket(s, !abort);
  }

  /** Resolves when no socket of this session is open or closing. */
  whenClosed(): Promise<void> {
    const all = [...this.closing, ...(this.socket ? [this.socket] : [])].filter((s) => !s.closed);
    return Promise.all(all.map((s) => new Promise<void>((resolve) => s.once('close', () => resolve())))).then(() => undefined);
  }

  /** Close a socket: flush what was written (a NOTIFICATION), then FIN; destroy if the flush takes too long. */
  private dropSocket(s: net.Socket, flush: boolean): void {
    if (this.socket === s) this.socket = null;
    if (!s.closed) {
      this.closing.add(s);
      s.once('close', () => this.closing.delete(s));
    }
    s.removeAllListeners('data');
    if (!flush || s.destroyed || s.connecting) {
      s.destroy();
      return;
    }
    if (this.corked) s.uncork();
    s.end();
    const t = setTimeout(() => s.destroy(), CLOSE_GRACE_MS);
    t.unref();
    s.once('close', () => clearTimeout(t));
    // The peer may never read: don't let an unread NOTIFICATION hold the socket.
    s.on('error', () => {});
  }

  private sendOpen(): void {
    const caps: Capability[] = [];
    for (const f of this.cfg.families) caps.push({ kind: 'multiprotocol', afi: FAMILY_AFI[f], safi: Safi.UNICAST });
    caps.push({ kind: 'route-refresh' });
    caps.push({ kind: 'four-octet-as', asn: this.cfg.localAs });
    caps.push({ kind: 'extended-message' });
    const gr = this.cfg.gracefulRestart;
    if (gr) {
      caps.push({
        kind: 'graceful-restart',
        restarting: gr.restarting,
        notification: false,
        restartTime: Math.min(gr.restartTime, 4095),
        families: this.cfg.families.map((f) => ({ afi: FAMILY_AFI[f], safi: Safi.UNICAST, forwarding: gr.forwarding })),
      });
    }
    const open: OpenMessage = {
      type: 'open',
      version: 4,
      myAs: this.cfg.localAs > 0xffff ? AS_TRANS : this.cfg.localAs,
      holdTime: this.cfg.fsm.holdTime,
      bgpId: this.cfg.routerId,
      capabilities: caps,
    };
    this.localOpen = open;
    this.write(encodeOpen(open));
  }

  // ---- receiving ----------------------------------------------------------------------------------------------

  /** Each framed message, where it lies in the chunk (decoded in place: no view object per message). */
  private readonly frameAt = (buf: Uint8Array, off: number, len: number): void => {
    if (this.socket === null) return;
    this.onFrame(buf, off, len);
  };

  private onData(chunk: Buffer): void {
    const updates = this.counters.updatesIn;
    const err = this.framer.pushAt(chunk, this.frameAt);
    if (this.counters.updatesIn !== updates && chunk.length < GATHER_BELOW) this.gather();
    if (this.pendingHold > 0) {
      // UPDATEs on the fast path restart the hold timer once per read, not once per message; only if the FSM
      // still has it running (a message later in the chunk may have ended the session).
      if (this.socket !== null && this.fsm.isRunning('Hold')) this.setTimer('Hold', this.pendingHold);
      this.pendingHold = 0;
    }
    if (err && this.socket !== null) {
      this.log.warn(`${this.name}: bad message header: ${err.reason}`);
      // (With a bad marker the type octet means nothing.)
      if (err.msgType === MsgType.NOTIFICATION && err.subcode !== HeaderSubcode.CONNECTION_NOT_SYNCHRONIZED) {
        // A broken NOTIFICATION is not answered either: just close.
        this.lastError = `received malformed NOTIFICATION: ${err.reason}`;
        this.dispatch({ type: 'NotifMsg' });
      } else this.dispatch({ type: 'BGPHeaderErr', notification: err });
    }
  }

  /** Stop reading for GATHER_MS (after a short read of UPDATEs), then carry on if the socket is still ours. */
  private gather(): void {
    const s = this.socket;
    if (s === null || s.isPaused()) return;
    this.counters.readPauses++;
    s.pause();
    const t = setTimeout(() => {
      if (this.socket === s && !s.destroyed) s.resume();
    }, GATHER_MS);
    t.unref();
  }

  private onFrame(buf: Uint8Array, off: number, len: number): void {
    this.counters.messagesIn++;
    const r = decodeFramedAt(buf, off, len, this.decodeOpts);
    if (r.action === 'notification') {
      if (r.internal) this.log.error(`${this.name}: decoder bug: ${r.reason}`);
      else this.log.warn(`${this.name}: malformed message: ${r.reason}`);
      if (r.msgType === MsgType.NOTIFICATION) {
        // Never answer a NOTIFICATION with one (RFC 4271 6.4 spirit): just close.
        this.lastError = `received malformed NOTIFICATION: ${r.reason}`;
        this.dispatch({ type: 'NotifMsg' });
      } else if (r.code === ErrorCode.MESSAGE_HEADER) {
        this.dispatch({ type: 'BGPHeaderErr', notification: r });
      } else if (r.msgType === MsgType.OPEN) {
        this.dispatch({ type: 'BGPOpenMsgErr', notification: r });
      } else {
        this.dispatch({ type: 'UpdateMsgErr', notification: r });
      }
      return;
    }
    const m = r.message;
    switch (m.type) {
      case 'open': this.onOpenMessage(m); return;
      case 'keepalive': this.dispatch({ type: 'KeepAliveMsg' }); return;
      case 'notification': this.onNotification(m); return;
      case 'route-refresh': {
        const fam = familyOfAfi(m.afi, m.safi);
        // RFC 2918 4: a family that was not negotiated is ignored; RFC 7313: unknown subtypes are ignored.
        if (this.state === 'Established' && (!fam || !this.negotiated?.families.includes(fam) || m.subtype > 2)) {
          this.dispatch({ type: 'KeepAliveMsg' });
          return;
        }
        this.refreshFamily = fam;
        this.refreshSubtype = m.subtype;
        this.dispatch({ type: 'RouteRefreshMsg' });
        this.refreshFamily = null;
        return;
      }
      case 'update': {
        this.counters.updatesIn++;
        if (r.action !== 'ok') {
          const problems = r.problems;
          if (r.action === 'treat-as-withdraw') this.counters.treatAsWithdraw++;
          else this.counters.attributeDiscard++;
          this.log.warn(`${this.name}: RFC 7606 ${r.action}: ${problems.map((p) => p.reason).join('; ')}`);
          this.processingProblems = problems;
        } else this.processingProblems = NO_PROBLEMS;
        // The FSM's fast path for the usual case (Established, not inside another event): same outcome as the
        // UpdateMsg event, without an event and actions per UPDATE.
        const hold = this.dispatching ? -1 : this.fsm.updateInEstablished();
        if (hold >= 0) {
          if (hold > 0) this.pendingHold = hold; // restarted at the end of this read (onData)
          this.deliverUpdate(m, r.action, this.processingProblems);
          return;
        }
        this.processingAction = r.action;
        this.processing = m;
        this.dispatch({ type: 'UpdateMsg' });
        this.processing = null;
        return;
      }
    }
  }

  private onNotification(m: NotificationMessage): void {
    const text = `received NOTIFICATION ${describeNotification(m)}`;
    this.lastError = text;
    this.log.warn(`${this.name}: ${text}`);
    const n: Notif = { code: m.code, subcode: m.subcode, data: m.data };
    if (m.code === ErrorCode.OPEN && m.subcode === OpenSubcode.UNSUPPORTED_VERSION) this.dispatch({ type: 'NotifMsgVerErr', notification: n });
    else this.dispatch({ type: 'NotifMsg', notification: n });
  }

  private onOpenMessage(open: OpenMessage): void {
    // An OPEN after ours was answered is an FSM error, whatever its content; the FSM says so.
    if (this.state !== 'OpenSent' && !this.fsm.isRunning('DelayOpen')) {
      this.dispatch({ type: 'BGPOpen', holdTime: open.holdTime });
      return;
    }
    const internal = this.cfg.peerAs === this.cfg.localAs;
    const bad = validateOpen(open, { peerAs: this.cfg.peerAs, localBgpId: this.cfg.routerId, internal, minHoldTime: this.cfg.fsm.minHoldTime ?? 3 });
    if (bad) {
      this.log.warn(`${this.name}: OPEN refused: ${bad.reason}`);
      this.dispatch({ type: 'BGPOpenMsgErr', notification: withPeerAsData(bad, open) });
      return;
    }
    const peerFamilies = open.capabilities.filter((c) => c.kind === 'multiprotocol');
    // RFC 4760 8: no multiprotocol capability at all means IPv4 unicast only.
    const theirs = peerFamilies.length === 0 ? ['ipv4'] : peerFamilies.map((c) => familyOfAfi(c.afi, c.safi)).filter((f) => f !== null);
    const families = this.cfg.families.filter((f) => theirs.includes(f));
    if (families.length === 0) {
      // RFC 5492 5: nothing in common; the data lists the capabilities we need.
      const data = concat(this.cfg.families.map((f) => encodeCapability({ kind: 'multiprotocol', afi: FAMILY_AFI[f], safi: Safi.UNICAST })));
      this.log.warn(`${this.name}: OPEN refused: no common address family`);
      this.dispatch({ type: 'BGPOpenMsgErr', notification: { code: ErrorCode.OPEN, subcode: OpenSubcode.UNSUPPORTED_CAPABILITY, data } });
      return;
    }
    this.remoteOpen = open;
    if (this.onOpen && !this.onOpen(this, open)) {
      this.dispatch({ type: 'OpenCollisionDump' });
      return;
    }
    // Negotiate before the FSM answers (its KEEPALIVE is the same either way, but UPDATEs may follow at once).
    const local = this.localOpen ?? open;
    const opts = negotiatedOptions(local, open);
    this.decodeOpts = codecOptions(opts.fourOctetAs, opts.extendedMessage, this.cfg.peerAs !== this.cfg.localAs);
    this.framer.setOptions(opts);
    const has = (o: OpenMessage, kind: Capability['kind']) => o.capabilities.some((c) => c.kind === kind);
    const peerGr = open.capabilities.find((c) => c.kind === 'graceful-restart');
    this.negotiated = {
      families,
      routeRefresh: has(local, 'route-refresh') && has(open, 'route-refresh'),
      fourOctetAs: opts.fourOctetAs,
      extendedMessage: opts.extendedMessage,
      gracefulRestart: peerGr && this.cfg.gracefulRestart
        ? {
            restartTime: peerGr.restartTime,
            restarting: peerGr.restarting,
            forwarding: peerGr.families.filter((f) => f.forwarding).map((f) => familyOfAfi(f.afi, f.safi)).filter((f) => f !== null),
          }
        : null,
    };
    this.dispatch({ type: 'BGPOpen', holdTime: open.holdTime });
  }

  private onEstablished(): void {
    this.establishedAt = Date.now();
    this.log.info(`${this.name}: session established`, { holdTime: this.fsm.holdTime, families: this.negotiated?.families });
    this.safeEmit('established', this.negotiated!);
  }

  // ---- introspection ------------------------------------------------------------------------------------------

  /** Wire up a drain listener once per socket (the speaker's export pump). */
  onDrain(fn: () => void): void {
    const s = this.socket;
    if (!s) return;
    s.once('drain', fn);
  }

  /** Our local address as an IP, once connected. */
  localIP(): IP | null {
    return this.localAddress ? parseIP(this.localAddress) : null;
  }
}

/** An IPv4-mapped IPv6 address (how a dual-stack socket shows an IPv4 peer) as plain IPv4 text; others unchanged. */
export function stripMapped(a: string): string {
  return a.startsWith('::ffff:') && net.isIPv4(a.slice(7)) ? a.slice(7) : a;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let p = 0;
  for (const x of parts) {
    out.set(x, p);
    p += x.length;
  }
  return out;
}

/**
 * RFC 4271 6.2 defines no data for Bad Peer AS; like common implementations we send the AS the peer claimed
 * (2 octets, or 4 when it needs 4), which tells its operator what we saw.
 */
function withPeerAsData(n: Notif & { reason?: string }, open: OpenMessage): Notif {
  if (n.code !== ErrorCode.OPEN || n.subcode !== OpenSubcode.BAD_PEER_AS || (n.data?.length ?? 0) > 0) return n;
  const asn = peerAsOf(open);
  const data = asn > 0xffff ? new Uint8Array([asn >>> 24, (asn >>> 16) & 255, (asn >>> 8) & 255, asn & 255]) : new Uint8Array([asn >>> 8, asn & 255]);
  return { code: n.code, subcode: n.subcode, data };
}

export function describeNotification(n: { code: number; subcode: number; data?: Uint8Array }): string {
  const base = `${errorCodeName(n.code)} / ${errorSubcodeName(n.code, n.subcode)} (${n.code}/${n.subcode})`;
  const msg = shutdownMessage({ code: n.code, subcode: n.subcode, data: n.data ?? new Uint8Array(0) });
  return msg ? `${base}: "${msg}"` : base;
}

/** An IPv4 text as uint32 (router IDs). */
export function ipv4ToU32(text: string): number {
  const ip = parseIP(text);
  if (ip.family !== 4) throw new Error(`${text} is not an IPv4 address`);
  return ip.w0;
}

export function u32ToIPv4(n: number): string {
  return formatIP(new IP(4, n >>> 0));
}
