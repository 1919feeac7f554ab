// Communities with real peers (RFC 1997 standard, RFC 8092 large): our daemon's bgp.prefixAdvertisements put
// communities on what it announces, and BIRD (`birdc show route all`) and GoBGP (`gobgp global rib -j`) read them
// back; the communities BIRD and GoBGP attach to their routes show in our /routes. Needs root, bird2 and gobgpd
// (REQUIRE_PEERS=1: fails without them).
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import type { PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

for (const kind of ['bird', 'gobgp'] as PeerKind[]) {
  const gate = interopGate(t, [kind]);
  t.test(`communities both ways with ${kind}`, { skip: gate }, async (t) => {
    const link = await createLink({ name: `cm${kind[0]}`, t });
    const L = link.local;
    const P = link.peer;
    const peer = await startPeer(kind, link, {
      asn: 65002,
      neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9 }],
      announce: [{ prefix: '10.82.0.0/24', communities: ['65002:5'], largeCommunities: ['65002:6:7'] }],
    });
    const us = await startOurs(link, {
      asn: 65001,
      peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9 }],
      announce: ['10.71.1.0/26', '10.71.2.0/26', '10.72.0.0/24'],
      communities: [{ name: 'pods', value: '65001:100' }, { name: 'pods-large', value: '65001:7:8' }],
      prefixAdvertisements: [{ cidr: '10.71.0.0/16', communities: ['pods', 'pods-large'] }, { cidr: '10.71.2.0/24', communities: ['65001:200'] }],
    }, t);
    const peers = [peer];
    await us.waitPeer(P.v4, 'Established', { peers });

    const r1 = await peer.waitRoute('ipv4', '10.71.1.0/26', { timeoutMs: 20_000 });
    const r2 = await peer.waitRoute('ipv4', '10.71.2.0/26', { timeoutMs: 20_000 });
    const r3 = await peer.waitRoute('ipv4', '10.72.0.0/24', { timeoutMs: 20_000 });
    t.same(r1?.communities, ['65001:100'], `${kind} reads the standard community of a longer prefix of the cidr`);
    t.same(r1?.largeCommunities, ['65001:7:8'], `${kind} reads the large community`);
    t.same([...(r2?.communities ?? [])].sort(), ['65001:100', '65001:200'], 'both advertisements holding the route apply');
    t.same([r3?.communities, r3?.largeCommunities], [[], []], 'a route outside every cidr carries none');

    const mine = await us.waitRoute('10.82.0.0/24', { from: P.v4, peers });
    t.same(mine!.attributes.COMMUNITIES, ['65002:5'], `we show the standard community ${kind} attached`);
    t.same(mine!.attributes.LARGE_COMMUNITY, ['65002:6:7'], `we show the large community ${kind} attached`);

    // A reload with other advertisements re-sends the routes with the new communities.
    await us.reload({
      asn: 65001,
      peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9 }],
      announce: ['10.71.1.0/26', '10.71.2.0/26', '10.72.0.0/24'],
      prefixAdvertisements: [{ cidr: '10.72.0.0/16', communities: ['65001:300'] }],
    });
    await us.wait(async () => {
      const a = (await peer.routes('ipv4')).find((r) => r.prefix === '10.72.0.0/24');
      const b = (await peer.routes('ipv4')).find((r) => r.prefix === '10.71.1.0/26');
      return a?.communities.join() === '65001:300' && b && b.communities.length === 0 && b.largeCommunities.length === 0;
    }, `${kind} sees the reloaded communities`, { peers });
    t.pass('after a reload the peer holds the new communities and the old ones are gone');
  });
}
