// A node joins a 50-node node-to-node iBGP full mesh: how long until the mesh has converged on it, and what a mesh
// session costs, for blockspeaker and for BIRD configured as Calico's confd renders calico-node's mesh.
//
//   npm run bench:mesh-join -- [--nodes 50] [--joins 3] [--poll-ms 50] [--only ours|bird]
//
// Lab (root, bird2, etcd, iproute2; the host's neighbour table raised: see checkNeighbourTable): one namespace per
// node on one bridge (namespace "sw", etcd on 10.77.0.254),
// node i on 10.77.0.i, originating 10.200.i.0/26 (its block). One process per node.
//   ours: `blockspeaker run` (compiled dist/) per node, all on the one real etcd, no peers in any config: the
//         mesh comes from the node registry. Each announces its block as a static route (the join is about the
//         mesh, not the allocator). The newcomer joins by starting: t0 is its registration (the etcd put of its
//         Node key, seen by a watch).
//   BIRD: one BIRD per node with calico-node's template (connect delay 2 s, connect retry 5 s, error wait 5-30 s)
//         and a Mesh_<ip> protocol per other node, `passive on` toward higher addresses (string order), a static
//         blackhole route for the block. There is no confd here: at t0 the bench does what confd does on a new
//         Node (re-render every node's config, `configure` each BIRD) and starts the newcomer's BIRD. That leaves
//         out confd's own watch and render latency, which favours BIRD.
// Converged: every old node has the newcomer's block in its RIB and the newcomer has all the old nodes' blocks.
// Between joins the newcomer leaves (stopped, Node deleted / protocol removed) and the mesh settles.
// Per-session memory: (median RSS of the old nodes, N-1 sessions each - RSS of the same program with no session)
// / (N-1); total RSS: the sum over the old nodes.
// CPU: all nodes' CPU time (utime + stime from /proc) from t0 to convergence.
// Prints a JSON line per join and a final JSON line with medians and the ratio ours/BIRD.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { cleanupAll, createNetns, execInNetns, runInNetns, type Netns } from '../test/kit/interop/netns.ts';
import { assertPrereqs } from '../test/kit/interop/prereqs.ts';
import { waitFor } from '../test/kit/interop/wait-for.ts';
import { BirdCtl } from './lib/birdctl.ts';
import { summarizeProfile } from './lib/cpuprofile.ts';
import { cpuMs, rssMB } from './lib/proc.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '50' },
    joins: { type: 'string', default: '3' },
    'poll-ms': { type: 'string', default: '50' },
    only: { type: 'string' },
    // Profile one old node (the middle one) and the newcomer with node --cpu-prof into this directory, and print
    // their top functions inside each join's window (t0 to converged).
    'cpu-prof': { type: 'string' },
  },
});
const N = Number(values.nodes);
const JOINS = Number(values.joins);
const POLL = Number(values['poll-ms']);
const ONLY = values.only;
const PROF_DIR = values['cpu-prof'];
const PROF_OLD = Math.ceil(N / 2);
const profArgs = (who: string) => (PROF_DIR ? ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${join(PROF_DIR, who)}`] : []);
/** CLOCK_MONOTONIC in ms, the clock V8 stamps profiles with (see bench/lib/cpuprofile.ts). */
const monoMs = () => Number(process.hrtime.bigint() / 1000n) / 1000;
const ASN = 64512;
const ETCD_URL = 'http://10.77.0.254:2379';
const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/blockspeaker.js');
const KEY_PREFIX = '/blockspeaker/cluster/v1/nodes/';

const ip = (i: number) => `10.77.0.${i}`;
const block = (i: number) => `10.200.${i}.0/26`;
const name = (i: number) => `node-${i}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
};
const r1 = (x: number) => Math.round(x * 10) / 10;
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

// ---- lab ----------------------------------------------------------------------------------------------------------

interface Lab {
  dir: string;
  sw: Netns;
  ns: Netns[]; // index i -> node i (1-based; ns[0] unused)
  etcd: ChildProcess;
}

async function startLab(count: number): Promise<Lab> {
  const pid = process.pid;
  const dir = mkdtempSync(join(tmpdir(), `bs-interop-${pid}-meshjoin-`));
  const sw = await createNetns(`bs-mjsw-${pid}`);
  await sw.exec('/bin/sh', ['-c', 'ip link add br0 type bridge && ip link set br0 up && ip addr add 10.77.0.254/24 dev br0']);
  const ns: Netns[] = [sw];
  for (let i = 1; i <= count; i++) {
    const n = await createNetns(`bs-mj${i}-${pid}`);
    const vx = `vmj${i}x${pid}`.slice(0, 15);
    await execInNetns(sw, '/usr/sbin/ip', ['link', 'add', vx, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.name]);
    await sw.exec('/usr/sbin/ip', ['link', 'set', vx, 'master', 'br0', 'up']);
    await n.exec('/bin/sh', ['-c', `ip addr add ${ip(i)}/24 dev eth0 && ip link set eth0 up`]);
    ns.push(n);
  }
  mkdirSync(join(dir, 'etcd'));
  const etcd = runInNetns(sw, 'etcd', ['--name', 'mj', '--data-dir', join(dir, 'etcd'), '--listen-client-urls', ETCD_URL,
    '--advertise-client-urls', ETCD_URL, '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls',
    'http://127.0.0.1:2380', '--initial-cluster', 'mj=http://127.0.0.1:2380'], { logFile: join(dir, 'etcd.log') });
  await waitFor(async () => (await execInNetns(sw, 'etcdctl', ['--endpoints', ETCD_URL, 'endpoint', 'health'], { check: false })).code === 0,
    { what: 'etcd healthy', timeoutMs: 60_000 });
  return { dir, sw, ns, etcd };
}

// ---- the poller in the switch namespace -----------------------------------------------------------------------------

class Poller {
  private next = 1;
  private readonly waiting = new Map<number, (o: any) => void>();
  private readonly child: ChildProcess;
  private readonly early = new Map<number, any[]>();

  constructor(sw: Netns) {
    this.child = runInNetns(sw, process.execPath, ['--import', 'tsx', join(ROOT, 'bench/lib/mesh-poll.ts'), ETCD_URL],
      { stdio: ['pipe', 'pipe', 'inherit'], cwd: ROOT });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      const o = JSON.parse(line);
      const w = this.waiting.get(o.id);
      if (w) {
        this.waiting.delete(o.id);
        w(o);
      } else {
        // An answer nobody waits for yet (a join's later lines can come in one chunk): kept for answer().
        const q = this.early.get(o.id) ?? [];
        q.push(o);
        this.early.set(o.id, q);
      }
    });
  }

  /** Send a request; resolves with the first answer (for 'join', call `then` for the second). */
  request(q: Record<string, unknown>): { id: number; first: Promise<any> } {
    const id = this.next++;
    const first = new Promise<any>((r) => this.waiting.set(id, r));
    this.child.stdin!.write(`${JSON.stringify({ ...q, id })}\n`);
    return { id, first };
  }

  answer(id: number): Promise<any> {
    const q = this.early.get(id);
    if (q?.length) return Promise.resolve(q.shift());
    return new Promise((r) => this.waiting.set(id, r));
  }

  async get(urls: string[]): Promise<{ status: number; body: any }[]> {
    return (await this.request({ op: 'get', urls }).first).results;
  }

  async del(key: string): Promise<number> {
    return (await this.request({ op: 'del', key }).first).deleted;
  }

  close(): void {
    this.child.stdin!.end();
  }
}

// ---- ours -----------------------------------------------------------------------------------------------------------

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'NODE_OPTIONS' || k === 'BLOCKSPEAKER_FROM_SOURCE' || /^_?TAP/i.test(k)) continue;
    env[k] = v;
  }
  return env;
}

/** `blockspeaker run` for node i; `store` is etcd (mesh) or a directory (alone, for the no-session baseline). */
function startOurs(lab: Lab, i: number, tag: string, store: string, nodeArgs: string[] = []): ChildProcess {
  const d = join(lab.dir, `ours-${i}-${tag}`);
  mkdirSync(d, { recursive: true });
  mkdirSync(join(d, 'run'), { recursive: true });
  writeFileSync(join(d, 'node.yaml'), `node:
  name: ${name(i)}
  os: linux
  bgp: { ipv4Address: ${ip(i)}/24 }
bgp:
  asn: ${ASN}
  routerId: ${ip(i)}
  announce: [${block(i)}]
ipam:
  store: ${store}
  pools: [{ name: pods, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "${ip(i)}:9179" }
ipc: { path: ${join(d, 'ipc.sock')} }
`);
  return runInNetns(lab.ns[i]!, process.execPath, [...nodeArgs, BIN, 'run', '-c', join(d, 'node.yaml'), '--run-dir', join(d, 'run')],
    { logFile: join(d, 'log'), env: childEnv() });
}

const statusUrl = (i: number) => `http://${ip(i)}:9179`;

async function established(poller: Poller, nodes: number[]): Promise<number[]> {
  const rs = await poller.get(nodes.map((i) => `${statusUrl(i)}/peers`));
  return rs.map((r) => (Array.isArray(r.body) ? r.body.filter((p: { state: string }) => p.state === 'Established').length : -1));
}

async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

interface JoinResult {
  converged: boolean;
  convergedMs: number;
  newcomerAllMs?: number;
  oldsMedianMs?: number;
  oldsLastMs?: number;
  cpuMs: number;
  cpuOldsMs?: number;
  cpuNewcomerMs?: number;
  newcomerStartCpuMs?: number;
  cpuWithStartMs?: number;
  missingAt?: string[];
  newcomerHave?: number;
}

function cpuOf(pids: number[]): number {
  let s = 0;
  for (const p of pids) {
    try {
      s += cpuMs(p);
    } catch { /* gone */ }
  }
  return s;
}

async function benchOurs(lab: Lab, poller: Poller): Promise<Record<string, unknown>> {
  const olds = Array.from({ length: N }, (_, k) => k + 1);
  const newcomer = N + 1;
  // Baseline: the same program with no session (embedded store: no registry, no mesh) on the newcomer's namespace.
  log('ours: baseline daemon with no sessions');
  const alone = startOurs(lab, newcomer, 'alone', join(lab.dir, 'alone-store'));
  await waitFor(async () => (await poller.get([`${statusUrl(newcomer)}/status`]))[0]!.status === 200, { what: 'baseline daemon up', timeoutMs: 120_000, intervalMs: 500 });
  await sleep(5000);
  const aloneRss = rssMB(alone.pid!);
  await stop(alone);

  log(`ours: starting ${N} daemons`);
  const tStart = performance.now();
  const children = new Map<number, ChildProcess>();
  // One at a time, each until its status endpoint answers: fifty Node.js processes starting at once on two shared
  // cores starve each other past the daemon's 10 s store-connect limit.
  // A daemon that still fails to start on the loaded machine (the store connect limit) is started again, up to
  // three times, and counted.
  let restarts = 0;
  for (const i of olds) {
    for (let attempt = 1; ; attempt++) {
      const c = startOurs(lab, i, `mesh${attempt}`, `etcd://10.77.0.254:2379`, i === PROF_OLD ? profArgs('old') : []);
      children.set(i, c);
      const up = await waitFor(async () => c.exitCode !== null || c.signalCode !== null || (await poller.get([`${statusUrl(i)}/status`]))[0]!.status === 200,
        { what: `${name(i)} up`, timeoutMs: 120_000, intervalMs: 200 }).then(() => c.exitCode === null && c.signalCode === null, () => false);
      if (up) break;
      if (attempt === 3) throw new Error(`${name(i)} did not start three times: see ${join(lab.dir, `ours-${i}-mesh${attempt}`, 'log')}`);
      log(`ours: ${name(i)} did not start (attempt ${attempt}); again`);
      restarts++;
      await stop(c, 'SIGKILL');
    }
  }
  let last: number[] = [];
  await waitFor(async () => {
    last = await established(poller, olds);
    return last.every((c) => c === N - 1);
  }, { what: `ours: full mesh of ${N} (${N * (N - 1) / 2} sessions)`, timeoutMs: 600_000, intervalMs: 1000 })
    .catch((e) => { throw new Error(`${(e as Error).message}: established per node ${last.join(',')}`); });
  const meshFormedS = (performance.now() - tStart) / 1000;
  // Every node has every block.
  await waitFor(async () => {
    const rs = await poller.get(olds.map((i) => `${statusUrl(i)}/routes?family=ipv4&limit=0`));
    return rs.every((r) => (r.body?.routes ?? []).filter((x: { prefix: string }) => x.prefix.startsWith('10.200.')).length === N);
  }, { what: 'ours: every node has every block', timeoutMs: 120_000, intervalMs: 1000 });
  log(`ours: full mesh formed in ${r1(meshFormedS)} s`);
  await sleep(5000);
  const pids = olds.map((i) => children.get(i)!.pid!);
  const rss = pids.map(rssMB);
  const joins: JoinResult[] = [];
  const windows: [number, number][] = [];
  for (let j = 0; j < JOINS; j++) {
    const key = `${KEY_PREFIX}${name(newcomer)}`;
    const req = poller.request({
      op: 'join', key, timeoutMs: 120_000, pollMs: POLL,
      olds: olds.map((i) => ({ name: name(i), url: statusUrl(i) })),
      newcomer: { url: statusUrl(newcomer), prefix: block(newcomer) },
      want: olds.map(block),
    });
    await req.first; // the watch is armed
    const cpu0 = cpuOf(pids);
    const child = startOurs(lab, newcomer, `join${j}`, `etcd://10.77.0.254:2379`, profArgs(`newcomer-${j + 1}`));
    await poller.answer(req.id); // t0: the registration is seen
    const seenMono = monoMs();
    const cpuOlds0 = cpuOf(pids);
    const cpuNew0 = cpuMs(child.pid!);
    const r = await poller.answer(req.id);
    windows.push([seenMono, monoMs()]);
    const cpuOlds = cpuOf(pids) - cpuOlds0;
    const cpuNew = cpuMs(child.pid!) - cpuNew0;
    const res: JoinResult = {
      converged: r.converged, convergedMs: r.convergedMs ?? r.elapsedMs, newcomerAllMs: r.newcomerAllMs, oldsMedianMs: r.oldsMedianMs, oldsLastMs: r.oldsLastMs,
      // From t0 to converged, every node: the join itself.
      cpuMs: Math.round(cpuOlds + cpuNew), cpuOldsMs: Math.round(cpuOlds), cpuNewcomerMs: Math.round(cpuNew),
      // The newcomer's process start up to t0, and the figure earlier runs reported: from before the newcomer's
      // start to converged (its start, and the old nodes' idle work meanwhile, included).
      newcomerStartCpuMs: Math.round(cpuNew0), cpuWithStartMs: Math.round(cpuOf(pids) - cpu0 + cpuMs(child.pid!)),
      missingAt: r.missingAt, newcomerHave: r.newcomerHave,
    };
    joins.push(res);
    console.log(JSON.stringify({ bench: 'mesh-join', impl: 'blockspeaker', join: j + 1, ...res }));
    // The newcomer leaves: stopped, its Node deleted; wait for every old node to drop it.
    await stop(child, 'SIGINT');
    await poller.del(key);
    await waitFor(async () => (await poller.get(olds.map((i) => `${statusUrl(i)}/peers`))).every((x) => Array.isArray(x.body) && x.body.length === N - 1),
      { what: 'ours: the newcomer left every mesh', timeoutMs: 120_000, intervalMs: 500 });
    await sleep(2000);
  }
  for (const c of children.values()) await stop(c);
  if (PROF_DIR) printProfiles(windows);
  const rssMed = median(rss);
  return {
    impl: 'blockspeaker', nodes: N, meshFormedS: r1(meshFormedS), startRestarts: restarts, joins,
    joinMedianMs: Math.round(median(joins.map((x) => x.convergedMs))),
    joinCpuMedianMs: median(joins.map((x) => x.cpuMs)),
    joinCpuOldsMedianMs: median(joins.map((x) => x.cpuOldsMs!)), joinCpuNewcomerMedianMs: median(joins.map((x) => x.cpuNewcomerMs!)),
    newcomerStartCpuMedianMs: median(joins.map((x) => x.newcomerStartCpuMs!)), joinCpuWithStartMedianMs: median(joins.map((x) => x.cpuWithStartMs!)),
    rssMedianMB: r1(rssMed), rssTotalMB: Math.round(rss.reduce((a, b) => a + b, 0)), rssAloneMB: r1(aloneRss),
    perSessionKB: Math.round(((rssMed - aloneRss) * 1024) / (N - 1)),
  };
}

/** Top functions of the profiled old node and newcomer inside each join's window (stderr). */
function printProfiles(windows: [number, number][]): void {
  const files = (who: string) => {
    try {
      return readdirSync(join(PROF_DIR!, who)).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(PROF_DIR!, who, f));
    } catch {
      return [];
    }
  };
  windows.forEach(([from, to], j) => {
    for (const f of [...files('old'), ...files(`newcomer-${j + 1}`)]) {
      process.stderr.write(`${JSON.stringify({ join: j + 1, profile: f, ...summarizeProfile(f, from, to, 25) })}\n`);
    }
  });
}

// ---- BIRD -----------------------------------------------------------------------------------------------------------

function birdConf(lab: Lab, i: number, members: number[]): string {
  const peers = members.filter((k) => k !== i).map((k) => [
    `protocol bgp Mesh_${ip(k).replace(/\./g, '_')} from bgp_template {`,
    `  neighbor ${ip(k)} as ${ASN};`,
    `  source address ${ip(i)};`,
    ...(ip(k) > ip(i) ? ['  passive on; # Mesh is unidirectional, peer will connect to us.'] : []),
    '}',
  ].join('\n'));
  return [
    `log "${join(lab.dir, `bird-${i}.log`)}" { warning, error, fatal, bug };`,
    `router id ${ip(i)};`,
    'protocol device { scan time 10; }',
    'protocol direct { ipv4; interface "eth0"; }',
    `protocol static { ipv4; route ${block(i)} blackhole; }`,
    // calico-node's bgp_template (confd templates, bird2 syntax).
    'template bgp bgp_template {',
    '  description "Connection to BGP peer";',
    `  local as ${ASN};`,
    '  multihop;',
    '  ipv4 { gateway recursive; import all; export where net ~ [ 10.200.0.0/16+ ]; add paths on; };',
    '  graceful restart;',
    '  connect delay time 2;',
    '  connect retry time 5;',
    '  error wait time 5,30;',
    '}',
    ...peers,
    '',
  ].join('\n');
}

interface BirdNode {
  proc: ChildProcess;
  ctl: BirdCtl;
  sock: string;
  conf: string;
}

async function startBird(lab: Lab, i: number, members: number[]): Promise<BirdNode> {
  const conf = join(lab.dir, `bird-${i}.conf`);
  const sock = join(lab.dir, `bird-${i}.ctl`);
  writeFileSync(conf, birdConf(lab, i, members));
  const proc = runInNetns(lab.ns[i]!, '/usr/sbin/bird', ['-f', '-c', conf, '-s', sock, '-P', join(lab.dir, `bird-${i}.pid`)],
    { logFile: join(lab.dir, `bird-${i}.out`) });
  const ctl = await waitFor(async () => BirdCtl.connect(sock).catch(() => null), { what: `bird ${i} control socket`, timeoutMs: 30_000, intervalMs: 20 });
  return { proc, ctl, sock, conf };
}

// The blocks in a BIRD's table (`count` would tell routes matching, but networks of the whole table).
const birdBlocks = async (b: BirdNode) => {
  const nets = new Set<string>();
  for (const l of await b.ctl.cmd('show route where net ~ [ 10.200.0.0/16+ ]')) {
    const m = /^(?:1007-)?\s*(10\.200\.\d+\.\d+\/\d+)\s/.exec(l);
    if (m) nets.add(m[1]!);
  }
  return nets.size;
};
const birdHas = async (b: BirdNode, prefix: string) => (await b.ctl.cmd(`show route ${prefix}`)).some((l) => l.includes(prefix));
const birdEstablished = async (b: BirdNode) => (await b.ctl.cmd('show protocols')).filter((l) => /\bBGP\b.*\bEstablished\b/.test(l)).length;

async function reconfigure(b: BirdNode, lab: Lab, i: number, members: number[]): Promise<void> {
  writeFileSync(b.conf, birdConf(lab, i, members));
  const out = (await b.ctl.cmd('configure')).join('\n');
  if (!/Reconfigured|Reconfiguration in progress/.test(out)) throw new Error(`bird ${i} configure: ${out}`);
}

async function benchBird(lab: Lab): Promise<Record<string, unknown>> {
  const olds = Array.from({ length: N }, (_, k) => k + 1);
  const newcomer = N + 1;
  log('bird: baseline BIRD with no sessions');
  const alone = await startBird(lab, newcomer, [newcomer]);
  await sleep(3000);
  const aloneRss = rssMB(alone.proc.pid!);
  alone.ctl.close();
  await stop(alone.proc);

  log(`bird: starting ${N} BIRDs`);
  const tStart = performance.now();
  const birds = new Map<number, BirdNode>();
  for (const i of olds) birds.set(i, await startBird(lab, i, olds));
  let last: number[] = [];
  await waitFor(async () => {
    last = await Promise.all(olds.map((i) => birdEstablished(birds.get(i)!)));
    return last.every((c) => c === N - 1);
  }, { what: `bird: full mesh of ${N}`, timeoutMs: 600_000, intervalMs: 1000 })
    .catch((e) => { throw new Error(`${(e as Error).message}: established per node ${last.join(',')}`); });
  const meshFormedS = (performance.now() - tStart) / 1000;
  await waitFor(async () => {
    last = await Promise.all(olds.map((i) => birdBlocks(birds.get(i)!)));
    return last.every((c) => c === N);
  }, { what: 'bird: every node has every block', timeoutMs: 120_000, intervalMs: 1000 })
    .catch(async (e) => {
      const routes = (await birds.get(1)!.ctl.cmd('show route where net ~ [ 10.200.0.0/16+ ]')).join('\n');
      throw new Error(`${(e as Error).message}: blocks per node ${last.join(',')}; node-1:\n${routes}`);
    });
  log(`bird: full mesh formed in ${r1(meshFormedS)} s`);
  await sleep(5000);
  const pids = olds.map((i) => birds.get(i)!.proc.pid!);
  const rss = pids.map(rssMB);
  const joins: JoinResult[] = [];
  const all = [...olds, newcomer];
  for (let j = 0; j < JOINS; j++) {
    const cpu0 = cpuOf(pids);
    // t0: the Node registration. confd's reaction, done here at once: every old node's config gains the
    // newcomer's Mesh_ protocol and is reloaded, and the newcomer's BIRD starts with the whole mesh.
    const t0 = performance.now();
    const [nb] = await Promise.all([startBird(lab, newcomer, all), ...olds.map((i) => reconfigure(birds.get(i)!, lab, i, all))]);
    const pending = new Set(olds);
    const oldAt: number[] = [];
    let newcomerAt = -1;
    let polls = 0;
    for (;;) {
      const el = performance.now() - t0;
      if (el > 120_000) break;
      polls++;
      await Promise.all([...pending].map(async (i) => {
        if (await birdHas(birds.get(i)!, block(newcomer))) {
          pending.delete(i);
          oldAt.push(performance.now() - t0);
        }
      }));
      if (newcomerAt < 0 && (await birdBlocks(nb!)) === N + 1) newcomerAt = performance.now() - t0;
      if (pending.size === 0 && newcomerAt >= 0) break;
      await sleep(POLL);
    }
    const cpuOlds = cpuOf(pids) - cpu0;
    const cpuNew = cpuMs(nb!.proc.pid!);
    const cpuAll = cpuOlds + cpuNew;
    oldAt.sort((a, b) => a - b);
    const converged = pending.size === 0 && newcomerAt >= 0;
    const res: JoinResult = {
      converged, convergedMs: Math.round(Math.max(newcomerAt, oldAt[oldAt.length - 1] ?? 0)),
      newcomerAllMs: Math.round(newcomerAt), oldsMedianMs: Math.round(median(oldAt)), oldsLastMs: Math.round(oldAt[oldAt.length - 1] ?? NaN),
      cpuMs: Math.round(cpuAll), cpuOldsMs: Math.round(cpuOlds), cpuNewcomerMs: Math.round(cpuNew),
    };
    if (!converged) res.missingAt = [...pending].map(name);
    joins.push(res);
    console.log(JSON.stringify({ bench: 'mesh-join', impl: 'bird', join: j + 1, polls, ...res }));
    // The newcomer leaves: its BIRD stops, confd removes its Mesh_ protocol everywhere.
    nb!.ctl.close();
    await stop(nb!.proc);
    await Promise.all(olds.map((i) => reconfigure(birds.get(i)!, lab, i, olds)));
    await waitFor(async () => (await Promise.all(olds.map((i) => birdBlocks(birds.get(i)!)))).every((c) => c === N),
      { what: 'bird: the newcomer left every mesh', timeoutMs: 120_000, intervalMs: 500 });
    await sleep(2000);
  }
  for (const b of birds.values()) {
    b.ctl.close();
    await stop(b.proc);
  }
  const rssMed = median(rss);
  return {
    impl: 'bird', nodes: N, meshFormedS: r1(meshFormedS), joins,
    joinMedianMs: Math.round(median(joins.map((x) => x.convergedMs))),
    joinCpuMedianMs: median(joins.map((x) => x.cpuMs)),
    joinCpuOldsMedianMs: median(joins.map((x) => x.cpuOldsMs!)), joinCpuNewcomerMedianMs: median(joins.map((x) => x.cpuNewcomerMs!)),
    newcomerStartCpuMedianMs: median(joins.map((x) => x.newcomerStartCpuMs!)), joinCpuWithStartMedianMs: median(joins.map((x) => x.cpuWithStartMs!)),
    rssMedianMB: r1(rssMed), rssTotalMB: Math.round(rss.reduce((a, b) => a + b, 0)), rssAloneMB: r1(aloneRss),
    perSessionKB: Math.round(((rssMed - aloneRss) * 1024) / (N - 1)),
  };
}

// ---- main -------------------------------------------------------------------------------------------------------------

/**
 * The kernel's neighbour (ARP) table is one table for every namespace, capped by gc_thresh3 (1024 by default,
 * settable only in the host's namespace). A full mesh on one L2 segment needs ~N x N entries (2,550 for 51 nodes):
 * past the cap, connects fail with EHOSTUNREACH / ENOBUFS and the mesh never settles. Refuse to measure that.
 */
function checkNeighbourTable(nodes: number): void {
  const need = nodes * nodes + 512;
  const have = Number(readFileSync('/proc/sys/net/ipv4/neigh/default/gc_thresh3', 'utf8'));
  if (have < need) {
    throw new Error(`net.ipv4.neigh.default.gc_thresh3 is ${have}; a mesh of ${nodes} namespaces needs about ${need} neighbour entries: ` +
      `sysctl -w net.ipv4.neigh.default.gc_thresh3=${2 ** Math.ceil(Math.log2(need))} net.ipv4.neigh.default.gc_thresh2=${2 ** Math.ceil(Math.log2(need / 2))}`);
  }
}

async function main(): Promise<void> {
  assertPrereqs(['bird']);
  checkNeighbourTable(N + 1);
  const load0 = (await import('node:os')).loadavg()[0];
  log(`lab: ${N + 1} namespaces`);
  const lab = await startLab(N + 1);
  const poller = new Poller(lab.sw);
  const out: Record<string, unknown> = { bench: 'mesh-join', nodes: N, joins: JOINS, pollMs: POLL, date: new Date().toISOString(), loadStart: r1(load0) };
  try {
    if (ONLY !== 'bird') out.ours = await benchOurs(lab, poller);
    if (ONLY !== 'ours') out.bird = await benchBird(lab);
    const o = out.ours as { joinMedianMs: number; perSessionKB: number } | undefined;
    const b = out.bird as { joinMedianMs: number; perSessionKB: number } | undefined;
    if (o && b) out.ratioJoin = Math.round((o.joinMedianMs / b.joinMedianMs) * 100) / 100;
    if (o) out.goalJoinUnder2s = o.joinMedianMs < 2000;
    out.loadEnd = r1((await import('node:os')).loadavg()[0]);
  } finally {
    poller.close();
    lab.etcd.kill('SIGKILL');
    await cleanupAll();
    if (process.env.KEEP_INTEROP !== '1') rmSync(lab.dir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(out));
}

main().catch(async (e) => {
  console.error(e);
  await cleanupAll();
  process.exit(1);
});
