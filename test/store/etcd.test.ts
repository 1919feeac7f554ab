// The etcd store against a real etcd (single member on loopback): the same semantics as MemoryStore (a
// fast-check property runs random operation sequences on both and compares), prefix lists across pages, the key
// prefix option, watches (from a revision, resumed after etcd restarts, compacted history), clear errors when
// etcd is unreachable, and openStore's etcd:// parsing.
import t from 'tap';
import fc from 'fast-check';
import { Etcd3 } from 'etcd3';
import { EtcdStore, openEtcdStore } from '../../src/store/etcd.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openStore, parseEtcdUrl } from '../../src/store/open.ts';
import type { KeyValue, Op, Store, WatchEvent } from '../../src/store/types.ts';
import { EtcdCluster, etcdGate, freePort } from '../kit/etcd-cluster.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => boolean, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

t.test('etcd:// parsing', async (t) => {
  t.same(parseEtcdUrl('etcd://127.0.0.1:2379'), { endpoints: ['127.0.0.1:2379'], keyPrefix: '', tls: false });
  t.same(parseEtcdUrl('etcd://a:1,b.example:2,[::1]:3/tenant-a/'), { endpoints: ['a:1', 'b.example:2', '[::1]:3'], keyPrefix: '/tenant-a', tls: false });
  t.same(parseEtcdUrl('etcds://a:1,b:2'), { endpoints: ['a:1', 'b:2'], keyPrefix: '', tls: true });
  t.throws(() => parseEtcdUrl('etcd://'), { name: 'StoreError', message: /etcd:\/\/host:port/ });
  t.throws(() => parseEtcdUrl('etcd://host'), { name: 'StoreError', message: /"host" is not host:port/ });
  t.throws(() => parseEtcdUrl('etcd://h:99999'), { name: 'StoreError' });
  // TLS settings are checked before anything connects (test/store/etcd-tls.test.ts has the real TLS etcd).
  await t.rejects(openStore('etcd://h:1', { security: { ca: '/x/ca.pem' } }), { name: 'StoreError', message: /etcd ca needs a TLS store URL/ });
  await t.rejects(openStore('etcds://h:1', { security: { cert: '/x/c.pem' } }), { name: 'StoreError', message: /etcd key is required with cert/ });
  await t.rejects(openStore('etcds://h:1', { security: { username: 'u' } }), { name: 'StoreError', message: /etcd password is required with username/ });
  await t.rejects(openStore('/tmp/x', { security: { username: 'u', password: { env: 'X' } } }), { name: 'StoreError', message: /the store is a directory/ });
});

t.test('unreachable etcd: clear errors naming the endpoints', async (t) => {
  const port = await freePort();
  const started = Date.now();
  await t.rejects(openEtcdStore([`127.0.0.1:${port}`], { connectTimeoutMs: 600 }), {
    name: 'StoreError',
    message: new RegExp(`cannot open: .*unreachable at 127\\.0\\.0\\.1:${port}`),
  });
  t.ok(Date.now() - started < 5000, 'gives up after the connect timeout');
});

// ---- semantics: the etcd store and MemoryStore run the same random operations ----------------------------------

const KEYS = ['a', 'ab', 'b', 'b/c', 'b/d', 'c'];
const PREFIXES = ['', 'a', 'b', 'b/', 'c', 'z'];

type Cmp = { key: string; how: 'current' | 'absent' | 'wrong' };
type Cmd =
  | { k: 'get'; key: string }
  | { k: 'list'; prefix: string }
  | { k: 'put'; key: string; value: string }
  | { k: 'delete'; key: string }
  | { k: 'txn'; cmps: Cmp[]; ops: Op[] };

const key = fc.constantFrom(...KEYS);
const value = fc.string({ unit: 'grapheme', maxLength: 6 });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ type: fc.constant('put' as const), key, value }),
  fc.record({ type: fc.constant('delete' as const), key }),
);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ k: fc.constant('get' as const), key }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('list' as const), prefix: fc.constantFrom(...PREFIXES) }), weight: 2 },
  { arbitrary: fc.record({ k: fc.constant('put' as const), key, value }), weight: 3 },
  { arbitrary: fc.record({ k: fc.constant('delete' as const), key }), weight: 2 },
  {
    arbitrary: fc.record({
      k: fc.constant('txn' as const),
      cmps: fc.array(fc.record({ key, how: fc.constantFrom('current' as const, 'current' as const, 'absent' as const, 'wrong' as const) }), { maxLength: 3 }),
      // etcd refuses two ops on one key in a transaction ("duplicate key given"), so one op per key here.
      ops: fc.uniqueArray(op, { selector: (o) => o.key, maxLength: 4 }),
    }),
    weight: 5,
  },
);

/** Run one command; the result with revisions taken out, plus the revisions it showed (for the order check). */
async function runCmd(s: Store, base: string, c: Cmd): Promise<{ out: unknown; revs: number[] }> {
  const strip = (kv: KeyValue | undefined) => kv && { key: kv.key.slice(base.length), value: kv.value };
  const kvRevs = (kv: KeyValue | undefined) => (kv ? [kv.createRevision, kv.modRevision] : []);
  switch (c.k) {
    case 'get': {
      const kv = await s.get(base + c.key);
      return { out: strip(kv), revs: kvRevs(kv) };
    }
    case 'list': {
      const kvs = await s.list(base + c.prefix);
      return { out: kvs.map(strip), revs: kvs.flatMap(kvRevs) };
    }
    case 'put':
      return { out: 'put', revs: [await s.put(base + c.key, c.value)] };
    case 'delete':
      return { out: await s.delete(base + c.key), revs: [] };
    case 'txn': {
      const compares = [];
      for (const cmp of c.cmps) {
        const cur = (await s.get(base + cmp.key))?.modRevision ?? 0;
        compares.push({ key: base + cmp.key, modRevision: cmp.how === 'current' ? cur : cmp.how === 'absent' ? 0 : cur + 1000 });
      }
      const existed = await Promise.all(c.ops.map(async (o) => (await s.get(base + o.key)) !== undefined));
      const r = await s.txn(compares, c.ops.map((o) => ({ ...o, key: base + o.key })));
      // A transaction that changes nothing moves MemoryStore's revision but not etcd's: only compare effective ones.
      const effective = r.succeeded && c.ops.some((o, i) => o.type === 'put' || existed[i]);
      return { out: { succeeded: r.succeeded, failed: r.failed?.map((k) => k.slice(base.length)).sort() }, revs: effective ? [r.revision] : [] };
    }
  }
}

/** Revisions differ in value between the stores, but must order the same way (equal where equal). */
function checkRevisionOrder(pairs: Array<[number, number]>): string | undefined {
  const sorted = [...pairs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  for (let i = 1; i < sorted.length; i++) {
    const [m0, e0] = sorted[i - 1];
    const [m1, e1] = sorted[i];
    if ((m0 === m1) !== (e0 === e1) || (m0 < m1 && !(e0 < e1))) return `memory ${m0}->${m1} but etcd ${e0}->${e1}`;
  }
  return undefined;
}

t.test('same results as MemoryStore for random operation sequences', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  // A random key prefix per test run, and a page size of 2 so every list of more than two keys is paginated.
  const prefix = `/prop-${process.pid}-${Date.now()}`;
  const s = await openEtcdStore(etcd.endpoints, { keyPrefix: prefix, pageSize: 2 });
  t.teardown(() => s.close());
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(cmd, { minLength: 1, maxLength: 25 }), async (cmds) => {
      const base = `/r${run++}/`;
      const mem = new MemoryStore();
      const pairs: Array<[number, number]> = [];
      let lastMem = 0;
      let lastEtcd = 0;
      for (const [i, c] of cmds.entries()) {
        const m = await runCmd(mem, base, c);
        const e = await runCmd(s, base, c);
        if (JSON.stringify(m.out) !== JSON.stringify(e.out)) {
          throw new Error(`step ${i} ${JSON.stringify(c)}: memory ${JSON.stringify(m.out)}, etcd ${JSON.stringify(e.out)}`);
        }
        if (m.revs.length !== e.revs.length) throw new Error(`step ${i}: revision shapes differ`);
        m.revs.forEach((r, j) => pairs.push([r, e.revs[j]]));
        const rm = await mem.revision();
        const re = await s.revision();
        if (rm < lastMem || re < lastEtcd) throw new Error(`step ${i}: a store revision went backwards`);
        [lastMem, lastEtcd] = [rm, re];
      }
      const bad = checkRevisionOrder(pairs);
      if (bad) throw new Error(`revisions out of order: ${bad}`);
      // The whole key space under this run agrees at the end.
      const all = (kvs: KeyValue[]) => JSON.stringify(kvs.map((kv) => [kv.key, kv.value]));
      if (all(await s.list(base)) !== all(await mem.list(base))) throw new Error('the final key spaces differ');
    }),
    { numRuns: Number(process.env.ETCD_PROP_RUNS ?? 40) },
  );
  // Nothing leaked outside the key prefix, and the prefix is invisible to callers.
  const raw = new Etcd3({ hosts: etcd.endpoints.map((e) => `http://${e}`) });
  t.teardown(() => raw.close());
  const outside = await raw.getAll().keys();
  t.ok(outside.length > 0 && outside.every((k) => k.startsWith(`${prefix}/r`)), `${outside.length} etcd keys, all under the key prefix`);
  t.ok((await s.list('')).every((kv) => kv.key.startsWith('/r')), 'keys read back without the prefix');
});

t.test('list pages through large prefixes at one revision', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const s = await openEtcdStore(etcd.endpoints, { pageSize: 7 });
  t.teardown(() => s.close());
  const keys = Array.from({ length: 100 }, (_, i) => `/l/k${String(i).padStart(3, '0')}`);
  for (let i = 0; i < keys.length; i += 20) await s.txn([], keys.slice(i, i + 20).map((k) => ({ type: 'put' as const, key: k, value: k })));
  await s.put('/l0', 'just outside the prefix');
  await s.put('/k', 'before it');
  const list = await s.list('/l/');
  t.same(list.map((kv) => kv.key), keys, '100 keys over 15 pages, sorted, nothing outside the prefix');
  t.equal((await s.list('')).length, 102, 'the empty prefix lists everything');
});

// ---- watch --------------------------------------------------------------------------------------------------------

t.test('watch: from a revision, from now, and resumed after etcd restarts', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const log: string[] = [];
  const s = await openEtcdStore(etcd.endpoints, { log: (l) => log.push(l) });
  t.teardown(() => s.close());
  const r1 = await s.put('/w/a', '1');
  await s.put('/w/b', '2');
  await s.put('/x/other', 'not watched');
  await s.delete('/w/a');

  const fromR1: WatchEvent[] = [];
  const w1 = s.watch('/w/', r1, (evs) => fromR1.push(...evs));
  await until('history from r1', () => fromR1.length === 2);
  t.same(fromR1.map((e) => [e.type, e.key, e.value]), [['put', '/w/b', '2'], ['delete', '/w/a', undefined]], 'events after r1 only, in order');

  const now: WatchEvent[] = [];
  const w2 = s.watch('/w/', 0, (evs) => now.push(...evs));
  await sleep(300);
  t.same(now, [], 'from now: nothing old');

  // A writer keeps going across an etcd restart; the watchers must see every write exactly once, in order.
  const writer = await openEtcdStore(etcd.endpoints);
  t.teardown(() => writer.close());
  const written: string[] = [];
  for (let i = 0; i < 5; i++) {
    await writer.put(`/w/n${i}`, String(i));
    written.push(`/w/n${i}`);
  }
  await etcd.kill(0);
  await sleep(500);
  const restarted = etcd.restart(0);
  // Writes start as soon as etcd answers, while the watch streams are still reconnecting with backoff.
  for (let i = 5; i < 15; i++) {
    await writer.put(`/w/n${i}`, String(i));
    written.push(`/w/n${i}`);
  }
  await restarted;
  await until('all writes watched', () => now.length >= written.length && fromR1.length >= 2 + written.length, 20000);
  await sleep(300);
  t.same(now.map((e) => e.key), written, 'the watch from now saw every write once, in order');
  t.same(fromR1.slice(2).map((e) => e.key), written, 'so did the watch from r1');
  t.ok(now.every((e, i) => i === 0 || e.revision > now[i - 1].revision), 'revisions increase');
  t.ok(s.stats().watchReconnects >= 2, `watch streams were re-established (${s.stats().watchReconnects})`);
  t.ok(log.some((l) => /watch of "\/w\/" lost .* resuming from revision \d+/.test(l)), 'and said so in the log');
  w1.close();
  w2.close();
  await writer.put('/w/late', 'x');
  await sleep(200);
  t.equal(now.length, written.length, 'closed watchers get nothing more');
});

t.test('watch from a compacted revision reports a StoreError', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const s = await openEtcdStore(etcd.endpoints);
  t.teardown(() => s.close());
  const first = await s.put('/c/a', '1');
  for (let i = 0; i < 5; i++) await s.put('/c/a', String(i));
  const raw = new Etcd3({ hosts: etcd.endpoints.map((e) => `http://${e}`) });
  t.teardown(() => raw.close());
  await raw.kv.compact({ revision: String(await s.revision()), physical: true });
  const errors: Error[] = [];
  const events: WatchEvent[] = [];
  s.watch('/c/', first, (evs) => events.push(...evs), (err) => errors.push(err));
  await until('the compaction error', () => errors.length > 0);
  t.match(errors[0], { name: 'StoreError', message: new RegExp(`watch of "/c/" from revision ${first + 1}: that revision was compacted`) });
  t.same(events, [], 'no events from a watch that could not start where asked');
});

t.test('etcd down: reads and writes retry, then fail clearly; the store recovers when etcd is back', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const s: EtcdStore = await openEtcdStore(etcd.endpoints, { retryForMs: 1200 });
  t.teardown(() => s.close());
  await s.put('/d/a', '1');
  await etcd.stop(0);
  await t.rejects(s.get('/d/a'), { name: 'StoreError', message: new RegExp(`get /d/a: etcd unreachable at ${etcd.endpoints[0].replace(/\./g, '\\.')}`) });
  await t.rejects(s.txn([{ key: '/d/b', modRevision: 0 }], [{ type: 'put', key: '/d/b', value: 'x' }]), {
    name: 'StoreError',
    message: /etcd unreachable at .*; not applied/,
  });
  // Restarted while a write is waiting: the write goes through.
  const slow = await openEtcdStore(etcd.endpoints, { retryForMs: 20000, connectTimeoutMs: 100 }).catch((e: Error) => e);
  t.match(slow, { name: 'StoreError', message: /cannot open/ }, 'opening fails while etcd is down');
  const patient = new EtcdStore(etcd.endpoints, { retryForMs: 20000 });
  t.teardown(() => patient.close());
  const pending = patient.txn([{ key: '/d/b', modRevision: 0 }], [{ type: 'put', key: '/d/b', value: 'y' }]);
  await sleep(500);
  await etcd.restart(0);
  t.match(await pending, { succeeded: true }, 'a write issued while etcd was down applied once it came back');
  t.equal((await s.get('/d/b'))?.value, 'y', 'and the first store works again');
  t.equal((await s.get('/d/a'))?.value, '1', 'acknowledged data survived the restart');
  await s.close();
  await t.rejects(s.get('/d/a'), { name: 'StoreError', message: /closed/ });
});
