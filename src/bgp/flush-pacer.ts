// When the RIB's pending changes are flushed (and so exported to every peer). A flush runs on the next turn of
// the event loop when none ran in the last `gapMs`, else as soon as the gap has passed. A burst of one-prefix
// UPDATEs from many peers then reaches each peer in batches of at least gapMs' worth — one packed write per peer
// per batch rather than one per event-loop turn, which on a quiet machine is every few hundred microseconds —
// while a lone change (an IPAM claim on an idle node) still goes out on the next turn, with no added delay.
// BIRD gets the same effect from processing its socket events before its export events; RFC 4271's
// MinRouteAdvertisementIntervalTimer is the same idea at a scale of seconds.
//
// A flush that took long (many peers, many routes) also holds the next one back for BUSY_FACTOR times as long
// after it ended, so during a storm flushing takes at most ~1/(BUSY_FACTOR + 1) of the time: with 100 peers
// bringing up 100 prefixes each a flush takes ~2-3 ms, the next comes ~25 ms later instead of 10, and the run
// costs ~10% less CPU (fewer, larger exports and writes per peer). A cheap flush (an IPAM claim, a few peers)
// keeps the 10 ms gap: a constant 25 ms gap cost the same CPU but doubled the claim-to-ToR p50 in a burst of
// claims (11 -> 22 ms).

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
/** After a flush that took d ms, the next waits at least BUSY_FACTOR x d from its end, */
export const BUSY_FACTOR = 10;
/** but never more than this for that reason (a flush slowed by a loaded machine must not stall exports). */
export const BUSY_WAIT_MAX_MS = 250;

export class FlushPacer {
  private queued = false;
  /** When the next flush may run. */
  private nextAt = -Infinity;
  /** Bumped whenever a flush is arranged or run: a timer or turn arranged before then is stale and does nothing. */
  private gen = 0;
  private soonQueued = false;

  constructor(
    private readonly run: () => void,
    private readonly gapMs = FLUSH_GAP_MS,
    private readonly clock: PacerClock = hostPacerClock,
    private readonly busyFactor = BUSY_FACTOR,
  ) {}

  /** Ask for a flush; several asks before it runs give one flush. */
  request(): void {
    if (this.queued) return;
    this.queued = true;
    const g = ++this.gen;
    const wait = this.nextAt - this.clock.now();
    if (wait <= 0) this.clock.soon(() => this.fire(g));
    else this.clock.after(wait, () => this.fire(g));
  }

  /**
   * A flush on the next turn whatever the pacing: the RIB asks when a batch has grown so large that holding it
   * longer costs more than it saves (its records have left the CPU's caches by the time it is read). A flush
   * already arranged for later is dropped; the pacing after this flush is as after any other.
   */
  requestSoon(): void {
    if (this.soonQueued) return;
    this.queued = true;
    this.soonQueued = true;
    const g = ++this.gen;
    this.clock.soon(() => this.fire(g));
  }

  private fire(g: number): void {
    if (g !== this.gen) return; // superseded by requestSoon
    this.queued = false;
    this.soonQueued = false;
    const start = this.clock.now();
    this.nextAt = start + this.gapMs; // (set first: a flush that throws still paces the next)
    this.run();
    const end = this.clock.now();
    this.nextAt = Math.max(start + this.gapMs, end + Math.min((end - start) * this.busyFactor, BUSY_WAIT_MAX_MS));
  }
}
