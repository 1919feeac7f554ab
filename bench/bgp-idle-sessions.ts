// bench/bgp-idle-sessions: what an Established BGP session that carries no routes costs a receiver in memory,
// blockspeaker and BIRD side by side: the 100 sessions of the bgperf shape (bench/lib/bgperf.ts) with no
// prefixes on them.
//
//   npm run bench:bgp-idle-sessions -- [--receivers blockspeaker,bird] [--heap-snapshot] (with --keep)
//                                      [--cpu-prof] [--node-flags '...'] [--from-source] [--timeout S] [--keep]
//                                      [--node-args "FLAGS"] [--no-build] [--mem-sample] [--no-launcher] [--log-level L]
//                                      (as in bench:bgp-ingest; bench/lib/bgp-bench.ts). GoBGP is not measured here.
//
// Needs root, bird2 and gobgpd (apt-get install bird2 gobgpd), curl and nsenter.
//
// Per receiver: RSS (VmRSS) with no peers at all, then with the 100 peers configured but down, then with all 100
// Established and quiet for a few seconds; the difference over 100 is the figure (RSS per session), with the resident
// memory by kind of mapping at each point. With --heap-snapshot, our daemon also writes a V8 heap snapshot at each
// point and the live JS heap's growth per peer and per session is printed, by constructor (the snapshots themselves
// allocate: the RSS figure is then an upper bound).
// Human-readable lines first, then one JSON line with every number (`idleSessions`: per receiver). Namespaces,
// daemons and temp dirs are removed at the end, on error and on SIGINT/SIGTERM; --keep keeps the temp dirs.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { Link } from '../test/kit/interop/netns.ts';
import { bgpBenchOptions, logMachine, startBgpBench } from './lib/bgp-bench.ts';
import { startBirdReceiver, startBlockspeaker, type Kind, type PeerSpec, type Receiver } from './lib/bgp-receivers.ts';
import { BGPERF_PEERS, bgperfPeers, runBgperf } from './lib/bgperf.ts';
import { birdc, birdSessions, type Sender } from './lib/bird-sender.ts';
import { fmtS, log, now, r0, r1, sleep } from './lib/daemon-bench.ts';
import { summarize } from './lib/heapsummary.ts';
import { cpuMs, peakRssMB, rssMB } from './lib/proc.ts';

const { values } = parseArgs({ options: bgpBenchOptions });
const { receivers, polling, temps, tempDir } = startBgpBench('bench:bgp-idle-sessions', values);
const { timeoutMs } = polling;
logMachine();

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
    const peers = bgperfPeers(k);
    const start = (ps: PeerSpec[]) => (kind === 'blockspeaker' ? startBlockspeaker(link, ps, 'bs-idle', values, tempDir) : startBirdReceiver(link, ps, true));
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

await runBgperf({
  bench: 'bench:bgp-idle-sessions', values, receivers, temps, prefixes: 0, senderDir: 'idle-sender', what: 'idle-sessions sender', key: 'idleSessions',
  measure: async (sender, links) => {
    log(`idle sessions: ${BGPERF_PEERS} eBGP sessions carrying no routes, RSS per Established session`);
    return idleSessions(sender, links, receivers);
  },
});
