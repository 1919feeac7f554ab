// Whole-file locks (flock on Linux, LockFileEx on Windows) from fs-native-extensions' prebuilt addon, loaded
// directly, to keep the idle daemon small. The package's own entry finds its addon through a general resolver (require-addon and three
// bare-* packages, ~18 modules): about 0.5 MB of the idle daemon's RSS for one path that is known in advance,
// prebuilds/<os>-<arch>/fs-native-extensions.node. That path is tried first; when it is absent (another libc, say)
// the package's entry is used as before. The Windows executable (a bundle with an empty import.meta.url) ships the
// addon beside itself (packaging/windows/build.ts).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** Advisory whole-file locks on an open descriptor (flock on POSIX, LockFileEx on Windows). */
export interface LockOps {
  tryLock(fd: number): boolean;
  waitForLock(fd: number): Promise<void>;
  unlock(fd: number): void;
}

/** The addon's functions (binding.c): errors are thrown with a libuv code; EAGAIN means "held elsewhere". */
interface Binding {
  tryLock(fd: number, offset: number, length: number, exclusive: boolean): void;
  waitForLock(fd: number, offset: number, length: number, exclusive: boolean, req: object, done: (this: WaitReq, err: Error | null) => void): unknown;
  unlock(fd: number, offset: number, length: number): void;
}
interface WaitReq {
  handle: unknown;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Where the addon comes from, for a test or a log to say. */
export type LockSource = 'prebuild' | 'package' | 'beside-executable';

function dlopen(file: string): Binding {
  const m = { exports: {} as Binding };
  process.dlopen(m, file);
  return m.exports;
}

function bindingOps(b: Binding): LockOps {
  function done(this: WaitReq, err: Error | null): void {
    if (err) this.reject(err);
    else this.resolve();
  }
  return {
    tryLock(fd) {
      try {
        b.tryLock(fd, 0, 0, true);
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return false;
        throw err;
      }
    },
    waitForLock(fd) {
      return new Promise<void>((resolve, reject) => {
        const req: WaitReq = { handle: null, resolve, reject };
        req.handle = b.waitForLock(fd, 0, 0, true, req, done); // the addon keeps req alive until done
      });
    },
    unlock: (fd) => b.unlock(fd, 0, 0),
  };
}

/** Find and load the lock addon: the prebuild for this OS and CPU, else the package's own loader. */
export function loadFileLocks(host = `${process.platform}-${process.arch}`, moduleUrl = import.meta.url): { ops: LockOps; source: LockSource } {
  if (!moduleUrl) {
    // The Windows single executable: no node_modules, the addon is shipped beside the .exe.
    return { ops: bindingOps(dlopen(path.join(path.dirname(process.execPath), 'fs-native-extensions.node'))), source: 'beside-executable' };
  }
  const req = createRequire(moduleUrl);
  const dir = path.dirname(req.resolve('fs-native-extensions/package.json'));
  const prebuild = path.join(dir, 'prebuilds', host, 'fs-native-extensions.node');
  if (fs.existsSync(prebuild)) {
    try {
      return { ops: bindingOps(dlopen(prebuild)), source: 'prebuild' };
    } catch {
      /* a prebuild this process cannot load (e.g. built for another libc): the package knows better */
    }
  }
  const fsx = req('fs-native-extensions') as typeof import('fs-native-extensions');
  return { ops: { tryLock: (fd) => fsx.tryLock(fd), waitForLock: (fd) => fsx.waitForLock(fd), unlock: (fd) => fsx.unlock(fd) }, source: 'package' };
}

let cached: LockOps | undefined;

/** The process's lock operations, loaded on first use (a CLI command that never opens a store never loads them). */
export function fileLocks(): LockOps {
  cached ??= loadFileLocks().ops;
  return cached;
}
