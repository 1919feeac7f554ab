// A per-peer local AS and allowas-in with real peers. BIRD is configured to expect AS 65100 from us while our
// node is AS 65001: with peers[].localAsn 65100 the session comes up and BIRD reads our route with AS_PATH 65100.
// GoBGP announces routes whose AS_PATH already holds our AS once and twice: dropped by default, accepted up to
// peers[].allowAsIn times. Needs root, bird2 and gobgpd (REQUIRE_PEERS=1: fails without them).
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const birdGate = interopGate(t, ['bird']);
t.test('localAsn: BIRD expects AS 65100 from a node of AS 65001', { skip: birdGate }, async (t) => {
  const link = await createLink({ name: 'las', t });
  const L = link.local;
  const P = link.peer;
  const bird = await startPeer('bird', link, {
    asn: 65002,
    neighbors: [{ address: L.v4, asn: 65100, families: ['ipv4'], holdTime: 9 }],
    announce: ['10.91.0.0/24'],
  });
  const us = await startOurs(link, {
    asn: 65001,
    peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9, localAsn: 65100 }],
    announce: ['10.90.0.0/24'],
  }, t);
  const peers = [bird];
  await us.waitPeer(P.v4, 'Established', { peers });
  const r = await bird.waitRoute('ipv4', '10.90.0.0/24', { timeoutMs: 20_000 });
  t.same(r?.asPath, [65100], 'BIRD reads AS_PATH 65100: the local AS, not the node\'s');
  const mine = await us.waitRoute('10.91.0.0/24', { from: P.v4, peers });
  t.equal(mine!.attributes.AS_PATH, '65002', 'and we learn BIRD\'s route');
  t.match(await us.peer(P.v4), { type: 'ebgp', state: 'Established' });
});

const gobgpGate = interopGate(t, ['gobgp']);
t.test('allowas-in: GoBGP sends paths holding our AS', { skip: gobgpGate }, async (t) => {
  const link = await createLink({ name: 'aai', t });
  const L = link.local;
  const P = link.peer;
  const gobgp = await startPeer('gobgp', link, {
    asn: 65002,
    neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9 }],
    announce: ['10.93.0.0/24', { prefix: '10.93.1.0/24', asPath: [65001] }, { prefix: '10.93.2.0/24', asPath: [65001, 65001] }],
  });
  const cfg = (allowAsIn?: number) => ({
    asn: 65001,
    peers: [{ address: P.v4, asn: 65002, families: ['ipv4' as const], holdTime: 9, ...(allowAsIn === undefined ? {} : { allowAsIn }) }],
  });
  const us = await startOurs(link, cfg(), t);
  const peers = [gobgp];
  await us.waitRoute('10.93.0.0/24', { from: P.v4, peers });
  await us.wait(async () => (await us.peer(P.v4)).prefixes.received === 3, 'all three received', { peers });
  t.equal(await us.route('10.93.1.0/24'), null, 'default: AS_PATH 65002 65001 is a loop, dropped');
  t.equal(await us.route('10.93.2.0/24'), null);

  await us.reload(cfg(1));
  const one = await us.waitRoute('10.93.1.0/24', { from: P.v4, peers });
  t.equal(one!.attributes.AS_PATH, '65002 65001', 'allowAsIn 1: accepted with our AS once');
  t.equal(await us.route('10.93.2.0/24'), null, 'twice is still a loop');
  await us.reload(cfg(2));
  const two = await us.waitRoute('10.93.2.0/24', { from: P.v4, peers });
  t.equal(two!.attributes.AS_PATH, '65002 65001 65001', 'allowAsIn 2: accepted');
});
