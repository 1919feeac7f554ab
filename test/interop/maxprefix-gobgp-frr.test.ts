// Max-prefix against GoBGP and FRR (the BIRD one is maxprefix.test.ts): each announces six routes to our limit of
// four; we close the session with Cease / Maximum Number of Prefixes Reached (RFC 4486 subcode 1) carrying AFI,
// SAFI and the limit (RFC 4486 section 4: 2 + 1 + 4 octets), each peer shows it (FRR in `show bgp neighbors`,
// GoBGP in its neighbour's notification counter and its log), and after the restart time the session comes back
// once the peer is under the limit. Needs root, gobgpd and frr (REQUIRE_PEERS=1: fails, never skips, without).
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import type { Peer, PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, ['gobgp', 'frr']);
// AFI 1 (IPv4), SAFI 1 (unicast), upper bound 4: the data of our NOTIFICATION.
const DATA_HEX = '00010100000004';

/** GoBGP: NOTIFICATIONs received from this neighbour (its `gobgp neighbor -j` message counters). */
function gobgpNotificationsReceived(raw: unknown): number {
  const m = (raw as { state?: { messages?: { received?: { notification?: number | string } } } }).state?.messages?.received?.notification;
  return Number(m ?? 0);
}

for (const [i, kind] of (['gobgp', 'frr'] as PeerKind[]).entries()) {
  t.test(`max-prefix: ${kind} sends six routes, our limit is four`, { skip: gate }, async (t) => {
    const link = await createLink({ name: `mp${kind.slice(0, 2)}`, t });
    const L = link.local;
    const P = link.peer;
    const routes = [0, 1, 2, 3, 4, 5].map((k) => `10.6${i + 1}.${k}.0/24`);
    const peer: Peer = await startPeer(kind, link, {
      asn: 65002,
      neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9 }],
      announce: routes,
    });
    // FRR logs a received NOTIFICATION with its data only when neighbour events are logged.
    if (kind === 'frr') await (peer as unknown as { vtysh(c: string[]): Promise<string> }).vtysh(['debug bgp neighbor-events']);
    const us = await startOurs(link, { asn: 65001, peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9, maxPrefixes: { ipv4: 4, restart: 10 } }] }, t);
    const peers = [peer];

    const tripped = await us.wait(async () => {
      const p = (await us.get(`/peers/${P.v4}`)).body;
      return p?.maxPrefixes?.exceeded && p;
    }, 'our max-prefix limit closed the session', { peers });
    t.match(tripped.maxPrefixes, { limits: { ipv4: 4, ipv6: null }, restart: 10, exceeded: { family: 'ipv4', limit: 4 } });
    t.ok(tripped.maxPrefixes.exceeded.count > 4, `exceeded with ${tripped.maxPrefixes.exceeded.count} routes`);
    t.match(tripped.errorCounts, { 'max-prefix': { ipv4: Number }, 'notification-sent': { '6/1': Number } });
    t.notOk(await us.route(`10.6${i + 1}.0.0/24`), 'no route of the peer kept');

    if (kind === 'frr') {
      const nb = await waitFor(async () => {
        const n = await peer.neighbor(L.v4);
        return /maximum number of prefixes/i.test(n.lastError ?? '') ? n : null;
      }, { what: 'FRR shows the Cease we sent', timeoutMs: 20_000, peers });
      t.match(nb.lastError, /Cease\/Maximum Number of Prefixes Reached/i, `FRR show bgp neighbors: ${nb.lastError}`);
      const raw = nb.raw as { lastErrorCodeSubcode?: string; lastNotificationHardReset?: boolean };
      if (raw.lastErrorCodeSubcode !== undefined) t.equal(raw.lastErrorCodeSubcode, '0601', 'FRR: last error code/subcode 6/1');
      // FRR logs the data of every NOTIFICATION it receives.
      const logged = await waitFor(() => /NOTIFICATION: received from neighbor \S+ 6\/1 .*? 7 bytes ((?:[0-9a-f]{2} ?){7})/i.exec(peer.logs(400))?.[1], { what: "FRR logs the NOTIFICATION's data", timeoutMs: 10_000, peers });
      t.equal(logged.replace(/\s+/g, '').toLowerCase(), DATA_HEX, 'FRR received AFI 1, SAFI 1 and the limit 4 as the data');
    } else {
      const nb = await waitFor(async () => {
        const n = await peer.neighbor(L.v4);
        return gobgpNotificationsReceived(n.raw) > 0 ? n : null;
      }, { what: 'GoBGP counts the NOTIFICATION we sent', timeoutMs: 20_000, peers });
      t.ok(gobgpNotificationsReceived(nb.raw) >= 1, 'gobgp neighbor: a NOTIFICATION received from us');
      const line = await waitFor(() => peer.logs(400).split('\n').find((l) => /maximum number of prefixes/i.test(l)),
        { what: 'GoBGP logs the Cease subcode', timeoutMs: 10_000, peers });
      t.match(line, /code 6\(cease\) subcode 1\(maximum number of prefixes reached\)/i, `gobgpd: ${line.trim().slice(0, 200)}`);
      const data = /data \[([0-9 ]+)\]/.exec(line)?.[1];
      if (data !== undefined) t.equal(Buffer.from(data.split(' ').map(Number)).toString('hex'), DATA_HEX, 'GoBGP logged AFI 1, SAFI 1 and the limit 4');
    }

    // Status reads retry: on a loaded machine one `node -e fetch` in the namespace can outlive its 10 s limit.
    const metrics = await us.wait(async () => String((await us.get('/metrics')).body), 'our /metrics', { peers });
    t.match(metrics, new RegExp(`blockspeaker_bgp_errors_total\\{peer="${P.v4.replace(/\./g, '\\.')}",kind="max-prefix",detail="ipv4"\\} [1-9]`), 'max-prefix trips in the metrics');

    // The peer drops to four routes: after our restart time the session comes back and stays up.
    await peer.withdraw(routes[4]);
    await peer.withdraw(routes[5]);
    await us.waitPeer(P.v4, 'Established', { peers, timeoutMs: 90_000 });
    await us.waitRoute(routes[3], { from: P.v4, peers });
    const up = await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as { prefixes: { received: number }; state: string };
      return p.state === 'Established' && p.prefixes.received === 4 && p;
    }, 'Established again with four routes', { peers, timeoutMs: 60_000 });
    t.equal(up.prefixes.received, 4, 'four routes, at the limit');
    t.equal(up.state, 'Established');
    await peer.waitEstablished(L.v4, 30_000);
    t.pass(`${kind} sees the session Established again`);
  });
}
