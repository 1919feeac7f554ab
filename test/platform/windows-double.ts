// A Windows double for tests: the real Windows platform logic (src/platform/platform.ts windowsPlatform) over
// Linux files that obey the Windows rules the store and daemon must live with:
//   - rename onto, or over, a file that is open anywhere fails with EPERM (and a rename of an open file too);
//   - removing an open file fails with EPERM (conservative: libuv's FILE_SHARE_DELETE would allow a pending delete);
//   - LockFileEx needs a handle with read or write access: an append-only handle ('a', 'as') gets EACCES;
//   - a running executable (execute()) may be renamed (its image stays mapped, the process keeps running) but not
//     removed, renamed over, nor opened for writing (EBUSY), until the process exits;
//   - no SIGTERM (the platform's controls), boot time from the uptime, host names in upper case.
// Open handles are tracked per double, which stands for every process on the "machine": stores opened with the
// same double see each other's open files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { realDeps, windowsPlatform, type NetworkingDlls, type Platform, type SpawnResult } from '../../src/platform/platform.ts';
import type { WindowsNetworkingApis } from '../../src/platform/windows-net-api.ts';
import { pipeKeyName, socketEndpoint } from '../../src/platform/paths.ts';
import { Win32Error, type Win32SecurityApi } from '../../src/platform/pipe-acl.ts';

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
  /** Every directory made through CreateDirectoryW, with the descriptor it was given. */
  createdDirs: { dir: string; sddl: string }[];
  /** Owner and DACL of directories, as Windows would read them back (set one to model an existing directory). */
  dirSecurity: Map<string, string>;
  /** The double's Win32 security calls (Windows semantics over its files), to build variants from. */
  win32: Win32SecurityApi;
  /** The DLL paths each platform.networking() call asked for. */
  networkingLoads: NetworkingDlls[];
  /**
   * A process starts running the executable at `file`: until exit(), the file follows Windows' rules for a mapped
   * image (renamed: yes, and the process keeps running it under the new name; removed, replaced or written: no).
   * path(): where the running image's file is now.
   */
  execute(file: string): { path(): string; exit(): void };
}

/** What Windows reads back from a directory given icaclsArgs() (or ADMIN_ONLY_DIR_SDDL) by an administrator. */
export const ADMIN_ONLY_READ_BACK = 'O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)';

/** What Windows reads back from a directory made under C:\ProgramData by an administrator without an ACL of its own. */
export const PROGRAMDATA_CHILD_SDDL = 'O:BAD:AI(A;OICIID;FA;;;SY)(A;OICIID;FA;;;BA)(A;OICIIOID;GA;;;CO)(A;OICIID;0x1200a9;;;BU)(A;CIID;DCLCRPCR;;;BU)';

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
  /** The daemon's account (token user). Default: LocalSystem, as the service runs. */
  userSid?: string;
  /**
   * Read back for a directory with no entry in dirSecurity. Default: admin-only as install.ps1 leaves it, so tests
   * that are not about ACLs may use existing temporary directories; PROGRAMDATA_CHILD_SDDL models the usual mistake.
   */
  defaultDirSecurity?: string;
  /** Listen for "pipes" as Unix sockets in this directory (the pipe namespace of the double), so a server can run. */
  pipeDir?: string;
  /** The HCN / HNS / IP Helper APIs platform.networking() gives. Default: rejects (no native networking here). */
  networking?: (dlls: NetworkingDlls) => Promise<WindowsNetworkingApis>;
}

const WIN_ERRORS = {
  EPERM: { text: 'operation not permitted', errno: -1 },
  EACCES: { text: 'permission denied', errno: -13 },
  EBUSY: { text: 'resource busy or locked', errno: -16 },
};

function winError(code: keyof typeof WIN_ERRORS, syscall: string, what: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${WIN_ERRORS[code].text}, ${syscall} ${what}`), { code, syscall, errno: WIN_ERRORS[code].errno });
}

export function windowsDouble(opts: WindowsDoubleOptions = {}): WindowsDouble {
  const real = realDeps();
  const open = new Map<number, { path: string; flags: string }>();
  const refused: string[] = [];
  const spawned: { cmd: string; args: string[] }[] = [];
  const pipeDacls: { pipe: string; sddl: string }[] = [];
  const createdDirs: { dir: string; sddl: string }[] = [];
  const dirSecurity = new Map<string, string>();
  const networkingLoads: NetworkingDlls[] = [];
  const keepAsWine: Win32SecurityApi = {
    setDacl(pipe, sddl) {
      pipeDacls.push({ pipe, sddl });
      return sddl.replace(/^D:P/, 'D:');
    },
    readDirSecurity(dir) {
      if (!fs.existsSync(dir)) throw new Win32Error(`GetNamedSecurityInfoW(${dir})`, 2);
      return dirSecurity.get(path.resolve(dir)) ?? opts.defaultDirSecurity ?? ADMIN_ONLY_READ_BACK;
    },
    // Windows semantics: the parent must exist, an existing name fails, the descriptor is the directory's from the
    // start (owner: the creator's default owner, Administrators for an elevated admin or SYSTEM; generic rights mapped).
    createDir(dir, sddl) {
      if (fs.existsSync(dir)) throw new Win32Error(`CreateDirectoryW(${dir})`, 183);
      if (!fs.existsSync(path.dirname(dir))) throw new Win32Error(`CreateDirectoryW(${dir})`, 3);
      fs.mkdirSync(dir);
      createdDirs.push({ dir, sddl });
      const owner = opts.userSid === undefined || opts.userSid === 'S-1-5-18' ? 'SY' : 'BA';
      dirSecurity.set(path.resolve(dir), `O:${owner}${sddl.replace(/^D:P\(/, 'D:PAI(').replaceAll(';GA;', ';FA;')}`);
    },
    userSid: () => opts.userSid ?? 'S-1-5-18',
  };
  const isOpen = (p: string) => [...open.values()].some((o) => o.path === path.resolve(p));
  const images = new Set<{ path: string }>();
  const isRunning = (p: string) => [...images].some((i) => i.path === path.resolve(p));
  const refuse = (code: keyof typeof WIN_ERRORS, syscall: string, what: string) => {
    refused.push(`${syscall} ${what}`);
    return winError(code, syscall, what);
  };
  const platform = windowsPlatform({
    ...real,
    fs: {
      openSync(p, flags) {
        if (isRunning(p) && flags !== 'r' && fs.existsSync(p)) throw refuse('EBUSY', 'open', `'${p}' (a running executable, opened '${flags}')`);
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
        if (isRunning(to) && fs.existsSync(to)) throw refuse('EPERM', 'rename', `'${from}' -> '${to}' (target is a running executable)`);
        fs.renameSync(from, to);
        for (const i of images) if (i.path === path.resolve(from)) i.path = path.resolve(to); // a running image may move
      },
      unlinkSync(p) {
        if (isOpen(p) && fs.existsSync(p)) throw refuse('EPERM', 'unlink', `'${p}' (open)`);
        if (isRunning(p) && fs.existsSync(p)) throw refuse('EPERM', 'unlink', `'${p}' (a running executable)`);
        fs.unlinkSync(p);
      },
      readdirSync: (d) => fs.readdirSync(d),
      mkdirSync: (d, o) => fs.mkdirSync(d, o),
      existsSync: (p) => fs.existsSync(p),
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
    networking: async (dlls) => {
      networkingLoads.push(dlls);
      if (opts.networking) return opts.networking(dlls);
      throw new Error('the Windows double has no HCN or IP Helper (pass WindowsDoubleOptions.networking)');
    },
  });
  const pipeDir = opts.pipeDir;
  // A pipe name becomes a socket file in pipeDir, for the server's bind and for clients alike.
  const inPipeDir = (p: string) => path.join(pipeDir!, socketEndpoint(p, 'win32').replace(/^\\\\\.\\pipe\\/, ''));
  // The pipe's key file (src/ipc/proof.ts) lives beside the pipes, in a folder the daemon makes admin-only.
  // Without a pipe dir, in a temporary folder of its own (never C:\ProgramData\... made relative to the cwd).
  let keyDir = pipeDir;
  const ipcKeyFile = (p: string) => path.join((keyDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'bs-double-keys-'))), 'pipe-keys', pipeKeyName(p));
  const withPipes: Platform = pipeDir ? { ...platform, ipcListenPath: inPipeDir, ipcKeyFile } : { ...platform, ipcKeyFile };
  const execute = (file: string) => {
    if (!fs.existsSync(file)) throw Object.assign(new Error(`ENOENT: no such file, execute '${file}'`), { code: 'ENOENT' });
    const image = { path: path.resolve(file) };
    images.add(image);
    return { path: () => image.path, exit: () => void images.delete(image) };
  };
  return { platform: withPipes, spawned, refused, pipeDacls, createdDirs, dirSecurity, win32: keepAsWine, networkingLoads, execute, openPaths: () => [...open.values()].map((o) => o.path) };
}
