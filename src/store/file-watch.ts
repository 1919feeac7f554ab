// Watch: watchers on a key prefix, fed live from the state, replayed from the log when they start at an earlier
// revision, and polling for other processes' writes while any watcher is open.
import { StoreError, type WatchEvent, type Watcher } from './types.ts';
import { scanFrames } from './logfile.ts';
import { type EncodedOp, type FileStoreCore, type WatchEntry } from './file-core.ts';
import { readCatchUp } from './file-replay.ts';

/** A watcher on `prefix` from `fromRevision` (0: from now on). The caller has checked the store is open. */
export function addWatcher(
  core: FileStoreCore,
  prefix: string,
  fromRevision: number,
  onEvent: (events: WatchEvent[]) => void,
): Watcher {
  // Read and subscribe in one synchronous step so that no event is missed or delivered twice.
  readCatchUp(core);
  let replay: WatchEvent[] = [];
  if (fromRevision > 0 && fromRevision < core.state.revision) {
    if (fromRevision < core.log.snapRev)
      throw new StoreError(
        `${core.name}: revision ${fromRevision} was compacted (the log starts at revision ${core.log.snapRev})`,
      );
    replay = readEvents(core, prefix, fromRevision);
  }
  const entry: WatchEntry = { prefix, onEvent, active: true };
  core.watchers.add(entry);
  if (!core.unsubscribe) core.unsubscribe = core.state.watch('', (events) => core.fanOut(events));
  if (!core.pollTimer) {
    core.pollTimer = setInterval(() => poll(core), core.pollMs);
    core.pollTimer.unref();
  }
  if (replay.length) queueMicrotask(() => entry.active && onEvent(replay));
  return {
    close: () => {
      entry.active = false;
      core.watchers.delete(entry);
      if (core.watchers.size === 0) stopWatching(core);
    },
  };
}

/** Events under `prefix` after `fromRevision`, read back from the current log up to what is applied. */
function readEvents(core: FileStoreCore, prefix: string, fromRevision: number): WatchEvent[] {
  const log = core.log;
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
  // never written, see commitLocked in ./file-commit.ts).
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

function poll(core: FileStoreCore): void {
  try {
    readCatchUp(core);
  } catch {
    // readCatchUp marked the store broken; the next call reports it.
  }
}

export function stopWatching(core: FileStoreCore): void {
  core.unsubscribe?.();
  core.unsubscribe = undefined;
  if (core.pollTimer) clearInterval(core.pollTimer);
  core.pollTimer = undefined;
}
