// A store that dies at its k-th write, for crash-consistency tests (claim-crash, claim-affinity).
import { StoreError, type Compare, type KeyValue, type Op, type Store, type TxnResult, type WatchEvent, type Watcher } from '../../src/store/types.ts';

/** A store that dies at its k-th write: before applying it, or after (the caller never hears back). */
export class CrashingStore implements Store {
  readonly name = 'crashing';
  writes = 0;
  dead = false;
  constructor(private readonly inner: Store, private readonly crashAt: number, private readonly after: boolean) {}
  private alive(): void {
    if (this.dead) throw new StoreError('crashed');
  }
  private async write<R>(fn: () => Promise<R>): Promise<R> {
    this.alive();
    if (++this.writes !== this.crashAt) return fn();
    this.dead = true;
    if (this.after) await fn();
    throw new StoreError('crashed');
  }
  async get(key: string): Promise<KeyValue | undefined> { this.alive(); return this.inner.get(key); }
  async list(prefix: string): Promise<KeyValue[]> { this.alive(); return this.inner.list(prefix); }
  put(key: string, value: string): Promise<number> { return this.write(() => this.inner.put(key, value)); }
  delete(key: string): Promise<boolean> { return this.write(() => this.inner.delete(key)); }
  async txn(compares: Compare[], ops: Op[]): Promise<TxnResult> {
    if (ops.length === 0) { this.alive(); return this.inner.txn(compares, ops); }
    return this.write(() => this.inner.txn(compares, ops));
  }
  watch(prefix: string, from: number, onEvent: (e: WatchEvent[]) => void): Watcher { return this.inner.watch(prefix, from, onEvent); }
  revision(): Promise<number> { return this.inner.revision(); }
  close(): Promise<void> { return this.inner.close(); }
}
