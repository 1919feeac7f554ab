// Calico's Node resource, the one reader/writer both IPAM and the cluster registry use: what it reads, its errors,
// and that rewriting our own Node keeps every field another writer put there (at the top level, in metadata, in
// spec and in spec.bgp), changing only the labels and the spec.bgp fields we own. A property checks the keeping
// against an oracle that deletes our fields from both sides.
import t from 'tap';
import fc from 'fast-check';
import { CALICO_NODES } from '../../src/calico/keys.ts';
import { decodeCalicoNode, OWNED_BGP_FIELDS, parseAsNumber, readCalicoNode, writeCalicoNode } from '../../src/calico/node.ts';
import { decodeNode } from '../../src/ipam/calico/resources.ts';
import { calicoNodeLayout } from '../../src/cluster/node.ts';

// As calico-node and kube-controllers leave a Windows node (facts: libcalico-go v3 Node; values made up).
const calicoWritten = {
  kind: 'Node', apiVersion: 'projectcalico.org/v3',
  metadata: { name: 'win-a', uid: '0b7c1f8e-1111-4000-8000-00000000000a', resourceVersion: '812', creationTimestamp: '2026-11-25T09:00:00Z',
    labels: { 'kubernetes.io/os': 'windows', 'kubernetes.io/hostname': 'win-a' }, annotations: { 'projectcalico.org/kube-labels': '{}' } },
  spec: { bgp: { ipv4Address: '10.0.0.5/24', asNumber: '1.10', ipv4IPIPTunnelAddr: '10.244.7.1', futureBgpField: { x: [1, 2] } },
    ipv4VXLANTunnelAddr: '10.244.7.0', vxlanTunnelMACAddr: '66:2e:a4:cf:10:01', orchRefs: [{ nodeName: 'win-a', orchestrator: 'k8s' }],
    addresses: [{ address: '10.0.0.5/24', type: 'CalicoNodeIP' }] },
  status: { podCIDRs: ['10.244.7.0/26'] },
  futureTopLevel: true,
};

t.test('read: name, labels, OS from the label, spec.bgp; both consumers agree', async (t) => {
  const key = `${CALICO_NODES}win-a`;
  const n = decodeCalicoNode(key, JSON.stringify(calicoWritten));
  t.same(n, { name: 'win-a', labels: { 'kubernetes.io/hostname': 'win-a', 'kubernetes.io/os': 'windows' }, os: 'windows',
    bgp: { ipv4Address: '10.0.0.5/24', asNumber: '1.10' } });
  t.equal(parseAsNumber(n.bgp.asNumber), 65546, 'asdot');
  t.same(decodeNode(key, JSON.stringify(calicoWritten)), { name: 'win-a', os: 'windows', labels: n.labels }, 'IPAM host');
  t.match(calicoNodeLayout.decode(key, JSON.stringify(calicoWritten)), { name: 'win-a', labels: n.labels, ipv4Address: '10.0.0.5/24', asNumber: 65546 }, 'cluster node');
  t.equal(readCalicoNode({ metadata: { name: 'x' } }, 'k').os, 'linux', 'no label: linux');
});

t.test('errors name the key and field', async (t) => {
  const key = `${CALICO_NODES}n1`;
  t.throws(() => decodeCalicoNode(key, '{'), /nodes\/n1: not JSON/);
  t.throws(() => decodeCalicoNode(key, '{"kind":"IPPool"}'), /nodes\/n1: kind: "IPPool", expected Node/);
  t.throws(() => decodeCalicoNode(key, '{"metadata":{"name":"n2"}}'), /nodes\/n1: metadata\.name: "n2" differs from the key/);
  t.throws(() => decodeCalicoNode(key, '{"metadata":{"labels":{"a":1}}}'), /metadata\.labels\.a: a string/);
  t.throws(() => decodeCalicoNode(key, '{"spec":{"bgp":{"ipv4Address":5}}}'), /spec\.bgp\.ipv4Address: a string/);
  t.throws(() => decodeNode(key, '{"metadata":{"labels":{"a":1}}}'), { name: 'CalicoDecodeError', message: /metadata\.labels\.a/ });
  t.throws(() => calicoNodeLayout.decode(key, '{"spec":{"bgp":{"asNumber":"x"}}}'), { name: 'ClusterError', message: /spec\.bgp\.asNumber/ });
});

t.test('our rewrite keeps every field another writer put there', async (t) => {
  const ours = { name: 'win-a', labels: { 'kubernetes.io/os': 'windows', rack: 'r1' }, bgp: { ipv4Address: '10.0.0.5/24', asNumber: 64512 } };
  const after = JSON.parse(JSON.stringify(writeCalicoNode(ours, structuredClone(calicoWritten))));
  const expected = structuredClone(calicoWritten) as Record<string, any>;
  expected.metadata.labels = ours.labels;
  expected.spec.bgp = { ipv4Address: '10.0.0.5/24', asNumber: 64512, ipv4IPIPTunnelAddr: '10.244.7.1', futureBgpField: { x: [1, 2] } };
  t.same(after, expected, 'only the labels and our spec.bgp fields changed');
  t.same(Object.keys(after), Object.keys(calicoWritten), 'top-level fields in their order');
  const fresh = writeCalicoNode({ name: 'n', labels: {}, bgp: { routeReflectorClusterID: '244.0.0.1' } });
  t.same(fresh, { kind: 'Node', apiVersion: 'projectcalico.org/v3', metadata: { name: 'n', labels: {} }, spec: { bgp: { routeReflectorClusterID: '244.0.0.1' } } });
  const cleared = writeCalicoNode({ name: 'win-a', labels: {}, bgp: {} }, structuredClone(calicoWritten)) as Record<string, any>;
  t.same(cleared.spec.bgp, { ipv4IPIPTunnelAddr: '10.244.7.1', futureBgpField: { x: [1, 2] } }, 'an owned field we no longer set is removed');
});

t.test('property: non-owned fields survive any rewrite (oracle: both sides minus our fields)', async (t) => {
  const json = fc.jsonValue({ maxDepth: 2 });
  const key = fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !['kind', 'apiVersion', 'metadata', 'spec', '__proto__'].includes(k));
  const extra = fc.dictionary(key, json, { maxKeys: 4 });
  const ownedVal = fc.option(fc.constantFrom('10.0.0.1/24', 64512, '244.0.0.1'), { nil: undefined });
  fc.assert(fc.property(extra, extra, extra, extra, fc.record({ asNumber: ownedVal, ipv4Address: ownedVal, ipv6Address: ownedVal, routeReflectorClusterID: ownedVal }),
    (top, meta, spec, bgp, owned) => {
      const existing = { ...top, kind: 'Node', metadata: { ...meta, name: 'n' }, spec: { ...spec, bgp: { ...bgp } } };
      const snapshot = JSON.stringify(existing);
      const out = JSON.parse(JSON.stringify(writeCalicoNode({ name: 'n', labels: { a: 'b' }, bgp: owned as Record<string, string | number> }, existing)));
      if (JSON.stringify(existing) !== snapshot) return false; // the input is not modified
      const strip = (o: any) => {
        const c = structuredClone(o);
        delete c.apiVersion;
        delete c.metadata.labels;
        for (const f of OWNED_BGP_FIELDS) delete c.spec.bgp[f];
        return c;
      };
      t.same(strip(out), strip(JSON.parse(snapshot)));
      for (const f of OWNED_BGP_FIELDS) if (owned[f] !== undefined && out.spec.bgp[f] !== owned[f]) return false;
      return out.metadata.labels.a === 'b' && out.kind === 'Node' && out.apiVersion === 'projectcalico.org/v3';
    }), { numRuns: 200 });
});
