// Calico v3 manifests become pools, peers and IPAM settings; what has no equivalent is a warning; bad fields are
// errors naming the document and field.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { importCalico } from '../../src/config/calico.ts';
import { validatePool } from '../../src/ipam/validate.ts';

const cluster = readFileSync(new URL('../../fixtures/calico/cluster.yaml', import.meta.url), 'utf8');

t.test('a typical cluster, seen from a rack-1 Linux node', async (t) => {
  const r = importCalico(cluster, 'cluster.yaml', 'node-a', { rack: 'r1' });
  t.same(r.pools.map((p) => [p.name, p.cidr, p.blockSize, p.natOutgoing, p.nodeSelector]), [
    ['default-ipv4-ippool', '10.244.0.0/16', 26, true, 'all()'],
    ['windows-pool', '10.245.0.0/16', 27, false, 'kubernetes.io/os == "windows"'],
  ]);
  t.same(r.pools[1].allowedUses, ['Workload']);
  for (const p of r.pools) t.doesNotThrow(() => validatePool(p), `${p.name} is a valid blockspeaker pool`);
  t.same(r.peers, [{ address: '10.201.0.1', asn: 65001, port: 179, families: ['ipv4'], holdTime: 90, passive: false, gracefulRestart: { restartTime: 120 } }]);
  t.equal(r.asn, 64512);
  t.equal(r.listenPort, 1179);
  t.same(r.ipam, { strictAffinity: true, maxBlocksPerHost: 4 });
  t.match(r.warnings.join('\n'), /spec\.ipipMode: "Always" ignored: blockspeaker routes natively/);
  t.equal(r.nodeToNodeMeshEnabled, false, 'nodeToNodeMeshEnabled is honoured');
});

t.test('node-specific peers and peer node selectors', async (t) => {
  const b = importCalico(cluster, 'cluster.yaml', 'node-b', { rack: 'r2' });
  t.same(b.peers.map((p) => [p.address, p.port, p.asn, p.families]), [['fd00:201::1', 1179, 65002, ['ipv6']]], 'only its own peer; the rack-1 ToR does not match');
});

t.test('bad fields name the document and the field', async (t) => {
  const bad = `apiVersion: projectcalico.org/v3
kind: IPPool
metadata: { name: p }
spec: { cidr: 10.0.0.1/16 }
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: { name: x }
spec: { peerIP: 10.0.0.300, asNumber: 1 }
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: { name: y }
spec: { peerIP: 10.0.0.3, asNumber: 0 }
---
apiVersion: projectcalico.org/v3
kind: IPAMConfiguration
metadata: { name: default }
spec: { strictAffinity: "yes" }
`;
  const e = t.throws(() => importCalico(bad, 'bad.yaml', 'n')) as Error;
  t.match(e.message, /bad\.yaml: document 1 \(IPPool p\): spec\.cidr: .*host bits set/);
  t.match(e.message, /document 2 \(BGPPeer x\): spec\.peerIP: invalid IP address "10\.0\.0\.300"/);
  t.match(e.message, /document 3 \(BGPPeer y\): spec\.asNumber: must be 1\.\.4294967295, got 0/);
  t.match(e.message, /document 4 \(IPAMConfiguration default\): spec\.strictAffinity: must be true or false/);
  t.equal(e.message.split('\n').length, 4, 'every error reported, one per line');
  t.throws(() => importCalico('kind: [unclosed', 'broken.yaml', 'n'), /broken\.yaml: document 1/);
});

t.test('asdot AS numbers and Go durations', async (t) => {
  const r = importCalico('kind: BGPPeer\nmetadata: {name: p}\nspec: {peerIP: 10.1.1.1, asNumber: "1.10", maxRestartTime: 1m30s}\n', 'x', 'n');
  t.equal(r.peers[0].asn, 65546);
  t.same(r.peers[0].gracefulRestart, { restartTime: 90 });
});
