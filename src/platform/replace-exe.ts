// Install a file that may be running right now (a CNI plugin executable containerd starts for every pod), the way
// each OS allows, through the Platform's file operations (so tests run the Windows rules on the double).
//
// Windows: a running .exe can be renamed but never replaced (MoveFileEx over it) nor deleted: its image section
// stays mapped until the last process running it exits. So the new file is copied beside the target under a
// temporary name; a rename over the target is tried first (atomic: nothing running it), and when the target is in
// use its old file is moved aside to a name of its own (NAME.old-PID-TIME) and the new one renamed in. A process
// still running the old image keeps running it from its new name. Every NAME.old-* that is free is removed (this
// install's, or an earlier one's whose process has exited); one still running stays until a later install.
// Linux: rename over the target is atomic and a running file keeps its inode, so the first rename always succeeds
// and nothing is ever moved aside.
//
// A target whose bytes equal the source's is not touched (no temporary file, no rename): an install run at every
// pod start changes nothing on a node that already has this version.
import fs from 'node:fs';
import path from 'node:path';
import type { Platform } from './platform.ts';

/** The error codes Windows gives for a file in use (a running image, a handle without FILE_SHARE_DELETE). */
const IN_USE = new Set(['EPERM', 'EBUSY', 'EACCES']);

const CHUNK = 1 << 20;

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export interface ReplaceOutcome {
  target: string;
  /** installed: the target did not exist; replaced: it had other bytes; unchanged: not touched. */
  outcome: 'installed' | 'replaced' | 'unchanged';
  /** Where the old file went when it was in use and had to be moved aside (Windows: a running executable). */
  movedAside?: string;
  /** Leftovers (TARGET.old-*) removed now. */
  removed: string[];
  /** Leftovers still in use, left for a later install, with the error that kept them. */
  kept: { path: string; code: string }[];
}

export interface ReplaceOptions {
  /** Linux: the mode of the installed file (default: the source's permission bits). Windows: ignored. */
  mode?: number;
  /** For the aside name (default Date.now). */
  now?: () => number;
  /** Tries of the rename steps while the target is briefly held by another handle (default 20, 25 ms apart). */
  tries?: number;
}

/** The prefix of the names a replaced file is moved aside to: TARGET.old-PID-TIME. */
export function asidePrefix(target: string): string {
  return `${path.basename(target)}.old-`;
}

/** What to install: a file's bytes, or bytes in memory (a launcher script). */
export type Source = string | { bytes: Buffer };

/** The whole of a small file, read through the platform; undefined when absent. */
function readAll(p: Platform, file: string): Buffer | undefined {
  let fd: number;
  try {
    fd = p.files.open(file, 'r');
  } catch (e) {
    if (code(e) === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const b = Buffer.alloc(fs.fstatSync(fd).size);
    for (let got = 0; got < b.length;) {
      const n = fs.readSync(fd, b, got, b.length - got, got);
      if (n === 0) return b.subarray(0, got);
      got += n;
    }
    return b;
  } finally {
    p.files.close(fd);
  }
}

/** Whether `target` holds exactly the source's bytes (false when it is missing). */
export function sameAsSource(p: Platform, source: Source, target: string): boolean {
  if (typeof source === 'string') return sameBytes(p, source, target);
  return readAll(p, target)?.equals(source.bytes) ?? false;
}

/** Whether two files hold the same bytes (false when either is missing), read through the platform. */
export function sameBytes(p: Platform, a: string, b: string): boolean {
  let sa: fs.Stats;
  let sb: fs.Stats;
  try {
    sa = fs.statSync(a);
    sb = fs.statSync(b);
  } catch (e) {
    if (code(e) === 'ENOENT') return false;
    throw e;
  }
  if (!sb.isFile() || sa.size !== sb.size) return false;
  const fa = p.files.open(a, 'r');
  try {
    const fb = p.files.open(b, 'r');
    try {
      const ba = Buffer.allocUnsafe(CHUNK);
      const bb = Buffer.allocUnsafe(CHUNK);
      for (let pos = 0; pos < sa.size;) {
        const n = fs.readSync(fa, ba, 0, CHUNK, pos);
        if (n === 0) return false;
        let m = 0;
        while (m < n) {
          const got = fs.readSync(fb, bb, m, n - m, pos + m);
          if (got === 0) return false;
          m += got;
        }
        if (!ba.subarray(0, n).equals(bb.subarray(0, n))) return false;
        pos += n;
      }
      return true;
    } finally {
      p.files.close(fb);
    }
  } finally {
    p.files.close(fa);
  }
}

function writeAt(fd: number, b: Buffer, pos: number): void {
  for (let done = 0; done < b.length;) done += fs.writeSync(fd, b, done, b.length - done, pos + done);
}

/** Copy the source to `to` (created or truncated) through the platform, flushed to disk; Linux: chmod `mode`. */
function copyThrough(p: Platform, source: Source, to: string, mode: number | undefined): void {
  const src = typeof source === 'string' ? p.files.open(source, 'r') : undefined;
  try {
    const dst = p.files.open(to, 'w');
    try {
      if (src === undefined) writeAt(dst, (source as { bytes: Buffer }).bytes, 0);
      else {
        const buf = Buffer.allocUnsafe(CHUNK);
        for (let pos = 0; ;) {
          const n = fs.readSync(src, buf, 0, CHUNK, pos);
          if (n === 0) break;
          writeAt(dst, buf.subarray(0, n), pos);
          pos += n;
        }
      }
      if (p.id === 'linux' && mode !== undefined) fs.fchmodSync(dst, mode);
      fs.fsyncSync(dst);
    } finally {
      p.files.close(dst);
    }
  } finally {
    if (src !== undefined) p.files.close(src);
  }
}

/**
 * Remove the TARGET.old-* files in the target's directory that nothing runs any more. One in use (EPERM, EBUSY,
 * EACCES: a process still runs it) is kept and reported; a later call removes it.
 */
export function removeLeftovers(p: Platform, target: string): { removed: string[]; kept: { path: string; code: string }[] } {
  const dir = path.dirname(target);
  const prefix = asidePrefix(target);
  const fold = (s: string) => (p.id === 'win32' ? s.toLowerCase() : s); // Windows names are case-insensitive
  const out = { removed: [] as string[], kept: [] as { path: string; code: string }[] };
  let names: string[];
  try {
    names = p.files.list(dir);
  } catch (e) {
    if (code(e) === 'ENOENT') return out;
    throw e;
  }
  for (const name of names.filter((n) => fold(n).startsWith(fold(prefix))).sort()) {
    const file = path.join(dir, name);
    try {
      p.files.remove(file);
      out.removed.push(file);
    } catch (e) {
      if (!IN_USE.has(code(e) ?? '')) throw e;
      out.kept.push({ path: file, code: code(e)! });
    }
  }
  return out;
}

/**
 * Install `source` (a file, or bytes) at `target` (see the file's head): unchanged when the bytes are the same, else copied beside and
 * renamed in, the old file moved aside first when it is in use. Leftovers of earlier replacements that are free are
 * removed either way. Throws (the target left as it was, no temporary file) when it cannot.
 */
export function replaceExecutable(p: Platform, source: Source, target: string, opts: ReplaceOptions = {}): ReplaceOutcome {
  const now = opts.now ?? Date.now;
  const tries = opts.tries ?? 20;
  let outcome: ReplaceOutcome['outcome'] = 'unchanged';
  let movedAside: string | undefined;
  if (!sameAsSource(p, source, target)) {
    const existed = fs.existsSync(target);
    const mode = opts.mode ?? (typeof source === 'string' ? fs.statSync(source).mode & 0o777 : 0o644);
    const tmp = `${target}.new-${process.pid}`;
    copyThrough(p, source, tmp, mode);
    try {
      movedAside = moveIn(p, tmp, target, `${target}.old-${process.pid}-${now()}`, tries);
    } catch (e) {
      try {
        p.files.remove(tmp);
      } catch { /* the rename's error is the one to report */ }
      throw e;
    }
    p.files.syncDir(path.dirname(target));
    outcome = existed ? 'replaced' : 'installed';
  }
  return { target, outcome, ...(movedAside ? { movedAside } : {}), ...removeLeftovers(p, target) };
}

/** Rename `tmp` to `target`; when the target is in use, move it to `aside` first. The aside name, if used. */
function moveIn(p: Platform, tmp: string, target: string, aside: string, tries: number): string | undefined {
  for (let i = 1; ; i++) {
    let busy: unknown;
    try {
      p.files.rename(tmp, target);
      return undefined;
    } catch (e) {
      // Linux never refuses a rename over a file for being in use: an error there is the error.
      if (p.id !== 'win32' || !IN_USE.has(code(e) ?? '')) throw e;
      busy = e;
    }
    // In use. A running image may still be renamed: move it out of the way, then the new file in.
    try {
      p.files.rename(target, aside);
    } catch (e) {
      // Also held (a handle without FILE_SHARE_DELETE: a scanner, a backup) or gone meanwhile: try again shortly.
      if (code(e) === 'ENOENT' && i < tries) continue;
      if (!IN_USE.has(code(e) ?? '') || i >= tries) {
        throw Object.assign(new Error(`cannot replace ${target}: it is in use (${code(busy)}) and cannot be moved aside either (${(e as Error).message})`), { code: code(e) });
      }
      sleepMs(25);
      continue;
    }
    try {
      p.files.rename(tmp, target);
      return aside;
    } catch (e) {
      // Put the old one back, so the name never stays empty.
      try {
        p.files.rename(aside, target);
      } catch { /* reported below: the old file is at `aside` */ }
      throw Object.assign(new Error(`cannot move ${tmp} to ${target} after moving the old file aside: ${(e as Error).message}`), { code: code(e) });
    }
  }
}
