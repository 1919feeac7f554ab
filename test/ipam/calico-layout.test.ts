// The calico layout over a store holding what calico-node left: the allocator reads Calico's blocks, keeps its
// reservations and unknown fields, writes Calico's sequence numbers, and refuses what Calico's model forbids.
import t from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { decodeBlock, decodeHandle, encodeBlock } from '../../src/calico/ipam-model.ts';
import { startCalicoLayout } from '../../src/ipam/calico/start.ts';
import { NodeCleanup } from '../../src/ipam/calico/node-cleanup.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { checkInvariants } from './invariants.ts';
import { calicoCluster, ipamConfig, linuxBlockA, linuxBlockB, SEQ_W, windowsBlock } from './calico-fixtures.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');

async function cluster(strict: boolean): Promise<{ store: MemoryStore; ipam: Ipam; warnings: string[] }> {
  const store = new MemoryStore();
  for (const kv of calicoCluster(strict)) await store.put(kv.key, kv.value);
  const warnings: string[] = [];
  const ipam = new Ipam(store, { layout: calicoLayout({ now: () => NOW }), now: () => NOW, warn: (m) => warnings.push(m) });
  return { store, ipam, warnings };
}

const osOf = new Map([['linux-a', 'linux'], ['linux-b', 'linux'], ['win-c', 'windows'], ['linux-d', 'linux']]);

t.test('a Windows node allocates from its Calico-made block, keeping Calico\'s reservation', async (t) => {
  const { store, ipam } = await cluster(true);
  const host = await ipam.getHost('win-c');
  t.same(host && [host.name, host.os], ['win-c', 'windows'], 'Calico Node resource read as a Windows host');
  const r = await ipam.autoAssign({ host: 'win-c', num4: 2, handle: 'pod-w1' });
  t.same(r.ipv4.map((a) => a.ip), ['10.244.0.131', '10.244.0.132'], 'first free after the .128/.129/.130 reservation');
  const kv = (await store.get(windowsBlock().key))!;
  const b = decodeBlock(kv.key, kv.value);
  t.equal(b.sequenceNumber, BigInt(SEQ_W) + 1n, 'sequenceNumber raised by one, exactly');
  t.equal(b.attributes[0].handleId, 'windows-reserved-ipam-handle', 'reservation attribute kept first');
  t.same([0, 1, 2, 63].map((o) => b.allocations[o]), [0, 0, 0, 0]);
  t.same([3, 4].map((o) => b.allocations[o]), [1, 1]);
  t.same(Object.fromEntries(b.sequenceNumberForAllocation!), { 3: BigInt(SEQ_W), 4: BigInt(SEQ_W) }, 'allocations record the sequence number they were made at');
  t.same(Object.fromEntries(b.attributes[1].secondary!), { node: 'win-c' });
  t.equal(b.unallocated[0], 5);
  const h = decodeHandle(calicoKeys.handle('pod-w1'), (await store.get(calicoKeys.handle('pod-w1')))!.value);
  t.same(Object.fromEntries(h.block), { '10.244.0.128/26': 2 });
  // release: back to the tail, sequence number for the ordinal dropped, handle gone
  t.same((await ipam.releaseByHandle('pod-w1')).sort(), ['10.244.0.131', '10.244.0.132']);
  const b2 = decodeBlock(kv.key, (await store.get(kv.key))!.value);
  t.equal(b2.sequenceNumber, BigInt(SEQ_W) + 2n);
  t.same(b2.sequenceNumberForAllocation!.size, 0);
  t.same(b2.unallocated.slice(-2), [3, 4]);
  t.equal(await store.get(calicoKeys.handle('pod-w1')), undefined);
  t.equal(encodeBlock(b2).includes('"windows host rsvd"'), true);
  await checkInvariants(ipam, undefined, osOf);
});

t.test('a Windows node claims a new block the way Calico does', async (t) => {
  const { store, ipam } = await cluster(true);
  await ipam.claimAffinity('10.244.0.192/26', 'win-c');
  const kv = (await store.get(calicoKeys.block('10.244.0.192/26')))!;
  const b = decodeBlock(kv.key, kv.value);
  t.equal(b.affinity, 'host:win-c');
  t.equal(b.affinityClaimTime, '2026-11-25T12:00:00Z');
  t.equal(b.sequenceNumber, BigInt(NOW) * 1_000_000n, 'a new block starts at the creation time in ns');
  t.same(b.sequenceNumberForAllocation && [...b.sequenceNumberForAllocation], [], 'empty map, as newBlock makes');
  t.same(b.attributes.map((a) => a.handleId), ['windows-reserved-ipam-handle']);
  t.same(b.unallocated, Array.from({ length: 60 }, (_, i) => i + 3));
  t.equal((await store.get(calicoKeys.affinity('win-c', '10.244.0.192/26')))!.value, '{"state":"confirmed","deleted":false}');
});

t.test('fields a newer Calico added survive our rewrite', async (t) => {
  const { store, ipam } = await cluster(false);
  await ipam.setHost({ name: 'linux-d', os: 'linux', labels: {} });
  // fill the pool's free blocks so linux-d must borrow; then take the address in linux-b's block
  const r = await ipam.assignIP({ host: 'linux-d', ip: '10.244.0.65', handle: 'pod-d1' });
  t.equal(r.block, '10.244.0.64/26');
  const text = (await store.get(linuxBlockB().key))!.value;
  t.match(text, /,"deleted":false,"futureField":\[1,2\.5,"x"\]\}$/);
  t.match(text, /"futureAttr":\{"x":1\}/);
  t.equal(store.name, 'memory');
  await checkInvariants(ipam, undefined, osOf);
});

t.test('a Linux host with strict_affinity off borrows, from Linux blocks only', async (t) => {
  const { ipam } = await cluster(false);
  await ipam.setHost({ name: 'linux-d', os: 'linux', labels: {} });
  // the /24 pool has 4 blocks: 3 are Calico's, linux-d claims the 4th, then borrows
  const r = await ipam.autoAssign({ host: 'linux-d', num4: 64 + 10, handle: 'pod-d' });
  t.equal(r.ipv4.length, 74);
  const blocks = new Set(r.ipv4.map((a) => a.block));
  t.same([...blocks].sort(), ['10.244.0.0/26', '10.244.0.192/26'], 'borrowed from linux-a\'s block, never from the Windows block');
  await checkInvariants(ipam, undefined, osOf);
  t.same((await ipam.routes('linux-d')).aggregates, ['10.244.0.192/26']);
});

t.test('a Windows host refuses to run with strict_affinity off', async (t) => {
  const { ipam } = await cluster(false);
  await t.rejects(ipam.autoAssign({ host: 'win-c', num4: 1 }), /Windows host win-c in the calico layout needs strict_affinity: true in \/calico\/ipam\/v2\/config/);
  await t.rejects(startCalicoLayout(ipam, { name: 'win-c', os: 'windows' }, { strictAffinity: false }), /needs strict_affinity: true/);
  await startCalicoLayout(ipam, { name: 'win-c', os: 'windows' }, { strictAffinity: true });
  t.equal((await ipam.getConfig()).strictAffinity, true, 'set when the config file asks for it');
  t.equal((await ipam.store.get(calicoKeys.config))!.value, '{"strict_affinity":true,"auto_allocate_blocks":true}');
  t.equal((await ipam.autoAssign({ host: 'win-c', num4: 1 })).ipv4.length, 1);
});

t.test('a corrupt block is skipped with a warning naming its key, and never written over', async (t) => {
  const { store, ipam, warnings } = await cluster(true);
  const bad = linuxBlockA().value.replace('"unallocated":[3,', '"unallocated":[2,3,');
  await store.put(linuxBlockA().key, bad);
  const badB = linuxBlockB().value.replace('"sequenceNumber":', '"sequenceNumber":-');
  await store.put(linuxBlockB().key, badB);
  await ipam.setHost({ name: 'linux-a', os: 'linux', labels: {} });
  const r = await ipam.autoAssign({ host: 'linux-a', num4: 3 });
  t.equal(r.ipv4.length, 3);
  t.notOk(r.ipv4.some((a) => a.block === '10.244.0.0/26'), 'nothing from the corrupt block');
  t.equal((await store.get(linuxBlockA().key))!.value, bad, 'left exactly as it was');
  t.equal((await store.get(linuxBlockB().key))!.value, badB);
  t.ok(warnings.some((w) => w.includes(linuxBlockA().key) && w.includes('allocations and unallocated disagree')), warnings.join('\n'));
  t.ok(await store.get(calicoKeys.affinity('linux-a', '10.244.0.0/26')), 'its affinity is left alone too');
  await t.rejects(ipam.assignIP({ host: 'linux-a', ip: '10.244.0.10' }), /./, 'no assignment into it');
  t.equal((await store.get(linuxBlockA().key))!.value, bad);
});

t.test('the config in force is Calico\'s: no key means Calico\'s defaults, an existing one is kept field by field', async (t) => {
  const store = new MemoryStore();
  const ipam = new Ipam(store, { layout: calicoLayout() });
  t.same(await ipam.getConfig(), { strictAffinity: false, autoAllocateBlocks: true, maxBlocksPerHost: 0, ipCooldownSeconds: 0 });
  await store.put(calicoKeys.config, '{"strict_affinity":true,"kubeVirtVMAddressPersistence":"Enabled","x":1}');
  t.equal((await ipam.getConfig()).autoAllocateBlocks, false);
  await ipam.setConfig({ maxBlocksPerHost: 3 });
  t.equal((await store.get(calicoKeys.config))!.value, '{"strict_affinity":true,"maxBlocksPerHost":3,"kubeVirtVMAddressPersistence":"Enabled","x":1}');
  t.equal(ipamConfig(true).key, calicoKeys.config);
});

t.test('a deleted Node: affinities released at once, its addresses after the grace period', async (t) => {
  const { store, ipam } = await cluster(true);
  let clock = NOW;
  const logs: string[] = [];
  const gc = new NodeCleanup(ipam, { graceMs: 600_000, now: () => clock, log: (m) => logs.push(m) });
  t.same(await gc.sweep(), { affinitiesReleased: [], handlesReleased: [], addressesReleased: [] }, 'nothing to do while every node exists');
  await store.delete('/calico/resources/v3/projectcalico.org/nodes/linux-b');
  const first = await gc.sweep();
  t.same(first.affinitiesReleased, ['linux-b 10.244.0.64/26']);
  t.same(first.addressesReleased, [], 'addresses kept during the grace period');
  t.equal(await store.get(calicoKeys.affinity('linux-b', '10.244.0.64/26')), undefined);
  const b = decodeBlock(linuxBlockB().key, (await store.get(linuxBlockB().key))!.value);
  t.equal(b.affinity, null, 'the block still holding an address is left non-affine');
  clock += 599_000;
  t.same((await gc.sweep()).addressesReleased, []);
  clock += 2_000;
  const last = await gc.sweep();
  t.same([last.handlesReleased, last.addressesReleased], [['k8s-pod-network.ccc333'], ['10.244.0.64']]);
  t.equal(await store.get(linuxBlockB().key), undefined, 'the empty non-affine block is deleted');
  t.equal(await store.get(calicoKeys.handle('k8s-pod-network.ccc333')), undefined);
  t.same((await checkCalico(store)).problems, [], 'ipam check is clean afterwards');
  t.ok(logs.some((l) => l.includes('node linux-b is gone: released its affinity to 10.244.0.64/26')));
  t.equal((await store.list(calicoKeys.blocks)).length, 2, 'other nodes untouched');
});
