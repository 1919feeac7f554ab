// The Platform: every Linux/Windows difference the program has, behind one interface. A default is picked once
// from the real OS (hostPlatform()); components take a Platform option so tests can hand in a Windows double
// (test/platform/windows-double.ts) whose file operations follow Windows rules while running on Linux.
//
// Windows facts this encodes (and the double enforces):
//   - a file cannot be renamed over, or removed, while any handle to it is open (EPERM/EBUSY);
//   - LockFileEx needs a handle with GENERIC_READ or GENERIC_WRITE: an append-only ('a') handle gets EACCES;
//   - a directory cannot be opened to fsync it;
//   - there is no SIGTERM; Ctrl+C is SIGINT, Ctrl+Break is SIGBREAK, closing the console is SIGHUP.
import { spawn as nodeSpawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { fileLocks, type LockOps } from './file-lock.ts';

export type { LockOps } from './file-lock.ts';
import { secureStateDir, type DirOptions, type DirReport } from './dir-acl.ts';
import { checkFileAcl } from './file-acl.ts';
import { checkPosixFile, securePosixDir } from './posix-access.ts';
import { restrictPipe, type Win32SecurityApi } from './pipe-acl.ts';
import type { WindowsNetworkingApis } from './windows-net-api.ts';
import { defaultPaths, HOST_PLATFORM, ipcKeyFile, socketEndpoint, type DefaultPaths, type PlatformId } from './paths.ts';

export type { PlatformId, DefaultPaths } from './paths.ts';
export type { DirOptions, DirReport } from './dir-acl.ts';
export { DirAclError } from './dir-acl.ts';

/** What a stop/reload control means to the daemon. */
export type ControlAction = 'restart' | 'withdraw' | 'reload';

/** The file operations whose rules differ between the OSes (reads and writes through an fd do not). */
export interface PlatformFiles {
  /** Open mode for a lock file: creates it, and gives a handle the OS lock call accepts (read access). */
  readonly lockFlags: string;
  /**
   * Open (flags as node:fs). `mode`: the permission bits a file this call creates gets from open(2) itself (POSIX;
   * the umask may only narrow them; default 0666): private files (the store's, the run dir's) pass 0600 here rather
   * than chmod after creating, which would leave them readable for a moment. Windows: ignored (the folder's ACL).
   */
  open(path: string, flags: string, mode?: number): number;
  close(fd: number): void;
  /** Rename. On Windows it fails (EPERM) when `to` exists and is open anywhere: callers rename only onto new names. */
  rename(from: string, to: string): void;
  /** Remove a file (absent is fine). On Windows an open file cannot be removed: that throws EPERM/EBUSY. */
  remove(path: string): void;
  list(dir: string): string[];
  /** Make the directory (and parents); the first directory it created (secure that one), undefined if none. */
  mkdirp(dir: string): string | undefined;
  /** Make a directory entry change durable (Linux fsync of the directory; Windows: the journal does, a no-op). */
  syncDir(dir: string): void;
  tryLock(fd: number): boolean;
  waitForLock(fd: number): Promise<void>;
  unlock(fd: number): void;
}

export interface SpawnResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export type Spawner = (cmd: string, args: string[]) => Promise<SpawnResult>;

/** What an access-control step did, in words that say what is actually enforced. */
export interface AccessReport {
  enforced: boolean;
  what: string;
}

export interface Platform {
  readonly id: PlatformId;
  /** The config's node.os for this machine. */
  readonly nodeOs: 'linux' | 'windows';
  readonly paths: DefaultPaths;
  readonly files: PlatformFiles;
  readonly env: Record<string, string | undefined>;
  hostname(): string;
  /** The node name when the config has none: NODENAME, else NODE_NAME, else the lower-cased host name. */
  defaultNodeName(): string;
  /** Identifies this boot of the machine; a run marker from another boot is stale. */
  bootId(): string;
  sameBoot(a: string, b: string): boolean;
  processAlive(pid: number): boolean;
  /** The signals to listen to and what each means. */
  readonly controls: ReadonlyArray<{ signal: NodeJS.Signals; action: ControlAction }>;
  socketEndpoint(path: string): string;
  /** Where the control server binds and tests' clients connect: the endpoint itself (the Windows double maps a pipe name onto a socket file here). */
  ipcListenPath(path: string): string;
  /**
   * Windows: the key file the daemon proves itself with on this control path (src/ipc/proof.ts), which the daemon
   * writes at start and clients read. Linux: undefined (no proof; the socket lives in root's /run).
   */
  ipcKeyFile(path: string): string | undefined;
  /** What protects the control endpoint once listening (said in logs and client errors). */
  readonly ipcAccess: string;
  /**
   * Restrict the control endpoint just listened on, and say what it enforces (Windows: the pipe's DACL, set and read
   * back). Throws when it cannot: a daemon must not listen wider than it says.
   */
  secureIpc(endpoint: string): Promise<AccessReport>;
  /**
   * Make a state directory and its missing parents (`create`, the default), or only check an existing one (the
   * config file's folder), by the one access rule: others (anyone but SYSTEM, Administrators and this account;
   * Linux: root and this uid) may never change it, nor read it unless `othersMayRead` (default: true for a folder
   * only checked, false for one made: the store). Throws DirAclError naming the path, the entries or mode bits and the
   * fix. Windows: each directory made is created admin-only in one call (./dir-acl.ts); only the directory itself is
   * read. Linux: each missing one is made 0755, the last 0700 unless others may read it; the directory and every
   * folder above it are checked (./posix-access.ts).
   */
  prepareDir(dir: string, opts?: DirOptions): Promise<DirReport | undefined>;
  /**
   * Check a file the daemon starts from (its config, the secret files the config names: `secret` is that field) and
   * its folders: others may change none of them, nor read a secret. Windows: the file's and its folder's owner and
   * DACL (./file-acl.ts); Linux: the file's mode and owner, and every folder above it (./posix-access.ts). Throws
   * DirAclError.
   */
  checkFile(file: string, opts?: { secret?: string }): Promise<DirReport | undefined>;
  /** Replace `target` by `tmp` (closed files only). Windows retries briefly: scanners hold files open for a moment. */
  replaceFile(tmp: string, target: string): void;
  /**
   * Windows: the owner and DACL (SDDL) of an existing file or directory, and this process's account, read with the
   * Win32 calls; rejects when they cannot be read (koffi missing, no such path). Linux: rejects (POSIX modes: stat).
   */
  readSecurity(file: string): Promise<{ sddl: string; self?: string }>;
  spawn: Spawner;
  /**
   * The Windows dataplane's native APIs (HCN, HNSCall, IP Helper), loaded on first use from System32 by full path
   * (networkingDlls()). Linux: rejects, the HNS dataplane needs Windows.
   */
  networking(): Promise<WindowsNetworkingApis>;
}

/** The node:fs subset the platforms are built on; the Windows double wraps it with Windows rules. */
export interface FsOps {
  openSync(path: string, flags: string, mode?: number): number;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  unlinkSync(path: string): void;
  readdirSync(dir: string): string[];
  mkdirSync(dir: string, opts: { recursive: true }): string | undefined;
  existsSync(path: string): boolean;
  fsyncSync(fd: number): void;
}

export interface PlatformDeps {
  fs: FsOps;
  lock: LockOps;
  env: Record<string, string | undefined>;
  hostname: () => string;
  /** Seconds since boot (os.uptime()). */
  uptime: () => number;
  now: () => number;
  /** Linux: /proc/sys/kernel/random/boot_id, or undefined when unreadable. */
  readBootId: () => string | undefined;
  processAlive: (pid: number) => boolean;
  spawn: Spawner;
  sleepMs: (ms: number) => void;
  /** The Win32 security calls for the pipe's DACL (koffi), loaded on first use: only a Windows daemon needs them. */
  win32Security: () => Promise<Win32SecurityApi>;
  /** The HNS dataplane's native APIs (koffi) from these DLLs, loaded on first use: only a Windows daemon needs them. */
  networking: (dlls: NetworkingDlls) => Promise<WindowsNetworkingApis>;
}

/** Full paths of the DLLs behind WindowsNetworkingApis. */
export interface NetworkingDlls {
  computenetwork: string;
  vmcompute: string;
  iphlpapi: string;
  /** CoTaskMemFree, for the strings HCN and HNSCall hand back. */
  ole32: string;
}

/** %SystemRoot%\\System32 (default C:\\Windows): where every system DLL we load comes from, by full path. */
export function system32Dir(env: Record<string, string | undefined>): string {
  const root = (env.SystemRoot ?? env.SYSTEMROOT ?? env.systemroot)?.trim() || 'C:\\Windows';
  return `${root.replace(/[\\/]+$/, '')}\\System32`;
}

/** The test-only variable naming a stand-in for iphlpapi.dll (a file name in System32). */
export const IPHLPAPI_ENV = 'BLOCKSPEAKER_IPHLPAPI';

/**
 * Where the networking DLLs are: %SystemRoot%\System32 (default C:\Windows), by full path so that a DLL beside
 * the executable or in the working directory is never picked up. BLOCKSPEAKER_IPHLPAPI may name another DLL in
 * System32 to stand in for iphlpapi.dll (wine's IP Helper aborts the process on the route calls, and node.exe
 * imports iphlpapi itself, so a stand-in needs its own name); a path there is refused.
 */
export function networkingDlls(env: Record<string, string | undefined>): NetworkingDlls {
  const system32 = system32Dir(env);
  const standIn = env[IPHLPAPI_ENV]?.trim();
  if (standIn !== undefined && standIn !== '' && (/[\\/:]/.test(standIn) || standIn === '.' || standIn === '..')) {
    throw new Error(`${IPHLPAPI_ENV} must be a DLL file name in ${system32}, not a path: ${JSON.stringify(standIn)}`);
  }
  const at = (name: string) => `${system32}\\${name}`;
  return {
    computenetwork: at('computenetwork.dll'),
    vmcompute: at('vmcompute.dll'),
    iphlpapi: at(standIn || 'iphlpapi.dll'),
    ole32: at('ole32.dll'),
  };
}

/** The koffi bindings, imported only here and only when asked for (never by the CNI plugin bundle or on Linux). */
async function loadNetworking(dlls: NetworkingDlls): Promise<WindowsNetworkingApis> {
  const [{ hcnBindings }, { ipHelperBindings }] = await Promise.all([import('./hcn-koffi.ts'), import('./iphlpapi-koffi.ts')]);
  const [{ hcn, hns }, ipHelper] = await Promise.all([hcnBindings(dlls), ipHelperBindings(dlls.iphlpapi)]);
  return { hcn, hns, ipHelper };
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function realProcessAlive(pid: number): boolean {
  try {
    return process.kill(pid, 0);
  } catch (e) {
    return errCode(e) === 'EPERM'; // exists, owned by someone else
  }
}

function realSpawn(cmd: string, args: string[]): Promise<SpawnResult> {
  return new Promise((resolve) => {
    const child = nodeSpawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    let stdout = '';
    let stderr = '';
    // setEncoding: a multi-byte character split across chunks is decoded whole.
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', (e) => resolve({ code: null, stdout, stderr: stderr + e.message }));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function readLinuxBootId(): string | undefined {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    try {
      const m = /^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'));
      return m ? `btime:${m[1]}` : undefined;
    } catch {
      return undefined;
    }
  }
}

export function realDeps(): PlatformDeps {
  const sab = new Int32Array(new SharedArrayBuffer(4));
  return {
    fs: {
      openSync: (p, f, m) => fs.openSync(p, f, m),
      closeSync: (fd) => fs.closeSync(fd),
      renameSync: (a, b) => fs.renameSync(a, b),
      unlinkSync: (p) => fs.unlinkSync(p),
      readdirSync: (d) => fs.readdirSync(d),
      mkdirSync: (d, o) => fs.mkdirSync(d, o),
      existsSync: (p) => fs.existsSync(p),
      fsyncSync: (fd) => fs.fsyncSync(fd),
    },
    lock: { tryLock: (fd) => fileLocks().tryLock(fd), waitForLock: (fd) => fileLocks().waitForLock(fd), unlock: (fd) => fileLocks().unlock(fd) },
    env: process.env,
    hostname: () => os.hostname(),
    uptime: () => os.uptime(),
    now: () => Date.now(),
    readBootId: readLinuxBootId,
    processAlive: realProcessAlive,
    spawn: realSpawn,
    sleepMs: (ms) => void Atomics.wait(sab, 0, 0, ms),
    win32Security: async () => (await import('./win32-security.ts')).win32Security(),
    networking: loadNetworking,
  };
}

function files(d: PlatformDeps, windows: boolean): PlatformFiles {
  return {
    // 'a+' (read + append, created when missing) on both: an 'a' handle has append access only, which LockFileEx
    // refuses with EACCES; flock/OFD locks accept any fd.
    lockFlags: 'a+',
    open: (p, f, m) => d.fs.openSync(p, f, m),
    close: (fd) => d.fs.closeSync(fd),
    rename: (a, b) => d.fs.renameSync(a, b),
    remove(p) {
      try {
        d.fs.unlinkSync(p);
      } catch (e) {
        if (errCode(e) !== 'ENOENT') throw e;
      }
    },
    list: (dir) => d.fs.readdirSync(dir),
    mkdirp(dir) {
      const made = d.fs.mkdirSync(dir, { recursive: true });
      // Node on Windows answers with the long-path form (\\?\C:\x); messages and icacls get the usual one.
      return windows && made ? made.replace(/^\\\\\?\\UNC\\/, '\\\\').replace(/^\\\\\?\\/, '') : made;
    },
    syncDir(dir) {
      if (windows) return; // no directory handles for fsync; NTFS journals the rename itself
      const fd = d.fs.openSync(dir, 'r');
      try {
        d.fs.fsyncSync(fd);
      } finally {
        d.fs.closeSync(fd);
      }
    },
    tryLock: (fd) => d.lock.tryLock(fd),
    waitForLock: (fd) => d.lock.waitForLock(fd),
    unlock: (fd) => d.lock.unlock(fd),
  };
}

function nodeName(d: PlatformDeps): string {
  const fromEnv = d.env.NODENAME?.trim() || d.env.NODE_NAME?.trim();
  // Kubernetes and Calico name a node by its lower-cased host name; Windows host names are upper case.
  return fromEnv || d.hostname().toLowerCase();
}

export function linuxPlatform(d: PlatformDeps = realDeps()): Platform {
  return {
    id: 'linux',
    nodeOs: 'linux',
    paths: defaultPaths('linux'),
    files: files(d, false),
    ...common(d, 'linux'),
    bootId: () => {
      const id = d.readBootId();
      // Without /proc: boot time from the uptime, as on Windows.
      return id ?? `boot@${Math.round((d.now() / 1000 - d.uptime()))}`;
    },
    controls: [
      { signal: 'SIGTERM', action: 'restart' },
      { signal: 'SIGINT', action: 'withdraw' },
      { signal: 'SIGHUP', action: 'reload' },
    ],
    // The control socket is 0600 owned by the daemon's uid, not 0660 with a group: connect(2) needs write permission
    // on a socket file, so its mode decides who may talk to the daemon, and all who must (the CLI run as root, the
    // CNI plugin the container runtime runs as root) are root, whom no mode bit stops (CAP_DAC_OVERRIDE). A group
    // would be one more membership to trust. src/ipc/server.ts binds it under umask 0177 (0600 from its first
    // instant) and chmods it 0600 again after listen; its folder is root's /run by default.
    ipcAccess: 'Unix socket mode 0600 (the daemon\'s user only, usually root)',
    secureIpc: async () => ({ enforced: true, what: 'Unix socket mode 0600 (the daemon\'s user only, usually root)' }),
    prepareDir: async (dir, opts) => securePosixDir(dir, opts),
    checkFile: async (file, opts) => checkPosixFile(file, opts),
    replaceFile: (tmp, target) => d.fs.renameSync(tmp, target),
    readSecurity: async () => {
      throw new Error('no Windows security descriptors on Linux (POSIX permissions: stat the path)');
    },
    networking: async () => {
      throw new Error('the HNS dataplane needs Windows: HCN, HNS and IP Helper exist only there (on Linux, routes go through the kernel\'s own table)');
    },
  };
}

/** SIDs, not names: names are localised ("Administratoren"), SIDs are not. */
export const SID_SYSTEM = 'S-1-5-18';
export const SID_ADMINISTRATORS = 'S-1-5-32-544';

/** icacls arguments that leave only SYSTEM and Administrators (full control, inherited by everything below). */
export function icaclsArgs(dir: string): string[] {
  return [dir, '/inheritance:r', '/grant:r', `*${SID_SYSTEM}:(OI)(CI)F`, `*${SID_ADMINISTRATORS}:(OI)(CI)F`];
}

/** Boot identities made from a boot time ("boot@SECONDS") match within a minute: uptime and clock drift apart. */
function sameBootTime(a: string, b: string): boolean | undefined {
  const ma = /^boot@(\d+)$/.exec(a);
  const mb = /^boot@(\d+)$/.exec(b);
  if (!ma || !mb) return undefined;
  return Math.abs(Number(ma[1]) - Number(mb[1])) <= 60;
}

const BUSY = new Set(['EPERM', 'EBUSY', 'EACCES']);

export function windowsPlatform(d: PlatformDeps = realDeps()): Platform {
  return {
    id: 'win32',
    nodeOs: 'windows',
    paths: defaultPaths('win32'),
    files: files(d, true),
    ...common(d, 'win32'),
    bootId: () => `boot@${Math.round(d.now() / 1000 - d.uptime())}`,
    // No SIGTERM on Windows. Ctrl+C, Ctrl+Break (what service wrappers send) and the console closing all mean
    // "this process is going down for now": a graceful-restart stop, so peers keep our routes (RFC 4724).
    // Withdrawing (the node going away) is `blockspeaker daemon stop --withdraw` over the control pipe.
    controls: [
      { signal: 'SIGINT', action: 'restart' },
      { signal: 'SIGBREAK', action: 'restart' },
      { signal: 'SIGHUP', action: 'restart' },
    ],
    // libuv creates the pipe with FILE_FLAG_FIRST_PIPE_INSTANCE (a name another process owns fails with
    // EADDRINUSE) and the default DACL; secureIpc then replaces that DACL with SYSTEM and Administrators only
    // (./pipe-acl.ts) before the daemon says it listens, and refuses to start when it cannot.
    ipcAccess: 'named pipe with the DACL D:P(A;;GA;;;SY)(A;;GA;;;BA): SYSTEM and Administrators only; first instance only',
    async secureIpc(endpoint) {
      let api: Win32SecurityApi;
      try {
        api = await d.win32Security();
      } catch (e) {
        throw new Error(`cannot restrict the control pipe ${endpoint} to SYSTEM and Administrators: the Win32 security calls (koffi) do not load: ${(e as Error)?.message ?? String(e)}; refusing to start`);
      }
      const r = restrictPipe(endpoint, api);
      return { enforced: r.enforced, what: r.what };
    },
    prepareDir(dir, opts) {
      const fsx = files(d, true);
      return secureStateDir(dir, {
        exists: (p) => d.fs.existsSync(p),
        win32: d.win32Security,
        mkdirp: (p) => fsx.mkdirp(p),
        async icacls(created) {
          const r = await d.spawn('icacls', icaclsArgs(created));
          return r.code === 0 ? undefined : (r.stderr || r.stdout).trim().split(/\r?\n/)[0] || `exit code ${r.code}`;
        },
      }, opts);
    },
    checkFile: (file, opts) => checkFileAcl(file, d.win32Security, opts),
    replaceFile(tmp, target) {
      for (let i = 0; ; i++) {
        try {
          d.fs.renameSync(tmp, target);
          return;
        } catch (e) {
          if (!BUSY.has(errCode(e) ?? '') || i >= 20) throw e;
          d.sleepMs(25);
        }
      }
    },
    async readSecurity(file) {
      const api = await d.win32Security();
      return { sddl: api.readDirSecurity(file), self: api.userSid() };
    },
    async networking() {
      const dlls = networkingDlls(d.env);
      try {
        return await d.networking(dlls);
      } catch (e) {
        throw new Error(`cannot load the Windows networking APIs (${dlls.computenetwork}, ${dlls.vmcompute}, ${dlls.iphlpapi}): ${(e as Error)?.message ?? String(e)}`);
      }
    },
  };
}

/** What both platforms take straight from their deps. */
function common(d: PlatformDeps, id: PlatformId) {
  return {
    env: d.env,
    hostname: d.hostname,
    defaultNodeName: () => nodeName(d),
    sameBoot: (a: string, b: string) => sameBootTime(a, b) ?? a === b,
    processAlive: d.processAlive,
    socketEndpoint: (p: string) => socketEndpoint(p, id),
    ipcListenPath: (p: string) => socketEndpoint(p, id),
    ipcKeyFile: (p: string) => ipcKeyFile(p, id),
    spawn: d.spawn,
  };
}

let host: Platform | undefined;

/** The platform of this process, made once. */
export function hostPlatform(): Platform {
  return (host ??= HOST_PLATFORM === 'win32' ? windowsPlatform() : linuxPlatform());
}

/** A short, stable, file-name-safe key for a path or URL (the run marker is keyed by the store it guards). */
export function pathKey(p: string): string {
  return createHash('sha256').update(p).digest('hex').slice(0, 16);
}
