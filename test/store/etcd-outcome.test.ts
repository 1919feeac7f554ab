// Writes whose outcome the client cannot know: a proxy between the store and etcd loses the request, or lets it
// through and loses the answer. The store must find out from etcd's history what happened, never apply a
// transaction twice, never report an applied one as failed, and say "outcome unknown" when it cannot tell.
import t from 'tap';
import { openEtcdStore, type EtcdStore } from '../../src/store/etcd.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { TcpProxy } from './tcp-proxy.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('unknown outcomes are resolved from history', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const proxy = await TcpProxy.start(etcd.endpoints[0]);
  t.teardown(() => proxy.close());
  const log: string[] = [];
  const viaProxy = async (retryForMs = 15000): Promise<EtcdStore> => {
    const s = await openEtcdStore([proxy.endpoint], { requestTimeoutMs: 1500, retryForMs, log: (l) => log.push(l) });
    t.teardown(() => s.close());
    await s.get('/warm'); // the HTTP/2 connection is up before a cut is armed
    await sleep(100);
    return s;
  };
  const direct = await openEtcdStore(etcd.endpoints);
  t.teardown(() => direct.close());

  t.test('answer lost after the transaction applied: reported as applied, not sent again', async (t) => {
    const s = await viaProxy();
    const cut = proxy.cut('cutAfterForward', { delayMs: 500, blackoutMs: 300 });
    const r = await s.txn([{ key: '/o/a', modRevision: 0 }], [{ type: 'put', key: '/o/a', value: 'mine' }]);
    await cut;
    t.equal(r.succeeded, true, 'succeeded');
    const kv = await direct.get('/o/a');
    t.equal(kv?.value, 'mine');
    t.equal(r.revision, kv?.modRevision, 'at the revision it applied at');
    t.match(s.stats(), { unknownOutcomes: 1, resolvedApplied: 1, resolvedResent: 0 });
  });

  t.test('answer lost, and the key changed by someone else before the client could look: still applied', async (t) => {
    const s = await viaProxy();
    const cut = proxy.cut('cutAfterForward', { delayMs: 500, blackoutMs: 1500 });
    const pending = s.txn([{ key: '/o/b', modRevision: 0 }], [{ type: 'put', key: '/o/b', value: 'mine' }]);
    await cut;
    // While the client cannot reach etcd, another writer replaces the value (so the current state alone no
    // longer shows that this client's write happened).
    const cur = await direct.get('/o/b');
    t.equal(cur?.value, 'mine', 'the write reached etcd');
    await direct.txn([{ key: '/o/b', modRevision: cur!.modRevision }], [{ type: 'put', key: '/o/b', value: 'theirs' }]);
    const r = await pending;
    t.equal(r.succeeded, true, 'reported as applied');
    t.equal(r.revision, cur!.modRevision, 'at its own revision');
    t.equal((await direct.get('/o/b'))?.value, 'theirs', 'and not applied a second time over the newer value');
    t.match(s.stats(), { unknownOutcomes: 1, resolvedApplied: 1, resolvedResent: 0 });
  });

  t.test('request lost before it reached etcd: sent again, applied once', async (t) => {
    const s = await viaProxy();
    const cut = proxy.cut('dropNext', { blackoutMs: 300 });
    const r = await s.txn([{ key: '/o/c', modRevision: 0 }], [{ type: 'put', key: '/o/c', value: 'mine' }]);
    await cut;
    t.equal(r.succeeded, true);
    const kv = await direct.get('/o/c');
    t.equal(kv?.value, 'mine');
    t.equal(kv?.createRevision, kv?.modRevision, 'written once');
    t.match(s.stats(), { unknownOutcomes: 1, resolvedApplied: 0, resolvedResent: 1 });
  });

  t.test('request lost, and the compared key changed meanwhile: a plain compare failure', async (t) => {
    const s = await viaProxy();
    const cut = proxy.cut('dropNext', { blackoutMs: 1500 });
    const pending = s.txn([{ key: '/o/d', modRevision: 0 }], [{ type: 'put', key: '/o/d', value: 'mine' }]);
    await cut;
    await direct.put('/o/d', 'theirs');
    const r = await pending;
    t.equal(r.succeeded, false, 'not applied');
    t.same(r.failed, ['/o/d'], 'names the key whose compare failed');
    t.equal((await direct.get('/o/d'))?.value, 'theirs');
  });

  t.test('a delete whose answer was lost', async (t) => {
    await direct.put('/o/e', 'x');
    const s = await viaProxy();
    // delete() reads the key, then deletes it with a compare: the read goes through, the delete's answer is lost.
    const cut = proxy.cut('cutAfterForward', { delayMs: 500, blackoutMs: 300, skip: 1 });
    const existed = await s.delete('/o/e');
    await cut;
    t.equal(existed, true, 'delete() still says the key existed');
    t.equal(await direct.get('/o/e'), undefined);
    t.match(s.stats(), { unknownOutcomes: 1, resolvedApplied: 1 });
  });

  t.test('etcd out of reach for longer than the retry window: "outcome unknown"', async (t) => {
    const s = await viaProxy(1500);
    const cut = proxy.cut('cutAfterForward', { delayMs: 500, blackoutMs: 4000 });
    await t.rejects(
      s.txn([{ key: '/o/f', modRevision: 0 }], [{ type: 'put', key: '/o/f', value: 'mine' }]),
      { name: 'StoreError', message: /outcome unknown.*127\.0\.0\.1/ },
    );
    await cut;
    await sleep(3000);
    t.equal((await direct.get('/o/f'))?.value, 'mine', '(it had in fact applied)');
  });

  t.test('store log', async (t) => {
    t.comment(log.join('\n'));
    t.ok(log.some((l) => /outcome unknown, resolving/.test(l)) && log.some((l) => /had applied at revision/.test(l)), 'says what it did');
  });
});
