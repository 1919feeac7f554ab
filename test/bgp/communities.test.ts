// Communities on export (Calico prefixAdvertisements): parsing, the tagger against a plain oracle (every
// advertisement whose cidr holds the route adds its communities), the config checks, and two of our speakers on
// loopback: the receiver holds the standard and large communities the sender's advertisements put on its routes,
// and a reconfiguration changes them on the wire.
import t from 'tap';
import fc from 'fast-check';
import { CommunityTagger, parseCommunity, formatCommunity } from '../../src/bgp/communities.ts';
import { resolveCommunities } from '../../src/config/communities.ts';
import { parseConfig } from '../../src/config/config.ts';
import { formatPrefix, parsePrefix, prefixOf, IP } from '../../src/net/ip.ts';
import { makeAttrs } from '../../src/rib/attrs.ts';
import { waitFor } from './raw-peer.ts';
import { communitiesOf, loopbackSpeakers } from './loopback.ts';

t.test('community values: aa:nn and aa:nn:mm, with clear errors', async (t) => {
  t.same(parseCommunity('65001:100'), { kind: 'standard', value: 65001 * 65536 + 100 });
  t.same(parseCommunity('4200000000:1:2'), { kind: 'large', value: [4200000000, 1, 2] });
  t.equal(formatCommunity(parseCommunity('0:65535')), '0:65535');
  t.throws(() => parseCommunity('65536:1'), /standard community "65536:1": both numbers must be 0\.\.65535/);
  t.throws(() => parseCommunity('4294967296:1:1'), /large community/);
  t.throws(() => parseCommunity('no-export'), /not a community: expected aa:nn \(standard\) or aa:nn:mm \(large\)/);
});

t.test('the tagger adds the communities of every advertisement holding the route (property, against an oracle)', async (t) => {
  const cidr = fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 8, max: 24 })).map(([a, len]) => formatPrefix(prefixOf(new IP(4, (10 << 24 | a << 16) >>> 0, 0, 0, 0), len)));
  const value = fc.oneof(fc.tuple(fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 65535 })).map(([a, b]) => `${a}:${b}`),
    fc.tuple(fc.nat(), fc.nat(), fc.nat()).map((x) => x.join(':')));
  const ad = fc.record({ cidr, communities: fc.array(value, { maxLength: 3 }) });
  const route = fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 8, max: 32 }))
    .map(([a, b, len]) => prefixOf(new IP(4, (10 << 24 | a << 16 | b << 8) >>> 0, 0, 0, 0), len));
  fc.assert(fc.property(fc.array(ad, { maxLength: 5 }), route, fc.array(value, { maxLength: 2 }), (ads, prefix, already) => {
    const base = makeAttrs({ communities: already.filter((v) => v.split(':').length === 2).map((v) => parseCommunity(v).value as number) });
    const got = new CommunityTagger(ads).tag(prefix, base);
    // Oracle: string containment by address arithmetic, sets of text values.
    const inside = (c: string) => {
      const p = parsePrefix(c);
      return p.len <= prefix.len && (prefix.ip.w0 >>> (32 - p.len) === p.ip.w0 >>> (32 - p.len) || p.len === 0);
    };
    const want = new Set(already.filter((v) => v.split(':').length === 2));
    for (const a of ads) if (inside(a.cidr)) for (const v of a.communities) want.add(v);
    const have = new Set(communitiesOf(got));
    return [...want].sort().join() === [...have].sort().join();
  }), { numRuns: 300 });
  const tg = new CommunityTagger([{ cidr: '10.0.0.0/16', communities: ['1:1'] }]);
  const a = makeAttrs({});
  t.equal(tg.tag(parsePrefix('10.0.1.0/26'), a), tg.tag(parsePrefix('10.0.2.0/26'), a), 'routes that shared attributes still share them (UPDATE packing)');
  t.equal(tg.tag(parsePrefix('10.1.0.0/26'), a), a, 'a route outside every cidr is untouched');
});

t.test('names resolve through communities; bad input names the field', async (t) => {
  const r = resolveCommunities([{ name: 'big', value: '63400:300:100' }], [{ cidr: '172.218.4.0/26', communities: ['big', '63400:120', 'big'] }]);
  t.same(r.issues, []);
  t.same(r.ads, [{ cidr: '172.218.4.0/26', communities: ['63400:300:100', '63400:120'] }], "Calico's documented example, duplicates dropped");
  const bad = resolveCommunities([{ name: 'x', value: '1:2:3:4' }, { name: '1:2', value: '1:2' }], [{ cidr: '10.0.0.1/8', communities: ['nope'] }]);
  t.same(bad.issues.map((i) => i.path.join('.')), ['communities.0.value', 'communities.1.name', 'prefixAdvertisements.0.cidr']);
  const cfg = (bgp: string) => () => parseConfig(`node: { name: n }\nbgp:\n  asn: 65010\n  routerId: 10.0.0.1\n${bgp}`);
  t.throws(cfg('  prefixAdvertisements: [{ cidr: 10.0.0.0/16, communities: [gold] }]\n'),
    /bgp\.prefixAdvertisements\[0\]\.communities\[0\]: "gold" is neither a value/);
  const ok = cfg('  communities: [{ name: gold, value: "65010:1" }]\n  prefixAdvertisements: [{ cidr: 10.0.0.0/16, communities: [gold, "65010:2:3"] }]\n')();
  t.same(ok.bgp!.prefixAdvertisements, [{ cidr: '10.0.0.0/16', communities: ['65010:1', '65010:2:3'] }]);
});

const { cfgOf, mk, peer } = loopbackSpeakers(t);

t.test('over real sessions: the receiver holds the communities, a reconfiguration changes them', async (t) => {
  const ads = [{ cidr: '10.20.0.0/16', communities: ['65020:100', '65020:1:2'] }, { cidr: '10.20.5.0/24', communities: ['65020:200'] }];
  const a = mk(21, 65020, [peer(22, 65030)], { prefixAdvertisements: ads });
  const b = mk(22, 65030, [peer(21, 65020)]);
  for (const p of ['10.20.5.0/26', '10.20.9.0/26', '10.30.0.0/26']) a.announce(p);
  await Promise.all([a.start(), b.start()]);
  const comm = (p: string) => {
    const r = b.rib.best(parsePrefix(p));
    return r ? communitiesOf(r.attrs) : undefined;
  };
  await waitFor(() => comm('10.20.5.0/26') && comm('10.20.9.0/26') && comm('10.30.0.0/26'), 'routes arrive');
  t.same(comm('10.20.5.0/26'), ['65020:100', '65020:200', '65020:1:2'], 'a longer prefix of both cidrs gets both advertisements\' communities');
  t.same(comm('10.20.9.0/26'), ['65020:100', '65020:1:2']);
  t.same(comm('10.30.0.0/26'), [], 'outside every cidr: none');
  await a.reconfigure({ ...cfgOf(21, 65020, [peer(22, 65030)]), prefixAdvertisements: [{ cidr: '10.30.0.0/16', communities: ['65020:300'] }] });
  await waitFor(() => comm('10.30.0.0/26')?.length === 1 && comm('10.20.5.0/26')?.length === 0, 'reconfigured communities arrive');
  t.same(comm('10.30.0.0/26'), ['65020:300']);
});
