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
import { DirAclError, hostPlatform, type AccessReport, type Platform, type PlatformFiles } from '../platform/platform.ts';
import { createFile, PRIVATE_FILE_MODE } from '../platform/atomic-file.ts';
import { acquireProcessLock, releaseProcessLock } from './proclock.ts';
import {
  encodeFrame, logFileName, logGenerations, HEADER, INDEX_EVERY, MAGIC, newHeader, parseHeader, scanFrames, SEALED, SLOT, SNAPSHOT_CHUNK, headerSlot,
  writeAll, type Header,
} from './logfile.ts';
import { KvState } from './state.ts';
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

export interface FileStoreOptions {
  /** Compact only once the log is larger than this many bytes. Default 16 MiB. */
  compactMinBytes?: number;
  /** ... and holds more than this many txn records per live key. Default 4. */
  compactRatio?: number;
  /** How often watchers poll for other processes' writes, in ms. Default 50. */
  pollMs?: number;
  /** File rules, locking and directory ACLs; default: this machine's. Tests hand in a Windows double. */
  platform?: Platform;
  /** Told what access control a newly created store directory got (Windows: an ACL; may be not enforced). */
  onAccess?: (report: AccessReport) => void;
  /** Tests: called at each step of a compaction (may throw to inject a failure there). */
  onCompactionStep?: (step: CompactionStep) => void;
}

/** The steps of a compaction, in order ('tmp-partial' once per buffer written to log.tmp). */
export const COMPACTION_STEPS = ['sealed', 'tmp-partial', 'tmp-written', 'renamed', 'opened', 'old-closed', 'old-removed'] as const;
export type CompactionStep = (typeof COMPACTION_STEPS)[number];

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



type EncodedOp = [string, string] | [string];

interface Entry {
  compares: Compare[];
  ops: Op[];
  /** delete(): write only if the key exists. */
  deleteIfExists?: string;
  resolve: (r: TxnResult) => void;
  reject: (e: unknown) => void;
}

interface WatchEntry {
  prefix: string;
  onEvent: (events: WatchEvent[]) => void;
  active: boolean;
}

/** One log file as this process knows it. */
interface LogFile {
  fd: number;
  /** Generation: 0 is the file `log`, N > 0 is `log.N`. */
  gen: number;
  path: string;
  /** Revision of the snapshot at the start of the file. */
  snapRev: number;
  /** Offset of the first txn record (after the snapshot). */
  dataStart: number;
  /** Everything before this offset is applied to the state. */
  end: number;
  /** Txn records in the file (for the compaction decision). */
  records: number;
  /** Seq of the header slot last read or written with the lock held. */
  hseq: number;
  /** Sparse index: every INDEX_EVERY-th record's revision and offset, for watch replay. */
  idxRev: number[];
  idxOff: number[];
}


function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function fsError(storeName: string, action: string, file: string, err: unknown): StoreError {
  if (err instanceof StoreError) return err;
  const code = errCode(err);
  const why =
    code === 'EACCES' || code === 'EPERM'
      ? 'permission denied'
      : code === 'EBUSY'
        ? 'in use by another process'
      : code === 'ENOSPC'
        ? 'no space left on device'
        : code === 'EROFS'
          ? 'read-only file system'
          : (err as Error)?.message ?? String(err);
  return new StoreError(`${storeName}: cannot ${action} ${file}: ${why}${code ? ` (${code})` : ''}`);
}


function fdatasyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
}

export class FileStore implements Store {
  readonly name: string;
  private readonly tmpPath: string;
  private readonly files: PlatformFiles;
  private readonly state = new KvState();
  private log!: LogFile;
  private readonly compactMinBytes: number;
  private readonly onStep: ((step: CompactionStep) => void) | undefined;
  private readonly compactRatio: number;
  private readonly pollMs: number;

  private queue: Entry[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | undefined;
  /** True while this store holds the cross-process lock (its records may be on disk but not yet applied). */
  private locked = false;
  private closing = false;
  private closed = false;
  private broken: StoreError | undefined;

  private readonly watchers = new Set<WatchEntry>();
  private unsubscribe: (() => void) | undefined;
  private pollTimer: NodeJS.Timeout | undefined;

  private readonly counters = { txns: 0, records: 0, batches: 0, syncs: 0, compactions: 0, recordsReadIn: 0 };
  private lastCompactionError: string | undefined;

  /** @internal use openFileStore */
  constructor(
    readonly dir: string,
    private readonly lockFd: number,
    private readonly lockKey: string,
    opts: FileStoreOptions,
  ) {
    this.name = `file:${dir}`;
    this.tmpPath = path.join(dir, 'log.tmp');
    this.files = (opts.platform ?? hostPlatform()).files;
    this.onStep = opts.onCompactionStep;
    this.compactMinBytes = opts.compactMinBytes ?? 16 << 20;
    this.compactRatio = opts.compactRatio ?? 4;
    this.pollMs = opts.pollMs ?? 50;
  }

  /** A log file being opened (named in its errors). */
  private opening: string | undefined;

  /** The log file in question (for messages). */
  private get logPath(): string {
    return this.opening ?? this.log?.path ?? path.join(this.dir, 'log');
  }

  private genPath(gen: number): string {
    return path.join(this.dir, logFileName(gen));
  }

  /** The highest log generation in the directory, -1 when there is none. */
  private latestGen(): number {
    let names: string[];
    try {
      names = this.files.list(this.dir);
    } catch (err) {
      throw fsError(this.name, 'list', this.dir, err);
    }
    const gens = logGenerations(names);
    return gens.length ? gens[gens.length - 1]! : -1;
  }

  /**
   * Remove generations older than the current one. Best effort: on Windows a file another process still has open
   * cannot be removed; it is retried at the next compaction or open, and never read again meanwhile.
   */
  private removeOldGens(): void {
    let names: string[];
    try {
      names = this.files.list(this.dir);
    } catch {
      return;
    }
    for (const g of logGenerations(names)) {
      if (g >= this.log.gen) break;
      try {
        this.files.remove(this.genPath(g));
      } catch {
        /* still open somewhere (Windows); next time */
      }
    }
  }

  /** @internal */
  async init(): Promise<void> {
    await this.lock();
    try {
      try {
        this.files.remove(this.tmpPath); // a compaction that died before its rename: never committed to
      } catch (err) {
        throw fsError(this.name, 'remove', this.tmpPath, err);
      }
      let gen = this.latestGen();
      if (gen < 0) this.writeSnapshotFile((gen = 0));
      this.log = this.openLog(this.state, true, gen);
      this.removeOldGens();
    } finally {
      this.unlock();
    }
  }

  // ---- Store API -------------------------------------------------------------------------------------------

  async get(key: string): Promise<KeyValue | undefined> {
    this.check();
    this.readCatchUp();
    return this.state.get(key);
  }

  async list(prefix: string): Promise<KeyValue[]> {
    this.check();
    this.readCatchUp();
    return this.state.list(prefix);
  }

  async revision(): Promise<number> {
    this.check();
    this.readCatchUp();
    return this.state.revision;
  }

  async put(key: string, value: string): Promise<number> {
    return (await this.txn([], [{ type: 'put', key, value }])).revision;
  }

  async delete(key: string): Promise<boolean> {
    this.check();
    if (typeof key !== 'string') throw new StoreError(`${this.name}: key must be a string`);
    const r = await this.enqueue([], [{ type: 'delete', key }], key);
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
    return this.enqueue(compares, ops);
  }

  watch(prefix: string, fromRevision: number, onEvent: (events: WatchEvent[]) => void): Watcher {
    this.check();
    // Read and subscribe in one synchronous step so that no event is missed or delivered twice.
    this.readCatchUp();
    let replay: WatchEvent[] = [];
    if (fromRevision > 0 && fromRevision < this.state.revision) {
      if (fromRevision < this.log.snapRev)
        throw new StoreError(
          `${this.name}: revision ${fromRevision} was compacted (the log starts at revision ${this.log.snapRev})`,
        );
      replay = this.readEvents(prefix, fromRevision);
    }
    const entry: WatchEntry = { prefix, onEvent, active: true };
    this.watchers.add(entry);
    if (!this.unsubscribe) this.unsubscribe = this.state.watch('', (events) => this.fanOut(events));
    if (!this.pollTimer) {
      this.pollTimer = setInterval(() => this.poll(), this.pollMs);
      this.pollTimer.unref();
    }
    if (replay.length) queueMicrotask(() => entry.active && onEvent(replay));
    return {
      close: () => {
        entry.active = false;
        this.watchers.delete(entry);
        if (this.watchers.size === 0) this.stopWatching();
      },
    };
  }

  async close(): Promise<void> {
    if (this.closed || this.closing) {
      while (!this.closed) await new Promise((r) => setImmediate(r));
      return;
    }
    this.closing = true;
    // Everything queued before close() is committed (or fails) before the files are closed.
    while (this.flushScheduled || this.flushing) {
      if (this.flushing) await this.flushing;
      else await new Promise((r) => setImmediate(r));
    }
    for (const w of this.watchers) w.active = false;
    this.watchers.clear();
    this.stopWatching();
    try {
      this.files.close(this.log.fd);
    } catch {}
    try {
      this.files.close(this.lockFd);
    } catch {}
    this.closed = true;
  }

  /** Counters for tests, benchmarks and the status endpoint. */
  stats(): FileStoreStats {
    return {
      ...this.counters,
      logBytes: this.log.end,
      compactedRevision: this.log.snapRev,
      ...(this.lastCompactionError ? { lastCompactionError: this.lastCompactionError } : {}),
    };
  }

  // ---- group commit ----------------------------------------------------------------------------------------

  private check(): void {
    if (this.closing || this.closed) throw new StoreError(`${this.name} is closed`);
    if (this.broken) throw this.broken;
  }

  private enqueue(compares: Compare[], ops: Op[], deleteIfExists?: string): Promise<TxnResult> {
    return new Promise<TxnResult>((resolve, reject) => {
      this.queue.push({ compares, ops, deleteIfExists, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushScheduled || this.flushing) return;
    this.flushScheduled = true;
    // setImmediate rather than a microtask: lets every caller that is about to issue a txn in this turn of the
    // event loop (e.g. the continuations of the previous batch) join the batch.
    setImmediate(() => {
      this.flushScheduled = false;
      this.flushing = this.runFlush().finally(() => {
        this.flushing = undefined;
        if (this.queue.length) this.kick(); // queued after the loop's last look
      });
    });
  }

  private async runFlush(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      try {
        await this.commitBatch(batch);
      } catch (err) {
        // commitBatch settles its entries itself; this only guards against a bug leaving callers hanging.
        for (const e of batch) e.reject(err);
      }
      if (this.queue.length) await new Promise((r) => setImmediate(r));
    }
  }

  private async commitBatch(batch: Entry[]): Promise<void> {
    if (this.broken) {
      for (const e of batch) e.reject(this.broken);
      return;
    }
    try {
      await this.lock();
    } catch (err) {
      for (const e of batch) e.reject(err);
      return;
    }
    this.locked = true;
    let results: TxnResult[];
    try {
      results = await this.commitLocked(batch);
    } catch (err) {
      const e2 = err instanceof StoreError ? err : fsError(this.name, 'commit to', this.logPath, err);
      for (const e of batch) e.reject(e2);
      return;
    } finally {
      this.locked = false;
      this.unlock();
    }
    for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
  }

  /** Catch up, evaluate the batch in order, append its records, sync, apply. Caller holds the lock. */
  private async commitLocked(batch: Entry[]): Promise<TxnResult[]> {
    this.lockedCatchUp();
    const state = this.state;
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
      this.counters.txns++;
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
    this.counters.batches++;
    if (frames.length === 0) return results;

    const log = this.log;
    const at = log.end;
    const buf = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
    try {
      writeAll(log.fd, buf, at);
    } catch (err) {
      this.truncateBack(at);
      throw fsError(this.name, 'append to', this.logPath, err);
    }
    try {
      this.counters.syncs++;
      await fdatasyncAsync(log.fd);
    } catch (err) {
      // After a failed fdatasync the kernel may have dropped the dirty pages: nothing about the file is known,
      // so this store stops rather than acknowledge anything more.
      this.truncateBack(at);
      this.broken = fsError(this.name, 'fdatasync', this.logPath, err);
      throw this.broken;
    }
    this.writeHeader(log, at + buf.length, 0);
    let off = at;
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      this.noteRecord(log, r.rev, off);
      state.apply(r.rev, r.ops);
      off += frames[i]!.length;
    }
    log.end = at + buf.length;
    this.counters.records += records.length;
    if (log.end > this.compactMinBytes && log.records > this.compactRatio * Math.max(state.size, 1)) this.compact();
    return results;
  }

  private truncateBack(at: number): void {
    try {
      fs.ftruncateSync(this.log.fd, at);
    } catch {
      this.broken ??= new StoreError(`${this.name}: cannot truncate a failed append in ${this.logPath}`);
    }
  }

  // ---- locking ---------------------------------------------------------------------------------------------

  private async lock(): Promise<void> {
    await acquireProcessLock(this.lockKey);
    try {
      if (!this.files.tryLock(this.lockFd)) await this.files.waitForLock(this.lockFd);
    } catch (err) {
      releaseProcessLock(this.lockKey);
      throw fsError(this.name, 'lock', path.join(this.dir, 'LOCK'), err);
    }
  }

  private unlock(): void {
    try {
      this.files.unlock(this.lockFd);
    } catch (err) {
      // Cannot happen on a valid fd; if it does, other processes may be blocked, so stop using the store.
      this.broken ??= fsError(this.name, 'unlock', path.join(this.dir, 'LOCK'), err);
    }
    releaseProcessLock(this.lockKey);
  }

  // ---- reading the log -------------------------------------------------------------------------------------

  private readonly headerScratch = Buffer.alloc(HEADER); // read on every get(): no allocation

  private readHeader(fd: number, locked: boolean): Header | undefined {
    const b = this.headerScratch;
    let got: number;
    try {
      got = fs.readSync(fd, b, 0, HEADER, 0);
    } catch (err) {
      throw fsError(this.name, 'read', this.logPath, err);
    }
    if (got < HEADER || !b.subarray(0, 8).equals(MAGIC))
      throw new StoreError(`${this.name}: ${this.logPath} is not a blockspeaker log (bad header)`);
    const h = parseHeader(b);
    // Without the lock both slots can only fail if the file is damaged or two writes raced this read; try later.
    if (!h && locked) throw new StoreError(`${this.name}: corrupt header in ${this.logPath} (both slots damaged)`);
    return h;
  }

  /** Under the lock: publish a new committed length / flags in the other header slot. */
  private writeHeader(log: LogFile, committed: number, flags: number): void {
    const seq = (log.hseq + 1) >>> 0;
    try {
      writeAll(log.fd, headerSlot(committed, flags, seq), 8 + (seq & 1) * SLOT);
    } catch (err) {
      throw fsError(this.name, 'write the header of', this.logPath, err);
    }
    log.hseq = seq;
  }

  private corrupt(offset: number, why: string): StoreError {
    return new StoreError(`${this.name}: corrupt log ${this.logPath} at byte ${offset}: ${why}`);
  }

  private noteRecord(log: LogFile, rev: number, off: number): void {
    if (log.records++ % INDEX_EVERY === 0) {
      log.idxRev.push(rev);
      log.idxOff.push(off);
    }
  }

  /** Decode and apply the txn records in [from, to) of `log` to `state`; returns how the scan ended. */
  private applyRange(log: LogFile, state: KvState, from: number, to: number, countReadIn: boolean) {
    return scanFrames(log.fd, from, to, (payload, start, end) => {
      let rec: unknown;
      try {
        rec = JSON.parse(payload.toString('utf8'));
      } catch {
        throw this.corrupt(start, 'record is not valid JSON');
      }
      if (!Array.isArray(rec) || typeof rec[0] !== 'number' || !Array.isArray(rec[1]))
        throw this.corrupt(start, 'unexpected record (a snapshot in the middle of the log?)');
      const rev = rec[0] as number;
      if (rev <= state.revision) throw this.corrupt(start, `revision ${rev} is not after ${state.revision}`);
      const ops: Op[] = (rec[1] as EncodedOp[]).map((o) =>
        o.length === 2 ? { type: 'put', key: o[0], value: o[1] } : { type: 'delete', key: o[0] },
      );
      this.noteRecord(log, rev, start);
      state.apply(rev, ops);
      log.end = end;
      if (countReadIn) this.counters.recordsReadIn++;
    });
  }

  /**
   * Open the file at the log path and load it into `state` (which must be empty, or already at the snapshot's
   * revision when `skipSnapshot`). With the lock held, a torn tail is cut off; without it, reads stop at the
   * committed length.
   */
  private openLog(state: KvState, locked: boolean, gen: number, skipSnapshotAt?: number): LogFile {
    const file = this.genPath(gen);
    this.opening = file;
    let fd: number;
    try {
      fd = this.files.open(file, 'r+');
    } catch (err) {
      this.opening = undefined;
      throw fsError(this.name, 'open', file, err);
    }
    try {
      const st = fs.fstatSync(fd);
      const h = this.readHeader(fd, true)!;
      const size = st.size;
      if (h.committed > size)
        throw this.corrupt(size, `file is shorter than its committed length ${h.committed} (truncated?)`);
      const log: LogFile = {
        fd,
        gen,
        path: file,
        snapRev: 0,
        dataStart: HEADER,
        end: HEADER,
        records: 0,
        hseq: h.seq,
        idxRev: [],
        idxOff: [],
      };
      // The snapshot: a head record, then its chunks. The file was fsync'ed before it was renamed into place,
      // so any damage here is corruption, never a torn tail.
      let chunks = -1;
      let seen = 0;
      const snapEnd = scanFrames(fd, HEADER, size, (payload, start, end) => {
        if (chunks >= 0 && seen === chunks) return false; // past the snapshot
        let rec: { snap?: unknown; chunks?: unknown; kv?: unknown };
        try {
          rec = JSON.parse(payload.toString('utf8'));
        } catch {
          throw this.corrupt(start, 'snapshot record is not valid JSON');
        }
        if (chunks < 0) {
          if (typeof rec.snap !== 'number' || typeof rec.chunks !== 'number')
            throw this.corrupt(start, 'the log does not start with a snapshot');
          if (skipSnapshotAt !== undefined && rec.snap !== skipSnapshotAt) throw SNAPSHOT_MISMATCH;
          chunks = rec.chunks;
          log.snapRev = rec.snap;
          if (skipSnapshotAt === undefined) state.setRevision(rec.snap);
        } else {
          if (!Array.isArray(rec.kv)) throw this.corrupt(start, 'bad snapshot chunk');
          if (skipSnapshotAt === undefined) {
            for (const [key, value, createRevision, modRevision] of rec.kv as [string, string, number, number][])
              state.load({ key, value, createRevision, modRevision }, log.snapRev);
          }
          seen++;
        }
        log.dataStart = log.end = end;
      });
      if (chunks < 0 || seen < chunks) throw this.corrupt(snapEnd.end, 'incomplete snapshot');
      const to = locked ? size : h.committed;
      const r = this.applyRange(log, state, log.end, to, false);
      if (r.bad) {
        if (r.end < h.committed)
          throw this.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
        if (locked) {
          // A torn tail: written but never acknowledged (the writer died before fdatasync returned).
          try {
            fs.ftruncateSync(fd, r.end);
          } catch (err) {
            throw fsError(this.name, 'truncate the torn tail of', this.logPath, err);
          }
        }
      }
      if (locked) this.publish(log, h);
      return log;
    } catch (err) {
      this.files.close(fd);
      throw err;
    } finally {
      this.opening = undefined;
    }
  }

  /** Others' writes, read without the lock up to the committed length. Cheap when nothing changed. */
  private readCatchUp(): void {
    if (this.locked || this.closed || this.broken) return;
    try {
      let h = this.readHeader(this.log.fd, false);
      if (!h) return; // torn header read; the next call will see it
      if (h.flags & SEALED) {
        // Being compacted, or compacted already: follow a newer generation once one exists.
        if (this.latestGen() > this.log.gen) {
          this.switchLog(h.committed, false);
          h = this.readHeader(this.log.fd, false);
          if (!h) return;
        }
      }
      if (h.committed > this.log.end) {
        const r = this.applyRange(this.log, this.state, this.log.end, h.committed, true);
        if (r.bad) throw this.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
      }
    } catch (err) {
      this.broken = fsError(this.name, 'read', this.logPath, err);
      throw this.broken;
    }
  }

  /** With the lock: follow a replaced log, read everything others appended, cut a torn tail. */
  private lockedCatchUp(): void {
    // Compaction seals a log before it writes the next generation, so only a sealed log can have been replaced:
    // an unsealed one costs no directory listing.
    const first = this.readHeader(this.log.fd, true)!;
    if (first.flags & SEALED && this.latestGen() > this.log.gen) this.switchLog(undefined, true);
    const log = this.log;
    let size: number;
    try {
      size = fs.fstatSync(log.fd).size;
    } catch (err) {
      throw fsError(this.name, 'stat', this.logPath, err);
    }
    const h = this.readHeader(log.fd, true)!;
    log.hseq = h.seq;
    if (size < log.end || size < h.committed)
      throw this.corrupt(size, `file is shorter than what was already read/committed (truncated by hand?)`);
    if (size > log.end) {
      const r = this.applyRange(log, this.state, log.end, size, true);
      if (r.bad) {
        if (r.end < h.committed) throw this.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
        try {
          fs.ftruncateSync(log.fd, r.end);
        } catch (err) {
          throw fsError(this.name, 'truncate the torn tail of', this.logPath, err);
        }
      }
    }
    this.publish(log, h);
  }

  /**
   * Under the lock, after reading to the end: make the header say what was read and clear a stale seal. Records
   * past the old committed length were written by a writer that died before its fdatasync returned; they are
   * kept (nobody was told they failed), but only after syncing them, so that the header never claims more than
   * is durable.
   */
  private publish(log: LogFile, h: Header): void {
    if (h.committed === log.end && !(h.flags & SEALED)) return;
    if (log.end > h.committed) {
      try {
        this.counters.syncs++;
        fs.fdatasyncSync(log.fd);
      } catch (err) {
        this.broken = fsError(this.name, 'fdatasync', this.logPath, err);
        throw this.broken;
      }
    }
    this.writeHeader(log, log.end, 0);
  }


  /**
   * The log was replaced by a compacted one. The old file (still open here) is frozen: first read it to its end,
   * which normally brings this process exactly to the new snapshot's revision, so no event is lost. If it was
   * replaced more than once since we last looked, reload from the new file and tell watchers the difference.
   */
  private switchLog(oldCommitted: number | undefined, locked: boolean): void {
    const old = this.log;
    const oldEnd = oldCommitted ?? fs.fstatSync(old.fd).size;
    if (oldEnd > old.end) this.applyRange(old, this.state, old.end, oldEnd, true); // a torn end of a frozen file is ignored
    const gen = this.latestGen();
    let next: LogFile;
    try {
      next = this.openLog(this.state, locked, gen, this.state.revision);
    } catch (err) {
      if (err !== SNAPSHOT_MISMATCH) throw err;
      const fresh = new KvState();
      next = this.openLog(fresh, locked, gen);
      this.replaceState(fresh);
    }
    try {
      this.files.close(old.fd);
    } catch {}
    this.log = next;
  }

  /** Swap in a freshly loaded state, sending watchers the difference as events. */
  private replaceState(fresh: KvState): void {
    const events: WatchEvent[] = [];
    const rev = fresh.revision;
    for (const kv of this.state.entries()) {
      if (!fresh.get(kv.key)) events.push({ type: 'delete', key: kv.key, revision: rev });
    }
    for (const kv of fresh.entries()) {
      const mine = this.state.get(kv.key);
      if (!mine || mine.modRevision !== kv.modRevision)
        events.push({ type: 'put', key: kv.key, value: kv.value, revision: kv.modRevision });
    }
    events.sort((a, b) => a.revision - b.revision);
    this.state.clear();
    for (const kv of fresh.entries()) this.state.load(kv, rev);
    this.state.setRevision(rev);
    if (events.length) this.fanOut(events);
  }

  /** Events under `prefix` after `fromRevision`, read back from the current log up to what is applied. */
  private readEvents(prefix: string, fromRevision: number): WatchEvent[] {
    const log = this.log;
    let start = log.dataStart;
    // Last indexed record at or before fromRevision: everything after it is scanned.
    let lo = 0;
    let hi = log.idxRev.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (log.idxRev[mid]! <= fromRevision) {
        start = log.idxOff[mid]!;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const events: WatchEvent[] = [];
    // Replay must produce what apply() emitted live, so track which keys existed (deletes of absent keys were
    // never written, see commitLocked).
    scanFrames(log.fd, start, log.end, (payload) => {
      const [rev, ops] = JSON.parse(payload.toString('utf8')) as [number, EncodedOp[]];
      if (rev <= fromRevision) return;
      for (const o of ops) {
        if (!o[0].startsWith(prefix)) continue;
        if (o.length === 2) events.push({ type: 'put', key: o[0], value: o[1], revision: rev });
        else events.push({ type: 'delete', key: o[0], revision: rev });
      }
    });
    return events;
  }

  // ---- compaction ------------------------------------------------------------------------------------------

  /**
   * Write the current state as log generation `gen`: to log.tmp, fsync'ed, then renamed to the generation's name,
   * which does not exist yet (Windows refuses a rename over a file that is open anywhere, and other processes
   * hold the current log open), and the directory entry synced.
   */
  private writeSnapshotFile(gen: number): void {
    const target = this.genPath(gen);
    const state = this.state;
    const chunks: Buffer[] = [];
    let batch: [string, string, number, number][] = [];
    let bytes = 0;
    const flush = (): void => {
      chunks.push(encodeFrame(JSON.stringify({ kv: batch })));
      batch = [];
      bytes = 0;
    };
    // Key order: loading then appends to a sorted index instead of inserting into the middle of it.
    for (const kv of state.list('')) {
      batch.push([kv.key, kv.value, kv.createRevision, kv.modRevision]);
      bytes += kv.key.length + kv.value.length + 32;
      if (bytes >= SNAPSHOT_CHUNK) flush();
    }
    if (batch.length) flush();
    const head = encodeFrame(JSON.stringify({ snap: state.revision, chunks: chunks.length }));
    let total = HEADER + head.length;
    for (const c of chunks) total += c.length;
    let fd: number;
    try {
      // 0600 from open(2) on: a log.tmp left by a compaction that failed is removed, not reused with its mode.
      fd = createFile(this.files, this.tmpPath, PRIVATE_FILE_MODE);
    } catch (err) {
      throw fsError(this.name, 'create', this.tmpPath, err);
    }
    try {
      let at = 0;
      for (const b of [newHeader(total), head, ...chunks]) {
        writeAll(fd, b, at);
        at += b.length;
        this.step('tmp-partial');
      }
      this.counters.syncs++;
      fs.fsyncSync(fd);
    } catch (err) {
      this.files.close(fd);
      try {
        this.files.remove(this.tmpPath);
      } catch {}
      throw fsError(this.name, 'write', this.tmpPath, err);
    }
    this.files.close(fd);
    this.step('tmp-written');
    try {
      this.files.rename(this.tmpPath, target);
    } catch (err) {
      throw fsError(this.name, 'rename the snapshot to', target, err);
    }
    this.step('renamed');
    try {
      this.counters.syncs++;
      this.files.syncDir(this.dir);
    } catch (err) {
      throw fsError(this.name, 'sync the directory', this.dir, err);
    }
  }

  /** A compaction step reached (tests: copy the directory as a crash would leave it, or inject a failure). */
  private step(name: CompactionStep): void {
    if (this.log) this.onStep?.(name); // not for the first snapshot of a new store
  }

  /** Replace the log by a snapshot of the state. Caller holds the lock and is fully caught up. */
  private compact(): void {
    const old = this.log;
    try {
      // Seal first: readers in other processes then look for a newer generation on every read until they see
      // it, so a compactor dying half-way can never leave them reading a dead file.
      this.writeHeader(old, old.end, SEALED);
      this.step('sealed');
      this.writeSnapshotFile(old.gen + 1);
      this.log = this.openLog(this.state, true, old.gen + 1, this.state.revision);
      this.step('opened');
      // Close before remove: Windows cannot remove a file this process holds open.
      this.files.close(old.fd);
      this.step('old-closed');
      this.removeOldGens();
      this.step('old-removed');
      this.counters.compactions++;
      this.lastCompactionError = undefined;
    } catch (err) {
      this.lastCompactionError = err instanceof Error ? err.message : String(err);
      if (this.log === old) {
        // The next generation is not in place (or not readable): the old log stays current, unsealed.
        try {
          if (this.latestGen() === old.gen) this.writeHeader(old, old.end, 0);
        } catch {}
      }
    }
  }

  // ---- watch -----------------------------------------------------------------------------------------------

  private fanOut(events: WatchEvent[]): void {
    for (const w of this.watchers) {
      const mine = w.prefix === '' ? events : events.filter((e) => e.key.startsWith(w.prefix));
      if (mine.length) queueMicrotask(() => w.active && w.onEvent(mine));
    }
  }

  private poll(): void {
    try {
      this.readCatchUp();
    } catch {
      // readCatchUp marked the store broken; the next call reports it.
    }
  }

  private stopWatching(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }
}

/** openLog found a different snapshot than the caller is at. */
const SNAPSHOT_MISMATCH = Symbol('snapshot mismatch');

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
