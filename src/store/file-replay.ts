// Reading the log into the state: loading a log generation at open (its snapshot, then its records; under the lock
// a torn tail is cut) and catching up with what other processes wrote, following them to a compacted generation.
import fs from 'node:fs';
import { HEADER, scanFrames, SEALED, type Header } from './logfile.ts';
import { KvState } from './state.ts';
import { type Op, type WatchEvent } from './types.ts';
import { fsError, type EncodedOp, type FileStoreCore, type LogFile } from './file-core.ts';

/** openLog found a different snapshot than the caller is at. */
const SNAPSHOT_MISMATCH = Symbol('snapshot mismatch');

/** Decode and apply the txn records in [from, to) of `log` to `state`; returns how the scan ended. */
function applyRange(core: FileStoreCore, log: LogFile, state: KvState, from: number, to: number, countReadIn: boolean) {
  return scanFrames(log.fd, from, to, (payload, start, end) => {
    let rec: unknown;
    try {
      rec = JSON.parse(payload.toString('utf8'));
    } catch {
      throw core.corrupt(start, 'record is not valid JSON');
    }
    if (!Array.isArray(rec) || typeof rec[0] !== 'number' || !Array.isArray(rec[1]))
      throw core.corrupt(start, 'unexpected record (a snapshot in the middle of the log?)');
    const rev = rec[0] as number;
    if (rev <= state.revision) throw core.corrupt(start, `revision ${rev} is not after ${state.revision}`);
    const ops: Op[] = (rec[1] as EncodedOp[]).map((o) =>
      o.length === 2 ? { type: 'put', key: o[0], value: o[1] } : { type: 'delete', key: o[0] },
    );
    core.noteRecord(log, rev, start);
    state.apply(rev, ops);
    log.end = end;
    if (countReadIn) core.counters.recordsReadIn++;
  });
}

/**
 * Open the file at the log path and load it into `state` (which must be empty, or already at the snapshot's
 * revision when `skipSnapshot`). With the lock held, a torn tail is cut off; without it, reads stop at the
 * committed length.
 */
export function openLog(core: FileStoreCore, state: KvState, locked: boolean, gen: number, skipSnapshotAt?: number): LogFile {
  const file = core.genPath(gen);
  core.opening = file;
  let fd: number;
  try {
    fd = core.files.open(file, 'r+');
  } catch (err) {
    core.opening = undefined;
    throw fsError(core.name, 'open', file, err);
  }
  try {
    const st = fs.fstatSync(fd);
    const h = core.readHeader(fd, true)!;
    const size = st.size;
    if (h.committed > size)
      throw core.corrupt(size, `file is shorter than its committed length ${h.committed} (truncated?)`);
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
        throw core.corrupt(start, 'snapshot record is not valid JSON');
      }
      if (chunks < 0) {
        if (typeof rec.snap !== 'number' || typeof rec.chunks !== 'number')
          throw core.corrupt(start, 'the log does not start with a snapshot');
        if (skipSnapshotAt !== undefined && rec.snap !== skipSnapshotAt) throw SNAPSHOT_MISMATCH;
        chunks = rec.chunks;
        log.snapRev = rec.snap;
        if (skipSnapshotAt === undefined) state.setRevision(rec.snap);
      } else {
        if (!Array.isArray(rec.kv)) throw core.corrupt(start, 'bad snapshot chunk');
        if (skipSnapshotAt === undefined) {
          for (const [key, value, createRevision, modRevision] of rec.kv as [string, string, number, number][])
            state.load({ key, value, createRevision, modRevision }, log.snapRev);
        }
        seen++;
      }
      log.dataStart = log.end = end;
    });
    if (chunks < 0 || seen < chunks) throw core.corrupt(snapEnd.end, 'incomplete snapshot');
    const to = locked ? size : h.committed;
    const r = applyRange(core, log, state, log.end, to, false);
    if (r.bad) {
      if (r.end < h.committed)
        throw core.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
      if (locked) {
        // A torn tail: written but never acknowledged (the writer died before fdatasync returned).
        try {
          fs.ftruncateSync(fd, r.end);
        } catch (err) {
          throw fsError(core.name, 'truncate the torn tail of', core.logPath, err);
        }
      }
    }
    if (locked) publish(core, log, h);
    return log;
  } catch (err) {
    core.files.close(fd);
    throw err;
  } finally {
    core.opening = undefined;
  }
}

/** Others' writes, read without the lock up to the committed length. Cheap when nothing changed. */
export function readCatchUp(core: FileStoreCore): void {
  if (core.locked || core.closed || core.broken) return;
  try {
    let h = core.readHeader(core.log.fd, false);
    if (!h) return; // torn header read; the next call will see it
    if (h.flags & SEALED) {
      // Being compacted, or compacted already: follow a newer generation once one exists.
      if (core.latestGen() > core.log.gen) {
        switchLog(core, h.committed, false);
        h = core.readHeader(core.log.fd, false);
        if (!h) return;
      }
    }
    if (h.committed > core.log.end) {
      const r = applyRange(core, core.log, core.state, core.log.end, h.committed, true);
      if (r.bad) throw core.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
    }
  } catch (err) {
    core.broken = fsError(core.name, 'read', core.logPath, err);
    throw core.broken;
  }
}

/** With the lock: follow a replaced log, read everything others appended, cut a torn tail. */
export function lockedCatchUp(core: FileStoreCore): void {
  // Compaction seals a log before it writes the next generation, so only a sealed log can have been replaced:
  // an unsealed one costs no directory listing.
  const first = core.readHeader(core.log.fd, true)!;
  if (first.flags & SEALED && core.latestGen() > core.log.gen) switchLog(core, undefined, true);
  const log = core.log;
  let size: number;
  try {
    size = fs.fstatSync(log.fd).size;
  } catch (err) {
    throw fsError(core.name, 'stat', core.logPath, err);
  }
  const h = core.readHeader(log.fd, true)!;
  log.hseq = h.seq;
  if (size < log.end || size < h.committed)
    throw core.corrupt(size, `file is shorter than what was already read/committed (truncated by hand?)`);
  if (size > log.end) {
    const r = applyRange(core, log, core.state, log.end, size, true);
    if (r.bad) {
      if (r.end < h.committed) throw core.corrupt(r.end, `damaged record before the committed length ${h.committed}`);
      try {
        fs.ftruncateSync(log.fd, r.end);
      } catch (err) {
        throw fsError(core.name, 'truncate the torn tail of', core.logPath, err);
      }
    }
  }
  publish(core, log, h);
}

/**
 * Under the lock, after reading to the end: make the header say what was read and clear a stale seal. Records
 * past the old committed length were written by a writer that died before its fdatasync returned; they are
 * kept (nobody was told they failed), but only after syncing them, so that the header never claims more than
 * is durable.
 */
function publish(core: FileStoreCore, log: LogFile, h: Header): void {
  if (h.committed === log.end && !(h.flags & SEALED)) return;
  if (log.end > h.committed) {
    try {
      core.counters.syncs++;
      fs.fdatasyncSync(log.fd);
    } catch (err) {
      core.broken = fsError(core.name, 'fdatasync', core.logPath, err);
      throw core.broken;
    }
  }
  core.writeHeader(log, log.end, 0);
}

/**
 * The log was replaced by a compacted one. The old file (still open here) is frozen: first read it to its end,
 * which normally brings this process exactly to the new snapshot's revision, so no event is lost. If it was
 * replaced more than once since we last looked, reload from the new file and tell watchers the difference.
 */
function switchLog(core: FileStoreCore, oldCommitted: number | undefined, locked: boolean): void {
  const old = core.log;
  const oldEnd = oldCommitted ?? fs.fstatSync(old.fd).size;
  if (oldEnd > old.end) applyRange(core, old, core.state, old.end, oldEnd, true); // a torn end of a frozen file is ignored
  const gen = core.latestGen();
  let next: LogFile;
  try {
    next = openLog(core, core.state, locked, gen, core.state.revision);
  } catch (err) {
    if (err !== SNAPSHOT_MISMATCH) throw err;
    const fresh = new KvState();
    next = openLog(core, fresh, locked, gen);
    replaceState(core, fresh);
  }
  try {
    core.files.close(old.fd);
  } catch {}
  core.log = next;
}

/** Swap in a freshly loaded state, sending watchers the difference as events. */
function replaceState(core: FileStoreCore, fresh: KvState): void {
  const events: WatchEvent[] = [];
  const rev = fresh.revision;
  for (const kv of core.state.entries()) {
    if (!fresh.get(kv.key)) events.push({ type: 'delete', key: kv.key, revision: rev });
  }
  for (const kv of fresh.entries()) {
    const mine = core.state.get(kv.key);
    if (!mine || mine.modRevision !== kv.modRevision)
      events.push({ type: 'put', key: kv.key, value: kv.value, revision: kv.modRevision });
  }
  events.sort((a, b) => a.revision - b.revision);
  core.state.clear();
  for (const kv of fresh.entries()) core.state.load(kv, rev);
  core.state.setRevision(rev);
  if (events.length) core.fanOut(events);
}
