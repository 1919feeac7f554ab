// bench/ipam-etcd: IPAM allocations per second and latency on a real single-member etcd on loopback, with 1 host
// and with 8 hosts allocating at the same time, each host its own process (as each node's sidecar would be).
//
//   npm run bench:ipam-etcd -- [--count N] [--hosts8-count N] [--in-flight K] [--rounds R]
//
// Each host allocates --count addresses (default 500 for 1 host, 125 each for 8 hosts) with K requests in flight
// (default 1: one pod at a time). Processes start and connect first and are released together, so start-up is not
// measured. Throughput = all allocations / wall time from release to the last one done; p50/p99 over every
// allocation's latency. etcd runs with its defaults (fsync on every commit). Prints a final JSON line.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Ipam } from '../src/ipam/ipam.ts';
import { openStore } from '../src/store/open.ts';
import type { EtcdStore } from '../src/store/etcd.ts';
import { EtcdCluster } from '../test/kit/etcd-cluster.ts';

const { values, positionals } = parseArgs({
  options: {
    child: { type: 'string' },
    count: { type: 'string', default: '500' },
    'hosts8-count': { type: 'string', default: '125' },
    'in-flight': { type: 'string', default: '1' },
    rounds: { type: 'string', default: '3' },
  },
  allowPositionals: true,
});

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// ---- child: one host -------------------------------------------------------------------------------------------

async function child(spec: string, host: string, count: number, inFlight: number): Promise<void> {
  const store = (await openStore(spec)) as EtcdStore;
  const ipam = new Ipam(store);
  await ipam.getConfig(); // connected
  process.stdout.write('READY\n');
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  const lat: number[] = [];
  let next = 0;
  const before = store.stats().txns;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        const s = performance.now();
        const r = await ipam.autoAssign({ host, num4: 1, handle: `${host}-${i}` });
        if (r.ipv4.length !== 1) throw new Error(`allocation ${i} failed: ${r.messages.join('; ')}`);
        lat.push(performance.now() - s);
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(`RESULT ${JSON.stringify({ lat, txns: store.stats().txns - before, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`);
  await store.close();
}

// ---- parent ----------------------------------------------------------------------------------------------------

interface Run {
  hosts: number;
  allocations: number;
  opsPerSec: number;
  p50ms: number;
  p99ms: number;
  txnsPerAlloc: number;
  /** CPU time per allocation: the allocating processes, and etcd. */
  clientCpuMs: number;
  etcdCpuMs: number;
}

/** CPU time (user + system) a process has used so far, in ms. */
function cpuOf(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime in clock ticks (USER_HZ = 100)
  } catch {
    return 0;
  }
}

async function round(spec: string, etcdPid: number | undefined, hosts: number, count: number, inFlight: number, tag: string): Promise<Run> {
  const self = fileURLToPath(import.meta.url);
  const procs = Array.from({ length: hosts }, (_, i) =>
    spawn(process.execPath, ['--import', 'tsx', self, '--child', spec, `${tag}-h${i}`, String(count), String(inFlight)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const outs = procs.map((p) => {
    let buf = '';
    const ready = new Promise<void>((resolve) => p.stdout.on('data', (d) => (buf += d) && /READY\n/.test(buf) && resolve()));
    const done = new Promise<{ lat: number[]; txns: number; cpuMs: number }>((resolve, reject) =>
      p.on('close', (code) => {
        const m = /RESULT (.*)\n/.exec(buf);
        if (code === 0 && m) resolve(JSON.parse(m[1]));
        else reject(new Error(`bench child exited ${code}`));
      }),
    );
    return { ready, done };
  });
  await Promise.all(outs.map((o) => o.ready));
  const etcd0 = cpuOf(etcdPid);
  const t0 = performance.now();
  for (const p of procs) p.stdin.end('go\n');
  const results = await Promise.all(outs.map((o) => o.done));
  const secs = (performance.now() - t0) / 1000;
  const etcdCpu = cpuOf(etcdPid) - etcd0;
  const lat = results.flatMap((r) => r.lat).sort((a, b) => a - b);
  const txns = results.reduce((n, r) => n + r.txns, 0);
  return {
    hosts,
    allocations: lat.length,
    opsPerSec: Math.round(lat.length / secs),
    p50ms: +pct(lat, 0.5).toFixed(2),
    p99ms: +pct(lat, 0.99).toFixed(2),
    txnsPerAlloc: +(txns / lat.length).toFixed(2),
    clientCpuMs: +(results.reduce((n, r) => n + r.cpuMs, 0) / lat.length).toFixed(2),
    etcdCpuMs: +(etcdCpu / lat.length).toFixed(2),
  };
}

async function main(): Promise<void> {
  const rounds = Number(values.rounds);
  const inFlight = Number(values['in-flight']);
  const teardowns: Array<() => unknown> = [];
  const etcd = await EtcdCluster.start({ teardown: (f: () => unknown) => teardowns.push(f) });
  try {
    const setup = new Ipam(await openStore(etcd.url));
    await setup.addPool({ name: 'pods', cidr: '10.64.0.0/12', blockSize: 26 });
    for (let r = 0; r < rounds; r++) for (let i = 0; i < 8; i++) await setup.setHost({ name: `r${r}-h${i}`, os: 'linux', labels: {} });
    for (let r = 0; r < rounds; r++) for (let i = 0; i < 1; i++) await setup.setHost({ name: `s${r}-h${i}`, os: 'linux', labels: {} });
    await setup.store.close();
    const summarize = (runs: Run[]) => {
      const best = runs.find((x) => x.opsPerSec === median(runs.map((y) => y.opsPerSec)))!;
      return { ...best, rounds: runs.map((x) => x.opsPerSec) };
    };
    const one: Run[] = [];
    const eight: Run[] = [];
    for (let r = 0; r < rounds; r++) {
      one.push(await round(etcd.url, etcd.members[0].proc?.pid, 1, Number(values.count), inFlight, `s${r}`));
      console.log(`1 host:  ${JSON.stringify(one[r])}`);
      eight.push(await round(etcd.url, etcd.members[0].proc?.pid, 8, Number(values['hosts8-count']), inFlight, `r${r}`));
      console.log(`8 hosts: ${JSON.stringify(eight[r])}`);
    }
    const version = /etcd Version: (\S+)/.exec(spawnSync('etcd', ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[1];
    console.log(
      JSON.stringify({
        bench: 'ipam-etcd',
        etcd: version,
        cpus: cpus().length,
        inFlightPerHost: inFlight,
        hosts1: summarize(one),
        hosts8: summarize(eight),
      }),
    );
  } finally {
    for (const f of teardowns) await f();
  }
}

if (values.child !== undefined) {
  // --child SPEC HOST COUNT IN_FLIGHT
  const [host, count, inFlight] = positionals;
  await child(values.child, host, Number(count), Number(inFlight));
} else {
  await main();
}
