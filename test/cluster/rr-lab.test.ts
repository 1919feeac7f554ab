// Route reflection with real parts, as root: the mesh off, node-a (blockspeaker) is the route reflector (cluster ID
// 244.0.0.1, label route-reflector=true), set up the way Calico's documentation tells its users: a BGPPeer with
// nodeSelector all() and peerSelector route-reflector == 'true'. Its clients are node-b (blockspeaker) and calico-d
// (BIRD as confd renders a peering with a reflector). Routes flow between the clients through the reflector only,
// and BIRD sees ORIGINATOR_ID = node-b's router ID and CLUSTER_LIST = 244.0.0.1. Service IPs from the
// BGPConfiguration reach BIRD, except what a BGPFilter on the peering rejects.
//
// Needs root, bird2, iproute2, etcd; interopGate/etcdGate with REQUIRE_PEERS=1 decide skip vs fail.
import t from 'tap';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { interopGate } from '../kit/interop/gate.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { etcdGate } from '../kit/etcd-cluster.ts';
import { birdPeer, block28, ETCD, Lab, status } from './lab.ts';

const BIRD_BLOCK = '10.244.200.0/26';
const MANIFEST = `apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: { name: default }
spec:
  nodeToNodeMeshEnabled: false
  asNumber: 64512
  serviceClusterIPs: [{ cidr: 10.96.0.0/12 }]
  serviceExternalIPs: [{ cidr: 192.0.2.0/24 }]
---
apiVersion: projectcalico.org/v3
kind: BGPFilter
metadata: { name: no-cluster-ips }
spec:
  exportV4: [{ cidr: 10.96.0.0/12, matchOperator: Equal, action: Reject }]
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: { name: peer-with-route-reflectors }
spec:
  nodeSelector: all()
  peerSelector: route-reflector == 'true'
  filters: [no-cluster-ips]
`;

const gate = interopGate(t, ['bird']);
const haveEtcd = etcdGate(t);

if (!gate && haveEtcd) {
  t.test('route reflector: blockspeaker reflects between a blockspeaker client and a BIRD client', async (t) => {
    const lab = await Lab.start(t, 'r', ['node-a', 'calico-d', 'node-b']);
    const [rrNode, birdNode, bNode] = lab.nodes as [typeof lab.nodes[0], typeof lab.nodes[0], typeof lab.nodes[0]];
    await lab.etcdctl('put', '/blockspeaker/cluster/v1/nodes/calico-d',
      JSON.stringify({ name: 'calico-d', labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: `${birdNode.ip}/24` }));
    // calico-d's confd renders one peering, to the reflector (the mesh is off).
    const birdc = lab.bird(t, birdNode, [birdPeer('Node_10_77_0_1', birdNode, rrNode)], [`protocol static { ipv4; route ${BIRD_BLOCK} blackhole; }`]);
    const yaml = (n: typeof rrNode, nodeExtra: string) => (sock: string) => `node:
  name: ${n.name}
  os: linux
  labels: {${nodeExtra ? ' route-reflector: "true" ' : ''}}
  bgp: { ipv4Address: ${n.ip}/24${nodeExtra} }
bgp:
  asn: 64512
  routerId: ${n.ip}
ipam:
  store: ${ETCD}
  calico: [calico.yaml]
  pools: [{ name: pods, cidr: 10.244.0.0/26, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`;
    const rr = lab.daemon(t, rrNode, yaml(rrNode, ', routeReflectorClusterID: 244.0.0.1'), { 'calico.yaml': MANIFEST });
    const b = lab.daemon(t, bNode, yaml(bNode, ''));
    try {
      await waitFor(async () => /Node_10_77_0_1\s+BGP.*Established/.test(await birdc('show', 'protocols')), { what: 'BIRD: session to the reflector Established', timeoutMs: 60_000 });
      await waitFor(async () => ((await status(rr.ns, '/peers')) ?? []).filter((p: { state: string }) => p.state === 'Established').length === 2,
        { what: 'the reflector has both clients Established', timeoutMs: 60_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${lab.logs([rr, b])}`);
    }
    const peersB = (await status(b.ns, '/peers')).map((p: { address: string }) => p.address);
    t.same(peersB, [rrNode.ip], 'node-b peers with the reflector only (mesh off, peerSelector)');
    t.same((await status(rr.ns, '/cluster')).meshPeers.map((p: { address: string }) => p.address), [birdNode.ip, bNode.ip],
      'the reflector peers back with every node nodeSelector matches');

    const got = await ipcRequest<AssignReply>(b.sock, 'ipam.assign', { handle: 'pod-1', num4: 1, pools: ['pods'] });
    const blockB = block28(got.ips[0]!.ip);
    await waitFor(async () => (await birdc('show', 'route', 'for', blockB.split('/')[0]!)).includes(blockB), { what: `BIRD learned ${blockB}`, timeoutMs: 30_000 });
    const all = await birdc('show', 'route', 'all', 'for', blockB.split('/')[0]!);
    t.match(all, /BGP\.originator_id: 10\.77\.0\.3/, "BIRD sees ORIGINATOR_ID = node-b's router ID");
    t.match(all, /BGP\.cluster_list: 244\.0\.0\.1/, "BIRD sees CLUSTER_LIST = the reflector's cluster ID");
    t.match(all, /BGP\.next_hop: 10\.77\.0\.3/, 'the next hop is node-b, not the reflector');
    await waitFor(async () => (await status(b.ns, `/routes?prefix=${encodeURIComponent(BIRD_BLOCK)}`))?.prefix === BIRD_BLOCK,
      { what: `node-b learned ${BIRD_BLOCK} through the reflector`, timeoutMs: 30_000 });
    const r = await status(b.ns, `/routes?prefix=${encodeURIComponent(BIRD_BLOCK)}`);
    t.match(r.paths[0].attributes, { ORIGINATOR_ID: birdNode.ip, NEXT_HOP: birdNode.ip }, "node-b: BIRD's block with ORIGINATOR_ID calico-d");
    t.pass(`routes flow client -> reflector -> client both ways (${blockB}, ${BIRD_BLOCK})`);

    // Service IPs from BGPConfiguration: announced by every node; the BGPFilter on the peering rejects the cluster IPs.
    await waitFor(async () => (await birdc('show', 'route', 'for', '192.0.2.1')).includes('192.0.2.0/24'), { what: 'BIRD learned the external IPs', timeoutMs: 30_000 });
    t.pass('serviceExternalIPs 192.0.2.0/24 reached BIRD');
    t.notOk((await birdc('show', 'route', 'for', '10.96.0.1')).includes('10.96.0.0/12'), 'the BGPFilter rejected serviceClusterIPs 10.96.0.0/12 on export');
    t.ok((await status(rr.ns, '/routes?prefix=10.96.0.0%2F12'))?.prefix, 'the reflector itself holds 10.96.0.0/12 (announced, filtered only toward peers)');
    t.same((await status(rr.ns, '/status')).services, { clusterIPs: ['10.96.0.0/12'], externalIPs: ['192.0.2.0/24'], loadBalancerIPs: [] }, '/status shows the service IPs');
  });
}
