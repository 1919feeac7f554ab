// Planning time of the HNS planner: 1,000 local blocks and 10,000 remote routes against an actual state (HNS JSON)
// that differs in 1% of its objects, for overlay (RemoteSubnetRoute policies) and l2bridge (host routes).
// Usage: node --import tsx bench/hns-plan.ts [rounds]   Prints human-readable lines, then one JSON line.
import { performance } from 'node:perf_hooks';
import { type DesiredState, type HnsMode, buildDesired } from '../src/hns/desired.ts';
import type { HnsPolicy, HnsSnapshot, NetRoute } from '../src/hns/model.ts';
import { createNetworkBody, planHns } from '../src/hns/planner.ts';

const rounds = Number(process.argv[2] ?? 60);
const LOCAL = 1000;
const REMOTE = 10_000;

const v4 = (n: number) => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
const base = (0x0a << 24) >>> 0; // 10.0.0.0
// Local: the first 1,000 of the 1,024 /26s of 10.0.0.0/16. Remote: /26s from 10.1.0.0 on, 100 next hops.
const local = Array.from({ length: LOCAL }, (_, i) => `${v4(base + i * 64)}/26`);
const spare = Array.from({ length: 24 }, (_, i) => `${v4(base + (LOCAL + i) * 64)}/26`);
const remotePrefix = (i: number) => `${v4(base + 0x10000 + i * 64)}/26`;
const hop = (i: number) => `192.168.${(i % 100) >> 8}.${(i % 100) + 1}`;

/** The desired state from config and string inputs; ms = median of 5 warm builds (the daemon rebuilds it per pass). */
function desiredFor(mode: HnsMode): { d: DesiredState; ms: number } {
  const times: number[] = [];
  let d!: DesiredState;
  for (let i = 0; i < 6; i++) {
    const t0 = performance.now();
    d = build(mode);
    if (i > 0) times.push(performance.now() - t0);
  }
  return { d, ms: stats(times).medianMs };
}

function build(mode: HnsMode): DesiredState {
  return buildDesired({
    config: { mode, network: 'pods', adapter: 'Ethernet', pools: [{ cidr: '10.0.0.0/16', gateway: '10.0.0.1' }], ownedPrefixes: ['10.0.0.0/8'], vni: 4096, drMac: '01-02-03-04-05-06' },
    localBlocks: local,
    remoteRoutes: Array.from({ length: REMOTE }, (_, i) => ({ prefix: remotePrefix(i), nextHop: hop(i) })),
  });
}

let ids = 0;
const id = () => `B0000000-0000-4000-8000-${(++ids).toString(16).toUpperCase().padStart(12, '0')}`;

/**
 * The actual state as HNS would list it for `d`, then 1% of its 11,000 objects changed: 10 ip-subnets missing,
 * 10 stale ones, 40 remote routes missing, 30 via a stale next hop, 20 stale.
 */
function actualFor(d: DesiredState): { actual: HnsSnapshot; expectedOps: number } {
  const net = createNetworkBody(d);
  net.ID = id();
  const subnet = net.Ipams![0].Subnets![0];
  subnet.ID = id();
  subnet.IpSubnets = subnet.IpSubnets!.filter((_, i) => i % 100 !== 7).map((x) => ({ ...x, ID: id() })); // 10 missing
  for (let i = 0; i < 10; i++) subnet.IpSubnets.push({ ID: id(), IpAddressPrefix: spare[i], Flags: 3 }); // 10 stale
  const remotes: { prefix: string; nh: string }[] = [];
  let missing = 0;
  let moved = 0;
  for (let i = 0; i < REMOTE; i++) {
    if (i % 250 === 3) {
      missing++; // 40 missing
      continue;
    }
    const move = i % 331 === 5 && moved < 30; // 30 moved
    if (move) moved++;
    remotes.push({ prefix: remotePrefix(i), nh: move ? '192.168.9.9' : hop(i) });
  }
  if (missing !== 40 || moved !== 30) throw new Error(`bench setup: ${missing} missing, ${moved} moved`);
  for (let i = 0; i < 20; i++) remotes.push({ prefix: remotePrefix(REMOTE + i), nh: hop(i) }); // 20 stale
  const snap: HnsSnapshot = { Networks: [net], Endpoints: [], HostRoutes: [] };
  if (d.mode === 'overlay') {
    const policies: HnsPolicy[] = [{ Type: 'HostRoute', Settings: {} }];
    for (const r of remotes) {
      policies.push({ Type: 'RemoteSubnetRoute', Settings: { DestinationPrefix: r.prefix, IsolationId: 4096, ProviderAddress: r.nh, DistributedRouterMacAddress: '01-02-03-04-05-06' } });
    }
    net.Policies = [...net.Policies!, ...policies];
  } else {
    const routes: NetRoute[] = remotes.map((r) => ({ DestinationPrefix: r.prefix, NextHop: r.nh, InterfaceAlias: 'vEthernet (Ethernet)', RouteMetric: 271 }));
    // The host's own routes on the vNIC, which are not ours.
    routes.push({ DestinationPrefix: '10.0.0.0/16', NextHop: '0.0.0.0', InterfaceAlias: 'vEthernet (Ethernet)', RouteMetric: 256 });
    snap.HostRoutes = routes;
  }
  return { actual: snap, expectedOps: 10 + 10 + 40 + 30 * 2 + 20 };
}

function stats(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { medianMs: +q(0.5).toFixed(2), p90Ms: +q(0.9).toFixed(2), minMs: +s[0].toFixed(2) };
}

const result: Record<string, unknown> = { bench: 'hns-plan', loadAvg: +(await import('node:os')).loadavg()[0].toFixed(1), cpus: (await import('node:os')).cpus().length, localBlocks: LOCAL, remoteRoutes: REMOTE, differing: '1% (110 of 11,000 objects)', rounds, goalMs: 50 };
for (const mode of ['overlay', 'l2bridge'] as HnsMode[]) {
  const { d, ms: desiredMs } = desiredFor(mode);
  const { actual, expectedOps } = actualFor(d);
  const first = planHns(actual, d);
  if (first.ops.length !== expectedOps || first.blocked.length) throw new Error(`${mode}: ${first.ops.length} ops, expected ${expectedOps}`);
  for (let i = 0; i < 5; i++) planHns(actual, d); // warm up
  // Wall time, and this thread's CPU time: on a shared machine the first measures the scheduler as much as the plan.
  const times: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    planHns(actual, d);
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  const fromEmpty: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    planHns({ Networks: [], Endpoints: [], HostRoutes: [] }, d);
    fromEmpty.push(performance.now() - t0);
  }
  const s = stats(times);
  const c = stats(cpu);
  result[mode] = { ...s, cpuMedianMs: c.medianMs, ops: first.ops.length, fromEmptyMedianMs: stats(fromEmpty).medianMs, desiredBuildMs: +desiredMs.toFixed(1) };
  console.log(`${mode}: plan ${first.ops.length} ops: median ${s.medianMs} ms (CPU ${c.medianMs} ms), p90 ${s.p90Ms} ms (goal < 50 ms); from nothing ${stats(fromEmpty).medianMs} ms; desired state built in ${desiredMs.toFixed(1)} ms`);
}
console.log(JSON.stringify(result));
