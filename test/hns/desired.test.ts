// Desired state: config validation, and remote routes kept from the RIB's change feed.
import t from 'tap';
import { RemoteRouteTable, buildDesired } from '../../src/hns/desired.ts';
import { parseIP, parsePrefix } from '../../src/net/ip.ts';
import { makeAttrs } from '../../src/rib/attrs.ts';
import type { PeerInfo } from '../../src/rib/bestpath.ts';
import { Rib } from '../../src/rib/rib.ts';
import { config, desired } from './helpers.ts';

t.test('config errors name the field', async (t) => {
  const build = (c: object, localBlocks: string[] = []) => () => buildDesired({ config: { ...config('overlay'), ...c } as never, localBlocks, remoteRoutes: [] });
  t.throws(build({ mode: 'nat' }), /mode: must be l2bridge, l2tunnel or overlay/);
  t.throws(build({ vni: 4095 }), /vni: must be a whole number 4096\.\.65535/);
  t.throws(build({ vni: undefined }), /vni: overlay mode needs a VNI/);
  t.throws(build({ drMac: 'zz' }), /drMac: not a MAC address/);
  t.throws(build({ network: '' }), /network: a network name is required/);
  t.throws(build({ pools: [{ cidr: '10.0.0.0/16', gateway: 'fd00::1' }] }), /pools\[0\]\.gateway: fd00::1 is not inside the pool 10\.0\.0\.0\/16/);
  t.throws(build({ pools: [{ cidr: '10.0.0.1/16', gateway: '10.0.0.1' }] }), /pools\[0\]\.cidr: .*host bits set/);
  t.throws(build({ pools: [{ cidr: '10.0.0.0/16', gateway: '10.0.0.1' }, { cidr: '10.0.5.0/24', gateway: '10.0.5.1' }] }), /pools: 10\.0\.0\.0\/16 and 10\.0\.5\.0\/24 overlap/);
  t.throws(build({}, ['10.0.1.0/26', '10.0.1.32/27']), /local blocks 10\.0\.1\.0\/26 and 10\.0\.1\.32\/27 overlap/);
  t.throws(build({}, ['192.168.1.0/26']), /local block 192\.168\.1\.0\/26: inside no configured pool/);
  t.throws(build({ ownedPrefixes: ['0.0.0.0/0'] }), /wider than a \/8/);
});

t.test('no management vNIC known: remote routes wait, listed, and the rest of the state is still built', async (t) => {
  const d = buildDesired({ config: { ...config('l2bridge'), adapter: undefined }, localBlocks: ['10.0.1.0/26'], remoteRoutes: [{ prefix: '10.0.5.0/26', nextHop: '192.168.1.1' }] });
  t.same(d.hostRoutes, [], 'no host route without an interface');
  t.match(d.ignored, [{ prefix: '10.0.5.0/26', reason: /no management vNIC known/ }]);
  t.equal(d.subnets.length, 1, 'the local block is still programmed');
});

t.test('IPv6 pools: ::/0 gateway route, /128 blocks without flags', async (t) => {
  const d = buildDesired({
    config: { ...config('l2bridge'), pools: [{ cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }], ownedPrefixes: [] },
    localBlocks: ['fd00:10::/122', 'fd00:10::1:0/128'],
    remoteRoutes: [{ prefix: 'fd00:10::2:0/122', nextHop: 'fd00:201::2' }],
  });
  t.same(d.subnets[0].routes, [{ NextHop: 'fd00:10::1', DestinationPrefix: '::/0' }]);
  t.same(d.subnets[0].ipSubnets.map((i) => `${i.key}=${i.flags}`), ['fd00:10::/122=3', 'fd00:10::1:0/128=0']);
  t.same(d.hostRoutes.map((h) => h.route), [{ DestinationPrefix: 'fd00:10::2:0/122', NextHop: 'fd00:201::2', InterfaceAlias: 'vEthernet (Ethernet)', RouteMetric: 271 }]);
});

t.test('remote routes from the RIB change feed', async (t) => {
  const rib = new Rib({ trie: { rootBits: 8 } });
  const peer = (n: number): PeerInfo => ({ type: 'ibgp', routerId: n, address: parseIP(`192.168.1.${n}`), asn: 65000 });
  rib.addSource('a', peer(1));
  rib.addSource('b', peer(2));
  rib.addSource('local', { type: 'local', routerId: 9, address: null, asn: 65000 });
  const table = new RemoteRouteTable();
  const changed: boolean[] = [];
  rib.subscribe((batch) => changed.push(table.apply(batch)));
  const via = (n: number) => makeAttrs({ nextHop: parseIP(`192.168.1.${n}`) });
  rib.update('a', parsePrefix('10.0.5.0/26'), via(1));
  rib.update('b', parsePrefix('10.0.6.7/32'), via(2));
  rib.update('local', parsePrefix('10.0.1.0/26'), makeAttrs({}));
  rib.flush();
  const routes = () => [...table.values()].map((r) => `${r.prefix}=${r.nextHop}`).sort();
  t.same(routes(), ['10.0.5.0/26=192.168.1.1', '10.0.6.7/32=192.168.1.2'], 'our own blocks are not remote');
  // The block moves to another host; then the /32 is withdrawn.
  rib.withdraw('a', parsePrefix('10.0.5.0/26'));
  rib.update('b', parsePrefix('10.0.5.0/26'), via(2));
  rib.flush();
  t.same(routes(), ['10.0.5.0/26=192.168.1.2', '10.0.6.7/32=192.168.1.2']);
  rib.withdraw('b', parsePrefix('10.0.6.7/32'));
  rib.flush();
  t.same(routes(), ['10.0.5.0/26=192.168.1.2']);
  t.same(changed, [true, true, true]);
  // Straight into the desired state.
  const d = buildDesired({ config: config('overlay'), localBlocks: ['10.0.1.0/26'], remoteRoutes: table.values() });
  t.same(d.remoteSubnetRoutes.map((r) => r.sig), ['10.0.5.0/26|4096|192.168.1.2|01-02-03-04-05-06']);
});

t.test('the gateway is shared by every block of a pool; each pool has its own Subnet', async (t) => {
  const d = desired('l2tunnel', ['10.0.123.0/26', '10.0.200.0/26', '10.9.0.4/30']);
  t.same(d.subnets.map((s) => [s.key, s.routes[0].NextHop, s.ipSubnets.length]), [['10.0.0.0/16', '10.0.0.1', 2], ['10.9.0.0/24', '10.9.0.1', 1]]);
  t.equal(d.networkType, 'L2Tunnel');
});
