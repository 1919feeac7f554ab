// A running daemon on Calico's etcd layout follows calico's v3 resources as they are written: BGPPeers come, change
// and go (/peers), BGPConfiguration turns the mesh off and on (/cluster) and its AS is overridden by node.yaml with
// a warning, a BGPFilter deleted under a peer takes the peer out, IPPools are added, changed and removed (/ipam/pools),
// an IPAMConfiguration that differs from /calico/ipam/v2/config is reported in /status, and bad versions are
// refused by key and field while the last good one stays in force.
import t from 'tap';
import { spawnRun } from '../kit/daemon.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { freePort, waitFor } from '../kit/wait.ts';
import { calicoCluster } from '../ipam/calico-fixtures.ts';

const V3 = '/calico/resources/v3/projectcalico.org/';
const res = (kind: string, name: string, spec: Record<string, unknown>) =>
  JSON.stringify({ kind, apiVersion: 'projectcalico.org/v3', metadata: { name, uid: `uid-${name}`, creationTimestamp: '2026-11-25T10:00:00Z' }, spec });

interface Peer { address: string; asn: number; state: string; since: number }

t.test('daemon follows Calico resources in etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  for (const kv of calicoCluster(true)) await store.put(kv.key, kv.value);
  await store.put(`${V3}bgppeers/tor-a`, res('BGPPeer', 'tor-a', { peerIP: '192.0.2.1', asNumber: 65001 }));
  // Our own Node as calico-node / kube-controllers left it: fields we do not own must survive our registration.
  const ownNode = { kind: 'Node', apiVersion: 'projectcalico.org/v3',
    metadata: { name: 'linux-d', uid: 'uid-linux-d', creationTimestamp: '2026-11-25T09:00:00Z', annotations: { note: 'kept' }, labels: { 'kubernetes.io/os': 'linux' } },
    spec: { bgp: { ipv4Address: '10.0.0.14/24', ipv4IPIPTunnelAddr: '10.244.9.1' }, ipv4VXLANTunnelAddr: '10.244.9.0', orchRefs: [{ nodeName: 'linux-d', orchestrator: 'k8s' }] },
    status: { podCIDRs: ['10.244.9.0/26'] } };
  await store.put(`${V3}nodes/linux-d`, JSON.stringify(ownNode));
  const dir = mkdtempSync(join(tmpdir(), 'bs-calico-watch-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const statusPort = await freePort('127.0.0.1');
  const file = join(dir, 'node.yaml');
  writeFileSync(file, `node: { name: linux-d, os: linux, bgp: { ipv4Address: 10.0.0.14/24 } }
bgp: { asn: 64512, routerId: 10.0.0.14, listen: false, peers: [{ address: 192.0.2.9, asn: 65009 }] }
ipam: { store: "${etcd.url}", layout: calico }
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
`);
  const run = spawnRun(file, dir, t);
  const get = async (path: string) => (await fetch(`http://127.0.0.1:${statusPort}${path}`)).json();
  // /warnings: one entry per key with a count (src/daemon/warnings.ts); these tests read the messages.
  const warnings = async (): Promise<string[]> => ((await get('/warnings')) as { entries: { message: string }[] }).entries.map((w) => w.message);
  const peers = async (): Promise<Peer[]> => get('/peers');
  const until = <T>(what: string, fn: () => Promise<T | undefined | false>) => waitFor(what, fn, 90_000, 100).catch((e) => {
    throw new Error(`${(e as Error).message}\n${run.stderr().slice(-2000)}`);
  });

  // At start: the etcd peer is there with the configured one, and the mesh peers to the fixture's nodes.
  await until('the etcd peer at start', async () => (await peers().catch(() => [])).some((p) => p.address === '192.0.2.1'));
  const first = await peers();
  t.ok(first.some((p) => p.address === '192.0.2.9'), 'node.yaml peer');
  t.ok(first.some((p) => p.address === '10.0.0.11'), 'mesh peer (linux-a)');
  const rewritten = JSON.parse((await store.get(`${V3}nodes/linux-d`))!.value);
  t.same(rewritten, { ...ownNode, spec: { ...ownNode.spec, bgp: { ...ownNode.spec.bgp, asNumber: 64512 } } },
    'our Node rewritten at registration: every field another writer put there kept, only asNumber added');
  t.match((await get('/status')).calico, { resources: { applied: 2, refused: 0 }, ipamConfig: { inForce: '/calico/ipam/v2/config' } });

  // Added: a second BGPPeer.
  await store.put(`${V3}bgppeers/tor-b`, res('BGPPeer', 'tor-b', { peerIP: '192.0.2.2', asNumber: 65002 }));
  await until('tor-b added', async () => (await peers()).some((p) => p.address === '192.0.2.2'));
  // Changed: tor-a's AS.
  await store.put(`${V3}bgppeers/tor-a`, res('BGPPeer', 'tor-a', { peerIP: '192.0.2.1', asNumber: 65011 }));
  await until('tor-a changed', async () => (await peers()).find((p) => p.address === '192.0.2.1')?.asn === 65011);
  // A bad version: a warning naming key and field, the last good version stays.
  await store.put(`${V3}bgppeers/tor-a`, res('BGPPeer', 'tor-a', { peerIP: '192.0.2.1', asNumber: 'many' }));
  const warned = await until('bad tor-a warned', async () => (await warnings()).find((w) => w.includes('bgppeers/tor-a') && w.includes('spec.asNumber')));
  t.match(warned, /bgppeers\/tor-a \(BGPPeer tor-a\): spec\.asNumber: .*keeping the version of revision \d+/);
  t.equal((await peers()).find((p) => p.address === '192.0.2.1')?.asn, 65011, 'last good version in force');
  t.match(((await get('/calico')).keys as { key: string }[]).find((k) => k.key.endsWith('bgppeers/tor-a')), { state: 'stale' });
  // A peer with a filter; deleting the filter takes the peer out (never unfiltered); putting it back restores it.
  await store.put(`${V3}bgpfilters/no-svc`, res('BGPFilter', 'no-svc', { exportV4: [{ action: 'Reject', matchOperator: 'In', cidr: '10.96.0.0/12' }] }));
  await store.put(`${V3}bgppeers/tor-c`, res('BGPPeer', 'tor-c', { peerIP: '192.0.2.3', asNumber: 65003, filters: ['no-svc'] }));
  await until('tor-c added', async () => (await peers()).some((p) => p.address === '192.0.2.3'));
  await store.delete(`${V3}bgpfilters/no-svc`);
  await until('tor-c out with its filter', async () => !(await peers()).some((p) => p.address === '192.0.2.3'));
  t.ok((await warnings()).some((w) => /bgppeers\/tor-c .*no BGPFilter named "no-svc".*peer left out/.test(w)), 'warned');
  // Deleted: tor-b goes; the others stay.
  await store.delete(`${V3}bgppeers/tor-b`);
  await until('tor-b deleted', async () => !(await peers()).some((p) => p.address === '192.0.2.2'));
  t.ok((await peers()).some((p) => p.address === '192.0.2.9'), 'the node.yaml peer is untouched');

  // BGPConfiguration: the mesh off (node.yaml leaves it unset), the AS overridden by node.yaml with a warning.
  await store.put(`${V3}bgpconfigurations/default`, res('BGPConfiguration', 'default', { asNumber: 64999, nodeToNodeMeshEnabled: false }));
  await until('mesh off', async () => (await get('/cluster')).mesh === false && !(await peers()).some((p) => p.address === '10.0.0.11'));
  t.ok((await warnings()).some((w) => w.includes('etcd: BGPConfiguration asNumber 64999 differs from bgp.asn 64512; bgp.asn is used')));
  // The mesh back on: nodes without their own AS (the fixture's) run the cluster's, as calico-node reads it.
  await store.put(`${V3}bgpconfigurations/default`, res('BGPConfiguration', 'default', { asNumber: 64999, nodeToNodeMeshEnabled: true }));
  await until('mesh on', async () => (await get('/cluster')).mesh === true && (await peers()).some((p) => p.address === '10.0.0.11'));
  t.equal((await peers()).find((p) => p.address === '10.0.0.11')?.asn, 64999, 'mesh peer in the cluster AS');
  t.equal((await get('/status')).asn, 64512, 'our own AS is node.yaml\'s');

  // IPPools: added, changed, a bad one refused, removed.
  await store.put(`${V3}ippools/extra`, res('IPPool', 'extra', { cidr: '10.250.0.0/24', blockSize: 28, ipipMode: 'Never', vxlanMode: 'Never' }));
  await until('pool added', async () => ((await get('/ipam/pools')) as { name: string }[]).some((p) => p.name === 'extra'));
  await store.put(`${V3}ippools/extra`, res('IPPool', 'extra', { cidr: '10.250.0.0/24', blockSize: 28, disabled: true }));
  await until('pool changed', async () => ((await get('/ipam/pools')) as { name: string; disabled: boolean }[]).find((p) => p.name === 'extra')?.disabled === true);
  await store.put(`${V3}ippools/wide`, res('IPPool', 'wide', { cidr: '10.251.0.0/24', blockSize: 99 }));
  await until('bad pool warned', async () => (await warnings()).some((w) => w.includes('ippools/wide') && /blockSize/.test(w)));
  t.notOk(((await get('/ipam/pools')) as { name: string }[]).some((p) => p.name === 'wide'), 'never applied');
  await store.delete(`${V3}ippools/extra`);
  await until('pool removed', async () => !((await get('/ipam/pools')) as { name: string }[]).some((p) => p.name === 'extra'));

  // IPAMConfiguration: /status says /calico/ipam/v2/config is in force and what the resource sets differently.
  await store.put(`${V3}ipamconfigurations/default`, res('IPAMConfiguration', 'default', { strictAffinity: false, maxBlocksPerHost: 0 }));
  const st = await until('ipam config status', async () => {
    const c = (await get('/status')).calico;
    return c.ipamConfig.differs.length ? c : undefined;
  });
  t.same(st.ipamConfig.differs, ['strictAffinity']);
  t.equal(st.ipamConfig.inForce, '/calico/ipam/v2/config');
  t.match(st.ipamConfig.warning, /IPAMConfiguration default sets strictAffinity differently/);
  t.match(run.stderr(), /etcd: BGPPeer tor-b deleted/, 'logged');
});
