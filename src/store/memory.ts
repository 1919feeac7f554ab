// An in-memory Store for unit tests of the pure IPAM core. Not durable, one process only.
import { KvState } from './state.ts';
import { StoreError, type Compare, type KeyValue, type Op, type Store, type TxnResult, type WatchEvent, type Watcher } from './types.ts';

export class MemoryStore implements Store {
  readonly name = 'memory';
  private readonly state = new KvState();
  private closed = false;
  /** Events kept so a watch can start from an old revision. */
  private readonly history: WatchEvent[] = [];

  constructor() {
    this.state.watch('', (events) => this.history.push(...events));
  }

  private check(): void {
    if (this.closed) throw new StoreError('memory store is closed');
  }

  async get(key: string): Promise<KeyValue | undefined> {
    this.check();
    return this.state.get(key);
  }

  async list(prefix: string): Promise<KeyValue[]> {
    this.check();
    return this.state.list(prefix);
  }

  async put(key: string, value: string): Promise<number> {
    return (await this.txn([], [{ type: 'put', key, value }])).revision;
  }

  async delete(key: string): Promise<boolean> {
    this.check();
    const existed = this.state.get(key) !== undefined;
    if (existed) this.state.txn([], [{ type: 'delete', key }]);
    return existed;
  }

  async txn(compares: Compare[], ops: Op[]): Promise<TxnResult> {
    this.check();
    return this.state.txn(compares, ops);
  }

  watch(prefix: string, fromRevision: number, onEvent: (events: WatchEvent[]) => void): Watcher {
    this.check();
    if (fromRevision > 0) {
      const old = this.history.filter((e) => e.revision > fromRevision && e.key.startsWith(prefix));
      if (old.length) queueMicrotask(() => onEvent(old));
    }
    const stop = this.state.watch(prefix, (events) => queueMicrotask(() => onEvent(events)));
    return { close: stop };
  }

  async revision(): Promise<number> {
    return this.state.revision;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
