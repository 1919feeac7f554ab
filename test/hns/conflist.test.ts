// `blockspeaker cni conflist`: the containerd network config list for Windows (seed 003).
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { buildConflist } from '../../src/hns/conflist.ts';

t.test('win-bridge: name, ipam, OutBoundNAT exceptions, ROUTE policies', async (t) => {
  const c = buildConflist({
    flavor: 'win-bridge', network: 'cbr0', serviceCidr: '10.96.0.0/12', nodeSubnet: '192.168.10.0/24', nodeIP: '192.168.10.5',
    pools: [{ cidr: '10.244.0.0/16', natOutgoing: true }, { cidr: '10.250.0.0/24', natOutgoing: false }, { cidr: '10.251.0.0/24', natOutgoing: true, disabled: true }],
  });
  t.same(c, {
    cniVersion: '0.3.1', name: 'cbr0',
    plugins: [{
      type: 'win-bridge', name: 'cbr0', capabilities: { portMappings: true, dns: true }, ipam: { type: 'blockspeaker-cni' },
      policies: [
        { Name: 'EndpointPolicy', Value: { Type: 'OutBoundNAT', ExceptionList: ['10.244.0.0/16', '10.250.0.0/24', '10.96.0.0/12', '192.168.10.0/24'] } },
        { Name: 'EndpointPolicy', Value: { Type: 'ROUTE', DestinationPrefix: '10.96.0.0/12', NeedEncap: true } },
        { Name: 'EndpointPolicy', Value: { Type: 'ROUTE', DestinationPrefix: '192.168.10.5/32', NeedEncap: true } },
      ],
    }],
  });
  const noNat = buildConflist({ flavor: 'win-overlay', network: 'vxlan0', serviceCidr: '10.96.0.0/12', nodeSubnet: '192.168.10.0/24', pools: [{ cidr: '10.244.0.0/16', natOutgoing: false }] });
  const p = (noNat.plugins as { type: string; policies: { Value: { Type: string } }[] }[])[0];
  t.equal(p.type, 'win-overlay');
  t.same(p.policies.map((x) => x.Value.Type), ['ROUTE'], 'no pool asks for NAT: no OutBoundNAT at all');
  t.throws(() => buildConflist({ flavor: 'win-bridge', network: 'n', serviceCidr: '10.96.0.1/12', nodeSubnet: '192.168.10.0/24', pools: [] }), /serviceCidr: .*host bits/);
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
  t.same(c.plugins[0].policies[0].Value.ExceptionList, ['10.244.0.0/16', '10.96.0.0/12', '192.168.1.0/24']);
  const bad = spawnSync(process.execPath, [bin, 'cni', 'conflist', '--flavor', 'win-nat', '-c', file], { env, encoding: 'utf8' });
  t.equal(bad.status, 2);
  t.match(bad.stderr, /--flavor must be win-bridge or win-overlay/);
});
