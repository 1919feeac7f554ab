// What the daemon benches (bgp-ingest, bgp-peers, bgp-idle-sessions, bgp-reflector) share: clocks and rounding for
// their report lines, the prerequisite check that fails (never skips) when a tool is missing, and temp dirs named like
// the interop kit's, so its leftover sweep also removes ours after a crash.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanupAll } from '../../test/kit/interop/netns.ts';
import type { PeerKind } from '../../test/kit/interop/peer-types.ts';
import { missingPrereqs } from '../../test/kit/interop/prereqs.ts';

export const log = (s: string): void => console.log(s);
export const sleep = (ms: number): Promise<void> => new Promise<void>((r) => setTimeout(r, ms));
/** Wall clock, ms. */
export const now = (): number => performance.timeOrigin + performance.now();
/** Wall clock minus CLOCK_MONOTONIC (ms): maps our times onto a V8 profile's timestamps. */
export const monoOffset = now() - Number(process.hrtime.bigint()) / 1e6;
export const r0 = (n: number): number => Math.round(n);
export const r1 = (n: number): number => Math.round(n * 10) / 10;
export const r2 = (n: number): number => Math.round(n * 100) / 100;
export const fmtS = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

/** Exit 2 naming what is missing (peer daemons of `kinds`, and `tools` by path): a bench never skips silently. */
export function requirePrereqs(bench: string, kinds: PeerKind[], tools: string[]): void {
  const missing = missingPrereqs(kinds);
  for (const tool of tools) if (!existsSync(tool)) missing.push(`${tool} not found`);
  if (missing.length) {
    console.error(`${bench} cannot run: ${missing.join('; ')}`);
    process.exit(2);
  }
}

/** Temp dirs `bs-interop-<pid>-<name>-*`: made on demand, removed by remove() and at exit, unless `keep`. */
export function tempDirs(keep: boolean): { make(name: string): string; made(): readonly string[]; remove(): void } {
  const dirs: string[] = [];
  const remove = (): void => {
    if (!keep) for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  };
  process.on('exit', remove);
  return {
    make(name) {
      const d = mkdtempSync(join(tmpdir(), `bs-interop-${process.pid}-${name}-`));
      dirs.push(d);
      return d;
    },
    made: () => dirs,
    remove,
  };
}

/**
 * The end of a daemon bench: every namespace and daemon removed (the harness's cleanupAll), the temp dirs removed
 * or named when kept, the totals added, the final JSON line printed; exits 1 when `error` is set.
 */
export async function finish(bench: string, json: Record<string, unknown>, started: number, error: unknown, temps: ReturnType<typeof tempDirs>, keep: boolean): Promise<never> {
  if (error !== null) {
    console.error(`${bench} failed: ${(error as Error)?.stack ?? error}`);
    json.error = (error as Error)?.message ?? String(error);
  }
  await cleanupAll();
  if (keep) log(`kept: ${temps.made().join(' ')}`);
  temps.remove();
  json.totalS = r1((now() - started) / 1000);
  json.loadEnd = loadavg().map(r1);
  log(`total ${fmtS(now() - started)}`);
  console.log(JSON.stringify(json));
  process.exit(error !== null ? 1 : 0);
}

/**
 * Have a daemon started with --heapsnapshot-signal=SIGUSR2 --diagnostic-dir DIR write a V8 heap snapshot, and wait
 * until the newest file there stops growing (node numbers them: Heap.DATE.TIME.PID.0.SEQ.heapsnapshot). Its path,
 * or null after 10 minutes.
 */
export async function heapSnapshotOf(child: ChildProcess, dir: string): Promise<string | null> {
  child.kill('SIGUSR2');
  let last = -1;
  for (let i = 0; i < 1200; i++) {
    await sleep(500);
    const f = readdirSync(dir).filter((x) => x.endsWith('.heapsnapshot')).sort().at(-1);
    const size = f ? statSync(join(dir, f)).size : -1;
    if (size > 0 && size === last) return join(dir, f!);
    last = size;
  }
  return null;
}
