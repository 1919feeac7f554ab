// The node-to-node mesh with real parts, as root, in namespaces this test creates:
//
//   [node-a .1] [calico-d .2: BIRD as confd renders calico-node's mesh] [node-b .3] [node-c .4]
//        \_____________________ bridge in ns "sw" (etcd on .254) ________________________/
//
// Three blockspeaker daemons share a real etcd; none has a peer in its config. calico-d's Node is in the store as a
// calico-node leaves it, and its BIRD has a `Mesh_<ip>` iBGP protocol per node, `passive on` toward the higher
// addresses (.3, .4): so node-b and node-c must open those sessions, and node-a (.1, lower) must wait for BIRD.
// Every node learns every other node's blocks, BIRD's block and a borrowed /32; a node stopped is withdrawn
// everywhere, and `blockspeaker node delete` takes it out of every mesh.
//
// Needs root, bird2, iproute2, etcd; interopGate/etcdGate with REQUIRE_PEERS=1 decide skip vs fail.
import t from 'tap';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { createNetns, execInNetns, interopGate, runInNetns, waitFor, type Netns } from '../interop/harness.ts';
import { etcdGate } from '../store/etcd-harness.ts';

const BIN = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const POOL = '10.244.0.0/26'; // four /28 blocks
const BIRD_BLOCK = '10.244.200.0/26'; // calico-d's block (outside our pool: IPAM is not shared with BIRD here)
const ETCD = 'http://10.77.0.254:2379';

// Children run the sources under test (no stale dist/), without tap's loaders.
process.env.BLOCKSPEAKER_FROM_SOURCE = '1';
function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'NODE_OPTIONS' || /^_?TAP/i.test(k)) continue;
    env[k] = v;
  }
  return env;
}

const block28 = (ip: string) => {
  const p = ip.split('.').map(Number);
  return `${p[0]}.${p[1]}.${p[2]}.${p[3]! & ~15}/28`;
};

const gate = interopGate(t, ['bird']);
const haveEtcd = etcdGate(t);

if (!gate && haveEtcd) {
  t.test('mesh: three blockspeaker nodes and a calico-node BIRD, no configured peers', async (t) => {
    const pid = process.pid;
    const dir = mkdtempSync(join(tmpdir(), `bs-interop-${pid}-mesh-`));
    t.teardown(() => {
      if (process.env.KEEP_INTEROP !== '1') rmSync(dir, { recursive: true, force: true });
    });

    // ---- one L2 segment: a bridge in "sw", one veth per node
    const sw = await createNetns(`bs-msw-${pid}`);
    t.teardown(() => sw.destroy());
    await sw.exec('/bin/sh', ['-c', 'ip link add br0 type bridge && ip link set br0 up && ip addr add 10.77.0.254/24 dev br0']);
    const nodes: { name: string; ip: string; ns: Netns }[] = [];
    for (const [i, name] of ['node-a', 'calico-d', 'node-b', 'node-c'].entries()) {
      const ns = await createNetns(`bs-m${i}-${pid}`);
      t.teardown(() => ns.destroy());
      const ip = `10.77.0.${i + 1}`;
      const vx = `vm${i}x${pid}`.slice(0, 15);
      await execInNetns(sw, '/usr/sbin/ip', ['link', 'add', vx, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.name]);
      await sw.exec('/usr/sbin/ip', ['link', 'set', vx, 'master', 'br0', 'up']);
      await ns.exec('/bin/sh', ['-c', `ip addr add ${ip}/24 dev eth0 && ip link set eth0 up`]);
      nodes.push({ name, ip, ns });
    }
    const [nsA, nsD, nsB, nsC] = nodes as [typeof nodes[0], typeof nodes[0], typeof nodes[0], typeof nodes[0]];

    // ---- etcd on the segment
    mkdirSync(join(dir, 'etcd'));
    const etcd = runInNetns(sw, 'etcd', ['--name', 'lab', '--data-dir', join(dir, 'etcd'), '--listen-client-urls', ETCD,
      '--advertise-client-urls', ETCD, '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls',
      'http://127.0.0.1:2380', '--initial-cluster', 'lab=http://127.0.0.1:2380'], { logFile: join(dir, 'etcd.log') });
    t.teardown(() => void etcd.kill('SIGKILL'));
    const etcdctl = (...args: string[]) => execInNetns(sw, 'etcdctl', ['--endpoints', ETCD, ...args], { check: false });
    await waitFor(async () => (await etcdctl('endpoint', 'health')).code === 0, { what: 'etcd healthy', timeoutMs: 30_000 });

    // calico-d's Node, as registered before any blockspeaker starts.
    await etcdctl('put', `/blockspeaker/cluster/v1/nodes/calico-d`,
      JSON.stringify({ name: 'calico-d', labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: `${nsD.ip}/24` }));

    // ---- BIRD as confd renders calico-node's mesh (bird2 syntax of bird.cfg.template's mesh peers)
    const ctl = join(dir, 'bird.ctl');
    const mesh = [nsA, nsB, nsC].map((n) => [
      `protocol bgp Mesh_${n.ip.replace(/\./g, '_')} from bgp_template {`,
      `  neighbor ${n.ip} as 64512;`,
      `  source address ${nsD.ip};`,
      '  ttl security off;',
      '  multihop;',
      // confd: "Make mesh unidirectional to avoid race conditions": passive toward a peer whose address sorts higher.
      ...(n.ip > nsD.ip ? ['  passive on;'] : []),
      '  graceful restart time 120;',
      '}',
    ].join('\n'));
    writeFileSync(join(dir, 'bird.conf'), [
      `log "${join(dir, 'bird.log')}" all;`,
      `router id ${nsD.ip};`,
      'protocol device { scan time 1; }',
      'protocol direct { ipv4; interface "eth0"; }',
      `protocol static { ipv4; route ${BIRD_BLOCK} blackhole; }`,
      'template bgp bgp_template {',
      '  description "Connection to BGP peer";',
      '  local as 64512;',
      '  ipv4 { gateway recursive; add paths on; import all; export all; };',
      '  graceful restart;',
      '  connect delay time 2;',
      '  connect retry time 2;',
      '  error wait time 1, 5;',
      '}',
      ...mesh,
      '',
    ].join('\n'));
    const bird = runInNetns(nsD.ns, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctl, '-P', join(dir, 'bird.pid')],
      { logFile: join(dir, 'bird.out') });
    t.teardown(() => void bird.kill('SIGKILL'));
    const birdc = async (...args: string[]) => (await execInNetns(nsD.ns, '/usr/sbin/birdc', ['-s', ctl, ...args], { check: false })).stdout;

    // ---- three blockspeaker daemons: no peers at all
    const daemons: { name: string; ip: string; ns: Netns; sock: string; child: ChildProcess; log: string }[] = [];
    for (const n of [nsA, nsB, nsC]) {
      const sock = join(dir, `${n.name}.sock`);
      const file = join(dir, `${n.name}.yaml`);
      const runDir = join(dir, `${n.name}-run`);
      mkdirSync(runDir);
      writeFileSync(file, `node:
  name: ${n.name}
  os: linux
  bgp: { ipv4Address: ${n.ip}/24 }
bgp:
  asn: 64512
  routerId: ${n.ip}
ipam:
  store: etcd://10.77.0.254:2379
  pools: [{ name: pods, cidr: ${POOL}, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`);
      const log = join(dir, `${n.name}.log`);
      const child = runInNetns(n.ns, process.execPath, [BIN, 'run', '-c', file, '--run-dir', runDir], { logFile: log, env: childEnv() });
      daemons.push({ name: n.name, ip: n.ip, ns: n.ns, sock, child, log });
    }
    const [A, B, C] = daemons as [typeof daemons[0], typeof daemons[0], typeof daemons[0]];
    t.teardown(() => {
      for (const d of daemons) if (d.child.exitCode === null) d.child.kill('SIGKILL');
    });
    const logs = () => daemons.map((d) => `--- ${d.name}\n${readFileSync(d.log, 'utf8').split('\n').slice(-12).join('\n')}`).join('\n');
    const get = async (ns: Netns, path: string) => {
      const r = await execInNetns(ns, '/usr/bin/curl', ['-s', `http://127.0.0.1:9179${path}`], { check: false });
      try {
        return JSON.parse(r.stdout);
      } catch {
        return null;
      }
    };
    const established = async (d: typeof A) => ((await get(d.ns, '/peers')) ?? []).filter((p: { state: string }) => p.state === 'Established')
      .map((p: { address: string }) => p.address).sort();

    try {
      await waitFor(async () => {
        const protos = await birdc('show', 'protocols');
        return [A, B, C].every((d) => new RegExp(`Mesh_${d.ip.replace(/\./g, '_')}\\s+BGP.*Established`).test(protos));
      }, { what: 'BIRD: Mesh_ sessions to all three nodes Established', timeoutMs: 60_000 });
      for (const d of daemons) {
        const want = [nsA.ip, nsD.ip, nsB.ip, nsC.ip].filter((ip) => ip !== d.ip).sort();
        await waitFor(async () => JSON.stringify(await established(d)) === JSON.stringify(want), { what: `${d.name}: mesh Established to ${want}`, timeoutMs: 60_000 });
      }
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${logs()}`);
    }
    t.pass('a full mesh of four nodes: BIRD and all three blockspeakers Established with every other node');
    const clusterA = await get(A.ns, '/cluster');
    t.same(clusterA.meshPeers.map((p: { address: string; passive: boolean }) => [p.address, p.passive]),
      [[nsD.ip, true], [nsB.ip, true], [nsC.ip, true]], 'node-a (.1, lowest) waits for every higher node');
    const clusterC = await get(C.ns, '/cluster');
    t.same(clusterC.meshPeers.map((p: { address: string; passive: boolean }) => p.passive), [false, false, false], 'node-c (.4, highest) connects to all');
    t.same(clusterA.self.labels, { 'kubernetes.io/os': 'linux' }, 'the OS is registered as the kubernetes.io/os label');

    // ---- blocks and a borrowed /32
    const assign = (d: typeof A, handle: string, num4: number) => ipcRequest<AssignReply>(d.sock, 'ipam.assign', { handle, num4, pools: ['pods'] });
    const blocks: Record<string, string> = {};
    for (const d of daemons) blocks[d.name] = block28((await assign(d, `first-${d.name}`, 1)).ips[0]!.ip);
    t.equal(new Set(Object.values(blocks)).size, 3, `each node claimed its own block: ${JSON.stringify(blocks)}`);
    // The rest of node-a's block, then the pool's fourth block (at most 16 addresses per request).
    const fill = { ips: [...(await assign(A, 'fill1', 15)).ips, ...(await assign(A, 'fill2', 16)).ips] };
    t.notOk(fill.ips.some((x) => x.borrowed), 'filling node-a takes its own blocks');
    const extraA = [...new Set(fill.ips.map((x) => block28(x.ip)))].filter((b) => b !== blocks['node-a']);
    const borrowed = (await assign(A, 'borrow', 1)).ips[0]!;
    t.ok(borrowed.borrowed, `node-a borrowed ${borrowed.ip} from ${borrowed.block}`);
    const host32 = `${borrowed.ip}/32`;

    const routeAt = async (d: typeof A, prefix: string) => (await get(d.ns, `/routes?prefix=${encodeURIComponent(prefix)}`))?.prefix === prefix;
    const birdHas = async (prefix: string) => (await birdc('show', 'route', 'for', prefix.split('/')[0]!)).includes(prefix);
    const expect: [typeof A, string[]][] = [
      [A, [blocks['node-b']!, blocks['node-c']!, BIRD_BLOCK]],
      [B, [blocks['node-a']!, ...extraA, blocks['node-c']!, BIRD_BLOCK, host32]],
      [C, [blocks['node-a']!, ...extraA, blocks['node-b']!, BIRD_BLOCK, host32]],
    ];
    for (const [d, prefixes] of expect) {
      await waitFor(async () => (await Promise.all(prefixes.map((p) => routeAt(d, p)))).every(Boolean),
        { what: `${d.name} learned ${prefixes.join(', ')}`, timeoutMs: 30_000 });
      t.pass(`${d.name} learned ${prefixes.join(', ')} over the mesh`);
    }
    const birdWants = [blocks['node-a']!, ...extraA, blocks['node-b']!, blocks['node-c']!, host32];
    await waitFor(async () => (await Promise.all(birdWants.map(birdHas))).every(Boolean), { what: `BIRD learned ${birdWants}`, timeoutMs: 30_000 });
    t.pass(`calico-node's BIRD learned every block and the borrowed ${host32}`);
    const viaB = await get(B.ns, `/routes?prefix=${encodeURIComponent(host32)}`);
    t.equal(viaB.paths[0].attributes.NEXT_HOP, nsA.ip, "the borrowed /32's next hop is node-a's BGP address");

    // ---- node-c stops (SIGINT: Cease): its block is withdrawn everywhere
    const exited = new Promise<number | null>((r) => C.child.once('exit', (code) => r(code)));
    C.child.kill('SIGINT');
    t.equal(await exited, 0, 'node-c stopped');
    await waitFor(async () => !(await routeAt(A, blocks['node-c']!)) && !(await routeAt(B, blocks['node-c']!)) && !(await birdHas(blocks['node-c']!)),
      { what: `${blocks['node-c']} withdrawn from node-a, node-b and BIRD`, timeoutMs: 30_000 });
    t.pass(`node-c's ${blocks['node-c']} withdrawn from node-a, node-b and BIRD`);
    t.ok((await get(A.ns, '/cluster')).nodes.some((n: { name: string }) => n.name === 'node-c'), 'a stopped node stays registered (no lease)');

    // ---- node delete: out of every mesh
    const del = await execInNetns(sw, process.execPath, [BIN, 'node', '--store', 'etcd://10.77.0.254:2379', 'delete', 'node-c'], { check: false });
    t.equal(del.code, 0, `node delete: ${del.stdout}${del.stderr}`);
    for (const d of [A, B]) {
      await waitFor(async () => !((await get(d.ns, '/peers')) ?? []).some((p: { address: string }) => p.address === nsC.ip),
        { what: `${d.name} dropped its session to node-c`, timeoutMs: 30_000 });
    }
    t.pass('node-a and node-b dropped node-c from their mesh');
    t.same(await established(A), [nsD.ip, nsB.ip].sort(), "node-a's other mesh sessions stayed up");
    const dup = await execInNetns(sw, process.execPath, [BIN, 'node', '--store', 'etcd://10.77.0.254:2379', 'delete', 'node-c'], { check: false });
    t.match(dup.stderr, /no node named "node-c"/, 'deleting it again says it is not there');

    for (const d of [A, B]) {
      const ex = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
      d.child.kill('SIGTERM');
      t.equal(await ex, 0, `${d.name} stopped cleanly`);
    }
  });
}
