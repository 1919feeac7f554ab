// When the RIB's pending changes are flushed (and so exported to every peer). A flush runs on the next turn of
// the event loop when none ran in the last `gapMs`, else as soon as the gap has passed. A burst of one-prefix
// UPDATEs from many peers then reaches each peer in batches of at least gapMs' worth — one packed write per peer
// per batch rather than one per event-loop turn, which on a quiet machine is every few hundred microseconds —
// while a lone change (an IPAM claim on an idle node) still goes out on the next turn, with no added delay.
// BIRD gets the same effect from processing its socket events before its export events; RFC 4271's
// MinRouteAdvertisementIntervalTimer is the same idea at a scale of seconds.

export interface PacerClock {
  now(): number;
  soon(fn: () => void): void;
  after(ms: number, fn: () => void): void;
}

export const hostPacerClock: PacerClock = {
  now: () => performance.now(),
  soon: (fn) => setImmediate(fn),
  after: (ms, fn) => setTimeout(fn, ms),
};

/** Default gap between RIB flushes while changes keep arriving. */
export const FLUSH_GAP_MS = 10;

export class FlushPacer {
  private queued = false;
  private last = -Infinity;

  constructor(
    private readonly run: () => void,
    private readonly gapMs = FLUSH_GAP_MS,
    private readonly clock: PacerClock = hostPacerClock,
  ) {}

  /** Ask for a flush; several asks before it runs give one flush. */
  request(): void {
    if (this.queued) return;
    this.queued = true;
    const wait = this.last + this.gapMs - this.clock.now();
    if (wait <= 0) this.clock.soon(this.fire);
    else this.clock.after(wait, this.fire);
  }

  private readonly fire = (): void => {
    this.queued = false;
    this.last = this.clock.now();
    this.run();
  };
}
