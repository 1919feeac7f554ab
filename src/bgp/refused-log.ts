// Connections the listener refuses because their source is not a configured peer: counted per address and logged at
// most once a minute per address, each line with the count since the address's last line. Pure (the caller passes
// the clock). Bounded against scans from many sources: at most `maxAddresses` are tracked (the least recently seen
// goes first), and at most `newPerInterval` new addresses a minute get a line of their own; refusals beyond that are
// only counted, and reported together as one line.

export const REFUSED_LOG_INTERVAL_MS = 60_000;
export const REFUSED_LOG_MAX_ADDRESSES = 1024;
export const REFUSED_LOG_NEW_PER_INTERVAL = 100;

/** A log line: `count` connections from `address` since its last line; address null: from addresses not tracked. */
export interface RefusedLine {
  address: string | null;
  count: number;
}

interface Entry {
  /** When this address's last line was (ms). */
  lastLine: number;
  /** Refused since that line, not yet logged. */
  count: number;
}

export class RefusedLog {
  /** In order of last refusal, oldest first (a Map keeps insertion order; a refusal re-inserts). */
  private readonly byAddress = new Map<string, Entry>();
  /** Entries with count > 0. */
  private pendingEntries = 0;
  /** Refusals not logged under their address (not tracked, or forgotten with a count). */
  private others = 0;
  private windowStart = -Infinity;
  private newInWindow = 0;
  /** Every refusal since the start. */
  total = 0;

  constructor(
    private readonly maxAddresses = REFUSED_LOG_MAX_ADDRESSES,
    private readonly intervalMs = REFUSED_LOG_INTERVAL_MS,
    private readonly newPerInterval = REFUSED_LOG_NEW_PER_INTERVAL,
  ) {}

  /** Addresses tracked now. */
  get size(): number {
    return this.byAddress.size;
  }

  /** A refused connection from `address` at `now` (ms): the line to log now, or null. */
  note(address: string, now: number): RefusedLine | null {
    this.total++;
    const e = this.byAddress.get(address);
    if (e !== undefined) {
      this.byAddress.delete(address);
      this.byAddress.set(address, e);
      if (now - e.lastLine < this.intervalMs) {
        if (e.count++ === 0) this.pendingEntries++;
        return null;
      }
      const count = e.count + 1;
      if (e.count > 0) this.pendingEntries--;
      e.count = 0;
      e.lastLine = now;
      return { address, count };
    }
    if (now - this.windowStart >= this.intervalMs) {
      this.windowStart = now;
      this.newInWindow = 0;
    }
    if (this.newInWindow >= this.newPerInterval) {
      this.others++;
      return null;
    }
    this.newInWindow++;
    if (this.byAddress.size >= this.maxAddresses) {
      const [oldest, old] = this.byAddress.entries().next().value as [string, Entry];
      this.byAddress.delete(oldest);
      if (old.count > 0) {
        this.pendingEntries--;
        this.others += old.count;
      }
    }
    this.byAddress.set(address, { lastLine: now, count: 0 });
    return { address, count: 1 };
  }

  /** Counts wait to be logged (call flush later). */
  waiting(): boolean {
    return this.pendingEntries > 0 || this.others > 0;
  }

  /** The lines due at `now`: addresses whose minute is up (every waiting one when `all`), then the others. */
  flush(now: number, all = false): RefusedLine[] {
    const out: RefusedLine[] = [];
    if (this.pendingEntries > 0) {
      for (const [address, e] of this.byAddress) {
        if (e.count === 0 || (!all && now - e.lastLine < this.intervalMs)) continue;
        out.push({ address, count: e.count });
        e.count = 0;
        e.lastLine = now;
        this.pendingEntries--;
      }
    }
    if (this.others > 0) {
      out.push({ address: null, count: this.others });
      this.others = 0;
    }
    return out;
  }
}
