import t from 'tap';
import { deepStrictEqual } from 'node:assert/strict';
import fc from 'fast-check';
import { IP, parseIP, parsePrefix } from '../../src/net/ip.ts';
import { asSequence, asSet, attrsEqual, makeAttrs, SegmentType } from '../../src/rib/attrs.ts';
import {
  decodeMessage, encodeEndOfRib, encodeKeepalive, encodeMessage, encodeNotification, encodeOpen, encodeRouteRefresh,
  encodeUpdate, encodeUpdates, encodeWithdrawals, endOfRib, forEachPrefix, Framer, negotiatedOptions, peerAsOf,
  prefixesOf, reconstructAsPath, routeChanges, shutdownData, shutdownMessage, DecodeScratch, describeStream, parseHex,
  type DecodeResult, type Message, type UpdateMessage,
} from '../../src/bgp/codec/index.ts';
import {
  AS_PATH2, NEXT_HOP, ORIGIN, attr, attrs6, hex, openMessage, otherMessage, plainMessage, plainUpdate,
  prefix4, prefix6, update, updateInput,
} from './codec-helpers.ts';

const RUNS = 200;

function ok(r: DecodeResult): Message {
  if (r.action !== 'ok') throw new Error(`expected ok, got ${JSON.stringify({ ...r, message: undefined })}`);
  return r.message;
}

// ---- round trips --------------------------------------------------------------------------------------------

for (const fourOctetAs of [true, false]) {
  const opts = { fourOctetAs, extendedMessage: true };
  t.test(`UPDATE round trip, ${fourOctetAs ? '4' : '2'}-octet AS session`, async (t) => {
    fc.assert(
      fc.property(updateInput(fourOctetAs), (u) => {
        const bytes = encodeUpdate(u, opts);
        const m = ok(decodeMessage(bytes, opts)) as UpdateMessage;
        deepStrictEqual(plainUpdate(m), plainUpdate(u), 'decode(encode(m)) == m');
        if (m.attrs && u.attrs && !attrsEqual(m.attrs, u.attrs)) throw new Error('attrsEqual');
        const again = encodeUpdate(m, opts);
        if (!again.equals(bytes)) throw new Error(`encode(decode(x)) != x\n${bytes.toString('hex')}\n${again.toString('hex')}`);
      }),
      { numRuns: RUNS },
    );
    t.pass(`${RUNS} UPDATEs`);
  });
}

t.test('OPEN, NOTIFICATION, KEEPALIVE, ROUTE-REFRESH round trip', async (t) => {
  fc.assert(
    fc.property(fc.oneof(openMessage, otherMessage), (m) => {
      const bytes = encodeMessage(m);
      const d = ok(decodeMessage(bytes));
      deepStrictEqual(plainMessage(d), plainMessage(m));
      if (!encodeMessage(d).equals(bytes)) throw new Error('encode(decode(x)) != x');
    }),
    { numRuns: RUNS },
  );
  t.pass(`${RUNS} messages`);
});

t.test('OPEN with many capabilities uses the RFC 9072 extended parameter length', async (t) => {
  const caps = Array.from({ length: 40 }, (_, i) => ({ kind: 'unknown' as const, code: 100 + i, value: new Uint8Array(8) }));
  const bytes = encodeOpen({ myAs: 65001, holdTime: 90, bgpId: 1, capabilities: caps });
  t.equal(bytes[28], 255, 'Non-Ext OP Len');
  t.equal(bytes[29], 255, 'Non-Ext OP Type');
  const m = ok(decodeMessage(bytes));
  t.same(plainMessage(m), plainMessage({ type: 'open', version: 4, myAs: 65001, holdTime: 90, bgpId: 1, capabilities: caps }));
});

t.test('every attribute survives a round trip on its own', async (t) => {
  const nh = parseIP('192.0.2.1');
  const base = { nextHop: nh, asPath: [asSequence(65001)] };
  const cases = {
    ORIGIN: { origin: 2 as const },
    AS_PATH: { asPath: [{ type: SegmentType.AS_CONFED_SEQUENCE, asns: [64512] }, asSequence(1, 70000), asSet(5, 4)] },
    MULTI_EXIT_DISC: { med: 0xffffffff },
    LOCAL_PREF: { localPref: 200 },
    ATOMIC_AGGREGATE: { atomicAggregate: true },
    AGGREGATOR: { aggregator: { asn: 4200000000, address: parseIP('192.0.2.9') } },
    COMMUNITIES: { communities: [0xffffff01, 0x10002] },
    EXTENDED_COMMUNITIES: { extCommunities: [[0x0002fde9, 100]] as [number, number][] },
    LARGE_COMMUNITY: { largeCommunities: [[4200000000, 1, 2]] as [number, number, number][] },
    ORIGINATOR_ID: { originatorId: 0x0a000009 },
    CLUSTER_LIST: { clusterList: [1, 2, 3] },
    unknown: { unknown: [{ flags: 0xe0, type: 99, value: new Uint8Array(400).fill(7) }] },
  };
  for (const [name, extra] of Object.entries(cases)) {
    for (const fourOctetAs of [true, false]) {
      const a = makeAttrs({ ...base, ...extra });
      const [bytes] = encodeUpdates(a, [parsePrefix('10.0.0.0/8')], { fourOctetAs });
      const m = ok(decodeMessage(bytes, { fourOctetAs })) as UpdateMessage;
      t.ok(m.attrs && attrsEqual(m.attrs, a), `${name} (${fourOctetAs ? 4 : 2}-octet)`);
    }
  }
  const [b6] = encodeUpdates(makeAttrs({ ...base, nextHop: parseIP('2001:db8::1'), nextHopLinkLocal: parseIP('fe80::1') }), [parsePrefix('2001:db8::/32')]);
  const m6 = ok(decodeMessage(b6)) as UpdateMessage;
  t.equal(m6.mpReach?.nextHop?.toString(), '2001:db8::1', 'MP_REACH_NLRI global next hop');
  t.equal(m6.mpReach?.nextHopLinkLocal?.toString(), 'fe80::1', 'and link-local (32-octet next hop)');
  t.equal(m6.attrs?.nextHopLinkLocal?.toString(), 'fe80::1', 'attrs carry the MP next hops');
});

t.test('an unknown optional transitive attribute is passed on with the Partial bit set', async (t) => {
  const bytes = update({ attrs: [ORIGIN, attr(0x40, 2, ''), NEXT_HOP, attr(0xc0, 200, 'abcd')], nlri: '08 0a' });
  const m = ok(decodeMessage(bytes)) as UpdateMessage;
  t.same(m.attrs!.unknown.map((u) => [u.flags, u.type, Buffer.from(u.value).toString('hex')]), [[0xe0, 200, 'abcd']]);
  const out = encodeUpdate(m);
  t.ok(out.includes(hex('e0 c8 02 abcd')), 'sent with flags 0xe0');
});

// ---- RFC 6793 AS4_PATH / AS4_AGGREGATOR -----------------------------------------------------------------------

t.test('AS4_PATH reconstruction (RFC 6793 4.2.3)', async (t) => {
  const seq = (...a: number[]) => ({ type: SegmentType.AS_SEQUENCE, asns: a });
  const set = (...a: number[]) => ({ type: SegmentType.AS_SET, asns: a });
  const cseq = (...a: number[]) => ({ type: SegmentType.AS_CONFED_SEQUENCE, asns: a });
  t.same(reconstructAsPath([seq(65001, 23456, 23456)], [seq(4200000001, 4200000002)]), [seq(65001), seq(4200000001, 4200000002)], 'NEW path behind one OLD hop');
  t.same(reconstructAsPath([seq(65010, 65001, 23456)], [seq(4200000001)]), [seq(65010, 65001), seq(4200000001)], 'two OLD speakers prepended');
  t.same(reconstructAsPath([seq(23456)], [seq(1, 2)]), [seq(23456)], 'AS4_PATH longer than AS_PATH is ignored');
  t.same(reconstructAsPath([seq(65010), set(23456, 23456)], [set(4200000001, 4200000002)]), [seq(65010), set(4200000001, 4200000002)], 'AS_SET counts one');
  t.same(reconstructAsPath([cseq(65100), seq(23456)], [seq(4200000001)]), [cseq(65100), seq(4200000001)], 'leading confed segments kept');

  // The same through the decoder, in a 2-octet session.
  const as4path = attr(0xc0, 17, '02 02 fa56ea01 fa56ea02');
  const asPath2 = attr(0x40, 2, '02 03 fde9 5ba0 5ba0');
  let m = ok(decodeMessage(update({ attrs: [ORIGIN, asPath2, NEXT_HOP, as4path], nlri: '08 0a' }), { fourOctetAs: false })) as UpdateMessage;
  t.same(m.attrs!.asPath, [asSequence(65001, 4200000001, 4200000002)]);

  // AGGREGATOR AS_TRANS + AS4_AGGREGATOR: the real aggregator comes from AS4_AGGREGATOR.
  const agg2 = attr(0xc0, 7, '5ba0 c0000201');
  const as4agg = attr(0xc0, 18, 'fa56ea05 c0000202');
  m = ok(decodeMessage(update({ attrs: [ORIGIN, asPath2, NEXT_HOP, agg2, as4path, as4agg], nlri: '08 0a' }), { fourOctetAs: false })) as UpdateMessage;
  t.same([m.attrs!.aggregator!.asn, m.attrs!.aggregator!.address.toString()], [4200000005, '192.0.2.2']);
  t.same(m.attrs!.asPath, [asSequence(65001, 4200000001, 4200000002)]);

  // AGGREGATOR that is not AS_TRANS: AS4_AGGREGATOR and AS4_PATH are both ignored.
  const aggOld = attr(0xc0, 7, 'fde9 c0000201');
  m = ok(decodeMessage(update({ attrs: [ORIGIN, asPath2, NEXT_HOP, aggOld, as4path, as4agg], nlri: '08 0a' }), { fourOctetAs: false })) as UpdateMessage;
  t.equal(m.attrs!.aggregator!.asn, 65001);
  t.same(m.attrs!.asPath, [asSequence(65001, 23456, 23456)]);

  // Encoding towards a 2-octet speaker: AS_TRANS in AS_PATH and AGGREGATOR, the truth in AS4_PATH / AS4_AGGREGATOR.
  const a = makeAttrs({ asPath: [asSequence(65001, 4200000001)], nextHop: parseIP('10.0.0.1'), aggregator: { asn: 4200000005, address: parseIP('192.0.2.2') } });
  const [bytes] = encodeUpdates(a, [parsePrefix('10.0.0.0/8')], { fourOctetAs: false });
  t.ok(bytes.includes(hex('40 02 06 02 02 fde9 5ba0')), 'AS_PATH with AS_TRANS');
  t.ok(bytes.includes(hex('c0 07 06 5ba0 c0000202')), 'AGGREGATOR with AS_TRANS');
  t.ok(bytes.includes(hex('c0 11 0a 02 02 0000fde9 fa56ea01')), 'AS4_PATH');
  t.ok(bytes.includes(hex('c0 12 08 fa56ea05 c0000202')), 'AS4_AGGREGATOR');
  const back = ok(decodeMessage(bytes, { fourOctetAs: false })) as UpdateMessage;
  t.ok(attrsEqual(back.attrs!, a));
  const [plain] = encodeUpdates(makeAttrs({ asPath: [asSequence(65001, 65002)], nextHop: parseIP('10.0.0.1') }), [parsePrefix('10.0.0.0/8')], { fourOctetAs: false });
  t.notOk(plain.includes(hex('c0 11')), 'no AS4_PATH when every ASN fits 2 octets');
});

// ---- packing ------------------------------------------------------------------------------------------------

t.test('encodeUpdates packs prefixes into as few messages as fit', async (t) => {
  fc.assert(
    fc.property(
      fc.boolean(),
      fc.boolean().chain((f) => fc.tuple(fc.constant(f), attrs6(f))),
      fc.array(prefix4, { maxLength: 3000 }),
      fc.array(prefix6, { maxLength: 1500 }),
      (ext, [fourOctetAs, a6], v4, v6) => {
        const opts = { extendedMessage: ext, fourOctetAs };
        const max = ext ? 65535 : 4096;
        const a4 = makeAttrs({ ...a6, nextHop: parseIP('10.9.8.7'), nextHopLinkLocal: null });
        const got4: string[] = [];
        const got6: string[] = [];
        const msgs = [...encodeUpdates(a4, v4, opts), ...encodeUpdates(a6, v6, opts)];
        let bytes4 = 0;
        let count4 = 0;
        for (const b of msgs) {
          if (b.length > max) throw new Error(`message of ${b.length}`);
          const m = ok(decodeMessage(b, opts)) as UpdateMessage;
          if (m.nlri.count) {
            count4++;
            bytes4 += b.length;
            if (!attrsEqual(m.attrs!, a4)) throw new Error('v4 attrs');
          }
          if (m.mpReach && !attrsEqual(m.attrs!, a6)) throw new Error('v6 attrs');
          got4.push(...prefixesOf(m.nlri).map(String));
          if (m.mpReach) got6.push(...prefixesOf(m.mpReach.nlri).map(String));
        }
        deepStrictEqual(got4, v4.map(String));
        deepStrictEqual(got6, v6.map(String));
        // Packed: all messages but the last are full enough that the next prefix (at most 5 octets) did not fit.
        if (count4 > 1 && bytes4 < (count4 - 1) * (max - 5)) throw new Error('v4 messages not packed');
      },
    ),
    { numRuns: 25 },
  );
  t.pass('packed');
});

t.test('withdrawals and End-of-RIB', async (t) => {
  const ps = Array.from({ length: 2000 }, (_, i) => parsePrefix(`10.${i >> 8}.${i & 255}.0/24`));
  const v6 = Array.from({ length: 900 }, (_, i) => parsePrefix(`2001:db8:${i.toString(16)}::/48`));
  const msgs = encodeWithdrawals([...ps, ...v6]);
  t.ok(msgs.length >= 3 && msgs.every((b) => b.length <= 4096));
  const w4: string[] = [];
  const w6: string[] = [];
  for (const b of msgs) {
    const m = ok(decodeMessage(b)) as UpdateMessage;
    t.equal(m.attrs, null);
    w4.push(...prefixesOf(m.withdrawn).map(String));
    if (m.mpUnreach) w6.push(...prefixesOf(m.mpUnreach.withdrawn).map(String));
  }
  t.same(w4, ps.map(String));
  t.same(w6, v6.map(String));
  t.same(endOfRib(ok(decodeMessage(encodeEndOfRib())) as UpdateMessage), { afi: 1, safi: 1 });
  t.same(endOfRib(ok(decodeMessage(encodeEndOfRib(2, 1))) as UpdateMessage), { afi: 2, safi: 1 });
  t.equal(endOfRib(ok(decodeMessage(msgs[0])) as UpdateMessage), null, 'a withdrawal is not End-of-RIB');
});

// ---- known answers (hand-written from the RFC field layouts) -----------------------------------------------

const MARKER = 'ffffffffffffffffffffffffffffffff';

t.test('known answer: KEEPALIVE is a bare 19-octet header (RFC 4271 4.4)', async (t) => {
  const k = hex(`${MARKER} 0013 04`);
  t.same(encodeKeepalive(), k);
  t.same(ok(decodeMessage(k)), { type: 'keepalive' });
});

t.test('known answer: OPEN with capabilities (RFC 4271 4.2, RFC 5492 4)', async (t) => {
  const bytes = hex(`${MARKER} 003d 01
    04 fde9 005a 0a000001 20
    02 1e
      01 04 0001 00 01
      01 04 0002 00 01
      02 00
      41 04 0000fde9
      40 06 8078 0001 01 80
      06 00`);
  const m = ok(decodeMessage(bytes));
  const want: Message = {
    type: 'open', version: 4, myAs: 65001, holdTime: 90, bgpId: 0x0a000001,
    capabilities: [
      { kind: 'multiprotocol', afi: 1, safi: 1 },
      { kind: 'multiprotocol', afi: 2, safi: 1 },
      { kind: 'route-refresh' },
      { kind: 'four-octet-as', asn: 65001 },
      { kind: 'graceful-restart', restarting: true, notification: false, restartTime: 120, families: [{ afi: 1, safi: 1, forwarding: true }] },
      { kind: 'extended-message' },
    ],
  };
  t.same(m, want);
  t.same(encodeMessage(want), bytes);
  t.equal(peerAsOf(m as never), 65001);
  t.same(negotiatedOptions(m as never, m as never), { fourOctetAs: true, extendedMessage: true });
});

t.test('known answer: UPDATE with ORIGIN, AS_PATH, NEXT_HOP and two NLRI (RFC 4271 4.3)', async (t) => {
  const bytes4 = hex(`${MARKER} 0032 02
    0000 0014
    40 01 01 00
    40 02 06 02 01 0000fde9
    40 03 04 0a000001
    18 c0a801 10 0a01`);
  const bytes2 = hex(`${MARKER} 0030 02
    0000 0012
    40 01 01 00
    40 02 04 02 01 fde9
    40 03 04 0a000001
    18 c0a801 10 0a01`);
  const a = makeAttrs({ origin: 0, asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1') });
  const prefixes = [parsePrefix('192.168.1.0/24'), parsePrefix('10.1.0.0/16')];
  t.same(encodeUpdates(a, prefixes, { fourOctetAs: true }), [bytes4]);
  t.same(encodeUpdates(a, prefixes, { fourOctetAs: false }), [bytes2]);
  for (const [b, fourOctetAs] of [[bytes4, true], [bytes2, false]] as const) {
    const m = ok(decodeMessage(b, { fourOctetAs })) as UpdateMessage;
    t.ok(attrsEqual(m.attrs!, a));
    t.same(prefixesOf(m.nlri).map(String), ['192.168.1.0/24', '10.1.0.0/16']);
  }
});

t.test('known answer: MP_REACH_NLRI for IPv6 with global and link-local next hop (RFC 4760 3, RFC 2545 3)', async (t) => {
  const bytes = hex(`${MARKER} 005c 02
    0000 0045
    80 0e 35 0002 01 20 20010db8000000000000000000000001 fe800000000000000000000000000001 00
      30 20010db80001  40 20010db800020003
    40 01 01 00
    40 02 06 02 01 0000fde9`);
  const m = ok(decodeMessage(bytes)) as UpdateMessage;
  t.same(plainUpdate(m), {
    withdrawn: [], nlri: [],
    attrs: (plainUpdate({ attrs: makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('2001:db8::1'), nextHopLinkLocal: parseIP('fe80::1') }) }) as { attrs: unknown }).attrs,
    mpReach: { afi: 2, safi: 1, nextHop: '2001:db8::1', nextHopLinkLocal: 'fe80::1', nlri: ['2001:db8:1::/48', '2001:db8:2:3::/64'] },
    mpUnreach: null,
  } as never);
  t.same(encodeUpdate(m), bytes);
});

t.test('known answer: NOTIFICATION, ROUTE-REFRESH, IPv6 End-of-RIB', async (t) => {
  const n = hex(`${MARKER} 001b 03 06 02 05 68656c6c6f`);
  t.same(encodeNotification(6, 2, shutdownData('hello')), n);
  const m = ok(decodeMessage(n));
  t.equal(shutdownMessage(m as never), 'hello', 'RFC 9003 shutdown communication');
  const rr = hex(`${MARKER} 0017 05 0002 00 01`);
  t.same(encodeRouteRefresh(2, 1), rr);
  t.same(ok(decodeMessage(rr)), { type: 'route-refresh', afi: 2, safi: 1, subtype: 0 });
  t.same(encodeEndOfRib(2, 1), hex(`${MARKER} 001d 02 0000 0006 80 0f 03 0002 01`));
  t.same(encodeEndOfRib(), hex(`${MARKER} 0017 02 0000 0000`));
});

t.test('NLRI trailing bits are ignored and prefixes come out masked (RFC 4271 4.3)', async (t) => {
  const m = ok(decodeMessage(update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP], nlri: '09 0aff 17 c0a8ff' }), { fourOctetAs: false })) as UpdateMessage;
  t.same(prefixesOf(m.nlri).map(String), ['10.128.0.0/9', '192.168.254.0/23']);
  const seen: string[] = [];
  forEachPrefix(hex('40 20010db8ffffffff 00'), 0, 10, 6, (w0, w1, w2, w3, len) => seen.push(`${new IP(6, w0, w1, w2, w3)}/${len}`));
  t.same(seen, ['2001:db8:ffff:ffff::/64', '::/0']);
});

t.test('a DecodeScratch hands out one link-local next hop object while it stays the same, and one rare-attributes object', async (t) => {
  const scratch = new DecodeScratch();
  const six = (ll: string, asn: number, p: string) => encodeUpdates(makeAttrs({ asPath: [asSequence(asn)], nextHop: parseIP('2001:db8::1'), nextHopLinkLocal: parseIP(ll) }), [parsePrefix(p)])[0];
  const decode = (b: Uint8Array) => (ok(decodeMessage(b, { scratch })) as UpdateMessage).attrs!;
  const rare = (a: unknown) => (a as { rareAttrs: unknown }).rareAttrs;
  const a = decode(six('fe80::1', 65001, '2001:db8:1::/48'));
  const b = decode(six('fe80::1', 65002, '2001:db8:2::/48'));
  const c = decode(six('fe80::2', 65002, '2001:db8:3::/48'));
  const d = decode(six('fe80::1', 65003, '2001:db8:4::/48'));
  t.equal(a.nextHopLinkLocal, b.nextHopLinkLocal, 'the same address: the same IP object');
  t.equal(rare(a), rare(b), 'and the same rare attributes');
  t.equal(c.nextHopLinkLocal?.toString(), 'fe80::2', 'another address is read, not the cached one');
  t.equal(d.nextHopLinkLocal?.toString(), 'fe80::1', 'and back again');
  t.not(rare(c), rare(a));
  // Without a scratch every decode is on its own, with equal content.
  const alone = (ok(decodeMessage(six('fe80::1', 65001, '2001:db8:1::/48'))) as UpdateMessage).attrs!;
  t.ok(attrsEqual(alone, a) && alone.hash === a.hash, 'equal to a decode without the scratch');
});

t.test('a DecodeScratch reuses its prefix arrays', async (t) => {
  const scratch = new DecodeScratch();
  const a = makeAttrs({ asPath: [asSequence(1)], nextHop: parseIP('10.0.0.1') });
  const [b1] = encodeUpdates(a, [parsePrefix('10.0.0.0/8')]);
  const [b2] = encodeUpdates(a, [parsePrefix('11.0.0.0/8'), parsePrefix('12.0.0.0/8')]);
  const m1 = ok(decodeMessage(b1, { scratch })) as UpdateMessage;
  const words = m1.nlri.words;
  const m2 = ok(decodeMessage(b2, { scratch })) as UpdateMessage;
  t.equal(m2.nlri.words, words, 'same array');
  t.same(prefixesOf(m2.nlri).map(String), ['11.0.0.0/8', '12.0.0.0/8']);
});

// ---- framer -------------------------------------------------------------------------------------------------

t.test('framer: any chunking of a stream yields the same messages', async (t) => {
  const a = makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1') });
  fc.assert(
    fc.property(fc.array(fc.oneof(openMessage, otherMessage), { maxLength: 8 }), fc.array(prefix4, { maxLength: 1500 }), fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 20 }), (others, ps, cuts) => {
      const msgs = [...others.map((m) => encodeMessage(m)), ...encodeUpdates(a, ps), encodeKeepalive()];
      const stream = Buffer.concat(msgs);
      const framer = new Framer();
      const got: Buffer[] = [];
      let pos = 0;
      for (let i = 0; pos < stream.length; i++) {
        const n = cuts[i % cuts.length];
        const err = framer.push(stream.subarray(pos, pos + n), (m) => got.push(Buffer.from(m)));
        if (err) throw new Error(err.reason);
        pos += n;
      }
      deepStrictEqual(framer.buffered, 0);
      deepStrictEqual(got.map((b) => b.toString('hex')), msgs.map((b) => b.toString('hex')));
    }),
    { numRuns: 100 },
  );
  t.pass('framed');
});

t.test('framer: whole messages in a chunk are views, not copies; header errors stop the stream', async (t) => {
  const chunk = Buffer.concat([encodeKeepalive(), encodeKeepalive()]);
  const views: Uint8Array[] = [];
  t.equal(new Framer().push(chunk, (m) => views.push(m)), null);
  t.equal(views[1].buffer, chunk.buffer, 'shares the chunk memory');
  const f = new Framer();
  const bad = Buffer.concat([encodeKeepalive(), hex(`${MARKER} 1001 02`)]);
  let n = 0;
  const err = f.push(bad, () => n++);
  t.equal(n, 1);
  t.match(err, { code: 1, subcode: 2, data: new Uint8Array([0x10, 0x01]) });
  t.equal(f.push(encodeKeepalive(), () => n++), err, 'stays failed');
  const ext = new Framer({ extendedMessage: true });
  t.equal(ext.push(hex(`${MARKER} 1001 02`), () => {}), null, '4097 is fine with extended messages');
});

t.test('describe: JSON view of a stream of hex messages', async (t) => {
  const text = `${encodeKeepalive().toString('hex')}\n${encodeUpdates(makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1'), communities: [0xfde90064] }), [parsePrefix('10.0.0.0/8')])[0].toString('hex')}`;
  const out = describeStream(parseHex(text));
  t.same(out, [
    { action: 'ok', message: { type: 'KEEPALIVE' } },
    { action: 'ok', message: { type: 'UPDATE', attributes: { ORIGIN: 'IGP', AS_PATH: '65001', NEXT_HOP: '10.0.0.1', COMMUNITIES: ['65001:100'] }, nlri: ['10.0.0.0/8'] } },
  ]);
  t.ok(JSON.stringify(describeStream(encodeOpen({ myAs: 1, holdTime: 3, bgpId: 1, capabilities: [{ kind: 'route-refresh' }] }))).includes('route-refresh'));
});

t.test('routeChanges: Prefix objects per next hop, everything withdrawn under treat-as-withdraw', async (t) => {
  const a = makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1') });
  const both = encodeUpdate({
    withdrawn: [parsePrefix('10.9.0.0/16')],
    attrs: a,
    nlri: [parsePrefix('10.1.0.0/16')],
    mpReach: { afi: 2, safi: 1, nextHop: parseIP('2001:db8::1'), nlri: [parsePrefix('2001:db8:1::/48')] },
    mpUnreach: { afi: 2, safi: 1, withdrawn: [parsePrefix('2001:db8:9::/48')] },
  });
  const c = routeChanges(decodeMessage(both))!;
  t.same(c.withdraw.map(String), ['10.9.0.0/16', '2001:db8:9::/48']);
  t.same(c.announce.map((x) => [x.attrs.nextHop!.toString(), x.prefixes.map(String)]), [
    ['10.0.0.1', ['10.1.0.0/16']],
    ['2001:db8::1', ['2001:db8:1::/48']],
  ]);
  const bad = update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP], nlri: '08 0a' }); // 2-octet AS_PATH in a 4-octet session
  const w = routeChanges(decodeMessage(bad))!;
  t.same([w.announce, w.withdraw.map(String)], [[], ['10.0.0.0/8']]);
  t.equal(routeChanges(decodeMessage(encodeKeepalive())), null);
});
