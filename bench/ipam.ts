// bench/ipam: durable allocations per second and latency on the embedded store, against Debian's host-local CNI
// IPAM plugin doing the same number of allocations in the same run (the baseline users have today).
//
//   npm run bench:ipam -- [--count N] [--host-local PATH] [--rounds R]
//
// blockspeaker runs in-process (as the daemon would serve CNI requests): sequential (1 in flight, one pod at a
// time), 8 and 64 in flight (a node starting many pods). Every acknowledged allocation is fdatasync'ed.
// host-local is executed per the CNI spec (CNI_COMMAND=ADD, config on stdin), sequentially and 8 at a time; it
// takes a file lock but never fsyncs, so the comparison is generous to the baseline.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Ipam } from '../src/ipam/ipam.ts';
import { openFileStore } from '../src/store/file.ts';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '2000' },
    'host-local': { type: 'string', default: '/usr/lib/cni/host-local' },
    rounds: { type: 'string', default: '3' },
  },
});
const COUNT = Number(values.count);
const ROUNDS = Number(values.rounds);
const HOST_LOCAL = values['host-local']!;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];

interface Run {
  opsPerSec: number;
  p50ms: number;
  p99ms: number;
}

async function runConcurrent(count: number, inFlight: number, op: (i: number) => Promise<void>): Promise<Run> {
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        const s = performance.now();
        await op(i);
        lat.push(performance.now() - s);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { opsPerSec: count / secs, p50ms: pct(lat, 0.5), p99ms: pct(lat, 0.99) };
}

async function blockspeaker(inFlight: number): Promise<Run & { syncs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-ipam-'));
  try {
    const store = await openFileStore(dir);
    const ipam = new Ipam(store);
    await ipam.addPool({ name: 'pods', cidr: '10.64.0.0/12', blockSize: 26 });
    await ipam.setHost({ name: 'node-a', os: 'linux', labels: {} });
    const before = store.stats().syncs;
    const r = await runConcurrent(COUNT, inFlight, async (i) => {
      const res = await ipam.autoAssign({ host: 'node-a', num4: 1, handle: `pod-${i}.eth0` });
      if (res.ipv4.length !== 1) throw new Error(`allocation ${i} failed: ${res.messages.join('; ')}`);
    });
    const syncs = store.stats().syncs - before;
    await store.close();
    return { ...r, syncs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function hostLocalAdd(dataDir: string, id: string): Promise<void> {
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench',
    type: 'host-local',
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: '10.64.0.0/12' }]] },
  });
  return new Promise((resolve, reject) => {
    const p = spawn(HOST_LOCAL, [], {
      env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: '/var/run/netns/bench', CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 && out.includes('"ips"') ? resolve() : reject(new Error(`host-local exited ${code}: ${out}`))));
    p.stdin.end(conf);
  });
}

async function hostLocal(inFlight: number): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-hl-'));
  try {
    return await runConcurrent(COUNT, inFlight, (i) => hostLocalAdd(dir, `c${i}`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function summarise(runs: Run[]): Run {
  return { opsPerSec: median(runs.map((r) => r.opsPerSec)), p50ms: median(runs.map((r) => r.p50ms)), p99ms: median(runs.map((r) => r.p99ms)) };
}

if (!existsSync(HOST_LOCAL)) {
  console.error(`bench/ipam: ${HOST_LOCAL} not found (apt-get install containernetworking-plugins)`);
  process.exit(1);
}

const results: Record<string, Run & { syncs?: number }> = {};
for (const [name, fn] of [
  ['blockspeaker_seq', () => blockspeaker(1)],
  ['blockspeaker_8', () => blockspeaker(8)],
  ['blockspeaker_64', () => blockspeaker(64)],
  ['hostlocal_seq', () => hostLocal(1)],
  ['hostlocal_8', () => hostLocal(8)],
] as const) {
  const runs: (Run & { syncs?: number })[] = [];
  for (let r = 0; r < ROUNDS; r++) runs.push(await fn());
  results[name] = { ...summarise(runs), ...('syncs' in runs[0] ? { syncs: median(runs.map((x) => x.syncs!)) } : {}) };
  const x = results[name];
  console.log(`${name.padEnd(18)} ${x.opsPerSec.toFixed(0).padStart(8)} allocs/s   p50 ${x.p50ms.toFixed(3)} ms   p99 ${x.p99ms.toFixed(3)} ms${x.syncs !== undefined ? `   fdatasyncs ${x.syncs}` : ''}`);
}

const best = (a: Run, b: Run) => (a.opsPerSec > b.opsPerSec ? a : b);
const hl = best(results.hostlocal_seq, results.hostlocal_8);
const summary = {
  bench: 'ipam',
  date: new Date().toISOString(),
  cpu: cpus()[0]?.model,
  count: COUNT,
  rounds: ROUNDS,
  ...results,
  ratio_seq: results.blockspeaker_seq.opsPerSec / results.hostlocal_seq.opsPerSec,
  ratio_8: results.blockspeaker_8.opsPerSec / results.hostlocal_8.opsPerSec,
  ratio_best: best(best(results.blockspeaker_seq, results.blockspeaker_8), results.blockspeaker_64).opsPerSec / hl.opsPerSec,
};
console.log(JSON.stringify(summary));
