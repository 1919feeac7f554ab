// A BGPPeer written to Calico's etcd brings a session up with a real BIRD, and deleting it tears the session down;
// a BGPFilter on it is applied and re-applied live (BIRD loses and regains the route it rejects); adding another
// BGPPeer meanwhile leaves the BIRD session alone (only the changed sessions are touched). As root:
// a blockspeaker daemon on ipam.layout calico, no peer in its config, BIRD in its own namespace on the lab segment.
//
// Needs root, bird2, iproute2, etcd; interopGate/etcdGate with REQUIRE_PEERS=1 decide skip vs fail.
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { etcdGate } from '../kit/etcd-cluster.ts';
import { ETCD, Lab, status } from './lab.ts';

const V3 = '/calico/resources/v3/projectcalico.org/';
const peer = (name: string, ip: string, asn: number) => JSON.stringify({ kind: 'BGPPeer', apiVersion: 'projectcalico.org/v3',
  metadata: { name, uid: `uid-${name}`, creationTimestamp: '2026-11-25T10:00:00Z' }, spec: { peerIP: ip, asNumber: asn } });

const gate = interopGate(t, ['bird']);
const haveEtcd = etcdGate(t);

if (!gate && haveEtcd) {
  t.test('a BGPPeer in etcd brings a BIRD session up; deleting it tears it down', async (t) => {
    const lab = await Lab.start(t, 'w', ['node-a', 'tor']);
    const [us, tor] = lab.nodes as [typeof lab.nodes[0], typeof lab.nodes[0]];
    const birdc = lab.bird(t, tor, [
      'protocol bgp bs {',
      '  local as 65001;',
      `  neighbor ${us.ip} as 64512;`,
      '  ipv4 { import all; export none; };',
      '  connect delay time 1;',
      '  connect retry time 2;',
      '  error wait time 1, 5;',
      '}',
    ]);
    const d = lab.daemon(t, us, (sock) => `node: { name: node-a, os: linux, bgp: { ipv4Address: ${us.ip}/24 } }
bgp: { asn: 64512, routerId: ${us.ip}, nodeToNodeMeshEnabled: false, announce: [10.99.0.0/24] }
ipam: { store: "${ETCD}", layout: calico, pools: [{ name: pods, cidr: 10.244.0.0/24, blockSize: 26 }] }
dataplane: { kind: none }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`);
    const peers = async (): Promise<{ address: string; state: string; since: number }[]> => (await status(us.ns, '/peers')) ?? [];
    const fail = async (e: unknown) => new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${lab.logs([d])}`);
    await waitFor(async () => (await status(us.ns, '/status'))?.calico, { what: 'daemon up on the calico layout', timeoutMs: 60_000 }).catch(async (e) => {
      throw await fail(e);
    });
    t.same(await peers(), [], 'no peers before the BGPPeer');

    t.equal((await lab.etcdctl('put', `${V3}bgppeers/tor`, peer('tor', tor.ip, 65001))).code, 0);
    try {
      await waitFor(async () => /bs\s+BGP.*Established/.test(await birdc('show', 'protocols')), { what: 'BIRD: session Established', timeoutMs: 60_000 });
      await waitFor(async () => /10\.99\.0\.0\/24/.test(await birdc('show', 'route', 'protocol', 'bs')), { what: 'BIRD has our route', timeoutMs: 30_000 });
    } catch (e) {
      throw await fail(e);
    }
    t.equal((await peers()).find((p) => p.address === tor.ip)!.state, 'Established');

    // A BGPFilter on the peering: re-applied live, BIRD loses the rejected route and gets it back with the rule gone.
    const filter = (rules: unknown[]) => JSON.stringify({ kind: 'BGPFilter', apiVersion: 'projectcalico.org/v3', metadata: { name: 'no-10-99' }, spec: { exportV4: rules } });
    await lab.etcdctl('put', `${V3}bgpfilters/no-10-99`, filter([{ action: 'Reject', matchOperator: 'Equal', cidr: '10.99.0.0/24' }]));
    await lab.etcdctl('put', `${V3}bgppeers/tor`, JSON.stringify({ ...JSON.parse(peer('tor', tor.ip, 65001)), spec: { peerIP: tor.ip, asNumber: 65001, filters: ['no-10-99'] } }));
    try {
      await waitFor(async () => !/10\.99\.0\.0\/24/.test(await birdc('show', 'route', 'protocol', 'bs')), { what: 'BIRD: route filtered out', timeoutMs: 60_000 });
      await lab.etcdctl('put', `${V3}bgpfilters/no-10-99`, filter([]));
      await waitFor(async () => /10\.99\.0\.0\/24/.test(await birdc('show', 'route', 'protocol', 'bs')), { what: 'BIRD: route back once the rule is gone', timeoutMs: 60_000 });
      await waitFor(async () => /bs\s+BGP.*Established/.test(await birdc('show', 'protocols')), { what: 'BIRD: session Established', timeoutMs: 60_000 });
    } catch (e) {
      throw await fail(e);
    }
    const filtered = (await peers()).find((p) => p.address === tor.ip)!;
    t.equal(filtered.state, 'Established', 'filters re-applied, session up');

    // Another BGPPeer: the BIRD session is not touched.
    await lab.etcdctl('put', `${V3}bgppeers/other`, peer('other', '10.77.0.99', 65002));
    await waitFor(async () => (await peers()).some((p) => p.address === '10.77.0.99'), { what: 'second peer added', timeoutMs: 30_000 });
    const still = (await peers()).find((p) => p.address === tor.ip)!;
    t.equal(still.state, 'Established', 'BIRD session still up');
    t.equal(still.since, filtered.since, 'and never re-established');

    await lab.etcdctl('del', `${V3}bgppeers/tor`);
    try {
      await waitFor(async () => !/bs\s+BGP.*Established/.test(await birdc('show', 'protocols')), { what: 'BIRD: session down', timeoutMs: 30_000 });
    } catch (e) {
      throw await fail(e);
    }
    await waitFor(async () => !(await peers()).some((p) => p.address === tor.ip), { what: 'peer gone from /peers', timeoutMs: 30_000 });
    t.notMatch(await birdc('show', 'route', 'protocol', 'bs'), /10\.99\.0\.0\/24/, 'our route gone from BIRD');
    t.same((await peers()).map((p) => p.address), ['10.77.0.99'], 'the other peer stays');
  });
}
