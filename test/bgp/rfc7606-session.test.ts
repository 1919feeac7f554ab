// RFC 7606 / RFC 4724 defects checked on the wire: a speaker of ours against a raw peer that sends exact bytes.
// 1. A treat-as-withdraw UPDATE without NLRI is not End-of-RIB: stale routes stay until the real End-of-RIB.
// 2. AS_CONFED_* segments in an AS_PATH from an eBGP peer are malformed: treat-as-withdraw, session stays up.
import t from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerConfig, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { Afi, DecodeScratch, Safi, decodeMessage, endOfRib, type Capability, type UpdateMessage } from '../../src/bgp/codec/index.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { AsPathCache, hashBytes } from '../../src/bgp/codec/aspaths.ts';
import { RawServer, defaultCaps, freePort, rawUpdate, waitFor, type RawPeer } from './raw-peer.ts';

let PORT = 0;
t.before(async () => {
  PORT = await freePort();
});

const cleanups: (() => Promise<void>)[] = [];
t.afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** A speaker on 127.0.0.1 (AS 65001) with one peer, a raw server on 127.0.0.2 standing in for it. */
async function setup(peerAsn: number, extra: Partial<SpeakerPeerConfig> = {}, cfg: Partial<SpeakerConfig> = {}) {
  const srv = await RawServer.listen('127.0.0.2', PORT);
  const s = new Speaker(
    { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port: PORT }, peers: [{ address: '127.0.0.2', asn: peerAsn, port: PORT, idleHold: 1, ...extra }], ...cfg },
    { random: () => 0.5 },
  );
  cleanups.push(async () => {
    await s.stop({ graceful: false });
    await srv.close();
  });
  await s.start();
  return { s, srv };
}

// ---- raw UPDATE bytes ---------------------------------------------------------------------------------------------

const update = rawUpdate;
const asn4 = (a: number) => [(a >>> 24) & 255, (a >>> 16) & 255, (a >>> 8) & 255, a & 255];
const ORIGIN_IGP = [0x40, 1, 1, 0];
const ORIGIN_BAD = [0x40, 1, 1, 5]; // undefined ORIGIN value: treat-as-withdraw (RFC 7606 7.1)
const asPath = (...segs: [type: number, asns: number[]][]) => {
  const v = segs.flatMap(([type, asns]) => [type, asns.length, ...asns.flatMap(asn4)]);
  return [0x40, 2, v.length, ...v];
};
const NEXT_HOP_2 = [0x40, 3, 4, 127, 0, 0, 2];
const EMPTY_MP_UNREACH_V6 = [0x80, 15, 3, 0, 2, 1];
const nlri24 = (a: number, b: number, c: number) => [24, a, b, c];

const stateOf = (s: Speaker) => s.peers()[0];
const has = (s: Speaker, p: string) => s.rib.best(parsePrefix(p));

function grCap(restarting: boolean): Capability {
  return {
    kind: 'graceful-restart', restarting, notification: false, restartTime: 120,
    families: [{ afi: Afi.IPV4, safi: Safi.UNICAST, forwarding: true }, { afi: Afi.IPV6, safi: Safi.UNICAST, forwarding: true }],
  };
}

t.test('codec: End-of-RIB only without attributes; confederation segments from outside are malformed', async (t) => {
  const eor = (b: Buffer) => {
    const r = decodeMessage(b);
    return r.action === 'notification' ? 'notification' : { action: r.action, eor: endOfRib(r.message as UpdateMessage) };
  };
  t.same(eor(update([], [], [])), { action: 'ok', eor: { afi: 1, safi: 1 } }, 'empty UPDATE: IPv4 End-of-RIB');
  t.same(eor(update([], EMPTY_MP_UNREACH_V6, [])), { action: 'ok', eor: { afi: 2, safi: 1 } }, 'only an empty MP_UNREACH: IPv6 End-of-RIB');
  t.same(eor(update([], [...ORIGIN_BAD, ...asPath([2, [65002]])], [])), { action: 'treat-as-withdraw', eor: null }, 'malformed ORIGIN, no NLRI: not End-of-RIB');
  t.same(eor(update([], [...EMPTY_MP_UNREACH_V6, ...ORIGIN_BAD], [])), { action: 'treat-as-withdraw', eor: null }, 'empty MP_UNREACH beside a malformed ORIGIN: not End-of-RIB');
  t.same(eor(update([], [...EMPTY_MP_UNREACH_V6, 0x40, 1, 1], [])), { action: 'treat-as-withdraw', eor: null }, 'empty MP_UNREACH beside a truncated attribute: not End-of-RIB');
  t.same(eor(update([], [...EMPTY_MP_UNREACH_V6, ...ORIGIN_IGP], [])), { action: 'ok', eor: null }, 'empty MP_UNREACH beside a valid ORIGIN: not End-of-RIB');

  const confed = update([], [...ORIGIN_IGP, ...asPath([3, [64512]], [2, [65002]]), ...NEXT_HOP_2], nlri24(10, 7, 0));
  for (const scratch of [undefined, new DecodeScratch()]) {
    for (const fourOctetAs of [true, false]) {
      const bytes = fourOctetAs ? confed : update([], [...ORIGIN_IGP, 0x40, 2, 8, 3, 1, 0xfc, 0, 2, 1, 0xfd, 0xea, ...NEXT_HOP_2], nlri24(10, 7, 0));
      const what = `${fourOctetAs ? '4' : '2'}-octet${scratch ? ', path cache' : ''}`;
      const ext = decodeMessage(bytes, { external: true, fourOctetAs, scratch });
      t.equal(ext.action, 'treat-as-withdraw', `eBGP, ${what}: treat-as-withdraw`);
      if (ext.action === 'treat-as-withdraw') t.match(ext.problems, [{ attrType: 2, action: 'withdraw', code: 3, subcode: 11 }], 'Malformed AS_PATH');
      t.equal(decodeMessage(bytes, { external: false, fourOctetAs, scratch }).action, 'ok', `iBGP, ${what}: accepted`);
    }
  }
});

t.test('RFC 4724/7606: a treat-as-withdraw UPDATE is not End-of-RIB; stale routes stay until the real one', async (t) => {
  const { s, srv } = await setup(65002, { families: ['ipv4', 'ipv6'] }, { gracefulRestart: { restartTime: 120 } });
  const announce = (p: RawPeer, ...nlri: number[][]) =>
    p.send(update([], [...ORIGIN_IGP, ...asPath([2, [65002]]), ...NEXT_HOP_2], nlri.flat()));

  const first = await srv.accepted(0);
  await first.establish({ asn: 65002, capabilities: [...defaultCaps(65002), grCap(false)] });
  announce(first, nlri24(10, 2, 0), nlri24(10, 2, 1), nlri24(10, 2, 2));
  await waitFor(() => stateOf(s).prefixes.accepted === 3, 'three routes learned');

  // The peer restarts without a word (as kill -9 would): its routes are kept, stale.
  first.close();
  await waitFor(() => stateOf(s).prefixes.stale === 3, 'routes held stale');

  const second = await srv.accepted(1, 10000);
  await second.establish({ asn: 65002, capabilities: [...defaultCaps(65002), grCap(true)] });
  await waitFor(() => stateOf(s).state === 'Established', 'back up');
  // It re-sends one route, then two UPDATEs with attributes but no NLRI whose ORIGIN is malformed (treat-as-
  // withdraw): one bare (the old code read it as the IPv4 End-of-RIB), one beside an empty MP_UNREACH_NLRI for
  // IPv6 (would have been the IPv6 End-of-RIB).
  announce(second, nlri24(10, 2, 0));
  second.send(update([], [...ORIGIN_BAD, ...asPath([2, [65002]]), ...NEXT_HOP_2], []));
  second.send(update([], [...EMPTY_MP_UNREACH_V6, ...ORIGIN_BAD], []));
  // A marker route after them: once it is in, both malformed UPDATEs have been processed (TCP keeps the order).
  announce(second, nlri24(10, 9, 9));
  await waitFor(() => has(s, '10.9.9.0/24'), 'marker route learned');
  t.equal(stateOf(s).state, 'Established', 'session stays Established (treat-as-withdraw, no NOTIFICATION)');
  t.equal(stateOf(s).errors.treatAsWithdraw, 2, 'both counted as treat-as-withdraw');
  t.equal(stateOf(s).prefixes.stale, 2, 'the two routes not re-sent are still held stale: no End-of-RIB yet');
  t.ok(has(s, '10.2.1.0/24') && has(s, '10.2.2.0/24'), 'stale routes still usable');
  t.equal(has(s, '10.2.0.0/24')?.stale, false, 'the re-sent route is fresh');

  // The real End-of-RIB of both families: an empty UPDATE, and one with only an empty MP_UNREACH_NLRI.
  second.send(update([], [], []), update([], EMPTY_MP_UNREACH_V6, []));
  await waitFor(() => stateOf(s).prefixes.stale === 0, 'stale routes swept at End-of-RIB');
  t.notOk(has(s, '10.2.1.0/24'), 'route not re-sent is gone');
  t.notOk(has(s, '10.2.2.0/24'));
  t.ok(has(s, '10.2.0.0/24') && has(s, '10.9.9.0/24'), 'the re-sent routes stay');
});

t.test('RFC 5065 5 / RFC 7606 7.2: confederation segments from an eBGP peer are treat-as-withdraw', async (t) => {
  const { s, srv } = await setup(65002);
  const p = await srv.accepted(0);
  await p.establish({ asn: 65002, capabilities: defaultCaps(65002, ['ipv4']) });
  await waitFor(() => stateOf(s).state === 'Established', 'Established');
  p.send(update([], [...ORIGIN_IGP, ...asPath([2, [65002]]), ...NEXT_HOP_2], [...nlri24(10, 7, 0), ...nlri24(10, 7, 1)]));
  await waitFor(() => stateOf(s).prefixes.accepted === 2, 'routes learned');
  // The same prefixes again, now with an AS_CONFED_SEQUENCE (3) and an AS_CONFED_SET (4) in front.
  p.send(update([], [...ORIGIN_IGP, ...asPath([3, [64512]], [2, [65002]]), ...NEXT_HOP_2], nlri24(10, 7, 0)));
  p.send(update([], [...ORIGIN_IGP, ...asPath([4, [64512, 64513]], [2, [65002]]), ...NEXT_HOP_2], nlri24(10, 7, 1)));
  await waitFor(() => stateOf(s).prefixes.received === 0, 'both withdrawn');
  t.notOk(has(s, '10.7.0.0/24'), 'AS_CONFED_SEQUENCE: prefix withdrawn');
  t.notOk(has(s, '10.7.1.0/24'), 'AS_CONFED_SET: prefix withdrawn');
  t.equal(stateOf(s).errors.treatAsWithdraw, 2);
  t.equal(stateOf(s).state, 'Established', 'the session stays Established');
  t.notOk(p.received.some((r) => r.msg?.type === 'notification'), 'no NOTIFICATION sent');
  // A plain path is accepted again afterwards.
  p.send(update([], [...ORIGIN_IGP, ...asPath([2, [65002]]), ...NEXT_HOP_2], nlri24(10, 7, 0)));
  await waitFor(() => has(s, '10.7.0.0/24'), 'accepted again');
});

t.test('iBGP: confederation segments are not an error from a peer inside the AS', async (t) => {
  const { s, srv } = await setup(65001);
  const p = await srv.accepted(0);
  await p.establish({ asn: 65001, capabilities: defaultCaps(65001, ['ipv4']) });
  await waitFor(() => stateOf(s).state === 'Established', 'Established');
  p.send(update([], [...ORIGIN_IGP, ...asPath([3, [64512]], [2, [65003]]), ...NEXT_HOP_2, 0x40, 5, 4, 0, 0, 0, 100], nlri24(10, 8, 0)));
  await waitFor(() => has(s, '10.8.0.0/24'), 'accepted');
  t.equal(stateOf(s).errors.treatAsWithdraw, 0);
});

t.test('AsPathCache is bounded in bytes too: long distinct paths (a hostile or fuzzing peer) empty it', async (t) => {
  const c = new AsPathCache();
  const path = Object.freeze([Object.freeze({ type: 2 as const, asns: Object.freeze([65002]) })]);
  const value = (i: number) => {
    const b = new Uint8Array(4000); // ~1,000 ASNs' worth of AS_PATH
    b[0] = i & 255;
    b[1] = (i >>> 8) & 255;
    return b;
  };
  let maxSize = 0;
  for (let i = 0; i < 5000; i++) {
    const b = value(i);
    c.add(b, 0, b.length, hashBytes(b, 0, b.length), path);
    maxSize = Math.max(maxSize, c.size);
  }
  t.ok(maxSize < 5000, `never more than ${maxSize} entries of 4,000 octets (8 MiB)`);
  t.ok(maxSize >= 2000, 'but still holds thousands');
  const last = value(4999);
  t.not(c.find(last, 0, last.length, hashBytes(last, 0, last.length)), -1, 'the newest is found');
});
