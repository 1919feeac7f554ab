// Per-key request batching: concurrent requests for one host (or all releases) are run together as one pass, so a
// busy node pays one durable write for many pods. Its own file because assignment and release both batch.

type Waiter<A, R> = { args: A; resolve: (r: R) => void; reject: (e: unknown) => void };

/** Runs queued requests for one key together; the next batch starts when the previous one is done. */
export class Batcher<A, R> {
  static readonly maxItems = 64;
  private readonly queues = new Map<string, Waiter<A, R>[]>();
  private readonly running = new Set<string>();
  constructor(private readonly run: (key: string, items: A[]) => Promise<(R | Error)[]>) {}

  submit(key: string, args: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let q = this.queues.get(key);
      if (!q) this.queues.set(key, (q = []));
      q.push({ args, resolve, reject });
      if (!this.running.has(key)) {
        // Start on the next microtask, so callers woken by the previous batch's results join this one.
        this.running.add(key);
        queueMicrotask(() => void this.drain(key));
      }
    });
  }

  private async drain(key: string): Promise<void> {
    try {
      for (;;) {
        const pending = this.queues.get(key);
        if (!pending || pending.length === 0) break;
        // A batch is one transaction: keep it well inside etcd's 128 operations per transaction (a handle record
        // per request plus the blocks they touch).
        const q = pending.splice(0, Batcher.maxItems);
        if (pending.length === 0) this.queues.delete(key);
        try {
          const results = await this.run(key, q.map((w) => w.args));
          q.forEach((w, i) => (results[i] instanceof Error ? w.reject(results[i]) : w.resolve(results[i] as R)));
        } catch (e) {
          for (const w of q) w.reject(e);
        }
      }
    } finally {
      this.running.delete(key);
    }
  }
}
