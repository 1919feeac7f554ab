// Linux route programming at scale, inside a throwaway network namespace (needs root and iproute2):
//  - install N routes (default 100,000: own-block blackholes, remote /26s, borrowed /32s, IPv6 /64s) through the
//    reconcile path (read table, plan, one `ip -batch`), a no-op reconcile over the full table, a 1% next-hop move,
//    and withdrawing everything;
//  - the naive approach, one `ip route add` process per route, on a smaller count (default 2,000), next to the
//    batch path on the same count; the naive time for N is extrapolated linearly from it (stated in the output).
// Prints a table, then one JSON line. Env: LINUX_ROUTES_N, LINUX_ROUTES_NAIVE_N.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { type Prefix, parseIP, parsePrefix } from '../src/net/ip.ts';
import { type RemoteRoute, desiredRoutes } from '../src/linux/desired.ts';
import { planRoutes } from '../src/linux/planner.ts';
import { IpRouteProgrammer, opLine } from '../src/linux/programmer.ts';
import { LinuxReconciler } from '../src/linux/reconcile.ts';

const N = Number(process.env.LINUX_ROUTES_N ?? 100_000);
const NAIVE_N = Number(process.env.LINUX_ROUTES_NAIVE_N ?? 2_000);
const TABLE = 200;
const PROTO = 181;

if (process.getuid?.() !== 0) {
  console.error('bench/linux-routes needs root (ip netns add)');
  process.exit(2);
}

const ns = `bs-linux-bench-${process.pid}`;
const ip = (...args: string[]): string => execFileSync('ip', ['-n', ns, ...args], { encoding: 'utf8', maxBuffer: 1 << 30 });
const cleanup = (): void => void spawnSync('ip', ['netns', 'del', ns]);
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});

/** N desired inputs: 2% own blocks, 10% IPv6 /64s, 8% borrowed /32s, the rest remote IPv4 /26s; 8 next hops. */
function scenario(n: number, shift = 0): { local: Prefix[]; remote: RemoteRoute[] } {
  const nh4 = Array.from({ length: 8 }, (_, i) => parseIP(`192.0.2.${10 + i}`));
  const nh6 = Array.from({ length: 8 }, (_, i) => parseIP(`2001:db8::${(10 + i).toString(16)}`));
  const local: Prefix[] = [];
  const remote: RemoteRoute[] = [];
  const nLocal = Math.round(n * 0.02);
  const nV6 = Math.round(n * 0.1);
  const nHost = Math.round(n * 0.08);
  const nRemote = n - nLocal - nV6 - nHost;
  // /26 blocks walk 10.64.0.0/10 (4 per /24); hosts sit in 10.32.0.0/11; IPv6 /64s in fd00:10::/32.
  const block = (i: number) => parsePrefix(`10.${64 + (i >> 10)}.${(i >> 2) & 255}.${(i & 3) * 64}/26`);
  for (let i = 0; i < nLocal; i++) local.push(block(i));
  for (let i = 0; i < nRemote; i++) remote.push({ prefix: block(nLocal + i), nextHop: nh4[(i + shift) % 8] });
  for (let i = 0; i < nHost; i++) {
    remote.push({ prefix: parsePrefix(`10.${32 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}/32`), nextHop: nh4[(i * 3) % 8] });
  }
  for (let i = 0; i < nV6; i++) {
    remote.push({ prefix: parsePrefix(`fd00:10:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`), nextHop: nh6[i % 8] });
  }
  return { local, remote };
}

const ms = (t0: number): number => Math.round((performance.now() - t0) * 10) / 10;

async function main(): Promise<Record<string, unknown>> {
  spawnSync('ip', ['netns', 'del', ns]);
  execFileSync('ip', ['netns', 'add', ns]);
  ip('link', 'set', 'lo', 'up');
  ip('link', 'add', 'bs0', 'type', 'veth', 'peer', 'name', 'bs1');
  ip('link', 'set', 'bs0', 'up');
  ip('link', 'set', 'bs1', 'up');
  ip('addr', 'add', '192.0.2.1/24', 'dev', 'bs0');
  ip('addr', 'add', '2001:db8::1/64', 'dev', 'bs0', 'nodad');

  const prog = new IpRouteProgrammer({ table: TABLE, protocol: PROTO, netns: ns });
  let input = scenario(N);
  const cfg = { table: TABLE, protocol: PROTO };
  const loop = new LinuxReconciler({ programmer: prog, desired: () => desiredRoutes({ localBlocks: input.local, remote: input.remote }, cfg) });
  const count = () => Number(ip('-4', 'route', 'show', 'table', String(TABLE)).split('\n').filter(Boolean).length)
    + Number(ip('-6', 'route', 'show', 'table', String(TABLE)).split('\n').filter(Boolean).length);

  // Pure parts on their own: desired routes and a plan against an empty table.
  let t0 = performance.now();
  const want = desiredRoutes({ localBlocks: input.local, remote: input.remote }, cfg);
  const desiredMs = ms(t0);
  t0 = performance.now();
  planRoutes([], want.routes, cfg);
  const planEmptyMs = ms(t0);

  t0 = performance.now();
  const install = await loop.runOnce();
  const installMs = ms(t0);
  if (!install.ok) throw new Error(`install failed: ${install.error}`);
  const installed = count();

  t0 = performance.now();
  const read = await prog.read();
  const readMs = ms(t0);
  t0 = performance.now();
  planRoutes(read.routes, want.routes, cfg);
  const planFullMs = ms(t0);

  t0 = performance.now();
  const noop = await loop.runOnce();
  const noopMs = ms(t0);

  // 1% of the remote /26s move to another next hop.
  const moved = scenario(N);
  const nMove = Math.round(N * 0.01);
  for (let i = 0; i < nMove; i++) moved.remote[i * 50] = { ...moved.remote[i * 50], nextHop: parseIP('192.0.2.99') };
  input = moved;
  t0 = performance.now();
  const churn = await loop.runOnce();
  const churnMs = ms(t0);

  input = { local: [], remote: [] };
  t0 = performance.now();
  const withdraw = await loop.runOnce();
  const withdrawMs = ms(t0);
  const left = count();

  // Naive: one process per route, against the batch path on the same routes.
  const sc = scenario(NAIVE_N);
  const small = desiredRoutes({ localBlocks: sc.local, remote: sc.remote }, cfg).routes;
  const lines = small.map((r) => opLine({ op: 'add', route: r }).split(' '));
  t0 = performance.now();
  for (const args of lines) execFileSync('ip', ['-n', ns, ...args], { stdio: 'ignore' });
  const naiveMs = ms(t0);
  ip('-4', 'route', 'flush', 'table', String(TABLE));
  ip('-6', 'route', 'flush', 'table', String(TABLE));
  t0 = performance.now();
  const smallBatch = await prog.apply(small.map((route) => ({ op: 'add' as const, route })));
  const smallBatchMs = ms(t0);
  if (smallBatch.failed.length) throw new Error(`small batch: ${smallBatch.failed.length} failures`);

  const perRouteNaive = naiveMs / NAIVE_N;
  return {
    bench: 'linux-routes',
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model,
    cores: cpus().length,
    kernel: execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(),
    iproute2: execFileSync('ip', ['-V'], { encoding: 'utf8' }).trim(),
    routes: N,
    installed,
    desired_ms: desiredMs,
    plan_empty_ms: planEmptyMs,
    install_ms: installMs,
    install_routes_per_s: Math.round(N / (installMs / 1000)),
    read_full_table_ms: readMs,
    plan_full_noop_ms: planFullMs,
    noop_reconcile_ms: noopMs,
    noop_ops: noop.planned,
    churn_1pct_ms: churnMs,
    churn_ops: churn.planned,
    withdraw_ms: withdrawMs,
    withdraw_ops: withdraw.planned,
    left_after_withdraw: left,
    naive_count: NAIVE_N,
    naive_ms: naiveMs,
    naive_per_route_ms: Math.round(perRouteNaive * 1000) / 1000,
    batch_same_count_ms: smallBatchMs,
    speedup_same_count: Math.round((naiveMs / smallBatchMs) * 10) / 10,
    naive_extrapolated_ms_for_N: Math.round(perRouteNaive * N),
    naive_extrapolation: `linear: naive_per_route_ms x ${N} (measured on ${NAIVE_N} routes, not run at ${N})`,
    speedup_install_vs_naive_extrapolated: Math.round(((perRouteNaive * N) / installMs) * 10) / 10,
  };
}

try {
  const r = await main();
  const row = (k: string, v: unknown) => console.log(`${k.padEnd(40)} ${typeof v === 'object' ? JSON.stringify(v) : v}`);
  for (const [k, v] of Object.entries(r)) if (!['bench', 'date'].includes(k)) row(k, v);
  console.log(JSON.stringify(r));
} finally {
  cleanup();
}
