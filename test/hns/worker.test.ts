// The long-lived script worker's protocol against a stand-in process speaking the same JSON lines: one process for
// many calls, UTF-8 both ways, a hung call times out (worker killed, counted) and the next call starts a new one,
// a worker that dies fails its call; the PowerShell executor reads HNS state through it.
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { ScriptWorker, WorkerTimeoutError, findWorkerScript } from '../../src/hns/worker.ts';
import { PowerShellExecutor } from '../../src/hns/powershell.ts';

const standin = new URL('./worker-standin.mjs', import.meta.url).pathname;
const worker = (timeoutMs = 10_000) => new ScriptWorker({ command: process.execPath, args: [standin], timeoutMs });
const pidOf = (stdout: string) => Number(/pid (\d+)/.exec(stdout)![1]);

t.test('one worker answers many calls, in UTF-8', async (t) => {
  const w = worker();
  t.teardown(() => w.close());
  const a = await w.run('# réseau überprüfen ✓');
  const b = await w.run('# second');
  t.equal(a.code, 0);
  t.match(a.stdout, /echo # réseau überprüfen ✓/);
  t.equal(pidOf(a.stdout), pidOf(b.stdout), 'the same process');
  t.match(w.stats(), { calls: 2, starts: 1, timeouts: 0, deaths: 0 });
});

t.test('a hung call is killed and counted; the next call gets a fresh worker', async (t) => {
  const w = worker();
  t.teardown(() => w.close());
  const first = await w.run('# before');
  // The stand-in never answers HANG: only the timeout can end the call, whatever its length.
  await t.rejects(w.run('HANG', 200), WorkerTimeoutError);
  const after = await w.run('# after');
  t.not(pidOf(after.stdout), pidOf(first.stdout), 'a new worker process');
  t.match(w.stats(), { calls: 3, starts: 2, timeouts: 1, deaths: 1 });
});

t.test('a worker that exits fails its call; the next call restarts it', async (t) => {
  const w = worker();
  t.teardown(() => w.close());
  await t.rejects(w.run('DIE'), /exited/);
  const r = await w.run('# again');
  t.equal(r.code, 0);
  t.match(w.stats(), { starts: 2, deaths: 1 });
});

t.test('the PowerShell executor reads HNS state through the worker', async (t) => {
  const w = worker();
  t.teardown(() => w.close());
  const ex = new PowerShellExecutor({ runner: w, network: 'n' });
  const snap = await ex.read();
  t.same(snap.Networks.map((n) => n.Name), ['n']);
  t.match(w.stats(), { calls: 1, starts: 1 });
});

t.test('worker.ps1 ships beside the sources and uses only what PowerShell 5.1 has', async (t) => {
  const f = findWorkerScript('/nonexistent/node');
  t.ok(f && existsSync(f), `found ${f}`);
  const text = readFileSync(f!, 'utf8');
  t.match(text, /ConvertFrom-Json/);
  t.match(text, /UTF8Encoding/);
  t.notMatch(text, /Add-Type/, 'nothing compiled per start by the worker itself');
  const root = new URL('../..', import.meta.url).pathname;
  for (const here of ['dist/src/hns', 'dist/bundle']) {
    t.equal(findWorkerScript('/nonexistent/node', `${root}${here}`), `${root}src/hns/worker.ps1`, `found from ${here} (tsc's output, npm run build's bundle)`);
  }
});
