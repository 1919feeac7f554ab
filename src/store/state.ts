// The pure state machine behind the local stores: keys, revisions, transactions and watch fan-out.
// No I/O: memory.ts uses it as is, file.ts feeds it records replayed from and appended to its log.
import type { Compare, KeyValue, Op, TxnResult, WatchEvent } from './types.ts';

interface WatchEntry {
  prefix: string;
  onEvent: (events: WatchEvent[]) => void;
}

export class KvState {
  private readonly map = new Map<string, KeyValue>();
  /** Keys in sorted order, so a prefix list is a binary search plus a slice, not a scan of every key. */
  private sorted: string[] = [];
  private rev = 0;
  private readonly watchers = new Set<WatchEntry>();

  get revision(): number {
    return this.rev;
  }

  get size(): number {
    return this.map.size;
  }

  get(key: string): KeyValue | undefined {
    return this.map.get(key);
  }

  list(prefix: string): KeyValue[] {
    const out: KeyValue[] = [];
    for (let i = lowerBound(this.sorted, prefix); i < this.sorted.length && this.sorted[i].startsWith(prefix); i++) {
      out.push(this.map.get(this.sorted[i])!);
    }
    return out;
  }

  /** Every key/value, in no particular order (for snapshots). */
  entries(): IterableIterator<KeyValue> {
    return this.map.values();
  }

  /** The keys whose compare does not hold now. */
  failedCompares(compares: Compare[]): string[] {
    const failed: string[] = [];
    for (const c of compares) {
      const kv = this.map.get(c.key);
      if ((kv ? kv.modRevision : 0) !== c.modRevision) failed.push(c.key);
    }
    return failed;
  }

  /** Evaluate and, if the compares hold, apply a transaction as the next revision. */
  txn(compares: Compare[], ops: Op[]): TxnResult {
    const failed = this.failedCompares(compares);
    if (failed.length) return { succeeded: false, revision: this.rev, failed };
    if (ops.length === 0) return { succeeded: true, revision: this.rev };
    this.apply(this.rev + 1, ops);
    return { succeeded: true, revision: this.rev };
  }

  /** Apply ops already decided (a replayed log record) at `revision`. */
  apply(revision: number, ops: Op[]): void {
    if (revision <= this.rev) throw new Error(`revision ${revision} is not after ${this.rev}`);
    this.rev = revision;
    const events: WatchEvent[] = [];
    for (const op of ops) {
      if (op.type === 'put') {
        const old = this.map.get(op.key);
        if (!old) insertSorted(this.sorted, op.key);
        this.map.set(op.key, {
          key: op.key,
          value: op.value,
          createRevision: old ? old.createRevision : revision,
          modRevision: revision,
        });
        events.push({ type: 'put', key: op.key, value: op.value, revision });
      } else if (this.map.delete(op.key)) {
        removeSorted(this.sorted, op.key);
        events.push({ type: 'delete', key: op.key, revision });
      }
    }
    if (this.watchers.size && events.length) this.emit(events);
  }

  /** Load a snapshot entry (keeps its revisions). */
  load(kv: KeyValue, storeRevision: number): void {
    if (!this.map.has(kv.key)) insertSorted(this.sorted, kv.key);
    this.map.set(kv.key, kv);
    if (storeRevision > this.rev) this.rev = storeRevision;
  }

  setRevision(revision: number): void {
    if (revision > this.rev) this.rev = revision;
  }

  clear(): void {
    this.map.clear();
    this.sorted = [];
    this.rev = 0;
  }

  watch(prefix: string, onEvent: (events: WatchEvent[]) => void): () => void {
    const entry = { prefix, onEvent };
    this.watchers.add(entry);
    return () => this.watchers.delete(entry);
  }

  private emit(events: WatchEvent[]): void {
    for (const w of this.watchers) {
      const mine = events.filter((e) => e.key.startsWith(w.prefix));
      if (mine.length) w.onEvent(mine);
    }
  }
}

/** First index whose key is >= `key`. */
function lowerBound(keys: string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertSorted(keys: string[], key: string): void {
  const i = lowerBound(keys, key);
  // Appending in order (the common case when loading a log) stays O(1).
  if (i === keys.length) keys.push(key);
  else keys.splice(i, 0, key);
}

function removeSorted(keys: string[], key: string): void {
  const i = lowerBound(keys, key);
  if (keys[i] === key) keys.splice(i, 1);
}
