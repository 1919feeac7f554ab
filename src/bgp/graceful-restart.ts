// Graceful restart (RFC 4724) at the speaker. As the helper: a peer whose session failed keeps its routes, marked
// stale, until it is back and has sent End-of-RIB or its time is up; then what it did not re-send is swept. As the
// restarting speaker: the R bit in our OPENs until the first session. Its own file: the timers and the sweep are
// one story, apart from the session events that set it going.
import type { Rib } from '../rib/rib.ts';
import type { DownInfo } from './fsm.ts';
import type { PeerState } from './peer.ts';
import type { NegotiatedCapabilities } from './session.ts';
import type { Logger } from './speaker-config.ts';

/** How long a helper waits for End-of-RIB after the restarting peer came back (FRR's stalepath-time). */
const STALE_PATH_TIME = 360;

/** The helper role for every peer of a speaker: its RIB, its log, and its flush request after a sweep. */
export class GracefulRestart {
  constructor(
    private readonly rib: Rib,
    private readonly log: Logger,
    private readonly scheduleFlush: () => void,
  ) {}

  /** The peer's established session went down: its routes are kept as stale (when it may restart) or dropped. */
  peerDown(p: PeerState, info: DownInfo, running: boolean): void {
    const gr = p.peerGr;
    if (gr && info.notification === null && gr.restartTime > 0 && running) {
      // RFC 4724 4.2 helper: keep the peer's routes, marked stale, until it returns or the restart time passes.
      const n = this.rib.markStale(p.source);
      p.helping = true;
      this.log.info(`peer ${p.cfg.address}: down (${info.reason}); graceful restart: keeping ${n} routes as stale for up to ${gr.restartTime}s`);
      clearGrTimer(p);
      p.grTimer = setTimeout(() => {
        p.grTimer = null;
        this.log.warn(`peer ${p.cfg.address}: did not come back within its restart time: stale routes removed`);
        this.sweep(p);
      }, gr.restartTime * 1000);
    } else {
      this.log.info(`peer ${p.cfg.address}: down (${info.reason})`);
      if (this.rib.hasSource(p.source)) this.rib.dropSource(p.source);
      this.end(p);
    }
  }

  /** The peer is Established again (`neg`): its stale routes wait for End-of-RIB, or go now without forwarding state. */
  peerBack(p: PeerState, neg: NegotiatedCapabilities): void {
    if (p.helping) {
      clearGrTimer(p);
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
  }

  /** An End-of-RIB arrived (p.eorReceived holds it): once every family has had one, the stale routes left go. */
  endOfRib(p: PeerState): void {
    const fams = p.established?.negotiated?.families ?? [];
    if (p.helping && fams.every((x) => p.eorReceived.has(x))) {
      this.log.info(`peer ${p.cfg.address}: End-of-RIB after restart: removing routes it did not re-send`);
      this.sweep(p);
    }
  }

  private sweep(p: PeerState): void {
    if (this.rib.hasSource(p.source)) {
      const n = this.rib.sweepStale(p.source);
      if (n > 0) this.log.info(`peer ${p.cfg.address}: ${n} stale routes removed`);
    }
    this.end(p);
    this.scheduleFlush();
  }

  /** No longer helping the peer (its routes were dropped or swept). */
  end(p: PeerState): void {
    p.helping = false;
    clearGrTimer(p);
  }
}

export function clearGrTimer(p: PeerState): void {
  if (p.grTimer) clearTimeout(p.grTimer);
  p.grTimer = null;
}

/** Restarting-speaker role: our R bit is for the first session after our restart only. */
export function endRestarting(p: PeerState): void {
  if (p.restarting) {
    p.restarting = false;
    for (const x of [p.session, p.incoming]) if (x?.cfg.gracefulRestart) x.cfg.gracefulRestart = { ...x.cfg.gracefulRestart, restarting: false };
  }
}
