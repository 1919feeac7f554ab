// Moving IPAM between layouts: blockspeaker's own keys -> Calico's etcd layout -> back, with every address keeping
// its handle and host, Windows reservations carried as Calico's, and a target that already holds a key refused.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam } from '../../src/ipam/ipam.ts';
import { blockspeakerLayout } from '../../src/ipam/layout.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { decodeBlock } from '../../src/calico/ipam-model.ts';
import { migrateLayout } from '../../src/ipam/migrate-layout.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { checkInvariants } from './invariants.ts';
import { calicoCluster, ipamCli } from './calico-fixtures.ts';

const OS = new Map([['lin-a', 'linux'], ['win-b', 'windows'], ['linux-a', 'linux'], ['linux-b', 'linux'], ['win-c', 'windows']]);

async function ours(): Promise<Ipam> {
  const ipam = new Ipam(new MemoryStore());
  await ipam.setConfig({ strictAffinity: true });
  await ipam.addPool({ name: 'p4', cidr: '10.50.0.0/24', blockSize: 26 });
  await ipam.setHost({ name: 'lin-a', os: 'linux', labels: {} });
  await ipam.setHost({ name: 'win-b', os: 'windows', labels: {} });
  for (let i = 0; i < 5; i++) await ipam.autoAssign({ host: 'lin-a', num4: 3, handle: `a-${i}` });
  for (let i = 0; i < 4; i++) await ipam.autoAssign({ host: 'win-b', num4: 2, handle: `b-${i}` });
  await ipam.releaseByHandle('a-1');
  return ipam;
}

const held = async (ipam: Ipam) => [...(await checkInvariants(ipam, undefined, OS))].sort();

t.test('blockspeaker -> calico -> blockspeaker keeps every address, handle and host', async (t) => {
  const src = await ours();
  const mid = new MemoryStore();
  const r = await migrateLayout({ store: src.store, layout: blockspeakerLayout }, { store: mid, layout: calicoLayout() });
  t.same([r.blocks, r.handles, r.addresses, r.verified], [2, 8, 20, true]);
  const calico = new Ipam(mid, { layout: calicoLayout() });
  t.same(await held(calico), await held(src), 'the calico layout holds the same addresses');
  const report = await checkCalico(mid);
  t.same(report.problems, []);
  t.equal(report.reservedForWindows, 4, 'the Windows block carries Calico\'s reservation');
  const win = (await mid.list(calicoKeys.blocks)).map((kv) => decodeBlock(kv.key, kv.value)).find((b) => b.affinity === 'host:win-b')!;
  t.same([0, 1, 2, 63].map((o) => win.attributes[win.allocations[o]!].handleId), Array(4).fill('windows-reserved-ipam-handle'));
  t.equal((await mid.get(calicoKeys.config))!.value, '{"strict_affinity":true,"auto_allocate_blocks":true}');
  t.match((await mid.get('/calico/resources/v3/projectcalico.org/ippools/p4'))!.value, /"spec":\{"cidr":"10.50.0.0\/24",.*"blockSize":26/);

  const back = new MemoryStore();
  await migrateLayout({ store: mid, layout: calicoLayout() }, { store: back, layout: blockspeakerLayout });
  const again = new Ipam(back);
  t.same(await held(again), await held(src), 'and back');
  t.same((await again.blocks()).map((b) => [b.cidr, b.os, b.borrowable, b.reserved]).sort(), (await src.blocks()).map((b) => [b.cidr, b.os, b.borrowable, b.reserved]).sort());
  // both sides keep allocating where they left off
  t.equal((await again.autoAssign({ host: 'win-b', num4: 1, handle: 'x' })).ipv4.length, 1);
  t.equal((await calico.autoAssign({ host: 'win-b', num4: 1, handle: 'x' })).ipv4.length, 1);
});

t.test('calico-node\'s datastore into blockspeaker\'s layout, then blockspeaker allocates there', async (t) => {
  const mid = new MemoryStore();
  for (const kv of calicoCluster(true)) await mid.put(kv.key, kv.value);
  const back = new MemoryStore();
  const r = await migrateLayout({ store: mid, layout: calicoLayout() }, { store: back, layout: blockspeakerLayout });
  t.same([r.blocks, r.hosts, r.addresses], [3, 3, 4], 'Calico Nodes become hosts');
  const ipam = new Ipam(back);
  t.same((await ipam.autoAssign({ host: 'win-c', num4: 1 })).ipv4.map((a) => a.ip), ['10.244.0.131']);
  await checkInvariants(ipam, undefined, OS);
});

t.test('a target that holds one of the keys is refused before anything is written', async (t) => {
  const src = await ours();
  const mid = new MemoryStore();
  await mid.put(calicoKeys.handle('a-3'), '{"block":{},"deleted":false}');
  const before = await mid.list('');
  await t.rejects(migrateLayout({ store: src.store, layout: blockspeakerLayout }, { store: mid, layout: calicoLayout() }), /already holds \/calico\/ipam\/v2\/handle\/a-3; refusing to write over it/);
  t.same(await mid.list(''), before);
  const micro = new Ipam(new MemoryStore());
  await micro.addPool({ name: 'm', cidr: '10.9.0.0/24', blockSize: 28, reservation: { kind: 'perBlock', start: 1, end: 1 } });
  await t.rejects(migrateLayout({ store: micro.store, layout: blockspeakerLayout }, { store: new MemoryStore(), layout: calicoLayout() }), /pool m: the calico layout cannot keep a perBlock reservation/);
});

t.test('blockspeaker ipam migrate --to calico+etcd:// and back, on a real etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const dir = mkdtempSync(join(tmpdir(), 'bs-mig-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const step = async (...args: string[]) => {
    const r = await ipamCli(args);
    t.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return r.stdout ? JSON.parse(r.stdout) : undefined;
  };
  await step('--store', dir, 'config', 'set', '--strict-affinity', 'true');
  await step('--store', dir, 'pool', 'add', '--name', 'p4', '--cidr', '10.60.0.0/24');
  await step('--store', dir, 'host', 'set', '--name', 'win-1', '--os', 'windows');
  await step('--store', dir, 'assign', '--host', 'win-1', '--num4', '3', '--handle', 'pod-1');
  const m = await step('--store', dir, 'migrate', '--to', `calico+${etcd.url}`);
  t.same([m.addresses, m.verified], [3, true]);
  t.same((await step('--store', `calico+${etcd.url}`, 'check')).problems, []);
  const a = await step('--store', `calico+${etcd.url}`, 'assign', '--host', 'win-1', '--num4', '1', '--handle', 'pod-2');
  t.equal(Number(/^10\.60\.0\.(\d+)\/26$/.exec(a.ipv4[0])![1]) % 64, 6, `next after .3, .4, .5 in the same Windows block: ${a.ipv4}`);
  const dir2 = mkdtempSync(join(tmpdir(), 'bs-mig2-'));
  t.teardown(() => rmSync(dir2, { recursive: true, force: true }));
  const b = await step('--store', etcd.url, '--layout', 'calico', 'migrate', '--to', dir2, '--to-layout', 'blockspeaker');
  t.equal(b.addresses, 4);
  const blocks = await step('--store', dir2, 'blocks');
  t.same(blocks.map((x: { allocated: number; reserved: number; os: string }) => [x.allocated, x.reserved, x.os]), [[4, 4, 'windows']]);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  t.ok(await store.get('/calico/ipam/v2/handle/pod-2'));
});
