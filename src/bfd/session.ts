// One BFD session in asynchronous mode (RFC 5880 section 6): the state machine, the transmit and detection timers
// and Poll/Final, pure. Time is given (ms), randomness is given; the caller sends what it returns and calls
// advance() at deadline(). No Echo function, no Demand mode of our own, no authentication.
import { BfdState, STATE_NAMES, Diag, DIAG_NAMES, encode, checkForSession, type ControlPacket, type BfdStateName } from './codec.ts';

export interface BfdParams {
  /** bfd.DesiredMinTxInterval while Up, microseconds */
  desiredMinTx: number;
  /** bfd.RequiredMinRxInterval, microseconds */
  requiredMinRx: number;
  /** bfd.DetectMult */
  detectMult: number;
}

/** RFC 5880 6.8.3: while not Up, transmit no faster than once a second. */
export const SLOW_TX_US = 1_000_000;

export type BfdAction =
  | { type: 'send'; packet: Buffer; poll: boolean; final: boolean }
  | { type: 'state'; from: BfdStateName; to: BfdStateName; diag: number; /** the remote said AdminDown (RFC 5882 3.2: not a failure) */ remoteAdminDown: boolean };

export interface BfdSessionStatus {
  state: BfdStateName;
  remoteState: BfdStateName;
  localDiscriminator: number;
  remoteDiscriminator: number;
  /** why the local state last changed */
  diag: string;
  remoteDiag: string;
  /** the transmit interval in use (before jitter), ms; null while nothing is sent */
  txInterval: number | null;
  /** the detection time in use, ms; null before the first packet */
  detectionTime: number | null;
  detectMult: number;
  remoteDetectMult: number;
  remoteMinRx: number;
  remoteMinTx: number;
  pollInProgress: boolean;
}

export class BfdSession {
  state: BfdState = BfdState.Down;
  remoteState: BfdState = BfdState.Down;
  remoteDiscr = 0;
  localDiag: number = Diag.None;
  remoteDiag: number = Diag.None;
  /** RFC 5880 6.8.1: initial bfd.RemoteMinRxInterval is 1 us (send at our own pace until told otherwise). */
  private remoteMinRx = 1;
  private remoteMinTx = 0;
  private remoteDetectMult = 0;
  private remoteDemand = false;
  /** bfd.DesiredMinTxInterval as advertised now */
  private desiredTx: number;
  /** what the transmit timer uses: lags an increase of desiredTx until the Final (6.8.3) */
  private txUsed: number;
  /** what the detection time uses: lags a decrease of RequiredMinRx until the Final (6.8.3) */
  private rxUsed: number;
  private pollActive = false;
  private nextTx: number;
  private detectAt: number | null = null;

  constructor(readonly localDiscr: number, private params: BfdParams, private readonly random: () => number, now: number) {
    if (localDiscr === 0) throw new RangeError('local discriminator must be non-zero');
    this.desiredTx = Math.max(params.desiredMinTx, SLOW_TX_US);
    this.txUsed = this.desiredTx;
    this.rxUsed = params.requiredMinRx;
    this.nextTx = now; // the first packet goes out at once
  }

  get stateName(): BfdStateName {
    return STATE_NAMES[this.state];
  }

  /** The next time advance() has work (ms). */
  deadline(): number {
    return this.detectAt === null ? this.nextTx : Math.min(this.nextTx, this.detectAt);
  }

  /** Timers: detection time expiry, then the periodic packet. */
  advance(now: number): BfdAction[] {
    const out: BfdAction[] = [];
    if (this.detectAt !== null && now >= this.detectAt) {
      this.detectAt = null;
      if (this.state === BfdState.Init || this.state === BfdState.Up) {
        this.goto(BfdState.Down, Diag.ControlDetectionTimeExpired, out, now, false);
      }
      // 6.8.1: the remote discriminator is forgotten when the detection time passes without packets
      this.remoteDiscr = 0;
      this.remoteState = BfdState.Down;
      this.remoteMinRx = 1;
    }
    if (now >= this.nextTx) {
      if (this.mayTransmit()) out.push(this.packet(this.pollActive, false));
      this.scheduleTx(now);
    }
    return out;
  }

  /** A packet that passed the codec's checks (decode()); the session-level checks are made here. */
  receive(p: ControlPacket, now: number): BfdAction[] | { discard: string } {
    const bad = checkForSession(p, this.localDiscr);
    if (bad) return { discard: bad };
    const out: BfdAction[] = [];
    this.remoteDiscr = p.myDiscriminator;
    this.remoteState = p.state;
    this.remoteDemand = p.demand;
    this.remoteDiag = p.diag;
    this.remoteMinTx = p.desiredMinTxInterval;
    this.remoteDetectMult = p.detectMult;
    const oldRemoteRx = this.remoteMinRx;
    this.remoteMinRx = p.requiredMinRxInterval;
    if (p.final && this.pollActive) {
      this.pollActive = false;
      this.txUsed = this.desiredTx;
      this.rxUsed = this.params.requiredMinRx;
    }
    // 6.8.7: a slower receiver must be honoured at once; reschedule when the interval changed.
    if (this.remoteMinRx !== oldRemoteRx) this.scheduleTx(now);
    if (this.state === BfdState.AdminDown) return { discard: 'session is AdminDown' };
    if (p.state === BfdState.AdminDown) {
      if (this.state !== BfdState.Down) this.goto(BfdState.Down, Diag.NeighborSignaledSessionDown, out, now, true);
    } else if (this.state === BfdState.Down) {
      if (p.state === BfdState.Down) this.goto(BfdState.Init, this.localDiag, out, now, false);
      else if (p.state === BfdState.Init) this.goto(BfdState.Up, this.localDiag, out, now, false);
    } else if (this.state === BfdState.Init) {
      if (p.state === BfdState.Init || p.state === BfdState.Up) this.goto(BfdState.Up, this.localDiag, out, now, false);
    } else if (p.state === BfdState.Down) {
      this.goto(BfdState.Down, Diag.NeighborSignaledSessionDown, out, now, false);
    }
    // 6.8.7: answer a Poll with a Final at once (never both bits in one packet).
    if (p.poll && !out.some((a) => a.type === 'send')) out.push(this.packet(false, true));
    else if (p.poll) {
      const i = out.findIndex((a) => a.type === 'send');
      out[i] = this.packet(false, true);
    }
    this.detectAt = now + this.detectionTimeUs() / 1000;
    return out;
  }

  /** Administratively down (RFC 5880 6.8.16) or back. */
  setAdminDown(down: boolean, now: number): BfdAction[] {
    const out: BfdAction[] = [];
    if (down && this.state !== BfdState.AdminDown) this.goto(BfdState.AdminDown, Diag.AdministrativelyDown, out, now, false);
    else if (!down && this.state === BfdState.AdminDown) this.goto(BfdState.Down, Diag.None, out, now, false);
    return out;
  }

  /** New intervals/multiplier (a reload): while Up, a Poll Sequence announces them (6.8.3). */
  setParams(params: BfdParams, now: number): BfdAction[] {
    this.params = params;
    const out: BfdAction[] = [];
    this.applyTx(this.state === BfdState.Up ? params.desiredMinTx : Math.max(params.desiredMinTx, SLOW_TX_US), now, out);
    if (this.state === BfdState.Up) {
      if (params.requiredMinRx > this.rxUsed) this.rxUsed = params.requiredMinRx;
      this.startPoll(now, out);
    } else this.rxUsed = params.requiredMinRx;
    return out;
  }

  status(): BfdSessionStatus {
    const tx = this.mayTransmit() ? this.txIntervalUs() / 1000 : null;
    return {
      state: this.stateName,
      remoteState: STATE_NAMES[this.remoteState],
      localDiscriminator: this.localDiscr,
      remoteDiscriminator: this.remoteDiscr,
      diag: DIAG_NAMES[this.localDiag] ?? String(this.localDiag),
      remoteDiag: DIAG_NAMES[this.remoteDiag] ?? String(this.remoteDiag),
      txInterval: tx,
      detectionTime: this.remoteDetectMult ? this.detectionTimeUs() / 1000 : null,
      detectMult: this.params.detectMult,
      remoteDetectMult: this.remoteDetectMult,
      remoteMinRx: this.remoteMinRx / 1000,
      remoteMinTx: this.remoteMinTx / 1000,
      pollInProgress: this.pollActive,
    };
  }

  // ---- internals ------------------------------------------------------------------------------------------------

  /** 6.8.4: in asynchronous mode, the remote's Detect Mult times the agreed interval. */
  private detectionTimeUs(): number {
    return this.remoteDetectMult * Math.max(this.rxUsed, this.remoteMinTx);
  }

  /** 6.8.2/6.8.3: the larger of our desired transmit interval and what the remote can receive. */
  private txIntervalUs(): number {
    return Math.max(this.txUsed, this.remoteMinRx);
  }

  /** 6.8.7: no periodic packets when the remote wants none (RemoteMinRx 0) or is in Demand mode with us both Up. */
  private mayTransmit(): boolean {
    if (this.remoteMinRx === 0) return false;
    if (this.remoteDemand && this.state === BfdState.Up && this.remoteState === BfdState.Up && !this.pollActive) return false;
    return true;
  }

  /** 6.8.7 jitter: 0-25% shorter, or 10-25% shorter when Detect Mult is 1. */
  private scheduleTx(now: number): void {
    const iv = this.txIntervalUs() / 1000;
    const r = this.random();
    const factor = this.params.detectMult === 1 ? 0.9 - 0.15 * r : 1 - 0.25 * r;
    this.nextTx = now + iv * factor;
  }

  private packet(poll: boolean, final: boolean): BfdAction {
    const packet = encode({
      diag: this.localDiag,
      state: this.state,
      poll,
      final,
      detectMult: this.params.detectMult,
      myDiscriminator: this.localDiscr,
      yourDiscriminator: this.remoteDiscr,
      desiredMinTxInterval: this.desiredTx,
      requiredMinRxInterval: this.params.requiredMinRx,
      requiredMinEchoRxInterval: 0,
    });
    return { type: 'send', packet, poll, final };
  }

  private applyTx(us: number, now: number, out: BfdAction[]): void {
    if (us === this.desiredTx) return;
    const up = this.state === BfdState.Up;
    this.desiredTx = us;
    // Faster at once; slower only after the Final, so the remote's detection time has caught up (6.8.3).
    if (!up || us < this.txUsed) {
      this.txUsed = us;
      this.scheduleTx(now);
    }
    if (up) this.startPoll(now, out);
  }

  private startPoll(now: number, out: BfdAction[]): void {
    this.pollActive = true;
    if (!out.some((a) => a.type === 'send')) out.push(this.packet(true, false));
    this.scheduleTx(now);
  }

  private goto(to: BfdState, diag: number, out: BfdAction[], now: number, remoteAdminDown: boolean): void {
    const from = this.state;
    this.state = to;
    this.localDiag = diag;
    out.push({ type: 'state', from: STATE_NAMES[from], to: STATE_NAMES[to], diag, remoteAdminDown });
    if (to === BfdState.Up) {
      // 6.8.3: the configured (faster) rate takes effect through a Poll Sequence.
      this.applyTx(this.params.desiredMinTx, now, out);
    } else {
      this.pollActive = false;
      this.desiredTx = Math.max(this.params.desiredMinTx, SLOW_TX_US);
      this.txUsed = this.desiredTx;
      this.rxUsed = this.params.requiredMinRx;
    }
    // Tell the remote about the change at once rather than at the next (possibly slow) tick.
    if (!out.some((a) => a.type === 'send') && this.mayTransmit() && to !== BfdState.AdminDown) out.push(this.packet(this.pollActive, false));
    else if (to === BfdState.AdminDown) out.push(this.packet(false, false));
    this.scheduleTx(now);
  }
}
