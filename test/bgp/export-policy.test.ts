// The export policy and rewrite (src/bgp/export-policy.ts): what a peer is sent for a route, and the sharing of
// rewritten records between peers of one kind.
import fc from 'fast-check';
import t from 'tap';
import type { AddressFamily } from '../../src/config/types.ts';
import { NEXT_HOP_SELF4, NEXT_HOP_SELF6 } from '../../src/bgp/codec/next-hop-self.ts';
import { ExportPolicies, rewriteForPeer, type ExportContext, type ExportPeer } from '../../src/bgp/export-policy.ts';
import { compilePrefixList } from '../../src/bgp/prefix-filter.ts';
import { parseIP, parsePrefix, type Prefix } from '../../src/net/ip.ts';
import { asSequence, attrsEqual, makeAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import { DEFAULT_LOCAL_PREF, type Path, type PeerInfo } from '../../src/rib/bestpath.ts';

const P4 = parsePrefix('20.1.0.0/24');
const P6 = parsePrefix('2001:db8:1::/48');

function peer(over: Partial<ExportPeer> & { localAs?: number; nextHopSelf?: boolean; rrClient?: boolean; address?: string } = {}): ExportPeer {
  return {
    cfg: { address: over.address ?? '10.0.0.2', localAs: over.localAs ?? 65000, nextHopSelf: over.nextHopSelf ?? false, rrClient: over.rrClient ?? false },
    type: over.type ?? 'ebgp',
    exportFilter: over.exportFilter ?? null,
    exportRoutePolicy: over.exportRoutePolicy ?? null,
    nh4: over.nh4 === undefined ? parseIP('10.0.0.1') : over.nh4,
    nh6: over.nh6 === undefined ? parseIP('2001:db8::1') : over.nh6,
    warnedNoNextHop: new Set<AddressFamily>(),
  };
}

function path(attrs: PathAttrs, type: PeerInfo['type'], address: string | null = '10.9.9.9', source = 'src'): Path {
  return { source, attrs, peer: { type, routerId: 0x0a090909, address: address ? parseIP(address) : null, asn: 65100 }, stale: false };
}

function exportsWith(over: Partial<ExportContext> = {}): { x: ExportPolicies; warnings: string[] } {
  const warnings: string[] = [];
  const x = new ExportPolicies({
    clusterId: () => undefined,
    isRrClient: () => false,
    tag: (_p, a) => a,
    warn: (m) => warnings.push(m),
    ...over,
  });
  return { x, warnings };
}

const src4 = makeAttrs({ asPath: [asSequence(65100)], nextHop: parseIP('10.9.9.9'), med: 7, localPref: 200 });
const src6 = makeAttrs({ asPath: [asSequence(65100)], nextHop: parseIP('2001:db8::9'), nextHopLinkLocal: parseIP('fe80::9') });
const policyOf = (x: ExportPolicies, p: ExportPeer, fams: AddressFamily[] = ['ipv4', 'ipv6']) => {
  const pol = x.policy(p, fams);
  return (prefix: Prefix, best: Path) => pol(prefix, best, [best]);
};

t.test('eBGP: our AS prepended, next hop self as the marker, LOCAL_PREF and a foreign MED dropped', async (t) => {
  const { x } = exportsWith();
  const out = policyOf(x, peer())(P4, path(src4, 'ebgp'))!;
  t.same(out.asPath, [asSequence(65000, 65100)]);
  t.equal(out.nextHop, NEXT_HOP_SELF4);
  t.equal(out.localPref, undefined);
  t.equal(out.med, undefined, 'MED of another AS does not leave ours');
  const local = policyOf(x, peer())(P4, path(src4, 'local', null))!;
  t.equal(local.med, 7, 'our own route keeps its MED');
  const six = policyOf(x, peer())(P6, path(src6, 'ebgp'))!;
  t.equal(six.nextHop, NEXT_HOP_SELF6);
  t.equal(six.nextHopLinkLocal, null, 'the link-local next hop is the session\'s too');
});

t.test('peers of one kind share one record per source record, whatever their own addresses; other kinds do not', async (t) => {
  const { x } = exportsWith();
  const a = policyOf(x, peer({ nh4: parseIP('10.0.0.1') }))(P4, path(src4, 'ebgp'));
  const b = policyOf(x, peer({ nh4: parseIP('10.0.1.1'), address: '10.0.1.2' }))(P4, path(src4, 'ebgp'));
  t.equal(a, b, 'the same object');
  const otherAs = policyOf(x, peer({ localAs: 65001 }))(P4, path(src4, 'ebgp'))!;
  t.not(otherAs, a);
  t.same(otherAs.asPath, [asSequence(65001, 65100)]);
  const ibgp = policyOf(x, peer({ type: 'ibgp' }))(P4, path(src4, 'ebgp'))!;
  t.equal(ibgp.nextHop?.toString(), '10.9.9.9', 'iBGP keeps an eBGP-learned next hop');
  t.equal(ibgp.localPref, 200);
  t.equal(x.kinds, 3);
});

t.test('iBGP: LOCAL_PREF defaulted, next hop kept unless next-hop-self or ours', async (t) => {
  const { x } = exportsWith();
  const noLp = makeAttrs({ asPath: [asSequence(65100)], nextHop: parseIP('10.9.9.9') });
  const kept = policyOf(x, peer({ type: 'ibgp' }))(P4, path(noLp, 'ebgp'))!;
  t.equal(kept.localPref, DEFAULT_LOCAL_PREF);
  t.equal(kept.nextHop?.toString(), '10.9.9.9');
  t.same(kept.asPath, [asSequence(65100)], 'no AS prepended inside the AS');
  const self = policyOf(x, peer({ type: 'ibgp', nextHopSelf: true }))(P4, path(noLp, 'ebgp'))!;
  t.equal(self.nextHop, NEXT_HOP_SELF4);
  const ours = policyOf(x, peer({ type: 'ibgp' }))(P4, path(makeAttrs({ nextHop: null }), 'local', null))!;
  t.equal(ours.nextHop, NEXT_HOP_SELF4, 'a local route without a next hop goes with ours');
});

t.test('no next hop of ours on a session: its routes are not sent, one warning per family, and other peers are not affected', async (t) => {
  const { x, warnings } = exportsWith();
  const bare = peer({ nh4: null, nh6: null, address: '10.0.5.5' });
  const pol = policyOf(x, bare);
  t.equal(pol(P4, path(src4, 'ebgp')), null);
  t.equal(pol(parsePrefix('20.2.0.0/24'), path(src4, 'ebgp')), null);
  t.equal(pol(P6, path(src6, 'ebgp')), null);
  t.same(warnings, [
    'peer 10.0.5.5: no ipv4 next hop of ours on this session (set nextHop.ipv4): ipv4 routes not sent',
    'peer 10.0.5.5: no ipv6 next hop of ours on this session (set nextHop.ipv6): ipv6 routes not sent',
  ]);
  const out = policyOf(x, peer())(P4, path(src4, 'ebgp'));
  t.equal(out?.nextHop, NEXT_HOP_SELF4, 'a peer with a next hop still gets the route (nothing cached for the bare one)');
  const ibgpKept = policyOf(x, peer({ type: 'ibgp', nh4: null }))(P4, path(src4, 'ebgp'));
  t.equal(ibgpKept?.nextHop?.toString(), '10.9.9.9', 'iBGP without next-hop-self needs no address of ours');
});

t.test('families, prefix filter and route policy are read per call; route reflection follows RFC 4456', async (t) => {
  const { x } = exportsWith({ clusterId: () => 0x01010101, isRrClient: (s) => s.address?.toString() === '10.9.9.9' });
  const p = peer() as { -readonly [K in keyof ExportPeer]: ExportPeer[K] };
  const pol = policyOf(x, p, ['ipv4']);
  t.equal(pol(P6, path(src6, 'ebgp')), null, 'IPv6 not negotiated');
  t.ok(pol(P4, path(src4, 'ebgp')));
  p.exportFilter = compilePrefixList([{ prefix: '20.1.0.0/16', ge: 24, action: 'reject' }]);
  t.equal(pol(P4, path(src4, 'ebgp')), null, 'a filter set after the policy was made applies');
  p.exportFilter = null;
  t.ok(pol(P4, path(src4, 'ebgp')), 'and its removal too');
  const client = peer({ type: 'ibgp', rrClient: true });
  const nonClient = peer({ type: 'ibgp' });
  const fromClient = path(src4, 'ibgp', '10.9.9.9');
  const fromNonClient = path(src4, 'ibgp', '10.8.8.8');
  t.ok(policyOf(x, nonClient)(P4, fromClient), 'client -> non-client: reflected');
  t.ok(policyOf(x, client)(P4, fromNonClient), 'non-client -> client: reflected');
  t.equal(policyOf(x, nonClient)(P4, fromNonClient), null, 'non-client -> non-client: not');
  const r = policyOf(x, client)(P4, fromClient)!;
  t.equal(r.originatorId, 0x0a090909, 'ORIGINATOR_ID is the source\'s router ID');
  t.same(r.clusterList, [0x01010101], 'our cluster ID prepended');
  const { x: noRr } = exportsWith();
  t.equal(policyOf(noRr, client)(P4, fromClient), null, 'not a reflector: iBGP routes stay');
});

t.test('the policy equals the plain rewrite for every input, with its memo and shared cache', async (t) => {
  const { x } = exportsWith();
  const peers = [peer(), peer({ nh4: parseIP('10.0.3.1') }), peer({ type: 'ibgp' }), peer({ type: 'ibgp', nextHopSelf: true }), peer({ localAs: 64999 })];
  const pols = peers.map((p) => policyOf(x, p));
  const sources = [src4, makeAttrs({ asPath: [asSequence(65200, 65300)], nextHop: parseIP('10.7.7.7'), med: 1 }), makeAttrs({ nextHop: null })];
  const types: PeerInfo['type'][] = ['ebgp', 'ibgp', 'local'];
  fc.assert(fc.property(fc.array(fc.tuple(fc.nat(peers.length - 1), fc.nat(sources.length - 1), fc.nat(2)), { minLength: 1, maxLength: 60 }), (calls) => {
    for (const [pi, si, ti] of calls) {
      const type = types[ti];
      if (type === 'ibgp' && peers[pi].type === 'ibgp') continue; // reflection: its own test
      const got = pols[pi](P4, path(sources[si], type, type === 'local' ? null : '10.9.9.9'));
      const want = rewriteForPeer(peers[pi], 4, type, sources[si]);
      if (got === null || !attrsEqual(got, want)) throw new Error(`peer ${pi}, source ${si}, from ${type}: ${JSON.stringify(got)} != rewrite`);
    }
  }), { numRuns: 50 });
  t.pass('every call equalled the plain rewrite');
});
