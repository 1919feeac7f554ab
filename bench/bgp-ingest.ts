// bench/bgp-ingest: how fast a receiver takes in a full table over one BGP session — blockspeaker (the `blockspeaker
// run` daemon), BIRD and GoBGP as receivers in the same run, each in its own network namespace joined to the sender's
// by veth. The 100-peer (bgperf) shape is bench/bgp-peers.ts, the memory of idle sessions bench/bgp-idle-sessions.ts.
//
//   npm run bench:bgp-ingest -- [--table FILE] [--limit N] [--shape realistic|packed] [--sender replay,bird]
//                               [--receivers blockspeaker,bird,gobgp] [--no-sink] [--seed N]
//                               [--cpu-prof] [--heap-snapshot] [--node-flags '...'] [--from-source] [--poll-ms MS] [--timeout S] [--keep]
//                               [--node-args "FLAGS"]   (the same as --node-flags: node flags for the blockspeaker receiver)
//                               [--no-build]   (dist/ is already built from these sources: skip `npm run build`)
//                               [--mem-sample]   (the daemon's memory at its RSS peak, bench/lib/mem-sampler.cjs; use --keep)
//                               [--no-launcher]   (without the node flags and environment of bin/blockspeaker.js's #! line)
//                               [--log-level L]   (our daemon's; default debug: its "End-of-RIB" lines give the exact end)
//                               [--no-bgperf]   (accepted and ignored: the bgperf shape is bench:bgp-peers now)
//
// Needs root, bird2 and gobgpd (apt-get install bird2 gobgpd), curl and nsenter. Several minutes on 2 cores.
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
// Receivers (bench/lib/bgp-receivers.ts), one at a time, each against a fresh session from the sender:
//   sink          bench/lib/bgp-sink.ts: counts prefixes and drops them — the sender's own ceiling
//   blockspeaker  `node bin/blockspeaker.js run -c FILE`, the compiled daemon as users run it: with the node flags
//                 and environment of bin/blockspeaker.js's #! line, which every launcher shares (test/kit/launcher.ts;
//                 --no-launcher leaves them out). The bench runs `npm run build` first so dist/ matches the sources;
//                 --from-source runs src/ through tsx instead, which adds tsx: ~40 MB more RSS. One passive peer.
//   bird, gobgp   the interop kit's daemons (accept everything, export everything), one passive peer
// Time = from session Established (the sender's own timestamp: BIRD's `iso long ms`, the replay's log line) until
// the receiver holds every prefix. Exact where the receiver says when: the sink, and blockspeaker, whose debug log
// line "End-of-RIB <family>" is written once every UPDATE before it is in the RIB. Else (and as a cross-check) by
// polling: our /peers prefixes.accepted (curl in the namespace), `birdc show protocols all` "Routes: N imported",
// `gobgp neighbor -j` afi_safis accepted; the figure is the middle of the last two polls, printed with ± half
// their gap. Peak RSS = VmHWM of the receiver process; CPU = its utime + stime over the run (/proc).
//
// --cpu-prof runs our daemon under node --cpu-prof and prints where its time went during the ingest window.
// --node-flags passes extra flags to node for our daemon (e.g. '--max-semi-space-size=1', to see what V8's young
// generation costs).
// --heap-snapshot prints our daemon's /proc/PID/smaps_rollup once it holds every prefix, then has it write a V8 heap
// snapshot (SIGUSR2) into its temp dir and prints the path (use with --keep; summarise with bench/lib/heapsummary.ts).
// BENCH_DEBUG=1 prints every poll and the sink's arrival curve on stderr.
// Human-readable lines first, then one JSON line with every number. Namespaces, daemons and temp dirs are removed at
// the end, on error and on SIGINT/SIGTERM (the interop kit's hooks); --keep keeps the temp dirs (configs, logs, stream).
import { type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { encodeUpdates } from '../src/bgp/codec/index.ts';
import { parseIP, type Prefix } from '../src/net/ip.ts';
import { asSequence, makeAttrs, type PathAttrs } from '../src/rib/attrs.ts';
import type { PrefixList } from '../src/rib/prefixlist.ts';
import { cleanupLeftovers, runInNetns, type Link } from '../test/kit/interop/netns.ts';
import { benchJson, bgpBenchOptions, buildDist, linksFor, logMachine, printProfile, startBgpBench, waitHeld, type Waited } from './lib/bgp-bench.ts';
import {
  RECEIVER_AS, SENDER_AS, startBirdReceiver, startBlockspeaker, startGobgpReceiver, startSink, type Kind, type PeerSpec,
} from './lib/bgp-receivers.ts';
import { birdc, birdSessions, importedRoutes, startBird, type Sender } from './lib/bird-sender.ts';
import { summarizeProfile, type ProfileSummary } from './lib/cpuprofile.ts';
import { loadFullTable, planTable, runCommunity, type Runs } from './lib/full-table.ts';
import { finish, fmtS, log, monoOffset, now, r0, r1, r2 } from './lib/daemon-bench.ts';
import { childrenCpuMs, cpuMs, mainThreadRunDelayMs, peakRssMB, readCounts, rssMB, threadCpuMs } from './lib/proc.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPLAY = join(repoRoot, 'bench/lib/bgp-replay.ts');

// The 100-peer shapes had their flags here; say where they went rather than "unknown option".
const movedFlags: Record<string, string> = {
  '--no-full': 'bench:bgp-peers (100 peers) or bench:bgp-idle-sessions', '--idle-sessions': 'bench:bgp-idle-sessions',
  '--prefixes': 'bench:bgp-peers', '--status-cost': 'bench:bgp-peers',
};
for (const a of process.argv.slice(2)) {
  const to = movedFlags[a.split('=')[0]];
  if (to) {
    console.error(`bench:bgp-ingest: ${a} belongs to the 100-peer shapes, now npm run ${to}`);
    process.exit(2);
  }
}

const { values } = parseArgs({
  options: {
    ...bgpBenchOptions,
    table: { type: 'string' },
    limit: { type: 'string' },
    shape: { type: 'string', default: 'realistic' },
    sender: { type: 'string', default: 'replay,bird' },
    'no-sink': { type: 'boolean', default: false },
    'no-bgperf': { type: 'boolean', default: false }, // no bgperf shape here any more: accepted so older command lines run
    seed: { type: 'string', default: '1' },
  },
});

if (values.shape !== 'realistic' && values.shape !== 'packed') throw new Error('--shape must be realistic or packed');
const { receivers, polling, temps, tempDir } = startBgpBench('bench:bgp-ingest', values);

// ---- the table ---------------------------------------------------------------------------------------------

const { v4, v6, path: tablePath } = await loadFullTable(values.table, Number(values.seed));
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
logMachine();

// ---- the table's attributes (one plan for both senders) ---------------------------------------------------

const { pathPool, runs4, runs6 } = planTable(Number(values.seed), n4, n6, values.shape === 'packed');
const attrSets = values.shape === 'packed' ? 1 : runs4.count + runs6.count;

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
  /**
   * Of cpuMs, the main thread's (the rest: for our daemon V8's helper threads, parallel and concurrent GC and
   * background compiles; BIRD has one thread).
   */
  mainThreadCpuMs: number;
  /** How long the main thread was ready to run but waited for a CPU (schedstat): wall time lost to contention. */
  mainThreadWaitMs: number;
  peakRssMB: number;
  rssMB: number;
  polls: number;
  pollCpuMs: number;
  /** BIRD sender: its CPU time over the run. */
  senderCpuMs: number | null;
  /** The receiver's read system calls over the run and their mean size (KB), when /proc/PID/io can be read. */
  reads: number | null;
  readKB: number | null;
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
      : kind === 'blockspeaker' ? await startBlockspeaker(link, peers, `bs-${label}`, values, tempDir)
        : kind === 'bird' ? await startBirdReceiver(link, peers, false)
          : await startGobgpReceiver(link, peers);
    const feed = feedFor(kind, link);
    const load1 = loadavg()[0];
    const cpu0 = cpuMs(rcv.pid);
    const main0 = threadCpuMs(rcv.pid).main;
    const wait0 = mainThreadRunDelayMs(rcv.pid);
    const io0 = readCounts(rcv.pid);
    const snd0 = feed.cpuMs();
    const poll0 = childrenCpuMs();
    const tStart = now();
    let w: Waited;
    let t0: number;
    try {
      await feed.start();
      w = await waitHeld(rcv, expected, tStart, polling, feed.tick);
      t0 = await feed.established();
      // BIRD's "since" is its last state change: one after the table was held means the session went down and up
      // again during the run, and the time from Established would be meaningless (it came out negative once).
      if (t0 > w.doneAt) throw new Error(`${kind}: the sender's session became Established ${r0(t0 - w.doneAt)} ms after the receiver held the table (it flapped during the run)`);
    } catch (e) {
      await rcv.stop();
      await feed.stop();
      throw e;
    }
    const cpu = cpuMs(rcv.pid) - cpu0;
    const mainCpu = threadCpuMs(rcv.pid).main - main0;
    const mainWait = mainThreadRunDelayMs(rcv.pid) - wait0;
    const io1 = readCounts(rcv.pid);
    const reads = io0 && io1 ? io1.reads - io0.reads : null;
    const readKB = io0 && io1 && reads ? (io1.bytes - io0.bytes) / reads / 1024 : null;
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
      prefixes: w.held, prefixesPerS: r0(expected / (ms / 1000)), cpuMs: r0(cpu), mainThreadCpuMs: r0(mainCpu), mainThreadWaitMs: r0(mainWait), peakRssMB: r1(hwm), rssMB: r1(rss),
      polls: w.polls, pollCpuMs: r0(pollCpu),
      senderCpuMs: snd0 === null || snd1 === null ? null : r0(snd1 - snd0), reads, readKB: readKB === null ? null : r1(readKB), sentMs: sentAt === null ? null : r0(sentAt - t0),
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
      reads !== null ? `${reads} reads of ${r1(readKB ?? 0)} KB` : null,
      `polls ${w.polls} = ${r0(pollCpu)} ms CPU`, `load ${r1(load1)}`,
    ].filter(Boolean).join(', ');
    log(`  ${kind.padEnd(12)} ${fmtS(ms).padStart(9)}  (${(res.prefixesPerS / 1000).toFixed(0)}k prefixes/s, ${res.resolutionMs ? `±${res.resolutionMs} ms` : 'exact'})` +
      `  CPU ${fmtS(cpu)}${cpu - mainCpu >= 10 ? ` (main thread ${fmtS(mainCpu)}${mainWait >= 10 ? `, ${fmtS(mainWait)} waiting for a CPU` : ''})` : ''}  peak RSS ${r0(hwm)} MB  [${extra}]`);
    if (res.profile) printProfile(res.profile);
  }
  return results;
}

/**
 * Ratios against BIRD and GoBGP, and whether ours meets its goals (no slower than BIRD, twice as fast as GoBGP, peak
 * RSS at most 350 MB), from one sender's results.
 */
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

// ---- main ------------------------------------------------------------------------------------------------------

const json = benchJson('bgp-ingest', values, { table: { source: tableName, v4: n4, v6: n6, shape: values.shape } });
const started = now();
let error: unknown = null;
try {
  cleanupLeftovers();
  await buildDist(receivers, values);
  const fullKinds: Kind[] = [...(values['no-sink'] ? [] : ['sink' as const]), ...receivers];
  if (!fullKinds.length) throw new Error('nothing to measure: give --receivers or leave out --no-sink');
  const links = await linksFor(fullKinds);
  const first = links.values().next().value!;
  const senderNs = first.local.ns;
  const routerId = first.local.v4;

  const expected = n4 + n6;
  const senders = values.sender!.split(',').map((x) => x.trim()).filter(Boolean);
  for (const snd of senders) if (snd !== 'replay' && snd !== 'bird') throw new Error(`--sender: replay, bird or both, got ${snd}`);
  if (senders.includes('replay')) {
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
  if (senders.includes('bird')) {
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
} catch (e) {
  error = e;
}
await finish('bench:bgp-ingest', json, started, error, temps, values.keep === true);
