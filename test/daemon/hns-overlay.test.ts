// Overlay through the daemon: two Windows nodes share one real etcd, each with the HNS dataplane on its own in-memory
// fake. Each publishes its provider address and DR MAC beside its affinities; each node's blocks show up on the
// other as exactly one RemoteSubnetRoute with the owner's PA and MAC; a node with blocks but no published facts gets
// no route and is named at /dataplane; a steady state plans nothing.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Daemon } from '../../src/daemon/daemon.ts';
import type { FakeHns } from '../../src/hns/fake.ts';
import type { HnsReconciler } from '../../src/hns/reconcile.ts';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import { ourVtepLayout } from '../../src/cluster/vtep.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { startHnsDaemon } from '../kit/daemon.ts';

const dir = mkdtempSync(join(tmpdir(), `bs-hns-overlay-${process.pid}-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

interface Node { d: Daemon; fake: FakeHns; sock: string; reconciler: HnsReconciler; port: number }

t.test('two overlay nodes on one etcd: each other\'s blocks via the owner\'s PA and DR MAC', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const start = async (name: string, pa: string, mac: string): Promise<Node> => {
    const sock = join(dir, `${name}.sock`);
    const file = join(dir, `${name}.yaml`);
    const text = `
node: { name: ${name}, os: windows, bgp: { ipv4Address: ${pa}/24 } }
ipam:
  store: "${etcd.url}"
  pools: [{ name: p4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: hns, mode: overlay, network: vxlan0, vni: 4097, drMac: "${mac}", providerAddress: ${pa} }
status: { listen: "127.0.0.1:0" }
ipc: { path: ${sock} }
`;
    const { d, fake, reconciler } = await startHnsDaemon(file, text, t);
    return { d, fake, sock, reconciler, port: d.status.address()!.port };
  };
  const a = await start('win-a', '192.168.50.10', '00:15:5d:0a:0a:0a');
  const b = await start('win-b', '192.168.50.11', '00-15-5D-0B-0B-0B');
  const assign = async (n: Node, handle: string) => ((await ipcRequest(n.sock, 'ipam.assign', { handle, num4: 1 })) as AssignReply).ips[0].ip;
  const blockOf = (ip: string) => `${ip.split('.').slice(0, 3).join('.')}.${Number(ip.split('.')[3]) & ~63}/26`;
  const ipA = await assign(a, 'pod-a1');
  const ipB = await assign(b, 'pod-b1');
  t.not(blockOf(ipA), blockOf(ipB), 'each node has its own block');

  // A third node with a block and no published facts (a node not running blockspeaker yet).
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  const ipam = new Ipam(store);
  await ipam.setHost({ name: 'win-ghost', os: 'windows', labels: {} });
  const ghost = (await ipam.autoAssign({ host: 'win-ghost', handle: 'pod-g1', num4: 1 })).ipv4[0].ip;

  t.same(JSON.parse((await store.get(ourVtepLayout.key('win-a')))!.value), { providerAddress: '192.168.50.10', drMac: '00-15-5D-0A-0A-0A' }, 'win-a published beside its affinities');

  const rsr = (n: Node) => {
    const net = n.fake.snapshot().Networks.find((x) => x.Name === 'vxlan0');
    return (net?.Policies ?? []).filter((p) => p.Type === 'RemoteSubnetRoute').map((p) => p.Settings);
  };
  for (const n of [a, b]) await n.reconciler.runOnce();
  for (const n of [a, b]) await n.reconciler.runOnce();
  t.same(rsr(b), [{ DestinationPrefix: blockOf(ipA), IsolationId: 4097, ProviderAddress: '192.168.50.10', DistributedRouterMacAddress: '00-15-5D-0A-0A-0A' }], 'win-b routes win-a\'s block via win-a');
  t.same(rsr(a), [{ DestinationPrefix: blockOf(ipB), IsolationId: 4097, ProviderAddress: '192.168.50.11', DistributedRouterMacAddress: '00-15-5D-0B-0B-0B' }], 'win-a routes win-b\'s block via win-b');

  const dp = await (await fetch(`http://127.0.0.1:${b.port}/dataplane`)).json();
  t.match(dp.overlay.published, /^192\.168\.50\.11 00-15-5D-0B-0B-0B/);
  t.same(dp.overlay.unrouted, [{ node: 'win-ghost', blocks: [blockOf(ghost)], reason: 'no provider address and DR MAC published for this node' }], 'the node without facts is named, with its blocks');
  t.equal(dp.overlay.remoteNodes, 2);

  const steady = await b.reconciler.runOnce();
  t.equal(steady.ok, true);
  t.equal(steady.ops, 0, 'second pass plans nothing');

  // The ghost publishes: win-b routes its block at the next pass (the store watch asks for one).
  await store.put(ourVtepLayout.key('win-ghost'), JSON.stringify({ providerAddress: '192.168.50.12', drMac: '00-15-5D-0C-0C-0C' }));
  await b.reconciler.runOnce();
  t.same(rsr(b).map((s) => (s as { ProviderAddress: string }).ProviderAddress).sort(), ['192.168.50.10', '192.168.50.12']);
  const dp2 = await (await fetch(`http://127.0.0.1:${b.port}/dataplane`)).json();
  t.same(dp2.overlay.unrouted, []);
});
