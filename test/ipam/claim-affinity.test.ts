// `ipam claim --host H --cidr C` (Ipam.claimAffinity) claims in one transaction, as assign does:
// - it leaves what the two-phase claim leaves, key for key, and returns the same, in both layouts (pending claims
//   of other writers, our own pending claim, blocks of other hosts and the per-host block limit included);
// - a crash at any of its writes leaves every block of the range claimed or none, never a pending affinity (the
//   two-phase claim, crashed the same way, does leave them); past 64 blocks each claim is complete on its own;
// - the real command, two hosts racing for the same range: on the directory store, and on a real etcd in both
//   layouts, every block ends with exactly one host, whose confirmed affinity it has, and the two answers agree.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam, type IpamOptions } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { affineHost } from '../../src/ipam/block.ts';
import { parsePrefix, subnetAt, subnetCount } from '../../src/net/ip.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openStore } from '../../src/store/open.ts';
import { StoreError, type Store } from '../../src/store/types.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { CrashingStore } from './crashing-store.ts';
import { checkInvariants } from './invariants.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const osOf = new Map([['a', 'linux'], ['b', 'linux'], ['w', 'windows']]);
const layouts: Record<string, () => IpamOptions> = {
  blockspeaker: () => ({ now: () => NOW }),
  calico: () => ({ now: () => NOW, layout: calicoLayout({ now: () => NOW }) }),
};

const blocksOf = (cidr: string, size: number): string[] => {
  const p = parsePrefix(cidr);
  return Array.from({ length: subnetCount(p, size) }, (_, i) => subnetAt(p, size, i).toString());
};

async function setup(opts: IpamOptions, store: Store = new MemoryStore(), poolCidr = '10.0.0.0/25', blockSize = 28): Promise<Ipam> {
  const ipam = new Ipam(store, opts);
  await ipam.addPool({ name: 'p', cidr: poolCidr, blockSize });
  for (const [name, os] of osOf) await ipam.setHost({ name, os: os as 'linux' | 'windows', labels: {} });
  return ipam;
}

const snapshot = async (s: Store) => (await s.list('')).map((kv) => [kv.key, kv.value]);
const pendings = async (ipam: Ipam) => (await ipam.ds.affinities()).filter((a) => a.value.state === 'pending').map((a) => `${a.value.host} ${a.value.cidr}`);

/** A pending affinity with no block: another writer's claim interrupted after its first phase. */
async function strandPending(ipam: Ipam, host: string, cidr: string): Promise<void> {
  const key = ipam.ds.keys.affinity(host, cidr);
  await ipam.store.txn([{ key, modRevision: 0 }], [{ type: 'put', key, value: ipam.ds.layout.encodeAffinity({ host, cidr, state: 'pending' }) }]);
}

/** Claims over blocks of others, stranded pending claims (ours and another host's), a Windows host, the limit. */
async function script(ipam: Ipam): Promise<string[]> {
  const out: string[] = [];
  const rec = (p: Promise<unknown>) => p.then((r) => out.push(JSON.stringify(r)), (e: Error) => out.push(`${e.name}: ${e.message}`));
  await rec(ipam.autoAssign({ host: 'b', num4: 1, handle: 'b1' }));
  await strandPending(ipam, 'a', '10.0.0.16/28');
  await strandPending(ipam, 'b', '10.0.0.32/28');
  await rec(ipam.claimAffinity('10.0.0.0/26', 'a'));
  await rec(ipam.claimAffinity('10.0.0.0/25', 'w')); // Windows: the first block it gets carries the host reservation
  await rec(ipam.setConfig({ maxBlocksPerHost: 2 }));
  await rec(ipam.claimAffinity('10.0.0.0/25', 'b'));
  await rec(ipam.autoAssign({ host: 'a', num4: 20, handle: 'a1' }));
  return out;
}

for (const [name, opts] of Object.entries(layouts)) {
  t.test(`${name} layout: ipam claim in one transaction leaves what the two-phase claim leaves`, async (t) => {
    const one = await setup(opts());
    const two = await setup({ ...opts(), claim: 'two-phase' });
    const [gotOne, gotTwo] = [await script(one), await script(two)];
    t.same(gotOne, gotTwo, 'same answers');
    t.match(gotOne[1], /"claimed":\[.*"10.0.0.16\/28".*\]/, 'a took over its own pending claim');
    t.same(await snapshot(one.store), await snapshot(two.store), 'same store, key for key');
    t.same(await pendings(one), ['b 10.0.0.32/28'], 'only the other host\'s stranded claim is left (its own assign drops it)');
    await checkInvariants(one, undefined, osOf, { allowPending: true });
  });

  t.test(`${name} layout: a crash at any write of ipam claim leaves the whole range claimed or none of it`, async (t) => {
    const range = '10.0.0.0/26';
    const want = blocksOf(range, 28);
    let twoPhasePending = 0;
    let points = 0;
    for (const claim of ['atomic', 'two-phase'] as const) {
      for (let k = 1; ; k++) {
        let crashed = false;
        for (const after of [false, true]) {
          const inner = new MemoryStore();
          await setup(opts(), inner);
          const crashing = new CrashingStore(inner, k, after);
          const err = await new Ipam(crashing, { ...opts(), claim }).claimAffinity(range, 'a').then(() => undefined, (e: Error) => e);
          if (!crashing.dead) break;
          crashed = true;
          if (!(err instanceof StoreError)) throw err ?? new Error(`crash at write ${k} went unnoticed`);
          const where = `${claim}, crash ${after ? 'after' : 'before'} write ${k}`;
          const ipam = new Ipam(inner, opts());
          if (claim === 'two-phase') {
            if ((await pendings(ipam)).length) twoPhasePending++;
            continue;
          }
          points++;
          t.same(await pendings(ipam), [], `${where}: no pending affinity`);
          const held = (await ipam.blocks('a')).map((b) => b.cidr).sort();
          t.ok(held.length === 0 || held.length === want.length, `${where}: all or none of the range (${held.length})`);
          await checkInvariants(ipam, undefined, osOf).catch((e: Error) => t.fail(`${where}: ${e.message}`));
          t.same(await ipam.claimAffinity(range, 'a'), { claimed: want, failed: [] }, `${where}: claiming again finishes it`);
        }
        if (!crashed) break;
      }
    }
    t.equal(points, 2, 'ipam claim of 4 free blocks is one write');
    t.ok(twoPhasePending > 0, `the two-phase claim left pending affinities at ${twoPhasePending} crash points`);
  });
}

t.test('a range of more than 64 blocks: a crash leaves complete claims only, and claiming again finishes it', async (t) => {
  const range = '10.0.0.0/23'; // 128 blocks of /30: one transaction per claim
  const want = blocksOf(range, 30);
  const probe = new CrashingStore(new MemoryStore(), 0, false);
  await setup(layouts.calico!(), probe, '10.0.0.0/16', 30);
  const before = probe.writes;
  t.same(await new Ipam(probe, layouts.calico!()).claimAffinity(range, 'a'), { claimed: want, failed: [] });
  t.equal(probe.writes - before, want.length, 'one write per claim, nothing rewritten after');
  for (const k of [1, 2, 64, 128]) {
    for (const after of [false, true]) {
      const inner = new MemoryStore();
      await setup(layouts.calico!(), inner, '10.0.0.0/16', 30);
      const crashing = new CrashingStore(inner, k, after);
      const err = await new Ipam(crashing, layouts.calico!()).claimAffinity(range, 'a').then(() => undefined, (e: Error) => e);
      const where = `crash ${after ? 'after' : 'before'} write ${k}`;
      if (!crashing.dead) {
        t.fail(`${where}: the claim made fewer writes`);
        continue;
      }
      t.ok(err instanceof StoreError, `${where}: the crash surfaced`);
      const ipam = new Ipam(inner, layouts.calico!());
      t.same(await pendings(ipam), [], `${where}: no pending affinity`);
      await checkInvariants(ipam, undefined, osOf).catch((e: Error) => t.fail(`${where}: ${e.message}`));
      const r = await ipam.claimAffinity(range, 'a');
      t.same([r.claimed.length, r.failed], [want.length, []], `${where}: claiming again finishes it`);
    }
  }
});

// ---- the real command: two hosts race for the same range ------------------------------------------------------

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'blockspeaker.js');

function cli(args: string[]): Promise<{ claimed: string[]; failed: string[] }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`blockspeaker ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

type T = Parameters<Parameters<typeof t.test>[0]>[0];

/** Hosts a and b claim `range` at the same moment, `rounds` times (a fresh part of the pool each round). */
async function race(t: T, spec: string[], open: () => Promise<Ipam>, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const range = `10.0.${round}.0/24`;
    const want = blocksOf(range, 28);
    const [ra, rb] = await Promise.all(['a', 'b'].map((h) => cli(['ipam', ...spec, 'claim', '--host', h, '--cidr', range])));
    const ipam = await open();
    try {
      const owners = new Map<string, string>();
      for (const { value: b } of await ipam.ds.blocks()) if (want.includes(b.cidr)) owners.set(b.cidr, affineHost(b) ?? '(none)');
      t.same([...owners.keys()].sort(), [...want].sort(), `round ${round}: every block of ${range} exists`);
      for (const [h, r] of [['a', ra], ['b', rb]] as const) {
        t.same(r.claimed.sort(), want.filter((b) => owners.get(b) === h).sort(), `round ${round}: ${h}'s claimed list is exactly its blocks`);
        t.same(r.failed.sort(), want.filter((b) => owners.get(b) !== h).sort(), `round ${round}: ${h}'s failed list is the other's blocks`);
        const confirmed = (await ipam.ds.affinities(h)).filter((a) => a.value.state === 'confirmed' && want.includes(a.value.cidr)).map((a) => a.value.cidr);
        t.same(confirmed.sort(), r.claimed.sort(), `round ${round}: ${h}'s confirmed affinities are its blocks`);
      }
      t.same(await pendings(ipam), [], `round ${round}: no pending affinity`);
      await checkInvariants(ipam, undefined, osOf);
    } finally {
      await ipam.store.close();
    }
  }
}

t.test('the command on the directory store: two hosts race for the same range', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `bs-claim-cli-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await (await setup({}, await openStore(dir), '10.0.0.0/16')).store.close();
  await race(t, ['--store', dir], async () => new Ipam(await openStore(dir)), 3);
});

for (const layout of ['blockspeaker', 'calico']) {
  t.test(`the command on a real etcd (${layout} layout): two hosts race for the same range`, async (t) => {
    if (!etcdGate(t)) return;
    const etcd = await EtcdCluster.start(t);
    const opts = layout === 'calico' ? { layout: calicoLayout() } : {};
    await (await setup(opts, await openStore(etcd.url), '10.0.0.0/16')).store.close();
    await race(t, ['--store', etcd.url, '--layout', layout], async () => new Ipam(await openStore(etcd.url), opts), 3);
  });
}
