// bench/bgp-ingest: how fast a receiver takes in a full table over one BGP session, and the bgperf shape (100 peers
// x 100 prefixes converging into one receiver) — blockspeaker (the `blockspeaker run` daemon), BIRD and GoBGP as
// receivers in the same run, each in its own network namespace joined to the sender's by veth.
//
//   npm run bench:bgp-ingest -- [--table FILE] [--limit N] [--shape realistic|packed] [--sender replay,bird]
//                               [--receivers blockspeaker,bird,gobgp] [--no-sink] [--no-full] [--no-bgperf]
//                               [--cpu-prof] [--heap-snapshot] [--node-flags '...'] [--from-source] [--poll-ms MS] [--timeout S] [--keep]
//                               [--node-args "FLAGS"]   (the same as --node-flags: node flags for the blockspeaker receiver)
//                               [--prefixes N] (per bgperf peer, default 100) [--idle-sessions] (see below)
//                               [--no-build]   (dist/ is already built from these sources: skip `npm run build`)
//                               [--mem-sample]   (the daemon's memory at its RSS peak, bench/lib/mem-sampler.cjs; use --keep)
//                               [--no-launcher]   (without the node flags and environment of bin/blockspeaker.js's #! line)
//                               [--log-level L]   (our daemon's; default debug: its "End-of-RIB" lines give the exact end)
//                               [--status-cost N]   (bgperf, once converged and quiet: our CPU per /peers and /metrics, N each)
//
// Needs root, bird2 and gobgpd (apt-get install bird2 gobgpd), curl and nsenter. About 5-6 minutes on 2 cores.
//
// Table: --table, else ../shared/data/tier1-table-2023.txt.gz when present, else the synthetic generator with the
// real table's counts; --limit N keeps N prefixes in the table's IPv4:IPv6 proportion. Shape "realistic" (default)
// gives every run of 1-5 consecutive prefixes (3 on average) its own attribute set, as in bench/bgp-codec: an
// AS_PATH from a pool of 5,000 (sender AS + 1-4 ASNs) and a community unique to the run; "packed" gives every
// prefix the same attributes. IPv4 and IPv6 go over one IPv4 session (MP-BGP). Two senders, one after the other:
//   replay  bench/lib/bgp-replay.ts writes a pre-encoded UPDATE stream (one UPDATE per run, ~3 prefixes each,
//           encoded by our codec beforehand, not timed) as fast as TCP takes it, then End-of-RIB: the receiver is
//           measured against its own limits (a sink takes the whole table in well under a second).
//   bird    BIRD 2 holding the table as static routes (`route P blackhole { pN(); bgp_community.add(..); };`),
//           loaded beforehand (setup, measured apart). BIRD sends about one prefix per UPDATE and tops out near
//           150k prefixes/s here, so this is the "real router as sender" check, not the receiver's ceiling.
//
// Receivers, one at a time, each against a fresh session from the sender:
//   sink          bench/lib/bgp-sink.ts: counts prefixes and drops them — the sender's own ceiling
//   blockspeaker  `node bin/blockspeaker.js run -c FILE`, the compiled daemon as users run it: with the node flags
//                 and environment of bin/blockspeaker.js's #! line, which every launcher shares (test/kit/launcher.ts;
//                 --no-launcher leaves them out). The bench runs `npm run build` first so dist/ matches the sources;
//                 --from-source runs src/ through tsx instead, which adds tsx: ~40 MB more RSS. One passive peer.
//   bird, gobgp   the interop harness's daemons (accept everything, export everything), one passive peer
// Time = from session Established (the sender's own timestamp: BIRD's `iso long ms`, the replay's log line) until
// the receiver holds every prefix. Exact where the receiver says when: the sink, and blockspeaker, whose debug log
// line "End-of-RIB <family>" is written once every UPDATE before it is in the RIB. Else (and as a cross-check) by
// polling: our /peers prefixes.accepted (curl in the namespace), `birdc show protocols all` "Routes: N imported",
// `gobgp neighbor -j` afi_safis accepted; the figure is the middle of the last two polls, printed with ± half
// their gap. Peak RSS = VmHWM of the receiver process; CPU = its utime + stime over the run (/proc).
//
// bgperf shape: a second BIRD sender with 100 `protocol bgp`, each from its own source address (100 addresses on
// the sender's veth) with its own AS and router ID, each exporting its own static protocol of 100 /24s, towards 100
// addresses of the receiver. The receiver has 100 passive peers and, as a router, re-advertises what it learns to
// the other 99. Time from `birdc enable` (all 100 at once) until the receiver holds all 10,000 prefixes, also from
// the first and from the last session Established; receiver CPU time over that.
//
// --cpu-prof runs our daemon under node --cpu-prof and prints where its time went during the ingest window.
// --node-flags passes extra flags to node for our daemon (e.g. '--max-semi-space-size=1', to see what V8's young
// generation costs).
// --heap-snapshot prints our daemon's /proc/PID/smaps_rollup once it holds every prefix, then has it write a V8 heap
// snapshot (SIGUSR2) into its temp dir and prints the path (use with --keep; summarise with bench/lib/heapsummary.ts).
// --idle-sessions (with --no-full) replaces the bgperf run by the same 100 sessions carrying no routes: the receiver's
// RSS with all 100 Established minus its RSS with them down, per session (with --heap-snapshot also the live JS heap
// per session, ours only), blockspeaker and BIRD side by side.
// BENCH_DEBUG=1 prints every poll and the sink's arrival curve on stderr.
// Human-readable lines first, then one JSON line with every number. Namespaces, daemons and temp dirs are removed at
// the end, on error and on SIGINT/SIGTERM (the harness's hooks); --keep keeps the temp dirs (configs, logs, stream).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { encodeUpdates } from '../src/bgp/codec/index.ts';
import { parseIP, type Prefix } from '../src/net/ip.ts';
import { asSequence, makeAttrs, type PathAttrs } from '../src/rib/attrs.ts';
import type { PrefixList } from '../src/rib/prefixlist.ts';
import { REAL_TABLE_COUNTS, generateTable, mulberry32 } from '../src/rib/tablegen.ts';
import { readPrefixFile } from '../src/rib/tableio.ts';
import { cleanupLeftovers, createLink, runInNetns, type Link } from '../test/kit/interop/netns.ts';
import type { Peer } from '../test/kit/interop/peer-types.ts';
import { startPeer } from '../test/kit/interop/start-peer.ts';
import { summarizeProfile, type ProfileSummary } from './lib/cpuprofile.ts';
import { summarize } from './lib/heapsummary.ts';
import { launcher } from '../test/kit/launcher.ts';
import { finish, fmtS, heapSnapshotOf, log, monoOffset, now, r0, r1, r2, requirePrereqs, sleep, tempDirs } from './lib/daemon-bench.ts';
import { childrenCpuMs, comm, cpuMs, peakRssMB, rssMB } from './lib/proc.ts';

const execFileP = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(repoRoot, 'bin/blockspeaker.js');
const MAIN = join(repoRoot, 'src/cli/main.ts');
const SINK = join(repoRoot, 'bench/lib/bgp-sink.ts');
const REPLAY = join(repoRoot, 'bench/lib/bgp-replay.ts');
const MEM_SAMPLER = join(repoRoot, 'bench/lib/mem-sampler.cjs');
const BIRDC = '/usr/sbin/birdc';
const SENDER_AS = 65001;
const RECEIVER_AS = 65010;
const STATUS_PORT = 9179;
const BGPERF_PEERS = 100;

const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    limit: { type: 'string' },
    shape: { type: 'string', default: 'realistic' },
    receivers: { type: 'string', default: 'blockspeaker,bird,gobgp' },
    sender: { type: 'string', default: 'replay,bird' },
    'no-sink': { type: 'boolean', default: false },
    'no-full': { type: 'boolean', default: false },
    'no-bgperf': { type: 'boolean', default: false },
    'cpu-prof': { type: 'boolean', default: false },
    'heap-snapshot': { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    'from-source': { type: 'boolean', default: false },
    'poll-ms': { type: 'string', default: '100' },
    timeout: { type: 'string', default: '240' },
    seed: { type: 'string', default: '1' },
    keep: { type: 'boolean', default: false },
    'node-args': { type: 'string', default: '' }, // extra node flags for blockspeaker, e.g. --max-semi-space-size=1
    prefixes: { type: 'string', default: '100' }, // per bgperf peer
    'idle-sessions': { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'mem-sample': { type: 'boolean', default: false },
    'status-cost': { type: 'string', default: '0' },
    'log-level': { type: 'string', default: 'debug' },
    'no-launcher': { type: 'boolean', default: false },
  },
});
// Per bgperf peer; --idle-sessions measures the sessions alone (0 prefixes).
const BGPERF_PREFIXES = values['idle-sessions'] ? 0 : Number(values.prefixes);

type Kind = 'sink' | 'blockspeaker' | 'bird' | 'gobgp';
const receivers = values.receivers!.split(',').map((s) => s.trim()).filter(Boolean) as Kind[];
for (const r of receivers) {
  if (!['blockspeaker', 'bird', 'gobgp'].includes(r)) throw new Error(`--receivers: unknown receiver ${r} (blockspeaker, bird, gobgp)`);
}
if (values.shape !== 'realistic' && values.shape !== 'packed') throw new Error('--shape must be realistic or packed');
const pollMs = Number(values['poll-ms']);
const timeoutMs = Number(values.timeout) * 1000;

requirePrereqs('bench:bgp-ingest', ['bird', 'gobgp'], ['/usr/bin/curl', '/usr/bin/nsenter']);
const temps = tempDirs(values.keep === true);
const tempDir = temps.make;

async function nsExec(ns: string, cmd: string, args: string[], timeout = 10_000): Promise<string> {
  // nsenter only switches the network namespace: cheaper per poll than `ip netns exec` (which remounts /sys).
  const { stdout } = await execFileP('nsenter', [`--net=/run/netns/${ns}`, cmd, ...args], { timeout, maxBuffer: 64 << 20, encoding: 'utf8' });
  return stdout;
}

async function birdc(ctl: string, args: string[]): Promise<string> {
  const { stdout } = await execFileP(BIRDC, ['-s', ctl, ...args], { timeout: 30_000, maxBuffer: 64 << 20, encoding: 'utf8' });
  return stdout;
}

function pidOf(peer: Peer, name: string): number {
  const pid = peer.ns.pids().find((p) => comm(p) === name);
  if (!pid) throw new Error(`${name} not running in ${peer.ns.name}`);
  return pid;
}

// ---- the table ---------------------------------------------------------------------------------------------

const defaultTable = resolve(repoRoot, '../shared/data/tier1-table-2023.txt.gz');
const tablePath = values.table ?? (existsSync(defaultTable) ? defaultTable : undefined);
let v4: PrefixList;
let v6: PrefixList;
if (tablePath) {
  const t = await readPrefixFile(tablePath);
  if (t.errorCount > 0) {
    console.error(`${tablePath}: ${t.errorCount} bad lines, first: line ${t.errors[0].line}: ${t.errors[0].message}`);
    process.exit(1);
  }
  ({ v4, v6 } = t);
} else {
  ({ v4, v6 } = generateTable({ seed: Number(values.seed), v4: REAL_TABLE_COUNTS.v4, v6: REAL_TABLE_COUNTS.v6 }));
}
// --limit N: at most N prefixes in all, in the table's IPv4:IPv6 proportion.
let n4 = v4.count;
let n6 = v6.count;
if (values.limit) {
  const lim = Number(values.limit);
  if (lim < n4 + n6) {
    n6 = Math.floor((lim * v6.count) / (v4.count + v6.count));
    n4 = lim - n6;
  }
}
const tableName = tablePath ?? `synthetic (src/rib/tablegen.ts, seed ${values.seed})`;
log(`table: ${tableName}: ${n4} IPv4 + ${n6} IPv6 prefixes${values.limit ? ` (--limit ${values.limit})` : ''}, shape ${values.shape}`);
log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg().map(r1).join(' ')}`);

// ---- the table's attributes (one plan for both senders) ---------------------------------------------------

const rnd = mulberry32(Number(values.seed));
const PATHS = 5000;
/** A public-looking ASN: never the sender's or receiver's (loop detection) nor AS_TRANS. */
function randomAsn(): number {
  const r = 1 + Math.floor(rnd() * 330_000);
  const a = r <= 60_000 ? r : r + 71_072; // 1..60000 and 131073..400000
  return a === 23456 ? 23457 : a;
}

/** Runs of 1-5 consecutive prefixes (3 on average) sharing an attribute set: an AS_PATH from the pool and a community unique to the run. */
interface Runs {
  start: Uint32Array;
  len: Uint8Array;
  path: Uint16Array;
  count: number;
}
const pathPool: number[][] = Array.from({ length: PATHS }, () => Array.from({ length: 1 + Math.floor(rnd() * 4) }, randomAsn));
function makeRuns(count: number): Runs {
  const runs: Runs = { start: new Uint32Array(count), len: new Uint8Array(count), path: new Uint16Array(count), count: 0 };
  for (let i = 0; i < count;) {
    const len = values.shape === 'packed' ? Math.min(255, count - i) : Math.min(1 + Math.floor(rnd() * 5), count - i);
    runs.start[runs.count] = i;
    runs.len[runs.count] = len;
    runs.path[runs.count] = Math.floor(rnd() * PATHS);
    runs.count++;
    i += len;
  }
  return runs;
}
const runs4 = makeRuns(n4);
const runs6 = makeRuns(n6);
const attrSets = values.shape === 'packed' ? 1 : runs4.count + runs6.count;
/** Community of run r of a family (IPv6 runs numbered after the IPv4 ones): distinct per run. */
const runCommunity = (g: number) => [1 + (g >>> 16), g & 0xffff] as const;

// ---- the replay sender's stream ------------------------------------------------------------------------------

/** The table as UPDATEs (our codec; placeholder next hops, rewritten per link by bench/lib/bgp-replay.ts). */
function encodeStream(file: string): { ms: number; mb: number; updates: number } {
  const t0 = now();
  const chunks: Buffer[] = [];
  const nh4 = parseIP('192.0.2.1');
  const nh6 = parseIP('2001:db8::1');
  const same = new Map<number, PathAttrs>();
  const attrsFor = (path: number, g: number, v6: boolean): PathAttrs => {
    const base = { origin: 0 as const, asPath: [asSequence(SENDER_AS, ...pathPool[path])], nextHop: v6 ? nh6 : nh4 };
    if (values.shape === 'packed') {
      const k = v6 ? 1 : 0;
      if (!same.has(k)) same.set(k, makeAttrs({ ...base, asPath: [asSequence(SENDER_AS)] }));
      return same.get(k)!;
    }
    const [hi, lo] = runCommunity(g);
    return makeAttrs({ ...base, communities: [hi * 65536 + lo] });
  };
  let g = 0;
  for (const [list, runs, isV6] of [[v4, runs4, false], [v6, runs6, true]] as const) {
    for (let r = 0; r < runs.count; r++) {
      g++;
      const prefixes: Prefix[] = [];
      for (let i = runs.start[r]; i < runs.start[r] + runs.len[r]; i++) prefixes.push(list.prefix(i));
      for (const b of encodeUpdates(attrsFor(runs.path[r], g, isV6), prefixes, { fourOctetAs: true })) chunks.push(b);
    }
  }
  const buf = Buffer.concat(chunks);
  writeFileSync(file, buf);
  return { ms: now() - t0, mb: buf.length / 2 ** 20, updates: chunks.length };
}

// ---- the BIRD sender -----------------------------------------------------------------------------------------

/** BIRD static routes for one family, run by run: `{ pN(); bgp_community.add((a,b)); }` (functions hold the paths). */
function staticRoutes(list: PrefixList, runs: Runs, g0: number, out: string[]): void {
  const packed = values.shape === 'packed';
  for (let r = 0; r < runs.count; r++) {
    const [hi, lo] = runCommunity(g0 + r + 1);
    const attrs = packed ? '' : ` { p${runs.path[r]}(); bgp_community.add((${hi},${lo})); }`;
    for (let i = runs.start[r]; i < runs.start[r] + runs.len[r]; i++) out.push(`  route ${list.format(i)} blackhole${attrs};`);
  }
}

const senderTiming = { generateMs: 0, loadMs: 0, configMB: 0, rssMB: 0 };

function fullSenderConfig(links: Map<Kind, Link>, dir: string, routerId: string): string {
  const t0 = now();
  const out: string[] = [
    `log "${join(dir, 'bird.log')}" { warning, error, fatal };`,
    'timeformat protocol iso long ms;',
    `router id ${routerId};`,
    'protocol device { scan time 10; }',
  ];
  if (values.shape === 'realistic') {
    // BIRD prepends in reverse: the first ASN of the pool path ends up next to the sender's, as in the replay.
    pathPool.forEach((asns, p) => out.push(`function p${p}() { ${[...asns].reverse().map((a) => `bgp_path.prepend(${a});`).join(' ')} }`));
  }
  out.push('protocol static t4 {', '  ipv4;');
  staticRoutes(v4, runs4, 0, out);
  out.push('}', 'protocol static t6 {', '  ipv6;');
  staticRoutes(v6, runs6, runs4.count, out);
  out.push('}');
  for (const [kind, l] of links) {
    out.push(`protocol bgp snd_${kind} {`, '  disabled;',
      `  local ${l.local.v4} as ${SENDER_AS};`, `  neighbor ${l.peer.v4} as ${RECEIVER_AS};`,
      '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  hold time 240;',
      '  ipv4 { import none; export all; };',
      `  ipv6 { import none; export all; next hop address ${l.local.v6}; };`, '}');
  }
  const text = `${out.join('\n')}\n`;
  senderTiming.generateMs = now() - t0;
  senderTiming.configMB = Buffer.byteLength(text) / 2 ** 20;
  return text;
}

interface Sender {
  ctl: string;
  pid: number;
  child: ChildProcess;
  dir: string;
}

async function startBird(ns: Link['local']['ns'], dir: string, conf: string, ready: (ctl: string) => Promise<boolean>, what: string): Promise<Sender> {
  writeFileSync(join(dir, 'bird.conf'), conf);
  const ctl = join(dir, 'bird.ctl');
  const child = runInNetns(ns, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctl, '-P', join(dir, 'bird.pid')],
    { logFile: join(dir, 'bird.out') });
  const until = now() + 180_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what}: bird exited: ${readFileSync(join(dir, 'bird.out'), 'utf8').slice(-2000)}`);
    }
    try {
      if (existsSync(ctl) && (await ready(ctl))) break;
    } catch { /* not up yet */ }
    if (now() > until) throw new Error(`${what}: not ready after 180 s`);
    await sleep(100);
  }
  return { ctl, pid: child.pid!, child, dir };
}

/** Sum of "Routes: N imported" over the protocol's channels in `birdc show protocols all NAME`. */
function importedRoutes(text: string): number {
  let n = 0;
  for (const m of text.matchAll(/Routes:\s+(\d+) imported/g)) n += Number(m[1]);
  return n;
}

/** BGP protocols in `birdc show protocols`: state and since (ms since the epoch, BIRD's `iso long ms`). */
function birdSessions(text: string): Map<string, { established: boolean; since: number }> {
  const out = new Map<string, { established: boolean; since: number }>();
  for (const m of text.matchAll(/^(\S+)\s+BGP\s+\S+\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\s*(\S*)/gm)) {
    out.set(m[1], { established: m[2] === 'up' && m[4] === 'Established', since: new Date(m[3].replace(' ', 'T')).getTime() });
  }
  return out;
}

// ---- receivers ---------------------------------------------------------------------------------------------

interface PeerSpec {
  address: string;
  asn: number;
  families: ('ipv4' | 'ipv6')[];
}

interface Receiver {
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

async function startSink(link: Link, expected: number): Promise<Receiver> {
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

async function startBlockspeaker(link: Link, peers: PeerSpec[], name: string): Promise<Receiver> {
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
  const entry = values['from-source'] ? ['--import', 'tsx', MAIN] : [BIN];
  const nodeArgs = values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', dir] : [];
  // As users start it (every launcher passes the #! line's flags), then --node-flags (which may override them).
  const launch = values['no-launcher'] ? { env: {}, flags: [] } : launcher(repoRoot);
  nodeArgs.push(...launch.flags);
  nodeArgs.push(...`${values['node-flags']} ${values['node-args']}`.split(/\s+/).filter(Boolean));
  if (values['heap-snapshot']) nodeArgs.push('--heapsnapshot-signal=SIGUSR2', '--diagnostic-dir', dir);
  const memFile = join(dir, 'mem.json');
  if (values['mem-sample']) nodeArgs.push('--require', MEM_SAMPLER);
  const logFile = join(dir, 'blockspeaker.log');
  const child = runInNetns(link.peer.ns, process.execPath, [...nodeArgs, ...entry, 'run', '-c', file, '--run-dir', dir, '--log-level', values['log-level']!],
    { logFile, cwd: repoRoot, env: { ...process.env, ...launch.env, ...(values['mem-sample'] ? { MEM_SAMPLE_FILE: memFile } : {}) } });
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
      const peersStatus = JSON.parse(await get('/peers')) as { prefixes: { accepted: number } }[];
      return peersStatus.reduce((n, p) => n + p.prefixes.accepted, 0);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      // SIGTERM lets node write the CPU profile; nothing else to wait for without one.
      child.kill(values['cpu-prof'] ? 'SIGTERM' : 'SIGKILL');
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
    heapSnapshot: !values['heap-snapshot'] ? undefined : async () => {
      // /proc first (the snapshot itself allocates), then SIGUSR2 and wait for node to finish writing the file.
      const smaps = readFileSync(`/proc/${child.pid}/smaps_rollup`, 'utf8');
      return { file: await heapSnapshotOf(child, dir), smaps };
    },
    memSample() {
      if (!values['mem-sample'] || !existsSync(memFile)) return null;
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

async function startBirdReceiver(link: Link, peers: PeerSpec[], bgperf: boolean): Promise<Receiver> {
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

async function startGobgpReceiver(link: Link, peers: PeerSpec[]): Promise<Receiver> {
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

// ---- measuring -----------------------------------------------------------------------------------------------

interface Waited {
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
async function waitHeld(rcv: Receiver, expected: number, from: number, tick?: () => Promise<void>): Promise<Waited> {
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

interface IngestResult {
  /**
   * From Established until every prefix is held: exact where the receiver says when (the sink; blockspeaker's
   * End-of-RIB log line, written after the last UPDATE went into the RIB), else the middle of the last two polls.
   */
  ms: number;
  /** Half the bracket of polls around completion (0 when exact). */
  resolutionMs: number;
  /** The poll that first saw every prefix answered at (an upper bound; a busy receiver answers late). */
  polledMs: number;
  prefixes: number;
  prefixesPerS: number;
  cpuMs: number;
  peakRssMB: number;
  rssMB: number;
  polls: number;
  pollCpuMs: number;
  /** BIRD sender: its CPU time over the run. */
  senderCpuMs: number | null;
  /** Replay sender: when it had handed the whole stream to the kernel (TCP flow control: the receiver's pace). */
  sentMs: number | null;
  connectMs: number;
  load1: number;
  profile?: ProfileSummary;
}

/** One session's worth of table from a sender: started per receiver, stopped after. */
interface Feed {
  start(): Promise<void>;
  /** When the sender's session reached Established (ms since the epoch); throws if it is not up any more. */
  established(): Promise<number>;
  stop(): Promise<void>;
  /** Sender CPU time so far, ms (null when not meaningful). */
  cpuMs(): number | null;
  /** For the replay: when the last octet was handed to the kernel. */
  sentAt?: () => number | null;
  /** Called with every poll of the receiver. */
  tick?: () => Promise<void>;
}

function birdFeed(sender: Sender, kind: Kind): Feed {
  const proto = `snd_${kind}`;
  return {
    start: async () => { await birdc(sender.ctl, ['enable', proto]); },
    async established() {
      // BIRD's own timestamp of the state change (ms), read after the fact.
      const sess = birdSessions(await birdc(sender.ctl, ['show', 'protocols', proto])).get(proto);
      if (!sess?.established) throw new Error(`${kind}: the sender's session is not Established at the end (it flapped?)`);
      return sess.since;
    },
    stop: async () => { await birdc(sender.ctl, ['disable', proto]); },
    cpuMs: () => cpuMs(sender.pid),
    // BIRD 2.0.12 can leave the tail of an export waiting for its main loop's 3 s poll timeout (seen as the last
    // ~100 prefixes arriving 3 s late, for receivers that send nothing meanwhile); any CLI request wakes it.
    tick: async () => { await birdc(sender.ctl, ['show', 'status']); },
  };
}

function replayFeed(stream: string, link: Link): Feed {
  let child: ChildProcess | null = null;
  let est: number | null = null;
  let sent: number | null = null;
  let closedAfter = false;
  let text = '';
  return {
    async start() {
      child = runInNetns(link.local.ns, process.execPath, ['--import', 'tsx', REPLAY, '--stream', stream, '--connect', link.peer.v4,
        '--local', link.local.v4, '--asn', String(SENDER_AS), '--peer-asn', String(RECEIVER_AS), '--nh4', link.local.v4, '--nh6', link.local.v6],
      { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot });
      let buf = '';
      child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
      child.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          text += `${line}\n`;
          const ev = JSON.parse(line) as { event: string; t: number; established?: boolean };
          if (ev.event === 'established') est = ev.t;
          if (ev.event === 'sent') sent = ev.t;
          if (ev.event === 'closed' && ev.established) closedAfter = true;
        }
      });
    },
    async established() {
      if (est === null || closedAfter) throw new Error(`replay session not Established or closed since: ${text.slice(-2000)}`);
      return est;
    },
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    },
    cpuMs: () => null,
    sentAt: () => sent,
  };
}

async function fullTable(feedFor: (kind: Kind, link: Link) => Feed, links: Map<Kind, Link>, kinds: Kind[], expected: number,
  label: string): Promise<Map<Kind, IngestResult>> {
  const results = new Map<Kind, IngestResult>();
  for (const kind of kinds) {
    const link = links.get(kind)!;
    const peers: PeerSpec[] = [{ address: link.local.v4, asn: SENDER_AS, families: ['ipv4', 'ipv6'] }];
    const rcv = kind === 'sink' ? await startSink(link, expected)
      : kind === 'blockspeaker' ? await startBlockspeaker(link, peers, `bs-${label}`)
        : kind === 'bird' ? await startBirdReceiver(link, peers, false)
          : await startGobgpReceiver(link, peers);
    const feed = feedFor(kind, link);
    const load1 = loadavg()[0];
    const cpu0 = cpuMs(rcv.pid);
    const snd0 = feed.cpuMs();
    const poll0 = childrenCpuMs();
    const tStart = now();
    let w: Waited;
    let t0: number;
    try {
      await feed.start();
      w = await waitHeld(rcv, expected, tStart, feed.tick);
      t0 = await feed.established();
    } catch (e) {
      await rcv.stop();
      await feed.stop();
      throw e;
    }
    const cpu = cpuMs(rcv.pid) - cpu0;
    const hwm = peakRssMB(rcv.pid);
    const rss = rssMB(rcv.pid);
    const snd1 = feed.cpuMs();
    const pollCpu = childrenCpuMs() - poll0;
    const sentAt = feed.sentAt?.() ?? null;
    const exact = rcv.exactDoneAt?.() ?? (w.prevAt === w.doneAt ? w.doneAt : null);
    const lower = Math.max(w.prevAt, t0);
    const ms = (exact ?? (lower + w.doneAt) / 2) - t0;
    const resolution = exact !== null ? 0 : (w.doneAt - lower) / 2;
    await rcv.stop();
    await feed.stop();
    const res: IngestResult = {
      ms: r0(ms), resolutionMs: r0(resolution), polledMs: r0(w.doneAt - t0),
      prefixes: w.held, prefixesPerS: r0(expected / (ms / 1000)), cpuMs: r0(cpu), peakRssMB: r1(hwm), rssMB: r1(rss),
      polls: w.polls, pollCpuMs: r0(pollCpu),
      senderCpuMs: snd0 === null || snd1 === null ? null : r0(snd1 - snd0), sentMs: sentAt === null ? null : r0(sentAt - t0),
      connectMs: r0(t0 - tStart), load1: r1(load1),
    };
    if (kind === 'blockspeaker' && rcv.profile) {
      const f = rcv.profile();
      if (f) res.profile = summarizeProfile(f, t0 - monoOffset, t0 + ms - monoOffset);
    }
    results.set(kind, res);
    const extra = [
      res.senderCpuMs !== null ? `sender CPU ${fmtS(res.senderCpuMs)}` : null,
      res.sentMs !== null ? `all sent at ${fmtS(res.sentMs)}` : null,
      exact !== null && kind !== 'sink' ? `first complete poll at ${fmtS(res.polledMs)}` : null,
      `polls ${w.polls} = ${r0(pollCpu)} ms CPU`, `load ${r1(load1)}`,
    ].filter(Boolean).join(', ');
    log(`  ${kind.padEnd(12)} ${fmtS(ms).padStart(9)}  (${(res.prefixesPerS / 1000).toFixed(0)}k prefixes/s, ${res.resolutionMs ? `±${res.resolutionMs} ms` : 'exact'})` +
      `  CPU ${fmtS(cpu)}  peak RSS ${r0(hwm)} MB  [${extra}]`);
    if (res.profile) printProfile(res.profile);
  }
  return results;
}

/** Ratios and goals (issue 4) from one sender's results. */
function judge(full: Map<Kind, IngestResult>): { ratios: Record<string, number>; goals: Record<string, boolean> } {
  const bs = full.get('blockspeaker');
  const bird = full.get('bird');
  const gobgp = full.get('gobgp');
  const ratios: Record<string, number> = {};
  if (bs && bird) ratios.birdOverBlockspeaker = r2(bird.ms / bs.ms);
  if (bs && gobgp) ratios.gobgpOverBlockspeaker = r2(gobgp.ms / bs.ms);
  const goals: Record<string, boolean> = {};
  if (bs && bird) goals.noSlowerThanBird = bs.ms <= bird.ms;
  if (bs && gobgp) goals.twiceAsFastAsGobgp = gobgp.ms >= 2 * bs.ms;
  if (bs) goals.rssAtMost350MB = bs.peakRssMB <= 350;
  if (bs) {
    log(`  blockspeaker: BIRD takes ${ratios.birdOverBlockspeaker ?? '-'}x its time, GoBGP ${ratios.gobgpOverBlockspeaker ?? '-'}x;` +
      ` goals: ${Object.entries(goals).map(([k, v]) => `${k} ${v ? 'met' : 'MISSED'}`).join(', ')}`);
  }
  return { ratios, goals };
}

function printProfile(p: ProfileSummary): void {
  log(`    CPU profile of the ingest window (${p.totalMs} ms sampled, self time):`);
  for (const f of p.functions) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
  log('    by file:');
  for (const f of p.files.slice(0, 8)) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
}

// ---- bgperf shape ------------------------------------------------------------------------------------------

/** Sender address i (1..100) of link k's bgperf subnet, and the receiver address it talks to. */
const bgperfNet = (k: number) => `10.${100 + k}`;
const bgperfSender = (k: number, i: number) => `${bgperfNet(k)}.0.${i}`;
const bgperfReceiver = (k: number, i: number) => `${bgperfNet(k)}.1.${i}`;
const bgperfAsn = (i: number) => 65100 + i;

async function addBgperfAddresses(link: Link, k: number): Promise<void> {
  // One /16 on both ends, so every sender address is on a connected network of the receiver (direct eBGP).
  const batch = (ifname: string, addr: (i: number) => string) =>
    Array.from({ length: BGPERF_PEERS }, (_, j) => `addr add ${addr(j + 1)}/16 dev ${ifname}`).join('\n') + '\n';
  for (const [side, addr] of [[link.local, (i: number) => bgperfSender(k, i)], [link.peer, (i: number) => bgperfReceiver(k, i)]] as const) {
    await new Promise<void>((res, rej) => {
      const p = spawn('ip', ['-n', side.ns.name, '-batch', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('exit', (c) => (c === 0 ? res() : rej(new Error(`ip -batch: ${err}`))));
      p.stdin.end(batch(side.ifname, addr));
    });
  }
}

function bgperfSenderConfig(links: Map<Kind, Link>, dir: string, routerId: string): string {
  const out: string[] = [
    `log "${join(dir, 'bird.log')}" { warning, error, fatal };`,
    'timeformat protocol iso long ms;',
    `router id ${routerId};`,
    'protocol device { scan time 10; }',
  ];
  for (let i = 1; i <= BGPERF_PEERS; i++) {
    out.push(`protocol static src${i} {`, '  ipv4;');
    for (let j = 0; j < BGPERF_PREFIXES; j++) out.push(`  route 20.${i}.${j}.0/24 blackhole;`);
    out.push('}');
  }
  let k = 0;
  for (const kind of links.keys()) {
    k++;
    for (let i = 1; i <= BGPERF_PEERS; i++) {
      out.push(`protocol bgp q${k}_${i} {`, '  disabled;',
        `  local ${bgperfSender(k, i)} as ${bgperfAsn(i)};`, `  router id ${bgperfSender(k, i)};`,
        `  neighbor ${bgperfReceiver(k, i)} as ${RECEIVER_AS};`,
        '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  hold time 240;',
        `  ipv4 { import none; export where proto = "src${i}"; };`, '}');
    }
    void kind;
  }
  return `${out.join('\n')}\n`;
}

interface BgperfResult {
  /** From `birdc enable` of the 100 sessions until all 10,000 prefixes are held. */
  ms: number;
  /** From the first session Established until all are held. */
  fromFirstEstablishedMs: number;
  /** Between the first and the last session Established. */
  establishSpreadMs: number;
  /** From the last session Established until all are held. */
  fromLastEstablishedMs: number;
  cpuMs: number;
  peakRssMB: number;
  resolutionMs: number;
  polls: number;
  load1: number;
  profile?: ProfileSummary;
  statusCost?: Awaited<ReturnType<NonNullable<Receiver['statusCost']>>>;
}

async function bgperf(sender: Sender, links: Map<Kind, Link>, kinds: Kind[]): Promise<Map<Kind, BgperfResult>> {
  const results = new Map<Kind, BgperfResult>();
  const expected = BGPERF_PEERS * BGPERF_PREFIXES;
  const order = [...links.keys()];
  for (const kind of kinds) {
    const k = order.indexOf(kind) + 1;
    const link = links.get(kind)!;
    const peers: PeerSpec[] = Array.from({ length: BGPERF_PEERS }, (_, j) => ({ address: bgperfSender(k, j + 1), asn: bgperfAsn(j + 1), families: ['ipv4'] }));
    const rcv = kind === 'blockspeaker' ? await startBlockspeaker(link, peers, 'bs-bgperf')
      : kind === 'bird' ? await startBirdReceiver(link, peers, true)
        : await startGobgpReceiver(link, peers);
    const load1 = loadavg()[0];
    const cpu0 = cpuMs(rcv.pid);
    const tEnable = now();
    await birdc(sender.ctl, ['enable', `"q${k}_*"`]);
    const w = await waitHeld(rcv, expected, tEnable, () => birdc(sender.ctl, ['show', 'status']).then(() => {}));
    const cpu = cpuMs(rcv.pid) - cpu0;
    const hwm = peakRssMB(rcv.pid);
    if (rcv.heapSnapshot) {
      const snap = await rcv.heapSnapshot();
      log(`  ${kind}: /proc smaps_rollup once every prefix was held:\n${snap.smaps.trim()}\n  heap snapshot: ${snap.file ?? 'not written'}`);
    }
    const statusN = Number(values['status-cost']);
    const statusCost = statusN > 0 && rcv.statusCost ? await rcv.statusCost(statusN) : undefined;
    if (statusCost) {
      log(`  ${kind}: with ${BGPERF_PEERS} peers, once quiet: ${Object.entries(statusCost).map(([p, c]) => `${p} ${c.cpuMsPerRequest} ms CPU per request, ${c.bytes} bytes` +
        (c.firstCpuMs !== undefined ? ` (first scrape ${c.firstCpuMs} ms)` : '')).join('; ')} (${statusN} each)`);
    }
    const mem = rcv.memSample?.();
    if (mem) log(`  ${kind}: memory at the RSS peak (bench/lib/mem-sampler.cjs):\n${JSON.stringify(mem.peak, null, 1)}\n  last totals: ${JSON.stringify(mem.last)}`);
    const sessions = [...birdSessions(await birdc(sender.ctl, ['show', 'protocols', `"q${k}_*"`])).values()];
    const up = sessions.filter((s) => s.established);
    if (up.length !== BGPERF_PEERS) log(`  ${kind}: only ${up.length} of ${BGPERF_PEERS} sessions Established at the end`);
    const first = Math.min(...up.map((s) => s.since));
    const last = Math.max(...up.map((s) => s.since));
    // Every session carries prefixes of its own: nothing is complete before the last one is up.
    const exact = rcv.exactDoneAt?.() ?? null;
    const lower = Math.max(w.prevAt, tEnable, last);
    const doneAt = exact ?? (lower + w.doneAt) / 2;
    await rcv.stop();
    await birdc(sender.ctl, ['disable', `"q${k}_*"`]);
    const res: BgperfResult = {
      ms: r0(doneAt - tEnable), fromFirstEstablishedMs: r0(doneAt - first), establishSpreadMs: r0(last - first),
      fromLastEstablishedMs: r0(doneAt - last),
      cpuMs: r0(cpu), peakRssMB: r1(hwm), resolutionMs: r0(exact !== null ? 0 : (w.doneAt - lower) / 2), polls: w.polls, load1: r1(load1),
      ...(statusCost ? { statusCost } : {}),
    };
    if (kind === 'blockspeaker' && rcv.profile) {
      const f = rcv.profile();
      if (f) res.profile = summarizeProfile(f, tEnable - monoOffset, doneAt - monoOffset);
    }
    results.set(kind, res);
    log(`  ${kind.padEnd(12)} ${fmtS(res.ms).padStart(9)} from enable, ${fmtS(res.fromFirstEstablishedMs)} from first Established,` +
      ` ${fmtS(res.fromLastEstablishedMs)} from last (sessions up over ${fmtS(res.establishSpreadMs)}; ${res.resolutionMs ? `±${res.resolutionMs} ms` : 'exact'})  CPU ${fmtS(cpu)}  peak RSS ${r0(hwm)} MB  [load ${r1(load1)}]`);
    if (res.profile) printProfile(res.profile);
  }
  return results;
}

/**
 * --idle-sessions: what an Established session that carries no routes costs each receiver. RSS (VmRSS) with the
 * 100 peers configured but down, then with all 100 Established and quiet for a few seconds; the difference over
 * 100 is the figure. With --heap-snapshot, our daemon also writes a V8 heap snapshot at both points and the live
 * heap's growth per session is printed (the snapshots themselves allocate: the RSS figure is then an upper bound).
 */
/** Resident KB by kind of mapping (/proc/PID/smaps): malloc's [heap], other anonymous memory (V8's heap, malloc arenas), files. */
function rssByMapping(pid: number): Record<string, number> {
  const out: Record<string, number> = { mallocHeap: 0, anon: 0, file: 0 };
  let kind = 'anon';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const m = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) kind = m[1] === '[heap]' ? 'mallocHeap' : m[1] === '' || m[1].startsWith('[') ? 'anon' : 'file';
    else if (line.startsWith('Rss:')) out[kind] += Number(/(\d+)/.exec(line)![1]);
  }
  return out;
}

async function idleSessions(sender: Sender, links: Map<Kind, Link>, kinds: Kind[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const order = [...links.keys()];
  for (const kind of kinds) {
    if (kind === 'gobgp' || kind === 'sink') continue;
    const k = order.indexOf(kind) + 1;
    const link = links.get(kind)!;
    const peers: PeerSpec[] = Array.from({ length: BGPERF_PEERS }, (_, j) => ({ address: bgperfSender(k, j + 1), asn: bgperfAsn(j + 1), families: ['ipv4'] }));
    const start = (ps: PeerSpec[]) => (kind === 'blockspeaker' ? startBlockspeaker(link, ps, 'bs-idle') : startBirdReceiver(link, ps, true));
    // First with no peers at all: what configuring a peer costs before it has a session.
    const heap = async (r: Receiver) => {
      if (!r.heapSnapshot) return null;
      const snap = await r.heapSnapshot();
      return snap.file ? summarize(JSON.parse(readFileSync(snap.file, 'utf8'))) : null;
    };
    const growth = (a: ReturnType<typeof summarize>, b: ReturnType<typeof summarize>) => {
      // Where the growth is, by constructor (bytes per peer).
      const grow = new Map(b.rows.map((r) => [r.key, r.bytes]));
      for (const r of a.rows) grow.set(r.key, (grow.get(r.key) ?? 0) - r.bytes);
      for (const [key, n] of [...grow].sort((x, y) => y[1] - x[1]).slice(0, 20)) log(`    ${String(r0(n / BGPERF_PEERS)).padStart(7)} B/peer  ${key}`);
      return r1((b.total - a.total) / 1024 / BGPERF_PEERS);
    };
    const bare = await start([]);
    await sleep(3000);
    const rssBare = rssMB(bare.pid);
    const mapBare = rssByMapping(bare.pid);
    const heapBare = await heap(bare);
    await bare.stop();
    const rcv = await start(peers);
    await sleep(3000);
    const load1 = loadavg()[0];
    const rss0 = rssMB(rcv.pid);
    const map0 = rssByMapping(rcv.pid);
    const heap0 = await heap(rcv);
    const cpu0 = cpuMs(rcv.pid);
    const t0 = now();
    await birdc(sender.ctl, ['enable', `"q${k}_*"`]);
    let up = 0;
    while (up < BGPERF_PEERS) {
      if (now() - t0 > timeoutMs) throw new Error(`${kind}: only ${up} of ${BGPERF_PEERS} sessions Established after ${fmtS(timeoutMs)}`);
      await sleep(250);
      up = [...birdSessions(await birdc(sender.ctl, ['show', 'protocols', `"q${k}_*"`])).values()].filter((x) => x.established).length;
    }
    const upMs = now() - t0;
    const cpu = cpuMs(rcv.pid) - cpu0;
    await sleep(3000);
    const rss1 = rssMB(rcv.pid);
    const map1 = rssByMapping(rcv.pid);
    const hwm = peakRssMB(rcv.pid);
    const heap1 = await heap(rcv);
    await rcv.stop();
    await birdc(sender.ctl, ['disable', `"q${k}_*"`]);
    log(`    resident KB by mapping: no peers ${JSON.stringify(mapBare)}, peers down ${JSON.stringify(map0)}, Established ${JSON.stringify(map1)}`);
    const perKB = ((rss1 - rss0) * 1024) / BGPERF_PEERS;
    const res: Record<string, number> = {
      rssNoPeersMB: r1(rssBare), rssPerPeerDownKB: r1(((rss0 - rssBare) * 1024) / BGPERF_PEERS), rssDownMB: r1(rss0), rssUpMB: r1(rss1), peakRssMB: r1(hwm), rssPerSessionKB: r1(perKB), establishMs: r0(upMs), cpuMs: r0(cpu), load1: r1(load1),
    };
    if (heapBare && heap0) {
      log('    live JS heap, configured peers (down) over none:');
      res.heapPerPeerDownKB = growth(heapBare, heap0);
    }
    if (heap0 && heap1) {
      log('    live JS heap, Established sessions over down peers:');
      res.heapPerSessionKB = growth(heap0, heap1);
    }
    out[kind] = res;
    log(`  ${kind.padEnd(12)} RSS ${r1(rssBare)} MB with no peers, ${r1(rss0)} MB with ${BGPERF_PEERS} peers down (${res.rssPerPeerDownKB} KB each), ${r1(rss1)} MB with all ${BGPERF_PEERS} Established:` +
      ` ${r1(perKB)} KB per session${res.heapPerSessionKB !== undefined ? `; live JS heap ${res.heapPerPeerDownKB} KB per peer down, ${res.heapPerSessionKB} KB more per session` : ''}` +
      ` (all up in ${fmtS(upMs)}, CPU ${fmtS(cpu)}) [load ${r1(load1)}]`);
  }
  const ours = out.blockspeaker as Record<string, number> | undefined;
  const bird = out.bird as Record<string, number> | undefined;
  if (ours && bird && bird.rssPerSessionKB > 0) out.rssPerSessionRatioVsBird = r1(ours.rssPerSessionKB / bird.rssPerSessionKB);
  return out;
}

// ---- main ------------------------------------------------------------------------------------------------------

const json: Record<string, unknown> = {
  bench: 'bgp-ingest',
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, loadStart: loadavg().map(r1) },
  table: { source: tableName, v4: n4, v6: n6, shape: values.shape },
  // How our daemon was started: the launcher's (#! line's) node flags and environment, then --node-flags.
  blockspeakerLaunch: {
    nodeFlags: [...(values['no-launcher'] ? [] : launcher(repoRoot).flags), ...`${values['node-flags']} ${values['node-args']}`.split(/\s+/).filter(Boolean)],
    env: values['no-launcher'] ? {} : launcher(repoRoot).env,
    logLevel: values['log-level'],
  },
};
const started = now();
let error: unknown = null;
try {
  cleanupLeftovers();
  if (receivers.includes('blockspeaker') && !values['from-source'] && !values['no-build']) {
    // dist/ must be the sources being measured: build it (tsc, ~20 s, not timed).
    await execFileP('npm', ['run', '-s', 'build'], { cwd: repoRoot, timeout: 300_000 });
    log('built dist/ (npm run build) for the compiled daemon');
  }
  const fullKinds: Kind[] = [...(values['no-sink'] ? [] : ['sink' as const]), ...receivers];
  if (!fullKinds.length) throw new Error('nothing to measure: give --receivers or leave out --no-sink');
  const links = new Map<Kind, Link>();
  let first: Link | undefined;
  for (const kind of fullKinds) {
    const l = await createLink({ name: `bgi-${kind.slice(0, 5)}`, local: first?.local.ns });
    first ??= l;
    links.set(kind, l);
  }
  const senderNs = first!.local.ns;
  const routerId = first!.local.v4;

  const expected = n4 + n6;
  const senders = values.sender!.split(',').map((x) => x.trim()).filter(Boolean);
  for (const snd of senders) if (snd !== 'replay' && snd !== 'bird') throw new Error(`--sender: replay, bird or both, got ${snd}`);
  if (!values['no-full'] && senders.includes('replay')) {
    const dir = tempDir('replay');
    const file = join(dir, 'table.bgp');
    const enc = encodeStream(file);
    log(`sender replay: ${enc.updates} UPDATEs (${r1(enc.mb)} MB, ${attrSets} attribute sets, ${r2(expected / enc.updates)} prefixes per UPDATE)` +
      ` encoded in ${fmtS(enc.ms)} (setup, not timed)`);
    log(`full table from the replay sender, ${expected} prefixes over one session (IPv4 + IPv6 MP-BGP): from Established until the receiver holds all`);
    const full = await fullTable((_k, l) => replayFeed(file, l), links, fullKinds, expected, 'replay');
    json.replay = {
      sender: { encodeMs: r0(enc.ms), streamMB: r1(enc.mb), updates: enc.updates, attrSets },
      full: Object.fromEntries(full), ...judge(full),
    };
    if (!values.keep) rmSync(file, { force: true });
  }
  if (!values['no-full'] && senders.includes('bird')) {
    const dir = tempDir('sender');
    const conf = fullSenderConfig(links, dir, routerId);
    const t0 = now();
    const sender = await startBird(senderNs, dir, conf, async (ctl) => {
      const [a, b] = await Promise.all([birdc(ctl, ['show', 'protocols', 'all', 't4']), birdc(ctl, ['show', 'protocols', 'all', 't6'])]);
      return importedRoutes(a) + importedRoutes(b) >= expected;
    }, 'full-table sender');
    senderTiming.loadMs = now() - t0;
    senderTiming.rssMB = peakRssMB(sender.pid);
    log(`sender BIRD: ${r1(senderTiming.configMB)} MB config (${attrSets} attribute sets) generated in ${fmtS(senderTiming.generateMs)},` +
      ` parsed and loaded in ${fmtS(senderTiming.loadMs)}, RSS ${r0(senderTiming.rssMB)} MB (setup, not timed)`);
    log(`full table from the BIRD sender, ${expected} prefixes over one session (IPv4 + IPv6 MP-BGP): from Established until the receiver holds all`);
    const full = await fullTable((k) => birdFeed(sender, k), links, fullKinds, expected, 'bird');
    sender.child.kill('SIGKILL');
    await new Promise((r) => (sender.child.exitCode !== null || sender.child.signalCode !== null ? r(null) : sender.child.once('exit', r)));
    json.bird = {
      sender: {
        generateMs: r0(senderTiming.generateMs), loadMs: r0(senderTiming.loadMs), configMB: r1(senderTiming.configMB), attrSets,
        rssMB: r1(senderTiming.rssMB),
      },
      full: Object.fromEntries(full), ...judge(full),
    };
  }

  if (values['idle-sessions'] || !values['no-bgperf']) {
    const idle = values['idle-sessions'];
    const bgLinks = new Map([...links].filter(([k]) => k !== 'sink'));
    let k = 0;
    for (const l of bgLinks.values()) await addBgperfAddresses(l, ++k);
    const dir = tempDir(idle ? 'idle-sender' : 'bgperf-sender');
    const sender = await startBird(senderNs, dir, bgperfSenderConfig(bgLinks, dir, routerId),
      async (ctl) => /src100\s+Static\s+master4\s+up/.test(await birdc(ctl, ['show', 'protocols'])), idle ? 'idle-sessions sender' : 'bgperf sender');
    if (idle) {
      log(`idle sessions: ${BGPERF_PEERS} eBGP sessions carrying no routes, RSS per Established session`);
      json.idleSessions = await idleSessions(sender, bgLinks, receivers);
    } else {
      log(`bgperf shape: ${BGPERF_PEERS} peers x ${BGPERF_PREFIXES} prefixes (IPv4) into one receiver, which re-advertises to the other peers`);
      json.bgperf = Object.fromEntries(await bgperf(sender, bgLinks, receivers));
    }
    sender.child.kill('SIGKILL');
  }
} catch (e) {
  error = e;
}
await finish('bench:bgp-ingest', json, started, error, temps, values.keep === true);
