import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openFileStore, crc32, crc32Portable, type FileStoreOptions } from '../../src/store/file.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { StoreError, type Compare, type Op, type Store, type WatchEvent } from '../../src/store/types.ts';

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-file-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const logOf = (dir: string) => path.join(dir, 'log');

t.test('crc32: zlib and the portable fallback agree', async (t) => {
  t.equal(crc32(Buffer.from('123456789')), 0xcbf43926, 'standard check value');
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), (data, seed) => {
      return crc32(data, seed >>> 0) === crc32Portable(data, seed >>> 0);
    }),
  );
});

// ---- MemoryStore is the oracle --------------------------------------------------------------------------------

const KEYS = ['a', 'b', 'c', 'a/x', 'a/y', 'a/x/1', 'b/z', 'ü', '😀'];
const VALUES = ['', 'v', 'w', '{"json":true}', 'line\nbreak', '\uD800 lone surrogate', 'ü😀'];
const keyArb = fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 4 }) });
const valueArb = fc.oneof(fc.constantFrom(...VALUES), fc.string({ unit: 'binary', maxLength: 12 }));
const prefixArb = fc.constantFrom('', 'a', 'a/', 'a/x', 'b', 'z', 'ü');

type CompareSpec = { key: string; how: 'current' | 'absent' | 'stale' };
type Write =
  | { k: 'put'; key: string; value: string }
  | { k: 'del'; key: string }
  | { k: 'txn'; compares: CompareSpec[]; ops: Op[] };
type Cmd = Write | { k: 'get'; key: string } | { k: 'list'; prefix: string } | { k: 'rev' } | { k: 'group'; writes: Write[] } | { k: 'reopen' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ type: fc.constant('put' as const), key: keyArb, value: valueArb }),
  fc.record({ type: fc.constant('delete' as const), key: keyArb }),
);
const writeArb: fc.Arbitrary<Write> = fc.oneof(
  fc.record({ k: fc.constant('put' as const), key: keyArb, value: valueArb }),
  fc.record({ k: fc.constant('del' as const), key: keyArb }),
  fc.record({
    k: fc.constant('txn' as const),
    compares: fc.array(fc.record({ key: keyArb, how: fc.constantFrom('current' as const, 'absent' as const, 'stale' as const) }), { maxLength: 3 }),
    ops: fc.array(opArb, { maxLength: 4 }),
  }),
);
const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 6, arbitrary: writeArb },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('get' as const), key: keyArb }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('list' as const), prefix: prefixArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('rev' as const) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('group' as const), writes: fc.array(writeArb, { minLength: 2, maxLength: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('reopen' as const) }) },
);

/** Compare revisions are taken from the oracle before a write (or group) runs, so both stores get the same ones. */
async function resolveCompares(oracle: Store, specs: CompareSpec[]): Promise<Compare[]> {
  const out: Compare[] = [];
  for (const s of specs) {
    const kv = await oracle.get(s.key);
    const cur = kv ? kv.modRevision : 0;
    out.push({ key: s.key, modRevision: s.how === 'current' ? cur : s.how === 'absent' ? 0 : cur + 1 });
  }
  return out;
}

function runWrite(store: Store, w: Write, compares: Compare[]): Promise<unknown> {
  if (w.k === 'put') return store.put(w.key, w.value);
  if (w.k === 'del') return store.delete(w.key);
  return store.txn(compares, w.ops);
}

t.test('FileStore behaves exactly like MemoryStore (random op sequences, group commit, reopen, compaction)', async (t) => {
  let runs = 0;
  let compactions = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(cmdArb, { minLength: 1, maxLength: 40 }),
      fc.constantFrom<FileStoreOptions>({}, { compactMinBytes: 0, compactRatio: 1 }, { compactMinBytes: 0, compactRatio: 0.5 }),
      async (cmds, opts) => {
        runs++;
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-prop-'));
        const oracle = new MemoryStore();
        let store = await openFileStore(dir, opts);
        try {
          for (const c of cmds) {
            if (c.k === 'get') t.same(await store.get(c.key), await oracle.get(c.key));
            else if (c.k === 'list') t.same(await store.list(c.prefix), await oracle.list(c.prefix));
            else if (c.k === 'rev') t.equal(await store.revision(), await oracle.revision());
            else if (c.k === 'reopen') {
              await store.close();
              store = await openFileStore(dir, opts);
              t.same(await store.list(''), await oracle.list(''));
              t.equal(await store.revision(), await oracle.revision());
            } else if (c.k === 'group') {
              const compares: Compare[][] = [];
              for (const w of c.writes) compares.push(w.k === 'txn' ? await resolveCompares(oracle, w.compares) : []);
              // Issued together, the file store commits them in one batch; the oracle runs them one by one.
              const mine = await Promise.all(c.writes.map((w, i) => runWrite(store, w, compares[i]!)));
              const expected = [];
              for (let i = 0; i < c.writes.length; i++) expected.push(await runWrite(oracle, c.writes[i]!, compares[i]!));
              t.same(mine, expected);
            } else {
              const compares = c.k === 'txn' ? await resolveCompares(oracle, c.compares) : [];
              t.same(await runWrite(store, c, compares), await runWrite(oracle, c, compares));
            }
          }
          compactions += store.stats().compactions;
          await store.close();
          const again = await openFileStore(dir, opts);
          t.same(await again.list(''), await oracle.list(''), 'after final reopen');
          t.equal(await again.revision(), await oracle.revision());
          await again.close();
        } finally {
          await store.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      },
    ),
    { numRuns: 60 },
  );
  t.equal(runs, 60);
  t.ok(compactions > 10, `the runs compacted ${compactions} times`);
});

t.test('basic semantics', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  t.equal(s.name, `file:${path.resolve(dir)}`);
  t.equal(await s.revision(), 0);
  t.equal(await s.put('k', '1'), 1);
  t.equal(await s.put('k', '2'), 2);
  t.same(await s.get('k'), { key: 'k', value: '2', createRevision: 1, modRevision: 2 }, 'createRevision kept');
  const bad = await s.txn([{ key: 'k', modRevision: 1 }, { key: 'new', modRevision: 0 }], [{ type: 'put', key: 'x', value: 'y' }]);
  t.same(bad, { succeeded: false, revision: 2, failed: ['k'] });
  t.equal(await s.get('x'), undefined, 'a failed txn writes nothing');
  const ok = await s.txn([{ key: 'k', modRevision: 2 }, { key: 'new', modRevision: 0 }], [{ type: 'put', key: 'new', value: 'n' }, { type: 'delete', key: 'k' }]);
  t.same(ok, { succeeded: true, revision: 3 });
  t.equal(await s.get('k'), undefined);
  t.equal(await s.delete('k'), false, 'deleting an absent key');
  t.equal(await s.revision(), 3, '... does not bump the revision');
  t.equal(await s.delete('new'), true);
  t.equal(await s.revision(), 4);
  t.same(await s.txn([], []), { succeeded: true, revision: 4 }, 'empty txn');
  await s.close();
});

t.test('reopen keeps everything acknowledged, also after compaction', async (t) => {
  const dir = tmpDir(t);
  const opts = { compactMinBytes: 4096, compactRatio: 2 };
  let s = await openFileStore(dir, opts);
  for (let round = 0; round < 30; round++) {
    await Promise.all(Array.from({ length: 20 }, (_, i) => s.put(`key/${i}`, `round ${round}`)));
  }
  await s.put('deleted', 'x');
  await s.delete('deleted');
  const stats = s.stats();
  t.ok(stats.compactions > 0, `compacted ${stats.compactions} times`);
  t.ok(stats.logBytes < 30 * 20 * 30, 'the log stays small');
  const before = await s.list('');
  const rev = await s.revision();
  await s.close();
  s = await openFileStore(dir, opts);
  t.same(await s.list(''), before);
  t.equal(await s.revision(), rev, 'revision survives even when the last txn was a delete');
  t.equal(before.length, 20);
  t.same(await s.get('key/3'), { key: 'key/3', value: 'round 29', createRevision: 4, modRevision: 584 });
  // A watch from before the snapshot cannot be served.
  t.throws(() => s.watch('', 1, () => {}), /revision 1 was compacted/);
  t.ok(s.stats().compactedRevision > 1);
  await s.put('more', '1');
  await s.close();
  s = await openFileStore(dir, opts);
  t.equal((await s.get('more'))?.modRevision, rev + 1);
  await s.close();
});

async function fill(dir: string, n: number): Promise<void> {
  const s = await openFileStore(dir);
  for (let i = 0; i < n; i++) await s.put(`k${i}`, `value ${i}`);
  await s.close();
}

t.test('torn tail: a cut-off or garbage last record is dropped on open', async (t) => {
  for (const damage of ['truncate', 'garbage', 'zeros', 'bad-length'] as const) {
    await t.test(damage, async (t) => {
      const dir = tmpDir(t);
      await fill(dir, 10);
      const size = fs.statSync(logOf(dir)).size;
      if (damage === 'truncate') {
        // Cut the last record in half and mark the header as if only 9 records had been committed, which is what
        // a writer killed before fdatasync returned leaves (the header is updated after the sync).
        const s0 = await openFileStore(dir);
        await s0.close();
        fs.truncateSync(logOf(dir), size - 7);
        setCommitted(dir, 0);
      } else if (damage === 'garbage') {
        fs.appendFileSync(logOf(dir), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]));
      } else if (damage === 'zeros') {
        fs.appendFileSync(logOf(dir), Buffer.alloc(4096));
      } else {
        const b = Buffer.alloc(12);
        b.writeUInt32LE(1000, 0); // a length running past the end of the file
        fs.appendFileSync(logOf(dir), b);
      }
      const s = await openFileStore(dir);
      const n = damage === 'truncate' ? 9 : 10;
      t.equal((await s.list('k')).length, n);
      t.equal(await s.revision(), n);
      t.equal(await s.get('k9').then((kv) => kv?.value), damage === 'truncate' ? undefined : 'value 9');
      t.equal(await s.put('after', 'x'), n + 1, 'the store keeps working');
      await s.close();
      const s2 = await openFileStore(dir);
      t.equal((await s2.get('after'))?.value, 'x');
      t.equal(await s2.revision(), n + 1);
      await s2.close();
    });
  }
});

/**
 * Rewrite the header's committed length and flags, as a crashed writer might leave them: slot 0 gets a valid
 * entry with a seq above anything the test wrote, slot 1 is wiped.
 */
let fakeSeq = 1000;
function setCommitted(dir: string, committed: number, flags = 0): void {
  const fd = fs.openSync(logOf(dir), 'r+');
  const b = Buffer.alloc(40);
  b.writeUInt32LE(committed, 0);
  b.writeUInt32LE(0, 4);
  b.writeUInt32LE(flags, 8);
  b.writeUInt32LE(fakeSeq++, 12);
  b.writeUInt32LE(crc32(b.subarray(0, 16)), 16);
  fs.writeSync(fd, b, 0, 40, 8);
  fs.closeSync(fd);
}

t.test('a log left sealed by a compactor that died before its rename still works', async (t) => {
  const dir = tmpDir(t);
  await fill(dir, 5);
  setCommitted(dir, fs.statSync(logOf(dir)).size, 1);
  const a = await openFileStore(dir);
  const b = await openFileStore(dir);
  t.equal((await a.get('k4'))?.value, 'value 4');
  setCommitted(dir, fs.statSync(logOf(dir)).size, 1); // sealed again behind the open stores' backs
  await a.put('k5', 'value 5');
  t.equal((await b.get('k5'))?.value, 'value 5', 'a reader of a sealed (but not replaced) log still follows it');
  // The writer's new slot (seq 1001 -> slot 1) is not sealed and wins over slot 0.
  const h = fs.readFileSync(logOf(dir)).subarray(28, 48);
  t.equal(h.readUInt32LE(12), fakeSeq, 'the next writer wrote the other slot with the next seq');
  t.equal(h.readUInt32LE(8), 0, '... and cleared the seal');
  await a.close();
  await b.close();
});

t.test('a torn header slot falls back to the other one; two damaged slots are corruption', async (t) => {
  const dir = tmpDir(t);
  await fill(dir, 5);
  const buf = fs.readFileSync(logOf(dir));
  const seq = (at: number) => buf.readUInt32LE(at + 12);
  const newest = seq(8) > seq(28) ? 8 : 28;
  fs.writeFileSync(logOf(dir), Buffer.concat([buf.subarray(0, newest + 3), Buffer.from([0xee]), buf.subarray(newest + 4)]));
  const s = await openFileStore(dir);
  t.equal((await s.list('')).length, 5, 'nothing lost');
  await s.put('k5', 'value 5');
  await s.close();
  const again = fs.readFileSync(logOf(dir));
  again.fill(0xee, 8, 48);
  fs.writeFileSync(logOf(dir), again);
  await t.rejects(openFileStore(dir), /corrupt header in .*both slots damaged/);
});

t.test('a half-written snapshot (compactor died before its rename) is removed on open', async (t) => {
  const dir = tmpDir(t);
  await fill(dir, 5);
  // 0600 as the store makes its files: a wider one in the store refuses the open (test/security/store-perms.test.ts).
  fs.writeFileSync(path.join(dir, 'log.tmp'), 'BSKVLOG1 and then nothing useful', { mode: 0o600 });
  const s = await openFileStore(dir);
  t.equal((await s.list('')).length, 5);
  t.notOk(fs.existsSync(path.join(dir, 'log.tmp')));
  await s.close();
});

t.test('corruption in the middle of the log is a clear StoreError', async (t) => {
  const dir = tmpDir(t);
  await fill(dir, 20);
  const buf = fs.readFileSync(logOf(dir));
  const at = buf.indexOf('value 5');
  t.ok(at > 0);
  buf[at + 2] ^= 0xff;
  fs.writeFileSync(logOf(dir), buf);
  await t.rejects(openFileStore(dir), StoreError);
  await t.rejects(openFileStore(dir), new RegExp(`corrupt log ${logOf(dir).replace(/[/\\]/g, '.')} at byte \\d+: damaged record`));
  // Left untouched for a human to look at: not truncated.
  t.equal(fs.statSync(logOf(dir)).size, buf.length);
});

t.test('a file that is not a log, and a path that cannot be a directory', async (t) => {
  const dir = tmpDir(t);
  fs.writeFileSync(logOf(dir), 'hello, I am not a log at all, but I am longer than a header', { mode: 0o600 });
  await t.rejects(openFileStore(dir), /is not a blockspeaker log/);
  const file = path.join(dir, 'plain-file');
  fs.writeFileSync(file, '', { mode: 0o600 });
  await t.rejects(openFileStore(path.join(file, 'sub')), new RegExp(`file:.*cannot create directory .*sub`));
  if (process.getuid?.() !== 0) {
    const ro = path.join(dir, 'ro');
    fs.mkdirSync(ro, { mode: 0o500 });
    await t.rejects(openFileStore(ro), /permission denied/);
  }
});

t.test('group commit: 1000 concurrent txns, far fewer syncs', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  await s.put('taken', 'x');
  const before = s.stats();
  const results = await Promise.all(
    Array.from({ length: 1000 }, (_, i) =>
      // Every 10th txn must fail: its compare says "taken" is absent.
      s.txn([{ key: i % 10 === 0 ? 'taken' : `n${i}`, modRevision: 0 }], [{ type: 'put', key: `n${i}`, value: String(i) }]),
    ),
  );
  const after = s.stats();
  const ok = results.filter((r) => r.succeeded);
  t.equal(ok.length, 900);
  t.same(ok.map((r) => r.revision), Array.from({ length: 900 }, (_, i) => i + 2), 'revisions in issue order, one each');
  t.ok(results.filter((r) => !r.succeeded).every((r) => r.failed?.[0] === 'taken'));
  for (let i = 0; i < 1000; i++) {
    const kv = await s.get(`n${i}`);
    if (i % 10 === 0) t.equal(kv, undefined);
    else if (kv?.value !== String(i)) t.fail(`n${i} = ${kv?.value}`);
  }
  const syncs = after.syncs - before.syncs;
  t.ok(syncs < 1000, `${syncs} fdatasyncs for 1000 txns`);
  t.ok(syncs <= 5, `one batch expected, got ${syncs} syncs`);
  t.equal(after.txns - before.txns, 1000);
  await s.close();
});

t.test('CAS inside one batch sees the earlier txns of the batch', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  // Both try to create "x"; only the first in issue order may win, the second sees it in the batch overlay.
  const [a, b, c] = await Promise.all([
    s.txn([{ key: 'x', modRevision: 0 }], [{ type: 'put', key: 'x', value: 'a' }]),
    s.txn([{ key: 'x', modRevision: 0 }], [{ type: 'put', key: 'x', value: 'b' }]),
    s.txn([{ key: 'x', modRevision: 1 }], [{ type: 'delete', key: 'x' }]),
  ]);
  t.same([a, b, c], [
    { succeeded: true, revision: 1 },
    { succeeded: false, revision: 1, failed: ['x'] },
    { succeeded: true, revision: 2 },
  ]);
  t.equal(s.stats().syncs, 3, 'create (2: file + dir) + one batch');
  await s.close();
});

t.test('two stores on one directory in one process stay consistent', async (t) => {
  const dir = tmpDir(t);
  const opts = { compactMinBytes: 2048, compactRatio: 1 };
  const a = await openFileStore(dir, opts);
  const b = await openFileStore(dir, opts);
  async function incr(s: Store, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      for (;;) {
        const kv = await s.get('c');
        const r = await s.txn([{ key: 'c', modRevision: kv?.modRevision ?? 0 }], [{ type: 'put', key: 'c', value: String(Number(kv?.value ?? 0) + 1) }]);
        if (r.succeeded) break;
      }
    }
  }
  await Promise.all([incr(a, 150), incr(b, 150), incr(a, 50), incr(b, 50)]);
  t.equal((await a.get('c'))?.value, '400');
  t.equal((await b.get('c'))?.value, '400');
  t.equal(await a.revision(), await b.revision());
  t.ok(a.stats().compactions + b.stats().compactions > 0, 'compactions happened while both were writing');
  t.ok(a.stats().recordsReadIn > 0 && b.stats().recordsReadIn > 0, 'each read the other one\'s records');
  await a.close();
  await b.close();
});

t.test('close flushes pending txns; later calls throw', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  const pending = [s.put('a', '1'), s.put('b', '2'), s.txn([], [{ type: 'put', key: 'c', value: '3' }])];
  await s.close();
  t.same(await Promise.all(pending), [1, 2, { succeeded: true, revision: 3 }]);
  await t.rejects(s.get('a'), /file:.* is closed/);
  await t.rejects(s.put('a', '1'), StoreError);
  t.throws(() => s.watch('', 0, () => {}), /is closed/);
  await s.close(); // idempotent
  const s2 = await openFileStore(dir);
  t.equal((await s2.list('')).length, 3);
  await s2.close();
});

t.test('bad input is refused before it reaches the log', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  await t.rejects(s.txn([], [{ type: 'put', key: 'k', value: 5 as unknown as string }]), /bad op/);
  await t.rejects(s.txn([{ key: 'k', modRevision: -1 }], []), /bad compare/);
  t.equal(await s.revision(), 0);
  await s.close();
});

function collect(s: Store, prefix: string, from: number): { events: WatchEvent[]; close: () => void } {
  const events: WatchEvent[] = [];
  const w = s.watch(prefix, from, (evs) => events.push(...evs));
  return { events, close: () => w.close() };
}

const until = async (cond: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
};

t.test('watch: own writes, another store\'s writes, replay from a revision', async (t) => {
  const dir = tmpDir(t);
  const a = await openFileStore(dir, { pollMs: 20 });
  const b = await openFileStore(dir);
  await a.put('w/0', 'before');
  const live = collect(a, 'w/', 0);
  const all = collect(a, '', 0);
  await a.put('w/1', 'mine');
  await a.put('other/1', 'not under w/');
  await b.put('w/2', 'theirs'); // noticed by a's poll
  await b.txn([], [{ type: 'delete', key: 'w/1' }, { type: 'delete', key: 'w/absent' }]);
  await until(() => live.events.length === 3);
  t.same(live.events, [
    { type: 'put', key: 'w/1', value: 'mine', revision: 2 },
    { type: 'put', key: 'w/2', value: 'theirs', revision: 4 },
    { type: 'delete', key: 'w/1', revision: 5 },
  ]);
  t.equal(all.events.length, 4);
  // Replay from revision 1: everything after it, then live events, in order.
  const replay = collect(a, 'w/', 1);
  await a.put('w/3', 'x');
  await until(() => replay.events.length === 4);
  t.same(replay.events.map((e) => e.revision), [2, 4, 5, 6]);
  t.same(replay.events.slice(0, 3), live.events.slice(0, 3), 'replay equals what was seen live');
  // A watcher in the other store replays the same history from the log.
  const fromB = collect(b, 'w/', 0 + 1);
  await until(() => fromB.events.length === 4);
  t.same(fromB.events, replay.events);
  live.close();
  await a.put('w/4', 'y');
  await until(() => replay.events.length === 5);
  t.equal(live.events.length, 4, 'a closed watcher gets nothing more');
  all.close();
  replay.close();
  fromB.close();
  await a.close();
  await b.close();
});

t.test('watch follows another store through compactions', async (t) => {
  const dir = tmpDir(t);
  const writer = await openFileStore(dir, { compactMinBytes: 1024, compactRatio: 1 });
  const reader = await openFileStore(dir, { pollMs: 5 });
  const w = collect(reader, 'k/', 0);
  for (let i = 0; i < 200; i++) {
    await writer.put(`k/${i % 5}`, String(i));
    if (i % 20 === 0) await new Promise((r) => setTimeout(r, 15)); // let the reader poll now and then
  }
  t.ok(writer.stats().compactions >= 3, `${writer.stats().compactions} compactions`);
  await until(() => w.events.at(-1)?.value === '199');
  // Folding the events gives the final state, and revisions never go backwards.
  const folded = new Map<string, string>();
  let last = 0;
  for (const e of w.events) {
    t.ok(e.revision >= last);
    last = e.revision;
    if (e.type === 'put') folded.set(e.key, e.value!);
    else folded.delete(e.key);
  }
  t.same([...folded.entries()].sort(), (await writer.list('k/')).map((kv) => [kv.key, kv.value]));
  t.same(await reader.list(''), await writer.list(''));
  w.close();
  await writer.close();
  await reader.close();
});

t.test('a store idle through two compactions catches up on its next read', async (t) => {
  const dir = tmpDir(t);
  const writer = await openFileStore(dir, { compactMinBytes: 512, compactRatio: 1 });
  const idle = await openFileStore(dir, { pollMs: 1_000_000 });
  const events: WatchEvent[] = [];
  idle.watch('', 0, (evs) => events.push(...evs)); // never polls during the test
  await idle.put('gone', 'soon deleted');
  await writer.delete('gone');
  for (let i = 0; i < 100; i++) await writer.put(`k${i % 3}`, String(i));
  t.ok(writer.stats().compactions >= 2);
  t.same(await idle.list(''), await writer.list(''));
  t.equal(await idle.revision(), await writer.revision());
  await new Promise((r) => setImmediate(r));
  const folded = new Map<string, string>();
  for (const e of events) e.type === 'put' ? folded.set(e.key, e.value!) : folded.delete(e.key);
  t.same([...folded.keys()].sort(), ['k0', 'k1', 'k2'], 'watchers got the difference, including the delete');
  t.equal(folded.get('k0'), '99');
  await writer.close();
  await idle.close();
});
