// End to end, as root, in namespaces this test creates:
//
//   pod a1 ─┐                                                   ┌─ pod b1
//   pod a2 ─┴ bse0 [node A: blockspeaker run] ── [ToR: BIRD] ── [node B: blockspeaker run] bse0 ┘
//
// Both daemons share one embedded store directory (the file store is multi-process safe), peer with BIRD (eBGP;
// BIRD exports what it learns into the ToR's kernel), program their node's main table (dataplane linux, table 254,
// bridge bse0), and serve the CNI IPAM plugin: pods are created by Debian's `bridge` plugin with blockspeaker-cni as
// IPAM. Pod a1 pings pod b1 through BIRD's routes. Then node A's block is filled, so pod a2 borrows an address from
// node B's block (the pool holds two blocks only): the /32 is announced, reaches BIRD and node B, and a2 is
// reachable from b1. Deleting a2 releases it and the /32 is withdrawn everywhere.
//
// Needs root, bird2, iproute2, iputils-ping, curl and containernetworking-plugins; interopGate/REQUIRE_PEERS=1 decide skip vs fail.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply, AvailableReply } from '../../src/ipc/protocol.ts';
import { toolsGate } from '../kit/tools.ts';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink, createNetns, execInNetns, runInNetns, type Netns } from '../kit/interop/netns.ts';
import { waitFor } from '../kit/interop/wait-for.ts';

const BIN = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const CNI_BIN = new URL('../../bin/blockspeaker-cni', import.meta.url).pathname;
const PLUGINS = '/usr/lib/cni';
const POOL = '10.244.0.0/27'; // two /28 blocks: one per node, so node A's next pod after its block is full borrows
const BRIDGE = 'bse0';

/** A clean environment for children: no tap loaders (a runtime would not have them), the sources under test. */
function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('CNI_') || k === 'NODE_OPTIONS' || /^_?TAP/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, BLOCKSPEAKER_FROM_SOURCE: '1', ...extra };
}

function run(cmd: string, args: string[], opts: { env?: Record<string, string>; stdin?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', cmd, ...args], { env: opts.env ?? childEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.stdin ?? '');
  });
}

/** The /28 block an address is in (POOL's block size). */
function block28(ip: string): string {
  const p = ip.split('.').map(Number);
  return `${p[0]}.${p[1]}.${p[2]}.${p[3] & ~15}/28`;
}

const gate = interopGate(t, ['bird']);
// The CNI plugins the pods are made with, ping between pods and curl for the daemons' status endpoints.
const toolsOk = !gate && toolsGate(t, ['bridge', 'loopback', 'ping', 'curl']);

if (!gate && toolsOk) {
  t.test('two nodes, BIRD as ToR, bridge CNI pods: pod to pod, a borrowed address announced and withdrawn', async (t) => {
    const pid = process.pid;
    const dir = mkdtempSync(join(tmpdir(), `bs-interop-${pid}-e2e-`));
    t.teardown(() => {
      if (process.env.KEEP_INTEROP !== '1') rmSync(dir, { recursive: true, force: true });
    });
    const cniPath = join(dir, 'cni');
    mkdirSync(cniPath);
    for (const p of ['bridge', 'loopback']) symlinkSync(join(PLUGINS, p), join(cniPath, p));
    symlinkSync(CNI_BIN, join(cniPath, 'blockspeaker-cni'));

    // ---- namespaces and links: the ToR is the "local" side of both links
    const tor = await createNetns(`bs-e2etor-${pid}`);
    const linkA = await createLink({ name: 'e2ea', local: tor, t });
    const linkB = await createLink({ name: 'e2eb', local: tor, t });
    const nodeA = linkA.peer.ns;
    const nodeB = linkB.peer.ns;
    for (const ns of [tor, nodeA, nodeB]) {
      await ns.exec('/bin/sh', ['-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward; for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done']);
    }

    // ---- BIRD on the ToR: eBGP with both nodes, learned routes into the ToR's kernel
    const ctl = join(dir, 'bird.ctl');
    const birdLog = join(dir, 'bird.log');
    writeFileSync(join(dir, 'bird.conf'), [
      `log "${birdLog}" all;`,
      `router id ${linkA.local.v4};`,
      'protocol device { scan time 1; }',
      'protocol kernel { ipv4 { import none; export all; }; }',
      ...[['node_a', linkA.peer.v4, 65101], ['node_b', linkB.peer.v4, 65102]].map(([name, addr, asn]) =>
        `protocol bgp ${name} { local as 65001; neighbor ${addr} as ${asn}; hold time 9; keepalive time 3; connect retry time 2; ` +
        'error wait time 1, 5; ipv4 { import all; export all; }; }'),
      '',
    ].join('\n'));
    const bird = runInNetns(tor, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctl, '-P', join(dir, 'bird.pid')],
      { logFile: join(dir, 'bird.out') });
    t.teardown(() => void bird.kill('SIGKILL'));
    const birdc = async (...args: string[]) => (await execInNetns(tor, '/usr/sbin/birdc', ['-s', ctl, ...args], { check: false })).stdout;

    // ---- the two daemons, one shared store
    const store = join(dir, 'store');
    const daemons: { name: string; ns: Netns; sock: string; child: ChildProcess; log: string }[] = [];
    for (const [name, link, asn] of [['node-a', linkA, 65101], ['node-b', linkB, 65102]] as const) {
      const sock = join(dir, `${name}.sock`);
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, `node: { name: ${name}, os: linux }
bgp:
  asn: ${asn}
  routerId: ${link.peer.v4}
  listen: false
  peers: [{ address: ${link.local.v4}, asn: 65001, holdTime: 9 }]
ipam:
  store: ${store}
  pools: [{ name: pods, cidr: ${POOL}, blockSize: 28 }]
dataplane: { kind: linux, table: 254, bridge: ${BRIDGE} }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`);
      const log = join(dir, `${name}.log`);
      const child = runInNetns(link.peer.ns, process.execPath, [BIN, 'run', '-c', file, '--run-dir', dir, '--log-level', 'debug'],
        { logFile: log, env: childEnv() });
      daemons.push({ name, ns: link.peer.ns, sock, child, log });
    }
    const [A, B] = daemons as [typeof daemons[0], typeof daemons[0]];
    t.teardown(() => {
      for (const d of daemons) if (d.child.exitCode === null) d.child.kill('SIGKILL');
    });
    const logs = () => daemons.map((d) => `--- ${d.name}\n${readFileSync(d.log, 'utf8').split('\n').slice(-15).join('\n')}`).join('\n');
    const status = async (ns: Netns, path: string) =>
      JSON.parse((await execInNetns(ns, '/usr/bin/curl', ['-s', `http://127.0.0.1:9179${path}`])).stdout);

    try {
      await waitFor(async () => /node_a\s+BGP.*Established/.test(await birdc('show', 'protocols')) &&
        /node_b\s+BGP.*Established/.test(await birdc('show', 'protocols')), { what: 'BIRD: both nodes Established', timeoutMs: 60_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${logs()}`);
    }
    t.pass('BIRD has both nodes Established');
    // Established at the ToR does not imply the status endpoint is up yet (it opens after the speaker starts): wait.
    for (const d of daemons) {
      let last: unknown = null;
      try {
        await waitFor(async () => {
          last = await status(d.ns, '/readyz').catch((e: Error) => e.message);
          return (last as { ready?: boolean })?.ready === true;
        }, { what: `${d.name} /readyz`, timeoutMs: 30_000 });
      } catch (e) {
        throw new Error(`${(e as Error).message}: last answer ${JSON.stringify(last)}\n${logs()}`);
      }
      t.match(last, { ready: true }, `${d.name} ready`);
    }

    // ---- pods through the bridge plugin
    const podNames: Netns[] = [];
    const bridgeCni = async (cmd: 'ADD' | 'DEL', node: typeof A, pod: Netns) => {
      const conf = JSON.stringify({
        cniVersion: '1.0.0', name: 'bsnet', type: 'bridge', bridge: BRIDGE, isGateway: true, ipMasq: false,
        ipam: { type: 'blockspeaker-cni', socket: node.sock, num4: 1, pools: ['pods'], routes: [{ dst: '0.0.0.0/0' }] },
      });
      const r = await run('ip', ['netns', 'exec', node.ns.name, join(cniPath, 'bridge')], {
        env: childEnv({ CNI_COMMAND: cmd, CNI_CONTAINERID: `ctr-${pod.name}`, CNI_NETNS: `/var/run/netns/${pod.name}`, CNI_IFNAME: 'eth0', CNI_PATH: cniPath }),
        stdin: conf,
      });
      if (r.code !== 0) throw new Error(`bridge ${cmd} ${pod.name} on ${node.name}: ${r.stdout}${r.stderr}`);
      return cmd === 'ADD' ? (JSON.parse(r.stdout) as { ips: { address: string; gateway: string }[] }).ips[0]!.address.split('/')[0]! : '';
    };
    const pod = async (tag: string) => {
      const ns = await createNetns(`bs-e2e${tag}-${pid}`);
      podNames.push(ns);
      return ns;
    };
    const ping = async (from: Netns, to: string) => (await execInNetns(from, '/usr/bin/ping', ['-c', '1', '-W', '2', to], { check: false })).code === 0;
    const pings = async (from: Netns, to: string, what: string) => {
      // The first ping may race the last route being programmed: a few tries, no timing assertion.
      let ok = false;
      for (let i = 0; i < 10 && !ok; i++) ok = await ping(from, to);
      t.ok(ok, `${what}: ping ${to}`);
    };
    const kernelRoute = async (ns: Netns, prefix: string) =>
      (await execInNetns(ns, '/usr/sbin/ip', ['-4', 'route', 'show', 'exact', prefix, 'table', '254'])).stdout.trim();
    const birdRoute = async (prefix: string) => (await birdc('show', 'route', 'for', prefix.split('/')[0]!)).includes(prefix);

    const a1 = await pod('a1');
    const ipA1 = await bridgeCni('ADD', A, a1);
    const b1 = await pod('b1');
    const ipB1 = await bridgeCni('ADD', B, b1);
    const blockA = block28(ipA1);
    const blockB = block28(ipB1);
    t.not(blockA, blockB, `each node has its own block (${blockA}, ${blockB})`);

    await waitFor(async () => (await birdRoute(blockA)) && (await birdRoute(blockB)), { what: 'BIRD has both blocks', timeoutMs: 30_000 });
    t.pass(`BIRD learned ${blockA} and ${blockB}`);
    const viaTor = (await waitFor(async () => {
      const a = await kernelRoute(nodeA, blockB);
      const b = await kernelRoute(nodeB, blockA);
      return a.includes(`via ${linkA.local.v4}`) && b.includes(`via ${linkB.local.v4}`) && [a, b];
    }, { what: 'each node routes the other block via the ToR', timeoutMs: 30_000 })) as [string, string];
    t.match(viaTor[0], /proto 201/, `node A: ${viaTor[0]}`);
    await pings(a1, ipB1, 'pod a1 (node A) to pod b1 (node B) through BIRD');
    await pings(b1, ipA1, 'pod b1 to pod a1');

    // ---- force a borrow: fill node A's block; the pool has no third block
    const avail = await ipcRequest<AvailableReply>(A.sock, 'ipam.available', {});
    const fill = await ipcRequest<AssignReply>(A.sock, 'ipam.assign', { handle: 'filler', num4: avail.v4.free, pools: ['pods'] });
    t.ok(fill.ips.every((x) => !x.borrowed && block28(x.ip) === blockA), `node A's block filled (${fill.ips.length} addresses)`);
    const a2 = await pod('a2');
    const ipA2 = await bridgeCni('ADD', A, a2);
    t.equal(block28(ipA2), blockB, `pod a2 (node A) borrowed ${ipA2} from node B's block`);
    const host32 = `${ipA2}/32`;
    await waitFor(() => birdRoute(host32), { what: `BIRD has the borrowed ${host32}`, timeoutMs: 30_000 });
    t.match(await birdc('show', 'route', 'for', ipA2), new RegExp(`${host32.replace(/\./g, '\\.')}.*\\n.*via ${linkA.peer.v4.replace(/\./g, '\\.')}`), 'from node A');
    await waitFor(async () => (await kernelRoute(nodeB, host32)).includes(`via ${linkB.local.v4}`), { what: `node B routes ${host32} via the ToR`, timeoutMs: 30_000 });
    await waitFor(async () => (await kernelRoute(nodeA, host32)).includes(`dev ${BRIDGE}`), { what: `node A routes ${host32} onto its bridge`, timeoutMs: 30_000 });
    t.pass(`${host32}: BIRD, node B (via the ToR) and node A (onto ${BRIDGE}) have it`);
    await pings(b1, ipA2, 'pod b1 (node B) to the borrowed pod a2 on node A');
    await pings(a2, ipB1, 'pod a2 to pod b1');

    // ---- release: DEL through the bridge plugin; the /32 is withdrawn
    await bridgeCni('DEL', A, a2);
    await waitFor(async () => !(await birdRoute(host32)), { what: `BIRD dropped ${host32}`, timeoutMs: 30_000 });
    await waitFor(async () => (await kernelRoute(nodeB, host32)) === '', { what: `node B dropped ${host32}`, timeoutMs: 30_000 });
    await waitFor(async () => (await kernelRoute(nodeA, host32)) === '', { what: `node A dropped its ${host32} bridge route`, timeoutMs: 30_000 });
    t.pass(`${host32} withdrawn from BIRD and both nodes`);
    t.ok(await birdRoute(blockB), "node B's block is still announced");

    const m = (await execInNetns(nodeA, '/usr/bin/curl', ['-s', 'http://127.0.0.1:9179/metrics'])).stdout;
    t.match(m, /blockspeaker_bgp_peer_state\{peer="10\.255\.\d+\.1",asn="65001"\} 6/, 'metrics: the ToR session is Established');
    t.match(await status(nodeA, '/dataplane'), { kind: 'linux', bridge: BRIDGE, errors: 0 }, 'dataplane status');

    // ---- clean stop
    for (const d of daemons) {
      const exited = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
      d.child.kill('SIGTERM');
      t.equal(await exited, 0, `${d.name} stopped cleanly`);
    }
    for (const p of podNames) await p.destroy();
  });
}
