// Compaction: the state written as the next log generation (log.tmp, fsync'ed, renamed to a name that does not
// exist yet), the old generation sealed first and removed last, with a test hook at every step in between. Also
// writes the first generation of a new store, and removes generations a compaction left behind.
import fs from 'node:fs';
import { createFile, PRIVATE_FILE_MODE } from '../platform/atomic-file.ts';
import { encodeFrame, logGenerations, HEADER, newHeader, SEALED, SNAPSHOT_CHUNK, writeAll } from './logfile.ts';
import { fsError, type CompactionStep, type FileStoreCore } from './file-core.ts';
import { openLog } from './file-replay.ts';

/**
 * Write the current state as log generation `gen`: to log.tmp, fsync'ed, then renamed to the generation's name,
 * which does not exist yet (Windows refuses a rename over a file that is open anywhere, and other processes
 * hold the current log open), and the directory entry synced.
 */
export function writeSnapshotFile(core: FileStoreCore, gen: number): void {
  const target = core.genPath(gen);
  const state = core.state;
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
    fd = createFile(core.files, core.tmpPath, PRIVATE_FILE_MODE);
  } catch (err) {
    throw fsError(core.name, 'create', core.tmpPath, err);
  }
  try {
    let at = 0;
    for (const b of [newHeader(total), head, ...chunks]) {
      writeAll(fd, b, at);
      at += b.length;
      step(core, 'tmp-partial');
    }
    core.counters.syncs++;
    fs.fsyncSync(fd);
  } catch (err) {
    core.files.close(fd);
    try {
      core.files.remove(core.tmpPath);
    } catch {}
    throw fsError(core.name, 'write', core.tmpPath, err);
  }
  core.files.close(fd);
  step(core, 'tmp-written');
  try {
    core.files.rename(core.tmpPath, target);
  } catch (err) {
    throw fsError(core.name, 'rename the snapshot to', target, err);
  }
  step(core, 'renamed');
  try {
    core.counters.syncs++;
    core.files.syncDir(core.dir);
  } catch (err) {
    throw fsError(core.name, 'sync the directory', core.dir, err);
  }
}

/** A compaction step reached (tests: copy the directory as a crash would leave it, or inject a failure). */
function step(core: FileStoreCore, name: CompactionStep): void {
  if (core.log) core.onStep?.(name); // not for the first snapshot of a new store
}

/** Replace the log by a snapshot of the state. Caller holds the lock and is fully caught up. */
export function compact(core: FileStoreCore): void {
  const old = core.log;
  try {
    // Seal first: readers in other processes then look for a newer generation on every read until they see
    // it, so a compactor dying half-way can never leave them reading a dead file.
    core.writeHeader(old, old.end, SEALED);
    step(core, 'sealed');
    writeSnapshotFile(core, old.gen + 1);
    core.log = openLog(core, core.state, true, old.gen + 1, core.state.revision);
    step(core, 'opened');
    // Close before remove: Windows cannot remove a file this process holds open.
    core.files.close(old.fd);
    step(core, 'old-closed');
    removeOldGens(core);
    step(core, 'old-removed');
    core.counters.compactions++;
    core.lastCompactionError = undefined;
  } catch (err) {
    core.lastCompactionError = err instanceof Error ? err.message : String(err);
    if (core.log === old) {
      // The next generation is not in place (or not readable): the old log stays current, unsealed.
      try {
        if (core.latestGen() === old.gen) core.writeHeader(old, old.end, 0);
      } catch {}
    }
  }
}

/**
 * Remove generations older than the current one. Best effort: on Windows a file another process still has open
 * cannot be removed; it is retried at the next compaction or open, and never read again meanwhile.
 */
export function removeOldGens(core: FileStoreCore): void {
  let names: string[];
  try {
    names = core.files.list(core.dir);
  } catch {
    return;
  }
  for (const g of logGenerations(names)) {
    if (g >= core.log.gen) break;
    try {
      core.files.remove(core.genPath(g));
    } catch {
      /* still open somewhere (Windows); next time */
    }
  }
}
