// Several real processes on one store directory: concurrent CAS writers, SIGKILL at random moments, watchers.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openFileStore } from '../../src/store/file.ts';
import type { WatchEvent } from '../../src/store/types.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-mp-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function child(script: string, args: string[], stdin: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(here, script), ...args], {
    stdio: [stdin, 'pipe', 'pipe'],
  });
}

function finish(p: ChildProcess): Promise<{ code: number | null; out: string; err: string }> {
  let out = '';
  let err = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve) => p.on('close', (code) => resolve({ code, out, err })));
}

t.test('4 processes CAS-increment one counter and add unique keys', async (t) => {
  const dir = tmpDir(t);
  const n = 150;
  // Small compaction thresholds so the log is replaced while others are reading and writing it.
  const opts = JSON.stringify({ compactMinBytes: 16 * 1024, compactRatio: 0.9 });
  const results = await Promise.all([0, 1, 2, 3].map((id) => finish(child('file-writer.child.ts', [dir, String(id), String(n), opts]))));
  for (const r of results) {
    t.equal(r.code, 0, r.err);
    t.match(r.out, /^done \d+/);
  }
  const retries = results.reduce((sum, r) => sum + Number(/done (\d+)/.exec(r.out)?.[1] ?? 0), 0);
  t.comment(`${retries} CAS retries`);
  const s = await openFileStore(dir);
  t.equal((await s.get('counter'))?.value, String(4 * n), 'no increment lost');
  const unique = await s.list('unique/');
  t.equal(unique.length, 4 * n);
  // Each unique key carries the counter value its txn wrote: all distinct, 1..4n.
  const seen = unique.map((kv) => Number(kv.value.split(':')[2])).sort((a, b) => a - b);
  t.same(seen, Array.from({ length: 4 * n }, (_, i) => i + 1));
  t.equal(await s.revision(), 4 * n, 'one revision per successful txn, none for failed ones');
  t.ok(s.stats().compactedRevision > 0, 'the log was compacted during the run');
  await s.close();
});

/** A crash child, started and waiting for "go"; run() lets it write, SIGKILLs it and returns its acknowledged txns. */
function startCrashChild(dir: string, base: number, prefix: string, opts: string) {
  const p = child('file-crash.child.ts', [dir, String(base), prefix, opts], 'pipe');
  const done = finish(p);
  let buf = '';
  const acks: Array<[number, number]> = [];
  let firstAck: () => void = () => {};
  const acked = new Promise<void>((resolve) => (firstAck = resolve));
  const ready = new Promise<void>((resolve) => {
    p.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const line of lines) {
        if (line === 'ready') resolve();
        else {
          const [i, rev] = line.split(' ').map(Number);
          acks.push([i!, rev!]);
          firstAck();
        }
      }
    });
  });
  return {
    async run(delay: number) {
      await Promise.race([ready, done]);
      p.stdin!.write('go\n');
      // Count from the first acknowledgement, so that a slow (loaded) machine still gets real work done.
      await Promise.race([acked, done]);
      await new Promise((r) => setTimeout(r, delay));
      p.kill('SIGKILL');
      const res = await done;
      return { acks, code: res.code, err: res.err };
    },
  };
}

t.test('SIGKILL at random moments, two writers at once: every acknowledged txn survives', async (t) => {
  const dir = tmpDir(t);
  const trials = 10;
  // Compact often, so some kills land in the middle of a compaction.
  const opts = JSON.stringify({ compactMinBytes: 8 * 1024, compactRatio: 2 });
  const latest = new Map<string, number>(); // slot key -> highest acknowledged i
  let acked = 0;
  let compacted = 0;
  const start = Date.now();
  const start2 = (trial: number) => ['p0/', 'p1/'].map((prefix) => startCrashChild(dir, trial * 1_000_000, prefix, opts));
  let next = start2(0);
  for (let trial = 0; trial < trials; trial++) {
    const delays = [Math.floor(Math.random() * 150), Math.floor(Math.random() * 150)];
    const current = next;
    // Start the next trial's processes now: their startup overlaps this trial (they only open the store).
    if (trial + 1 < trials) next = start2(trial + 1);
    // Two processes on one directory, killed independently: one may die holding the lock or mid-append while
    // the other goes on writing after it.
    const runs = await Promise.all(current.map((c, k) => c.run(delays[k]!)));
    const s = await openFileStore(dir);
    let missing = 0;
    let maxRev = 0;
    for (const [k, run] of runs.entries()) {
      t.equal(run.code, null, `trial ${trial} writer ${k} was killed (stderr: ${run.err.slice(0, 500)})`);
      for (const [i, rev] of run.acks) {
        const slot = `p${k}/slot/${i % 50}`;
        latest.set(slot, Math.max(latest.get(slot) ?? -1, i));
        maxRev = Math.max(maxRev, rev);
        if (i % 10 === 0) {
          const kv = await s.get(`p${k}/unique/${i}`);
          if (kv?.value !== `v${i}` || kv.modRevision !== rev) missing++;
        }
      }
      acked += run.acks.length;
    }
    for (const [slot, i] of latest) {
      // A later, unacknowledged write may have landed too; it can only be newer.
      const v = Number((await s.get(slot))?.value ?? -1);
      if (v < i || v % 50 !== i % 50) missing++;
    }
    const counts = runs.map((r) => r.acks.length).join('+');
    t.equal(missing, 0, `trial ${trial}: ${counts} acknowledged txns, killed after ${delays.join('/')} ms, none lost`);
    t.ok((await s.revision()) >= maxRev, 'revision at least the last acknowledged one');
    compacted = s.stats().compactedRevision;
    await s.close();
  }
  t.ok(compacted > 0, `the log was compacted along the way (snapshot at revision ${compacted})`);
  t.ok(acked > trials * 20, `${acked} acknowledged txns over ${trials * 2} kills in ${Date.now() - start} ms`);
});

t.test('a watcher sees another process\'s writes in order', async (t) => {
  const dir = tmpDir(t);
  const s = await openFileStore(dir, { pollMs: 10 });
  await s.put('unique/0/0', 'placeholder'); // overwritten by the child: a put event with a new value
  const events: WatchEvent[] = [];
  const w = s.watch('unique/', 0, (evs) => events.push(...evs));
  const opts = JSON.stringify({ compactMinBytes: 8 * 1024, compactRatio: 2 });
  const r = await finish(child('file-writer.child.ts', [dir, '0', '100', opts]));
  t.equal(r.code, 0, r.err);
  const end = Date.now() + 5000;
  while (events.length < 100 && Date.now() < end) await new Promise((res) => setTimeout(res, 10));
  t.equal(events.length, 100);
  const revs = events.map((e) => e.revision);
  t.same(revs, [...revs].sort((a, b) => a - b), 'in revision order');
  t.same(events.map((e) => e.key), Array.from({ length: 100 }, (_, i) => `unique/0/${i}`), 'in write order');
  t.ok(events.every((e) => e.type === 'put' && e.value === `0:${e.key.split('/')[2]}:${Number(e.key.split('/')[2]) + 1}`));
  w.close();
  await s.close();
});
