// `ipam check` on a Calico-layout datastore: every kind of problem calicoctl ipam check reports is found and named,
// notes are not problems, nothing is repaired; and the real `blockspeaker ipam --layout calico` command on etcd.
import t from 'tap';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { calicoCluster, handle, ipamCli, linuxBlockA, linuxBlockB } from './calico-fixtures.ts';

async function loaded(): Promise<MemoryStore> {
  const store = new MemoryStore();
  for (const kv of calicoCluster(true)) await store.put(kv.key, kv.value);
  return store;
}

t.test('the fixture as calico-node leaves it is clean, Windows reservations counted as such', async (t) => {
  const r = await checkCalico(await loaded());
  t.same(r.problems, []);
  t.same(r.notes, []);
  t.same([r.blocks, r.allocated, r.reservedForWindows, r.handles], [3, 4, 4, 3]);
});

t.test('each problem is reported, naming the key or address; the store is not touched', async (t) => {
  const store = await loaded();
  await store.delete(calicoKeys.handle('k8s-pod-network.bbb222')); // address whose handle is missing
  await store.put(handle('k8s-pod-network.gone', { '10.244.0.0/26': 1 }).key, handle('k8s-pod-network.gone', { '10.244.0.0/26': 1 }).value); // handle with no addresses
  await store.put(handle('k8s-pod-network.aaa111', { '10.244.0.0/26': 5 }).key, handle('k8s-pod-network.aaa111', { '10.244.0.0/26': 5 }).value); // over-count: a note
  await store.put(handle('k8s-pod-network.ccc333', { '10.244.0.64/26': 0 }).key, '{"block":{},"deleted":false}'); // under-count
  await store.put(handle('windows-reserved-ipam-handle', { '10.244.0.128/26': 4 }).key, handle('windows-reserved-ipam-handle', { '10.244.0.128/26': 4 }).value);
  await store.delete('/calico/resources/v3/projectcalico.org/nodes/linux-b'); // node gone
  // a /27 overlapping linux-a's /26, holding 10.244.0.0 too
  const dup = '{"cidr":"10.244.0.0/27","affinity":null,"allocations":[0' + ',null'.repeat(31) + '],"unallocated":[' + Array.from({ length: 31 }, (_, i) => i + 1).join(',') + '],"attributes":[{"handle_id":"k8s-pod-network.aaa111","secondary":{"node":"linux-a"}}],"sequenceNumber":1,"sequenceNumberForAllocation":{},"deleted":false}';
  await store.put('/calico/ipam/v2/assignment/ipv4/block/10.244.0.0-27', dup);
  await store.put('/calico/ipam/v2/assignment/ipv4/block/10.244.1.0-26', '{"cidr": oops');
  const before = await store.list('');
  const r = await checkCalico(store);
  const has = (re: RegExp) => t.ok(r.problems.some((p) => re.test(p)), `${re}: ${r.problems.join(' | ')}`);
  has(/1 address\(es\) in block 10\.244\.0\.0\/26 have handle k8s-pod-network\.bbb222, which does not exist/);
  has(/handle k8s-pod-network\.gone holds no addresses/);
  has(/handle k8s-pod-network\.ccc333 does not count 10\.244\.0\.64\/26, where it holds 1/);
  has(/\/calico\/ipam\/v2\/handle\/windows-reserved-ipam-handle: Calico keeps no handle for Windows reservations/);
  has(/10\.244\.0\.64 \(block 10\.244\.0\.64\/26, handle k8s-pod-network\.ccc333\) belongs to node linux-b, which does not exist/);
  has(/10\.244\.0\.0 is allocated in two blocks: 10\.244\.0\.0\/2[67] and 10\.244\.0\.0\/2[67]/);
  has(/\/calico\/ipam\/v2\/assignment\/ipv4\/block\/10\.244\.1\.0-26: does not decode: .*not JSON/);
  t.ok(r.notes.some((n) => /handle k8s-pod-network\.aaa111 counts 5 in 10\.244\.0\.0\/26, which holds 2 \(over-counted/.test(n)), r.notes.join(' | '));
  t.notOk(r.problems.some((p) => p.includes('aaa111 counts')), 'over-counting is not a problem');
  t.same(await store.list(''), before, 'check wrote nothing');
});

t.test('allocations and unallocated that disagree are a problem', async (t) => {
  const store = await loaded();
  await store.put(linuxBlockB().key, linuxBlockB().value.replace('"unallocated":[1,', '"unallocated":[0,1,'));
  await store.put(linuxBlockA().key, linuxBlockA().value.replace('"unallocated":[3,', '"unallocated":['));
  const r = await checkCalico(store);
  t.ok(r.problems.some((p) => p.includes('10.244.0.64-26: allocations and unallocated disagree: ordinal 0 is both allocated and in unallocated')), r.problems.join(' | '));
  t.ok(r.problems.some((p) => p.includes('10.244.0.0-26: allocations and unallocated disagree: ordinal 3 is neither allocated nor in unallocated')));
});

t.test('blockspeaker ipam --layout calico on a real etcd: assign, check, release', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  for (const kv of calicoCluster(true)) await store.put(kv.key, kv.value);
  const s = `calico+${etcd.url}`;
  const a = await ipamCli(['--store', s, 'assign', '--host', 'win-c', '--num4', '2', '--handle', 'pod-x']);
  t.equal(a.code, 0, a.stderr);
  t.same(JSON.parse(a.stdout).ipv4, ['10.244.0.131/26', '10.244.0.132/26']);
  const c = await ipamCli(['--store', etcd.url, '--layout', 'calico', 'check']);
  t.equal(c.code, 0, c.stderr);
  t.same(JSON.parse(c.stdout).problems, []);
  t.equal(JSON.parse(c.stdout).allocated, 6);
  await store.delete(calicoKeys.handle('pod-x'));
  const bad = await ipamCli(['--store', s, 'check']);
  t.equal(bad.code, 1, 'exit 1 when there are problems');
  t.match(JSON.parse(bad.stdout).problems.join('\n'), /2 address\(es\) in block 10\.244\.0\.128\/26 have handle pod-x, which does not exist/);
  const plain = await ipamCli(['--store', etcd.url, 'check']);
  t.not(plain.code, 0);
  t.match(plain.stderr, /ipam check verifies a Calico-layout datastore: use --layout calico/);
});
