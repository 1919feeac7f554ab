// allowas-in and a per-peer local AS, on the wire between our speakers on loopback: a route whose AS_PATH holds
// our AS is dropped by default and accepted up to allowAsIn times (a change re-imports without a session reset);
// with localAsn the OPEN carries that AS, the session is iBGP or eBGP against it, and eBGP peers see it prepended.
// The loop rule itself is checked against a counting oracle.
import t from 'tap';
import fc from 'fast-check';
import { ownAsLoop } from '../../src/bgp/loops.ts';
import type { Speaker } from '../../src/bgp/speaker.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { asSequence, asSet, makeAttrs, formatAsPath } from '../../src/rib/attrs.ts';
import { parseConfig } from '../../src/config/config.ts';
import { waitFor } from './raw-peer.ts';
import { loopbackSpeakers } from './loopback.ts';

t.test('ownAsLoop: more than `allowed` occurrences of one of our ASes (property, counting oracle)', async (t) => {
  const asn = fc.constantFrom(65001, 65002, 65003, 4200000001);
  fc.assert(fc.property(fc.array(fc.tuple(fc.boolean(), fc.array(asn, { minLength: 1, maxLength: 4 })), { maxLength: 4 }),
    fc.subarray([65001, 4200000001], { minLength: 1 }), fc.integer({ min: 0, max: 3 }), (segs, ours, allowed) => {
      const a = makeAttrs({ asPath: segs.map(([set, xs]) => (set ? asSet(...xs) : asSequence(...xs))) });
      const all = a.asPath.flatMap((s) => [...s.asns]); // as normalised (a set's repeats collapse)
      const want = ours.some((o) => all.filter((x) => x === o).length > allowed);
      return ours.some((o) => ownAsLoop(a, o, allowed)) === want;
    }), { numRuns: 500 });
  t.equal(ownAsLoop(makeAttrs({ asPath: [asSequence(65002, 65001, 65001)] }), 65001, 1), true);
  t.equal(ownAsLoop(makeAttrs({ asPath: [asSequence(65002, 65001, 65001)] }), 65001, 2), false);
});

t.test('config: peers[].allowAsIn and localAsn, checked', async (t) => {
  const cfg = (peer: string) => () => parseConfig(`node: { name: n }\nbgp:\n  asn: 65001\n  routerId: 10.0.0.1\n  peers: [${peer}]\n`);
  t.match(cfg('{ address: 10.0.0.2, asn: 65002, allowAsIn: 2, localAsn: 65100 }')().bgp!.peers[0], { allowAsIn: 2, localAsn: 65100 });
  t.throws(cfg('{ address: 10.0.0.2, asn: 65002, allowAsIn: 256 }'), /bgp\.peers\[0\]\.allowAsIn/);
  t.throws(cfg('{ address: 10.0.0.2, asn: 65002, localAsn: 0 }'), /bgp\.peers\[0\]\.localAsn/);
});

const { cfgOf, mk, peer } = loopbackSpeakers(t);

t.test('allowas-in on the wire: default drops, N accepts up to N, a change re-imports', async (t) => {
  const a = mk(31, 65001, [peer(32, 65002)]);
  const b = mk(32, 65002, [peer(31, 65001)]);
  b.announce('10.9.1.0/24', { asPath: [asSequence(65001)] }); // arrives as 65002 65001
  b.announce('10.9.2.0/24', { asPath: [asSequence(65001, 65001)] }); // 65002 65001 65001
  b.announce('10.9.3.0/24');
  await Promise.all([a.start(), b.start()]);
  const has = (p: string) => a.rib.best(parsePrefix(p)) !== undefined;
  await waitFor(() => has('10.9.3.0/24'), 'a clean route arrives');
  await waitFor(() => a.peers()[0]!.prefixes.received === 3, 'all three held in Adj-RIB-In');
  t.same([has('10.9.1.0/24'), has('10.9.2.0/24')], [false, false], 'default 0: our AS in the path is a loop, dropped');
  t.equal(a.peers()[0]!.prefixes.accepted, 1);
  const flaps = a.peers()[0]!.flaps;
  await a.reconfigure(cfgOf(31, 65001, [peer(32, 65002, { allowAsIn: 1 })]));
  await waitFor(() => has('10.9.1.0/24'), 'allowAsIn 1: one occurrence accepted');
  t.equal(formatAsPath(a.rib.best(parsePrefix('10.9.1.0/24'))!.attrs.asPath), '65002 65001');
  t.equal(has('10.9.2.0/24'), false, 'two occurrences are still a loop');
  await a.reconfigure(cfgOf(31, 65001, [peer(32, 65002, { allowAsIn: 2 })]));
  await waitFor(() => has('10.9.2.0/24'), 'allowAsIn 2: two accepted');
  t.equal(a.peers()[0]!.flaps, flaps, 'no session reset for an allowas-in change');
  t.match(a.peers()[0], { allowAsIn: 2, localAsn: 65001 }, '/peers shows allowAsIn and the local AS');
  t.equal(a.peers()[0]!.state, 'Established');
});

t.test('localAsn: the OPEN carries it, iBGP/eBGP against it, prepended toward eBGP', async (t) => {
  // A is AS 65001 but speaks as 65100 to B (so iBGP with B, AS 65100) and to C (eBGP, AS 65200).
  const a = mk(41, 65001, [peer(42, 65100, { localAsn: 65100 }), peer(43, 65200, { localAsn: 65100 }), peer(44, 65300)]);
  const b = mk(42, 65100, [peer(41, 65100)]);
  const c = mk(43, 65200, [peer(41, 65100)]);
  const d = mk(44, 65300, [peer(41, 65001)]);
  a.announce('10.8.0.0/24');
  await Promise.all([a, b, c, d].map((s) => s.start()));
  await waitFor(() => [b, c, d].every((s) => s.rib.best(parsePrefix('10.8.0.0/24'))), 'every peer has the route');
  t.same(a.peers().map((p) => [p.address, p.type, p.state, p.localAsn]),
    [['127.0.0.42', 'ibgp', 'Established', 65100], ['127.0.0.43', 'ebgp', 'Established', 65100], ['127.0.0.44', 'ebgp', 'Established', 65001]]);
  const path = (s: Speaker) => formatAsPath(s.rib.best(parsePrefix('10.8.0.0/24'))!.attrs.asPath);
  t.equal(path(b), '', 'iBGP against the local AS: nothing prepended');
  t.equal(b.rib.best(parsePrefix('10.8.0.0/24'))!.attrs.localPref, 100, 'LOCAL_PREF as inside the AS');
  t.equal(path(c), '65100', 'eBGP: the local AS prepended, not the node\'s');
  t.equal(path(d), '65001', 'a peer without localAsn still sees the node\'s AS');
  // A peer that expects the node's AS while we speak another one refuses us: Bad Peer AS.
  const e = mk(45, 65400, [peer(41, 65001)]);
  await a.reconfigure(cfgOf(41, 65001, [...a.peers().map((p) => peer(Number(p.address.split('.')[3]), p.asn, p.address === '127.0.0.44' ? {} : { localAsn: 65100 })), peer(45, 65400, { localAsn: 65100 })]));
  await e.start();
  await waitFor(() => /Bad Peer AS|2\/2|OPEN Message Error/i.test(e.peers()[0]!.lastError ?? ''), 'the peer refuses our OPEN');
  t.match(e.peers()[0]!.lastError, /peer AS|Bad Peer AS|2\/2/i, `peer says: ${e.peers()[0]!.lastError}`);
});
