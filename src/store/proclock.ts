// The in-process half of the file store's writer lock (the cross-process half is a file lock on LOCK).

// Stores in one process that share a directory queue here for the cross-process lock, so at most one of them
// waits in waitForLock (which parks a libuv threadpool thread) and a holder never starves for threads.
const processLocks = new Map<string, { held: boolean; waiters: Array<() => void> }>();

export async function acquireProcessLock(key: string): Promise<void> {
  let l = processLocks.get(key);
  if (!l) processLocks.set(key, (l = { held: false, waiters: [] }));
  if (!l.held) {
    l.held = true;
    return;
  }
  await new Promise<void>((resolve) => l.waiters.push(resolve));
}

export function releaseProcessLock(key: string): void {
  const l = processLocks.get(key);
  if (!l) return;
  const next = l.waiters.shift();
  if (next) next(); // hand over without releasing
  else processLocks.delete(key);
}
