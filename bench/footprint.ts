// bench/footprint: how small the daemon and the CNI plugin are, each figure beside what a user would otherwise run,
// in one run.
//
//   npm run bench:footprint -- [--skip idle,cni,peers100,claimToTor] [--rounds N] [--cni-count N] [--tries N]
//
//   idle      RSS of `blockspeaker run` (built by `npm run build` and started with the launchers' node flags, as
//             users run it) on the demo config (embedded store, no peers,
//             dataplane none), once /readyz says ready and 3 s have passed, beside a bare `node` process idling;
//             median of --rounds runs; settledRssMB 15 s after ready (V8's memory reducer has shrunk the young
//             generation by then). Then the same daemon after one /metrics scrape (prom-client loaded).
//   cni       bench/cni.ts as a child: ADD+DEL (and VERSION) through bin/blockspeaker-cni-shim (the Linux entry:
//             Perl, forwards to the daemon) and through the compiled Node.js blockspeaker-cni, against Debian's
//             host-local, interleaved pod by pod, and the floor no Node.js plugin can beat: `node -e 0`.
//             addDelRatioVsHostLocal is the shim's; nodeAddDelRatioVsHostLocal the Node.js executable's.
//   peers100  bench/bgp-peers.ts (the bgperf shape) as a child (100 peers x 100 prefixes from BIRD into one receiver),
//             blockspeaker and BIRD as receivers: peak RSS and CPU of each (root, bird2).
//   claimToTor bench/claim-to-tor.ts as a child (root, bird2): --tries (200) IPAM assigns over the control socket
//             that claim a new block, and as many that borrow one address, each timed until the route is in the
//             table of a real BIRD peered over a veth pair (BIRD's kernel export, seen by `ip monitor route`).
// The final line is JSON with idle.rssMB, idle.bareNodeRssMB, cni.addDelRatioVsHostLocal, peers100.rssMB,
// peers100.cpuRatioVsBird, claimToTor.p50Ms, claimToTor.p99Ms (claim and borrow together; per case under
// claimToTor.claim and claimToTor.borrow), ...
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { launcher } from '../test/kit/launcher.ts';
import { freePort } from '../test/kit/etcd-cluster.ts';

const { values } = parseArgs({
  options: {
    skip: { type: 'string', default: '' },
    rounds: { type: 'string', default: '3' },
    'cni-count': { type: 'string', default: '50' },
    tries: { type: 'string', default: '200' },
  },
});
const skip = new Set(values.skip!.split(',').map((s) => s.trim()).filter(Boolean));
const ROUNDS = Number(values.rounds);
const root = new URL('..', import.meta.url).pathname;
const r1 = (x: number) => Math.round(x * 10) / 10;
const r2 = (x: number) => Math.round(x * 100) / 100;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => console.error(s);

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  delete env.BLOCKSPEAKER_FROM_SOURCE;
  return env;
}

function rssMB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

// ---- idle ------------------------------------------------------------------------------------------------------

// The node flags and environment every launcher gives the daemon (bin/blockspeaker.js's #! line, read by
// test/kit/launcher.ts; the image, units and DaemonSets match it,
// test/deploy/node-flags.test.ts): the daemon is measured as it is started.
const LAUNCH = launcher(root);
const LAUNCHER_FLAGS = LAUNCH.flags;

async function idleOnce(): Promise<{ daemon: number; settled: number; afterScrape: number; bare: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-footprint-'));
  const port = await freePort();
  // The demo config (fixtures/demo/node.yaml) with its paths in a temp dir and a free status port.
  const demo = readFileSync(join(root, 'fixtures/demo/node.yaml'), 'utf8')
    .replace('./var/blockspeaker.sock', join(dir, 'bs.sock'))
    .replace('./var/blockspeaker', join(dir, 'store'))
    .replace('127.0.0.1:9179', `127.0.0.1:${port}`);
  writeFileSync(join(dir, 'node.yaml'), demo);
  const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', env: cleanEnv() });
  const d = spawn(process.execPath, [...LAUNCHER_FLAGS, join(root, 'bin/blockspeaker.js'), 'run', '-c', join(dir, 'node.yaml'), '--run-dir', dir], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...cleanEnv(), ...LAUNCH.env } });
  let stderr = '';
  d.stderr!.on('data', (c) => (stderr = (stderr + c).slice(-2000)));
  try {
    for (let i = 0; ; i++) {
      if (d.exitCode !== null) throw new Error(`daemon exited: ${stderr}`);
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
      if (ok) break;
      if (i > 600) throw new Error(`daemon not ready after 60 s: ${stderr}`);
      await sleep(100);
    }
    await sleep(3000);
    const daemon = rssMB(d.pid!);
    const b = rssMB(bare.pid!);
    // And once V8's memory reducer has run (it shrinks the young generation start-up grew, some seconds later).
    await sleep(12_000);
    const settled = rssMB(d.pid!);
    await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
    await sleep(1000);
    return { daemon, settled, afterScrape: rssMB(d.pid!), bare: b };
  } finally {
    d.kill('SIGKILL');
    bare.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

async function idle(): Promise<Record<string, number | string>> {
  const runs = [];
  for (let i = 0; i < ROUNDS; i++) {
    runs.push(await idleOnce());
    log(`idle ${i + 1}/${ROUNDS}: daemon ${r1(runs[i]!.daemon)} MB, 15 s after ready ${r1(runs[i]!.settled)} MB, after a scrape ${r1(runs[i]!.afterScrape)} MB, bare node ${r1(runs[i]!.bare)} MB`);
  }
  const rss = median(runs.map((r) => r.daemon));
  const bare = median(runs.map((r) => r.bare));
  return { nodeFlags: LAUNCHER_FLAGS.join(' '), ...(Object.keys(LAUNCH.env).length ? { env: Object.entries(LAUNCH.env).map(([k, v]) => `${k}=${v}`).join(' ') } : {}), rssMB: r1(rss), settledRssMB: r1(median(runs.map((r) => r.settled))), afterScrapeRssMB: r1(median(runs.map((r) => r.afterScrape))), bareNodeRssMB: r1(bare), overBareNodeMB: r1(rss - bare), rounds: ROUNDS };
}

// ---- cni -------------------------------------------------------------------------------------------------------

function childJson(args: string[], what: string): Record<string, any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = spawnSync(process.execPath, ['--import', 'tsx', ...args], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], env: cleanEnv(), maxBuffer: 64 << 20 });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status !== 0 || !last.startsWith('{')) throw new Error(`${what} failed (exit ${r.status}): ${last}`);
  return JSON.parse(last);
}

function nodeFloorMs(n: number): number {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0'], { env: cleanEnv() });
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

function cni(): Record<string, number> {
  const out = childJson(['bench/cni.ts', '--count', values['cni-count']!, '--no-tsx'], 'bench/cni.ts');
  const ours = out.results.shim.add_del.p50_ms as number;
  const node = out.results.dist.add_del.p50_ms as number;
  const hl = out.results['host-local']?.add_del.p50_ms as number | undefined;
  if (hl === undefined) throw new Error('bench/cni.ts ran without host-local (apt-get install containernetworking-plugins)');
  const floor = nodeFloorMs(20);
  log(`cni: ADD+DEL p50 ${ours} ms (blockspeaker-cni-shim), ${node} ms (Node.js blockspeaker-cni) vs ${hl} ms (host-local): ${r2(ours / hl)}x, ${r2(node / hl)}x; two bare node starts: ${r1(2 * floor)} ms`);
  const v = (m: string) => out.results[m]?.version?.p50_ms as number | undefined;
  return {
    addDelP50Ms: ours, hostLocalAddDelP50Ms: hl, addDelRatioVsHostLocal: r2(ours / hl),
    addP50Ms: out.results.shim.add.p50_ms, delP50Ms: out.results.shim.del.p50_ms, hostLocalAddP50Ms: out.results['host-local'].add.p50_ms, hostLocalDelP50Ms: out.results['host-local'].del.p50_ms,
    versionP50Ms: v('shim')!, nodeVersionP50Ms: v('dist')!, hostLocalVersionP50Ms: v('host-local')!,
    nodeAddDelP50Ms: node, nodeAddDelRatioVsHostLocal: r2(node / hl),
    ipcOnlyAddDelP50Ms: out.results['ipc-only'].add_del.p50_ms, nodeStartExitP50Ms: r1(floor), count: out.count,
  };
}

// ---- peers100 --------------------------------------------------------------------------------------------------

function peers100(): Record<string, number> {
  const out = childJson(['bench/bgp-peers.ts', '--receivers', 'blockspeaker,bird'], 'bench/bgp-peers.ts');
  const bs = out.bgperf?.blockspeaker;
  const bird = out.bgperf?.bird;
  if (!bs || !bird) throw new Error('bench/bgp-peers.ts gave no bgperf results');
  log(`peers100: blockspeaker ${bs.peakRssMB} MB, CPU ${bs.cpuMs} ms; BIRD ${bird.peakRssMB} MB, CPU ${bird.cpuMs} ms`);
  return {
    rssMB: bs.peakRssMB, cpuMs: bs.cpuMs, ms: bs.ms, birdRssMB: bird.peakRssMB, birdCpuMs: bird.cpuMs, birdMs: bird.ms,
    cpuRatioVsBird: r2(bs.cpuMs / bird.cpuMs), rssRatioVsBird: r2(bs.peakRssMB / bird.peakRssMB),
  };
}

// ---- claim to ToR ----------------------------------------------------------------------------------------------

function claimToTor(): Record<string, unknown> {
  const out = childJson(['bench/claim-to-tor.ts', '--tries', values.tries!], 'bench/claim-to-tor.ts').claimToTor;
  log(`claimToTor: p50 ${out.p50Ms} ms, p99 ${out.p99Ms} ms (claim p99 ${out.claim.p99Ms} ms, borrow p99 ${out.borrow.p99Ms} ms; ${out.missed} missed)`);
  return out;
}

// ---- main ------------------------------------------------------------------------------------------------------

spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' }); // the compiled daemon, as users run it
const json: Record<string, unknown> = {
  bench: 'footprint', date: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version, loadStart: loadavg().map(r1) },
};
if (!skip.has('idle')) json.idle = await idle();
if (!skip.has('cni')) json.cni = cni();
if (!skip.has('peers100')) json.peers100 = peers100();
if (!skip.has('claimToTor')) json.claimToTor = claimToTor();
(json.machine as Record<string, unknown>).loadEnd = loadavg().map(r1);
console.log(JSON.stringify(json));
