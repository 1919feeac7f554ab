// Route policy (Calico BGPFilter's full rule set): first matching rule decides, operations run on accept, no
// match accepts unchanged; checked against a plain oracle written independently, and on the wire between our
// speakers (export: an added community, a prepended path, a rule by peer type, a reject by community; import:
// setPriority as LOCAL_PREF, NotIn). The importer's mapping of BGPFilter fields is checked too.
import t from 'tap';
import fc from 'fast-check';
import { RoutePolicy, PRIORITY_BASE, type PolicyRule } from '../../src/bgp/route-policy.ts';
import type { Speaker } from '../../src/bgp/speaker.ts';
import { importCalico } from '../../src/config/calico.ts';
import { parsePrefix, formatPrefix, prefixOf, IP } from '../../src/net/ip.ts';
import { asSequence, makeAttrs, formatAsPath } from '../../src/rib/attrs.ts';
import { waitFor } from './raw-peer.ts';
import { communitiesOf, loopbackSpeakers } from './loopback.ts';

const comms = communitiesOf;

t.test('first match decides; operations in order; no match accepts (property, against an oracle)', async (t) => {
  const cidr = fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 8, max: 24 })).map(([a, len]) => formatPrefix(prefixOf(new IP(4, (10 << 24 | a << 16) >>> 0, 0, 0, 0), len)));
  const rule = fc.record({
    prefix: fc.option(fc.record({ cidr, exact: fc.boolean(), negate: fc.boolean() }), { nil: undefined }),
    peerType: fc.option(fc.constantFrom('ibgp' as const, 'ebgp' as const), { nil: undefined }),
    community: fc.option(fc.constantFrom('1:1', '1:2'), { nil: undefined }),
    asPathPrefix: fc.option(fc.constantFrom([65002], [65002, 65003], [65003]), { nil: undefined }),
    action: fc.constantFrom('accept' as const, 'reject' as const),
  }, { requiredKeys: ['action'] });
  const route = fc.record({
    prefix: fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 8, max: 32 }))
      .map(([a, b, len]) => prefixOf(new IP(4, (10 << 24 | a << 16 | b << 8) >>> 0, 0, 0, 0), len)),
    comm: fc.subarray(['1:1', '1:2']),
    path: fc.constantFrom([], [65002], [65002, 65003], [65003, 65002]),
    peerType: fc.constantFrom('ibgp' as const, 'ebgp' as const),
  });
  fc.assert(fc.property(fc.array(rule, { maxLength: 5 }), route, (rules, r) => {
    const a = makeAttrs({ asPath: r.path.length ? [asSequence(...(r.path as readonly number[]))] : [], communities: r.comm.map((c) => Number(c.split(':')[0]) * 65536 + Number(c.split(':')[1])) });
    const got = new RoutePolicy(rules as PolicyRule[]).evaluate(r.prefix, a, { peerType: r.peerType, fromPeer: true });
    // Oracle: text arithmetic on the prefix, arrays for the rest.
    const inCidr = (c: string, exact: boolean) => {
      const [net, l] = c.split('/');
      const len = Number(l);
      const p = parsePrefix(`${net}/${len}`);
      const same = len === 0 || (r.prefix.ip.w0 >>> (32 - len)) === (p.ip.w0 >>> (32 - len));
      return exact ? same && r.prefix.len === len : same && r.prefix.len >= len;
    };
    const first = rules.find((x) => (!x.prefix || inCidr(x.prefix.cidr, x.prefix.exact) !== x.prefix.negate) &&
      (!x.peerType || x.peerType === r.peerType) && (!x.community || r.comm.includes(x.community)) &&
      (!x.asPathPrefix || x.asPathPrefix.every((n, i) => r.path[i] === n)));
    return first?.action === 'reject' ? got === null : got === a;
  }), { numRuns: 500 });
  const p = new RoutePolicy([{ action: 'accept', operations: [{ addCommunity: '9:9' }, { prependAsPath: [65001, 65001] }, { setPriority: 100 }] }]);
  const a0 = makeAttrs({ asPath: [asSequence(65002)] });
  const out = p.evaluate(parsePrefix('10.0.0.0/24'), a0, { peerType: 'ebgp', fromPeer: true })!;
  t.same(comms(out), ['9:9']);
  t.equal(formatAsPath(out.asPath), '65001 65001 65002', 'prepended in the order listed');
  t.equal(out.localPref, PRIORITY_BASE - 100, "priority as LOCAL_PREF, Calico's 2^31-1 - priority");
  t.equal(p.evaluate(parsePrefix('10.0.1.0/24'), a0, { peerType: 'ebgp', fromPeer: true }), out, 'shared sets stay shared');
});

t.test('importer: newer BGPFilter fields become a route policy; bad ones refused by name', async (t) => {
  const doc = (kind: string, spec: string, name: string) => `apiVersion: projectcalico.org/v3\nkind: ${kind}\nmetadata: { name: ${name} }\nspec:\n${spec}`;
  const text = [
    doc('BGPPeer', '  peerIP: 10.0.0.1\n  asNumber: 65001\n  filters: [f]\n', 'tor'),
    doc('BGPFilter', `  exportV4:
  - { cidr: 10.1.0.0/16, matchOperator: NotIn, action: Reject }
  - { cidr: 10.1.1.0/24, matchOperator: Equal, peerType: eBGP, action: Accept, operations: [{ addCommunity: { value: "65000:1" } }, { prependASPath: { prefix: [64512, 64512] } }] }
  - { communities: { values: ["65000:9:9"] }, asPathPrefix: [65002], priority: 10, source: RemotePeers, action: Reject }
  importV4:
  - { action: Accept, operations: [{ setPriority: { value: 50 } }] }
`, 'f'),
  ].join('---\n');
  const r = importCalico(text, 'p.yaml', 'n');
  t.same(r.peers[0]!.import, undefined, 'no prefix lists');
  t.same(r.peers[0]!.policy, {
    export: [
      { action: 'reject', prefix: { cidr: '10.1.0.0/16', exact: false, negate: true, ge: 16, le: 32 } },
      { action: 'accept', prefix: { cidr: '10.1.1.0/24', exact: true, negate: false }, peerType: 'ebgp', operations: [{ addCommunity: '65000:1' }, { prependAsPath: [64512, 64512] }] },
      { action: 'reject', prefix: { cidr: '0.0.0.0/0', exact: false }, remotePeersOnly: true, community: '65000:9:9', asPathPrefix: [65002], priority: 10 },
    ],
    import: [{ action: 'accept', prefix: { cidr: '0.0.0.0/0', exact: false }, operations: [{ setPriority: 50 }] }],
  });
  t.same(r.warnings.filter((w) => /peerType|communities|asPathPrefix|priority|operations|source/.test(w)), [], 'honoured: no warnings');
  t.throws(() => importCalico(text.replace('peerType: eBGP', 'peerType: external'), 'p.yaml', 'n'), { message: /spec\.exportV4\[1\]\.peerType: must be eBGP or iBGP, got "external"/ });
  t.throws(() => importCalico(text.replace('action: Reject }\n  importV4', 'action: Reject, operations: [{ setPriority: { value: 5 } }] }\n  importV4'), 'p.yaml', 'n'),
    { message: /spec\.exportV4\[2\]\.operations: only valid with action Accept/ });
  t.throws(() => importCalico(text.replace('addCommunity: { value: "65000:1" }', 'addCommunity: { value: "x" }'), 'p.yaml', 'n'), { message: /operations\[0\]\.addCommunity\.value: "x" is not a community/ });
});

const { mk, peer } = loopbackSpeakers(t);

t.test('on the wire: export operations and rejects, import priority and NotIn', async (t) => {
  const exportPolicy: PolicyRule[] = [
    { prefix: { cidr: '10.6.0.0/16', exact: false }, community: '7:7', action: 'reject' },
    { prefix: { cidr: '10.6.1.0/24', exact: true }, peerType: 'ibgp', action: 'reject' },
    { prefix: { cidr: '10.6.1.0/24', exact: true }, peerType: 'ebgp', action: 'accept', operations: [{ addCommunity: '65051:1' }, { prependAsPath: [65051, 65051] }] },
  ];
  const a = mk(51, 65051, [peer(52, 65052, { policy: { export: exportPolicy } }), peer(53, 65051, { policy: { export: exportPolicy } })]);
  const b = mk(52, 65052, [peer(51, 65051, { policy: { import: [
    { prefix: { cidr: '10.6.0.0/16', exact: false, negate: true }, action: 'reject' },
    { action: 'accept', operations: [{ setPriority: 20 }] },
  ] } })]);
  const c = mk(53, 65051, [peer(51, 65051)]);
  a.announce('10.6.1.0/24');
  a.announce('10.6.2.0/24', { communities: [7 * 65536 + 7] });
  a.announce('10.6.3.0/24');
  a.announce('10.7.0.0/24');
  await Promise.all([a, b, c].map((s) => s.start()));
  const best = (s: Speaker, p: string) => s.rib.best(parsePrefix(p));
  await waitFor(() => best(b, '10.6.1.0/24') && best(b, '10.6.3.0/24') && best(c, '10.6.3.0/24') && b.peers()[0]!.prefixes.received === 3, 'routes arrive');
  const r1 = best(b, '10.6.1.0/24')!;
  t.same(comms(r1.attrs), ['65051:1'], 'eBGP peer: the added community');
  t.equal(formatAsPath(r1.attrs.asPath), '65051 65051 65051', 'prepended twice, then our AS on eBGP export');
  t.equal(best(c, '10.6.1.0/24'), undefined, 'iBGP peer: the peerType rule rejects it');
  t.equal(best(b, '10.6.2.0/24'), undefined, 'the community rule rejects 10.6.2.0/24');
  t.equal(best(c, '10.6.2.0/24'), undefined);
  t.equal(b.rib.paths(parsePrefix('10.7.0.0/24')).length, 0, 'import NotIn 10.6.0.0/16 rejects 10.7.0.0/24 (held, not accepted)');
  t.equal(b.peers()[0]!.prefixes.accepted, 2);
  t.equal(best(b, '10.6.3.0/24')!.attrs.localPref, PRIORITY_BASE - 20, 'import setPriority: LOCAL_PREF');
});
