// `blockspeaker cni conflist`: the containerd network config list for Windows, per flavor.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { buildConflist } from '../../src/hns/conflist.ts';

const base = { network: 'cbr0', serviceCidr: '10.96.0.0/12', nodeSubnet: '192.168.10.0/24', nodeIP: '192.168.10.5' };
const pools = [
  { cidr: '10.244.0.0/16', natOutgoing: true }, { cidr: '10.250.0.0/24', natOutgoing: false },
  { cidr: '10.251.0.0/24', natOutgoing: true, disabled: true }, { cidr: 'fd00:244::/64', natOutgoing: false },
];
const v2Policies = [
  { Name: 'EndpointPolicy', Value: { Type: 'OutBoundNAT', Settings: { Exceptions: ['10.244.0.0/16', '10.250.0.0/24', '10.96.0.0/12', '192.168.10.0/24'] } } },
  { Name: 'EndpointPolicy', Value: { Type: 'SDNRoute', Settings: { DestinationPrefix: '10.96.0.0/12', NeedEncap: true } } },
  { Name: 'EndpointPolicy', Value: { Type: 'SDNRoute', Settings: { DestinationPrefix: '192.168.10.5/32', NeedEncap: true } } },
];

t.test('blockspeaker (default flavor): the main plugin, names the network and asks for portMappings and dns', async (t) => {
  t.same(buildConflist({ flavor: 'blockspeaker', ...base, pools, dnsServers: ['10.96.0.10'], dnsSearch: ['svc.cluster.local'] }), {
    cniVersion: '1.0.0', name: 'cbr0',
    plugins: [{ type: 'blockspeaker', name: 'cbr0', capabilities: { portMappings: true, dns: true }, dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] } }],
  });
  const sock = buildConflist({ flavor: 'blockspeaker', ...base, pools, socket: 'C:\\ProgramData\\bs.sock' });
  t.equal((sock.plugins as { socket?: string }[])[0]!.socket, 'C:\\ProgramData\\bs.sock', 'a non-default socket is carried');
  t.notOk('ipam' in (sock.plugins as object[])[0]!, 'no ipam section: the daemon assigns');
});

t.test('win-bridge: apiVersion 2, ipam, V2 OutBoundNAT exceptions (IPv4 only), SDNRoute policies', async (t) => {
  const c = buildConflist({ flavor: 'win-bridge', ...base, pools });
  t.same(c, {
    cniVersion: '0.3.1', name: 'cbr0',
    plugins: [{
      type: 'win-bridge', name: 'cbr0', capabilities: { portMappings: true, dns: true }, apiVersion: 2, ipam: { type: 'blockspeaker-cni' },
      policies: v2Policies,
    }],
  });
  const noNat = buildConflist({ flavor: 'win-overlay', network: 'vxlan0', serviceCidr: '10.96.0.0/12', nodeSubnet: '192.168.10.0/24', pools: [{ cidr: '10.244.0.0/16', natOutgoing: false }] });
  const p = (noNat.plugins as { type: string; apiVersion: number; policies: { Value: { Type: string } }[] }[])[0]!;
  t.equal(p.type, 'win-overlay');
  t.equal(p.apiVersion, 2);
  t.same(p.policies.map((x) => x.Value.Type), ['SDNRoute'], 'no pool asks for NAT: no OutBoundNAT at all');
  t.throws(() => buildConflist({ flavor: 'win-bridge', network: 'n', serviceCidr: '10.96.0.1/12', nodeSubnet: '192.168.10.0/24', pools: [] }), /serviceCidr: .*host bits/);
  t.throws(() => buildConflist({ flavor: 'win-nat' as never, ...base, pools: [] }), /flavor: must be one of blockspeaker, win-bridge, win-overlay, sdnbridge/);
  t.throws(() => buildConflist({ flavor: 'win-bridge', ...base, nodeIP: 'nope', pools: [] }), /^nodeIP: invalid IP address "nope"/);
});

t.test('sdnbridge: AdditionalArgs, its dns keys, dual stack through enableDualStack', async (t) => {
  const c = buildConflist({ flavor: 'sdnbridge', ...base, pools, dnsServers: ['10.96.0.10'] });
  t.same(c, {
    cniVersion: '0.4.0', name: 'cbr0',
    plugins: [{
      type: 'sdnbridge', name: 'cbr0', capabilities: { portMappings: true, dns: true },
      ipam: { type: 'blockspeaker-cni', num4: 1, num6: 1 }, optionalFlags: { enableDualStack: true },
      dns: { Nameservers: ['10.96.0.10'], Search: [] },
      AdditionalArgs: v2Policies,
    }],
  });
  const v4 = buildConflist({ flavor: 'sdnbridge', ...base, pools: pools.slice(0, 2), socket: '/x.sock' });
  const p = (v4.plugins as Record<string, unknown>[])[0]!;
  t.same(p.ipam, { type: 'blockspeaker-cni' }, 'IPv4 only: plain ipam, and no socket (sdnbridge would drop it)');
  t.notOk('optionalFlags' in p);
});

t.test('the CLI reads the node config', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `bs-conflist-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'node.yaml');
  writeFileSync(file, `node: { name: w, os: windows }
ipam: { store: ${join(dir, 's')}, pools: [{ name: p, cidr: 10.244.0.0/16, natOutgoing: true }] }
dataplane: { kind: hns, network: cbr0 }
`);
  const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
  const env = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };
  const r = spawnSync(process.execPath, [bin, 'cni', 'conflist', '--flavor', 'win-bridge', '-c', file, '--service-cidr', '10.96.0.0/12', '--node-subnet', '192.168.1.0/24'], { env, encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  const c = JSON.parse(r.stdout);
  t.equal(c.name, 'cbr0');
  t.same(c.plugins[0].policies[0].Value.Settings.Exceptions, ['10.244.0.0/16', '10.96.0.0/12', '192.168.1.0/24']);
  const main = spawnSync(process.execPath, [bin, 'cni', 'conflist', '--flavor', 'blockspeaker', '-c', file, '--service-cidr', '10.96.0.0/12', '--node-subnet', '192.168.1.0/24'], { env, encoding: 'utf8' });
  t.equal(main.status, 0, main.stderr);
  t.equal(JSON.parse(main.stdout).plugins[0].type, 'blockspeaker');
  const bad = spawnSync(process.execPath, [bin, 'cni', 'conflist', '--flavor', 'win-nat', '-c', file], { env, encoding: 'utf8' });
  t.equal(bad.status, 2);
  t.match(bad.stderr, /--flavor must be blockspeaker, win-bridge, win-overlay, sdnbridge/);
});
