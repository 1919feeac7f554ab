// Malformed inputs and the exact reaction each calls for: the NOTIFICATION (code/subcode/data) of RFC 4271 6 and
// friends, or RFC 7606's treat-as-withdraw / attribute discard. Each row cites the section it comes from.
import t from 'tap';
import {
  decodeMessage, validateOpen, type DecodeOptions, type DecodeResult, type UpdateMessage,
} from '../../src/bgp/codec/index.ts';
import { prefixesOf } from '../../src/bgp/codec/nlri.ts';
import { AS_PATH, AS_PATH2, NEXT_HOP, NLRI, ORIGIN, attr, hex, mpReach6, msg, open, update } from './codec-helpers.ts';

type Expect =
  | { notify: [code: number, subcode: number, data?: string] }
  | { withdraw: { subcodes?: number[]; prefixes?: string[] } }
  | { discard: number[] }
  | { ok: true; check?: (r: DecodeResult) => void };

interface Row {
  name: string;
  rfc: string;
  bytes: Buffer;
  opts?: DecodeOptions;
  expect: Expect;
}

const MARKER = 'ffffffffffffffffffffffffffffffff';
const ext = { extendedMessage: true };
const two = { fourOctetAs: false };
const ebgp = { external: true };
const WELL = [ORIGIN, AS_PATH, NEXT_HOP]; // a valid classic attribute set (4-octet session)
const keepalive = msg(4);
const kaBadMarker = Buffer.from(keepalive);
kaBadMarker[3] = 0xfe;

const rows: Row[] = [
  // ---- message header (RFC 4271 6.1) -------------------------------------------------------------------
  { name: 'marker not all ones', rfc: '4271 6.1', bytes: kaBadMarker, expect: { notify: [1, 1, ''] } },
  { name: 'length 18 < 19', rfc: '4271 6.1', bytes: msg(4, '', 18), expect: { notify: [1, 2, '0012'] } },
  { name: 'length 4097 > 4096', rfc: '4271 6.1', bytes: msg(2, Buffer.alloc(4078)), expect: { notify: [1, 2, '1001'] } },
  { name: 'UPDATE of 4097 with extended messages', rfc: '8654 4', bytes: update({ withdrawn: Buffer.alloc(4074, 0) }), opts: ext, expect: { ok: true } },
  { name: 'OPEN over 4096 even with extended messages', rfc: '8654 4', bytes: msg(1, Buffer.alloc(4078)), opts: ext, expect: { notify: [1, 2, '1001'] } },
  { name: 'unknown message type 6', rfc: '4271 6.1', bytes: msg(6, '00'), expect: { notify: [1, 3, '06'] } },
  { name: 'KEEPALIVE of length 20', rfc: '4271 6.1', bytes: msg(4, '00'), expect: { notify: [1, 2, '0014'] } },
  { name: 'OPEN shorter than 29', rfc: '4271 6.1', bytes: msg(1, '04fde9005a0a000001'), expect: { notify: [1, 2, '001c'] } },
  { name: 'UPDATE shorter than 23', rfc: '4271 6.1', bytes: msg(2, '000000'), expect: { notify: [1, 2, '0016'] } },
  { name: 'NOTIFICATION shorter than 21', rfc: '4271 6.1', bytes: msg(3, '06'), expect: { notify: [1, 2, '0014'] } },
  { name: 'length field larger than the message', rfc: '4271 6.1', bytes: msg(4, '', 25), expect: { notify: [1, 2, '0019'] } },
  {
    name: 'ROUTE-REFRESH of length 24: data is the whole message', rfc: '7313 5', bytes: msg(5, '0001000100'),
    expect: { notify: [7, 1, `${MARKER}0018050001000100`] },
  },

  // ---- OPEN (RFC 4271 6.2 and updates) ------------------------------------------------------------------
  { name: 'version 3: data is our version as 2 octets', rfc: '4271 6.2', bytes: open({ version: 3 }), expect: { notify: [2, 1, '0004'] } },
  { name: 'My Autonomous System 0', rfc: '7607 2', bytes: open({ myAs: 0 }), expect: { notify: [2, 2, ''] } },
  { name: '4-octet AS capability with AS 0', rfc: '7607 2', bytes: open({ params: '0206 4104 00000000' }), expect: { notify: [2, 2, ''] } },
  { name: 'hold time 1', rfc: '4271 6.2', bytes: open({ hold: 1 }), expect: { notify: [2, 6, ''] } },
  { name: 'hold time 2', rfc: '4271 6.2', bytes: open({ hold: 2 }), expect: { notify: [2, 6, ''] } },
  { name: 'hold time 0 is fine', rfc: '4271 4.2', bytes: open({ hold: 0 }), expect: { ok: true } },
  { name: 'hold time 3 is fine', rfc: '4271 4.2', bytes: open({ hold: 3 }), expect: { ok: true } },
  { name: 'BGP Identifier 0', rfc: '6286 2.1', bytes: open({ id: 0 }), expect: { notify: [2, 3, ''] } },
  { name: 'optional parameter type 1 (authentication)', rfc: '4271 6.2', bytes: open({ params: '0102 0000' }), expect: { notify: [2, 4, ''] } },
  { name: 'optional parameters length past the message', rfc: '4271 6.2 (malformed: Unspecific)', bytes: msg(1, '04fde9005a0a000001 05 0202'), expect: { notify: [2, 0, ''] } },
  { name: 'capability overruns its parameter', rfc: '4271 6.2 (malformed: Unspecific)', bytes: open({ params: '0204 0104 0001' }), expect: { notify: [2, 0, ''] } },
  { name: 'multiprotocol capability of length 3', rfc: '5492 4 / 4271 6.2', bytes: open({ params: '0205 0103 000100' }), expect: { notify: [2, 0, ''] } },
  { name: 'graceful restart capability of length 3', rfc: '4724 3 / 4271 6.2', bytes: open({ params: '0205 4003 007800' }), expect: { notify: [2, 0, ''] } },
  { name: 'unknown capability is kept, not an error', rfc: '5492 3', bytes: open({ params: '0204 c802 abcd' }), expect: { ok: true } },

  // ---- UPDATE: session reset ----------------------------------------------------------------------------
  { name: 'withdrawn routes length past the message', rfc: '4271 6.3; 7606 3 b, j', bytes: msg(2, '0010 0000'), expect: { notify: [3, 1, ''] } },
  { name: 'total attribute length past the message', rfc: '4271 6.3; 7606 3 b, j', bytes: msg(2, '0000 0010 400101'), expect: { notify: [3, 1, ''] } },
  { name: 'withdrawn prefix length 33', rfc: '4271 6.3; 7606 3 i, 5.3', bytes: update({ withdrawn: '21 0a000000 00' }), expect: { notify: [3, 10, ''] } },
  { name: 'NLRI prefix length 33', rfc: '4271 6.3; 7606 5.3', bytes: update({ attrs: WELL, nlri: '21 0a000000 00' }), expect: { notify: [3, 10, ''] } },
  { name: 'NLRI prefix overruns the message', rfc: '4271 6.3; 7606 5.3', bytes: update({ attrs: WELL, nlri: '18 0a00' }), expect: { notify: [3, 10, ''] } },
  {
    name: 'MP_REACH_NLRI twice', rfc: '7606 3 g',
    bytes: update({ attrs: [mpReach6('20 20010db8'), ORIGIN, AS_PATH, mpReach6('20 20010db9')] }), expect: { notify: [3, 1, ''] },
  },
  {
    name: 'MP_UNREACH_NLRI twice', rfc: '7606 3 g',
    bytes: update({ attrs: [attr(0x80, 15, '0002 01'), attr(0x80, 15, '0002 01')] }), expect: { notify: [3, 1, ''] },
  },
  {
    name: 'MP_REACH_NLRI IPv6 next hop of 5 octets: data is the attribute', rfc: '7606 7.11; 4760 7',
    bytes: update({ attrs: [attr(0x80, 14, '0002 01 05 0102030405 00'), ORIGIN, AS_PATH] }), expect: { notify: [3, 9, '800e0a00020105010203040500'] },
  },
  {
    name: 'MP_REACH_NLRI with a prefix length 129', rfc: '7606 5.3; 4760 7',
    bytes: update({ attrs: [mpReach6('81 00'), ORIGIN, AS_PATH] }), expect: { notify: [3, 9] },
  },
  {
    name: 'MP_UNREACH_NLRI with a truncated prefix', rfc: '7606 5.3; 4760 7',
    bytes: update({ attrs: [attr(0x80, 15, '0002 01 40 2001')] }), expect: { notify: [3, 9, '800f06000201402001'] },
  },
  {
    name: 'unrecognised well-known attribute: data is the attribute', rfc: '4271 6.3',
    bytes: update({ attrs: [...WELL, attr(0x40, 99, 'aa')], nlri: NLRI }), expect: { notify: [3, 2, '406301aa'] },
  },
  {
    name: 'attribute overrun with no NLRI to locate', rfc: '7606 3 j, 4',
    bytes: update({ attrs: [ORIGIN, '40 02 09 0201'] }), expect: { notify: [3, 1, ''] },
  },
  {
    name: 'strongest action wins: session reset over treat-as-withdraw', rfc: '7606 3 h',
    bytes: update({ attrs: [attr(0x40, 1, '07'), attr(0x80, 15, '0002 01'), attr(0x80, 15, '0002 01')] }), expect: { notify: [3, 1, ''] },
  },

  // ---- UPDATE: treat-as-withdraw ------------------------------------------------------------------------
  { name: 'ORIGIN of length 2', rfc: '7606 7.1', bytes: update({ attrs: [attr(0x40, 1, '0000'), AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [5], prefixes: ['192.168.1.0/24', '10.1.0.0/16'] } } },
  { name: 'ORIGIN value 3', rfc: '7606 7.1; 4271 6.3', bytes: update({ attrs: [attr(0x40, 1, '03'), AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [6] } } },
  { name: 'AS_PATH segment type 5', rfc: '7606 7.2', bytes: update({ attrs: [ORIGIN, attr(0x40, 2, '0501 0000fde9'), NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: 'AS_PATH empty segment', rfc: '7606 7.2', bytes: update({ attrs: [ORIGIN, attr(0x40, 2, '0200'), NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: 'AS_PATH segment overrun', rfc: '7606 7.2', bytes: update({ attrs: [ORIGIN, attr(0x40, 2, '0202 0000fde9'), NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: 'AS_PATH lone trailing octet', rfc: '7606 7.2', bytes: update({ attrs: [ORIGIN, attr(0x40, 2, '0201 0000fde9 02'), NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: 'AS_PATH with AS 0', rfc: '7607 2', bytes: update({ attrs: [ORIGIN, attr(0x40, 2, '0201 00000000'), NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: '2-octet AS_PATH in a 4-octet session is an overrun', rfc: '7606 7.2', bytes: update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [11] } } },
  { name: 'NEXT_HOP of length 5', rfc: '7606 7.3', bytes: update({ attrs: [ORIGIN, AS_PATH, attr(0x40, 3, '0a00000100')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'NEXT_HOP 0.0.0.0', rfc: '7606 3 e, 7.3; 4271 6.3', bytes: update({ attrs: [ORIGIN, AS_PATH, attr(0x40, 3, '00000000')], nlri: NLRI }), expect: { withdraw: { subcodes: [8] } } },
  { name: 'NEXT_HOP multicast', rfc: '7606 3 e, 7.3; 4271 6.3', bytes: update({ attrs: [ORIGIN, AS_PATH, attr(0x40, 3, 'e0000001')], nlri: NLRI }), expect: { withdraw: { subcodes: [8] } } },
  { name: 'MULTI_EXIT_DISC of length 3', rfc: '7606 7.4', bytes: update({ attrs: [...WELL, attr(0x80, 4, '000001')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'LOCAL_PREF of length 3 (internal peer)', rfc: '7606 7.5', bytes: update({ attrs: [...WELL, attr(0x40, 5, '000064')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'COMMUNITIES of length 5', rfc: '7606 7.8', bytes: update({ attrs: [...WELL, attr(0xc0, 8, '0001000200')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'COMMUNITIES of length 0', rfc: '7606 7.8', bytes: update({ attrs: [...WELL, attr(0xc0, 8, '')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'ORIGINATOR_ID of length 5', rfc: '7606 7.9', bytes: update({ attrs: [...WELL, attr(0x80, 9, '0a00000100')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'CLUSTER_LIST of length 6', rfc: '7606 7.10', bytes: update({ attrs: [...WELL, attr(0x80, 10, '0a0000010000')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'EXTENDED_COMMUNITIES of length 7', rfc: '7606 7.14', bytes: update({ attrs: [...WELL, attr(0xc0, 16, '00020000000001')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'LARGE_COMMUNITY of length 11', rfc: '8092 6', bytes: update({ attrs: [...WELL, attr(0xc0, 32, '0000000100000002000000')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } } },
  { name: 'missing ORIGIN: data is its type code', rfc: '7606 3 d; 4271 6.3', bytes: update({ attrs: [AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [3] } } },
  { name: 'missing AS_PATH', rfc: '7606 3 d; 4271 6.3', bytes: update({ attrs: [ORIGIN, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [3] } } },
  { name: 'missing NEXT_HOP with classic NLRI', rfc: '7606 3 d; 4760 3', bytes: update({ attrs: [ORIGIN, AS_PATH], nlri: NLRI }), expect: { withdraw: { subcodes: [3] } } },
  { name: 'ORIGIN with the Optional bit set', rfc: '7606 3 c', bytes: update({ attrs: [attr(0xc0, 1, '00'), AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { withdraw: { subcodes: [4] } } },
  { name: 'MED marked transitive', rfc: '7606 3 c', bytes: update({ attrs: [...WELL, attr(0xc0, 4, '00000001')], nlri: NLRI }), expect: { withdraw: { subcodes: [4] } } },
  {
    name: 'attribute overrun: the NLRI found through the total length is withdrawn', rfc: '7606 4',
    bytes: update({ attrs: [ORIGIN, AS_PATH, '40 03 09 0a000001'], nlri: NLRI }), expect: { withdraw: { subcodes: [5], prefixes: ['192.168.1.0/24', '10.1.0.0/16'] } },
  },
  {
    name: 'attribute header truncated (2 octets left)', rfc: '7606 4',
    bytes: update({ attrs: [...WELL, '4001'], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } },
  },
  {
    name: 'MP_REACH_NLRI first, then a bad MED: the IPv6 prefixes are withdrawn', rfc: '7606 5.1, 7.4',
    bytes: update({ attrs: [mpReach6('30 20010db80001 20 20010db9'), ORIGIN, AS_PATH, attr(0x80, 4, '01')] }),
    expect: { withdraw: { subcodes: [5], prefixes: ['2001:db8:1::/48', '2001:db9::/32'] } },
  },
  {
    name: 'MP_REACH_NLRI first, then an overrun: treat-as-withdraw', rfc: '7606 4, 5.1',
    bytes: update({ attrs: [mpReach6('20 20010db8'), ORIGIN, '40 02 20 0201'] }), expect: { withdraw: { prefixes: ['2001:db8::/32'] } },
  },
  {
    name: 'MP_REACH_NLRI without ORIGIN', rfc: '7606 3 d; 4760 3',
    bytes: update({ attrs: [mpReach6('20 20010db8'), AS_PATH] }), expect: { withdraw: { subcodes: [3], prefixes: ['2001:db8::/32'] } },
  },
  {
    name: 'strongest action wins: treat-as-withdraw over discard', rfc: '7606 3 h',
    bytes: update({ attrs: [...WELL, attr(0x40, 6, '00'), attr(0x80, 4, '01')], nlri: NLRI }), expect: { withdraw: { subcodes: [5] } },
  },

  // ---- UPDATE: attribute discard ------------------------------------------------------------------------
  { name: 'ATOMIC_AGGREGATE of length 1', rfc: '7606 7.6', bytes: update({ attrs: [...WELL, attr(0x40, 6, '00')], nlri: NLRI }), expect: { discard: [6] } },
  { name: 'AGGREGATOR of length 7 (4-octet session)', rfc: '7606 7.7', bytes: update({ attrs: [...WELL, attr(0xc0, 7, '0000fde90a0000')], nlri: NLRI }), expect: { discard: [7] } },
  { name: 'AGGREGATOR of length 8 in a 2-octet session', rfc: '7606 7.7', bytes: update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP, attr(0xc0, 7, '0000fde90a000001')], nlri: NLRI }), opts: two, expect: { discard: [7] } },
  { name: 'AGGREGATOR with AS 0', rfc: '7607 2', bytes: update({ attrs: [...WELL, attr(0xc0, 7, '000000000a000001')], nlri: NLRI }), expect: { discard: [7] } },
  { name: 'AGGREGATOR not marked optional', rfc: '7606 3 c, f', bytes: update({ attrs: [...WELL, attr(0x40, 7, '0000fde90a000001')], nlri: NLRI }), expect: { discard: [7] } },
  { name: 'LOCAL_PREF from an external peer', rfc: '7606 7.5', bytes: update({ attrs: [...WELL, attr(0x40, 5, '00000064')], nlri: NLRI }), opts: ebgp, expect: { discard: [5] } },
  { name: 'ORIGINATOR_ID from an external peer', rfc: '7606 7.9', bytes: update({ attrs: [...WELL, attr(0x80, 9, '0a000001')], nlri: NLRI }), opts: ebgp, expect: { discard: [9] } },
  { name: 'CLUSTER_LIST from an external peer', rfc: '7606 7.10', bytes: update({ attrs: [...WELL, attr(0x80, 10, '0a000001')], nlri: NLRI }), opts: ebgp, expect: { discard: [10] } },
  {
    name: 'repeated ORIGIN: the first is kept', rfc: '7606 3 g',
    bytes: update({ attrs: [attr(0x40, 1, '02'), ...WELL], nlri: NLRI }), expect: { discard: [1] },
  },
  { name: 'AS4_PATH from a 4-octet AS speaker', rfc: '6793 4.1', bytes: update({ attrs: [...WELL, attr(0xc0, 17, '0201 fa56ea01')], nlri: NLRI }), expect: { discard: [17] } },
  { name: 'AS4_PATH malformed (2-octet session)', rfc: '6793 6', bytes: update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP, attr(0xc0, 17, '0202 fa56ea01')], nlri: NLRI }), opts: two, expect: { discard: [17] } },
  { name: 'AS4_PATH with a confederation segment', rfc: '6793 6', bytes: update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP, attr(0xc0, 17, '0301 fa56ea01')], nlri: NLRI }), opts: two, expect: { discard: [17] } },
  { name: 'AS4_AGGREGATOR of length 6', rfc: '6793 6', bytes: update({ attrs: [ORIGIN, AS_PATH2, NEXT_HOP, attr(0xc0, 18, 'fa560a000001')], nlri: NLRI }), opts: two, expect: { discard: [18] } },

  // ---- UPDATE: not errors ------------------------------------------------------------------------------
  {
    name: 'unknown optional non-transitive attribute is dropped quietly', rfc: '4271 5',
    bytes: update({ attrs: [...WELL, attr(0x80, 200, 'aa')], nlri: NLRI }),
    expect: { ok: true, check: (r) => t.equal((r as { message: UpdateMessage }).message.attrs!.unknown.length, 0) },
  },
  { name: 'Extended Length bit on a short attribute', rfc: '4271 4.3', bytes: update({ attrs: [attr(0x50, 1, '00'), AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { ok: true } },
  { name: 'unused low flag bits are ignored', rfc: '4271 4.3', bytes: update({ attrs: [attr(0x4f, 1, '00'), AS_PATH, NEXT_HOP], nlri: NLRI }), expect: { ok: true } },
  {
    name: 'NEXT_HOP next to MP_REACH_NLRI only is ignored', rfc: '4760 3',
    bytes: update({ attrs: [mpReach6('20 20010db8'), ORIGIN, AS_PATH, attr(0x40, 3, '00000000')] }),
    expect: { ok: true, check: (r) => t.equal((r as { message: UpdateMessage }).message.attrs!.nextHop!.toString(), 'fd00::1') },
  },
  {
    name: 'MP_REACH_NLRI of another AFI/SAFI is kept raw', rfc: '4760 3',
    bytes: update({ attrs: [attr(0x80, 14, '0019 41 00 00'), ORIGIN, AS_PATH] }),
    expect: { ok: true, check: (r) => t.same(Buffer.from((r as { message: UpdateMessage }).message.mpReach!.raw!), hex('00 00')) },
  },
  { name: 'attributes with no NLRI need no well-known ones', rfc: '7606 3 d', bytes: update({ attrs: [attr(0x80, 4, '00000001')] }), expect: { ok: true } },
];

t.test('malformed inputs', async (t) => {
  for (const row of rows) {
    const label = `${row.name} [RFC ${row.rfc}]`;
    const r = decodeMessage(row.bytes, row.opts);
    const e = row.expect;
    if ('notify' in e) {
      const [code, subcode, data] = e.notify;
      if (r.action !== 'notification') {
        t.fail(`${label}: got ${r.action}`);
        continue;
      }
      t.same([r.code, r.subcode], [code, subcode], label);
      if (data !== undefined) t.equal(Buffer.from(r.data).toString('hex'), data.replace(/\s/g, ''), `${label}: data`);
      t.notOk(r.internal, `${label}: not an internal error`);
    } else if ('withdraw' in e) {
      if (r.action !== 'treat-as-withdraw') {
        t.fail(`${label}: got ${r.action} ${'reason' in r ? r.reason : ''}`);
        continue;
      }
      t.pass(label);
      if (e.withdraw.subcodes) t.same(r.problems.filter((p) => p.action === 'withdraw').map((p) => p.subcode), e.withdraw.subcodes, `${label}: subcodes`);
      if (e.withdraw.prefixes) {
        const m = r.message;
        const all = [...prefixesOf(m.withdrawn), ...prefixesOf(m.nlri), ...(m.mpReach ? prefixesOf(m.mpReach.nlri) : []), ...(m.mpUnreach ? prefixesOf(m.mpUnreach.withdrawn) : [])];
        t.same(all.map(String), e.withdraw.prefixes, `${label}: prefixes to withdraw`);
      }
      t.equal(r.message.attrs, null);
    } else if ('discard' in e) {
      if (r.action !== 'attribute-discard') {
        t.fail(`${label}: got ${r.action} ${JSON.stringify('problems' in r ? r.problems : r)}`);
        continue;
      }
      t.same(r.problems.map((p) => p.attrType), e.discard, label);
      t.ok(r.problems.every((p) => p.action === 'discard'));
    } else {
      t.equal(r.action, 'ok', `${label}${'reason' in r ? `: ${r.reason}` : ''}${'problems' in r ? JSON.stringify(r.problems) : ''}`);
      e.check?.(r);
    }
  }
});

t.test('OPEN checks that need the configuration', async (t) => {
  const m = decodeMessage(open({ params: '0206 4104 fa56ea01', myAs: 23456 }));
  if (m.action !== 'ok' || m.message.type !== 'open') throw new Error('bad fixture');
  const o = m.message;
  t.equal(validateOpen(o, { peerAs: 4200000001 }), null, '4-octet AS capability is the peer AS (RFC 6793 4.1)');
  t.match(validateOpen(o, { peerAs: 65001 }), { code: 2, subcode: 2 }, 'Bad Peer AS (RFC 4271 6.2)');
  t.match(validateOpen(o, { internal: true, localBgpId: 0x0a000001 }), { code: 2, subcode: 3 }, 'same BGP Identifier inside an AS (RFC 6286 2.2)');
  t.equal(validateOpen(o, { internal: false, localBgpId: 0x0a000001 }), null, 'allowed between ASes');
  t.match(validateOpen({ ...o, holdTime: 5 }, { minHoldTime: 9 }), { code: 2, subcode: 6 }, 'hold time below local minimum');
  const r = validateOpen(o, { required: [{ kind: 'multiprotocol', afi: 2, safi: 1 }] });
  t.match(r, { code: 2, subcode: 7 }, 'Unsupported Capability (RFC 5492 5)');
  t.equal(Buffer.from(r!.data).toString('hex'), '010400020001', 'data lists the missing capability');
});

t.test('a NOTIFICATION about a NOTIFICATION names the message type, so the session just closes (RFC 4271 6.4)', async (t) => {
  const r = decodeMessage(msg(3, '06'));
  t.match(r, { action: 'notification', msgType: 3 });
});
