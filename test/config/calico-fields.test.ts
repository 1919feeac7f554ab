// Every field of every Calico kind is accounted for: the importer's table, Calico's field list (fixture from the Go
// types) and the table in docs/reference/calico-fields.md agree; unknown kinds and fields refuse the whole file with file, document, field and
// line; the honoured fields land where they should.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { importCalico } from '../../src/config/calico.ts';
import { CALICO_FIELDS } from '../../src/calico/fields.ts';

const fixture = JSON.parse(readFileSync(new URL('../../fixtures/calico/v3-spec-fields.json', import.meta.url), 'utf8')) as Record<string, string[] | string>;
const fieldsDoc = readFileSync(new URL('../../docs/reference/calico-fields.md', import.meta.url), 'utf8');

t.test("the importer's table covers exactly Calico's fields, and the documented table says the same", async (t) => {
  for (const [kind, fields] of Object.entries(fixture)) {
    if (kind === 'source') continue;
    t.same(Object.keys(CALICO_FIELDS[kind] ?? {}).sort(), [...(fields as string[])].sort(), `${kind}: every field has a treatment, no extra`);
    for (const f of fields as string[]) {
      const rule = CALICO_FIELDS[kind]![f]!;
      t.ok(fieldsDoc.includes(`| ${kind} | \`${f}\` | ${rule.treatment} |`), `calico-fields.md lists ${kind}.${f} as ${rule.treatment}`);
    }
  }
});

const doc = (kind: string, spec: string, name = 'x') => `apiVersion: projectcalico.org/v3\nkind: ${kind}\nmetadata: { name: ${name} }\nspec:\n${spec}`;

t.test('unknown kinds and misspelled fields refuse the whole file, naming file, document, field and line', async (t) => {
  const text = [
    doc('IPPool', '  cidr: 10.1.0.0/16\n  natOutgoin: true\n', 'p1'),
    doc('IPPool', '  cidr: 10.2.0.0/16\n', 'p2'),
    doc('GlobalNetworkPolicy', '  selector: all()\n'),
    doc('BGPPeer', '  peerIP: 10.0.0.1\n  asNumber: 65001\n  nodeSelector: rack = "r1"\n'),
  ].join('---\n');
  const e = t.throws(() => importCalico(text, 'm.yaml', 'n')) as Error;
  t.match(e.message, /m\.yaml: document 1 \(IPPool p1\): spec\.natOutgoin: unknown field \(did you mean natOutgoing\?\) \(line 6\)/);
  t.match(e.message, /m\.yaml: document 3 \(GlobalNetworkPolicy x\): kind "GlobalNetworkPolicy" is not one blockspeaker reads/);
  t.match(e.message, /document 4 \(BGPPeer x\): spec\.nodeSelector: selector "rack = "r1"": .*position 6.*\(line \d+\)/);
  t.throws(() => importCalico(doc('IPPool', '  cidr: 10.1.0.0/16\n').replace('metadata', 'metdata'), 'm.yaml', 'n'), { message: /metdata: unknown field \(did you mean metadata\?\)/ });
  t.throws(() => importCalico(doc('BGPFilter', '  exportV4: [{ cidr: 10.0.0.0/8, matchOperator: Within, action: Reject }]\n'), 'f.yaml', 'n'),
    { message: /spec\.exportV4\[0\]\.matchOperator: must be Equal, In, NotEqual or NotIn, got "Within"/ });
});

t.test('warned fields say why; defaults stay quiet', async (t) => {
  const r = importCalico([
    doc('BGPPeer', '  peerIP: 10.0.0.1\n  asNumber: 65001\n  numAllowedLocalASNumbers: 0\n  ttlSecurity: 0\n'),
    doc('IPAMConfiguration', '  strictAffinity: true\n  kubeVirtVMAddressPersistence: Enabled\n  ipCooldownSeconds: 30\n', 'default'),
    doc('BGPConfiguration', '  logSeverityScreen: Info\n  serviceLoadBalancerAggregation: Disabled\n', 'default'),
  ].join('---\n'), 'w.yaml', 'n');
  const w = r.warnings.join('\n');
  t.match(w, /kubeVirtVMAddressPersistence: "Enabled" ignored/);
  t.match(w, /serviceLoadBalancerAggregation: "Disabled" ignored/);
  t.notMatch(w, /ttlSecurity|logSeverityScreen|numAllowedLocalASNumbers/, 'default values need no warning');
  t.equal(r.ipam.ipCooldownSeconds, 30, 'ipCooldownSeconds is honoured');
});

t.test('honoured BGPPeer fields: sourceAddress, keepaliveTime, nextHopMode, localASNumber, peerSelector, filters', async (t) => {
  const text = [
    doc('BGPConfiguration', '  asNumber: 64512\n  listenPort: 1179\n  nodeToNodeMeshEnabled: false\n', 'default'),
    doc('BGPPeer', '  peerIP: 10.0.0.1\n  asNumber: 65001\n  keepaliveTime: 10s\n  nextHopMode: Self\n  localASNumber: 64512\n  filters: [f1]\n', 'tor'),
    doc('BGPPeer', '  peerIP: "fd00::1"\n  asNumber: 65001\n  sourceAddress: None\n  keepOriginalNextHop: true\n', 'tor6'),
    doc('BGPPeer', "  nodeSelector: all()\n  peerSelector: route-reflector == 'true'\n", 'rr'),
    doc('BGPFilter', '  exportV4:\n  - { cidr: 10.244.1.0/24, matchOperator: Equal, action: Reject }\n  - { cidr: 10.244.0.0/16, matchOperator: In, prefixLength: { min: 26, max: 32 }, action: Accept }\n  importV6:\n  - { action: Reject }\n', 'f1'),
  ].join('---\n');
  const r = importCalico(text, 'h.yaml', 'n', {}, { ipv4: '10.0.0.5/24', ipv6: 'fd00::5/64' });
  const [v4, v6] = r.peers;
  t.match(v4, { address: '10.0.0.1', holdTime: 30, nextHopSelf: true, localAddress: '10.0.0.5' });
  t.same(v4!.export, [
    { prefix: '10.244.1.0/24', action: 'reject' },
    { prefix: '10.244.0.0/16', ge: 26, le: 32, action: 'accept' },
    { prefix: '0.0.0.0/0', le: 32, action: 'accept' },
    { prefix: '::/0', le: 128, action: 'accept' },
  ], 'filter rules in order, then accept-all (Calico: no match = default treatment)');
  t.same(v4!.import?.[0], { prefix: '::/0', le: 128, action: 'reject' }, 'a rule without cidr matches its whole family');
  t.equal(v6!.localAddress, undefined, 'sourceAddress: None');
  t.equal(v6!.nextHopSelf, undefined, 'keepOriginalNextHop: our default (keep toward iBGP)');
  t.same(r.selectorPeers, [{ name: 'rr', peerSelector: "route-reflector == 'true'", nodeSelector: 'all()', port: 179, holdTime: 90, gracefulRestart: { restartTime: 120 } }]);
  t.equal(r.listenPort, 1179);
  t.equal(r.nodeToNodeMeshEnabled, false);
  const other = importCalico(text.replace('localASNumber: 64512', 'localASNumber: 65500\n  numAllowedLocalASNumbers: 2'), 'h.yaml', 'n');
  t.match(other.peers[0], { localAsn: 65500, allowAsIn: 2 }, 'localASNumber and numAllowedLocalASNumbers become peer localAsn and allowAsIn');
  t.throws(() => importCalico(text.replace('localASNumber: 64512', 'numAllowedLocalASNumbers: -1'), 'h.yaml', 'n'), { message: /spec\.numAllowedLocalASNumbers: must be 0\.\.255, got -1/ });
  t.throws(() => importCalico(text.replace('filters: [f1]', 'filters: [f2]'), 'h.yaml', 'n'), { message: /spec\.filters\[0\]: no BGPFilter named "f2"/ });
});

t.test('IPPool assignmentMode and Node manifests', async (t) => {
  const r = importCalico([
    doc('IPPool', '  cidr: 10.9.0.0/16\n  assignmentMode: Manual\n', 'manual'),
    doc('Node', '  bgp: { ipv4Address: 10.0.0.5/24, asNumber: 64512, routeReflectorClusterID: 244.0.0.1, ipv4IPIPTunnelAddr: 10.9.0.1 }\n  orchRefs: []\n', 'n').replace('metadata: { name: n }', 'metadata: { name: n, labels: { route-reflector: "true" } }'),
    doc('Node', '  bgp: { ipv4Address: 10.0.0.6/24 }\n', 'other'),
  ].join('---\n'), 'n.yaml', 'n');
  t.equal(r.pools[0]!.nodeSelector, '!all()', 'Manual: only used when requested by name');
  t.same(r.node, { labels: { 'route-reflector': 'true' }, bgp: { ipv4Address: '10.0.0.5/24', routeReflectorClusterID: '244.0.0.1', asNumber: 64512 } });
  t.match(r.warnings.join('\n'), /spec\.bgp\.ipv4IPIPTunnelAddr: "10\.9\.0\.1" ignored: no IPIP tunnel/);
});

t.test('service IPs: every range, canonical; a bad one names its index', async (t) => {
  const r = importCalico(doc('BGPConfiguration', '  serviceClusterIPs: [{ cidr: 10.96.0.0/12 }, { cidr: "fd00:96::/112" }]\n  serviceExternalIPs: [{ cidr: 192.0.2.0/24 }]\n  serviceLoadBalancerIPs: [{ cidr: 198.51.100.7/32 }]\n', 'default'), 's.yaml', 'n');
  t.same(r.serviceIPs, { clusterIPs: ['10.96.0.0/12', 'fd00:96::/112'], externalIPs: ['192.0.2.0/24'], loadBalancerIPs: ['198.51.100.7/32'] });
  t.throws(() => importCalico(doc('BGPConfiguration', '  serviceExternalIPs: [{ cidr: 192.0.2.0/24 }, { cidr: 192.0.2.1/24 }]\n', 'default'), 's.yaml', 'n'),
    { message: /spec\.serviceExternalIPs\[1\]: .*host bits/ });
});

t.test('BGPConfiguration communities and prefixAdvertisements: names resolved, bad ones refused with the field', async (t) => {
  const r = importCalico(doc('BGPConfiguration', '  communities:\n    - { name: bgp-large-community, value: "63400:300:100" }\n' +
    '  prefixAdvertisements:\n    - { cidr: 172.218.4.0/26, communities: [bgp-large-community, "63400:120"] }\n', 'default'), 'c.yaml', 'n');
  t.same(r.prefixAdvertisements, [{ cidr: '172.218.4.0/26', communities: ['63400:300:100', '63400:120'] }], "Calico's documented example");
  t.same(r.warnings, [], 'honoured: no warning');
  t.throws(() => importCalico(doc('BGPConfiguration', '  prefixAdvertisements:\n    - { cidr: 10.0.0.0/16, communities: [missing] }\n', 'default'), 'c.yaml', 'n'),
    { message: /c\.yaml: document 1 \(BGPConfiguration default\): spec\.prefixAdvertisements\[0\]\.communities\[0\]: "missing" is neither a value .*\(line \d+\)/ });
});
