// Shared set-up of the tests that run the Windows executables under wine: wine present (a failure under
// REQUIRE_PEERS=1, else a skip), the prefix made, dist/windows built once even when several test files ask at once.
import type { Test } from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureWinePrefix, projectRoot, wineBinary, windowsDist, type WineChild } from '../../packaging/windows/wine.ts';
import { requirePeers } from '../kit/etcd-cluster.ts';

export const exe = {
  cli: path.join(windowsDist, 'blockspeaker.exe'),
  cni: path.join(windowsDist, 'blockspeaker-cni.exe'),
};

function built(): boolean {
  return fs.existsSync(exe.cli) && fs.existsSync(exe.cni) && fs.existsSync(path.join(windowsDist, 'fs-native-extensions.node'))
    && fs.existsSync(path.join(windowsDist, 'koffi.node')) && fs.existsSync(path.join(windowsDist, 'proto', 'rpc.proto'));
}

/** True when the Windows executables can run here; otherwise the test is failed (CI) or skipped, saying why. */
export function windowsReady(t: Test): boolean {
  if (process.platform !== 'linux' || !wineBinary()) {
    const why = 'wine is not installed (Debian: apt-get install wine64 wine)';
    if (requirePeers()) t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
    else t.comment(`skipping: ${why} (set REQUIRE_PEERS=1 to make this a failure)`);
    return false;
  }
  ensureWinePrefix();
  if (built()) return true;
  const lock = path.join(projectRoot, 'var', 'package-windows.lock');
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      execFileSync('sleep', ['2']);
      if (built()) return true;
    }
  }
  try {
    if (!built()) {
      const env = { ...process.env };
      delete env.NODE_OPTIONS;
      execFileSync(process.execPath, ['--import', 'tsx', path.join(projectRoot, 'packaging/windows/build.ts')], {
        cwd: projectRoot,
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 900_000,
      });
    }
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
  return true;
}

/** The daemon's JSON log lines from its stderr (a line that is not JSON is kept as {msg: line}). */
export function parseLog(stderr: string): Record<string, unknown>[] {
  return stderr.split('\n').filter(Boolean).map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return { msg: l };
    }
  });
}

/**
 * `until`, for as long as daemon `d` runs: a daemon that exited is not waited for (`f` gets one last look at what
 * it printed), and the error says how it ended and what its stderr ends with.
 */
export async function untilDaemon<T>(what: string, ms: number, d: WineChild, f: () => T | undefined | false): Promise<T> {
  let code: number | null | undefined;
  void d.exited.then((c) => {
    code = c;
  }, () => {
    code = null;
  });
  const ended = () => {
    const out = d.output();
    return `its stderr ends: ${out.stderr.slice(-1500) || '(nothing)'}${out.stdout ? `; stdout: ${out.stdout.slice(-500)}` : ''}`;
  };
  return until(what, ms, f, { stopped: () => (code === undefined ? null : `the daemon exited (${code})`), context: ended });
}

/**
 * Polls `f` every half second until it returns something truthy (returned), or throws after `ms`, or once
 * `stopped()` says why waiting is pointless (after one last call of `f`); `context()` is added to the error.
 */
export async function until<T>(what: string, ms: number, f: () => T | undefined | false,
  o: { stopped?: () => string | null; context?: () => string } = {}): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    const stop = o.stopped?.() ?? null;
    if (stop !== null) {
      const last = f();
      if (last) return last;
    }
    if (stop !== null || Date.now() > end) {
      const why = [stop ?? (o.context ? `still waiting after ${ms} ms` : null), o.context?.() ?? null].filter((x) => x !== null);
      throw new Error(`gave up waiting for ${what}${why.length > 0 ? `: ${why.join('; ')}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
