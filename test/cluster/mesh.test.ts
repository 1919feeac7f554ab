// The mesh peer set (pure): who peers with whom, who connects (Calico's passive rule), route reflectors left out,
// configured peers winning over mesh peers; a property checks every pair of nodes against a simple oracle.
import t from 'tap';
import fc from 'fast-check';
import { meshPeers, mergePeers, selectorPeers, type MeshSettings } from '../../src/cluster/mesh.ts';
import type { ClusterNode } from '../../src/cluster/node.ts';

const S: MeshSettings = { defaultAsn: 64512, port: 179, holdTime: 90, gracefulRestart: { restartTime: 120 } };
const node = (name: string, v4?: string, extra: Partial<ClusterNode> = {}): ClusterNode =>
  ({ name, labels: {}, ...(v4 ? { ipv4Address: v4 } : {}), ...extra });

t.test('one iBGP peer per other node and family, on its BGP address, from ours', async (t) => {
  const a = node('a', '10.0.0.5/24', { ipv6Address: 'fd00::5/64' });
  const nodes = [a, node('b', '10.0.0.7/24', { ipv6Address: 'fd00::7/64', asNumber: 65001 }), node('c', '10.0.0.3/24')];
  const peers = meshPeers(a, nodes, S);
  t.same(peers.map((p) => [p.address, p.families, p.asn, p.localAddress]), [
    ['10.0.0.3', ['ipv4'], 64512, '10.0.0.5'],
    ['10.0.0.7', ['ipv4'], 65001, '10.0.0.5'],
    ['fd00::7', ['ipv6'], 65001, 'fd00::5'],
  ], 'c has no IPv6 address: no IPv6 session to it; b keeps its own AS');
  t.same(meshPeers(node('x'), nodes, S), [], 'a node without addresses meshes with nobody');
});

t.test("passive toward a higher address as a string, as confd renders calico-node's BIRD", async (t) => {
  // "10.0.0.10" < "10.0.0.9" as strings, although 10 > 9 as numbers: Calico compares the strings.
  const a = node('a', '10.0.0.9/24');
  const peers = meshPeers(a, [a, node('b', '10.0.0.10/24'), node('c', '10.0.0.90/24')], S);
  t.same(peers.map((p) => [p.address, p.passive]), [['10.0.0.10', false], ['10.0.0.90', true]]);
});

t.test('route reflectors are out of the mesh, and a route reflector meshes with nobody', async (t) => {
  const a = node('a', '10.0.0.1/24');
  const rr = node('rr', '10.0.0.2/24', { routeReflectorClusterID: '244.0.0.1' });
  t.same(meshPeers(a, [a, rr, node('b', '10.0.0.3/24')], S).map((p) => p.address), ['10.0.0.3']);
  t.same(meshPeers(rr, [a, rr], S), []);
});

t.test('configured peers win over mesh peers with the same address', async (t) => {
  const configured = [{ address: '10.0.0.3', asn: 65100, port: 1179, families: ['ipv4' as const], holdTime: 30, passive: false, gracefulRestart: false as const }];
  const mesh = meshPeers(node('a', '10.0.0.1/24'), [node('b', '10.0.0.3/24'), node('c', '10.0.0.4/24')], S);
  const { peers, shadowed } = mergePeers(configured, mesh);
  t.same(peers.map((p) => [p.address, p.asn]), [['10.0.0.3', 65100], ['10.0.0.4', 64512]]);
  t.same(shadowed.map((p) => p.address), ['10.0.0.3']);
  t.equal(peers[0], configured[0], 'the configured peer object is passed through untouched');
});

t.test('property: every pair of mesh nodes has exactly one active side, and peers mirror each other', async (t) => {
  const ipArb = fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 })).map(([x, y]) => `10.${x}.${y}.1`);
  const nodesArb = fc.uniqueArray(fc.record({ ip: ipArb, rr: fc.boolean() }), { minLength: 1, maxLength: 8, selector: (n) => n.ip })
    .map((xs) => xs.map((x, i) => node(`n${i}`, `${x.ip}/16`, x.rr && i % 3 === 0 ? { routeReflectorClusterID: '244.0.0.1' } : {})));
  const r = fc.check(fc.property(nodesArb, (nodes) => {
    const inMesh = nodes.filter((n) => !n.routeReflectorClusterID);
    for (const a of nodes) {
      const peers = meshPeers(a, nodes, S);
      // Oracle: a meshes with every other non-RR node iff a is not an RR.
      const want = a.routeReflectorClusterID ? [] : inMesh.filter((b) => b !== a).map((b) => b.ipv4Address!.split('/')[0]).sort();
      if (JSON.stringify(peers.map((p) => p.address)) !== JSON.stringify(want)) throw new Error(`${a.name}: ${JSON.stringify(peers)} want ${want}`);
      for (const p of peers) {
        const b = nodes.find((n) => n.ipv4Address!.startsWith(`${p.address}/`))!;
        const back = meshPeers(b, nodes, S).find((q) => q.address === a.ipv4Address!.split('/')[0]);
        if (!back) throw new Error(`${b.name} does not peer back with ${a.name}`);
        if (back.passive === p.passive) throw new Error(`${a.name}<->${b.name}: both ${p.passive ? 'passive' : 'active'}`);
      }
    }
  }), { numRuns: 500 });
  t.notOk(r.failed, r.failed ? (fc.defaultReportMessage(r) ?? 'failed') : 'holds');
});

t.test("Calico's route-reflector recipe: BGPPeer nodeSelector all(), peerSelector route-reflector == 'true'", async (t) => {
  const sp = [{ name: 'rr', nodeSelector: 'all()', peerSelector: "route-reflector == 'true'", port: 179, holdTime: 90, gracefulRestart: false as const }];
  const rr = node('rr', '10.0.0.9/24', { routeReflectorClusterID: '244.0.0.1', labels: { 'route-reflector': 'true' } });
  const c1 = node('c1', '10.0.0.1/24');
  const c2 = node('c2', '10.0.0.2/24');
  const nodes = [rr, c1, c2];
  t.same(selectorPeers(c1, nodes, sp, S).map((p) => [p.address, p.passive, p.routeReflectorClient]), [['10.0.0.9', true, undefined]],
    'a client peers with the reflector only (passive: its address sorts higher)');
  t.same(selectorPeers(rr, nodes, sp, S).map((p) => [p.address, p.passive, p.routeReflectorClient]), [['10.0.0.1', false, true], ['10.0.0.2', false, true]],
    'the reflector peers back with every node nodeSelector matches, as its clients');
  t.same(meshPeers(rr, nodes, S), [], 'and is in no mesh');
  const other = node('rr2', '10.0.0.8/24', { routeReflectorClusterID: '244.0.0.1', labels: { 'route-reflector': 'true' } });
  t.same(selectorPeers(rr, [...nodes, other], sp, S).find((p) => p.address === '10.0.0.8')?.routeReflectorClient, undefined,
    'a reflector of the same cluster is not a client');
});

t.test('bgp.nodeMeshMaxPrefixes: every session to another node carries it, mesh and peerSelector alike; unset, none does', async (t) => {
  const limit = { ipv4: 5000, ipv6: 5000, restart: 60 };
  const withLimit: MeshSettings = { ...S, maxPrefixes: limit };
  const a = node('a', '10.0.0.5/24', { ipv6Address: 'fd00::5/64', labels: { rr: 'no' } });
  const nodes = [a, node('b', '10.0.0.7/24', { ipv6Address: 'fd00::7/64' }), node('r', '10.0.0.9/24', { labels: { rr: 'yes' } })];
  const mesh = meshPeers(a, nodes, withLimit);
  t.equal(mesh.length, 3);
  t.ok(mesh.every((p) => p.maxPrefixes === limit), 'each mesh peer');
  const sp = [{ name: 'rr', peerSelector: "rr == 'yes'", port: 179, holdTime: 90, gracefulRestart: false as const }];
  const sel = selectorPeers(a, nodes, sp, withLimit);
  t.equal(sel.length, 1);
  t.same(sel[0]!.maxPrefixes, limit, 'each peerSelector peer');
  t.ok([...meshPeers(a, nodes, S), ...selectorPeers(a, nodes, sp, S)].every((p) => p.maxPrefixes === undefined), 'none without the setting');
});
