// The file store under Windows semantics (the Windows double: a rename over an open file fails, a lock needs a
// readable handle, an open file cannot be removed), and a crash at every step of a compaction.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { COMPACTION_STEPS, logGenerations, openFileStore, type CompactionStep } from '../../src/store/file.ts';
import { windowsDouble } from '../platform/windows-double.ts';

function tmpDir(t: { teardown(fn: () => void): void }, tag = 'bs-win-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), tag));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Small thresholds: every few writes cross them. */
const OFTEN = { compactMinBytes: 0, compactRatio: 1 };

t.test('the double enforces what the store must live with', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const f = w.platform.files;
  fs.writeFileSync(path.join(dir, 'a'), 'a');
  fs.writeFileSync(path.join(dir, 'b'), 'b');
  const fd = f.open(path.join(dir, 'b'), 'r');
  t.throws(() => f.rename(path.join(dir, 'a'), path.join(dir, 'b')), { code: 'EPERM' }, 'rename over an open file');
  t.throws(() => f.remove(path.join(dir, 'b')), { code: 'EPERM' }, 'remove an open file');
  f.close(fd);
  f.rename(path.join(dir, 'a'), path.join(dir, 'b'));
  t.equal(fs.readFileSync(path.join(dir, 'b'), 'utf8'), 'a', 'a closed target can be replaced');
  const append = f.open(path.join(dir, 'LOCK1'), 'a');
  t.throws(() => f.tryLock(append), { code: 'EACCES' }, "LockFileEx refuses an append-only ('a') handle");
  f.close(append);
  const rw = f.open(path.join(dir, 'LOCK2'), f.lockFlags);
  t.equal(f.tryLock(rw), true, `the platform's lock mode (${f.lockFlags}) is accepted`);
  f.unlock(rw);
  f.close(rw);
});

t.test('compaction crossed many times under Windows rules, several stores sharing the directory', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const a = await openFileStore(dir, { ...OFTEN, platform: w.platform });
  const b = await openFileStore(dir, { ...OFTEN, platform: w.platform });
  const model = new Map<string, string>();
  for (let i = 0; i < 300; i++) {
    const key = `k${i % 7}`;
    const value = `v${i}`;
    await (i % 3 === 0 ? b : a).put(key, value);
    model.set(key, value);
    if (i % 50 === 49) t.same(Object.fromEntries((await b.list('')).map((kv) => [kv.key, kv.value])), Object.fromEntries(model), `reader in step with writer at ${i}`);
  }
  const sa = a.stats();
  const sb = b.stats();
  t.ok(sa.compactions + sb.compactions >= 20, `compacted ${sa.compactions + sb.compactions} times`);
  t.equal(sa.lastCompactionError, undefined, 'no compaction failed in store a');
  t.equal(sb.lastCompactionError, undefined, 'no compaction failed in store b');
  t.same(w.refused.filter((r) => r.startsWith('rename')), [], 'nothing was ever renamed over an open file');
  await a.close();
  await b.close();
  const gens = logGenerations(fs.readdirSync(dir));
  t.ok(gens.length >= 1, `log generations left: ${gens.join(',')}`);
  const c = await openFileStore(dir, { platform: w.platform });
  t.same(Object.fromEntries((await c.list('')).map((kv) => [kv.key, kv.value])), Object.fromEntries(model), 'every write is there after a restart');
  await c.close();
  t.equal(logGenerations(fs.readdirSync(dir)).length, 1, 'old generations are removed once nobody holds them open');
});

t.test('the old layout (one file named log) opens and compacts onward', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir);
  await s.put('a', '1');
  await s.close();
  t.same(logGenerations(fs.readdirSync(dir)), [0], 'a new store starts with the file "log"');
  const s2 = await openFileStore(dir, OFTEN);
  for (let i = 0; i < 10; i++) await s2.put('a', String(i));
  t.ok(s2.stats().compactions > 0);
  await s2.close();
  const s3 = await openFileStore(dir);
  t.equal((await s3.get('a'))?.value, '9');
  await s3.close();
});

/** The files of a directory as a kill at this instant leaves them (a kill loses no written page). */
function snapshotDir(dir: string): Map<string, Buffer> {
  const m = new Map<string, Buffer>();
  for (const n of fs.readdirSync(dir)) m.set(n, fs.readFileSync(path.join(dir, n)));
  return m;
}

function restoreDir(files: Map<string, Buffer>, dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 }); // a store nobody else may read (Linux refuses a 0755 one)
  for (const [n, b] of files) fs.writeFileSync(path.join(dir, n), b, { mode: 0o600 }); // as the store made them
}

t.test('a crash at any step of a compaction leaves a store that opens with every committed write', async (t) => {
  const root = tmpDir(t, 'bs-crash-');
  let runs = 0;
  const seen = new Set<CompactionStep>();
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 7 }), fc.string({ maxLength: 40 }), fc.boolean()), { minLength: 10, maxLength: 40 }),
      fc.constantFrom(...COMPACTION_STEPS),
      fc.nat({ max: 2 }),
      fc.boolean(),
      async (ops, step, nth, windows) => {
        const dir = path.join(root, `run-${runs++}`);
        const w = windowsDouble();
        let hits = 0;
        let crashed: { files: Map<string, Buffer>; expected: Map<string, string> } | undefined;
        const model = new Map<string, string>();
        let pending: [string, string | undefined] | undefined;
        const s = await openFileStore(dir, {
          ...OFTEN,
          ...(windows ? { platform: w.platform } : {}),
          onCompactionStep: (at) => {
            if (at !== step || crashed || !pending) return;
            if (hits++ < nth) return;
            // The batch that triggered this compaction is already durable: it belongs to what must survive.
            const expected = new Map(model);
            if (pending[1] === undefined) expected.delete(pending[0]);
            else expected.set(pending[0], pending[1]);
            crashed = { files: snapshotDir(dir), expected };
          },
        });
        try {
          for (const [k, v, del] of ops) {
            const key = `key/${k}`;
            pending = [key, del ? undefined : v];
            if (del) await s.delete(key);
            else await s.put(key, v);
            if (del) model.delete(key);
            else model.set(key, v);
          }
          pending = undefined;
        } finally {
          await s.close();
        }
        if (!crashed) return true; // this workload never reached that step that often
        seen.add(step);
        const copy = `${dir}-crashed`;
        restoreDir(crashed.files, copy);
        const r = await openFileStore(copy, windows ? { platform: w.platform } : {});
        const got = new Map((await r.list('')).map((kv) => [kv.key, kv.value]));
        await r.put('after/crash', 'x'); // and it takes writes
        await r.close();
        const r2 = await openFileStore(copy, windows ? { platform: w.platform } : {});
        const again = (await r2.get('after/crash'))?.value;
        await r2.close();
        fs.rmSync(dir, { recursive: true, force: true });
        fs.rmSync(copy, { recursive: true, force: true });
        return JSON.stringify([...got].sort()) === JSON.stringify([...crashed.expected].sort()) && again === 'x';
      },
    ),
    { numRuns: 100 },
  );
  t.ok(runs >= 100);
  t.same([...seen].sort(), [...COMPACTION_STEPS].sort(), 'every step was crashed at least once');
});

t.test('a compaction failing at any step is not a commit failure; the store goes on and reopens whole', async (t) => {
  const root = tmpDir(t, 'bs-fail-');
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...COMPACTION_STEPS), fc.nat({ max: 3 }), async (step, nth) => {
      const dir = path.join(root, `run-${runs++}`);
      const w = windowsDouble();
      let hits = 0;
      let failed = 0;
      const s = await openFileStore(dir, {
        ...OFTEN,
        platform: w.platform,
        onCompactionStep: (at) => {
          if (at === step && hits++ === nth) {
            failed++;
            throw new Error(`injected failure at ${at}`);
          }
        },
      });
      const model = new Map<string, string>();
      for (let i = 0; i < 30; i++) {
        await s.put(`k${i % 5}`, `v${i}`);
        model.set(`k${i % 5}`, `v${i}`);
      }
      t.same(Object.fromEntries((await s.list('')).map((kv) => [kv.key, kv.value])), Object.fromEntries(model), `live view after a failure at ${step}`);
      await s.close();
      const r = await openFileStore(dir, { platform: w.platform });
      const ok = JSON.stringify(Object.fromEntries((await r.list('')).map((kv) => [kv.key, kv.value]))) === JSON.stringify(Object.fromEntries(model));
      await r.close();
      return ok && failed === 1;
    }),
    { numRuns: 20 },
  );
});
