// BGPFilter operations with a real peer: a Calico manifest (ipam.calico) gives our BIRD peering a filter whose
// rules add a community and prepend our AS twice to one route, reject another by Equal, and leave a third to the
// default; BIRD (`birdc show route all`) sees exactly that. Needs root and bird2 (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, ['bird']);
t.test('BGPFilter addCommunity / prependASPath / Reject seen by BIRD', { skip: gate }, async (t) => {
  const link = await createLink({ name: 'bf', t });
  const L = link.local;
  const P = link.peer;
  const bird = await startPeer('bird', link, { asn: 65002, neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9 }] });
  const dir = fs.mkdtempSync(path.join(fs.realpathSync('/tmp'), `bs-bgpfilter-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const manifest = path.join(dir, 'calico.yaml');
  fs.writeFileSync(manifest, `apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: { name: tor }
spec: { peerIP: ${P.v4}, asNumber: 65002, filters: [ops] }
---
apiVersion: projectcalico.org/v3
kind: BGPFilter
metadata: { name: ops }
spec:
  exportV4:
    - cidr: 10.95.1.0/24
      matchOperator: Equal
      peerType: eBGP
      action: Accept
      operations: [{ addCommunity: { value: "65001:55" } }, { addCommunity: { value: "65001:5:5" } }, { prependASPath: { prefix: [65001, 65001] } }]
    - { cidr: 10.95.2.0/24, matchOperator: Equal, action: Reject }
    - { cidr: 10.95.0.0/16, matchOperator: In, peerType: iBGP, action: Reject }
`);
  const us = await startOurs(link, {
    asn: 65001,
    peers: [],
    announce: ['10.95.1.0/24', '10.95.2.0/24', '10.95.3.0/24'],
    sections: { ipam: { store: path.join(dir, 'store'), calico: [manifest] } },
  }, t);
  const peers = [bird];
  await us.waitPeer(P.v4, 'Established', { peers });
  const r1 = await bird.waitRoute('ipv4', '10.95.1.0/24', { timeoutMs: 20_000 });
  const r3 = await bird.waitRoute('ipv4', '10.95.3.0/24', { timeoutMs: 20_000 });
  t.same(r1?.communities, ['65001:55'], 'BIRD sees the added standard community');
  t.same(r1?.largeCommunities, ['65001:5:5'], 'and the added large community');
  t.same(r1?.asPath, [65001, 65001, 65001], 'our AS prepended twice by the filter, then once on eBGP export');
  t.same([r3?.asPath, r3?.communities], [[65001], []], 'a route no rule matches: the default treatment, unchanged');
  t.equal((await bird.routes('ipv4')).some((r) => r.prefix === '10.95.2.0/24'), false, 'the Reject rule kept 10.95.2.0/24 from BIRD');
});
