// The session adapter over real TCP on loopback, against a hand-driven peer: our OPEN and the negotiation, every
// check on the peer's OPEN, the exact NOTIFICATION (code, subcode, data) for each malformed or unexpected message,
// RFC 7606 treat-as-withdraw / attribute discard, keepalives and hold timer expiry.
import t, { type Test } from 'tap';
import { Session, type SessionConfig } from '../../src/bgp/session.ts';
import type { FsmConfig } from '../../src/bgp/fsm.ts';
import { encodeEndOfRib, encodeKeepalive, encodeRouteRefresh, type OpenMessage, type UpdateMessage } from '../../src/bgp/codec/index.ts';
import { prefixesOf } from '../../src/bgp/codec/nlri.ts';
import { formatPrefix } from '../../src/net/ip.ts';
import { AS_PATH, NEXT_HOP, NLRI, ORIGIN, attr, hex, msg, open, update } from './codec-helpers.ts';
import { RawServer, defaultCaps, sleep, waitFor, type RawPeer } from './raw-peer.ts';

const WELL = [ORIGIN, AS_PATH, NEXT_HOP];

function mkSession(port: number, over: Partial<SessionConfig> = {}, fsm: Partial<FsmConfig> = {}): Session {
  return new Session({
    peerAddress: '127.0.0.1',
    peerPort: port,
    peerAs: 65002,
    localAs: 65001,
    routerId: 0x01010101,
    families: ['ipv4', 'ipv6'],
    gracefulRestart: null,
    fsm: {
      holdTime: 90, connectRetryTime: 5, connectRetryMax: 120, idleHoldTime: 1, delayOpenTime: 0, passive: false,
      // No automatic restart: after an error the session stays down for the test to look at.
      autoRestart: false, random: () => 1, ...fsm,
    },
    ...over,
  });
}

/** A session connected to a fresh raw peer, and the peer. */
async function pair(t: Test, over: Partial<SessionConfig> = {}, fsm: Partial<FsmConfig> = {}): Promise<{ s: Session; peer: RawPeer }> {
  const srv = await RawServer.listen();
  const s = mkSession(srv.port, over, fsm);
  t.teardown(async () => {
    s.abort();
    await srv.close();
  });
  s.start();
  const peer = await srv.accepted();
  return { s, peer };
}

async function established(t: Test, over: Partial<SessionConfig> = {}, o: Partial<OpenMessage> & { asn?: number } = {}, fsm: Partial<FsmConfig> = {}) {
  const { s, peer } = await pair(t, over, fsm);
  const ours = await peer.establish(o);
  await waitFor(() => s.state === 'Established', 'Established');
  return { s, peer, ours };
}

t.test('our OPEN carries the configured capabilities', async (t) => {
  const { peer } = await pair(t);
  const o = (await peer.next('open')).msg as OpenMessage;
  t.equal(o.version, 4);
  t.equal(o.myAs, 65001);
  t.equal(o.holdTime, 90);
  t.equal(o.bgpId, 0x01010101);
  t.same(o.capabilities, [
    { kind: 'multiprotocol', afi: 1, safi: 1 },
    { kind: 'multiprotocol', afi: 2, safi: 1 },
    { kind: 'route-refresh' },
    { kind: 'four-octet-as', asn: 65001 },
    { kind: 'extended-message' },
  ]);

  const { peer: p2 } = await pair(t, {
    localAs: 4200000001, families: ['ipv6'], gracefulRestart: { restartTime: 120, restarting: true, forwarding: true },
  }, { holdTime: 0 });
  const o2 = (await p2.next('open')).msg as OpenMessage;
  t.equal(o2.myAs, 23456, '4-octet ASN: AS_TRANS in My Autonomous System (RFC 6793)');
  t.equal(o2.holdTime, 0);
  t.same(o2.capabilities.find((c) => c.kind === 'four-octet-as'), { kind: 'four-octet-as', asn: 4200000001 });
  t.same(o2.capabilities.find((c) => c.kind === 'graceful-restart'), {
    kind: 'graceful-restart', restarting: true, notification: false, restartTime: 120,
    families: [{ afi: 2, safi: 1, forwarding: true }],
  }, 'R and F bits after a restart (RFC 4724)');
});

t.test('negotiation: families, 4-octet AS, extended messages, graceful restart', async (t) => {
  const { s, peer } = await pair(t, { gracefulRestart: { restartTime: 90, restarting: false, forwarding: true } });
  const got: unknown[] = [];
  s.on('established', (n) => got.push(n));
  await peer.establish({
    capabilities: [
      ...defaultCaps(65002, ['ipv4']),
      { kind: 'graceful-restart', restarting: true, notification: false, restartTime: 33, families: [{ afi: 1, safi: 1, forwarding: true }] },
    ],
    holdTime: 30,
  });
  await waitFor(() => s.state === 'Established', 'Established');
  t.same(got, [{
    families: ['ipv4'], routeRefresh: true, fourOctetAs: true, extendedMessage: false,
    gracefulRestart: { restartTime: 33, restarting: true, forwarding: ['ipv4'] },
  }]);
  t.equal(s.fsm.holdTime, 30, 'hold time min(90, 30)');
  t.equal(s.fsm.keepaliveTime, 10);
  t.equal(s.remoteAddress, '127.0.0.1');

  // UPDATEs are delivered decoded.
  const ups: UpdateMessage[] = [];
  s.on('update', (m) => ups.push({ ...m, nlri: m.nlri }));
  const prefixes: string[] = [];
  s.on('update', (m) => prefixes.push(...prefixesOf(m.nlri).map(formatPrefix)));
  peer.send(update({ attrs: WELL, nlri: NLRI }));
  await waitFor(() => prefixes.length === 2, 'UPDATE delivered');
  t.same(prefixes, ['192.168.1.0/24', '10.1.0.0/16']);

  // No multiprotocol capability at all means IPv4 unicast (RFC 4760 8).
  const { s: s2, peer: p2 } = await pair(t, { families: ['ipv4'] });
  await p2.establish({ capabilities: [] });
  await waitFor(() => s2.state === 'Established', 'Established without capabilities');
  t.same(s2.negotiated, { families: ['ipv4'], routeRefresh: false, fourOctetAs: false, extendedMessage: false, gracefulRestart: null });
});

interface OpenRow {
  name: string;
  rfc: string;
  over?: Partial<SessionConfig>;
  send: (p: RawPeer) => void;
  expect: [code: number, subcode: number, data: string];
}

const openRows: OpenRow[] = [
  { name: 'peer AS differs from the configured one', rfc: '4271 6.2 Bad Peer AS', send: (p) => p.sendOpen({ asn: 65099 }), expect: [2, 2, 'fe4b'] },
  { name: 'peer AS differs (4-octet)', rfc: '4271 6.2, 6793', send: (p) => p.sendOpen({ asn: 4200000001 }), expect: [2, 2, 'fa56ea01'] },
  { name: 'hold time 1', rfc: '4271 6.2 Unacceptable Hold Time', send: (p) => p.send(open({ myAs: 65002, hold: 1, params: '0206 41040000fdea' })), expect: [2, 6, ''] },
  { name: 'hold time 2', rfc: '4271 6.2', send: (p) => p.send(open({ myAs: 65002, hold: 2 })), expect: [2, 6, ''] },
  { name: 'version 3', rfc: '4271 6.2 Unsupported Version Number (data: our version)', send: (p) => p.send(open({ version: 3, myAs: 65002 })), expect: [2, 1, '0004'] },
  { name: 'BGP Identifier 0', rfc: '4271 6.2, 6286 2.1', send: (p) => p.send(open({ myAs: 65002, id: 0 })), expect: [2, 3, ''] },
  {
    name: 'internal peer with our BGP Identifier', rfc: '6286 2.2', over: { peerAs: 65001 },
    send: (p) => p.sendOpen({ asn: 65001, bgpId: 0x01010101 }), expect: [2, 3, ''],
  },
  {
    name: 'no address family in common', rfc: '5492 5 Unsupported Capability (data: what we need)', over: { families: ['ipv4'] },
    send: (p) => p.sendOpen({ capabilities: defaultCaps(65002, ['ipv6']) }), expect: [2, 7, '010400010001'],
  },
  { name: 'unknown optional parameter type', rfc: '4271 6.2 Unsupported Optional Parameter', send: (p) => p.send(open({ myAs: 65002, params: '0100' })), expect: [2, 4, ''] },
];

t.test('checks on the peer OPEN: the exact NOTIFICATION, then close', async (t) => {
  for (const r of openRows) {
    const { s, peer } = await pair(t, r.over);
    await peer.next('open');
    r.send(peer);
    const n = await peer.notification();
    t.same([n.code, n.subcode, n.data], r.expect, `${r.name} (RFC ${r.rfc})`);
    await waitFor(() => s.state === 'Idle', `${r.name}: Idle`);
    t.match(s.lastError, /^sent NOTIFICATION OPEN Message Error/, `${r.name}: lastError`);
  }
});

interface MsgRow {
  name: string;
  rfc: string;
  /** Where the bad message is sent. */
  in: 'OpenSent' | 'OpenConfirm' | 'Established';
  bytes: Buffer;
  expect: [code: number, subcode: number, data: string];
}

const badMarker = msg(4);
badMarker[0] = 0;

const msgRows: MsgRow[] = [
  { name: 'bad marker', rfc: '4271 6.1 Connection Not Synchronized', in: 'OpenSent', bytes: badMarker, expect: [1, 1, ''] },
  { name: 'length 18', rfc: '4271 6.1 Bad Message Length (data: the length)', in: 'OpenSent', bytes: msg(4, '', 18), expect: [1, 2, '0012'] },
  { name: 'length 4097', rfc: '4271 6.1', in: 'Established', bytes: msg(2, Buffer.alloc(4078)), expect: [1, 2, '1001'] },
  { name: 'KEEPALIVE of length 20', rfc: '4271 6.1', in: 'Established', bytes: msg(4, '00'), expect: [1, 2, '0014'] },
  { name: 'message type 7', rfc: '4271 6.1 Bad Message Type (data: the type)', in: 'Established', bytes: msg(7, '00'), expect: [1, 3, '07'] },
  { name: 'KEEPALIVE before OPEN', rfc: '6608 subcode 1', in: 'OpenSent', bytes: msg(4), expect: [5, 1, ''] },
  { name: 'UPDATE before KEEPALIVE', rfc: '6608 subcode 2', in: 'OpenConfirm', bytes: update({ attrs: WELL, nlri: NLRI }), expect: [5, 2, ''] },
  { name: 'ROUTE-REFRESH before KEEPALIVE', rfc: '6608 subcode 2', in: 'OpenConfirm', bytes: encodeRouteRefresh(1, 1), expect: [5, 2, ''] },
  { name: 'OPEN in Established', rfc: '6608 subcode 3', in: 'Established', bytes: open({ myAs: 65002, id: 0x02020202 }), expect: [5, 3, ''] },
  {
    name: 'unrecognized well-known attribute', rfc: '4271 6.3 (data: the attribute)', in: 'Established',
    bytes: update({ attrs: [...WELL, attr(0x40, 99, 'aa')], nlri: NLRI }), expect: [3, 2, '406301aa'],
  },
  { name: 'NLRI prefix length 33', rfc: '4271 6.3 Invalid Network Field, 7606 5.3', in: 'Established', bytes: update({ attrs: WELL, nlri: '21 0a000000 00' }), expect: [3, 10, ''] },
  { name: 'attribute list overrun', rfc: '4271 6.3 Malformed Attribute List, 7606 3 b', in: 'Established', bytes: msg(2, '0000 0010 400101'), expect: [3, 1, ''] },
  {
    name: 'MP_REACH_NLRI with a 5-octet next hop', rfc: '7606 7.11 (session reset), 4271 6.3 Optional Attribute Error', in: 'Established',
    bytes: update({ attrs: [attr(0x80, 14, '0002 01 05 0102030405 00'), ORIGIN, AS_PATH] }), expect: [3, 9, '800e0a00020105010203040500'],
  },
  { name: 'ROUTE-REFRESH of length 24', rfc: '7313 5 (data: the message)', in: 'Established', bytes: msg(5, '0001 00 01 00'), expect: [7, 1, 'ffffffffffffffffffffffffffffffff0018050001000100'] },
];

t.test('malformed and unexpected messages: the exact NOTIFICATION, then close', async (t) => {
  for (const r of msgRows) {
    const { s, peer } = await pair(t);
    await peer.next('open');
    if (r.in !== 'OpenSent') {
      peer.sendOpen();
      await peer.next('keepalive');
      await waitFor(() => s.state === 'OpenConfirm', 'OpenConfirm');
    }
    if (r.in === 'Established') {
      peer.keepalive();
      await waitFor(() => s.state === 'Established', 'Established');
    }
    peer.send(r.bytes);
    const n = await peer.notification();
    t.same([n.code, n.subcode, n.data], r.expect, `${r.name} in ${r.in} (RFC ${r.rfc})`);
    await waitFor(() => s.state === 'Idle', `${r.name}: Idle`);
  }
});

t.test('a NOTIFICATION, even a malformed one, is never answered', async (t) => {
  const { s, peer } = await established(t);
  peer.send(msg(3, '06')); // 20 octets: shorter than a NOTIFICATION can be
  await peer.closedP;
  t.notOk(peer.received.some((r) => r.msg?.type === 'notification'), 'nothing sent back');
  await waitFor(() => s.state === 'Idle', 'Idle');

  const { s: s2, peer: p2 } = await established(t);
  p2.send(msg(3, '0602 0474657374')); // Cease / Administrative Shutdown "test" (RFC 9003)
  await p2.closedP;
  t.notOk(p2.received.some((r) => r.msg?.type === 'notification'));
  await waitFor(() => s2.state === 'Idle', 'Idle');
  t.equal(s2.lastError, 'received NOTIFICATION Cease / Administrative Shutdown (6/2): "test"');
});

t.test('RFC 7606: treat-as-withdraw and attribute discard keep the session and are counted', async (t) => {
  const { s, peer } = await established(t);
  const seen: { action: string; prefixes: string[]; attrs: boolean }[] = [];
  s.on('update', (m, action) => seen.push({ action, prefixes: prefixesOf(m.nlri).map(formatPrefix), attrs: m.attrs !== null }));
  // ORIGIN value 3: treat-as-withdraw (7606 7.1).
  peer.send(update({ attrs: [attr(0x40, 1, '03'), AS_PATH, NEXT_HOP], nlri: NLRI }));
  // AGGREGATOR of length 5: attribute discard (7606 7.7).
  peer.send(update({ attrs: [...WELL, attr(0xc0, 7, '0000fde90a')], nlri: '18 0a0200' }));
  await waitFor(() => seen.length === 2, 'both UPDATEs delivered');
  t.same(seen, [
    { action: 'treat-as-withdraw', prefixes: ['192.168.1.0/24', '10.1.0.0/16'], attrs: false },
    { action: 'attribute-discard', prefixes: ['10.2.0.0/24'], attrs: true },
  ]);
  t.equal(s.counters.treatAsWithdraw, 1);
  t.equal(s.counters.attributeDiscard, 1);
  t.equal(s.state, 'Established');
  t.notOk(peer.received.some((r) => r.msg?.type === 'notification'));
});

t.test('a short read of UPDATEs pauses reading for a moment; nothing is lost, and other messages do not pause it', async (t) => {
  const { s, peer } = await established(t);
  const got: string[] = [];
  s.on('update', (m) => got.push(...prefixesOf(m.nlri).map(formatPrefix)));
  const pauses0 = s.counters.readPauses;
  peer.send(encodeKeepalive());
  await sleep(20);
  t.equal(s.counters.readPauses, pauses0, 'a KEEPALIVE alone: no pause');
  // Each UPDATE its own write, 5 ms apart: short reads, each followed by a pause of 1 ms.
  const want: string[] = [];
  for (let i = 0; i < 5; i++) {
    peer.send(update({ attrs: WELL, nlri: `18 0a0${i}00` }));
    want.push(`10.${i}.0.0/24`);
    await sleep(5);
  }
  await waitFor(() => got.length === want.length, 'every UPDATE delivered');
  t.same(got, want, 'in order, none lost');
  const pauses = s.counters.readPauses - pauses0;
  t.ok(pauses >= 1 && pauses <= 5, `reading paused after the short reads of UPDATEs (${pauses} times)`);
  // Reading resumed: a later message still arrives.
  peer.send(update({ attrs: WELL, nlri: '18 0a0900' }));
  await waitFor(() => got.length === want.length + 1, 'the UPDATE after the pauses delivered');
  t.equal(s.state, 'Established');
});

t.test('keepalives every hold/3, and Hold Timer Expired when the peer goes quiet', async (t) => {
  const { s, peer } = await established(t, {}, { holdTime: 3 });
  t.equal(s.fsm.holdTime, 3);
  const start = Date.now();
  const kaBefore = peer.received.filter((r) => r.msg?.type === 'keepalive').length;
  // The peer sends nothing more.
  const n = await peer.notification(6000);
  const elapsed = Date.now() - start;
  t.same([n.code, n.subcode, n.data], [4, 0, ''], 'Hold Timer Expired (RFC 4271 6.5)');
  t.ok(elapsed >= 2800 && elapsed < 4500, `expired after ~3 s (${elapsed} ms)`);
  const ka = peer.received.filter((r) => r.msg?.type === 'keepalive').length - kaBefore;
  t.ok(ka >= 2, `sent ${ka} keepalives in the meantime (every 1 s)`);
  await waitFor(() => s.state === 'Idle', 'Idle');
  t.match(s.lastError, /Hold Timer Expired/);
});

t.test('our keepalives keep a session with hold time 3 alive', async (t) => {
  const { s, peer } = await established(t, {}, { holdTime: 3 });
  const iv = setInterval(() => peer.keepalive(), 900);
  t.teardown(() => clearInterval(iv));
  await sleep(4000);
  t.equal(s.state, 'Established');
});

t.test('route refresh: negotiated families are delivered, others ignored', async (t) => {
  const { s, peer } = await established(t, { families: ['ipv4'] });
  const got: string[] = [];
  s.on('routeRefresh', (f) => got.push(f));
  peer.send(encodeRouteRefresh(2, 1)); // IPv6: not negotiated, ignored (RFC 2918 4)
  peer.send(encodeRouteRefresh(1, 1));
  await waitFor(() => got.length === 1, 'refresh delivered');
  await sleep(50);
  t.same(got, ['ipv4']);
  t.equal(s.state, 'Established');
  // End-of-RIB goes out as an empty UPDATE for IPv4 (RFC 4724 2).
  s.sendEndOfRib('ipv4');
  const eor = await peer.next('update');
  t.same(eor.raw, encodeEndOfRib(1, 1));
});

t.test('DelayOpen: our OPEN waits for the peer (RFC 4271 event 20)', async (t) => {
  const { s, peer } = await pair(t, {}, { delayOpenTime: 2 });
  await sleep(300);
  t.equal(peer.received.length, 0, 'nothing sent yet');
  peer.sendOpen();
  await peer.next('open');
  await peer.next('keepalive');
  await waitFor(() => s.state === 'OpenConfirm', 'OpenConfirm');
  peer.keepalive();
  await waitFor(() => s.state === 'Established', 'Established');
});

t.test('ManualStop sends Cease with the shutdown communication', async (t) => {
  const { s, peer } = await established(t);
  s.stop({ code: 6, subcode: 2, data: hex('0362796520') .subarray(0, 4) });
  const n = await peer.notification();
  t.same([n.code, n.subcode, n.data], [6, 2, '03627965']);
  await s.whenClosed();
  t.equal(s.state, 'Idle');
});

t.test('a failing update handler resets the session instead of crashing the process', async (t) => {
  const { s, peer } = await established(t);
  s.on('update', () => {
    throw new Error('boom');
  });
  peer.send(update({ attrs: WELL, nlri: NLRI }));
  const n = await peer.notification();
  t.same([n.code, n.subcode], [6, 0], 'Cease');
  await waitFor(() => s.state === 'Idle', 'Idle');
});
