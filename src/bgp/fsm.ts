// The BGP finite state machine of RFC 4271 section 8, pure: events in, actions out. No sockets, no clocks: a
// timer is a 'startTimer' action the adapter (src/bgp/session.ts) turns into a setTimeout whose expiry comes back
// as an event; randomness (timer jitter) is injected.
//
// One Fsm is one connection attempt lifecycle with one peer. Connection collision detection (RFC 4271 6.8) needs
// two connections and is done by the speaker, which feeds OpenCollisionDump to the loser.
//
// Deliberate choices where RFC 4271 leaves room or is self-contradictory (each marked "choice:" below):
//  - Damping (8.1.1 DampPeerOscillations): after an error the FSM waits in Idle for an IdleHoldTimer that doubles
//    with ConnectRetryCounter, then issues AutomaticStart itself. The counter is reset by ManualStart and by a
//    stable period in Established (StableTimer), not by AutomaticStart, or damping could never grow.
//  - ConnectRetry backoff: the interval doubles per failed TCP attempt (reset when TCP comes up), capped, with
//    the 0.75-1.0 jitter of section 10.
//  - A passive peer never initiates TCP: in Active the ConnectRetryTimer is simply not run.
//  - A header error in Established is answered with the header error (section 6.1), not the FSM error the
//    Established event table lists for events 21-22; an OPEN in Established (valid or not) is an FSM error.
//  - No NOTIFICATION is ever sent in answer to a NOTIFICATION (the peer has closed; RFC 4271 6.4 spirit).
//  - Unexpected messages get the RFC 6608 subcodes (1 OpenSent, 2 OpenConfirm, 3 Established); unexpected
//    timer events get subcode 0.
//  - RFC 9687 Send Hold Timer: the RFC restarts it on every message sent; here it runs only while octets wait to go
//    out (WritePending) and restarts on each write that reached the kernel (WriteProgress). Keepalives go at least
//    every HoldTime/3 < SendHoldTime, so an idle healthy session never reaches it either way; this way a session
//    with nothing to send has no timer to run.
import { CeaseSubcode, ErrorCode, FsmSubcode, OpenSubcode } from './codec/errors.ts';

import type { DownInfo, FsmAction, FsmConfig, FsmEvent, FsmEventType, Notif, State, TimerName } from './fsm-types.ts';

export type { DownInfo, FsmAction, FsmConfig, FsmEvent, FsmEventType, Notif, State, TimerName } from './fsm-types.ts';

const EMPTY = new Uint8Array(0);

const MESSAGE_EVENTS = new Set<FsmEventType>([
  'BGPOpen', 'KeepAliveMsg', 'UpdateMsg', 'UpdateMsgErr', 'RouteRefreshMsg', 'NotifMsg', 'NotifMsgVerErr',
  'BGPOpenMsgErr', 'BGPHeaderErr',
]);

const STATE_SUBCODE: Partial<Record<State, number>> = {
  OpenSent: FsmSubcode.OPEN_SENT,
  OpenConfirm: FsmSubcode.OPEN_CONFIRM,
  Established: FsmSubcode.ESTABLISHED,
};

export class Fsm {
  state: State = 'Idle';
  /** RFC 4271 8.1.1; drives damping. */
  connectRetryCounter = 0;
  /** Consecutive TCP attempts that did not connect (ConnectRetry backoff). */
  connectAttempts = 0;
  /** Negotiated hold time (seconds), set on BGPOpen. */
  holdTime = 0;
  /** Negotiated keepalive interval (seconds, before jitter). */
  keepaliveTime = 0;
  /** The peer's proposed hold time from its OPEN. */
  peerHoldTime: number | null = null;
  /** Started (ManualStart) and not ManualStopped. */
  enabled = false;
  /** The last start was passive (listen only). */
  passiveStart = false;
  /** Times the session left Established. */
  flaps = 0;
  lastDown: DownInfo | null = null;
  /** Octets wait in the socket (the adapter's WritePending / WriteProgress); reset with the connection. */
  sendPending = false;
  private readonly running = new Set<TimerName>();
  private out: FsmAction[] = [];

  constructor(public cfg: FsmConfig) {}

  /** Timers the FSM believes are running. */
  isRunning(t: TimerName): boolean {
    return this.running.has(t);
  }

  /** Damped: an incoming connection in Idle is refused until the IdleHoldTimer expires. */
  get damped(): boolean {
    return this.connectRetryCounter >= (this.cfg.dampThreshold ?? 3);
  }

  /**
   * An UPDATE received in Established — the common case, a million times in a table load. Does what
   * handle({ type: 'UpdateMsg' }) does there (restart the hold timer, deliver the UPDATE) without the event and
   * action objects, and returns the hold time to restart the timer with (0: no hold timer). Returns -1, changing
   * nothing, in any other situation: the caller then goes through handle().
   */
  updateInEstablished(): number {
    if (this.state !== 'Established') return -1;
    if (this.holdTime > 0) {
      this.running.add('Hold');
      return this.holdTime;
    }
    return this.running.has('Hold') ? -1 : 0;
  }

  /** The SendHoldTime of this session in seconds; 0 = no Send Hold Timer (RFC 9687 4). */
  get sendHoldTime(): number {
    if (this.holdTime === 0) return 0;
    return this.cfg.sendHoldTime ?? Math.max(SEND_HOLD_MIN, 2 * this.holdTime);
  }

  /** Process one event; returns the actions to carry out, in order. */
  handle(ev: FsmEvent): FsmAction[] {
    this.out = [];
    // A timer expiry that raced with a stop is stale: drop it.
    const timer = TIMER_OF[ev.type];
    if (timer !== undefined) {
      if (!this.running.has(timer)) return [];
      this.running.delete(timer);
    }
    if (ev.type === 'WritePending' || ev.type === 'WriteProgress') {
      this.onWrite(ev);
      return this.takeOut();
    }
    switch (this.state) {
      case 'Idle': this.idle(ev); break;
      case 'Connect': this.connect(ev); break;
      case 'Active': this.active(ev); break;
      case 'OpenSent': this.openSent(ev); break;
      case 'OpenConfirm': this.openConfirm(ev); break;
      case 'Established': this.established(ev); break;
    }
    return this.takeOut();
  }

  private takeOut(): FsmAction[] {
    const out = this.out;
    this.out = [];
    return out;
  }

  /** The Send Hold Timer's input, in any state: it runs in Established while octets wait and no write progresses. */
  private onWrite(ev: { type: 'WritePending' } | { type: 'WriteProgress'; pending: boolean }): void {
    // Only a connection's writes count; one reported after it went down belongs to no session.
    if (this.state !== 'OpenSent' && this.state !== 'OpenConfirm' && this.state !== 'Established') return;
    if (ev.type === 'WritePending') {
      this.sendPending = true;
      if (this.state === 'Established' && !this.running.has('SendHold')) this.startSendHold();
      return;
    }
    this.sendPending = ev.pending;
    if (this.state !== 'Established') return;
    if (ev.pending) this.startSendHold(); // progress: the full SendHoldTime again
    else this.stop('SendHold');
  }

  private startSendHold(): void {
    const t = this.sendHoldTime;
    if (t > 0) this.start1('SendHold', t);
  }

  // ---- states ---------------------------------------------------------------------------------------------------

  private idle(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
        this.connectRetryCounter = 0;
        this.connectAttempts = 0;
        this.enabled = true;
        // A manual start overrides a pending automatic one.
        this.stop('IdleHold');
        this.start(ev.type === 'ManualStart_with_PassiveTcpEstablishment' || this.cfg.passive);
        return;
      case 'AutomaticStart':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
        // choice: AutomaticStart does not zero ConnectRetryCounter (damping), and waits for a running IdleHold.
        if (this.running.has('IdleHold')) return;
        this.enabled = true;
        this.start(ev.type === 'AutomaticStart_with_PassiveTcpEstablishment' || this.cfg.passive);
        return;
      case 'IdleHoldTimer_Expires':
        if (this.enabled) this.start(this.cfg.passive);
        return;
      case 'TcpConnectionConfirmed':
        // choice: a peer reconnecting while we wait out a short IdleHold is taken (passive start), unless damped.
        if (this.enabled && this.cfg.autoRestart && this.running.has('IdleHold') && !this.damped) {
          this.stop('IdleHold');
          this.start(true);
          this.active(ev);
          return;
        }
        this.emit({ type: 'disconnect' });
        return;
      case 'ManualStop':
        // Stopping an idle peer cancels its automatic restart.
        this.enabled = false;
        this.connectRetryCounter = 0;
        this.stop('IdleHold');
        return;
      case 'AutomaticStop':
        this.stop('IdleHold');
        return;
      default:
        // RFC 4271 8.2.2 Idle: any other event is ignored.
        return;
    }
  }

  private start(passive: boolean): void {
    this.passiveStart = passive;
    if (passive) {
      // choice: a passive peer only listens; no ConnectRetryTimer.
      this.go('Active');
      return;
    }
    this.startConnectRetry();
    this.emit({ type: 'connect' });
    this.go('Connect');
  }

  private connect(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'AutomaticStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
        return;
      case 'ManualStop':
        this.emit({ type: 'disconnect' });
        this.connectRetryCounter = 0;
        this.enabled = false;
        this.stop('ConnectRetry');
        this.stop('DelayOpen');
        this.go('Idle');
        return;
      case 'ConnectRetryTimer_Expires':
        this.emit({ type: 'disconnect' });
        this.stop('DelayOpen');
        this.connectAttempts++;
        this.startConnectRetry();
        this.emit({ type: 'connect' });
        return;
      case 'DelayOpenTimer_Expires':
        this.sendOpen();
        return;
      case 'Tcp_CR_Acked':
      case 'TcpConnectionConfirmed':
        this.tcpUp();
        return;
      case 'TcpConnectionFails':
        if (this.running.has('DelayOpen')) {
          this.stop('DelayOpen');
          this.startConnectRetry();
          this.go('Active');
          return;
        }
        // RFC 4271: Connect + TcpConnectionFails goes to Idle without counting a failure; the retry comes from
        // the ConnectRetry backoff (choice: via IdleHold, so an absent peer is not hammered).
        this.connectAttempts++;
        this.stop('ConnectRetry');
        this.emit({ type: 'disconnect' });
        this.toIdle(ev.reason ?? 'TCP connection failed', null, false);
        return;
      case 'BGPOpen':
        if (this.running.has('DelayOpen')) {
          this.openWithDelay(ev.holdTime);
          return;
        }
        this.fail('OPEN received in Connect', null);
        return;
      case 'BGPHeaderErr':
      case 'BGPOpenMsgErr':
        this.fail(errorReason(ev.type), ev.notification);
        return;
      case 'NotifMsgVerErr':
        this.notifVerErr(ev.notification);
        return;
      default:
        this.fail(`unexpected ${ev.type} in Connect`, null);
    }
  }

  private active(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'AutomaticStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
        return;
      case 'ManualStop':
        if (this.running.has('DelayOpen')) this.sendNotification(ceaseOf(ev.notification, CeaseSubcode.ADMIN_SHUTDOWN));
        this.stop('DelayOpen');
        this.emit({ type: 'disconnect' });
        this.connectRetryCounter = 0;
        this.enabled = false;
        this.stop('ConnectRetry');
        this.go('Idle');
        return;
      case 'ConnectRetryTimer_Expires':
        this.startConnectRetry();
        this.emit({ type: 'connect' });
        this.go('Connect');
        return;
      case 'DelayOpenTimer_Expires':
        this.sendOpen();
        return;
      case 'Tcp_CR_Acked':
      case 'TcpConnectionConfirmed':
        this.tcpUp();
        return;
      case 'TcpConnectionFails':
        this.stop('DelayOpen');
        this.connectRetryCounter++;
        this.stop('ConnectRetry');
        this.emit({ type: 'disconnect' });
        this.toIdle(ev.reason ?? 'TCP connection failed', null, true);
        return;
      case 'BGPOpen':
        if (this.running.has('DelayOpen')) {
          this.openWithDelay(ev.holdTime);
          return;
        }
        this.fail('OPEN received in Active', null);
        return;
      case 'BGPHeaderErr':
      case 'BGPOpenMsgErr':
        this.fail(errorReason(ev.type), ev.notification);
        return;
      case 'NotifMsgVerErr':
        this.notifVerErr(ev.notification);
        return;
      default:
        this.fail(`unexpected ${ev.type} in Active`, null);
    }
  }

  private openSent(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'AutomaticStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
      case 'Tcp_CR_Acked':
      case 'TcpConnectionConfirmed':
        // A second connection is the speaker's business (collision detection); nothing changes here.
        return;
      case 'ManualStop':
        this.manualStop(ev.notification);
        return;
      case 'AutomaticStop':
        this.fail('automatic stop', ceaseOf(ev.notification, 0));
        return;
      case 'HoldTimer_Expires':
        this.fail('hold timer expired', { code: ErrorCode.HOLD_TIMER_EXPIRED, subcode: 0 });
        return;
      case 'TcpConnectionFails':
        // RFC 4271: back to Active, listening, ConnectRetryTimer restarted.
        this.stopAll();
        this.emit({ type: 'disconnect' });
        if (!this.passiveStart && !this.cfg.passive) this.startConnectRetry();
        this.transition('Active', ev.reason ?? 'TCP connection closed', null);
        return;
      case 'BGPOpen': {
        const bad = this.checkHold(ev.holdTime);
        if (bad) {
          this.fail(`unacceptable hold time ${ev.holdTime}`, bad);
          return;
        }
        this.stop('DelayOpen');
        this.stop('ConnectRetry');
        this.negotiate(ev.holdTime);
        this.emit({ type: 'sendKeepalive' });
        this.startKeepalive();
        this.restartHold();
        this.go('OpenConfirm');
        return;
      }
      case 'BGPHeaderErr':
      case 'BGPOpenMsgErr':
        this.fail(errorReason(ev.type), ev.notification);
        return;
      case 'OpenCollisionDump':
        this.fail('connection collision', { code: ErrorCode.CEASE, subcode: CeaseSubcode.CONNECTION_COLLISION });
        return;
      case 'NotifMsgVerErr':
        this.notifVerErr(ev.notification);
        return;
      default:
        this.unexpected(ev);
    }
  }

  private openConfirm(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'AutomaticStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
      case 'Tcp_CR_Acked':
      case 'TcpConnectionConfirmed':
        return;
      case 'ManualStop':
        this.manualStop(ev.notification);
        return;
      case 'AutomaticStop':
        this.fail('automatic stop', ceaseOf(ev.notification, 0));
        return;
      case 'HoldTimer_Expires':
        this.fail('hold timer expired', { code: ErrorCode.HOLD_TIMER_EXPIRED, subcode: 0 });
        return;
      case 'KeepaliveTimer_Expires':
        this.emit({ type: 'sendKeepalive' });
        this.startKeepalive();
        return;
      case 'TcpConnectionFails':
        this.fail(ev.reason ?? 'TCP connection closed', null);
        return;
      case 'NotifMsg':
        this.fail('NOTIFICATION received', null, ev.notification ?? null);
        return;
      case 'NotifMsgVerErr':
        this.notifVerErr(ev.notification);
        return;
      case 'BGPHeaderErr':
      case 'BGPOpenMsgErr':
        this.fail(errorReason(ev.type), ev.notification);
        return;
      case 'OpenCollisionDump':
        this.fail('connection collision', { code: ErrorCode.CEASE, subcode: CeaseSubcode.CONNECTION_COLLISION });
        return;
      case 'KeepAliveMsg':
        this.restartHold();
        this.start1('Stable', this.cfg.stablePeriod ?? 60);
        this.go('Established');
        // RFC 9687 3.3: the SendHoldTimer starts with Established (here: when octets already wait).
        if (this.sendPending) this.startSendHold();
        this.emit({ type: 'established' });
        return;
      default:
        this.unexpected(ev);
    }
  }

  private established(ev: FsmEvent): void {
    switch (ev.type) {
      case 'ManualStart':
      case 'AutomaticStart':
      case 'ManualStart_with_PassiveTcpEstablishment':
      case 'AutomaticStart_with_PassiveTcpEstablishment':
      case 'Tcp_CR_Acked':
      case 'TcpConnectionConfirmed':
        return;
      case 'ManualStop':
        this.manualStop(ev.notification);
        return;
      case 'AutomaticStop':
        this.fail('automatic stop', ceaseOf(ev.notification, 0));
        return;
      case 'HoldTimer_Expires':
        this.fail('hold timer expired', { code: ErrorCode.HOLD_TIMER_EXPIRED, subcode: 0 });
        return;
      case 'SendHoldTimer_Expires':
        // RFC 9687 3.3: the NOTIFICATION is best effort, it must not delay the close: the socket is stuck, so it is
        // destroyed at once rather than given time to flush.
        this.fail('send hold timer expired', { code: ErrorCode.SEND_HOLD_TIMER_EXPIRED, subcode: 0 }, null, true);
        return;
      case 'KeepaliveTimer_Expires':
        this.emit({ type: 'sendKeepalive' });
        this.startKeepalive();
        return;
      case 'StableTimer_Expires':
        // The session has been up long enough: forget past failures (damping resets).
        this.connectRetryCounter = 0;
        return;
      case 'OpenCollisionDump':
        this.fail('connection collision', { code: ErrorCode.CEASE, subcode: CeaseSubcode.CONNECTION_COLLISION });
        return;
      case 'TcpConnectionFails':
        this.fail(ev.reason ?? 'TCP connection closed', null);
        return;
      case 'NotifMsg':
        this.fail('NOTIFICATION received', null, ev.notification ?? null);
        return;
      case 'NotifMsgVerErr':
        this.fail('NOTIFICATION received', null, ev.notification);
        return;
      case 'KeepAliveMsg':
        this.restartHold();
        return;
      case 'UpdateMsg':
        this.restartHold();
        this.emit({ type: 'deliverUpdate' });
        return;
      case 'RouteRefreshMsg':
        this.restartHold();
        this.emit({ type: 'deliverRouteRefresh' });
        return;
      case 'UpdateMsgErr':
        this.fail('malformed UPDATE', ev.notification);
        return;
      case 'BGPHeaderErr':
        // choice: section 6.1's header error, not the FSM error of the event table.
        this.fail('message header error', ev.notification);
        return;
      default:
        this.unexpected(ev);
    }
  }

  // ---- shared steps -----------------------------------------------------------------------------------------------

  /** TCP is up (either direction): send OPEN now, or wait DelayOpen. */
  private tcpUp(): void {
    this.stop('ConnectRetry');
    this.connectAttempts = 0;
    if (this.cfg.delayOpenTime > 0) {
      this.start1('DelayOpen', this.cfg.delayOpenTime);
      return;
    }
    this.sendOpen();
  }

  private sendOpen(): void {
    this.stop('ConnectRetry');
    this.stop('DelayOpen');
    this.emit({ type: 'sendOpen' });
    this.start1('Hold', this.cfg.openHoldTime ?? 240);
    this.go('OpenSent');
  }

  /** RFC 4271 event 20: the peer's OPEN arrived while our DelayOpenTimer ran. */
  private openWithDelay(peerHold: number): void {
    const bad = this.checkHold(peerHold);
    if (bad) {
      this.fail(`unacceptable hold time ${peerHold}`, bad);
      return;
    }
    this.stop('ConnectRetry');
    this.stop('DelayOpen');
    this.emit({ type: 'sendOpen' });
    this.emit({ type: 'sendKeepalive' });
    this.negotiate(peerHold);
    this.startKeepalive();
    this.restartHold();
    this.go('OpenConfirm');
  }

  private checkHold(peerHold: number): Notif | null {
    const min = this.cfg.minHoldTime ?? 3;
    if (peerHold !== 0 && peerHold < min) {
      return { code: ErrorCode.OPEN, subcode: OpenSubcode.UNACCEPTABLE_HOLD_TIME };
    }
    return null;
  }

  private negotiate(peerHold: number): void {
    this.peerHoldTime = peerHold;
    this.holdTime = Math.min(this.cfg.holdTime, peerHold);
    this.keepaliveTime = this.holdTime === 0 ? 0 : Math.floor(this.holdTime / 3);
  }

  private startKeepalive(): void {
    // Hold time 0: no keepalives at all.
    if (this.keepaliveTime > 0) this.start1('Keepalive', this.keepaliveTime * this.jitter());
  }

  private restartHold(): void {
    if (this.holdTime > 0) this.start1('Hold', this.holdTime);
    else this.stop('Hold');
  }

  private startConnectRetry(): void {
    this.start1('ConnectRetry', this.connectRetryInterval());
  }

  private connectRetryInterval(): number {
    const k = Math.min(this.connectAttempts, 16);
    return Math.min(this.cfg.connectRetryTime * 2 ** k, this.cfg.connectRetryMax) * this.jitter();
  }

  /** RFC 4271 10: jitter timers by a factor uniform in 0.75-1.0. */
  private jitter(): number {
    return 0.75 + 0.25 * this.cfg.random();
  }

  private manualStop(n: Notif | undefined): void {
    const notif = ceaseOf(n, CeaseSubcode.ADMIN_SHUTDOWN);
    this.sendNotification(notif);
    this.stopAll();
    this.emit({ type: 'disconnect' });
    this.connectRetryCounter = 0;
    this.enabled = false;
    this.transition('Idle', 'administrative stop', { ...notif, direction: 'sent' });
  }

  /**
   * The common error exit: optionally send a NOTIFICATION, stop timers, drop TCP, count a failure, damp,
   * go Idle.
   */
  private fail(reason: string, send: Notif | null, received: Notif | null = null, abort = false): void {
    if (send) this.sendNotification(send);
    this.stopAll();
    this.emit(abort ? { type: 'disconnect', abort } : { type: 'disconnect' });
    this.connectRetryCounter++;
    const notification = send ? { ...send, direction: 'sent' as const } : received ? { ...received, direction: 'received' as const } : null;
    this.toIdle(reason, notification, true);
  }

  /** NOTIFICATION with version error: no failure counted (the peer is negotiating a version). */
  private notifVerErr(n: Notif): void {
    const delayed = this.running.has('DelayOpen');
    this.stopAll();
    this.emit({ type: 'disconnect' });
    // RFC 4271 8.2.2: counted as a failure only in Connect/Active without DelayOpen.
    const counts = !delayed && (this.state === 'Connect' || this.state === 'Active');
    if (counts) this.connectRetryCounter++;
    this.toIdle('NOTIFICATION: unsupported version', { ...n, direction: 'received' }, counts);
  }

  /** An event the state does not allow: FSM Error (RFC 6608 subcode for messages). */
  private unexpected(ev: FsmEvent): void {
    const isMessage = MESSAGE_EVENTS.has(ev.type);
    if (ev.type === 'NotifMsg') {
      this.fail('NOTIFICATION received', null, ev.notification ?? null);
      return;
    }
    const subcode = isMessage ? (STATE_SUBCODE[this.state] ?? FsmSubcode.UNSPECIFIED) : FsmSubcode.UNSPECIFIED;
    this.fail(`unexpected ${ev.type} in ${this.state}`, { code: ErrorCode.FSM, subcode });
  }

  private toIdle(reason: string, notification: DownInfo['notification'], countsForDamping: boolean): void {
    this.transition('Idle', reason, notification);
    if (this.enabled && this.cfg.autoRestart) {
      const backoff = this.connectAttempts > 0 ? this.connectRetryInterval() : 0;
      const damp = countsForDamping && this.connectRetryCounter > 0
        ? Math.min(this.cfg.idleHoldTime * 2 ** Math.min(this.connectRetryCounter - 1, 16), this.cfg.idleHoldMax ?? this.cfg.connectRetryMax) * this.jitter()
        : 0;
      this.start1('IdleHold', Math.max(backoff, damp, this.cfg.idleHoldTime * this.jitter()));
    }
  }

  /** Leave a state for Idle or Active; a connection that had reached OpenSent reports 'down' (after 'state'). */
  private transition(to: State, reason: string, notification: DownInfo['notification']): void {
    const from = this.state;
    const wasEstablished = from === 'Established';
    if (wasEstablished) this.flaps++;
    const info: DownInfo = { reason, notification, wasEstablished };
    this.lastDown = info;
    this.go(to);
    // A connection that never reached OpenSent had no session to report.
    if (from === 'OpenSent' || from === 'OpenConfirm' || wasEstablished) this.emit({ type: 'down', info });
  }

  private sendNotification(n: Notif): void {
    this.emit({ type: 'sendNotification', code: n.code, subcode: n.subcode, data: n.data ?? EMPTY });
  }

  private start1(t: TimerName, seconds: number): void {
    this.running.add(t);
    this.emit({ type: 'startTimer', timer: t, seconds });
  }

  private stop(t: TimerName): void {
    if (!this.running.delete(t)) return;
    this.emit({ type: 'stopTimer', timer: t });
  }

  private stopAll(): void {
    for (const t of [...this.running]) if (t !== 'IdleHold') this.stop(t);
  }

  private go(to: State): void {
    const from = this.state;
    if (from === to) return;
    this.state = to;
    if (to === 'Idle' || to === 'Active' || to === 'Connect') {
      this.holdTime = 0;
      this.keepaliveTime = 0;
      this.sendPending = false;
    }
    this.emit({ type: 'state', from, to });
  }

  private emit(a: FsmAction): void {
    this.out.push(a);
  }
}

const TIMER_OF: Partial<Record<FsmEventType, TimerName>> = {
  ConnectRetryTimer_Expires: 'ConnectRetry',
  HoldTimer_Expires: 'Hold',
  KeepaliveTimer_Expires: 'Keepalive',
  DelayOpenTimer_Expires: 'DelayOpen',
  IdleHoldTimer_Expires: 'IdleHold',
  StableTimer_Expires: 'Stable',
  SendHoldTimer_Expires: 'SendHold',
};

/** RFC 9687 4: the default SendHoldTime is at least 8 minutes. */
export const SEND_HOLD_MIN = 480;

function ceaseOf(n: Notif | undefined, subcode: number): Notif {
  return n ?? { code: ErrorCode.CEASE, subcode };
}

function errorReason(t: 'BGPHeaderErr' | 'BGPOpenMsgErr'): string {
  return t === 'BGPHeaderErr' ? 'message header error' : 'OPEN message error';
}

/** The FSM event a timer's expiry produces. */
export function timerEvent(t: TimerName): FsmEvent {
  switch (t) {
    case 'ConnectRetry': return { type: 'ConnectRetryTimer_Expires' };
    case 'Hold': return { type: 'HoldTimer_Expires' };
    case 'Keepalive': return { type: 'KeepaliveTimer_Expires' };
    case 'DelayOpen': return { type: 'DelayOpenTimer_Expires' };
    case 'IdleHold': return { type: 'IdleHoldTimer_Expires' };
    case 'Stable': return { type: 'StableTimer_Expires' };
    case 'SendHold': return { type: 'SendHoldTimer_Expires' };
  }
}
