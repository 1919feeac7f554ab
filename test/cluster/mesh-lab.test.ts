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
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { interopGate } from '../kit/interop/gate.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { etcdGate } from '../kit/etcd-cluster.ts';
import { birdPeer, block28, ETCD, Lab, meshNodeYaml, status as get } from './lab.ts';

const POOL = '10.244.0.0/26'; // four /28 blocks
const BIRD_BLOCK = '10.244.200.0/26'; // calico-d's block (outside our pool: IPAM is not shared with BIRD here)

const gate = interopGate(t, ['bird']);
const haveEtcd = etcdGate(t);

if (!gate && haveEtcd) {
  t.test('mesh: three blockspeaker nodes and a calico-node BIRD, no configured peers', async (t) => {
    const lab = await Lab.start(t, 'm', ['node-a', 'calico-d', 'node-b', 'node-c']);
    const [nsA, nsD, nsB, nsC] = lab.nodes as [typeof lab.nodes[0], typeof lab.nodes[0], typeof lab.nodes[0], typeof lab.nodes[0]];
    // calico-d's Node, as registered before any blockspeaker starts.
    await lab.etcdctl('put', '/blockspeaker/cluster/v1/nodes/calico-d',
      JSON.stringify({ name: 'calico-d', labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: `${nsD.ip}/24` }));
    // BIRD as confd renders calico-node's mesh: a Mesh_<ip> protocol per node, passive toward higher addresses.
    const birdc = lab.bird(t, nsD, [nsA, nsB, nsC].map((n) => birdPeer(`Mesh_${n.ip.replace(/\./g, '_')}`, nsD, n)),
      [`protocol static { ipv4; route ${BIRD_BLOCK} blackhole; }`]);
    // ---- three blockspeaker daemons: no peers at all
    const daemons = [nsA, nsB, nsC].map((n) => lab.daemon(t, n, meshNodeYaml(n, POOL)));
    const [A, B, C] = daemons as [typeof daemons[0], typeof daemons[0], typeof daemons[0]];
    const logs = () => lab.logs(daemons);
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
    const overviewA = await get(A.ns, '/overview');
    t.same(overviewA.peers.filter((p: { mesh?: boolean }) => p.mesh === true).map((p: { address: string }) => p.address).sort(),
      [nsD.ip, nsB.ip, nsC.ip].sort(), 'the status page marks every mesh peer as such');

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
    const del = await lab.cli('node', '--store', ETCD, 'delete', 'node-c');
    t.equal(del.code, 0, `node delete: ${del.stdout}${del.stderr}`);
    for (const d of [A, B]) {
      await waitFor(async () => !((await get(d.ns, '/peers')) ?? []).some((p: { address: string }) => p.address === nsC.ip),
        { what: `${d.name} dropped its session to node-c`, timeoutMs: 30_000 });
    }
    t.pass('node-a and node-b dropped node-c from their mesh');
    t.same(await established(A), [nsD.ip, nsB.ip].sort(), "node-a's other mesh sessions stayed up");
    const dup = await lab.cli('node', '--store', ETCD, 'delete', 'node-c');
    t.match(dup.stderr, /no node named "node-c"/, 'deleting it again says it is not there');

    for (const d of [A, B]) {
      const ex = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
      d.child.kill('SIGTERM');
      t.equal(await ex, 0, `${d.name} stopped cleanly`);
    }
  });
}
