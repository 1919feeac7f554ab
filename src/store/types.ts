// The Store: an etcd-v3-shaped key/value interface that IPAM is written against.
//
// Every key has a createRevision and a modRevision taken from one store-wide revision counter that grows by one
// per committed transaction (as in etcd). Writes that must not lose a race are transactions whose compares check a
// key's modRevision (0 = the key must not exist). Implementations: memory.ts (tests), file.ts (embedded default,
// durable), etcd.ts (distributed).

export interface KeyValue {
  key: string;
  value: string;
  /** Revision of the transaction that created the key. */
  createRevision: number;
  /** Revision of the last transaction that wrote the key. */
  modRevision: number;
}

/** A transaction guard: the key's modRevision must equal `modRevision` (0 means the key must be absent). */
export interface Compare {
  key: string;
  modRevision: number;
}

export type Op = { type: 'put'; key: string; value: string } | { type: 'delete'; key: string };

export interface TxnResult {
  /** True when every compare held and the ops were applied. */
  succeeded: boolean;
  /** The store revision after the transaction (the revision the ops were written at, when they were). */
  revision: number;
  /** On failure: the keys whose compare did not hold. */
  failed?: string[];
}

export interface WatchEvent {
  type: 'put' | 'delete';
  key: string;
  /** For puts, the new value; for deletes, undefined. */
  value?: string;
  revision: number;
}

export interface Watcher {
  close(): void;
}

export interface Store {
  /** A short description for logs and errors, e.g. "file:/var/lib/blockspeaker". */
  readonly name: string;
  get(key: string): Promise<KeyValue | undefined>;
  /** Every key starting with `prefix`, sorted by key. */
  list(prefix: string): Promise<KeyValue[]>;
  /** Unconditional write; returns the new revision. */
  put(key: string, value: string): Promise<number>;
  /** Unconditional delete; returns true if the key existed. */
  delete(key: string): Promise<boolean>;
  /** Atomically: if every compare holds, apply every op. Acknowledged only once durable. */
  txn(compares: Compare[], ops: Op[]): Promise<TxnResult>;
  /**
   * Call `onEvent` for every change to keys under `prefix` after `fromRevision` (exclusive; 0 = from now on).
   * Events arrive in revision order. A watch that cannot go on (its start revision was compacted away) stops
   * and reports a StoreError to `onError` (stores that can tell at once throw instead).
   */
  watch(prefix: string, fromRevision: number, onEvent: (events: WatchEvent[]) => void, onError?: (err: StoreError) => void): Watcher;
  /** The current store revision. */
  revision(): Promise<number>;
  close(): Promise<void>;
}

/** The store cannot do what was asked (closed, unreachable, corrupt, locked). The message says which. */
export class StoreError extends Error {
  override name = 'StoreError';
}
