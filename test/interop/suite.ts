/**
 * The interop scenario every peer kind goes through: our `blockspeaker run` in link.local.ns against one daemon
 * in link.peer.ns, one IPv4 and one IPv6 session (MP-BGP), both sides with 4-octet ASNs, graceful restart on.
 *
 *  1. sessions Established; capabilities; our routes in the peer's table and theirs in our RIB (both families)
 *  2. withdrawals both ways (the peer's CLI; our SIGHUP reload), the reload does not reset the session
 *  3. route refresh: the peer asks (soft reset in) and we re-send; our import policy change re-imports
 *  4. graceful restart, we restart: kill -9, the peer keeps our routes (stale) throughout, we come back with R
 *  5. graceful restart, the peer restarts: kill -9 the daemon, we keep its routes stale until it is back
 *  6. wrong peer AS, both ways: OPEN Message Error / Bad Peer AS sent by the side that sees it
 */
import type { Test } from 'tap';
import { createLink } from '../kit/interop/netns.ts';
import type { Peer, PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { startOurs, type OurConfig, type Ours } from '../kit/interop/our-speaker.ts';

const OUR_AS = 4200000001;
const PEER_AS = 4200000002;
const HOLD = 9;
const GR_TIME = 60;

/** How to make the peer send us a ROUTE-REFRESH (soft reset inbound). */
async function softResetIn(peer: Peer, addr: string, neighborIndex: number): Promise<void> {
  const p = peer as unknown as {
    birdc(a: string[]): Promise<string>;
    gobgp(a: string[]): Promise<string>;
    vtysh(c: string[]): Promise<string>;
  };
  if (peer.kind === 'bird') await p.birdc(['reload', 'in', `nb${neighborIndex + 1}`]);
  else if (peer.kind === 'gobgp') await p.gobgp(['neighbor', addr, 'softresetin']);
  else await p.vtysh([`clear bgp ${addr} soft in`]);
}

/** NOTIFICATIONs the peer has received from a neighbour (GoBGP keeps no last error, only counters). */
async function gobgpNotificationsReceived(peer: Peer, addr: string): Promise<number> {
  const raw = (await peer.neighbor(addr)).raw as { state?: { messages?: { received?: { notification?: number | string } } } };
  return Number(raw.state?.messages?.received?.notification ?? 0);
}

export async function interopSuite(t: Test, kind: PeerKind): Promise<void> {
  const link = await createLink({ name: `${kind.slice(0, 2)}s`, t });
  const L = link.local;
  const P = link.peer;

  const peer = await startPeer(kind, link, {
    asn: PEER_AS,
    neighbors: [
      { address: L.v4, asn: OUR_AS, families: ['ipv4'], holdTime: HOLD, gracefulRestart: { restartTime: GR_TIME } },
      { address: L.v6, asn: OUR_AS, families: ['ipv6'], holdTime: HOLD, gracefulRestart: { restartTime: GR_TIME } },
    ],
    announce: ['10.200.0.0/24', '10.200.1.0/24', 'fd00:200::/48', 'fd00:201::/48'],
  });
  const base: OurConfig = {
    asn: OUR_AS,
    gracefulRestart: { restartTime: GR_TIME },
    peers: [
      { address: P.v4, asn: PEER_AS, families: ['ipv4'], holdTime: HOLD },
      { address: P.v6, asn: PEER_AS, families: ['ipv6'], holdTime: HOLD },
    ],
    announce: ['10.100.0.0/24', '10.100.1.0/24', 'fd00:100::/48'],
  };
  const us = await startOurs(link, base, t);
  const peers = [peer];

  // ---- 1. sessions and routes
  await t.test('sessions Established, routes both ways, IPv6 over MP-BGP, 4-octet ASNs', async (t) => {
    const [s4, s6] = await Promise.all([us.waitPeer(P.v4, 'Established', { peers }), us.waitPeer(P.v6, 'Established', { peers })]);
    await Promise.all([peer.waitEstablished(L.v4), peer.waitEstablished(L.v6)]);
    t.match(s4, { asn: PEER_AS, capabilities: { families: ['ipv4'], fourOctetAs: true, routeRefresh: true } }, 'IPv4 session capabilities');
    t.match(s6, { asn: PEER_AS, capabilities: { families: ['ipv6'], fourOctetAs: true, routeRefresh: true } }, 'IPv6 session capabilities');
    t.ok(s4.capabilities?.gracefulRestart, 'graceful restart negotiated');

    const [p4, p6] = await Promise.all([
      peer.waitRoute('ipv4', '10.100.0.0/24', { from: L.v4 }),
      peer.waitRoute('ipv6', 'fd00:100::/48', { from: L.v6 }),
    ]);
    t.match(p4, { asPath: [OUR_AS], nexthop: L.v4 }, `our IPv4 route in ${kind}, 4-octet AS_PATH`);
    t.match(p6, { asPath: [OUR_AS], nexthop: L.v6 }, `our IPv6 route in ${kind}`);
    await peer.waitRoute('ipv4', '10.100.1.0/24', { from: L.v4 });

    const [o4, o6] = await Promise.all([
      us.waitRoute('10.200.0.0/24', { from: P.v4, peers }),
      us.waitRoute('fd00:200::/48', { from: P.v6, peers }),
    ]);
    t.match(o4, { best: true, stale: false, attributes: { AS_PATH: String(PEER_AS), NEXT_HOP: P.v4 } }, `${kind}'s IPv4 route in our RIB`);
    t.match(o6, { best: true, stale: false, attributes: { AS_PATH: String(PEER_AS) } }, `${kind}'s IPv6 route in our RIB`);
    t.equal(o6?.attributes.NEXT_HOP, P.v6, 'IPv6 next hop (global) from MP_REACH_NLRI');
    t.notOk(await us.route('fd00:200::/48').then((r) => r?.paths.find((p) => p.peer === P.v4)), 'no IPv6 routes on the IPv4-only session');
  });

  // ---- 2. withdrawals
  await t.test('withdrawals propagate both ways; a reload keeps the session', async (t) => {
    await peer.withdraw('10.200.1.0/24');
    await peer.withdraw('fd00:201::/48');
    await us.waitRoute('10.200.1.0/24', { present: false, peers });
    await us.waitRoute('fd00:201::/48', { present: false, peers });
    t.ok(await us.route('10.200.0.0/24'), 'the other route stays');
    t.pass(`${kind}'s withdrawals reach our RIB`);

    const before = await us.peer(P.v4);
    await us.reload({ ...us.config(), announce: ['10.100.0.0/24', '10.100.2.0/24', 'fd00:100::/48'] });
    await peer.waitRoute('ipv4', '10.100.1.0/24', { present: false });
    await peer.waitRoute('ipv4', '10.100.2.0/24', { from: L.v4 });
    t.pass(`our withdrawal and new announcement (SIGHUP) reach ${kind}`);
    const after = await us.peer(P.v4);
    t.equal(after.state, 'Established');
    t.equal(after.since, before.since, 'session not reset by the reload');
    t.equal(after.flaps, before.flaps);
  });

  // ---- 3. route refresh
  await t.test('route refresh', async (t) => {
    const before = await us.peer(P.v4);
    if (peer.kind === 'gobgp') {
      // gobgp's softresetin re-applies policy to its own Adj-RIB-In and sends no ROUTE-REFRESH; only our request
      // (below) is tested against it.
      t.comment('gobgp cannot be made to send ROUTE-REFRESH from its CLI');
    } else {
      await softResetIn(peer, L.v4, 0);
      const after = await us.wait(async () => {
        const p = await us.peer(P.v4);
        return p.messages.updatesSent > before.messages.updatesSent && p;
      }, `we answer ${kind}'s ROUTE-REFRESH with our routes again`, { peers });
      t.equal(after.since, before.since, 'answered within the session (no reset)');
      t.pass(`${kind} asked for a refresh and got our UPDATEs again`);
      await peer.waitRoute('ipv4', '10.100.0.0/24', { from: L.v4 });
    }

    // our import policy change: reject one prefix, then accept everything again
    const cfg = us.config();
    cfg.peers[0].import = [{ prefix: '10.200.0.0/24', action: 'reject' }, { prefix: '0.0.0.0/0', le: 32 }];
    const rx = (await us.peer(P.v4)).messages.updatesReceived;
    await us.reload(cfg);
    await us.waitRoute('10.200.0.0/24', { present: false, peers });
    t.pass('import policy applied at reload');
    delete cfg.peers[0].import;
    await us.reload(cfg);
    await us.waitRoute('10.200.0.0/24', { from: P.v4, peers });
    t.pass('route back when the policy accepts it again');
    const p = await us.wait(async () => {
      const s = await us.peer(P.v4);
      return s.messages.updatesReceived > rx && s;
    }, `${kind} re-sends its routes after our ROUTE-REFRESH`, { peers, timeoutMs: 10_000 });
    t.equal(p.since, before.since, 'no session reset for a policy change');
  });

  // ---- 4. graceful restart: we restart
  await t.test('graceful restart: kill -9 our speaker, the peer keeps our routes until we are back', async (t) => {
    await peer.waitRoute('ipv4', '10.100.0.0/24', { from: L.v4 });
    let missing = 0;
    let staleSeen = false;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const r = (await peer.routes('ipv4').catch(() => [])).find((x) => x.prefix === '10.100.0.0/24');
        if (!r) missing++;
        else if (r.stale) staleSeen = true;
        await new Promise((res) => setTimeout(res, 200));
      }
    })();
    try {
      await us.kill();
      await waitFor(async () => (await peer.state(L.v4)) !== 'Established', { what: `${kind} notices we are gone`, peers });
      await new Promise((r) => setTimeout(r, 1500)); // a while without us
      t.ok(await peer.routes('ipv4').then((rs) => rs.find((x) => x.prefix === '10.100.0.0/24')), 'our route still there while we are down');
      await us.start();
      await us.waitPeer(P.v4, 'Established', { peers });
      // Both sessions: the next test kills the peer and wants both families' routes kept as stale.
      await us.waitPeer(P.v6, 'Established', { peers, timeoutMs: 30_000 });
      await waitFor(async () => (await peer.routes('ipv4')).find((x) => x.prefix === '10.100.0.0/24' && x.from === L.v4 && !x.stale),
        { what: `${kind} refreshed our route after our End-of-RIB`, peers });
    } finally {
      watching = false;
      await watcher;
    }
    t.equal(missing, 0, `${kind} kept our route throughout the restart`);
    t.ok(staleSeen, `${kind} marked it stale meanwhile`);
    t.match(us.logs(400), /restarting speaker/, 'we restarted as a graceful-restart restarting speaker');
  });

  // ---- 5. graceful restart: the peer restarts
  await t.test('graceful restart: kill -9 the peer, we keep its routes as stale until it returns', async (t) => {
    // Both families held fresh first: the sessions come back one by one (connect retry jitter) after test 4.
    await us.waitRoute('10.200.0.0/24', { from: P.v4, match: (p) => !p.stale, peers });
    await us.waitRoute('fd00:200::/48', { from: P.v6, match: (p) => !p.stale, peers, timeoutMs: 30_000 });
    await peer.kill();
    await us.wait(async () => (await us.peer(P.v4)).state !== 'Established', 'we notice the peer is gone', { peers });
    const stale = await us.waitRoute('10.200.0.0/24', { from: P.v4, match: (p) => p.stale, peers, timeoutMs: 5000 });
    t.match(stale, { stale: true, best: true }, 'kept as stale (and still used)');
    t.ok(await us.waitRoute('fd00:200::/48', { from: P.v6, match: (p) => p.stale, peers, timeoutMs: 5000 }), 'IPv6 too');
    await peer.restart({ gracefulRestart: true });
    await us.waitPeer(P.v4, 'Established', { peers, timeoutMs: 30_000 });
    const fresh = await us.waitRoute('10.200.0.0/24', { from: P.v4, match: (p) => !p.stale, peers });
    t.match(fresh, { stale: false }, 'fresh again after the peer is back');
    await us.waitRoute('fd00:200::/48', { from: P.v6, match: (p) => !p.stale, peers, timeoutMs: 30_000 });
  });

  // ---- 6. wrong peer AS
  await t.test('wrong peer AS: we send Bad Peer AS when the peer is not the AS we expect', async (t) => {
    const cfg = us.config();
    cfg.peers[0].asn = 4200000099;
    const notesBefore = kind === 'gobgp' ? await gobgpNotificationsReceived(peer, L.v4) : 0;
    await us.reload(cfg);
    // lastError moves on with each retry (a reset, a refused connect), so the log is the evidence.
    await us.wait(() => new RegExp(`peer ${P.v4}: sent NOTIFICATION OPEN Message Error / Bad Peer AS \\(2/2\\)`).test(us.logs(2000)),
      'we send OPEN Message Error / Bad Peer AS', { peers });
    t.pass('we sent OPEN Message Error / Bad Peer AS (2/2)');
    t.not((await us.peer(P.v4)).state, 'Established');
    if (kind === 'gobgp') {
      await waitFor(async () => (await gobgpNotificationsReceived(peer, L.v4)) > notesBefore,
        { what: 'gobgp counts a received NOTIFICATION', peers });
      t.pass('gobgp received it (its CLI shows counters, not the error)');
    } else {
      const n = await waitFor(async () => {
        const e = (await peer.neighbor(L.v4)).lastError ?? '';
        return /bad peer as/i.test(e) && e;
      }, { what: `${kind} reports our Bad Peer AS NOTIFICATION`, peers });
      t.pass(`${kind} received it: ${n}`);
    }
    t.equal((await us.peer(P.v6)).state, 'Established', 'the other session is untouched');

    cfg.peers[0].asn = PEER_AS;
    await us.reload(cfg);
    await us.waitPeer(P.v4, 'Established', { peers, timeoutMs: 40_000 });
    await us.waitRoute('10.200.0.0/24', { from: P.v4, match: (p) => !p.stale, peers });
    t.pass('session back once the AS is right');
  });

  await t.test('wrong peer AS: the peer sends Bad Peer AS when we are not the AS it expects', async (t) => {
    // A restart with another local AS (not a reload: this checks the wire, not reconfiguration).
    await us.restartWith({ ...us.config(), asn: 4200000009 });
    await us.wait(() => new RegExp(`peer ${P.v4}: received NOTIFICATION OPEN Message Error / Bad Peer AS \\(2/2\\)`).test(us.logs(2000)),
      `${kind} sends us OPEN Message Error / Bad Peer AS`, { peers });
    t.pass(`${kind} sent OPEN Message Error / Bad Peer AS (2/2)`);
    t.not((await us.peer(P.v4)).state, 'Established');
    await us.restartWith({ ...us.config(), asn: OUR_AS });
    await us.waitPeer(P.v4, 'Established', { peers, timeoutMs: 40_000 });
    await us.waitPeer(P.v6, 'Established', { peers, timeoutMs: 40_000 });
    await peer.waitRoute('ipv4', '10.100.0.0/24', { from: L.v4 });
    t.pass('sessions back with the right AS');
  });

  t.equal(await us.stop('SIGINT'), 0, 'our speaker stops cleanly on SIGINT (exit 0)');
  await us.wait(async () => !(await peer.routes('ipv4')).some((r) => r.prefix === '10.100.0.0/24'),
    `${kind} drops our routes after our Cease`, { peers });
  t.pass('Cease on stop: the peer drops our routes at once');
}

/** Lets a test file run the suite under the gate, with one top-level test. */
export function interopTest(t: Test, kind: PeerKind, gate: false | string, name: string): void {
  t.test(name, { skip: gate, bail: false }, (tt) => interopSuite(tt, kind) as unknown as Promise<void>);
}

export type { Ours };
