// Replace a small file atomically, and only when its content changes: write a temporary file beside it, flush it,
// close every handle, then rename it over the target through the Platform (Windows: a rename over a file someone
// holds open fails for a moment, so the platform retries; the double enforces that rule in tests). Readers (e.g.
// containerd reading a CNI config) see the old file or the new one, never half of one; an unchanged file is not
// touched at all, so its modification time does not wake up anyone watching the directory.
import fs from 'node:fs';
import path from 'node:path';
import type { Platform } from './platform.ts';

export type WriteOutcome = 'written' | 'unchanged';

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

export function writeFileIfChanged(p: Platform, file: string, text: string): WriteOutcome {
  if (readTextFile(p, file) === text) return 'unchanged';
  const dir = path.dirname(file);
  p.files.mkdirp(dir);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = p.files.open(tmp, 'w');
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
