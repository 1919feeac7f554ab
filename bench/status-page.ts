// bench/status-page: what the status page costs the daemon. A compiled daemon (dist/, compiled here into a temp
// dir) with IPAM (one pool, 150 addresses over 3 blocks) and 4 configured peers is started per round; its resident
// memory is read at idle, then a visitor polls it, then memory is read again. Two visitors, interleaved by round:
//
//   overview   the status page's way: the page, script and stylesheet once, then GET /overview per refresh
//   endpoints  what a page without /overview would poll per refresh: /status /readyz /peers /ipam/pools
//              /ipam/blocks /dataplane /warnings
//
//   npm run bench:status-page -- [--rounds R] [--polls N]
//
// Reports medians over rounds: idle RSS, RSS after the visitor, per-refresh latency. The final line is JSON.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ipcRequest } from '../src/ipc/client.ts';
import { freePort } from '../test/kit/wait.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, polls: { type: 'string', default: '300' } } });
const ROUNDS = Number(values.rounds);
const POLLS = Number(values.polls);
const root = new URL('..', import.meta.url).pathname;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r2 = (x: number) => Math.round(x * 100) / 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const work = mkdtempSync(join(tmpdir(), 'bs-bench-page-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const out = join(work, 'dist');
const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json'), '--outDir', out], { stdio: 'inherit' });
if (tsc.status !== 0) throw new Error('tsc failed');
// Laid out like the package: ESM, and the dependencies where node looks for them.
writeFileSync(join(work, 'package.json'), '{"type":"module"}\n');
symlinkSync(join(root, 'node_modules'), join(work, 'node_modules'));
const main = join(out, 'src/cli/main.js');

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function startDaemon(tag: string): Promise<{ child: ChildProcess; port: number; dir: string }> {
  const dir = mkdtempSync(join(work, `${tag}-`));
  const port = await freePort('127.0.0.1');
  const socket = join(dir, 'bs.sock');
  writeFileSync(join(dir, 'node.yaml'), `node: { name: bench, os: linux }
bgp:
  asn: 65010
  routerId: 10.0.0.1
  listen: false
  peers: [${[9, 10, 11, 12].map((n) => `{ address: 127.0.0.${n}, asn: 65001 }`).join(', ')}]
ipam:
  store: ${join(dir, 'store')}
  pools: [{ name: pods, cidr: 10.244.0.0/22, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: ${socket} }
`);
  const child = spawn(process.execPath, [main, 'run', '-c', join(dir, 'node.yaml'), '--run-dir', dir], { stdio: 'ignore' });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
    } catch {
      if (i > 300) throw new Error('daemon did not start');
    }
    await sleep(50);
  }
  for (let i = 0; i < 10; i++) await ipcRequest(socket, 'ipam.assign', { handle: `bench-${i}`, num4: 15, pools: ['pods'] });
  return { child, port, dir };
}

const ENDPOINTS = ['/status', '/readyz', '/peers', '/ipam/pools', '/ipam/blocks', '/dataplane', '/warnings'];

async function visit(mode: 'overview' | 'endpoints', port: number): Promise<number[]> {
  const get = async (p: string) => {
    const r = await fetch(`http://127.0.0.1:${port}${p}`);
    await r.arrayBuffer();
  };
  if (mode === 'overview') for (const p of ['/', '/ui/app.js', '/ui/style.css']) await get(p);
  const times: number[] = [];
  for (let i = 0; i < POLLS; i++) {
    const t0 = performance.now();
    if (mode === 'overview') await get('/overview');
    else await Promise.all(ENDPOINTS.map(get)); // as a page would: in parallel
    times.push(performance.now() - t0);
  }
  return times;
}

const res: Record<string, { idle: number[]; after: number[]; ms: number[] }> = { overview: { idle: [], after: [], ms: [] }, endpoints: { idle: [], after: [], ms: [] } };
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of (r % 2 ? ['endpoints', 'overview'] : ['overview', 'endpoints']) as ('overview' | 'endpoints')[]) {
    const d = await startDaemon(mode);
    await sleep(3000); // settle: start-up garbage collected, sessions retrying
    const idle = rssKiB(d.child.pid!);
    const ms = await visit(mode, d.port);
    await sleep(1000);
    const after = rssKiB(d.child.pid!);
    d.child.kill('SIGINT');
    await new Promise((x) => d.child.once('exit', x));
    res[mode].idle.push(idle);
    res[mode].after.push(after);
    res[mode].ms.push(median(ms));
    console.log(`round ${r + 1} ${mode.padEnd(9)} idle ${(idle / 1024).toFixed(1)} MiB, after ${POLLS} refreshes ${(after / 1024).toFixed(1)} MiB, refresh median ${median(ms).toFixed(2)} ms`);
  }
}
const summary = Object.fromEntries(Object.entries(res).map(([k, v]) => [k, {
  idleRssMiB: r2(median(v.idle) / 1024), afterRssMiB: r2(median(v.after) / 1024), growthMiB: r2(median(v.after.map((a, i) => a - v.idle[i]!)) / 1024),
  refreshMedianMs: r2(median(v.ms)),
}]));
console.log(JSON.stringify({ bench: 'status-page', rounds: ROUNDS, polls: POLLS, cpus: cpus().length, load: r2(loadavg()[0]!), ...summary,
  refreshRatio: r2(summary.endpoints!.refreshMedianMs / summary.overview!.refreshMedianMs) }));
