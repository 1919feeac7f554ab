// Builds the test-only stand-ins for the Windows networking DLLs with mingw-w64 and installs them into the wine
// prefix's System32, where the product loads them by full path. Builds are skipped while the outputs are newer than
// the C sources; parallel test files share one build through a directory lock.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureWinePrefix, projectRoot, wineBinary, wineEnv, winePrefix } from '../../../packaging/windows/wine.ts';

export const MINGW_GCC = 'x86_64-w64-mingw32-gcc';
export const standinDir = path.join(projectRoot, 'var', 'standin');
const srcDir = path.dirname(fileURLToPath(import.meta.url));

interface Target {
  out: string;
  sources: string[];
  dll: boolean;
}

const COMMON = ['common.c', 'common.h'];
const DLLS: Target[] = [
  { out: 'computenetwork.dll', sources: ['hcn.c', ...COMMON], dll: true },
  { out: 'vmcompute.dll', sources: ['vmcompute.c', ...COMMON], dll: true },
  { out: 'bs-iphlpapi.dll', sources: ['iphlpapi.c', ...COMMON], dll: true },
];
const PROBE: Target = { out: 'probe.exe', sources: ['probe.c', ...COMMON], dll: false };

/** Why the stand-ins cannot be built or run here (no wine, no mingw), or undefined. */
export function standinMissing(): string | undefined {
  if (process.platform !== 'linux' || !wineBinary()) return 'wine is not installed (Debian: apt-get install wine64 wine)';
  try {
    execFileSync(MINGW_GCC, ['--version'], { stdio: 'ignore' });
  } catch {
    return `${MINGW_GCC} is not installed (Debian: apt-get install gcc-mingw-w64-x86-64)`;
  }
  return undefined;
}

/**
 * True when the stand-ins can run here; otherwise the test is failed (REQUIRE_PEERS=1, as in CI) or skipped, saying
 * why.
 */
export function standinReady(t: { fail(m: string): unknown; comment(m: string): unknown }): boolean {
  const why = standinMissing();
  if (!why) return true;
  if (process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true') t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else t.comment(`skipping: ${why} (set REQUIRE_PEERS=1 to make this a failure)`);
  return false;
}

const sleepMs = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function upToDate(t: Target): boolean {
  const out = path.join(standinDir, t.out);
  if (!fs.existsSync(out)) return false;
  const built = fs.statSync(out).mtimeMs;
  return t.sources.every((s) => fs.statSync(path.join(srcDir, s)).mtimeMs <= built);
}

function compile(t: Target): void {
  const out = path.join(standinDir, t.out);
  // Built under a temporary name and renamed, so a reader never sees half a file.
  const tmp = `${out}.${process.pid}.tmp`;
  const args = [
    ...(t.dll ? ['-shared'] : []),
    '-O2', '-Wall', '-o', tmp,
    ...t.sources.filter((s) => s.endsWith('.c')).map((s) => path.join(srcDir, s)),
    ...(t.dll ? ['-Wl,--kill-at'] : []),
    '-static-libgcc', '-lole32', '-lws2_32',
  ];
  try {
    execFileSync(MINGW_GCC, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    fs.renameSync(tmp, out);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(`building ${t.out} failed: ${err.stderr?.toString() || err.message}`);
  }
}

function buildAll(targets: Target[]): void {
  if (targets.every(upToDate)) return;
  fs.mkdirSync(standinDir, { recursive: true });
  const lock = `${standinDir}.lock`;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      // A lock older than 5 minutes belongs to a run that died.
      try {
        if (Date.now() - fs.statSync(lock).mtimeMs > 300_000) fs.rmSync(lock, { recursive: true, force: true });
      } catch {
        /* released meanwhile */
      }
      sleepMs(500);
    }
  }
  try {
    for (const t of targets) if (!upToDate(t)) compile(t);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/** Compiles computenetwork.dll, vmcompute.dll and bs-iphlpapi.dll into var/standin; their paths. */
export function buildStandins(): string[] {
  buildAll(DLLS);
  return DLLS.map((t) => path.join(standinDir, t.out));
}

/** The test client (probe.exe) that calls every export; its path. */
export function buildProbe(): string {
  buildAll([PROBE]);
  return path.join(standinDir, PROBE.out);
}

/** The wine prefix's System32 (64-bit DLLs). */
export function system32(): string {
  return path.join(winePrefix(), 'drive_c', 'windows', 'system32');
}

/**
 * Builds the stand-ins and copies them into the prefix's System32 (made first if needed); their installed paths.
 * A file that is already the same is left alone, and a changed one is replaced by rename, so a wine process that
 * has the old one loaded keeps running.
 */
export function installStandins(): string[] {
  const built = buildStandins();
  ensureWinePrefix();
  const dir = system32();
  return built.map((src) => {
    const dst = path.join(dir, path.basename(src));
    const data = fs.readFileSync(src);
    if (!fs.existsSync(dst) || !fs.readFileSync(dst).equals(data)) {
      const tmp = `${dst}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, data);
      fs.renameSync(tmp, dst);
    }
    return dst;
  });
}

/** The stand-in DLLs as wine load-order overrides: native, i.e. ours from System32. */
export const STANDIN_OVERRIDES = 'computenetwork,vmcompute,bs-iphlpapi=n';

/**
 * The environment a wine process needs to use the stand-ins against the server on `port` (pass it as runWine's or
 * startWine's `env`; wineEnv's own overrides are kept).
 */
export function standinEnv(port: number): Record<string, string> {
  const base = wineEnv().WINEDLLOVERRIDES ?? '';
  return {
    BS_STANDIN_PORT: String(port),
    BLOCKSPEAKER_IPHLPAPI: 'bs-iphlpapi.dll',
    WINEDLLOVERRIDES: [base, STANDIN_OVERRIDES].filter(Boolean).join(';'),
  };
}
