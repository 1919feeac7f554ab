// The receivers the BGP ingest benches measure, each in the peer namespace of its own link: the sink (takes prefixes
// and drops them), blockspeaker (the compiled daemon, started as users start it), and BIRD and GoBGP (the interop
// kit's peers). Each answers how many prefixes it holds; ours also says exactly when it had everything.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { runInNetns, type Link } from '../../test/kit/interop/netns.ts';
import type { Peer } from '../../test/kit/interop/peer-types.ts';
import { startPeer } from '../../test/kit/interop/start-peer.ts';
import { launcher } from '../../test/kit/launcher.ts';
import { birdc, importedRoutes } from './bird-sender.ts';
import { heapSnapshotOf, now, r0, r2, sleep } from './daemon-bench.ts';
import { comm, cpuMs } from './proc.ts';

const execFileP = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = join(repoRoot, 'bin/blockspeaker.js');
const MAIN = join(repoRoot, 'src/cli/main.ts');
const SINK = join(repoRoot, 'bench/lib/bgp-sink.ts');
const MEM_SAMPLER = join(repoRoot, 'bench/lib/mem-sampler.cjs');
export const SENDER_AS = 65001;
export const RECEIVER_AS = 65010;
const STATUS_PORT = 9179;

export type Kind = 'sink' | 'blockspeaker' | 'bird' | 'gobgp';

/** How our daemon is started (the benches' flags of the same names; see bench/lib/bgp-bench.ts). */
export interface DaemonFlags {
  'from-source'?: boolean;
  'cpu-prof'?: boolean;
  'no-launcher'?: boolean;
  'node-flags'?: string;
  'node-args'?: string;
  'heap-snapshot'?: boolean;
  'mem-sample'?: boolean;
  'log-level'?: string;
}

export async function nsExec(ns: string, cmd: string, args: string[], timeout = 10_000): Promise<string> {
  // nsenter only switches the network namespace: cheaper per poll than `ip netns exec` (which remounts /sys).
  const { stdout } = await execFileP('nsenter', [`--net=/run/netns/${ns}`, cmd, ...args], { timeout, maxBuffer: 64 << 20, encoding: 'utf8' });
  return stdout;
}

function pidOf(peer: Peer, name: string): number {
  const pid = peer.ns.pids().find((p) => comm(p) === name);
  if (!pid) throw new Error(`${name} not running in ${peer.ns.name}`);
  return pid;
}

export interface PeerSpec {
  address: string;
  asn: number;
  families: ('ipv4' | 'ipv6')[];
}

export interface Receiver {
  kind: Kind;
  pid: number;
  /** Prefixes held (all peers, all families). */
  count(): Promise<number>;
  /** For the sink: when it counted the last expected prefix. */
  doneAt?: () => number | null;
  /** When the receiver itself says it had everything (after the fact), or null. */
  exactDoneAt?: () => number | null;
  stop(): Promise<void>;
  /** --heap-snapshot (blockspeaker only): /proc/PID/smaps_rollup, then a V8 heap snapshot written by the daemon. */
  heapSnapshot?(): Promise<{ file: string | null; smaps: string }>;
  /** --status-cost (blockspeaker only): once quiet, CPU (ms) per GET of /peers and of /metrics (after a first scrape). */
  statusCost?(n: number): Promise<Record<string, { cpuMsPerRequest: number; bytes: number; firstCpuMs?: number }>>;
  /** --mem-sample (blockspeaker only): what bench/lib/mem-sampler.cjs wrote at the RSS peak, and its last totals. */
  memSample?(): { peak: Record<string, unknown>; last: Record<string, unknown> } | null;
  /** The CPU profile written at stop (--cpu-prof, blockspeaker only). */
  profile?: () => string | null;
  describe(): string;
}

export async function startSink(link: Link, expected: number): Promise<Receiver> {
  const child = runInNetns(link.peer.ns, process.execPath, ['--import', 'tsx', SINK, '--asn', String(RECEIVER_AS), '--expect', String(expected), ...(process.env.BENCH_DEBUG ? ['--progress'] : [])],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot });
  let done: number | null = null;
  let count = 0;
  let listening = false;
  let buf = '';
  let errText = '';
  child.stderr!.on('data', (d: Buffer) => (errText += d.toString()));
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const ev = JSON.parse(buf.slice(0, i)) as { event: string; t: number; prefixes?: number };
      buf = buf.slice(i + 1);
      if (process.env.BENCH_DEBUG) console.error(JSON.stringify(ev));
      if (ev.event === 'listening') listening = true;
      if (ev.event === 'done') {
        done = ev.t;
        count = ev.prefixes!;
      }
    }
  });
  const until = now() + 20_000;
  while (!listening) {
    if (child.exitCode !== null) throw new Error(`sink exited: ${errText}`);
    if (now() > until) throw new Error(`sink not listening after 20 s: ${errText}`);
    await sleep(50);
  }
  return {
    kind: 'sink', pid: child.pid!,
    count: async () => count,
    doneAt: () => done,
    stop: async () => { child.kill('SIGKILL'); },
    describe: () => errText,
  };
}

export async function startBlockspeaker(link: Link, peers: PeerSpec[], name: string, flags: DaemonFlags, tempDir: (name: string) => string): Promise<Receiver> {
  const dir = tempDir(name);
  const file = join(dir, 'blockspeaker.json');
  writeFileSync(file, JSON.stringify({
    node: { name: 'bench' },
    bgp: {
      asn: RECEIVER_AS, routerId: link.peer.v4, listen: '0.0.0.0:179',
      peers: peers.map((p) => ({ ...p, passive: true, holdTime: 240 })),
    },
    status: { listen: `127.0.0.1:${STATUS_PORT}` },
    ipc: false,
  }, null, 2));
  // The compiled daemon (built at the start of the run), or the sources through tsx with --from-source.
  const entry = flags['from-source'] ? ['--import', 'tsx', MAIN] : [BIN];
  const nodeArgs = flags['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', dir] : [];
  // As users start it (every launcher passes the #! line's flags), then --node-flags (which may override them).
  const launch = flags['no-launcher'] ? { env: {}, flags: [] } : launcher(repoRoot);
  nodeArgs.push(...launch.flags);
  nodeArgs.push(...`${flags['node-flags']} ${flags['node-args']}`.split(/\s+/).filter(Boolean));
  if (flags['heap-snapshot']) nodeArgs.push('--heapsnapshot-signal=SIGUSR2', '--diagnostic-dir', dir);
  const memFile = join(dir, 'mem.json');
  if (flags['mem-sample']) nodeArgs.push('--require', MEM_SAMPLER);
  const logFile = join(dir, 'blockspeaker.log');
  const child = runInNetns(link.peer.ns, process.execPath, [...nodeArgs, ...entry, 'run', '-c', file, '--run-dir', dir, '--log-level', flags['log-level']!],
    { logFile, cwd: repoRoot, env: { ...process.env, ...launch.env, ...(flags['mem-sample'] ? { MEM_SAMPLE_FILE: memFile } : {}) } });
  const ns = link.peer.ns.name;
  const get = (path: string) => nsExec(ns, 'curl', ['-sf', '--max-time', '10', `http://127.0.0.1:${STATUS_PORT}${path}`]);
  const until = now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`blockspeaker exited (${child.exitCode}): ${readFileSync(logFile, 'utf8').slice(-2000)}`);
    try {
      await get('/healthz');
      break;
    } catch { /* not yet */ }
    if (now() > until) throw new Error(`blockspeaker status endpoint not up after 30 s: ${readFileSync(logFile, 'utf8').slice(-2000)}`);
    await sleep(100);
  }
  return {
    kind: 'blockspeaker', pid: child.pid!,
    async count() {
      // Prefixes with a best route, as BIRD's count is its table's networks: /status's `routes` is a sum over the
      // peers' counters, where /peers (summing each peer's accepted) built a hundred peers' whole status per poll,
      // CPU of ours that BIRD's count does not spend.
      return (JSON.parse(await get('/status')) as { routes: number }).routes;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      // SIGTERM lets node write the CPU profile; nothing else to wait for without one.
      child.kill(flags['cpu-prof'] ? 'SIGTERM' : 'SIGKILL');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
    exactDoneAt() {
      // "End-of-RIB <family>" (debug) is logged once every UPDATE before it is in the RIB (updates are applied
      // synchronously, in order); the last family's marker is the end of the table.
      const eor = new Map<string, number>();
      for (const line of readFileSync(logFile, 'utf8').split('\n')) {
        if (!line.includes(': End-of-RIB ')) continue;
        try {
          const j = JSON.parse(line) as { time: number; msg: string };
          const m = /^peer (\S+): End-of-RIB (ipv4|ipv6)$/.exec(j.msg);
          if (m) eor.set(`${m[1]} ${m[2]}`, j.time);
        } catch { /* not a log line */ }
      }
      const want = peers.reduce((n, p) => n + p.families.length, 0);
      return eor.size === want ? Math.max(...eor.values()) : null;
    },
    heapSnapshot: !flags['heap-snapshot'] ? undefined : async () => {
      // /proc first (the snapshot itself allocates), then SIGUSR2 and wait for node to finish writing the file.
      const smaps = readFileSync(`/proc/${child.pid}/smaps_rollup`, 'utf8');
      return { file: await heapSnapshotOf(child, dir), smaps };
    },
    memSample() {
      if (!flags['mem-sample'] || !existsSync(memFile)) return null;
      const peak = JSON.parse(readFileSync(memFile, 'utf8')) as Record<string, unknown>;
      const last = existsSync(`${memFile}.last`) ? JSON.parse(readFileSync(`${memFile}.last`, 'utf8')) as Record<string, unknown> : {};
      return { peak, last };
    },
    async statusCost(n) {
      const pid = child.pid!;
      // Until the daemon is done re-advertising (it goes on after the last prefix is held): < 20 ms CPU in 0.5 s.
      const quiet = async () => {
        for (let i = 0; i < 120; i++) {
          const c0 = cpuMs(pid);
          await sleep(500);
          if (cpuMs(pid) - c0 < 20) return;
        }
      };
      const out: Record<string, { cpuMsPerRequest: number; bytes: number; firstCpuMs?: number }> = {};
      for (const path of ['/peers', '/metrics']) {
        await quiet();
        let firstCpuMs: number | undefined;
        if (path === '/metrics') { // the first scrape loads prom-client and builds the registry
          const c0 = cpuMs(pid);
          await get(path);
          firstCpuMs = r0(cpuMs(pid) - c0);
          await quiet();
        }
        // One curl, n requests over one keep-alive connection: /proc's CPU counts in 10 ms ticks, so many requests.
        const url = `http://127.0.0.1:${STATUS_PORT}${path}`;
        const c0 = cpuMs(pid);
        const sizes = await nsExec(ns, 'curl', ['-sf', '-o', '/dev/null', '-w', '%{size_download}\n', ...Array.from({ length: n }, () => url)], 300_000);
        out[path] = { cpuMsPerRequest: r2((cpuMs(pid) - c0) / n), bytes: Number(sizes.split('\n')[0]), ...(firstCpuMs !== undefined ? { firstCpuMs } : {}) };
      }
      return out;
    },
    profile: () => {
      const f = readdirSync(dir).find((x) => x.endsWith('.cpuprofile'));
      return f ? join(dir, f) : null;
    },
    describe: () => readFileSync(logFile, 'utf8').slice(-3000),
  };
}

export async function startBirdReceiver(link: Link, peers: PeerSpec[], bgperf: boolean): Promise<Receiver> {
  const peer = await startPeer('bird', link, {
    asn: RECEIVER_AS,
    neighbors: peers.map((p) => ({ ...p, passive: true, holdTime: 240 })),
  });
  const ctl = join(peer.dir, 'bird.ctl');
  return {
    kind: 'bird', pid: pidOf(peer, 'bird'),
    async count() {
      if (bgperf) {
        // Networks in the table (10,000: cheap to count).
        const m = /(\d+) of \d+ routes for (\d+) networks/.exec(await birdc(ctl, ['show', 'route', 'table', 'master4', 'count']));
        return m ? Number(m[2]) : 0;
      }
      // O(1) in BIRD: counting a 1M-route table with `show route count` would cost the receiver a lot per poll.
      return importedRoutes(await birdc(ctl, ['show', 'protocols', 'all', 'nb1']));
    },
    stop: () => peer.kill(),
    describe: () => peer.logs(40),
  };
}

export async function startGobgpReceiver(link: Link, peers: PeerSpec[]): Promise<Receiver> {
  const peer = await startPeer('gobgp', link, {
    asn: RECEIVER_AS,
    neighbors: peers.map((p) => ({ ...p, passive: true, holdTime: 240 })),
  });
  const port = (peer as unknown as { port: number }).port;
  return {
    kind: 'gobgp', pid: pidOf(peer, 'gobgpd'),
    async count() {
      const list = JSON.parse(await nsExec(peer.ns.name, 'gobgp', ['-u', '127.0.0.1', '-p', String(port), 'neighbor', '-j'], 60_000) || '[]') as
        { afi_safis?: { state?: { accepted?: number } }[] }[];
      let n = 0;
      for (const nb of list ?? []) for (const a of nb.afi_safis ?? []) n += Number(a.state?.accepted ?? 0);
      return n;
    },
    stop: () => peer.kill(),
    describe: () => peer.logs(40),
  };
}
