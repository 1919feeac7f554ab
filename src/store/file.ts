// The embedded, durable Store: an append-only log in a directory, shared by any number of processes.
//
// Files in the directory:
//   LOCK      never replaced; an exclusive OFD/flock (Windows: LockFileEx) lock on it serialises writers across
//             processes. Opened read+append: LockFileEx refuses a handle without read or write access.
//   log, log.1, log.2, ...   generations of the log: `log` is generation 0, `log.N` generation N. The highest
//             generation is the current one; older ones are leftovers of a compaction, removed when nobody holds
//             them open (Windows refuses to remove or rename over an open file, so nothing is ever renamed over a
//             log: compaction writes the next generation under a new name). Every log starts with a snapshot.
//   log.tmp   the next generation being written by compaction; renamed to `log.N+1` (a new name) once fsync'ed.
// File format (header, frames, records): ./logfile.ts.
// This file is the API (FileStore, openFileStore). Its parts: the write path (group commit) ./file-commit.ts, reading
//   the log (open, catch-up) ./file-replay.ts, compaction ./file-compact.ts, watch ./file-watch.ts, and the state they
//   share ./file-core.ts.
// Modes (POSIX): the directory is made 0700 and every file in it is created 0600 by open(2) itself (LOCK directly,
//   each log generation as log.tmp before its first byte, then renamed), never chmod'ed afterwards; an existing
//   directory, or anything in it, that gives its group or others any bit refuses the open with the path, its mode
//   and the command that fixes it (the platform's prepareDir, ../platform/posix-access.ts). Nobody else can open
//   LOCK, so nobody else can hold a lock on it and stall the writers (with LOCK 0644, a shared lock taken by any
//   local user through an O_RDONLY handle kept every commit waiting), nor read the handles, which name pods.
//
// Header (48 bytes): "BSKVLOG1", then two 20-byte slots: u32 committedLo | u32 committedHi | u32 flags | u32 seq |
//   u32 crc32(first 16 bytes). Writers alternate slots (seq+1 goes to slot (seq+1)&1) and the valid slot with the
//   higher seq wins, so a torn header write, or a read racing one, falls back to the previous (smaller, still true)
//   value instead of failing.
//   committed: the byte length known to be fdatasync'ed; written after each sync. Readers without the lock read
//   only up to it (so they never see unacknowledged records), and on open a bad record before it is corruption,
//   while a bad record at or after it is a torn tail and is dropped.
//   flags bit 0 (sealed): compaction is replacing this file; readers look for a newer generation.
// Record frame: u32 length | u32 crc32(payload, seeded with length) | payload (UTF-8 JSON):
//   txn:            [revision, [[key, value] (put) | [key] (delete), ...]]
//   snapshot head:  {"snap": revision, "chunks": n}   followed by n chunks  {"kv": [[key, value, create, mod], ...]}
import fs from 'node:fs';
import path from 'node:path';
import { DirAclError, hostPlatform } from '../platform/platform.ts';
import { PRIVATE_FILE_MODE } from '../platform/atomic-file.ts';
import {
  StoreError,
  type Compare,
  type KeyValue,
  type Op,
  type Store,
  type TxnResult,
  type WatchEvent,
  type Watcher,
} from './types.ts';
import { FileStoreCore, fsError, type FileStoreOptions } from './file-core.ts';
import { enqueue } from './file-commit.ts';
import { removeOldGens, writeSnapshotFile } from './file-compact.ts';
import { openLog, readCatchUp } from './file-replay.ts';
import { addWatcher, stopWatching } from './file-watch.ts';

export { COMPACTION_STEPS, type CompactionStep, type FileStoreOptions } from './file-core.ts';

export { crc32, crc32Portable, logFileName, logGenerations } from './logfile.ts';

export interface FileStoreStats {
  /** Transactions evaluated by this process (including failed compares and deletes of absent keys). */
  txns: number;
  /** Records this process appended. */
  records: number;
  /** Commit batches (each one lock + append + fdatasync when it wrote anything). */
  batches: number;
  /** fdatasync/fsync calls made by this process (commits and compactions). */
  syncs: number;
  compactions: number;
  /** Records written by other processes that this one read in. */
  recordsReadIn: number;
  /** Size of the current log file as this process knows it. */
  logBytes: number;
  /** Revision of the snapshot the current log starts with; watches from before it fail. */
  compactedRevision: number;
  /** The last compaction error (compaction failures do not fail commits). */
  lastCompactionError?: string;
}

export class FileStore implements Store {
  readonly name: string;
  /** The state the write path, replay, compaction and watch share (./file-core.ts). */
  private readonly core: FileStoreCore;

  /** @internal use openFileStore */
  constructor(
    readonly dir: string,
    lockFd: number,
    lockKey: string,
    opts: FileStoreOptions,
  ) {
    this.core = new FileStoreCore(dir, lockFd, lockKey, opts);
    this.name = this.core.name;
  }

  /** @internal */
  async init(): Promise<void> {
    const core = this.core;
    await core.lock();
    try {
      try {
        core.files.remove(core.tmpPath); // a compaction that died before its rename: never committed to
      } catch (err) {
        throw fsError(this.name, 'remove', core.tmpPath, err);
      }
      let gen = core.latestGen();
      if (gen < 0) writeSnapshotFile(core, (gen = 0));
      core.log = openLog(core, core.state, true, gen);
      removeOldGens(core);
    } finally {
      core.unlock();
    }
  }

  // ---- Store API -------------------------------------------------------------------------------------------

  async get(key: string): Promise<KeyValue | undefined> {
    this.check();
    readCatchUp(this.core);
    return this.core.state.get(key);
  }

  async list(prefix: string): Promise<KeyValue[]> {
    this.check();
    readCatchUp(this.core);
    return this.core.state.list(prefix);
  }

  async revision(): Promise<number> {
    this.check();
    readCatchUp(this.core);
    return this.core.state.revision;
  }

  async put(key: string, value: string): Promise<number> {
    return (await this.txn([], [{ type: 'put', key, value }])).revision;
  }

  async delete(key: string): Promise<boolean> {
    this.check();
    if (typeof key !== 'string') throw new StoreError(`${this.name}: key must be a string`);
    const r = await enqueue(this.core, [], [{ type: 'delete', key }], key);
    return r.succeeded;
  }

  async txn(compares: Compare[], ops: Op[]): Promise<TxnResult> {
    this.check();
    for (const c of compares) {
      if (typeof c.key !== 'string' || !Number.isInteger(c.modRevision) || c.modRevision < 0)
        throw new StoreError(`${this.name}: bad compare ${JSON.stringify(c)}`);
    }
    for (const op of ops) {
      if (typeof op.key !== 'string' || (op.type === 'put' ? typeof op.value !== 'string' : op.type !== 'delete'))
        throw new StoreError(`${this.name}: bad op ${JSON.stringify(op)}`);
    }
    return enqueue(this.core, compares, ops);
  }

  watch(prefix: string, fromRevision: number, onEvent: (events: WatchEvent[]) => void): Watcher {
    this.check();
    return addWatcher(this.core, prefix, fromRevision, onEvent);
  }

  async close(): Promise<void> {
    const core = this.core;
    if (core.closed || core.closing) {
      while (!core.closed) await new Promise((r) => setImmediate(r));
      return;
    }
    core.closing = true;
    // Everything queued before close() is committed (or fails) before the files are closed.
    while (core.flushScheduled || core.flushing) {
      if (core.flushing) await core.flushing;
      else await new Promise((r) => setImmediate(r));
    }
    for (const w of core.watchers) w.active = false;
    core.watchers.clear();
    stopWatching(core);
    try {
      core.files.close(core.log.fd);
    } catch {}
    try {
      core.files.close(core.lockFd);
    } catch {}
    core.closed = true;
  }

  /** Counters for tests, benchmarks and the status endpoint. */
  stats(): FileStoreStats {
    return {
      ...this.core.counters,
      logBytes: this.core.log.end,
      compactedRevision: this.core.log.snapRev,
      ...(this.core.lastCompactionError ? { lastCompactionError: this.core.lastCompactionError } : {}),
    };
  }

  private check(): void {
    if (this.core.closing || this.core.closed) throw new StoreError(`${this.name} is closed`);
    if (this.core.broken) throw this.core.broken;
  }
}

/** Open (creating if needed) the store in `dir`. Several processes may have the same directory open at once. */
export async function openFileStore(dir: string, opts: FileStoreOptions = {}): Promise<FileStore> {
  const abs = path.resolve(dir);
  const name = `file:${abs}`;
  const platform = opts.platform ?? hostPlatform();
  const files = platform.files;
  try {
    // Made with the platform's ACL (Windows: admin-only from the start; an existing directory open to others refuses).
    const report = await platform.prepareDir(abs);
    // A directory created here must survive a crash too: sync its parent's entry.
    if (report?.created !== undefined) files.syncDir(path.dirname(abs));
    if (report) opts.onAccess?.(report);
  } catch (err) {
    if (err instanceof DirAclError) throw new StoreError(`${name}: ${err.message}`);
    throw fsError(name, 'create directory', abs, err);
  }
  const lockPath = path.join(abs, 'LOCK');
  let lockFd: number;
  try {
    lockFd = files.open(lockPath, files.lockFlags, PRIVATE_FILE_MODE); // created 0600: nobody else may open it to lock it
  } catch (err) {
    throw fsError(name, 'open', lockPath, err);
  }
  const st = fs.fstatSync(lockFd);
  const store = new FileStore(abs, lockFd, `${st.dev}:${st.ino}`, opts);
  try {
    await store.init();
  } catch (err) {
    files.close(lockFd);
    throw err;
  }
  return store;
}
