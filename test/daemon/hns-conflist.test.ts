// dataplane.cni: the daemon writes the containerd network config list into the CNI config directory when the HNS
// dataplane starts, through the platform's atomic replace (here the Windows double: Windows rename rules), with
// every pool the store knows; a restart with the same pools leaves the file alone; a pool added to the store
// rewrites it; /dataplane says what happened. Config errors name the field.
import t from 'tap';
import fs from 'node:fs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { parseConfig } from '../../src/config/config.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import type { HnsReconciler } from '../../src/hns/reconcile.ts';
import { windowsDouble } from '../platform/windows-double.ts';

const dir = mkdtempSync(join(tmpdir(), `bs-hns-conflist-${process.pid}-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const confDir = join(dir, 'net.d');
const yaml = (extra = '') => `
node: { name: win-1, os: windows }
ipam:
  store: ${join(dir, 'store')}
  pools: [{ name: p4, cidr: 10.244.0.0/16, blockSize: 26, natOutgoing: true }]
dataplane:
  kind: hns
  mode: l2bridge
  network: cbr0
  adapter: Ethernet
  cni: { confDir: ${confDir}, serviceCidr: 10.96.0.0/12, nodeSubnet: 192.168.10.0/24, nodeIP: 192.168.10.5${extra} }
status: { listen: "127.0.0.1:0" }
`;

async function runDaemon(text: string) {
  const file = join(dir, 'node.yaml');
  writeFileSync(file, text);
  const w = windowsDouble();
  const d = new Daemon({ file, config: parseConfig(text, file), log: pino({ level: 'silent' }), version: 'test', fakeHns: new FakeHns(), platform: w.platform, dryRun: true });
  await d.start();
  const reconciler = (d as unknown as { hns: { reconciler: HnsReconciler } }).hns.reconciler;
  await reconciler.runOnce();
  const dp = await (await fetch(`http://127.0.0.1:${d.status.address()!.port}/dataplane`)).json();
  await d.stop({ restart: false } as never);
  return { dp, d, w };
}

t.test('the default flavor: blockspeaker as the main plugin', async (t) => {
  const target = join(confDir, '10-blockspeaker.conflist');
  const first = await runDaemon(yaml());
  t.equal(first.dp.cni.outcome, 'written');
  t.equal(first.dp.cni.flavor, 'blockspeaker', 'the default flavor, whatever the mode');
  const list = JSON.parse(fs.readFileSync(target, 'utf8'));
  t.same(list, { cniVersion: '1.0.0', name: 'cbr0', plugins: [{ type: 'blockspeaker', name: 'cbr0', capabilities: { portMappings: true, dns: true } }] });
  fs.rmSync(target);
});

t.test('win-bridge: written at start, left alone when unchanged, rewritten when the pools change', async (t) => {
  const target = join(confDir, '10-blockspeaker.conflist');
  const bridge = ', flavor: win-bridge';
  const first = await runDaemon(yaml(bridge));
  t.equal(first.dp.cni.outcome, 'written');
  t.equal(first.dp.cni.path, target);
  t.equal(first.dp.cni.flavor, 'win-bridge');
  const list = JSON.parse(fs.readFileSync(target, 'utf8'));
  t.equal(list.name, 'cbr0');
  t.equal(list.plugins[0].type, 'win-bridge');
  t.equal(list.plugins[0].apiVersion, 2);
  t.same(list.plugins[0].ipam, { type: 'blockspeaker-cni' });
  t.same(list.plugins[0].policies[0], { Name: 'EndpointPolicy', Value: { Type: 'OutBoundNAT', Settings: { Exceptions: ['10.244.0.0/16', '10.96.0.0/12', '192.168.10.0/24'] } } });
  t.same(fs.readdirSync(confDir), ['10-blockspeaker.conflist'], 'no temporary file left');
  const ino = fs.statSync(target).ino;

  const again = await runDaemon(yaml(bridge));
  t.equal(again.dp.cni.outcome, 'unchanged', 'a restart with the same pools does not touch it');
  t.equal(fs.statSync(target).ino, ino);

  // A pool only the store knows (added by another node's config): in the exception list after the next start.
  const more = yaml(bridge).replace('pools: [{ name: p4, cidr: 10.244.0.0/16, blockSize: 26, natOutgoing: true }]',
    'pools: [{ name: p4, cidr: 10.244.0.0/16, blockSize: 26, natOutgoing: true }, { name: p5, cidr: 10.245.0.0/16, blockSize: 26 }]');
  const third = await runDaemon(more);
  t.equal(third.dp.cni.outcome, 'written');
  const after = await runDaemon(yaml(bridge));
  t.equal(after.dp.cni.outcome, 'unchanged', 'the store still holds p5: same list');
  t.same(JSON.parse(fs.readFileSync(target, 'utf8')).plugins[0].policies[0].Value.Settings.Exceptions, ['10.244.0.0/16', '10.245.0.0/16', '10.96.0.0/12', '192.168.10.0/24']);
});

t.test('config errors name the field', async (t) => {
  const bad = (extra: string, re: RegExp) => t.throws(() => parseConfig(yaml(extra), 'node.yaml'), re, re.source);
  bad(', flavor: win-overlay', /dataplane\.cni\.flavor: win-overlay does not drive a l2bridge network: use blockspeaker or win-bridge or sdnbridge with mode l2bridge/);
  bad(', fileName: ../x.conflist', /dataplane\.cni\.fileName: a file name \(no directory\) ending in \.conflist/);
  bad(', dnsServers: [nope]', /dataplane\.cni\.dnsServers\[0\]: .*an IP address/);
  bad(', extra: 1', /dataplane\.cni\.extra: unknown field/);
  t.throws(() => parseConfig(yaml().replace('serviceCidr: 10.96.0.0/12, ', ''), 'node.yaml'), /dataplane\.cni\.serviceCidr: required/);
  t.throws(() => parseConfig(yaml().replace('nodeSubnet: 192.168.10.0/24', 'nodeSubnet: 192.168.10.0/33'), 'node.yaml'), /dataplane\.cni\.nodeSubnet: .*a prefix like/);
});
