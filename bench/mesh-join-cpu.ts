// Where the CPU of a mesh join goes, in one process: N speakers, each with its cluster side (src/daemon/cluster.ts)
// on one shared in-memory store, meshed over loopback addresses; then a newcomer joins `--joins` times, leaving in
// between. This is the part of bench/mesh-join.ts that is our code (watch -> peer set ->
// reconfigure -> session -> UPDATEs), without processes, namespaces, etcd or BIRD, so it can run under
// `node --cpu-prof` and its CPU per join is steady enough to compare one change with the next.
//
//   node --import tsx bench/mesh-join-cpu.ts [--nodes 50] [--joins 5]
//
// Needs Linux (any 127.x.y.z is local) and a free TCP port on those addresses (picked at random, checked).
// Prints a JSON line per join and a final one: CPU ms per join (process.cpuUsage, all speakers together) and the
// wall time to converged, medians.
import { parseArgs } from 'node:util';
import { Speaker } from '../src/bgp/speaker.ts';
import { ClusterPeers } from '../src/daemon/cluster.ts';
import type { Config } from '../src/config/types.ts';
import { parsePrefix } from '../src/net/ip.ts';
import { MemoryStore } from '../src/store/memory.ts';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '50' }, joins: { type: 'string', default: '5' } } });
const N = Number(values.nodes);
const JOINS = Number(values.joins);
const ASN = 64512;
// A /16 of loopback per run (pid-seeded) so parallel runs do not collide; node i is 127.B.(i>>8).(i&255).
const B = 100 + (process.pid % 150);
const PORT = 20000 + (process.pid % 20000);
const ip = (i: number) => `127.${B}.${i >> 8}.${i & 255}`;
const block = (i: number) => `10.${200 + (i >> 8)}.${i & 255}.0/26`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

interface Node {
  speaker: Speaker;
  cluster: ClusterPeers;
}

function config(i: number): Config {
  return {
    node: { name: `node-${i}`, os: 'linux', labels: {}, bgp: { ipv4Address: `${ip(i)}/32` } },
    bgp: { asn: ASN, routerId: ip(i), listen: { address: ip(i), port: PORT }, peers: [], announce: [block(i)], nodeToNodeMeshEnabled: true, gracefulRestart: false },
  } as unknown as Config;
}

async function startNode(store: MemoryStore, i: number): Promise<Node> {
  const cfg = config(i);
  const speaker = new Speaker(cfg.bgp as never);
  await speaker.start();
  const cluster = new ClusterPeers({
    store,
    applyPeers: (bgp) => speaker.reconfigure(bgp as never),
    warn: (m) => process.stderr.write(`node-${i}: ${m}\n`),
    info: () => {},
  });
  await cluster.start(cfg);
  return { speaker, cluster };
}

async function stopNode(store: MemoryStore, i: number, n: Node): Promise<void> {
  n.cluster.close();
  await n.speaker.stop();
  await store.delete(n.cluster.registry.layout.key(`node-${i}`));
}

function established(n: Node): number {
  return n.speaker.peers().filter((p) => p.state === 'Established').length;
}

// Convergence is read from the RIBs (cheap exact lookups), not from peers(): the check must not cost the join CPU.
const blocks = Array.from({ length: N + 2 }, (_, i) => parsePrefix(block(i)));
const hasBlock = (n: Node, i: number) => n.speaker.rib.paths(blocks[i]!).length > 0;

async function until(what: string, ok: () => boolean, timeoutMs = 120_000): Promise<void> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out: ${what}`);
    await sleep(5);
  }
}

const store = new MemoryStore();
const nodes: Node[] = [];
const t0 = performance.now();
for (let i = 1; i <= N; i++) nodes.push(await startNode(store, i));
await until(`full mesh of ${N}`, () => nodes.every((n) => established(n) === N - 1 && nodes.every((_, i) => hasBlock(n, i + 1))), 600_000);
process.stderr.write(`mesh of ${N} formed in ${Math.round(performance.now() - t0)} ms\n`);
await sleep(500);

const results: { cpuMs: number; wallMs: number }[] = [];
// Each join's span on CLOCK_MONOTONIC, the clock of `node --cpu-prof` (see bench/lib/cpuprofile.ts).
const windows: [number, number][] = [];
const monoMs = () => Number(process.hrtime.bigint() / 1000n) / 1000;
for (let j = 0; j < JOINS; j++) {
  const m0 = monoMs();
  const c0 = process.cpuUsage();
  const w0 = performance.now();
  const nc = await startNode(store, N + 1);
  // Converged: every old node has the newcomer's block, and the newcomer has every old node's.
  await until('join converged', () => nodes.every((n, k) => hasBlock(nc, k + 1) && hasBlock(n, N + 1)));
  const c = process.cpuUsage(c0);
  const r = { cpuMs: Math.round((c.user + c.system) / 1000), wallMs: Math.round(performance.now() - w0) };
  windows.push([m0, monoMs()]);
  results.push(r);
  console.log(JSON.stringify({ bench: 'mesh-join-cpu', join: j + 1, nodes: N, ...r }));
  await stopNode(store, N + 1, nc);
  await until('newcomer gone', () => nodes.every((n) => n.speaker.peers().length === N - 1));
  await sleep(300);
}
for (let i = 0; i < nodes.length; i++) await stopNode(store, i + 1, nodes[i]!);
console.log(JSON.stringify({ bench: 'mesh-join-cpu', nodes: N, joins: JOINS, windows: windows.map(([a, b]) => [Math.round(a), Math.round(b)]), cpuMsMedian: median(results.map((r) => r.cpuMs)), wallMsMedian: median(results.map((r) => r.wallMs)) }));
