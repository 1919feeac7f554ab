// The state one open FileStore shares between its parts (write path, replay, compaction, watch) and the helpers
// they all use: error wording, the header slots, the log generations and the cross-process writer lock. A file of
// its own so that each part can take the store's state without importing the FileStore class that uses them all.
import fs from 'node:fs';
import path from 'node:path';
import { hostPlatform, type AccessReport, type Platform, type PlatformFiles } from '../platform/platform.ts';
import { acquireProcessLock, releaseProcessLock } from './proclock.ts';
import { logFileName, logGenerations, HEADER, INDEX_EVERY, MAGIC, parseHeader, SLOT, headerSlot, writeAll, type Header } from './logfile.ts';
import { KvState } from './state.ts';
import { StoreError, type Compare, type Op, type TxnResult, type WatchEvent } from './types.ts';

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

/** A txn record's op as written in the log: [key, value] is a put, [key] a delete. */
export type EncodedOp = [string, string] | [string];

/** A txn waiting in the commit queue for the next batch. */
export interface Entry {
  compares: Compare[];
  ops: Op[];
  /** delete(): write only if the key exists. */
  deleteIfExists?: string;
  resolve: (r: TxnResult) => void;
  reject: (e: unknown) => void;
}

/** One open watcher (inactive once closed: events already queued for it are dropped). */
export interface WatchEntry {
  prefix: string;
  onEvent: (events: WatchEvent[]) => void;
  active: boolean;
}

/** One log file as this process knows it. */
export interface LogFile {
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

export function fsError(storeName: string, action: string, file: string, err: unknown): StoreError {
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

/** One open store's state; FileStore keeps it private, and the parts in ./file-*.ts work on it. */
export class FileStoreCore {
  readonly name: string;
  readonly tmpPath: string;
  readonly files: PlatformFiles;
  readonly state = new KvState();
  log!: LogFile;
  readonly compactMinBytes: number;
  readonly onStep: ((step: CompactionStep) => void) | undefined;
  readonly compactRatio: number;
  readonly pollMs: number;

  queue: Entry[] = [];
  flushScheduled = false;
  flushing: Promise<void> | undefined;
  /** True while this store holds the cross-process lock (its records may be on disk but not yet applied). */
  locked = false;
  closing = false;
  closed = false;
  broken: StoreError | undefined;

  readonly watchers = new Set<WatchEntry>();
  unsubscribe: (() => void) | undefined;
  pollTimer: NodeJS.Timeout | undefined;

  readonly counters = { txns: 0, records: 0, batches: 0, syncs: 0, compactions: 0, recordsReadIn: 0 };
  lastCompactionError: string | undefined;

  /** A log file being opened (named in its errors). */
  opening: string | undefined;

  constructor(
    readonly dir: string,
    readonly lockFd: number,
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

  /** The log file in question (for messages). */
  get logPath(): string {
    return this.opening ?? this.log?.path ?? path.join(this.dir, 'log');
  }

  genPath(gen: number): string {
    return path.join(this.dir, logFileName(gen));
  }

  /** The highest log generation in the directory, -1 when there is none. */
  latestGen(): number {
    let names: string[];
    try {
      names = this.files.list(this.dir);
    } catch (err) {
      throw fsError(this.name, 'list', this.dir, err);
    }
    const gens = logGenerations(names);
    return gens.length ? gens[gens.length - 1]! : -1;
  }

  // ---- locking ---------------------------------------------------------------------------------------------

  async lock(): Promise<void> {
    await acquireProcessLock(this.lockKey);
    try {
      if (!this.files.tryLock(this.lockFd)) await this.files.waitForLock(this.lockFd);
    } catch (err) {
      releaseProcessLock(this.lockKey);
      throw fsError(this.name, 'lock', path.join(this.dir, 'LOCK'), err);
    }
  }

  unlock(): void {
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

  readHeader(fd: number, locked: boolean): Header | undefined {
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
  writeHeader(log: LogFile, committed: number, flags: number): void {
    const seq = (log.hseq + 1) >>> 0;
    try {
      writeAll(log.fd, headerSlot(committed, flags, seq), 8 + (seq & 1) * SLOT);
    } catch (err) {
      throw fsError(this.name, 'write the header of', this.logPath, err);
    }
    log.hseq = seq;
  }

  corrupt(offset: number, why: string): StoreError {
    return new StoreError(`${this.name}: corrupt log ${this.logPath} at byte ${offset}: ${why}`);
  }

  noteRecord(log: LogFile, rev: number, off: number): void {
    if (log.records++ % INDEX_EVERY === 0) {
      log.idxRev.push(rev);
      log.idxOff.push(off);
    }
  }

  // ---- watch -----------------------------------------------------------------------------------------------

  /** Hand events to every watcher whose prefix they fall under, each in its own microtask. */
  fanOut(events: WatchEvent[]): void {
    for (const w of this.watchers) {
      const mine = w.prefix === '' ? events : events.filter((e) => e.key.startsWith(w.prefix));
      if (mine.length) queueMicrotask(() => w.active && w.onEvent(mine));
    }
  }
}
