// Calico v3 resources as etcd holds them, through the manifest importer: the same resource means the same thing in
// etcd and in a file; a bad version is refused with its key and field while the last good one stays; a peer whose
// filter is missing is left out (never applied unfiltered) and comes back when the filter does.
import t from 'tap';
import { importCalico } from '../../src/config/calico.ts';
import { CalicoResourceSet, watchedKey } from '../../src/config/calico-etcd.ts';

const V3 = '/calico/resources/v3/projectcalico.org/';
const node = { name: 'win-a', labels: { 'kubernetes.io/os': 'windows' } };
const peer = (name: string, spec: Record<string, unknown>) => JSON.stringify({ kind: 'BGPPeer', apiVersion: 'projectcalico.org/v3',
  metadata: { name, uid: 'u-1', creationTimestamp: '2026-11-25T10:00:00Z' }, spec });
const filter = (name: string) => JSON.stringify({ kind: 'BGPFilter', apiVersion: 'projectcalico.org/v3', metadata: { name },
  spec: { exportV4: [{ action: 'Reject', matchOperator: 'In', cidr: '10.96.0.0/12' }] } });

t.test('watched keys', async (t) => {
  t.same(watchedKey(`${V3}bgppeers/rr1`), { plural: 'bgppeers', kind: 'BGPPeer', name: 'rr1' });
  t.same(watchedKey(`${V3}ipamconfigurations/default`), { plural: 'ipamconfigurations', kind: 'IPAMConfiguration', name: 'default' });
  t.equal(watchedKey(`${V3}nodes/win-a`), undefined, 'nodes are the registry\'s');
  t.equal(watchedKey('/calico/ipam/v2/config'), undefined);
});

t.test('a resource in etcd and in a manifest mean the same', async (t) => {
  const set = new CalicoResourceSet(node);
  const docs = [
    peer('tor', { peerIP: '10.0.0.1', asNumber: 65001, keepaliveTime: '20s', filters: ['no-svc'] }),
    filter('no-svc'),
    JSON.stringify({ kind: 'BGPConfiguration', metadata: { name: 'default' }, spec: { asNumber: 64512, nodeToNodeMeshEnabled: false, serviceClusterIPs: [{ cidr: '10.96.0.0/12' }] } }),
    JSON.stringify({ kind: 'IPPool', metadata: { name: 'p4' }, spec: { cidr: '10.244.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'Never' } }),
  ];
  set.put(`${V3}bgppeers/tor`, docs[0], 5);
  t.equal(set.states()[0].state, 'refused', 'the peer waits for its filter');
  t.match(set.states()[0].error, /bgppeers\/tor \(BGPPeer tor\): spec\.filters\[0\]: no BGPFilter named "no-svc"/);
  t.same(set.put(`${V3}bgpfilters/no-svc`, docs[1], 6), [], 'the filter arrives');
  set.put(`${V3}bgpconfigurations/default`, docs[2], 7);
  set.put(`${V3}ippools/p4`, docs[3], 8);
  t.same(set.states().map((s) => s.state), ['applied', 'applied', 'applied', 'applied'], 'the peer is good now');
  const { imp, warnings } = set.result();
  t.same(warnings, []);
  const fromFile = importCalico(docs.map((d) => JSON.stringify(JSON.parse(d))).join('\n---\n'), 'f.yaml', node.name, node.labels);
  t.same(imp.peers, fromFile.peers, 'peers as the file importer reads them');
  t.same(imp.pools, fromFile.pools);
  t.equal(imp.asn, 64512);
  t.equal(imp.nodeToNodeMeshEnabled, false);
  t.same(imp.serviceIPs, fromFile.serviceIPs);
  t.ok(imp.peers[0].export!.some((r) => r.prefix === '10.96.0.0/12' && r.action === 'reject'), 'filter applied');
});

t.test('bad versions: refused with key and field, last good kept', async (t) => {
  const set = new CalicoResourceSet(node);
  const key = `${V3}bgppeers/tor`;
  t.same(set.put(key, peer('tor', { peerIP: '10.0.0.1', asNumber: 65001 }), 3), []);
  const w1 = set.put(key, peer('tor', { peerIP: '10.0.0.1', asNumber: 'lots' }), 4);
  t.match(w1[0], /^\/calico\/resources\/v3\/projectcalico\.org\/bgppeers\/tor \(BGPPeer tor\): spec\.asNumber: .*keeping the version of revision 3$/);
  t.equal(set.result().imp.peers[0].asn, 65001, 'the last good version is in force');
  t.match(set.states()[0], { state: 'stale', modRevision: 4 });
  const w2 = set.put(key, '{"kind":"BGPPeer",', 5);
  t.match(w2[0], /bgppeers\/tor: not JSON/);
  const w3 = set.put(key, peer('tor', { peerIP: '10.0.0.1', asNumbr: 65002 }), 6);
  t.match(w3[0], /spec\.asNumbr: unknown field \(did you mean asNumber\?\)/);
  t.match(set.put(`${V3}ippools/x`, JSON.stringify({ kind: 'BGPPeer', metadata: { name: 'x' }, spec: {} }), 7)[0], /ippools\/x: kind: "BGPPeer" under ippools\/ \(expected IPPool\)/);
  t.match(set.put(`${V3}ippools/y`, JSON.stringify({ kind: 'IPPool', metadata: { name: 'z' }, spec: { cidr: '10.0.0.0/8' } }), 8)[0], /metadata\.name: "z" differs from the key's name "y"/);
  t.match(set.put(`${V3}ippools/q`, JSON.stringify({ kind: 'IPPool', metadata: { name: 'q' }, spec: { cidr: '10.0.0.0/8', natOutgoing: 'yes' } }), 9)[0], /ippools\/q \(IPPool q\): spec\.natOutgoing/);
  t.same(set.result().imp.pools, [], 'refused pools never applied');
  t.ok(set.put(key, peer('tor', { peerIP: '10.0.0.1', asNumber: 65003 }), 10).length === 0);
  t.equal(set.result().imp.peers[0].asn, 65003, 'a good version replaces it');
  t.ok(set.delete(key));
  t.same(set.result().imp.peers, []);
});

t.test('a filter deleted under a peer: the peer is left out, and comes back with it', async (t) => {
  const set = new CalicoResourceSet(node);
  set.put(`${V3}bgpfilters/f`, filter('f'), 2);
  set.put(`${V3}bgppeers/tor`, peer('tor', { peerIP: '10.0.0.1', asNumber: 65001, filters: ['f'] }), 3);
  t.equal(set.result().imp.peers.length, 1);
  set.delete(`${V3}bgpfilters/f`);
  const r = set.result();
  t.same(r.imp.peers, []);
  t.match(r.warnings[0], /bgppeers\/tor .*no BGPFilter named "f".*peer left out/);
  t.same(set.result().warnings, [], 'said once');
  t.match(set.states().find((s) => s.kind === 'BGPPeer'), { state: 'unused' });
  set.put(`${V3}bgpfilters/f`, filter('f'), 9);
  t.equal(set.result().imp.peers.length, 1);
});

t.test('peers for other nodes are not ours', async (t) => {
  const set = new CalicoResourceSet(node);
  set.put(`${V3}bgppeers/a`, peer('a', { node: 'linux-a', peerIP: '10.0.0.1', asNumber: 65001 }), 2);
  set.put(`${V3}bgppeers/b`, peer('b', { nodeSelector: "kubernetes.io/os == 'windows'", peerIP: '10.0.0.2', asNumber: 65001 }), 3);
  t.same(set.result().imp.peers.map((p) => p.address), ['10.0.0.2']);
});
