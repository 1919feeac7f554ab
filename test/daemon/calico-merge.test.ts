// ipam.calico: Calico v3 manifests merged into the daemon's config (pools, peers for this node, IPAM settings);
// the config file's own pools and peers win, differences are warnings.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mergeCalico } from '../../src/daemon/calico-merge.ts';
import { loadConfig } from '../../src/config/config.ts';

const fixture = new URL('../../fixtures/calico/cluster.yaml', import.meta.url).pathname;

t.test('pools, peers and asn from Calico manifests, relative to the config file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-calico-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(fixture, join(dir, 'cluster.yaml'));
  const file = join(dir, 'node.yaml');
  writeFileSync(file, `node: { name: node-a, labels: { rack: r1 } }
bgp: { asn: 65010, routerId: 10.201.0.2, peers: [] }
ipam: { store: ${join(dir, 'store')}, calico: [cluster.yaml], pools: [{ name: windows-pool, cidr: 10.99.0.0/16 }] }
`);
  const warnings: string[] = [];
  const cfg = mergeCalico(loadConfig(file), file, (w) => warnings.push(w));
  t.same(cfg.ipam!.pools.map((p) => p.name), ['windows-pool', 'default-ipv4-ippool'], "the config's pool of the same name wins");
  t.equal(cfg.ipam!.pools[0].cidr, '10.99.0.0/16');
  t.same(cfg.bgp!.peers.map((p) => p.address), ['10.201.0.1'], "tor-rack1 (selects rack r1); node-b's own peer left out");
  t.equal(cfg.bgp!.asn, 65010, 'bgp.asn wins over BGPConfiguration');
  t.match(warnings.join('\n'), /pool windows-pool is also in the config file/);
  t.match(warnings.join('\n'), /asNumber 64512 differs from bgp\.asn 65010/);
});

t.test('service IPs from BGPConfiguration are announced from every node; gone from the file, gone from announce', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-calico-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'node.yaml');
  writeFileSync(file, `node: { name: node-a }
bgp: { asn: 64512, routerId: 10.0.0.1, announce: [10.10.0.0/26] }
ipam: { store: ${join(dir, 'store')}, calico: [svc.yaml] }
`);
  const svc = (spec: string) => writeFileSync(join(dir, 'svc.yaml'), `apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: { name: default }\nspec: ${spec}\n`);
  svc('{ serviceClusterIPs: [{ cidr: 10.96.0.0/12 }], serviceLoadBalancerIPs: [{ cidr: 192.0.2.0/24 }] }');
  const cfg = mergeCalico(loadConfig(file), file, () => undefined);
  t.same(cfg.bgp!.announce, ['10.10.0.0/26', '10.96.0.0/12', '192.0.2.0/24']);
  t.same(cfg.bgp!.serviceIPs, { clusterIPs: ['10.96.0.0/12'], externalIPs: [], loadBalancerIPs: ['192.0.2.0/24'] });
  svc('{ serviceClusterIPs: [{ cidr: 10.96.0.0/12 }] }');
  t.same(mergeCalico(loadConfig(file), file, () => undefined).bgp!.announce, ['10.10.0.0/26', '10.96.0.0/12'], 'a range removed is no longer announced');
});
