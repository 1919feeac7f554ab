// node.bgp (the node's BGP identity as Calico spells it), bgp.nodeToNodeMeshEnabled, and what the daemon registers.
import t from 'tap';
import { parseConfig } from '../../src/config/config.ts';
import { meshEnabled, ownNode } from '../../src/daemon/cluster.ts';

const base = (extra: string) => `node:\n  name: win-a\n  os: windows\n  labels: { rack: r1 }\n${extra}bgp: { asn: 64512, routerId: 10.0.0.5 }\n`;

t.test('node.bgp is read and canonicalised', async (t) => {
  const c = parseConfig(base('  bgp: { ipv4Address: 10.0.0.5/24, ipv6Address: "FD00:0::5/64", asNumber: 64512, routeReflectorClusterID: 244.0.0.1 }\n'));
  t.same(c.node.bgp, { ipv4Address: '10.0.0.5/24', ipv6Address: 'fd00::5/64', asNumber: 64512, routeReflectorClusterID: '244.0.0.1' });
  t.equal(parseConfig(base('')).node.bgp, undefined);
});

t.test('bad node.bgp fields are errors naming the field', async (t) => {
  const cases: [string, RegExp][] = [
    ['  bgp: { ipv4Address: 10.0.0.5/40 }\n', /node\.bgp\.ipv4Address/],
    ['  bgp: { ipv6Address: 10.0.0.5/24 }\n', /node\.bgp\.ipv6Address/],
    ['  bgp: { asNumber: -1 }\n', /node\.bgp\.asNumber/],
    ['  bgp: { routeReflectorClusterID: rr1 }\n', /node\.bgp\.routeReflectorClusterID/],
    ['  bgp: { ipv4Adress: 10.0.0.5/24 }\n', /node\.bgp\.ipv4Adress: unknown field \(did you mean ipv4Address/],
  ];
  for (const [extra, re] of cases) t.throws(() => parseConfig(base(extra)), { name: 'ConfigError', message: re }, extra.trim());
  t.throws(() => parseConfig(base('').replace('routerId: 10.0.0.5', 'routerId: 10.0.0.5, nodeToNodeMeshEnabled: yes')), { message: /bgp\.nodeToNodeMeshEnabled/ });
});

t.test('the mesh is on for a shared (etcd) store unless turned off; off for the embedded store unless turned on', async (t) => {
  const withStore = (store: string, mesh = '') =>
    parseConfig(`${base('').replace('routerId: 10.0.0.5', `routerId: 10.0.0.5${mesh}`)}ipam: { store: "${store}" }\n`);
  t.equal(meshEnabled(withStore('etcd://127.0.0.1:2379')), true);
  t.equal(meshEnabled({ ...withStore('etcd://127.0.0.1:2379'), ipam: { ...withStore('etcd://127.0.0.1:2379').ipam!, store: 'etcds://127.0.0.1:2379' } }), true, 'with TLS too, as Calico');
  t.equal(meshEnabled(withStore('etcd://127.0.0.1:2379', ', nodeToNodeMeshEnabled: false')), false);
  t.equal(meshEnabled(withStore('/var/lib/bs')), false);
  t.equal(meshEnabled(withStore('/var/lib/bs', ', nodeToNodeMeshEnabled: true')), true);
});

t.test('the registered node: OS as kubernetes.io/os, bgp.asn wins over node.bgp.asNumber (warned), detection only when needed', async (t) => {
  const warnings: string[] = [];
  const detected: number[] = [];
  const detect = async (f: 4 | 6) => (detected.push(f), f === 4 ? '192.168.1.9/24' : undefined);
  const c = parseConfig(`${base('  bgp: { asNumber: 65000 }\n').replace('routerId: 10.0.0.5', 'routerId: 10.0.0.5, nodeToNodeMeshEnabled: true')}`);
  const n = await ownNode(c, (m) => warnings.push(m), detect);
  t.same(n, { name: 'win-a', labels: { rack: 'r1', 'kubernetes.io/os': 'windows' }, ipv4Address: '192.168.1.9/24', asNumber: 64512 });
  t.match(warnings[0], /node\.bgp\.asNumber 65000 differs from bgp\.asn 64512; bgp\.asn is used/);
  detected.length = 0;
  const quiet = await ownNode(parseConfig(base('')), () => undefined, detect);
  t.same(detected, [], 'no mesh, no route reflector: nothing detected (daemons sharing one machine would clash)');
  t.equal(quiet.ipv4Address, undefined);
});
