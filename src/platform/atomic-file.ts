// Replace a small file atomically, and only when its content changes: write a temporary file beside it, flush it,
// close every handle, then rename it over the target through the Platform (Windows: a rename over a file someone
// holds open fails for a moment, so the platform retries; the double enforces that rule in tests). Readers (e.g.
// containerd reading a CNI config) see the old file or the new one, never half of one; an unchanged file is not
// touched at all, so its modification time does not wake up anyone watching the directory.
//
// Private files (the store's LOCK, logs and snapshots, the run dir's markers, and the temporary files they are
// renamed from) are created 0600 by open(2) itself (createFile): no chmod after creating, which would leave a window
// in which others may open the file, and keep the descriptor whatever the mode says afterwards.
import fs from 'node:fs';
import path from 'node:path';
import type { Platform, PlatformFiles } from './platform.ts';

export type WriteOutcome = 'written' | 'unchanged';

/** The mode of every file the store and the run dir create (POSIX; Windows: the folder's ACL decides). */
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Create `file` anew for writing, with `mode` given to open(2) (the umask may only narrow it; Windows ignores it):
 * a leftover of the same name (a crashed writer's temporary file, whatever its mode) is removed first, and 'wx'
 * makes sure the file opened is the one this call created, so it had `mode` before a byte was written. Callers name
 * files only they write (a name with their pid, or under the store's lock).
 */
export function createFile(files: PlatformFiles, file: string, mode: number): number {
  files.remove(file);
  return files.open(file, 'wx', mode);
}

/** Write all of `s` (UTF-8) at the start of an open file. */
export function writeAll(fd: number, s: string): void {
  const b = Buffer.from(s, 'utf8');
  let done = 0;
  while (done < b.length) done += fs.writeSync(fd, b, done, b.length - done, done);
}

/** The file's text (read through the platform, so the Windows double sees the handle), or undefined when absent. */
export function readTextFile(p: Platform, file: string): string | undefined {
  let fd: number;
  try {
    fd = p.files.open(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const b = Buffer.alloc(fs.fstatSync(fd).size);
    let got = 0;
    while (got < b.length) {
      const n = fs.readSync(fd, b, got, b.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return b.subarray(0, got).toString('utf8');
  } finally {
    p.files.close(fd);
  }
}

/**
 * Replace `file` by `text` unless it holds that already. `mode`: what the new file is created with (the temporary
 * file, made by createFile, gets it before any data; a rename keeps it); default 0666 less the umask, as before
 * (the CNI network config, which the container runtime and people read).
 */
export function writeFileIfChanged(p: Platform, file: string, text: string, mode = 0o666): WriteOutcome {
  if (readTextFile(p, file) === text) return 'unchanged';
  const dir = path.dirname(file);
  p.files.mkdirp(dir);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = createFile(p.files, tmp, mode);
  try {
    writeAll(fd, text);
    fs.fsyncSync(fd);
  } finally {
    p.files.close(fd);
  }
  try {
    p.replaceFile(tmp, file);
  } catch (e) {
    try {
      p.files.remove(tmp);
    } catch { /* the rename's error is the one to report */ }
    throw e;
  }
  p.files.syncDir(dir);
  return 'written';
}
