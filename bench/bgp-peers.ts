// bench/bgp-peers: the bgperf shape, 100 peers x 100 prefixes converging into one receiver: blockspeaker (the
// `blockspeaker run` daemon), BIRD and GoBGP as receivers in the same run, each in its own network namespace joined to
// the sender's by veth.
//
//   npm run bench:bgp-peers -- [--receivers blockspeaker,bird,gobgp] [--prefixes N] (per peer, default 100)
//                              [--status-cost N]   (once converged and quiet: our CPU per /peers and /metrics, N each)
//                              [--cpu-prof] [--heap-snapshot] [--node-flags '...'] [--from-source] [--poll-ms MS]
//                              [--timeout S] [--keep] [--node-args "FLAGS"] [--no-build] [--mem-sample]
//                              [--no-launcher] [--log-level L]   (as in bench:bgp-ingest; bench/lib/bgp-bench.ts)
//
// Needs root, bird2 and gobgpd (apt-get install bird2 gobgpd), curl and nsenter.
//
// The sender (bench/lib/bgperf.ts): one BIRD with 100 `protocol bgp`, each from its own source address (100
// addresses on the sender's veth) with its own AS and router ID, each exporting its own static protocol of 100 /24s,
// towards 100 addresses of the receiver. The receiver has 100 passive peers and, as a router, re-advertises what it
// learns to the other 99. Time from `birdc enable` (all 100 at once) until the receiver holds all 10,000 prefixes,
// also from the first and from the last session Established; receiver CPU time over that. Receivers are started as
// in bench:bgp-ingest (bench/lib/bgp-receivers.ts); counted by polling (our /peers, `birdc show route count`,
// `gobgp neighbor -j`), exact for ours by its End-of-RIB log lines.
//
// --cpu-prof prints where our daemon's time went from enable until it held everything. --heap-snapshot prints our
// daemon's /proc/PID/smaps_rollup once it holds every prefix, then has it write a V8 heap snapshot (use with --keep).
// BENCH_DEBUG=1 prints every poll on stderr.
// Human-readable lines first, then one JSON line with every number (`bgperf`: per receiver). Namespaces, daemons and
// temp dirs are removed at the end, on error and on SIGINT/SIGTERM; --keep keeps the temp dirs.
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { Link } from '../test/kit/interop/netns.ts';
import { bgpBenchOptions, logMachine, printProfile, startBgpBench, waitHeld } from './lib/bgp-bench.ts';
import { startBirdReceiver, startBlockspeaker, startGobgpReceiver, type Kind, type Receiver } from './lib/bgp-receivers.ts';
import { BGPERF_PEERS, bgperfPeers, runBgperf } from './lib/bgperf.ts';
import { birdc, birdSessions, type Sender } from './lib/bird-sender.ts';
import { summarizeProfile, type ProfileSummary } from './lib/cpuprofile.ts';
import { fmtS, log, monoOffset, now, r0, r1 } from './lib/daemon-bench.ts';
import { cpuMs, peakRssMB, threadCpuMs } from './lib/proc.ts';

const { values } = parseArgs({
  options: {
    ...bgpBenchOptions,
    prefixes: { type: 'string', default: '100' }, // per peer
    'status-cost': { type: 'string', default: '0' },
  },
});
const BGPERF_PREFIXES = Number(values.prefixes);
const { receivers, polling, temps, tempDir } = startBgpBench('bench:bgp-peers', values);
logMachine();

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
  /** Of cpuMs, the main thread's (the rest: V8's helper threads; BIRD has one thread). */
  mainThreadCpuMs: number;
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
    const peers = bgperfPeers(k);
    const rcv = kind === 'blockspeaker' ? await startBlockspeaker(link, peers, 'bs-bgperf', values, tempDir)
      : kind === 'bird' ? await startBirdReceiver(link, peers, true)
        : await startGobgpReceiver(link, peers);
    const load1 = loadavg()[0];
    const cpu0 = cpuMs(rcv.pid);
    const main0 = threadCpuMs(rcv.pid).main;
    const tEnable = now();
    await birdc(sender.ctl, ['enable', `"q${k}_*"`]);
    const w = await waitHeld(rcv, expected, tEnable, polling, () => birdc(sender.ctl, ['show', 'status']).then(() => {}));
    const cpu = cpuMs(rcv.pid) - cpu0;
    const mainCpu = threadCpuMs(rcv.pid).main - main0;
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
      cpuMs: r0(cpu), mainThreadCpuMs: r0(mainCpu), peakRssMB: r1(hwm), resolutionMs: r0(exact !== null ? 0 : (w.doneAt - lower) / 2), polls: w.polls, load1: r1(load1),
      ...(statusCost ? { statusCost } : {}),
    };
    if (kind === 'blockspeaker' && rcv.profile) {
      const f = rcv.profile();
      if (f) res.profile = summarizeProfile(f, tEnable - monoOffset, doneAt - monoOffset);
    }
    results.set(kind, res);
    log(`  ${kind.padEnd(12)} ${fmtS(res.ms).padStart(9)} from enable, ${fmtS(res.fromFirstEstablishedMs)} from first Established,` +
      ` ${fmtS(res.fromLastEstablishedMs)} from last (sessions up over ${fmtS(res.establishSpreadMs)}; ${res.resolutionMs ? `±${res.resolutionMs} ms` : 'exact'})  CPU ${fmtS(cpu)}${cpu - mainCpu >= 10 ? ` (main thread ${fmtS(mainCpu)})` : ''}  peak RSS ${r0(hwm)} MB  [load ${r1(load1)}]`);
    if (res.profile) printProfile(res.profile);
  }
  return results;
}

await runBgperf({
  bench: 'bench:bgp-peers', values, receivers, temps, prefixes: BGPERF_PREFIXES, senderDir: 'bgperf-sender', what: 'bgperf sender', key: 'bgperf',
  measure: async (sender, links) => {
    log(`bgperf shape: ${BGPERF_PEERS} peers x ${BGPERF_PREFIXES} prefixes (IPv4) into one receiver, which re-advertises to the other peers`);
    return Object.fromEntries(await bgperf(sender, links, receivers));
  },
});
