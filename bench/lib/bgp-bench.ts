// What the BGP ingest benches (bench/bgp-ingest.ts, bench/bgp-peers.ts, bench/bgp-idle-sessions.ts) share around
// their receivers: the flags that say how our daemon is started and how long to wait, the start of a run (receivers,
// prerequisites, temp dirs, dist/ built), one link per receiver, the head of the final JSON line, waiting until a
// receiver holds every prefix, and printing a CPU profile.
import { execFile } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createLink, type Link } from '../../test/kit/interop/netns.ts';
import { launcher } from '../../test/kit/launcher.ts';
import type { DaemonFlags, Kind, Receiver } from './bgp-receivers.ts';
import type { ProfileSummary } from './cpuprofile.ts';
import { fmtS, log, now, r0, r1, requirePrereqs, sleep, tempDirs } from './daemon-bench.ts';

const execFileP = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The flags every BGP ingest bench takes (spread into its parseArgs options):
 *   [--receivers blockspeaker,bird,gobgp] [--cpu-prof] [--heap-snapshot] [--node-flags '...'] [--from-source]
 *   [--poll-ms MS] [--timeout S] [--keep] [--node-args "FLAGS"] (the same as --node-flags: node flags for the
 *   blockspeaker receiver) [--no-build] (dist/ is already built from these sources: skip `npm run build`)
 *   [--mem-sample] (the daemon's memory at its RSS peak, bench/lib/mem-sampler.cjs; use --keep)
 *   [--no-launcher] (without the node flags and environment of bin/blockspeaker.js's #! line)
 *   [--log-level L] (our daemon's; default debug: its "End-of-RIB" lines give the exact end)
 */
export const bgpBenchOptions = {
  receivers: { type: 'string', default: 'blockspeaker,bird,gobgp' },
  'cpu-prof': { type: 'boolean', default: false },
  'heap-snapshot': { type: 'boolean', default: false },
  'node-flags': { type: 'string', default: '' },
  'from-source': { type: 'boolean', default: false },
  'poll-ms': { type: 'string', default: '100' },
  timeout: { type: 'string', default: '240' },
  keep: { type: 'boolean', default: false },
  'node-args': { type: 'string', default: '' }, // extra node flags for blockspeaker, e.g. --max-semi-space-size=1
  'no-build': { type: 'boolean', default: false },
  'mem-sample': { type: 'boolean', default: false },
  'log-level': { type: 'string', default: 'debug' },
  'no-launcher': { type: 'boolean', default: false },
} as const;

/** The values of bgpBenchOptions as parseArgs gives them. */
export interface BgpBenchValues extends DaemonFlags {
  receivers?: string;
  'poll-ms'?: string;
  timeout?: string;
  keep?: boolean;
  'no-build'?: boolean;
}

/** How often and how long waitHeld polls a receiver (--poll-ms, --timeout). */
export interface Polling {
  pollMs: number;
  timeoutMs: number;
}

/**
 * The start of a run: the receivers asked for (--receivers; an unknown one throws), the prerequisites (exit 2 when
 * one is missing: root, bird2, gobgpd, curl, nsenter), the temp dirs and the poll pacing.
 */
export function startBgpBench(bench: string, values: BgpBenchValues) {
  const receivers = values.receivers!.split(',').map((s) => s.trim()).filter(Boolean) as Kind[];
  for (const r of receivers) {
    if (!['blockspeaker', 'bird', 'gobgp'].includes(r)) throw new Error(`--receivers: unknown receiver ${r} (blockspeaker, bird, gobgp)`);
  }
  const polling: Polling = { pollMs: Number(values['poll-ms']), timeoutMs: Number(values.timeout) * 1000 };
  requirePrereqs(bench, ['bird', 'gobgp'], ['/usr/bin/curl', '/usr/bin/nsenter']);
  const temps = tempDirs(values.keep === true);
  return { receivers, polling, temps, tempDir: temps.make };
}

/** The head of the final JSON line: the bench, the machine, `extra` (e.g. the table), and how our daemon was started. */
export function benchJson(bench: string, values: BgpBenchValues, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    bench,
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, loadStart: loadavg().map(r1) },
    ...extra,
    // How our daemon was started: the launcher's (#! line's) node flags and environment, then --node-flags.
    blockspeakerLaunch: {
      nodeFlags: [...(values['no-launcher'] ? [] : launcher(repoRoot).flags), ...`${values['node-flags']} ${values['node-args']}`.split(/\s+/).filter(Boolean)],
      env: values['no-launcher'] ? {} : launcher(repoRoot).env,
      logLevel: values['log-level'],
    },
  };
}

/** The machine line every run prints first. */
export function logMachine(): void {
  log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg().map(r1).join(' ')}`);
}

/** dist/ must be the sources being measured: build it (tsc, ~20 s, not timed), unless --from-source or --no-build. */
export async function buildDist(receivers: readonly Kind[], values: BgpBenchValues): Promise<void> {
  if (receivers.includes('blockspeaker') && !values['from-source'] && !values['no-build']) {
    await execFileP('npm', ['run', '-s', 'build'], { cwd: repoRoot, timeout: 300_000 });
    log('built dist/ (npm run build) for the compiled daemon');
  }
}

/** One link per receiver, every receiver namespace hung off the first link's sender namespace. */
export async function linksFor(kinds: readonly Kind[]): Promise<Map<Kind, Link>> {
  const links = new Map<Kind, Link>();
  let first: Link | undefined;
  for (const kind of kinds) {
    const l = await createLink({ name: `bgi-${kind.slice(0, 5)}`, local: first?.local.ns });
    first ??= l;
    links.set(kind, l);
  }
  return links;
}

// ---- measuring -----------------------------------------------------------------------------------------------

export interface Waited {
  /** When the poll that saw every prefix answered (the sink: its own exact time). */
  doneAt: number;
  /** When the poll before it answered (not yet all): completion lies in (prevAt, doneAt]. */
  prevAt: number;
  polls: number;
  held: number;
}

/**
 * Polls the receiver until it holds `expected` prefixes. Polls are not free (GoBGP walks its whole Adj-RIB-In to
 * answer `neighbor -j`: ~0.1 s of its CPU per poll at 1M routes), so while the end is far off they are spaced by
 * the progress so far (60% of the predicted remaining time), and near it they come every 2% of the elapsed time
 * (at least --poll-ms, at most 500 ms).
 */
export async function waitHeld(rcv: Receiver, expected: number, from: number, polling: Polling, tick?: () => Promise<void>): Promise<Waited> {
  const { pollMs, timeoutMs } = polling;
  let polls = 0;
  let prev = from;
  let held = 0;
  let first: { t: number; n: number } | null = null;
  for (;;) {
    let delay = Math.max(pollMs, Math.min(500, (now() - from) / 50));
    if (rcv.doneAt) {
      await tick?.();
      const d = rcv.doneAt();
      if (d !== null) return { doneAt: d, prevAt: d, polls, held: await rcv.count() };
    } else {
      try {
        [held] = await Promise.all([rcv.count(), tick?.()]);
      } catch { /* a busy receiver may time out a poll: try again */ }
      polls++;
      const t = now();
      if (process.env.BENCH_DEBUG) console.error(`poll ${rcv.kind} ${r0(t - from)} ms: ${held}`);
      if (held >= expected) return { doneAt: t, prevAt: prev, polls, held };
      prev = t;
      if (held > 0 && first === null) first = { t, n: held };
      else if (first !== null && held > first.n) {
        const remaining = (expected - held) / ((held - first.n) / (t - first.t));
        if (remaining > 4 * delay) delay = Math.min(0.6 * remaining, 10_000);
      }
    }
    if (now() - from > timeoutMs) {
      throw new Error(`${rcv.kind}: holds ${held} of ${expected} prefixes after ${fmtS(now() - from)}\n${rcv.describe()}`);
    }
    await sleep(delay);
  }
}

export function printProfile(p: ProfileSummary): void {
  log(`    CPU profile of the ingest window (${p.totalMs} ms sampled, self time):`);
  for (const f of p.functions) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
  log('    by file:');
  for (const f of p.files.slice(0, 8)) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
}
