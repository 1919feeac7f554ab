// A Windows double for tests: the real Windows platform logic (src/platform/platform.ts windowsPlatform) over
// Linux files that obey the Windows rules the store and daemon must live with:
//   - rename onto, or over, a file that is open anywhere fails with EPERM (and a rename of an open file too);
//   - removing an open file fails with EPERM (conservative: libuv's FILE_SHARE_DELETE would allow a pending delete);
//   - LockFileEx needs a handle with read or write access: an append-only handle ('a', 'as') gets EACCES;
//   - no SIGTERM (the platform's controls), boot time from the uptime, host names in upper case.
// Open handles are tracked per double, which stands for every process on the "machine": stores opened with the
// same double see each other's open files.
import fs from 'node:fs';
import path from 'node:path';
import { realDeps, windowsPlatform, type Platform, type SpawnResult } from '../../src/platform/platform.ts';
import { netIpcPath } from '../../src/platform/paths.ts';
import type { Win32SecurityApi } from '../../src/platform/pipe-acl.ts';

export interface WindowsDouble {
  platform: Platform;
  /** Every command run through platform.spawn. */
  spawned: { cmd: string; args: string[] }[];
  /** Paths with open handles now. */
  openPaths(): string[];
  /** Rule violations the double refused (each also threw at the caller). */
  refused: string[];
  /** Every DACL set on a pipe through the platform (pipe name, SDDL asked for). */
  pipeDacls: { pipe: string; sddl: string }[];
}

export interface WindowsDoubleOptions {
  hostname?: string;
  env?: Record<string, string | undefined>;
  /** Seconds since boot. */
  uptime?: () => number;
  now?: () => number;
  spawnResult?: (cmd: string, args: string[]) => SpawnResult;
  processAlive?: (pid: number) => boolean;
  /**
   * The Win32 pipe security calls. Default: the DACL asked for is kept and read back as wine does (entries as
   * given, the protected flag dropped). Reject to model koffi failing to load.
   */
  win32Security?: () => Promise<Win32SecurityApi>;
  /** Listen for "pipes" as Unix sockets in this directory (the pipe namespace of the double), so a server can run. */
  pipeDir?: string;
}

function winError(code: 'EPERM' | 'EACCES', syscall: string, what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${code === 'EPERM' ? 'operation not permitted' : 'permission denied'}, ${syscall} ${what}`), {
    code,
    syscall,
    errno: code === 'EPERM' ? -1 : -13,
  });
}

export function windowsDouble(opts: WindowsDoubleOptions = {}): WindowsDouble {
  const real = realDeps();
  const open = new Map<number, { path: string; flags: string }>();
  const refused: string[] = [];
  const spawned: { cmd: string; args: string[] }[] = [];
  const pipeDacls: { pipe: string; sddl: string }[] = [];
  const keepAsWine: Win32SecurityApi = {
    setDacl(pipe, sddl) {
      pipeDacls.push({ pipe, sddl });
      return sddl.replace(/^D:P/, 'D:');
    },
    // What icacls icaclsArgs() leaves, as Windows renders it.
    readDirDacl: () => 'D:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)',
  };
  const isOpen = (p: string) => [...open.values()].some((o) => o.path === path.resolve(p));
  const refuse = (code: 'EPERM' | 'EACCES', syscall: string, what: string) => {
    refused.push(`${syscall} ${what}`);
    return winError(code, syscall, what);
  };
  const platform = windowsPlatform({
    ...real,
    fs: {
      openSync(p, flags) {
        const fd = fs.openSync(p, flags);
        open.set(fd, { path: path.resolve(p), flags });
        return fd;
      },
      closeSync(fd) {
        fs.closeSync(fd);
        open.delete(fd);
      },
      renameSync(from, to) {
        if (isOpen(to) && fs.existsSync(to)) throw refuse('EPERM', 'rename', `'${from}' -> '${to}' (target open)`);
        if (isOpen(from)) throw refuse('EPERM', 'rename', `'${from}' -> '${to}' (source open)`);
        fs.renameSync(from, to);
      },
      unlinkSync(p) {
        if (isOpen(p) && fs.existsSync(p)) throw refuse('EPERM', 'unlink', `'${p}' (open)`);
        fs.unlinkSync(p);
      },
      readdirSync: (d) => fs.readdirSync(d),
      mkdirSync: (d, o) => fs.mkdirSync(d, o),
      fsyncSync(fd) {
        fs.fsyncSync(fd);
      },
    },
    lock: {
      tryLock(fd) {
        const o = open.get(fd);
        if (o && /^as?$/.test(o.flags)) throw refuse('EACCES', 'LockFileEx', `'${o.path}' (handle opened '${o.flags}': append access only)`);
        return real.lock.tryLock(fd);
      },
      async waitForLock(fd) {
        const o = open.get(fd);
        if (o && /^as?$/.test(o.flags)) throw refuse('EACCES', 'LockFileEx', `'${o.path}' (handle opened '${o.flags}': append access only)`);
        return real.lock.waitForLock(fd);
      },
      unlock: (fd) => real.lock.unlock(fd),
    },
    env: opts.env ?? {},
    hostname: () => opts.hostname ?? 'WIN-NODE-A',
    uptime: opts.uptime ?? (() => 3600),
    now: opts.now ?? (() => Date.now()),
    readBootId: () => undefined,
    processAlive: opts.processAlive ?? real.processAlive,
    spawn: async (cmd, args) => {
      spawned.push({ cmd, args });
      return opts.spawnResult?.(cmd, args) ?? { code: 0, stdout: 'Successfully processed 1 files; Failed processing 0 files', stderr: '' };
    },
    win32Security: opts.win32Security ?? (async () => keepAsWine),
  });
  const pipeDir = opts.pipeDir;
  // A pipe name becomes a socket file in pipeDir, for the server's bind and for clients alike.
  const inPipeDir = (p: string) => path.join(pipeDir!, netIpcPath(p, 'win32'));
  const withPipes: Platform = pipeDir ? { ...platform, netIpcPath: inPipeDir, ipcListenPath: inPipeDir } : platform;
  return { platform: withPipes, spawned, refused, pipeDacls, openPaths: () => [...open.values()].map((o) => o.path) };
}
