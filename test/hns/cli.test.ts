// `blockspeaker hns plan`, spawned for real: JSON ops, --emit-actual round trip to [], --desired
// files, Get-HnsNetwork JSON with foreign objects, blocked ops on stderr, and errors that name the flag.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HnsOp } from '../../src/hns/model.ts';
import { summary } from './helpers.ts';

import { blockspeakerBin as bin, runCli } from '../kit/cli.ts';

const cli = (args: string[]) => runCli(['hns', 'plan', ...args]);
const fixture = new URL('../../fixtures/hns/actual-l2bridge.json', import.meta.url).pathname;

const dir = mkdtempSync(join(tmpdir(), 'hns-cli-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const l2Flags = [
  '--mode', 'l2bridge', '--network', 'pods', '--adapter', 'Ethernet',
  '--pool', '10.0.0.0/16=10.0.0.1', '--micropool', '10.9.0.0/24=10.9.0.1',
  '--local-block', '10.0.123.0/26', '--local-block', '10.0.200.0/26', '--local-block', '10.9.0.4/30', '--local-block', '10.9.0.9/32',
  '--remote', '10.0.5.0/26=192.168.1.5', '--remote', '10.0.7.9/32=192.168.1.7',
];

t.test('plan from nothing, --emit-actual, plan again: []', async (t) => {
  const out = join(dir, 'l2.json');
  const r = await cli([...l2Flags, '--emit-actual', out]);
  t.equal(r.code, 0, r.stderr);
  const ops = JSON.parse(r.stdout) as HnsOp[];
  t.same(summary(ops), ['create-network pods', 'add-host-route 10.0.5.0/26 via 192.168.1.5', 'add-host-route 10.0.7.9/32 via 192.168.1.7']);
  const again = await cli([...l2Flags, '--actual', out]);
  t.equal(again.code, 0, again.stderr);
  t.equal(again.stdout, '[]\n', 'nothing left to do');

  // The same desired state written as a YAML file gives the same plan.
  const yaml = join(dir, 'desired.yaml');
  writeFileSync(yaml, [
    'mode: l2bridge', 'network: pods', 'adapter: Ethernet',
    'pools:', '  - { cidr: 10.0.0.0/16, gateway: 10.0.0.1 }', '  - { cidr: 10.9.0.0/24, gateway: 10.9.0.1, reservation: { kind: none } }',
    'localBlocks: [10.0.123.0/26, 10.0.200.0/26, 10.9.0.4/30, 10.9.0.9/32]',
    'remoteRoutes:', '  - { prefix: 10.0.5.0/26, nextHop: 192.168.1.5 }', '  - 10.0.7.9/32=192.168.1.7', '',
  ].join('\n'));
  const fromFile = await cli(['--desired', yaml]);
  t.equal(fromFile.stdout, r.stdout, '--desired FILE and the flags agree');
  t.equal((await cli(['--desired', yaml, '--actual', out])).stdout, '[]\n');
});

t.test('overlay: the network with its RemoteSubnetRoute policy; the round trip ends in []', async (t) => {
  const flags = ['--mode', 'overlay', '--network', 'vxlan0', '--vni', '4096', '--dr-mac', '01:02:03:04:05:06', '--pool', '10.0.0.0/16=10.0.0.1',
    '--local-block', '10.0.123.0/26', '--local-block', '10.0.200.0/26', '--remote', '10.0.5.0/26=192.168.1.5', '--provider-address', '192.168.1.2'];
  const r = await cli(flags);
  t.equal(r.code, 0, r.stderr);
  const ops = JSON.parse(r.stdout) as HnsOp[];
  t.equal(ops[0].op, 'create-network');
  t.match(ops[0].body, { Name: 'vxlan0', Type: 'Overlay' });
  t.ok(ops.some((o) => o.op === 'add-policy' && JSON.stringify(o.body).includes('"DestinationPrefix":"10.0.5.0/26","IsolationId":4096,"ProviderAddress":"192.168.1.5","DistributedRouterMacAddress":"01-02-03-04-05-06"')),
    'a RemoteSubnetRoute with the PA and the DR MAC');
  const out = join(dir, 'ov.json');
  t.equal((await cli([...flags, '--emit-actual', out])).code, 0);
  t.equal((await cli([...flags, '--actual', out])).stdout, '[]\n');
});

t.test('Get-HnsNetwork JSON with a foreign subnet: only ours change', async (t) => {
  const r = await cli([...l2Flags, '--actual', fixture, '--emit-actual', join(dir, 'fx.json')]);
  t.equal(r.code, 0, r.stderr);
  const ops = JSON.parse(r.stdout) as HnsOp[];
  t.same(summary(ops), [
    'remove-ip-subnet 10.0.77.0/26',
    'add-subnet 10.9.0.0/24',
    'add-ip-subnet 10.0.200.0/26',
    'add-host-route 10.0.5.0/26 via 192.168.1.5',
    'add-host-route 10.0.7.9/32 via 192.168.1.7',
  ]);
  t.same((ops[0].body as { Settings: unknown }).Settings, { SubnetId: '4E6A8C02-3D5F-4B7C-8E9A-1F2B3C4D5E60', IpSubnets: [{ ID: '6A8C0E24-5F7B-4D9E-8A1C-3B4D5E6F7A80', IpAddressPrefix: '10.0.77.0/26' }] });
  t.notMatch(r.stdout, /192\.168\.50\./, 'the foreign subnet is never named');
  const after = JSON.parse(readFileSync(join(dir, 'fx.json'), 'utf8'));
  t.equal(after.Networks[0].Ipams[0].Subnets[0].IpAddressPrefix, '192.168.50.0/24', 'and is still there');
  t.equal((await cli([...l2Flags, '--actual', join(dir, 'fx.json')])).stdout, '[]\n');
});

t.test('an ip-subnet an endpoint uses is reported, not removed', async (t) => {
  const net = JSON.parse(readFileSync(fixture, 'utf8'));
  const file = join(dir, 'with-endpoint.json');
  writeFileSync(file, JSON.stringify({ Networks: [net], Endpoints: [{ ID: 'E1', HostComputeNetwork: net.ID, IpConfigurations: [{ IpAddress: '10.0.77.9', PrefixLength: 26 }] }], HostRoutes: [] }));
  const r = await cli([...l2Flags, '--actual', file]);
  t.equal(r.code, 0);
  t.notMatch(r.stdout, /remove-ip-subnet/);
  t.match(r.stderr, /blocked remove-ip-subnet 10\.0\.77\.0\/26: 1 endpoint\(s\) still use it/);
});

t.test('errors name the flag or value', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--network', 'x'], /--mode is required/],
    [['--mode', 'nat', '--network', 'x'], /--mode must be l2bridge, l2tunnel or overlay, got "nat"/],
    [['--mode', 'l2bridge', '--network', 'x', '--pool', '10.0.0.0/16'], /--pool expects CIDR=GATEWAY, got "10\.0\.0\.0\/16"/],
    [['--mode', 'l2bridge', '--network', 'x', '--pool', '10.0.0.0/16=10.0.0.300'], /--pool 10\.0\.0\.0\/16=10\.0\.0\.300: invalid IP address/],
    [['--mode', 'l2bridge', '--network', 'x', '--pool', '10.0.0.0/16=10.0.0.1', '--local-block', '10.1.0.0/26'], /local block 10\.1\.0\.0\/26: inside no configured pool/],
    [['--mode', 'l2bridge', '--network', 'x', '--adapter', 'E', '--pool', '10.0.0.0/16=10.0.0.1', '--remote', '172.16.0.0/24=10.1.1.1'], /--remote 172\.16\.0\.0\/24=10\.1\.1\.1: outside the pools and owned prefixes \(add --owned/],
    [['--mode', 'overlay', '--network', 'x', '--vni', '4096', '--pool', '10.0.0.0/16=10.0.0.1'], /--mode overlay needs --dr-mac/],
    [['--mode', 'overlay', '--network', 'x', '--vni', '70000', '--dr-mac', '01-02-03-04-05-06'], /--vni must be between 4096 and 65535, got 70000/],
    [['--desired', fixture, '--mode', 'l2bridge'], /--desired FILE or as flags, not both \(--mode\)/],
    [['--mode', 'l2bridge', '--network', 'x', '--actual', join(dir, 'nope.json')], /--actual .*nope\.json: ENOENT/],
    [['--mode', 'l2bridge', '--network', 'x', '--actual', bin], /--actual .*: not JSON/],
    [['--mode', 'l2bridge', '--network', 'x', '--bogus'], /Unknown option '--bogus'/],
  ];
  // Four at a time: the machine is shared.
  const results: Awaited<ReturnType<typeof cli>>[] = [];
  for (let i = 0; i < cases.length; i += 4) results.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => cli(args)))));
  results.forEach((r, i) => {
    t.equal(r.code, 2, `exit 2: ${cases[i][0].join(' ')}`);
    t.match(r.stderr, cases[i][1]);
    t.equal(r.stderr.split('\n').filter(Boolean).length, 1, 'one line');
  });
});
