// Overlay facts in the datastore: our key and Calico's Node resource (spec.vxlanTunnelMACAddr, PA from
// spec.bgp.ipv4Address), written only on change, keeping the fields others wrote; bad facts named by config field.
import t from 'tap';
import { MemoryStore } from '../../src/store/memory.ts';
import { calicoVtepLayout, checkFacts, listVteps, ourVtepLayout, publishVtep, VtepError } from '../../src/cluster/vtep.ts';
import { calicoNodeLayout } from '../../src/cluster/node.ts';

t.test('our layout: written once, listed, rewritten on change', async (t) => {
  const s = new MemoryStore();
  const facts = checkFacts('192.168.1.5', '00:15:5d:aa:bb:cc');
  t.same(facts, { providerAddress: '192.168.1.5', drMac: '00-15-5D-AA-BB-CC' });
  t.same(await publishVtep(s, ourVtepLayout, 'win-1', facts), { written: true, warning: undefined });
  const rev = (await s.get(ourVtepLayout.key('win-1')))!.modRevision;
  t.same(await publishVtep(s, ourVtepLayout, 'win-1', facts), { written: false, warning: undefined }, 'unchanged: no write');
  t.equal((await s.get(ourVtepLayout.key('win-1')))!.modRevision, rev);
  await publishVtep(s, ourVtepLayout, 'win-1', { ...facts, providerAddress: '192.168.1.6' });
  await s.put(ourVtepLayout.key('half'), JSON.stringify({ providerAddress: '192.168.1.7' }));
  await s.put(ourVtepLayout.key('junk'), 'not json');
  t.same([...await listVteps(s, ourVtepLayout)], [['win-1', { providerAddress: '192.168.1.6', drMac: '00-15-5D-AA-BB-CC' }]], 'incomplete and malformed entries are not facts');
});

t.test('Calico layout: the Node resource keeps everything else; PA is spec.bgp.ipv4Address', async (t) => {
  const s = new MemoryStore();
  const key = calicoNodeLayout.key('win-c');
  await s.put(key, JSON.stringify({ kind: 'Node', apiVersion: 'projectcalico.org/v3', metadata: { name: 'win-c', uid: 'u1' },
    spec: { bgp: { ipv4Address: '192.168.2.9/24' }, orchRefs: [{ nodeName: 'win-c', orchestrator: 'k8s' }] } }));
  const r = await publishVtep(s, calicoVtepLayout, 'win-c', checkFacts('192.168.2.9', '00-15-5D-01-02-03'));
  t.same(r, { written: true, warning: undefined });
  const node = JSON.parse((await s.get(key))!.value);
  t.same(node.metadata, { name: 'win-c', uid: 'u1' });
  t.same(node.spec, { bgp: { ipv4Address: '192.168.2.9/24' }, orchRefs: [{ nodeName: 'win-c', orchestrator: 'k8s' }], vxlanTunnelMACAddr: '00-15-5D-01-02-03' });
  t.same(calicoNodeLayout.decode(key, (await s.get(key))!.value)?.ipv4Address, '192.168.2.9/24', 'still a valid Node for the registry');
  t.same([...await listVteps(s, calicoVtepLayout)], [['win-c', { providerAddress: '192.168.2.9', drMac: '00-15-5D-01-02-03' }]]);
  const differ = await publishVtep(s, calicoVtepLayout, 'win-c', checkFacts('10.9.9.9', '00-15-5D-01-02-03'));
  t.equal(differ.written, false, 'the MAC is all Calico\'s Node holds of ours: unchanged');
  t.match(differ.warning, /says provider address 192\.168\.2\.9 \(spec\.bgp\.ipv4Address\), dataplane\.providerAddress is 10\.9\.9\.9/);
});

t.test('bad facts are named by their config field', async (t) => {
  t.throws(() => checkFacts(undefined, '00-15-5D-01-02-03'), new VtepError('dataplane.providerAddress: an IP address is needed to publish this node\'s overlay facts, got undefined'));
  t.throws(() => checkFacts('10.0.0.1', '00-15'), /dataplane\.drMac: a MAC address like 00-15-5D-00-00-01, got "00-15"/);
});
