// bench/bgp-reflector: route-reflector scale. ONE route reflector with 1,000 iBGP route-reflector clients, each
// announcing 2 blocks (/26): how long until every client holds every other client's blocks, what it costs the
// reflector in CPU, and what a configured peer and an Established session cost it in memory — blockspeaker (the
// `blockspeaker run` daemon) and BIRD 2 as the reflector, in the same run, one after the other, against the same
// clients.
//
//   npm run bench:bgp-reflector -- [--clients N] (default 1000) [--reflectors blockspeaker,bird] [--timeout S] (300)
//                                  [--no-build]   (dist/ is already built from these sources: skip `npm run build`)
//                                  [--cpu-prof]   (our daemon under node --cpu-prof: top self time of the convergence)
//                                  [--heap-snapshot]   (our daemon writes a V8 heap snapshot once converged; with --keep)
//                                  [--keep]   (keep the temp dirs: configs, logs, stores, profiles)
//
// Needs root, bird2, iproute2, curl, nsenter and prlimit (util-linux). About 2 minutes on 2 cores at 1,000 clients
// (the build ~40 s, each reflector ~30 s); --clients 50 takes 20 s.
//
// Topology: one veth link (test/kit/interop/netns.ts createLink), one /16 on it. The clients' namespace holds client
// addresses 100.64.a.b/16 (a < 128, host parts 1-254); the reflector's namespace its router ID 100.64.0.1/16 and, for
// each client, the address that client's session goes to, 100.64.(128+a).b/16 (one BIRD cannot run two sessions to
// one neighbour address: each client needs its own). Every client is on a connected network of the reflector. The
// other end's addresses are permanent neighbour entries (bench/lib/netns-addrs.ts: 2,000 ARP entries overflow the
// host's shared neighbour table). Next hops: client 100.64.a.b announces its blocks with next hop 100.65.a.b, on a
// second connected /16 that both ends have an address in, so that no next hop is an address of the clients' own
// namespace (all the clients share it).
//   Clients: ONE BIRD with 1,000 `protocol bgp cK` (iBGP, AS 64512, `local` and `router id` = the client's address,
//     `direct`, hold time 240, connect delay 1 s / retry 2 s, `disabled` at start), each with its own table tK (one
//     router's RIB each: in one shared table every prefix would have ~1,000 candidate routes in the clients' BIRD)
//     holding its `protocol static sK` (2 blackhole /26s, 2,000 distinct in all); channel `import all; export where
//     proto = "sK"`, next hops resolved recursively through one table with 100.65.0.0/16 on the link (gateway
//     direct keeps a neighbour entry per protocol and next hop: a million, in a fixed-size hash, which made the
//     clients' BIRD take minutes). The router id per protocol matters: the reflector sets ORIGINATOR_ID, and a
//     client drops routes carrying its own.
//   blockspeaker: `node <bin/blockspeaker.js's #! flags> bin/blockspeaker.js run -c FILE --log-level info`, the
//     compiled build (`npm run build` first unless --no-build). Its config file has no way to mark a static
//     bgp.peers entry as a reflector client (no routeReflectorClient / clusterId fields in src/config): it is a route
//     reflector the Calico way. node.bgp.routeReflectorClusterID = 100.64.0.1 (label route-reflector=true), the
//     clients are registered nodes (1,000 node records written into its embedded store, ipam.store, beforehand:
//     the clients' calico-node would have registered them), and Calico's documented BGPPeer (nodeSelector all(),
//     peerSelector route-reflector == 'true', keepaliveTime 80s = hold time 240) in ipam.calico makes it peer with
//     every node, each as its client. It is passive toward all of them (Calico's rule: passive toward a higher
//     address as a string; 100.64.0.1 sorts below every client), so it waits for the clients as BIRD does.
//   BIRD: its own process, 1,000 `protocol bgp` from a template: `rr client; rr cluster id 100.64.0.1; passive on;
//     direct; strict bind on;` (BIRD's listen backlog is a hard-coded 8: with one listening socket, 1,000 clients
//     connecting at once overflow it and the last sessions trickle in for a minute; strict bind gives each session
//     a listening socket of its own), hold time 240, `ipv4 { import all; export all; gateway direct; }`.
// The listen-queue overflows of the reflector's namespace over the window are reported (none expected).
// Per reflector, fresh each time:
//   1. RSS (VmRSS) with no peers (blockspeaker: the same store and node records, no BGPPeer), ready + 2 s; stopped.
//      Then with all N peers configured while the clients are disabled (every peer configured, none up), + 3 s.
//      "configured-but-down KB per peer" = (RSS down - RSS none) / N.
//   2. `enable "c*"` on the clients' BIRD (its control socket, ./lib/birdctl.ts), then `show protocols all "c*"`
//      every 200-500 ms until the clients hold N x 2(N-1) routes in all (the reflector sends no client its own
//      routes back). Time from the enable (the middle of the last two polls, ± half their gap), also from the first
//      and the last session Established (BIRD's own `iso long ms` times); reflector CPU (utime + stime, /proc) over
//      that window, and the clients' BIRD's CPU for context (polls included: the same for both reflectors). Also
//      when the reflector was done with its own work (its CPU time flat from that poll on): at 1,000 clients the one
//      clients' BIRD is busy most of the window and takes the last routes in well after either reflector is done
//      (~110k routes/s), so the time says less about the reflector than its CPU time does.
//   3. 3 s later: RSS = RSS up, and the peak (VmHWM). "KB per Established session" = (RSS up - RSS down) / N: with
//      what each session holds for its routes. Again 15 s later, settled: the steady state a reflector lives in,
//      garbage of the convergence given back by then.
//   4. Clients disabled, the reflector stopped, and no client session Established before the next reflector.
// Ratios blockspeaker / BIRD and the issue's goals close the run. Human-readable lines first, then one JSON line with
// every number. Namespaces, daemons and temp dirs (bs-interop-<pid>-*) are removed at the end, on error and on
// SIGINT/SIGTERM (the harness's hooks); --keep keeps the temp dirs.
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { ourNodeLayout, type ClusterNode } from '../src/cluster/node.ts';
import { openFileStore } from '../src/store/file.ts';
import { cleanupLeftovers, createLink, runInNetns, type Link } from '../test/kit/interop/netns.ts';
import { launcher } from '../test/kit/launcher.ts';
import { finish, fmtS, heapSnapshotOf, log, monoOffset, now, r0, r1, r2, requirePrereqs, sleep, tempDirs } from './lib/daemon-bench.ts';
import { ensureNofile, parseProtocols, startBird, type BirdProcess, type BirdProto } from './lib/bird-proc.ts';
import { addAddresses, addNeighbours, macOf } from './lib/netns-addrs.ts';
import { summarizeProfile, type ProfileSummary } from './lib/cpuprofile.ts';
import { cpuMs, peakRssMB, rssMB } from './lib/proc.ts';

const execFileP = promisify(execFile);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(repoRoot, 'bin/blockspeaker.js');
const ASN = 64512;
const RR = '100.64.0.1';
const STATUS_PORT = 9179;
/** Seconds of quiet after convergence before the settled RSS (V8 and BIRD give garbage pages back meanwhile). */
const SETTLE_S = 15;

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '1000' },
    reflectors: { type: 'string', default: 'blockspeaker,bird' },
    'no-build': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    timeout: { type: 'string', default: '300' },
    'cpu-prof': { type: 'boolean', default: false },
    'heap-snapshot': { type: 'boolean', default: false },
  },
});
type Kind = 'blockspeaker' | 'bird';
const N = Number(values.clients);
if (!Number.isInteger(N) || N < 2 || N > 32_000) throw new Error(`--clients: 2..32000, got ${values.clients}`);
const kinds = values.reflectors!.split(',').map((s) => s.trim()).filter(Boolean) as Kind[];
for (const k of kinds) if (k !== 'blockspeaker' && k !== 'bird') throw new Error(`--reflectors: blockspeaker, bird; got ${k}`);
const timeoutMs = Number(values.timeout) * 1000;
const EXPECTED = N * 2 * (N - 1);

requirePrereqs('bench:bgp-reflector', ['bird'], ['/usr/bin/curl', '/usr/bin/nsenter', '/usr/bin/prlimit']);
const temps = tempDirs(values.keep === true);
const tempDir = temps.make;

// ---- addresses and blocks --------------------------------------------------------------------------------------

/** Client k (0-based): host part a.b of 100.64.a.b (b in 1..254, 0.1 is the reflector's). */
function host(k: number): [number, number] {
  const i = k + 1; // skip 0.1
  return [Math.floor(i / 254), (i % 254) + 1];
}
const clientAddr = (k: number) => `100.64.${host(k).join('.')}`;
/** The reflector's address for client k's session: one BIRD cannot run two sessions to one neighbour address. */
const rrSide = (k: number) => `100.64.${128 + host(k)[0]}.${host(k)[1]}`;
const clientNextHop = (k: number) => `100.65.${host(k).join('.')}`;
/** /26 number j (2 per client) inside 10.0.0.0/8. */
const block = (j: number) => `10.${j >> 10}.${(j >> 2) & 255}.${(j & 3) * 64}/26`;

// ---- the clients' BIRD -----------------------------------------------------------------------------------------

function clientsConfig(dir: string, ifname: string): string {
  const out = [
    `log "${join(dir, 'bird.log')}" { info, remote, warning, error, auth, fatal, bug };`,
    'timeformat protocol iso long ms;',
    'router id 100.64.255.253;',
    'protocol device { scan time 10; }',
    // The next hops resolve through one shared IGP table (hashed host cache), not `gateway direct`: BIRD keeps a
    // neighbour entry per (protocol, next hop) in a fixed 256-bucket hash, a million here, which made the clients'
    // BIRD the bottleneck (minutes of CPU at 1,000 clients). One router per client would hold 999.
    'ipv4 table nht;',
    `protocol static nh { ipv4 { table nht; }; route 100.65.0.0/16 via "${ifname}"; }`,
    'template bgp cl {',
    '  disabled;', '  direct;',
    '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  hold time 240;',
    '}',
  ];
  for (let k = 0; k < N; k++) {
    const a = clientAddr(k);
    out.push(`ipv4 table t${k};`,
      `protocol static s${k} { ipv4 { table t${k}; }; route ${block(2 * k)} blackhole; route ${block(2 * k + 1)} blackhole; }`,
      `protocol bgp c${k} from cl { local ${a} as ${ASN}; neighbor ${rrSide(k)} as ${ASN}; router id ${a};`,
      `  ipv4 { table t${k}; import all; export where proto = "s${k}"; igp table nht; gateway recursive; next hop address ${clientNextHop(k)}; }; }`);
  }
  return `${out.join('\n')}\n`;
}

async function clientProtocols(clients: BirdProcess, all: boolean) {
  return parseProtocols(await clients.cmd(`show protocols${all ? ' all' : ''} "c*"`));
}

// ---- reflectors ----------------------------------------------------------------------------------------------

interface Reflector {
  pid: number;
  /** Peers configured (whatever their state). */
  configured(): Promise<number>;
  stop(): Promise<void>;
  /** Anything odd after the run (ours: warnings and errors in its log, flapped sessions). */
  notes?(): Promise<Record<string, unknown>>;
  heapSnapshot?(): Promise<string | null>;
  profile?(): string | null;
  logTail(): string;
}

/** TCP counters of a namespace that say connections were refused or dropped at listen(): deltas tell. */
async function listenCounters(ns: string): Promise<Record<string, number>> {
  const lines = (await nsExec(ns, 'cat', ['/proc/net/netstat'])).split('\n').filter((l) => l.startsWith('TcpExt:'));
  const [names, vals] = lines.map((l) => l.split(/\s+/).slice(1));
  const all = Object.fromEntries(names.map((n, i) => [n, Number(vals[i])]));
  return { listenOverflows: all.ListenOverflows, listenDrops: all.ListenDrops, syncookiesSent: all.SyncookiesSent };
}

async function nsExec(ns: string, cmd: string, args: string[], timeout = 20_000): Promise<string> {
  // nsenter only switches the network namespace: cheaper than `ip netns exec` (which remounts /sys).
  const { stdout } = await execFileP('nsenter', [`--net=/run/netns/${ns}`, cmd, ...args], { timeout, maxBuffer: 256 << 20, encoding: 'utf8' });
  return stdout;
}

/** The clients as Calico nodes (what their calico-nodes would have registered), written into a fresh store. */
async function seedStore(dir: string): Promise<void> {
  const store = await openFileStore(dir);
  const ops = Array.from({ length: N }, (_, k) => {
    const n: ClusterNode = { name: `client-${k}`, labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: `${clientAddr(k)}/16`, asNumber: ASN };
    return { type: 'put' as const, key: ourNodeLayout.key(n.name), value: ourNodeLayout.encode(n) };
  });
  for (let i = 0; i < ops.length; i += 500) await store.txn([], ops.slice(i, i + 500));
  await store.close();
}

const MANIFEST = `apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: { name: default }
spec: { nodeToNodeMeshEnabled: false, asNumber: ${ASN} }
`;
// Calico's documented route-reflector peering; keepaliveTime 80s gives hold time 240 (as the clients propose).
const BGPPEER = `---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: { name: peer-with-route-reflectors }
spec: { nodeSelector: all(), peerSelector: route-reflector == 'true', keepaliveTime: 80s }
`;

async function startBlockspeaker(link: Link, withPeers: boolean, name: string): Promise<Reflector> {
  const dir = tempDir(name);
  await seedStore(join(dir, 'store'));
  writeFileSync(join(dir, 'calico.yaml'), MANIFEST + (withPeers ? BGPPEER : ''));
  const file = join(dir, 'blockspeaker.json');
  writeFileSync(file, JSON.stringify({
    node: { name: 'reflector', os: 'linux', labels: { 'route-reflector': 'true' }, bgp: { ipv4Address: `${RR}/16`, routeReflectorClusterID: RR } },
    bgp: { asn: ASN, routerId: RR, listen: '0.0.0.0:179' },
    ipam: { store: join(dir, 'store'), calico: [join(dir, 'calico.yaml')], pools: [{ name: 'pods', cidr: '10.244.0.0/16', blockSize: 26 }] },
    dataplane: { kind: 'none' },
    status: { listen: `127.0.0.1:${STATUS_PORT}` },
    ipc: false,
  }, null, 2));
  const launch = launcher(repoRoot);
  const nodeArgs = [...launch.flags];
  if (values['cpu-prof']) nodeArgs.push('--cpu-prof', '--cpu-prof-dir', dir);
  if (values['heap-snapshot']) nodeArgs.push('--heapsnapshot-signal=SIGUSR2', '--diagnostic-dir', dir);
  const env: NodeJS.ProcessEnv = { ...process.env, ...launch.env };
  delete env.NODE_OPTIONS;
  delete env.BLOCKSPEAKER_FROM_SOURCE; // the compiled daemon, never the sources
  const logFile = join(dir, 'blockspeaker.log');
  const child = runInNetns(link.peer.ns, process.execPath, [...nodeArgs, BIN, 'run', '-c', file, '--run-dir', dir, '--log-level', 'info'],
    { logFile, cwd: repoRoot, env });
  const ns = link.peer.ns.name;
  const get = async (path: string) => JSON.parse(await nsExec(ns, 'curl', ['-sf', '--max-time', '20', `http://127.0.0.1:${STATUS_PORT}${path}`]));
  const logTail = () => readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n');
  type PeerStatus = { address: string; state: string; flaps: number; routeReflectorClient?: boolean };
  const want = withPeers ? N : 0;
  const until = now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`blockspeaker exited (${child.exitCode}):\n${logTail()}`);
    try {
      const peers = await get('/peers') as PeerStatus[];
      if (peers.length === want) {
        const clients = peers.filter((p) => p.routeReflectorClient).length;
        if (clients !== want) throw new Error(`blockspeaker: ${clients} of ${want} peers are route-reflector clients`);
        break;
      }
    } catch (e) {
      if ((e as Error).message.includes('route-reflector clients')) throw e;
    }
    if (now() > until) throw new Error(`blockspeaker: not ready with ${want} peers after 60 s:\n${logTail()}`);
    await sleep(200);
  }
  ensureNofile(child.pid!, 2 * N + 256);
  return {
    pid: child.pid!,
    configured: async () => (await get('/peers') as PeerStatus[]).length,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      // SIGTERM lets node write the CPU profile; nothing else to wait for without one.
      child.kill(values['cpu-prof'] ? 'SIGTERM' : 'SIGKILL');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
    async notes() {
      const peers = await get('/peers') as PeerStatus[];
      const lines = readFileSync(logFile, 'utf8').split('\n');
      const bad = new Map<string, number>();
      for (const l of lines) {
        try {
          const j = JSON.parse(l) as { level: number; msg: string };
          if (j.level >= 40) bad.set(j.msg.replace(/\d+\.\d+\.\d+\.\d+/g, 'A'), (bad.get(j.msg.replace(/\d+\.\d+\.\d+\.\d+/g, 'A')) ?? 0) + 1);
        } catch { /* not a log line */ }
      }
      return {
        established: peers.filter((p) => p.state === 'Established').length,
        flaps: peers.reduce((n, p) => n + (p.flaps ?? 0), 0),
        logLines: lines.length,
        warnings: Object.fromEntries([...bad].sort((a, b) => b[1] - a[1]).slice(0, 8)),
      };
    },
    heapSnapshot: !values['heap-snapshot'] ? undefined : () => heapSnapshotOf(child, dir),
    profile: () => {
      const f = readdirSync(dir).find((x) => x.endsWith('.cpuprofile'));
      return f ? join(dir, f) : null;
    },
    logTail,
  };
}

function birdReflectorConfig(dir: string, withPeers: boolean): string {
  const out = [
    `log "${join(dir, 'bird.log')}" { info, remote, warning, error, auth, fatal, bug };`,
    'timeformat protocol iso long ms;',
    `router id ${RR};`,
    'protocol device { scan time 10; }',
    'template bgp rrc {',
    '  rr client;', `  rr cluster id ${RR};`, '  passive on;', '  direct;',
    // BIRD listens with a backlog of 8 (hard-coded): N clients connecting at once overflow one listening socket
    // (SYN cookies, dropped ACKs, sessions trickling in for a minute). With strict bind each session listens on its
    // own local address (rrSide), so none overflows.
    '  strict bind on;',
    '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  hold time 240;',
    '  ipv4 { import all; export all; gateway direct; };',
    '}',
  ];
  if (withPeers) for (let k = 0; k < N; k++) out.push(`protocol bgp r${k} from rrc { local ${rrSide(k)} as ${ASN}; neighbor ${clientAddr(k)} as ${ASN}; }`);
  return `${out.join('\n')}\n`;
}

async function startBirdReflector(link: Link, withPeers: boolean, name: string): Promise<Reflector> {
  const dir = tempDir(name);
  const b = await startBird(link.peer.ns.name, dir, birdReflectorConfig(dir, withPeers), `reflector BIRD (${name})`, { nofile: 2 * N + 256 });
  return {
    pid: b.pid,
    configured: async () => [...parseProtocols(await b.cmd('show protocols')).keys()].filter((p) => /^r\d+$/.test(p)).length,
    stop: () => b.stop(),
    logTail: () => b.logTail(),
  };
}

// ---- one reflector's run -----------------------------------------------------------------------------------------

interface Result {
  rssNoPeersMB: number;
  rssDownMB: number;
  rssUpMB: number;
  peakRssMB: number;
  perPeerDownKB: number;
  perSessionKB: number;
  /** RSS and the same per-session figure once settled: SETTLE_S more seconds of quiet (steady state). */
  rssSettledMB: number;
  perSessionSettledKB: number;
  /** From `enable "c*"` until the clients hold every route (middle of the last two polls). */
  ms: number;
  resolutionMs: number;
  fromFirstEstablishedMs: number;
  fromLastEstablishedMs: number;
  establishSpreadMs: number;
  /**
   * From the enable until the reflector's own work was done: the first poll after which it used under 1% of its
   * CPU time (at least 50 ms). The rest of `ms` is the clients' BIRD taking the routes in (see clientsBusyPct).
   */
  reflectorBusyMs: number;
  /** The clients' BIRD's CPU time over `ms`, percent: near 100, it bounds the time, for either reflector. */
  clientsBusyPct: number;
  cpuMs: number;
  clientsCpuMs: number;
  /** The reflector namespace's TCP listen-queue overflows (and SYN cookies sent) over the window. */
  listen: Record<string, number>;
  polls: number;
  load1: number;
  notes?: Record<string, unknown>;
  heapSnapshot?: string | null;
  profile?: ProfileSummary;
}

async function measure(kind: Kind, link: Link, clients: BirdProcess): Promise<Result> {
  const start = (withPeers: boolean, name: string) => (kind === 'blockspeaker' ? startBlockspeaker(link, withPeers, name) : startBirdReflector(link, withPeers, name));
  const bare = await start(false, `${kind}-none`);
  await sleep(2000);
  const rssNone = rssMB(bare.pid);
  await bare.stop();

  const rfl = await start(true, `${kind}-rr`);
  const configured = await rfl.configured();
  if (configured !== N) throw new Error(`${kind}: ${configured} peers configured, want ${N}`);
  await sleep(3000);
  const rssDown = rssMB(rfl.pid);
  let result: Result;
  try {
    const load1 = loadavg()[0];
    const listen0 = await listenCounters(link.peer.ns.name);
    const cpu0 = cpuMs(rfl.pid);
    const ccpu0 = cpuMs(clients.pid);
    const t0 = now();
    await clients.cmd('enable "c*"');
    let polls = 0;
    const cpuAt: [number, number][] = [];
    let prevAt = t0;
    let doneAt = 0;
    let protos = new Map<string, BirdProto>();
    let held = 0;
    for (;;) {
      await sleep(Math.max(200, Math.min(500, (now() - t0) / 50)));
      protos = await clientProtocols(clients, true);
      polls++;
      const t = now();
      cpuAt.push([t, cpuMs(rfl.pid)]);
      held = 0;
      for (const p of protos.values()) held += p.imported;
      if (process.env.BENCH_DEBUG) {
        console.error(`poll ${kind} ${r0(t - t0)} ms: ${held} routes, ${[...protos.values()].filter((p) => p.established).length} Established;` +
          ` CPU so far: reflector ${r0(cpuMs(rfl.pid) - cpu0)} ms, clients' BIRD ${r0(cpuMs(clients.pid) - ccpu0)} ms`);
      }
      if (held >= EXPECTED) {
        doneAt = t;
        break;
      }
      prevAt = t;
      if (t - t0 > timeoutMs) {
        const up = [...protos.values()].filter((p) => p.established).length;
        const down = [...protos].find(([, p]) => !p.established)?.[0] ?? [...protos].find(([, p]) => p.imported !== 2 * (N - 1))?.[0];
        throw new Error(`${kind}: the clients hold ${held} of ${EXPECTED} routes after ${fmtS(t - t0)} (${up} of ${N} sessions Established)\n` +
          `reflector:\n${rfl.logTail()}\nclients:\n${clients.logTail()}\n${down ? await clients.cmd(`show protocols all ${down}`) : ''}`);
      }
    }
    const cpu = cpuMs(rfl.pid) - cpu0;
    const ccpu = cpuMs(clients.pid) - ccpu0;
    const listen1 = await listenCounters(link.peer.ns.name);
    const listen = Object.fromEntries(Object.entries(listen1).map(([k, v]) => [k, v - listen0[k]]));
    if (held !== EXPECTED) log(`  ${kind}: the clients hold ${held} routes, more than the expected ${EXPECTED}`);
    const short = [...protos].filter(([, p]) => p.imported !== 2 * (N - 1)).map(([n, p]) => `${n}: ${p.imported}`);
    if (short.length) log(`  ${kind}: ${short.length} clients do not hold ${2 * (N - 1)} routes: ${short.slice(0, 5).join(', ')}`);
    const up = [...protos.values()].filter((p) => p.established);
    if (up.length !== N) throw new Error(`${kind}: only ${up.length} of ${N} client sessions Established at the end`);
    const first = Math.min(...up.map((p) => p.since));
    const last = Math.max(...up.map((p) => p.since));
    // Every session carries routes for every other: nothing is complete before the last one is up.
    const lower = Math.max(prevAt, last);
    const done = (lower + doneAt) / 2;
    // Reflection, seen on one client: another client's block with ORIGINATOR_ID and CLUSTER_LIST.
    const route = await clients.cmd(`show route for ${block(2).split('/')[0]} table t0 all`);
    const orig = /BGP\.originator_id:\s*(\S+)/.exec(route)?.[1];
    const cl = /BGP\.cluster_list:\s*(.+)/.exec(route)?.[1]?.trim();
    if (orig !== clientAddr(1)) throw new Error(`${kind}: client c0's route to ${block(2)} has ORIGINATOR_ID ${orig}, want ${clientAddr(1)}:\n${route}`);
    await sleep(3000);
    const rssUp = rssMB(rfl.pid);
    const hwm = peakRssMB(rfl.pid);
    // And at rest: a reflector spends its life converged. Garbage of the convergence (export batches, write
    // buffers) is collected and its pages given back over the next seconds, by V8 and by BIRD alike.
    await sleep(SETTLE_S * 1000);
    const rssSettled = rssMB(rfl.pid);
    result = {
      rssNoPeersMB: r1(rssNone), rssDownMB: r1(rssDown), rssUpMB: r1(rssUp), peakRssMB: r1(hwm),
      perPeerDownKB: r1(((rssDown - rssNone) * 1024) / N), perSessionKB: r1(((rssUp - rssDown) * 1024) / N),
      rssSettledMB: r1(rssSettled), perSessionSettledKB: r1(((rssSettled - rssDown) * 1024) / N),
      ms: r0(done - t0), resolutionMs: r0((doneAt - lower) / 2), fromFirstEstablishedMs: r0(done - first),
      fromLastEstablishedMs: r0(done - last), establishSpreadMs: r0(last - first),
      reflectorBusyMs: r0(Math.min(done, cpuAt.find(([, c]) => cpu0 + cpu - c <= Math.max(50, cpu / 100))?.[0] ?? done) - t0),
      clientsBusyPct: r0((100 * ccpu) / (done - t0)),
      cpuMs: r0(cpu), clientsCpuMs: r0(ccpu), listen, polls, load1: r1(load1),
    };
    log(`  ${kind.padEnd(12)} ${fmtS(result.ms).padStart(9)} from enable (±${result.resolutionMs} ms), ${fmtS(result.fromFirstEstablishedMs)} from first Established,` +
      ` ${fmtS(result.fromLastEstablishedMs)} from last (sessions up over ${fmtS(result.establishSpreadMs)})  CPU ${fmtS(cpu)}, done with it by ${fmtS(result.reflectorBusyMs)}` +
      `  clients' BIRD CPU ${fmtS(ccpu)} (${result.clientsBusyPct}% of the time)` +
      `  [${polls} polls, load ${r1(load1)}${Object.values(listen).some((v) => v > 0) ? `, listen queue: ${JSON.stringify(listen)}` : ''}]`);
    log(`  ${''.padEnd(12)} RSS ${r1(rssNone)} MB no peers, ${r1(rssDown)} MB ${N} peers down (${result.perPeerDownKB} KB per peer),` +
      ` ${r1(rssUp)} MB all Established (${result.perSessionKB} KB per session), ${r1(rssSettled)} MB ${SETTLE_S} s later` +
      ` (${result.perSessionSettledKB} KB per session), peak ${r1(hwm)} MB;` +
      ` c0 sees ${block(2)} with ORIGINATOR_ID ${orig}, CLUSTER_LIST ${cl}`);
    if (rfl.notes) {
      result.notes = await rfl.notes();
      log(`  ${''.padEnd(12)} ${JSON.stringify(result.notes)}`);
    }
    if (rfl.heapSnapshot) {
      result.heapSnapshot = await rfl.heapSnapshot();
      log(`  ${''.padEnd(12)} heap snapshot: ${result.heapSnapshot ?? 'not written'}`);
    }
    await clients.cmd('disable "c*"');
    await rfl.stop();
    const f = rfl.profile?.();
    if (f) {
      result.profile = summarizeProfile(f, t0 - monoOffset, done - monoOffset);
      printProfile(result.profile);
    }
  } finally {
    await clients.cmd('disable "c*"').catch(() => undefined);
    await rfl.stop();
  }
  // No client session up before the next reflector starts.
  const until = now() + 60_000;
  for (;;) {
    const up = [...(await clientProtocols(clients, false)).values()].filter((p) => p.established).length;
    if (up === 0) break;
    if (now() > until) throw new Error(`${up} client sessions still Established 60 s after disable`);
    await sleep(250);
  }
  return result;
}

function printProfile(p: ProfileSummary): void {
  log(`    CPU profile of the convergence window (${p.totalMs} ms sampled, self time):`);
  for (const f of p.functions) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
  log('    by file:');
  for (const f of p.files.slice(0, 8)) log(`      ${String(f.pct).padStart(5)}%  ${String(f.ms).padStart(6)} ms  ${f.name}`);
}

// ---- main ------------------------------------------------------------------------------------------------------

const json: Record<string, unknown> = {
  bench: 'bgp-reflector',
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, loadStart: loadavg().map(r1) },
  clients: N, routesPerClient: 2, expectedRoutes: EXPECTED,
  blockspeakerLaunch: { nodeFlags: launcher(repoRoot).flags, env: launcher(repoRoot).env, logLevel: 'info' },
};
const started = now();
let error: unknown = null;
try {
  cleanupLeftovers();
  log(`route reflector: ${N} iBGP clients x 2 /26 each, one reflector (${kinds.join(', ')}); every client must hold the other clients' ${2 * (N - 1)} routes`);
  log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg().map(r1).join(' ')}`);
  if (kinds.includes('blockspeaker') && !values['no-build']) {
    // dist/ must be the sources being measured: build it (not timed).
    await execFileP('npm', ['run', '-s', 'build'], { cwd: repoRoot, timeout: 300_000 });
    log('built dist/ (npm run build) for the compiled daemon');
  }
  const t0 = now();
  const link = await createLink({ name: 'bgrr' });
  await addAddresses(link.local.ns.name, link.local.ifname, [...Array.from({ length: N }, (_, k) => `${clientAddr(k)}/16`), '100.65.255.253/16']);
  await addAddresses(link.peer.ns.name, link.peer.ifname, [`${RR}/16`, ...Array.from({ length: N }, (_, k) => `${rrSide(k)}/16`), '100.65.255.254/16']);
  // No ARP between the two ends (see ./lib/netns-addrs.ts): 2,000 dynamic entries overflow the host's table.
  await addNeighbours(link.local.ns.name, link.local.ifname, [RR, ...Array.from({ length: N }, (_, k) => rrSide(k))], macOf(link.peer.ns.name, link.peer.ifname));
  await addNeighbours(link.peer.ns.name, link.peer.ifname, Array.from({ length: N }, (_, k) => clientAddr(k)), macOf(link.local.ns.name, link.local.ifname));
  const cdir = tempDir('clients');
  const clients = await startBird(link.local.ns.name, cdir, clientsConfig(cdir, link.local.ifname), "clients' BIRD", { nofile: 2 * N + 256 });
  log(`setup: ${N} client addresses and the clients' BIRD (${N} BGP + ${N} static protocols, ${N} tables) in ${fmtS(now() - t0)}`);
  const results = new Map<Kind, Result>();
  for (const kind of kinds) results.set(kind, await measure(kind, link, clients));
  json.reflectors = Object.fromEntries(results);
  await clients.stop();

  const bs = results.get('blockspeaker');
  const bird = results.get('bird');
  if (bs && bird) {
    const ratio = (a: number, b: number) => (b > 0 ? r2(a / b) : null);
    const ratios = {
      time: ratio(bs.ms, bird.ms), timeFromLastEstablished: ratio(bs.fromLastEstablishedMs, bird.fromLastEstablishedMs),
      cpu: ratio(bs.cpuMs, bird.cpuMs), kbPerSession: ratio(bs.perSessionKB, bird.perSessionKB),
      kbPerSessionSettled: ratio(bs.perSessionSettledKB, bird.perSessionSettledKB),
      kbPerPeerDown: ratio(bs.perPeerDownKB, bird.perPeerDownKB), peakRss: ratio(bs.peakRssMB, bird.peakRssMB),
    };
    const goals = {
      timeWithin2xBird: bs.ms <= 2 * bird.ms, cpuWithin1_5xBird: bs.cpuMs <= 1.5 * bird.cpuMs, rssPerSessionAtMost30KB: bs.perSessionKB <= 30,
      settledRssPerSessionAtMost30KB: bs.perSessionSettledKB <= 30,
    };
    json.ratios = ratios;
    json.goals = goals;
    const x = (v: number | null) => (v === null ? '-' : `${v}x`);
    log(`blockspeaker / BIRD: time ${x(ratios.time)} (from last Established ${x(ratios.timeFromLastEstablished)}), CPU ${x(ratios.cpu)},` +
      ` KB per session ${x(ratios.kbPerSession)} (settled ${x(ratios.kbPerSessionSettled)}), KB per peer down ${x(ratios.kbPerPeerDown)}, peak RSS ${x(ratios.peakRss)}`);
    log(`goals: ${Object.entries(goals).map(([k, v]) => `${k} ${v ? 'met' : 'MISSED'}`).join(', ')}`);
  } else if (bs) {
    json.goals = { rssPerSessionAtMost30KB: bs.perSessionKB <= 30, settledRssPerSessionAtMost30KB: bs.perSessionSettledKB <= 30 };
  }
} catch (e) {
  error = e;
}
await finish('bench:bgp-reflector', json, started, error, temps, values.keep === true);
