// Max-prefix against a real peer: BIRD announces more routes than our limit; we close the session with Cease /
// Maximum Number of Prefixes Reached (BIRD reports it), /peers/ADDR and /metrics say so, and after the restart
// time the session comes back once BIRD is under the limit. Needs root and bird2 (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, ['bird']);

t.test('max-prefix: BIRD sends six routes, our limit is four', { skip: gate }, async (t) => {
  const link = await createLink({ name: 'mp', t });
  const L = link.local;
  const P = link.peer;
  const routes = [0, 1, 2, 3, 4, 5].map((i) => `10.60.${i}.0/24`);
  const bird = await startPeer('bird', link, {
    asn: 65002,
    neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9 }],
    announce: routes,
  });
  const us = await startOurs(link, { asn: 65001, peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9, maxPrefixes: { ipv4: 4, restart: 3 } }] }, t);
  const peers = [bird];

  const tripped = await us.wait(async () => {
    const p = (await us.get(`/peers/${P.v4}`)).body;
    return p?.maxPrefixes?.exceeded && p;
  }, 'our max-prefix limit closed the session', { peers });
  t.match(tripped.maxPrefixes, { limits: { ipv4: 4, ipv6: null }, restart: 3, exceeded: { family: 'ipv4', limit: 4 } });
  t.ok(tripped.maxPrefixes.exceeded.count > 4, `exceeded with ${tripped.maxPrefixes.exceeded.count} routes`);
  t.match(tripped.errorCounts, { 'max-prefix': { ipv4: Number }, 'notification-sent': { '6/1': Number } });
  t.notOk(await us.route('10.60.0.0/24'), 'no route of the peer kept');

  const birdError = await waitFor(async () => {
    const e = (await bird.neighbor(L.v4)).lastError ?? '';
    return /maximum number of prefixes/i.test(e) ? e : null;
  }, { what: 'BIRD reports the Cease we sent', timeoutMs: 20_000, peers });
  t.match(birdError, /Received: Maximum number of prefixes reached/i, `BIRD: ${birdError}`);

  const metrics = String((await us.get('/metrics')).body);
  t.match(metrics, new RegExp(`blockspeaker_bgp_errors_total\\{peer="${P.v4.replace(/\./g, '\\.')}",kind="max-prefix",detail="ipv4"\\} [1-9]`), 'max-prefix trips in the metrics');
  t.match(metrics, new RegExp(`blockspeaker_bgp_max_prefixes\\{peer="${P.v4.replace(/\./g, '\\.')}",family="ipv4"\\} 4`), 'the limit in the metrics');

  // BIRD drops to four routes: after our restart time the session comes back and stays up.
  await bird.withdraw(routes[4]);
  await bird.withdraw(routes[5]);
  await us.waitPeer(P.v4, 'Established', { peers, timeoutMs: 60_000 });
  await us.waitRoute(routes[3], { from: P.v4, peers });
  const up = await us.peer(P.v4) as unknown as { prefixes: { received: number }; state: string };
  t.equal(up.prefixes.received, 4, 'four routes, at the limit');
  t.equal(up.state, 'Established');
});
