// The write path, group commit: every txn queued in one turn of the event loop is committed as one batch (lock,
// catch up, evaluate in order, append, fdatasync, publish the header, apply), and a compaction follows when the log
// has grown enough.
import fs from 'node:fs';
import { encodeFrame, writeAll } from './logfile.ts';
import { StoreError, type Compare, type Op, type TxnResult } from './types.ts';
import { fsError, type EncodedOp, type Entry, type FileStoreCore } from './file-core.ts';
import { compact } from './file-compact.ts';
import { lockedCatchUp } from './file-replay.ts';

function fdatasyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
}

export function enqueue(core: FileStoreCore, compares: Compare[], ops: Op[], deleteIfExists?: string): Promise<TxnResult> {
  return new Promise<TxnResult>((resolve, reject) => {
    core.queue.push({ compares, ops, deleteIfExists, resolve, reject });
    kick(core);
  });
}

function kick(core: FileStoreCore): void {
  if (core.flushScheduled || core.flushing) return;
  core.flushScheduled = true;
  // setImmediate rather than a microtask: lets every caller that is about to issue a txn in this turn of the
  // event loop (e.g. the continuations of the previous batch) join the batch.
  setImmediate(() => {
    core.flushScheduled = false;
    core.flushing = runFlush(core).finally(() => {
      core.flushing = undefined;
      if (core.queue.length) kick(core); // queued after the loop's last look
    });
  });
}

async function runFlush(core: FileStoreCore): Promise<void> {
  while (core.queue.length) {
    const batch = core.queue;
    core.queue = [];
    try {
      await commitBatch(core, batch);
    } catch (err) {
      // commitBatch settles its entries itself; this only guards against a bug leaving callers hanging.
      for (const e of batch) e.reject(err);
    }
    if (core.queue.length) await new Promise((r) => setImmediate(r));
  }
}

async function commitBatch(core: FileStoreCore, batch: Entry[]): Promise<void> {
  if (core.broken) {
    for (const e of batch) e.reject(core.broken);
    return;
  }
  try {
    await core.lock();
  } catch (err) {
    for (const e of batch) e.reject(err);
    return;
  }
  core.locked = true;
  let results: TxnResult[];
  try {
    results = await commitLocked(core, batch);
  } catch (err) {
    const e2 = err instanceof StoreError ? err : fsError(core.name, 'commit to', core.logPath, err);
    for (const e of batch) e.reject(e2);
    return;
  } finally {
    core.locked = false;
    core.unlock();
  }
  for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
}

/** Catch up, evaluate the batch in order, append its records, sync, apply. Caller holds the lock. */
async function commitLocked(core: FileStoreCore, batch: Entry[]): Promise<TxnResult[]> {
  lockedCatchUp(core);
  const state = core.state;
  // Keys written earlier in this batch: their modRevision (0 = deleted). The state itself changes only once
  // the batch is durable, so readers never see unacknowledged writes.
  const overlay = new Map<string, number>();
  const modRev = (key: string): number => {
    const o = overlay.get(key);
    return o !== undefined ? o : (state.get(key)?.modRevision ?? 0);
  };
  let rev = state.revision;
  const results: TxnResult[] = [];
  const frames: Buffer[] = [];
  const records: Array<{ rev: number; ops: Op[] }> = [];
  for (const e of batch) {
    core.counters.txns++;
    if (e.deleteIfExists !== undefined && modRev(e.deleteIfExists) === 0) {
      results.push({ succeeded: false, revision: rev });
      continue;
    }
    let failed: string[] | undefined;
    for (const c of e.compares) {
      if (modRev(c.key) !== c.modRevision) (failed ??= []).push(c.key);
    }
    if (failed) {
      results.push({ succeeded: false, revision: rev, failed });
      continue;
    }
    if (e.ops.length === 0) {
      results.push({ succeeded: true, revision: rev });
      continue;
    }
    rev++;
    const enc: EncodedOp[] = [];
    const ops: Op[] = [];
    for (const op of e.ops) {
      if (op.type === 'put') {
        enc.push([op.key, op.value]);
        ops.push(op);
        overlay.set(op.key, rev);
      } else if (modRev(op.key) !== 0) {
        // Deletes of absent keys change nothing; leaving them out keeps replayed events equal to live ones.
        enc.push([op.key]);
        ops.push(op);
        overlay.set(op.key, 0);
      }
    }
    frames.push(encodeFrame(JSON.stringify([rev, enc])));
    records.push({ rev, ops });
    results.push({ succeeded: true, revision: rev });
  }
  core.counters.batches++;
  if (frames.length === 0) return results;

  const log = core.log;
  const at = log.end;
  const buf = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  try {
    writeAll(log.fd, buf, at);
  } catch (err) {
    truncateBack(core, at);
    throw fsError(core.name, 'append to', core.logPath, err);
  }
  try {
    core.counters.syncs++;
    await fdatasyncAsync(log.fd);
  } catch (err) {
    // After a failed fdatasync the kernel may have dropped the dirty pages: nothing about the file is known,
    // so this store stops rather than acknowledge anything more.
    truncateBack(core, at);
    core.broken = fsError(core.name, 'fdatasync', core.logPath, err);
    throw core.broken;
  }
  core.writeHeader(log, at + buf.length, 0);
  let off = at;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    core.noteRecord(log, r.rev, off);
    state.apply(r.rev, r.ops);
    off += frames[i]!.length;
  }
  log.end = at + buf.length;
  core.counters.records += records.length;
  if (log.end > core.compactMinBytes && log.records > core.compactRatio * Math.max(state.size, 1)) compact(core);
  return results;
}

function truncateBack(core: FileStoreCore, at: number): void {
  try {
    fs.ftruncateSync(core.log.fd, at);
  } catch {
    core.broken ??= new StoreError(`${core.name}: cannot truncate a failed append in ${core.logPath}`);
  }
}
