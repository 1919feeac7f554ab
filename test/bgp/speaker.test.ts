// Speakers of ours talking real TCP on loopback (each on its own 127.0.0.x), plus a hand-driven raw peer where a
// test needs exact bytes: sessions, route flow and withdrawal, eBGP/iBGP rules, prefix lists, collision
// detection, graceful restart (helper and restarting speaker), route refresh, reconfiguration, backpressure.
import t from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerConfig, SpeakerOptions, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { encodeEndOfRib, encodeRouteRefresh, encodeUpdates, type UpdateMessage } from '../../src/bgp/codec/index.ts';
import { prefixesOf } from '../../src/bgp/codec/nlri.ts';
import { parseIP, parsePrefix, formatPrefix, formatIP, Prefix } from '../../src/net/ip.ts';
import { asSequence, makeAttrs } from '../../src/rib/attrs.ts';
import type { RibChange } from '../../src/rib/rib.ts';
import { RawPeer, RawServer, defaultCaps, freePort, sleep, waitFor } from './raw-peer.ts';

let PORT = 0;
t.before(async () => {
  PORT = await freePort();
});

const speakers: Speaker[] = [];
t.afterEach(async () => {
  await Promise.all(speakers.splice(0).map((s) => s.stop({ graceful: false })));
});

/** Speaker n listens on 127.0.0.n and has router ID 10.0.0.n. */
function mk(n: number, asn: number, peers: SpeakerPeerConfig[], extra: Partial<SpeakerConfig> = {}, opts: SpeakerOptions = {}): Speaker {
  const s = new Speaker({ asn, routerId: `10.0.0.${n}`, listen: { address: `127.0.0.${n}`, port: PORT }, peers, ...extra }, { random: () => 0.5, ...opts });
  speakers.push(s);
  return s;
}

const peer = (n: number, asn: number, extra: Partial<SpeakerPeerConfig> = {}): SpeakerPeerConfig => ({ address: `127.0.0.${n}`, asn, port: PORT, ...extra });

const best = (s: Speaker, p: string) => s.rib.best(parsePrefix(p));
const up = (s: Speaker, addr?: string) => s.peers().filter((p) => !addr || p.address === addr).every((p) => p.state === 'Established');
const plain = (s: Speaker, p: string) => {
  const b = best(s, p);
  if (!b) return undefined;
  const a = b.attrs;
  return {
    from: b.source,
    asPath: a.asPath.flatMap((seg) => seg.asns),
    nextHop: a.nextHop ? formatIP(a.nextHop) : null,
    localPref: a.localPref,
    med: a.med,
    stale: b.stale,
  };
};

t.test('two eBGP speakers: session, routes both ways (IPv4 and IPv6), withdrawals', async (t) => {
  const a = mk(1, 65001, [peer(2, 65002, { families: ['ipv4', 'ipv6'] })]);
  const b = mk(2, 65002, [peer(1, 65001, { families: ['ipv4', 'ipv6'] })], { announce: ['10.2.0.0/24'] });
  a.announce('10.1.0.0/24', { med: 7 });
  a.announce('fd00:1::/64');
  const events: string[] = [];
  a.on('peer', (st) => events.push(st.state));
  const states: string[] = [];
  a.on('state', (address, state) => states.push(`${address} ${state}`));
  t.same(a.peerCounts(), { configured: 1, established: 0 }, 'peerCounts before start');
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => up(a) && up(b) && best(b, 'fd00:1::/64') && best(a, '10.2.0.0/24'), 'routes exchanged');
  t.same(a.peerCounts(), { configured: 1, established: 1 }, 'and once Established, as peers() says');
  t.same(plain(b, '10.1.0.0/24'), { from: '127.0.0.1', asPath: [65001], nextHop: '127.0.0.1', localPref: undefined, med: 7, stale: false },
    'eBGP: our AS prepended, next hop self, no LOCAL_PREF, our own MED kept');
  t.same(plain(b, 'fd00:1::/64'), { from: '127.0.0.1', asPath: [65001], nextHop: '::ffff:7f00:1', localPref: undefined, med: undefined, stale: false },
    'IPv6 over an IPv4 session: MP_REACH with the IPv4-mapped next hop');
  t.same(plain(a, '10.2.0.0/24')?.asPath, [65002]);
  t.ok(events.includes('Established'), 'peer events');
  t.same(states, events.map((e) => `127.0.0.2 ${e}`), "'state' events: the same moments, with the address and state alone");

  const st = a.peers()[0];
  t.match(st, {
    address: '127.0.0.2', asn: 65002, type: 'ebgp', state: 'Established', lastError: null, routerId: '10.0.0.2',
    localAddress: '127.0.0.1', holdTime: 90, keepaliveTime: 30,
    capabilities: { families: ['ipv4', 'ipv6'], routeRefresh: true, fourOctetAs: true, extendedMessage: true, gracefulRestart: null },
    prefixes: { received: 1, accepted: 1, sent: 2, stale: 0 },
    flaps: 0,
    sendQueue: { prefixes: 0 },
  });
  const bs = b.peers()[0];
  t.equal(st.localPort, bs.remotePort, 'one connection: our local port is its remote port');
  t.equal(st.remotePort, bs.localPort);

  t.ok(a.withdraw('10.1.0.0/24'));
  t.notOk(a.withdraw('10.99.0.0/24'), 'withdrawing what was never announced');
  a.withdraw('fd00:1::/64');
  await waitFor(() => !best(b, '10.1.0.0/24') && !best(b, 'fd00:1::/64'), 'withdrawals propagate');
  a.announce('10.1.1.0/24');
  await waitFor(() => best(b, '10.1.1.0/24'), 'new announcement');
  t.equal(b.peers()[0].prefixes.received, 1);
  // UPDATE packing: 2000 prefixes with one attribute set travel in a handful of UPDATEs.
  const before = a.peers()[0].messages.updatesSent;
  for (let i = 0; i < 2000; i++) a.announce(new Prefix(4, (0x0b000000 + i * 256) >>> 0, 0, 0, 0, 24));
  await waitFor(() => b.peers()[0].prefixes.received === 2001, '2000 prefixes arrive');
  const used = a.peers()[0].messages.updatesSent - before;
  t.ok(used <= 3, `2000 prefixes in ${used} UPDATEs (extended messages: up to 65535 octets each)`);
});

t.test('eBGP and iBGP rules across five speakers', async (t) => {
  // A, B, E in AS 65001 (B meshes with A and E, A and E do not peer: no route reflection); C 65002, D 65003.
  const a = mk(1, 65001, [peer(2, 65001)], { announce: ['10.1.0.0/24'] });
  const b = mk(2, 65001, [peer(1, 65001), peer(5, 65001), peer(3, 65002), peer(4, 65003)]);
  const c = mk(3, 65002, [peer(2, 65001)]);
  const d = mk(4, 65003, [peer(2, 65001)]);
  const e = mk(5, 65001, [peer(2, 65001)]);
  c.announce('10.3.0.0/24', { med: 50 });
  // A path that already went through AS 65001: B must refuse it (loop).
  d.announce('10.4.0.0/24', { asPath: [asSequence(65001, 65099)] });
  d.announce('10.44.0.0/24');
  await Promise.all([a, b, c, d, e].map((s) => s.start()));
  await waitFor(() => [a, b, c, d, e].every((s) => up(s)), 'all sessions up', 10000);
  await waitFor(() => best(d, '10.3.0.0/24') && best(e, '10.3.0.0/24') && best(a, '10.3.0.0/24') && best(c, '10.1.0.0/24') && best(a, '10.44.0.0/24'), 'converged', 10000);
  await sleep(200);

  t.same(plain(b, '10.1.0.0/24'), { from: '127.0.0.1', asPath: [], nextHop: '127.0.0.1', localPref: 100, med: undefined, stale: false },
    'iBGP: no prepend, LOCAL_PREF 100');
  t.notOk(best(e, '10.1.0.0/24'), 'iBGP-learned route not re-advertised to an iBGP peer');
  t.same(plain(e, '10.3.0.0/24'), { from: '127.0.0.2', asPath: [65002], nextHop: '127.0.0.3', localPref: 100, med: 50, stale: false },
    'eBGP-learned route to iBGP: next hop unchanged, LOCAL_PREF added, MED kept inside the AS');
  t.same(plain(c, '10.1.0.0/24'), { from: '127.0.0.2', asPath: [65001], nextHop: '127.0.0.2', localPref: undefined, med: undefined, stale: false },
    'to eBGP: prepend, next hop self, LOCAL_PREF stripped');
  t.same(plain(d, '10.3.0.0/24'), { from: '127.0.0.2', asPath: [65001, 65002], nextHop: '127.0.0.2', localPref: undefined, med: undefined, stale: false },
    'MED from another AS is not passed on');
  const cIn = [...c.rib.adjRibIn('127.0.0.2')].map((x) => formatPrefix(x.prefix)).sort();
  t.same(cIn, ['10.1.0.0/24', '10.44.0.0/24'], 'C gets A\'s and D\'s routes, never its own back');
  t.notOk(best(b, '10.4.0.0/24'), 'own AS in AS_PATH: dropped');
  const bd = b.peers().find((p) => p.address === '127.0.0.4')!;
  t.match(bd.prefixes, { received: 2, accepted: 1 }, 'the looped route is held in Adj-RIB-In, not accepted');
  t.notOk(best(c, '10.4.0.0/24'));
  t.same(plain(c, '10.44.0.0/24')?.asPath, [65001, 65003]);
});

t.test('prefix lists, reconfiguration with route refresh, and sessions kept', async (t) => {
  const a = mk(1, 65001, [peer(2, 65002)], { announce: ['10.1.0.0/24', '10.1.0.0/25', '10.5.0.0/24'] });
  const bPeer = peer(1, 65001, {
    import: [{ prefix: '10.1.0.0/16', le: 24 }],
    export: [{ prefix: '10.2.9.0/24', action: 'reject' }, { prefix: '10.2.0.0/16', le: 24 }],
  });
  const bCfg: SpeakerConfig = { asn: 65002, routerId: '10.0.0.2', listen: { address: '127.0.0.2', port: PORT }, peers: [bPeer], announce: ['10.2.0.0/24', '10.2.9.0/24', '10.9.0.0/24'] };
  const b = new Speaker(bCfg, { random: () => 0.5 });
  speakers.push(b);
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => up(a) && up(b) && best(b, '10.1.0.0/24') && best(a, '10.2.0.0/24'), 'up');
  await sleep(100);
  t.notOk(best(b, '10.1.0.0/25'), 'import: /25 is longer than le 24');
  t.notOk(best(b, '10.5.0.0/24'), 'import: outside the list');
  t.match(b.peers()[0].prefixes, { received: 3, accepted: 1 });
  t.notOk(best(a, '10.2.9.0/24'), 'export: rejected by the first matching rule');
  t.notOk(best(a, '10.9.0.0/24'), 'export: no rule matches');
  t.equal(a.peers()[0].prefixes.received, 1);

  const sessionBefore = b.peers()[0];
  const sentBefore = a.peers()[0].messages.updatesSent;
  // New import policy: ROUTE-REFRESH to A, which re-sends its Adj-RIB-Out; the session stays.
  await b.reconfigure({ ...bCfg, peers: [{ ...bPeer, import: [{ prefix: '10.1.0.0/16', le: 24 }, { prefix: '10.5.0.0/16', le: 24 }] }] });
  await waitFor(() => best(b, '10.5.0.0/24'), 'new import policy applied');
  await waitFor(() => a.peers()[0].messages.updatesSent > sentBefore, 'A re-sent its routes (route refresh)');
  const after = b.peers()[0];
  t.equal(after.localPort, sessionBefore.localPort, 'same connection');
  t.equal(after.flaps, 0);
  t.match(after.prefixes, { received: 3, accepted: 2 });
  // New export policy: only the difference goes out.
  await b.reconfigure({ ...bCfg, peers: [{ ...bPeer, import: [{ prefix: '0.0.0.0/0', le: 32 }], export: [{ prefix: '10.2.0.0/16', le: 24 }] }] });
  await waitFor(() => best(a, '10.2.9.0/24') && best(b, '10.1.0.0/25'), 'export and import changes applied');
  t.equal(b.peers()[0].localPort, sessionBefore.localPort, 'still the same connection');
  await b.reconfigure({ ...bCfg, peers: [{ ...bPeer, import: undefined, export: [{ prefix: '10.9.0.0/16', le: 24 }] }] });
  await waitFor(() => !best(a, '10.2.0.0/24') && !best(a, '10.2.9.0/24') && best(a, '10.9.0.0/24'), 'export narrowed: withdrawals sent');
  // Static routes are diffed.
  await b.reconfigure({ ...bCfg, peers: [{ ...bPeer, import: undefined, export: undefined }], announce: ['10.2.0.0/24', '10.7.0.0/24'] });
  await waitFor(() => best(a, '10.7.0.0/24') && best(a, '10.2.0.0/24') && !best(a, '10.9.0.0/24'), 'static routes diffed');
  t.equal(b.peers()[0].localPort, sessionBefore.localPort, 'policy and route changes never reset the session');

  // A changed session setting restarts the session (Cease / Other Configuration Change at the peer).
  await b.reconfigure({ ...bCfg, peers: [{ ...bPeer, import: undefined, export: undefined, holdTime: 30 }], announce: ['10.2.0.0/24'] });
  await waitFor(() => a.peers()[0].lastError?.includes('Other Configuration Change'), 'peer told why');
  await waitFor(() => up(a) && up(b) && b.peers()[0].holdTime === 30, 'back up with the new hold time', 10000);
  // A removed peer gets Cease / Peer De-configured and its routes go.
  await b.reconfigure({ ...bCfg, peers: [] });
  await waitFor(() => a.peers()[0].lastError?.includes('Peer De-configured'), 'Peer De-configured');
  await waitFor(() => !best(a, '10.2.0.0/24'), 'routes of a de-configured session removed');
  t.same(b.peers(), []);
  t.notOk(b.rib.sourceNames().includes('127.0.0.1'));
});

t.test('a new router ID or ASN restarts every session and keeps the local routes', async (t) => {
  const aCfg: SpeakerConfig = { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port: PORT }, peers: [peer(2, 65002)], announce: ['10.1.0.0/24'] };
  const a = new Speaker(aCfg, { random: () => 0.5 });
  speakers.push(a);
  a.announce('10.1.9.0/24');
  const b = mk(2, 65002, [peer(1, 65001)]);
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => best(b, '10.1.9.0/24') && best(b, '10.1.0.0/24'), 'routes learned');
  await a.reconfigure({ ...aCfg, routerId: '10.0.0.11' });
  await waitFor(() => b.peers()[0].lastError?.includes('Other Configuration Change'), 'session restarted');
  await waitFor(() => up(a) && up(b) && b.peers()[0].routerId === '10.0.0.11', 'back with the new router ID', 10000);
  await waitFor(() => best(b, '10.1.9.0/24') && best(b, '10.1.0.0/24'), 'local routes still announced');
  t.equal(a.rib.peerInfo('local')?.routerId, 0x0a00000b);
});

t.test('only configured peers are accepted; a wrong AS gets Bad Peer AS', async (t) => {
  const s = mk(1, 65001, [peer(2, 65002, { passive: true })]);
  await s.start();
  const stranger = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.9');
  await stranger.closedP;
  t.same(stranger.received, [], 'an address that is not a peer: closed at once, nothing sent (as BIRD does)');
  const liar = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2');
  await liar.next('open');
  liar.sendOpen({ asn: 65003 });
  t.same(await liar.notification(), { code: 2, subcode: 2, data: 'fdeb' }, 'OPEN Message Error / Bad Peer AS, data: the AS it claimed');
  t.match(s.peers()[0].lastError, /Bad Peer AS/);
  // The passive peer never connected out, and a correct OPEN now works.
  const ok = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2');
  await waitFor(() => s.peers()[0].state === 'OpenSent' || s.peers()[0].state === 'Active', 'ready');
  await ok.establish();
  await waitFor(() => up(s), 'Established with the right AS');
});

t.test('connection collision (RFC 4271 6.8): the connection from the higher BGP Identifier survives', async (t) => {
  for (const [peerId, survivor] of [[0x0a000009, 'incoming'], [0x09000001, 'outgoing']] as const) {
    const srv = await RawServer.listen('127.0.0.2', PORT);
    const s = mk(1, 65001, [peer(2, 65002)]);
    await s.start();
    const out = await srv.accepted(); // our speaker's outgoing connection
    await out.next('open');
    const inc = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2'); // and one from the peer
    await inc.next('open');
    // The OPEN arrives first on the connection that is to lose, so the speaker must resolve it there.
    const [loser, winner] = survivor === 'incoming' ? [out, inc] : [inc, out];
    loser.sendOpen({ bgpId: peerId });
    t.same(await loser.notification(), { code: 6, subcode: 7, data: '' }, `peer id ${formatIP({ family: 4, w0: peerId, w1: 0, w2: 0, w3: 0 })}: Cease / Connection Collision Resolution on the ${survivor === 'incoming' ? 'outgoing' : 'incoming'} one`);
    await winner.establish({ bgpId: peerId });
    await waitFor(() => up(s), 'Established on the survivor');
    t.equal(s.peers()[0].remotePort, winner.sock.localPort, `the ${survivor} connection is the session`);
    // A further connection while Established (no graceful restart) is the one closed.
    const late = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2');
    await late.next('open');
    late.sendOpen({ bgpId: peerId });
    t.same(await late.notification(), { code: 6, subcode: 7, data: '' }, 'new connection vs Established: the new one goes');
    await sleep(50);
    t.ok(up(s) && !winner.closed, 'the Established session is untouched');
    await s.stop({ graceful: false });
    await srv.close();
  }
});

t.test('two speakers starting at once end up with exactly one connection', async (t) => {
  for (let i = 0; i < 4; i++) {
    const a = mk(1, 65001, [peer(2, 65002)]);
    const b = mk(2, 65002, [peer(1, 65001)]);
    await Promise.all([a.start(), b.start()]);
    await waitFor(() => up(a) && up(b), 'both Established', 10000);
    await sleep(300);
    const [pa, pb] = [a.peers()[0], b.peers()[0]];
    t.ok(pa.state === 'Established' && pb.state === 'Established', `run ${i}: still up`);
    t.equal(pa.localPort, pb.remotePort, `run ${i}: same connection on both sides`);
    t.equal(pa.remotePort, pb.localPort);
    await Promise.all([a.stop(), b.stop()]);
  }
});

t.test('graceful restart: helper keeps stale routes, the restarted peer re-sends, End-of-RIB sweeps', async (t) => {
  const a = mk(1, 65001, [peer(2, 65002)], { gracefulRestart: { restartTime: 120 } });
  const bCfg: SpeakerConfig = {
    asn: 65002, routerId: '10.0.0.2', listen: { address: '127.0.0.2', port: PORT }, gracefulRestart: { restartTime: 3 },
    peers: [peer(1, 65001)], announce: ['10.2.0.0/24', '10.2.1.0/24'],
  };
  const b = new Speaker(bCfg, { random: () => 0.5 });
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => best(a, '10.2.0.0/24') && best(a, '10.2.1.0/24'), 'routes learned');
  t.match(a.peers()[0].capabilities?.gracefulRestart, { restartTime: 3, restarting: false, forwarding: ['ipv4'] });
  const lost: string[] = [];
  a.rib.subscribe((batch: Iterable<RibChange>) => {
    for (const c of batch) if (c.type === 'withdraw') lost.push(formatPrefix(c.prefix));
  });

  // B dies without a word (as kill -9 would): A keeps its routes, marked stale.
  await b.stop({ graceful: false });
  await waitFor(() => a.peers()[0].state !== 'Established', 'A noticed');
  await sleep(100);
  t.same(plain(a, '10.2.0.0/24')?.stale, true, 'kept as stale');
  t.equal(a.peers()[0].prefixes.stale, 2);

  // B comes back as a restarting speaker (R bit) with one route fewer.
  const b2 = new Speaker({ ...bCfg, announce: ['10.2.0.0/24'] }, { random: () => 0.5, restarted: true });
  speakers.push(b2);
  await b2.start();
  await waitFor(() => up(a) && up(b2), 'back up', 10000);
  t.equal(a.peers()[0].capabilities?.gracefulRestart?.restarting, true, 'the R bit told A that B restarted');
  await waitFor(() => !best(a, '10.2.1.0/24'), 'the route B did not re-send is swept at End-of-RIB');
  t.same(plain(a, '10.2.0.0/24')?.stale, false, 'the re-sent route is fresh');
  t.same(lost, ['10.2.1.0/24'], '10.2.0.0/24 was never withdrawn during the restart');
  t.equal(a.peers()[0].prefixes.stale, 0);

  // Dies again and stays away: the routes go when its restart time (3 s) passes.
  await b2.stop({ graceful: false });
  await waitFor(() => a.peers()[0].state !== 'Established', 'A noticed again');
  t.same(plain(a, '10.2.0.0/24')?.stale, true);
  const t0 = Date.now();
  await waitFor(() => !best(a, '10.2.0.0/24'), 'restart time passed', 6000);
  t.ok(Date.now() - t0 > 2000, 'not before the restart time');

  // A graceful stop (Cease) is not a restart: routes go at once.
  const b3 = new Speaker({ ...bCfg, announce: ['10.2.5.0/24'] }, { random: () => 0.5 });
  speakers.push(b3);
  await b3.start();
  await waitFor(() => best(a, '10.2.5.0/24'), 'b3 route');
  await b3.stop();
  await waitFor(() => !best(a, '10.2.5.0/24'), 'withdrawn at once on Cease', 1000);
  t.match(a.peers()[0].lastError, /Administrative Shutdown \(6\/2\): "speaker stopping"/);
});

t.test('graceful restart: a new OPEN while the old session is Established means the peer restarted', async (t) => {
  const s = mk(1, 65001, [peer(2, 65002, { passive: true })], { gracefulRestart: { restartTime: 120 } });
  await s.start();
  const gr = (restarting: boolean) => [
    ...defaultCaps(65002, ['ipv4']),
    { kind: 'graceful-restart' as const, restarting, notification: false, restartTime: 60, families: [{ afi: 1, safi: 1, forwarding: true }] },
  ];
  const first = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2');
  first.sendOpen({ capabilities: gr(false) });
  first.keepalive();
  await waitFor(() => up(s), 'up');
  const attrs = makeAttrs({ asPath: [asSequence(65002)], nextHop: parseIP('127.0.0.2') });
  first.send(...encodeUpdates(attrs, [parsePrefix('10.8.0.0/24'), parsePrefix('10.8.1.0/24')]));
  await waitFor(() => best(s, '10.8.1.0/24'), 'routes in');

  // The peer restarted, and its old TCP connection is still open from our side.
  const second = await RawPeer.connect(PORT, '127.0.0.1', '127.0.0.2');
  await second.next('open');
  second.sendOpen({ capabilities: gr(true) });
  second.keepalive();
  await first.closedP;
  t.notOk(first.received.some((r) => r.msg?.type === 'notification'), 'old session closed without NOTIFICATION');
  await waitFor(() => up(s), 'new session up');
  t.same(plain(s, '10.8.1.0/24')?.stale, true, 'routes kept as stale');
  second.send(...encodeUpdates(attrs, [parsePrefix('10.8.0.0/24')]), encodeEndOfRib());
  await waitFor(() => !best(s, '10.8.1.0/24'), 'swept at End-of-RIB');
  t.same(plain(s, '10.8.0.0/24')?.stale, false);
});

t.test('route refresh from the peer re-sends the Adj-RIB-Out of that family; End-of-RIB after the table', async (t) => {
  const srv = await RawServer.listen('127.0.0.2', PORT);
  t.teardown(() => srv.close());
  const s = mk(1, 65001, [peer(2, 65002, { families: ['ipv4', 'ipv6'] })], { announce: ['10.1.0.0/24', '10.1.1.0/24', 'fd00:1::/64'] });
  await s.start();
  const raw = await srv.accepted();
  await raw.establish();
  const nlriOf = (from: number) => raw.received.slice(from).flatMap((r) => {
    const m = r.msg as UpdateMessage | null;
    if (m?.type !== 'update') return [];
    return [...prefixesOf(m.nlri), ...(m.mpReach ? prefixesOf(m.mpReach.nlri) : [])].map(formatPrefix);
  });
  const eors = (from: number) => raw.received.slice(from).filter((r) => r.raw.equals(encodeEndOfRib(1, 1)) || r.raw.equals(encodeEndOfRib(2, 1))).length;
  await raw.until(() => eors(0) === 2, 5000, 'End-of-RIB for both families');
  t.same(nlriOf(0).sort(), ['10.1.0.0/24', '10.1.1.0/24', 'fd00:1::/64']);
  const lastUpdate = raw.received.map((r) => r.msg?.type).lastIndexOf('update');
  t.ok(raw.received[lastUpdate].raw.equals(encodeEndOfRib(2, 1)) || raw.received[lastUpdate].raw.equals(encodeEndOfRib(1, 1)), 'End-of-RIB comes after the routes');
  const mark = raw.received.length;
  raw.send(encodeRouteRefresh(1, 1));
  await raw.until(() => nlriOf(mark).length === 2, 5000, 'refresh answered');
  await sleep(100);
  t.same(nlriOf(mark).sort(), ['10.1.0.0/24', '10.1.1.0/24'], 'IPv4 only, all of it');
});

t.test('an UPDATE flood respects socket backpressure', async (t) => {
  const srv = await RawServer.listen('127.0.0.2', PORT);
  t.teardown(() => srv.close());
  // ~8.5 MB of UPDATEs (one per prefix: distinct MEDs, 200-AS paths), well past what the kernel buffers.
  const N = 10_000;
  const s = mk(1, 65001, [peer(2, 65002, { families: ['ipv4'] })]);
  const longPath = [asSequence(...Array.from({ length: 200 }, (_, i) => 64600 + i))];
  for (let i = 0; i < N; i++) s.announce(new Prefix(4, (0x14000000 + i) >>> 0, 0, 0, 0, 32), { asPath: longPath, med: i });
  await s.start();
  const raw = await srv.accepted();
  await raw.next('open');
  raw.sendOpen({ capabilities: defaultCaps(65002, ['ipv4']) });
  raw.keepalive();
  raw.sock.pause(); // stop reading: the kernel buffers fill, then ours
  await waitFor(() => up(s), 'up');
  await sleep(1000);
  const q = s.peers()[0].sendQueue;
  t.ok(q.bytes < 512 * 1024, `socket buffer bounded (${q.bytes} octets)`);
  t.ok(q.prefixes > 0, `the rest waits unencoded (${q.prefixes} prefixes)`);
  let got = 0;
  raw.sock.on('data', () => {});
  raw.sock.resume();
  await raw.until((rs) => {
    got = 0;
    for (const r of rs) if (r.msg?.type === 'update') got += r.msg.nlri.count;
    return rs.some((r) => r.raw.equals(encodeEndOfRib(1, 1)));
  }, 30000, 'End-of-RIB after the flood');
  t.equal(got, N, 'every prefix arrived');
  t.same(s.peers()[0].sendQueue, { prefixes: 0, bytes: 0 });
  t.equal(s.peers()[0].prefixes.sent, N);
});


t.test('IPv6 transport: the session address is the IPv6 next hop', async (t) => {
  const [pa, pb] = [await freePort('::1'), await freePort('::1')];
  const a = new Speaker({ asn: 65001, routerId: '10.0.0.1', listen: { address: '::1', port: pa }, peers: [{ address: '::1', asn: 65002, port: pb, families: ['ipv6', 'ipv4'] }], announce: ['fd00:1::/48', '10.1.0.0/24'] }, { random: () => 0.5 });
  const b = new Speaker({ asn: 65002, routerId: '10.0.0.2', listen: { address: '::1', port: pb }, peers: [{ address: '::1', asn: 65001, port: pa, families: ['ipv6'] }] }, { random: () => 0.5 });
  speakers.push(a, b);
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => best(b, 'fd00:1::/48'), 'IPv6 route over an IPv6 session');
  t.same(plain(b, 'fd00:1::/48'), { from: '::1', asPath: [65001], nextHop: '::1', localPref: undefined, med: undefined, stale: false });
  t.same(a.peers()[0].capabilities?.families, ['ipv6'], 'only the common family');
  t.notOk(best(b, '10.1.0.0/24'), 'IPv4 not negotiated: not sent');
});

t.test('prefix lists: exact, ge, le, first match wins, no match rejects', async (t) => {
  const { PrefixFilter, PrefixListError, compilePrefixList } = await import('../../src/bgp/prefix-filter.ts');
  const f = new PrefixFilter([
    { prefix: '10.0.9.0/24', action: 'reject' },
    { prefix: '10.0.0.0/16', le: 24 },
    { prefix: '10.1.0.0/16', ge: 24 },
    { prefix: '10.2.0.0/16', ge: 20, le: 22 },
    { prefix: '10.3.0.0/24' },
    { prefix: 'fd00::/8', le: 64 },
  ]);
  const cases: [string, boolean][] = [
    ['10.0.9.0/24', false], ['10.0.9.0/25', false], ['10.0.8.0/24', true], ['10.0.0.0/16', true], ['10.0.0.0/25', false],
    ['10.1.0.0/16', false], ['10.1.2.0/24', true], ['10.1.2.3/32', true],
    ['10.2.0.0/19', false], ['10.2.0.0/20', true], ['10.2.4.0/22', true], ['10.2.4.0/23', false],
    ['10.3.0.0/24', true], ['10.3.0.0/25', false], ['10.3.1.0/24', false],
    ['fd00:1::/64', true], ['fd00:1::/65', false], ['2001:db8::/32', false], ['0.0.0.0/0', false],
  ];
  for (const [p, want] of cases) t.equal(f.accepts(parsePrefix(p)), want, `${p} ${want ? 'accepted' : 'rejected'}`);
  t.equal(compilePrefixList(undefined), null, 'no list: accept all');
  t.equal(compilePrefixList([])!.accepts(parsePrefix('10.0.0.0/8')), false, 'empty list: reject all');
  for (const bad of [{ prefix: '10.0.0.0/16', le: 8 }, { prefix: '10.0.0.0/16', ge: 33 }, { prefix: '10.0.0.0/16', ge: 24, le: 20 }, { prefix: '10.0.0.1/16' }, { prefix: '10.0.0.0/16', action: 'permit' as never }]) {
    t.throws(() => new PrefixFilter([bad]), PrefixListError, JSON.stringify(bad));
  }
  t.throws(() => new Speaker({ asn: 1, routerId: '1.1.1.1', listen: false, peers: [{ address: '10.0.0.1', asn: 2, import: [{ prefix: 'nonsense' }] }] }), /prefix list/, 'a bad list fails at construction');
});
