// The node daemon on Calico's etcd layout: a Windows node refuses to start while strict_affinity is off (naming the
// key and the fix), starts once it is on, allocates over IPC from its Calico-made block, and /ipam/config says which
// IPAM settings are in force (and that an applied IPAMConfiguration which differs is not).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { spawnRun } from '../kit/daemon.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { freePort, waitFor } from '../kit/wait.ts';
import { calicoCluster, ipamConfig } from '../ipam/calico-fixtures.ts';

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const env = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };

t.test('Windows node daemon on calico-node\'s etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  for (const kv of calicoCluster(false)) await store.put(kv.key, kv.value);
  await store.put('/calico/resources/v3/projectcalico.org/ipamconfigurations/default',
    '{"kind":"IPAMConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default"},"spec":{"strictAffinity":false,"maxBlocksPerHost":0}}');
  const dir = mkdtempSync(join(tmpdir(), 'bs-calico-daemon-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const statusPort = await freePort('127.0.0.1');
  const sock = join(dir, 'bs.sock');
  const file = join(dir, 'node.yaml');
  const conf = `node: { name: win-c, os: windows }
ipam: { store: "${etcd.url}", layout: calico }
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: ${sock} }
`;
  writeFileSync(file, conf);
  const refused = spawnSync(process.execPath, [bin, 'run', '-c', file, '--run-dir', dir], { encoding: 'utf8', env, timeout: 60_000 });
  t.not(refused.status, 0, 'refuses to start');
  t.match(refused.stderr, /Windows node win-c needs strict_affinity: true in \/calico\/ipam\/v2\/config.*calicoctl ipam configure --strictaffinity=true/);
  t.equal((await store.get(ipamConfig(false).key))!.value, ipamConfig(false).value, 'and wrote nothing to Calico\'s config');

  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, conf.replace(`"${etcd.url}"`, join(dir, 'dir-store')));
  const r2 = spawnSync(process.execPath, [bin, 'run', '-c', bad, '--run-dir', dir], { encoding: 'utf8', env, timeout: 60_000 });
  t.match(r2.stderr, /ipam\.layout: calico shares Calico's etcd with calico-node, so ipam\.store must be etcd:\/\//);

  await store.put(ipamConfig(true).key, ipamConfig(true).value);
  const run = spawnRun(file, dir, t);
  const get = async (path: string) => (await fetch(`http://127.0.0.1:${statusPort}${path}`)).json();
  const cfg = await waitFor('status up', async () => get('/ipam/config').catch(() => undefined), 30_000, 100);
  t.equal(cfg.layout, 'calico');
  t.equal(cfg.inForce, '/calico/ipam/v2/config');
  t.equal(cfg.config.strictAffinity, true);
  t.same(cfg.resource.differs, ['strictAffinity']);
  t.match(cfg.warning, /IPAMConfiguration default sets strictAffinity differently from \/calico\/ipam\/v2\/config/);
  const reply = (await ipcRequest(sock, 'ipam.assign', { handle: 'k8s-pod-network.cid1', num4: 1 })) as AssignReply;
  t.same(reply.ips.map((a) => a.ip), ['10.244.0.131'], `the first address after Calico's reservation (${run.stderr().slice(-500)})`);
  t.ok(await store.get('/calico/ipam/v2/handle/k8s-pod-network.cid1'), 'Calico handle written');
});
