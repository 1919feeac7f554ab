// Copy every key of one Store into another (an embedded store into etcd, or back). Values are copied as they are;
// revisions are the target's own (IPAM keeps no revision inside a value, so nothing needs rewriting).
import { StoreError, type KeyValue, type Op, type Store } from './types.ts';

export interface MigrateOptions {
  /** Replace what the target already holds under `guardPrefix` (keys the source lacks there are deleted). */
  force?: boolean;
  /** The target must hold nothing under this prefix unless `force`. Default /blockspeaker/ipam/. */
  guardPrefix?: string;
  /** Keys per transaction (etcd allows 128 operations per transaction by default). Default 64. */
  batch?: number;
}

export interface MigrateResult {
  from: string;
  to: string;
  /** Keys copied. */
  keys: number;
  /** Target keys under guardPrefix that the source does not have, deleted (force only). */
  deleted: number;
  /** Target keys under guardPrefix that were overwritten (force only). */
  replaced: number;
  /** The source revision the copy was taken at. */
  sourceRevision: number;
  verified: true;
}

export async function migrateStore(from: Store, to: Store, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const guard = opts.guardPrefix ?? '/blockspeaker/ipam/';
  const batch = opts.batch ?? 64;
  const rev0 = await from.revision();
  const kvs = await from.list('');
  const existing = await to.list(guard);
  if (existing.length && !opts.force) {
    throw new StoreError(`migrate: ${to.name} already holds ${existing.length} keys under ${guard}; refusing to mix two stores (use --force to replace them)`);
  }
  const source = new Map(kvs.map((kv) => [kv.key, kv.value]));
  const stale = existing.filter((kv) => !source.has(kv.key));
  const ops: Op[] = [
    ...stale.map((kv): Op => ({ type: 'delete', key: kv.key })),
    ...kvs.map((kv): Op => ({ type: 'put', key: kv.key, value: kv.value })),
  ];
  // Each batch is one transaction; the whole copy is not, so a failure part-way says how far it got.
  let done = 0;
  try {
    for (; done < ops.length; done += batch) await to.txn([], ops.slice(done, done + batch));
  } catch (e) {
    throw new StoreError(
      `migrate: stopped after ${Math.min(done, ops.length)} of ${ops.length} writes to ${to.name}, which now holds a partial copy ` +
        `(run again with --force once it is reachable): ${(e as Error).message}`,
    );
  }
  const rev1 = await from.revision();
  if (rev1 !== rev0) {
    throw new StoreError(`migrate: ${from.name} changed while it was copied (revision ${rev0} -> ${rev1}); stop every writer and run again with --force`);
  }
  // Verify: every source key is in the target with its value, and nothing else is under the guarded prefix.
  const after = await to.list('');
  const target = new Map(after.map((kv: KeyValue) => [kv.key, kv.value]));
  const wrong = kvs.filter((kv) => target.get(kv.key) !== kv.value);
  const guardedSource = kvs.filter((kv) => kv.key.startsWith(guard)).length;
  const guardedTarget = after.filter((kv) => kv.key.startsWith(guard)).length;
  if (wrong.length || guardedSource !== guardedTarget) {
    throw new StoreError(
      `migrate: verification failed: ${wrong.length} keys differ (first: ${wrong[0]?.key ?? '-'}), ${guardedSource} keys under ${guard} in the source, ${guardedTarget} in the target`,
    );
  }
  return {
    from: from.name,
    to: to.name,
    keys: kvs.length,
    deleted: stale.length,
    replaced: existing.length - stale.length,
    sourceRevision: rev0,
    verified: true,
  };
}
