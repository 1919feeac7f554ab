// The one-transaction block claim (Ipam claim: 'atomic', the default) against the two-phase claim it replaced
// (pending affinity, create block, confirm: claim: 'two-phase', as earlier versions and libcalico-go do it):
// - the same operations leave the same store, key for key and value for value, and return the same results, in
//   both layouts (Calico's sequence numbers included), also when other writers left pending claims behind;
// - concurrent claimers, atomic and two-phase mixed (other processes of one host, other hosts, older versions),
//   under every interleaving fast-check tries on the memory store, never share a block or an address, and every
//   request is served;
// - on the file store a claim costs one durable write (fdatasync), as an assign from an existing block does.
import t from 'tap';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam, type IpamOptions } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openFileStore } from '../../src/store/file.ts';
import type { Store } from '../../src/store/types.ts';
import { ipAt, parsePrefix, subnetAt } from '../../src/net/ip.ts';
import { checkInvariants } from './invariants.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const HOSTS = ['a', 'b', 'c'];
const osOf = new Map(HOSTS.map((h) => [h, 'linux']));
const POOL = '10.0.0.0/25';

type Op =
  | { k: 'assign'; host: number; n: number; handle: number }
  | { k: 'burst'; host: number; ns: number[]; handle: number }
  | { k: 'assignIP'; host: number; off: number; handle: number }
  | { k: 'releaseHandle'; handle: number }
  | { k: 'releaseAffinity'; host: number; pick: number }
  | { k: 'pending'; host: number; block: number }
  | { k: 'config'; strict: boolean; maxBlocks: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('assign' as const), host: fc.nat(2), n: fc.integer({ min: 1, max: 12 }), handle: fc.nat(9) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('burst' as const), host: fc.nat(2), ns: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 2, maxLength: 5 }), handle: fc.nat(9) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('assignIP' as const), host: fc.nat(2), off: fc.nat(127), handle: fc.nat(9) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('releaseHandle' as const), handle: fc.nat(9) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('releaseAffinity' as const), host: fc.nat(2), pick: fc.nat(10) }) },
  // Another writer's claim interrupted after its first phase: a pending affinity with no block.
  { weight: 1, arbitrary: fc.record({ k: fc.constant('pending' as const), host: fc.nat(2), block: fc.nat(7) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('config' as const), strict: fc.boolean(), maxBlocks: fc.nat(3) }) },
);

const layouts = {
  blockspeaker: (): IpamOptions => ({ now: () => NOW }),
  calico: (): IpamOptions => ({ now: () => NOW, layout: calicoLayout({ now: () => NOW }) }),
};

async function setup(opts: IpamOptions, store: Store = new MemoryStore()): Promise<Ipam> {
  const ipam = new Ipam(store, opts);
  await ipam.addPool({ name: 'p', cidr: POOL, blockSize: 28 });
  for (const h of HOSTS) await ipam.setHost({ name: h, os: 'linux', labels: {} });
  return ipam;
}

/** Apply one operation; what it returned (or the error it gave), as text to compare. */
async function apply(ipam: Ipam, op: Op): Promise<string> {
  const out = (p: Promise<unknown>) => p.then((r) => JSON.stringify(r), (e: Error) => `${e.name}: ${e.message}`);
  switch (op.k) {
    case 'assign':
      return out(ipam.autoAssign({ host: HOSTS[op.host]!, num4: op.n, handle: `h${op.handle}` }));
    case 'burst': // concurrent requests of one host: one batch, one transaction
      return out(Promise.all(op.ns.map((n, i) => ipam.autoAssign({ host: HOSTS[op.host]!, num4: n, handle: `h${(op.handle + i) % 10}` }))));
    case 'assignIP':
      return out(ipam.assignIP({ host: HOSTS[op.host]!, ip: ipAt(parsePrefix(POOL), op.off).toString(), handle: `h${op.handle}` }));
    case 'releaseHandle':
      return out(ipam.releaseByHandle(`h${op.handle}`));
    case 'releaseAffinity': {
      const mine = await ipam.blocks(HOSTS[op.host]!);
      return mine.length ? out(ipam.releaseAffinity(mine[op.pick % mine.length]!.cidr, HOSTS[op.host]!)) : 'none';
    }
    case 'pending': {
      const host = HOSTS[op.host]!;
      const cidr = subnetAt(parsePrefix(POOL), 28, op.block).toString();
      if (await ipam.ds.block(cidr)) return 'block exists';
      const key = ipam.ds.keys.affinity(host, cidr);
      const r = await ipam.store.txn([{ key, modRevision: 0 }], [{ type: 'put', key, value: ipam.ds.layout.encodeAffinity({ host, cidr, state: 'pending' }) }]);
      return `pending ${r.succeeded}`;
    }
    case 'config':
      return out(ipam.setConfig({ strictAffinity: op.strict, maxBlocksPerHost: op.maxBlocks }));
  }
}

const snapshot = async (s: Store) => (await s.list('')).map((kv) => [kv.key, kv.value]);

for (const [name, opts] of Object.entries(layouts)) {
  t.test(`${name} layout: the one-transaction claim leaves what the two-phase claim leaves, step by step`, async (t) => {
    let runs = 0;
    let claims = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30 }), async (ops) => {
        runs++;
        const atomic = await setup({ ...opts(), claim: 'atomic' });
        const oracle = await setup({ ...opts(), claim: 'two-phase' });
        for (const op of ops) {
          const before = (await atomic.ds.blockCidrs()).length;
          const [got, want] = [await apply(atomic, op), await apply(oracle, op)];
          if (got !== want) throw new Error(`${JSON.stringify(op)}: one transaction returned ${got}, two-phase ${want}`);
          const [sa, so] = [await snapshot(atomic.store), await snapshot(oracle.store)];
          if (JSON.stringify(sa) !== JSON.stringify(so)) {
            const diff = sa.filter((kv, i) => JSON.stringify(kv) !== JSON.stringify(so[i]));
            throw new Error(`${JSON.stringify(op)}: stores differ, first: ${JSON.stringify(diff[0])} vs ${JSON.stringify(so.find((x) => x[0] === diff[0]?.[0]))}`);
          }
          if ((await atomic.ds.blockCidrs()).length > before) claims++;
          await checkInvariants(atomic, undefined, osOf, { allowPending: true });
        }
      }),
      { numRuns: 80 },
    );
    t.equal(runs, 80, `${runs} random sequences`);
    t.ok(claims > 80, `${claims} steps claimed blocks`);
  });
}

// ---- concurrency --------------------------------------------------------------------------------------------------

/** The store with every call held until fast-check's scheduler lets it run, and again before its answer returns. */
function scheduled(store: Store, s: fc.Scheduler): Store {
  const gate = (label: string) => s.schedule(Promise.resolve(), label);
  const wrap = <A extends unknown[], R>(label: string, fn: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
    await gate(`${label} ${String(a[0]).split('/').slice(-2).join('/')}`);
    const r = await fn(...a);
    await gate(`${label} reply`);
    return r;
  };
  return {
    name: store.name,
    get: wrap('get', (k: string) => store.get(k)),
    list: wrap('list', (p: string) => store.list(p)),
    put: wrap('put', (k: string, v: string) => store.put(k, v)),
    delete: wrap('delete', (k: string) => store.delete(k)),
    txn: wrap('txn', (c, o) => store.txn(c, o)),
    watch: (...a) => store.watch(...a),
    revision: () => store.revision(),
    close: () => store.close(),
  };
}

// Claimers: two processes of host a on the new claim, one of host a on the old (an older version mid-upgrade),
// host b new and old (as calico-node claims), host c new.
const CLAIMERS: { host: string; claim: 'atomic' | 'two-phase' }[] = [
  { host: 'a', claim: 'atomic' },
  { host: 'a', claim: 'atomic' },
  { host: 'a', claim: 'two-phase' },
  { host: 'b', claim: 'atomic' },
  { host: 'b', claim: 'two-phase' },
  { host: 'c', claim: 'atomic' },
];

for (const [name, opts] of Object.entries(layouts)) {
  t.test(`${name} layout: concurrent claimers, one-transaction and two-phase mixed, under random interleavings`, async (t) => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        // Per claimer, its requests (addresses each). /28 blocks of 16 in a /25: 8 blocks, 128 addresses; at most
        // 6 x 3 x 6 = 108 asked, so with borrowing every request can be served.
        fc.array(fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 3 }), { minLength: CLAIMERS.length, maxLength: CLAIMERS.length }),
        fc.boolean(),
        async (s, asks, pendingLeft) => {
          runs++;
          const mem = new MemoryStore();
          const admin = await setup(opts(), mem);
          if (pendingLeft) {
            // An older version of host a died after phase 1 of a claim of the block a's walk tries first.
            const cidr = '10.0.0.80/28';
            await mem.put(admin.ds.keys.affinity('a', cidr), admin.ds.layout.encodeAffinity({ host: 'a', cidr, state: 'pending' }));
          }
          const store = scheduled(mem, s);
          const model = new Map<string, { host: string; handle: string }>();
          const work = CLAIMERS.map(async (c, i) => {
            const ipam = new Ipam(store, { ...opts(), claim: c.claim });
            await Promise.all(asks[i]!.map(async (n, j) => {
              const handle = `${c.host}-${i}-${j}`;
              const r = await ipam.autoAssign({ host: c.host, num4: n, handle });
              if (r.ipv4.length !== n) throw new Error(`${handle}: ${r.ipv4.length} of ${n} (${r.messages.join('; ')})`);
              for (const a of r.ipv4) {
                if (model.has(a.ip)) throw new Error(`${a.ip} given to ${handle} and ${model.get(a.ip)!.handle}`);
                model.set(a.ip, { host: c.host, handle });
              }
            }));
          });
          await s.waitFor(Promise.all(work));
          // No pending claim is left: every claim either finished or let go of its affinity.
          await checkInvariants(admin, model, osOf);
          // Each block has one owner, and that owner's affinity is the only one.
          for (const aff of await admin.ds.affinities()) {
            const b = await admin.ds.block(aff.value.cidr);
            if (b && b.value.affinity !== `host:${aff.value.host}`) throw new Error(`${aff.value.cidr}: affinity of ${aff.value.host}, block of ${b.value.affinity}`);
          }
        },
      ),
      { numRuns: 50 },
    );
    t.equal(runs, 50, `${runs} interleavings`);
  });
}

// ---- durable writes per claim -------------------------------------------------------------------------------------

t.test('file store: a claim is one fdatasync (two-phase: four), a borrow one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `bs-claim-txn-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = await openFileStore(dir);
  t.teardown(() => store.close());
  const ipam = await setup({}, store);
  const oracle = new Ipam(store, { claim: 'two-phase' });
  const syncs = async (fn: () => Promise<unknown>) => {
    const before = store.stats().syncs;
    await fn();
    return store.stats().syncs - before;
  };
  t.equal(await syncs(() => ipam.autoAssign({ host: 'a', num4: 1, handle: 'first' })), 1, 'a new block with its first address');
  t.equal(await syncs(() => ipam.autoAssign({ host: 'a', num4: 1, handle: 'second' })), 1, 'an address from that block');
  t.equal(await syncs(() => oracle.autoAssign({ host: 'b', num4: 1, handle: 'old' })), 4, 'the two-phase claim: pending, create, confirm, allocate');
  t.equal(await syncs(() => ipam.autoAssign({ host: 'c', num4: 16 * 6, handle: 'six-blocks' })), 1, 'six new blocks in one request');
  t.equal(await syncs(() => ipam.autoAssign({ host: 'a', num4: 16, handle: 'borrow' })), 1, 'the pool has no free block: filling a\'s block and borrowing the rest');
  await checkInvariants(ipam, undefined, osOf);
});

t.test('a batch too big for one etcd transaction commits its claims first, then the rest', async (t) => {
  // /32 blocks: 64 concurrent pods of one host are one batch with 64 claims, 64 affinities and 64 handles.
  const counted = (inner: Store) => {
    const sizes: number[] = [];
    const store: Store = Object.assign(Object.create(inner) as Store, {
      txn: (c: Parameters<Store['txn']>[0], o: Parameters<Store['txn']>[1]) => {
        sizes.push(Math.max(c.length, o.length));
        return inner.txn(c, o);
      },
    });
    return { store, sizes };
  };
  const run = async (claim: 'atomic' | 'two-phase') => {
    const { store, sizes } = counted(new MemoryStore());
    const ipam = new Ipam(store, { now: () => NOW, claim });
    await ipam.addPool({ name: 'tiny', cidr: '10.9.0.0/24', blockSize: 32, reservation: { kind: 'none' } });
    await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
    sizes.length = 0;
    const rs = await Promise.all(Array.from({ length: 64 }, (_, i) => ipam.autoAssign({ host: 'a', num4: 1, handle: `pod${i}` })));
    await checkInvariants(ipam, undefined, osOf);
    return { ips: rs.map((r) => r.ipv4.map((a) => a.ip)), sizes, state: await snapshot(store) };
  };
  const atomic = await run('atomic');
  const oracle = await run('two-phase');
  t.ok(atomic.ips.every((x) => x.length === 1), 'every pod got its address');
  t.same(atomic.ips, oracle.ips, 'the same addresses as the two-phase claim');
  t.same(atomic.state, oracle.state, 'the same store');
  t.ok(Math.max(...atomic.sizes) <= 128, `no transaction over etcd's 128 operations (largest ${Math.max(...atomic.sizes)})`);
  t.equal(atomic.sizes.length, 65, '64 claims, then one transaction with the allocations and handles');
});
