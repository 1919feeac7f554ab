// The node registry over a store: registration (plain write), address clashes refused with both names, removal,
// the watch of the node set, and Calico's Node resource JSON (the exact shape calico-node writes).
import t from 'tap';
import { calicoNodeLayout, ClusterError, fromCalicoNode, ourNodeLayout, toCalicoNode, type ClusterNode } from '../../src/cluster/node.ts';
import { NodeRegistry } from '../../src/cluster/registry.ts';
import { MemoryStore } from '../../src/store/memory.ts';

const a: ClusterNode = { name: 'win-a', labels: { 'kubernetes.io/os': 'windows' }, ipv4Address: '10.0.0.5/24', asNumber: 64512 };
const b: ClusterNode = { name: 'lin-b', labels: {}, ipv4Address: '10.0.0.6/24', ipv6Address: 'fd00::6/64' };

for (const layout of [ourNodeLayout, calicoNodeLayout]) {
  t.test(`register, watch, clash, remove (${layout.prefix})`, async (t) => {
    const store = new MemoryStore();
    const reg = new NodeRegistry(store, { layout });
    const seen: string[][] = [];
    await reg.watch((nodes) => seen.push([...nodes.keys()].sort()));
    await reg.register(a);
    await reg.register(b);
    t.same([...(await reg.list()).values()].sort((x, y) => x.name.localeCompare(y.name)), [b, a]);
    const kv = await store.get(layout.key('win-a'));
    t.ok(kv, 'written under the layout key');
    t.equal(kv!.createRevision > 0, true);
    // Re-registering (a restart) is an update in place.
    await reg.register({ ...a, labels: { ...a.labels, rack: 'r1' } });
    await t.rejects(reg.register({ name: 'lin-c', labels: {}, ipv4Address: '10.0.0.5/16' }),
      { name: 'ClusterError', message: /lin-c.*10\.0\.0\.5.*win-a/ }, 'the clash names both nodes and the address');
    await t.rejects(reg.register({ name: 'lin-d', labels: {}, ipv6Address: 'fd00:0::6/128' }), { message: /lin-d.*fd00::6.*lin-b/ });
    t.equal(await store.get(layout.key('lin-c')), undefined, 'nothing written for the refused node');
    t.equal(await reg.remove('lin-b'), true);
    t.equal(await reg.remove('lin-b'), false);
    await new Promise((r) => setTimeout(r, 20));
    t.same(seen[0], [], 'the watch starts with the set as it is');
    t.same(seen.at(-1), ['win-a'], 'and follows registrations and removals');
    t.ok(seen.some((s) => s.length === 2), 'both nodes were seen');
    t.equal(reg.current.get('win-a')?.labels.rack, 'r1', 'updates are seen');
    reg.close();
  });
}

t.test("Calico's Node resource: exact JSON both ways, other writers' fields kept", async (t) => {
  t.same(toCalicoNode({ ...a, routeReflectorClusterID: '244.0.0.1' }), {
    kind: 'Node',
    apiVersion: 'projectcalico.org/v3',
    metadata: { name: 'win-a', labels: { 'kubernetes.io/os': 'windows' } },
    spec: { bgp: { asNumber: 64512, ipv4Address: '10.0.0.5/24', routeReflectorClusterID: '244.0.0.1' } },
  });
  // As calico-node leaves it (uid, creationTimestamp, VXLAN address, orchRefs, asdot AS).
  const calico = {
    kind: 'Node', apiVersion: 'projectcalico.org/v3',
    metadata: { name: 'lin-b', uid: 'u-1', creationTimestamp: '2026-11-25T10:00:00Z', labels: { 'kubernetes.io/os': 'linux' } },
    spec: { bgp: { ipv4Address: '10.0.0.6/24', asNumber: '1.10', ipv4IPIPTunnelAddr: '10.244.1.1' }, ipv4VXLANTunnelAddr: '10.244.1.0',
      orchRefs: [{ nodeName: 'lin-b', orchestrator: 'k8s' }] },
  };
  t.same(fromCalicoNode(calico, 'x'), { name: 'lin-b', labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: '10.0.0.6/24', asNumber: 65546 });
  const store = new MemoryStore();
  await store.put(calicoNodeLayout.key('lin-b'), JSON.stringify(calico));
  const reg = new NodeRegistry(store, { layout: calicoNodeLayout });
  await reg.register({ name: 'lin-b', labels: { 'kubernetes.io/os': 'linux', extra: '1' }, ipv4Address: '10.0.0.6/24', asNumber: 65546 });
  const after = JSON.parse((await store.get('/calico/resources/v3/projectcalico.org/nodes/lin-b'))!.value);
  t.equal(after.metadata.uid, 'u-1', 'metadata others wrote is kept');
  t.equal(after.spec.ipv4VXLANTunnelAddr, '10.244.1.0', 'spec fields we do not own are kept');
  t.same(after.metadata.labels, { 'kubernetes.io/os': 'linux', extra: '1' });
  t.same(after.spec.bgp, { asNumber: 65546, ipv4Address: '10.0.0.6/24', ipv4IPIPTunnelAddr: '10.244.1.1' }, 'spec.bgp fields we do not own are kept too');
});

t.test('bad nodes: errors name the field; a bad node in the store is skipped and reported', async (t) => {
  const cases: [Partial<ClusterNode>, RegExp][] = [
    [{ ipv4Address: '10.0.0.300/24' }, /bgp\.ipv4Address/],
    [{ ipv4Address: 'fd00::1/64' }, /bgp\.ipv4Address/],
    [{ ipv6Address: '10.0.0.1/24' }, /bgp\.ipv6Address/],
    [{ ipv4Address: '10.0.0.1/33' }, /bgp\.ipv4Address/],
    [{ asNumber: 0 }, /bgp\.asNumber/],
    [{ routeReflectorClusterID: 'fd00::1' }, /routeReflectorClusterID/],
    [{ name: 'Bad_Name' }, /name/],
  ];
  const reg = new NodeRegistry(new MemoryStore());
  for (const [extra, re] of cases) {
    await t.rejects(reg.register({ name: 'n1', labels: {}, ...extra } as ClusterNode), { name: 'ClusterError', message: re }, JSON.stringify(extra));
  }
  const store = new MemoryStore();
  await store.put(calicoNodeLayout.key('broken'), '{"kind":"Node","metadata":{"name":"broken"},"spec":{"bgp":{"ipv4Address":"nope"}}}');
  await store.put(calicoNodeLayout.key('ok'), JSON.stringify(toCalicoNode(b)).replace('lin-b', 'ok'));
  const bad: string[] = [];
  const r2 = new NodeRegistry(store, { layout: calicoNodeLayout, onBadNode: (k, e) => bad.push(`${k}: ${e.message}`) });
  t.same([...(await r2.list()).keys()], ['ok']);
  t.match(bad[0], /nodes\/broken.*ipv4Address/);
  t.type(new ClusterError('x'), Error);
});
