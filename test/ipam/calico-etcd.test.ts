// Proof with real parts: a real etcd holding what calico-node left (two Linux nodes' blocks, a Windows node's
// reserved addresses), blockspeaker allocating and releasing on it in Calico's layout while a second writer that
// follows Calico's own algorithm works on the same keys. Afterwards no address is in two places, handles agree
// with blocks, `ipam check` is clean, and every block re-reads as Calico's JSON, byte for byte canonical.
import t, { type Test } from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { blockProblems, decodeBlock, encodeBlock } from '../../src/calico/ipam-model.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { openStore } from '../../src/store/open.ts';
import { parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';
import type { Store } from '../../src/store/types.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { checkInvariants } from './invariants.ts';
import { CalicoWriter } from './calico-writer.ts';
import { calicoCluster, windowsBlock } from './calico-fixtures.ts';

async function load(store: Store, strict: boolean, withWindows: boolean): Promise<void> {
  for (const kv of calicoCluster(strict)) {
    if (!withWindows && (kv.key.includes('win-c') || kv.key === windowsBlock().key)) continue;
    await store.put(kv.key, kv.value);
  }
}

async function schemaCheck(t: Test, store: Store): Promise<void> {
  const kvs = await store.list(calicoKeys.blocks);
  let canonical = 0;
  for (const kv of kvs) {
    const b = decodeBlock(kv.key, kv.value); // throws on any field of the wrong name or type
    t.same(blockProblems(b), [], `${kv.key}: allocations and unallocated agree`);
    if (encodeBlock(b) === kv.value) canonical++;
  }
  t.equal(canonical, kvs.length, `all ${kvs.length} blocks decode with Calico's field names and types and re-encode to the same bytes`);
}

/** Rounds of assign-then-release-half for one writer; returns the handles it still holds and what they hold. */
async function churn(rounds: number, per: number, assign: (n: number, h: string) => Promise<string[]>, release: (h: string) => Promise<unknown>, tag: string): Promise<Map<string, string[]>> {
  const held = new Map<string, string[]>();
  for (let i = 0; i < rounds; i++) {
    const h = `${tag}-${i}`;
    held.set(h, await assign(per, h));
    if (i % 2 === 1) {
      await release(`${tag}-${i - 1}`);
      held.delete(`${tag}-${i - 1}`);
    }
  }
  return held;
}

function noDuplicates(t: Test, sets: Map<string, string[]>[]): number {
  const all = sets.flatMap((m) => [...m.values()].flat());
  t.equal(new Set(all).size, all.length, `${all.length} addresses held at the end by both writers, none twice`);
  return all.length;
}

t.test('Windows node (strict_affinity on) against calico-node on the same etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  await load(store, true, true);
  const warnings: string[] = [];
  const ipam = new Ipam(await openStore(etcd.url), { layout: calicoLayout(), warn: (m) => warnings.push(m) });
  t.teardown(() => ipam.store.close());
  const calA = new CalicoWriter(await openStore(etcd.url), 'linux-a', '10.244.0.0/24', 26);
  const calB = new CalicoWriter(await openStore(etcd.url), 'linux-b', '10.244.0.0/24', 26);
  t.teardown(() => Promise.all([calA.store.close(), calB.store.close()]));

  const [ours, a, b] = await Promise.all([
    churn(16, 9, async (n, h) => (await ipam.autoAssign({ host: 'win-c', num4: n, handle: h })).ipv4.map((x) => x.ip), (h) => ipam.releaseByHandle(h), 'bs'),
    churn(16, 9, (n, h) => calA.assign(n, h), (h) => calA.releaseByHandle(h), 'ca'),
    churn(16, 9, (n, h) => calB.assign(n, h), (h) => calB.releaseByHandle(h), 'cb'),
  ]);
  t.comment(`Calico writers met ${calA.conflicts + calB.conflicts} compare-and-swap conflicts`);
  noDuplicates(t, [ours, a, b]);
  t.ok([...ours.values()].flat().every((ip) => !/\.(128|129|130|191|192|193|194|255)$/.test(ip)), 'no Windows-reserved address handed out');
  const held = await checkInvariants(ipam, undefined, new Map([['linux-a', 'linux'], ['linux-b', 'linux'], ['win-c', 'windows']]));
  for (const [h, ips] of ours) for (const ip of ips) t.equal(held.get(ip)?.handle, h, `${ip} held by ${h} in the store`);
  const report = await checkCalico(store);
  t.same(report.problems, [], 'ipam check is clean');
  t.ok(report.reservedForWindows >= 4, `Windows reservations recognised (${report.reservedForWindows})`);
  await schemaCheck(t, store);
  t.same(warnings, []);
});

t.test('a Linux node with strict_affinity off borrows while calico-node allocates in the same blocks', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  await load(store, false, false);
  const ipam = new Ipam(await openStore(etcd.url), { layout: calicoLayout() });
  t.teardown(() => ipam.store.close());
  await ipam.setHost({ name: 'linux-d', os: 'linux', labels: {} });
  const calA = new CalicoWriter(await openStore(etcd.url), 'linux-a', '10.244.0.0/24', 26);
  const calB = new CalicoWriter(await openStore(etcd.url), 'linux-b', '10.244.0.0/24', 26);
  t.teardown(() => Promise.all([calA.store.close(), calB.store.close()]));

  // calico-node's two hosts first claim every block of the pool (two each, room left in them), so blockspeaker has
  // no block to claim and must borrow whatever it gets; which writer claims how many blocks in a free-for-all is a
  // race, and a faster claim (one transaction) can leave blockspeaker with blocks enough to never borrow.
  const pre = new Map<string, string[]>();
  for (const [w, tag] of [[calA, 'pa'], [calB, 'pb']] as const) {
    for (const i of [0, 1]) pre.set(`${tag}-${i}`, await w.assign(40, `${tag}-${i}`));
  }
  const preBlocks = (await ipam.blocks()).map((x) => x.affinity);
  t.same(preBlocks.filter((h) => h === 'linux-a' || h === 'linux-b').length, 4, 'calico-node holds all 4 blocks before blockspeaker asks');
  // Then 3 writers x 8 held handles x 20 = 480 wanted > the 96 left: everyone borrows from the others' blocks.
  const [ours, a, b] = await Promise.all([
    churn(16, 20, async (n, h) => (await ipam.autoAssign({ host: 'linux-d', num4: n, handle: h })).ipv4.map((x) => x.ip), (h) => ipam.releaseByHandle(h), 'bs'),
    churn(16, 20, (n, h) => calA.assign(n, h), (h) => calA.releaseByHandle(h), 'ca'),
    churn(16, 20, (n, h) => calB.assign(n, h), (h) => calB.releaseByHandle(h), 'cb'),
  ]);
  t.comment(`Calico writers met ${calA.conflicts + calB.conflicts} compare-and-swap conflicts`);
  const total = noDuplicates(t, [pre, ours, a, b]);
  t.ok(total > 200, `the pool was filled (${total} of 256)`);
  const ourBlocks = (await ipam.blocks()).filter((x) => x.affinity === 'linux-d').map((x) => parsePrefix(x.cidr));
  const borrowed = [...ours.values()].flat().filter((ip) => !ourBlocks.some((p) => prefixContainsIP(p, parseIP(ip))));
  t.comment(`blockspeaker holds ${[...ours.values()].flat().length} addresses, its blocks: ${ourBlocks.join(' ')}`);
  t.ok(borrowed.length > 0, `blockspeaker borrowed ${borrowed.length} addresses from calico-node's blocks`);
  await checkInvariants(ipam, undefined, new Map([['linux-a', 'linux'], ['linux-b', 'linux'], ['linux-d', 'linux']]));
  const report = await checkCalico(store);
  t.same(report.problems, [], 'ipam check is clean');
  await schemaCheck(t, store);
});
