// Desired Linux routes from IPAM's view and the RIB, the ip -j parser, and the batch line/error formats.
import t from 'tap';
import fc from 'fast-check';
import { formatPrefix, parseIP, parsePrefix, prefixEquals, prefixOf, IP } from '../../src/net/ip.ts';
import {
  LinuxConfigError, RemoteRoutes, desiredRoutes, followRib, localBlocksFromView, resolveLinuxConfig,
} from '../../src/linux/desired.ts';
import { parseIpRouteJson } from '../../src/linux/parse.ts';
import { opLine, parseBatchErrors } from '../../src/linux/programmer.ts';
import { describeRoute, routeDelLine, routeSetLine } from '../../src/linux/route.ts';
import { makeAttrs } from '../../src/rib/attrs.ts';
import type { PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib } from '../../src/rib/rib.ts';

const P = parsePrefix;
const ip = parseIP;
const lines = (routes: ReturnType<typeof desiredRoutes>['routes']) => routes.map((r) => routeSetLine('add', r));

t.test('own blocks are blackholes except host-sized ones; remote routes go via their next hop', async (t) => {
  const d = desiredRoutes({
    localBlocks: [P('10.0.123.0/26'), P('10.0.200.0/26'), P('10.0.7.4/30'), P('10.0.9.9/32'), P('fd00::/122'), P('fd00:1::9/128')],
    remote: [
      { prefix: P('10.0.5.0/26'), nextHop: ip('10.201.0.3') },
      { prefix: P('10.0.123.17/32'), nextHop: ip('10.201.0.4') }, // borrowed from our block by another host
      { prefix: P('fd00:2::/122'), nextHop: ip('fd00:201::3') },
    ],
  }, {});
  t.same(lines(d.routes), [
    'route add blackhole 10.0.123.0/26 table 200 proto 181 metric 0',
    'route add blackhole 10.0.200.0/26 table 200 proto 181 metric 0',
    'route add blackhole 10.0.7.4/30 table 200 proto 181 metric 0',
    'route add blackhole fd00::/122 table 200 proto 181 metric 1024',
    'route add 10.0.5.0/26 via 10.201.0.3 table 200 proto 181 metric 0',
    'route add 10.0.123.17/32 via 10.201.0.4 table 200 proto 181 metric 0',
    'route add fd00:2::/122 via fd00:201::3 table 200 proto 181 metric 1024',
  ]);
  t.same(d.skipped, []);
});

t.test('skips what the kernel would refuse or what is ours, with the reason', async (t) => {
  const d = desiredRoutes({
    localBlocks: [P('10.0.0.0/26'), P('10.0.9.9/32')],
    remote: [
      { prefix: P('10.0.0.0/26'), nextHop: ip('10.201.0.3') },
      { prefix: P('10.0.9.9/32'), nextHop: ip('10.201.0.3') },
      { prefix: P('fd00:3::/64'), nextHop: ip('10.201.0.3') },
      { prefix: P('fd00:4::/64'), nextHop: ip('fe80::1') },
      { prefix: P('10.0.8.0/26'), nextHop: ip('10.201.0.2') },
      { prefix: P('10.0.10.0/26'), nextHop: ip('10.201.0.9'), dev: 'bad name' },
      { prefix: P('10.0.11.0/26'), nextHop: ip('10.201.0.9'), onlink: true },
      { prefix: P('fd00:5::/64'), nextHop: ip('fe80::1'), dev: 'eth1' },
      { prefix: P('10.0.12.0/26'), nextHop: ip('fd00:201::3') },
    ],
  }, { nodeAddresses: [ip('10.201.0.2')], metric: 10 });
  t.same(d.skipped.map((s) => `${s.prefix}: ${s.reason}`), [
    '10.0.0.0/26: this host owns the block',
    '10.0.9.9/32: this host owns the block',
    'fd00:3::/64: an IPv6 route cannot use an IPv4 next hop (the kernel refuses RTA_VIA for IPv6)',
    'fd00:4::/64: a link-local next hop needs a device (set dataplane.dev)',
    '10.0.8.0/26: the next hop is this node',
    '10.0.10.0/26: bad device name "bad name"',
    '10.0.11.0/26: onlink needs a device',
  ]);
  t.same(lines(d.routes), [
    'route add blackhole 10.0.0.0/26 table 200 proto 181 metric 10',
    'route add fd00:5::/64 via fe80::1 dev eth1 table 200 proto 181 metric 10',
    'route add 10.0.12.0/26 via inet6 fd00:201::3 table 200 proto 181 metric 10',
  ]);
});

t.test('configured device and onlink apply to every next hop; config is checked', async (t) => {
  const d = desiredRoutes({ localBlocks: [], remote: [{ prefix: P('10.0.5.0/26'), nextHop: ip('10.201.0.3') }] },
    { dev: 'eth0', onlink: true, table: 254, protocol: 99 });
  t.same(lines(d.routes), ['route add 10.0.5.0/26 via 10.201.0.3 dev eth0 onlink table 254 proto 99 metric 0']);
  t.throws(() => resolveLinuxConfig({ table: 255 }), LinuxConfigError);
  t.throws(() => resolveLinuxConfig({ table: 0 }), LinuxConfigError);
  t.throws(() => resolveLinuxConfig({ protocol: 3 }), /0\.\.4 belong to the kernel/);
  t.throws(() => resolveLinuxConfig({ protocol: 256 }), LinuxConfigError);
  t.throws(() => resolveLinuxConfig({ metric: -1 }), LinuxConfigError);
  t.throws(() => resolveLinuxConfig({ dev: 'eth0 onlink' }), LinuxConfigError);
  t.throws(() => resolveLinuxConfig({ onlink: true }), /needs dataplane.dev/);
  t.match(resolveLinuxConfig(), { table: 200, protocol: 181, metric: undefined, onlink: false });
});

t.test('local blocks from an IPAM route view (borrowed addresses held here need no route from us)', async (t) => {
  t.same(localBlocksFromView({ aggregates: ['10.0.1.0/26', 'fd00::/122'], hosts: ['10.0.9.5/32'] }).map(String),
    ['10.0.1.0/26', 'fd00::/122']);
});

t.test('RemoteRoutes follows a real RIB: adds, next-hop moves, withdrawals; local routes are not remote', async (t) => {
  const rib = new Rib({ trie: { rootBits: 8 } });
  const peer = (n: number): PeerInfo => ({ type: 'ibgp', routerId: n, address: ip(`10.201.0.${n}`), asn: 65010 });
  rib.addSource('a', peer(3));
  rib.addSource('b', peer(4));
  rib.addSource('local', { type: 'local', routerId: 2, address: null, asn: 65010 });
  rib.update('a', P('10.0.5.0/26'), makeAttrs({ nextHop: ip('10.201.0.3') }));
  rib.update('local', P('10.0.1.0/26'), makeAttrs({})); // our own announcement
  const remote = new RemoteRoutes();
  let changes = 0;
  const stop = followRib(rib, remote, () => changes++);
  const view = () => [...remote.values()].map((r) => `${r.prefix} ${r.nextHop}`).sort();
  t.same(view(), ['10.0.5.0/26 10.201.0.3']);
  t.equal(changes, 1, 'the snapshot counts as a change');

  rib.update('b', P('10.0.6.7/32'), makeAttrs({ nextHop: ip('10.201.0.4') }));
  rib.withdraw('a', P('10.0.5.0/26'));
  rib.update('b', P('10.0.5.0/26'), makeAttrs({ nextHop: ip('10.201.0.4') }));
  rib.flush();
  t.same(view(), ['10.0.5.0/26 10.201.0.4', '10.0.6.7/32 10.201.0.4'], 'the block moved to another host');
  t.equal(changes, 2, 'one batch, one change');

  rib.update('local', P('10.0.9.0/26'), makeAttrs({}));
  rib.flush();
  t.equal(changes, 2, 'a local announcement changes nothing remote');
  rib.withdraw('b', P('10.0.6.7/32'));
  rib.flush();
  t.same(view(), ['10.0.5.0/26 10.201.0.4']);
  t.equal(changes, 3);
  stop();
});

t.test('ip -N -j route show: every shape we meet', async (t) => {
  // Captured from iproute2 6.1 in a namespace (table 200).
  const v4 = JSON.stringify([
    { dst: 'default', gateway: '192.0.2.9', dev: 'd0', protocol: '186', flags: [] },
    { type: '6', dst: '10.0.0.0/26', protocol: '181', flags: [] },
    { dst: '10.0.1.0/26', gateway: '192.0.2.9', dev: 'd0', protocol: '181', flags: [] },
    { dst: '10.0.3.0/24', gateway: '198.51.100.1', dev: 'd0', protocol: '181', metric: 5, flags: ['onlink'] },
    { dst: '10.0.4.0/24', via: { family: 'inet6', host: '2001:db8::9' }, dev: 'd0', protocol: '181', flags: [] },
    { dst: '10.5.5.5', gateway: '192.0.2.9', dev: 'd0', protocol: '186', flags: [] },
    { dst: '10.9.0.0/24', dev: 'd0', protocol: '4', scope: '253', flags: [] },
    { dst: '10.9.1.0/24', protocol: '181', flags: [], nexthops: [{ gateway: '192.0.2.9', dev: 'd0', weight: 1 }] },
    { type: '7', dst: '10.9.2.0/24', protocol: 'bird', flags: [] },
    { dst: 'not-an-address', protocol: '181' },
  ]);
  const { routes, unparsed } = parseIpRouteJson(v4, 4, 200);
  t.same(routes.map(describeRoute), [
    '0.0.0.0/0 via 192.0.2.9 dev d0 table 200 proto 186 metric 0',
    'blackhole 10.0.0.0/26 table 200 proto 181 metric 0',
    '10.0.1.0/26 via 192.0.2.9 dev d0 table 200 proto 181 metric 0',
    '10.0.3.0/24 via 198.51.100.1 dev d0 onlink table 200 proto 181 metric 5',
    '10.0.4.0/24 via inet6 2001:db8::9 dev d0 table 200 proto 181 metric 0',
    '10.5.5.5/32 via 192.0.2.9 dev d0 table 200 proto 186 metric 0',
    '10.9.0.0/24 (device route) dev d0 table 200 proto 4 metric 0',
    '10.9.1.0/24 (multipath) table 200 proto 181 metric 0',
    '10.9.2.0/24 (unreachable) table 200 proto 12 metric 0',
  ]);
  t.equal(unparsed.length, 1);
  const v6 = JSON.stringify([
    { type: 'blackhole', dst: 'fd00::/64', dev: 'lo', protocol: '181', metric: 1024, flags: [], pref: 'medium' },
    { dst: '2001:db8:5::5', gateway: '2001:db8::9', dev: 'd0', protocol: '186', metric: 1024, flags: [], pref: 'medium' },
    { dst: 'default', gateway: 'fe80::1', dev: 'd0', protocol: 'ra', metric: 1024, flags: [] },
  ]);
  t.same(parseIpRouteJson(v6, 6, 200).routes.map(describeRoute), [
    'blackhole fd00::/64 table 200 proto 181 metric 1024',
    '2001:db8:5::5/128 via 2001:db8::9 dev d0 table 200 proto 186 metric 1024',
    '::/0 via fe80::1 dev d0 table 200 proto 9 metric 1024',
  ]);
  t.same(parseIpRouteJson('', 4, 200).routes, [], 'empty output is an empty table');
  const bad = parseIpRouteJson(JSON.stringify([{ dst: '10.0.0.1/24' }, { dst: '10.0.0.256' }, { dst: '1.2.3.4/33' }]), 4, 200);
  t.same([bad.routes.length, bad.unparsed.length], [0, 3], 'host bits, bad octets and lengths are refused');
  // The dotted-quad fast path agrees with the general parser.
  fc.assert(fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), (w, len) => {
    const p = prefixOf(new IP(4, w >>> 0), len);
    const text = len === 32 ? formatPrefix(p).slice(0, -3) : formatPrefix(p);
    const got = parseIpRouteJson(JSON.stringify([{ dst: text, type: 'blackhole' }]), 4, 200).routes[0];
    return prefixEquals(got.dst, len === 32 ? p : parsePrefix(text));
  }), { numRuns: 3000 });
  t.throws(() => parseIpRouteJson('{}', 4, 200));
});

t.test('batch lines and the error report of ip -force -batch', async (t) => {
  const r = desiredRoutes({ localBlocks: [P('10.0.0.0/26')], remote: [] }, {}).routes[0];
  t.equal(opLine({ op: 'delete', route: r }), 'route del 10.0.0.0/26 table 200 proto 181 metric 0');
  t.equal(routeDelLine(r), opLine({ op: 'delete', route: r }));
  t.equal(opLine({ op: 'replace', route: r, was: r }), 'route replace blackhole 10.0.0.0/26 table 200 proto 181 metric 0');
  const stderr = [
    'Error: Nexthop has invalid gateway.',
    'Command failed -:2',
    'RTNETLINK answers: File exists',
    'Command failed -:3',
    'Warning: something',
    'Error: IPv6 does not support RTA_VIA attribute.',
    'Command failed -:10',
    '',
  ].join('\n');
  t.same([...parseBatchErrors(stderr)], [
    [2, 'Error: Nexthop has invalid gateway.'],
    [3, 'RTNETLINK answers: File exists'],
    [10, 'Warning: something; Error: IPv6 does not support RTA_VIA attribute.'],
  ]);
});
