// The daemon's start-up without TurboFan (src/daemon/tiering.ts): held means hot code stays unoptimised,
// released means it is optimised again, and a user's own choice of compiler flags is left alone.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BUDGET_V8, INTERRUPT_BUDGET, holdOptimizer, isHeld, noteRequest, release, userChoseBudget, userChoseTiering } from '../../src/daemon/tiering.ts';

const OPTIMIZED = 1 << 4; // V8's OptimizationStatus::kOptimized
const BUDGET = `--interrupt-budget=${INTERRUPT_BUDGET}`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function child(extra: string[], fixture = 'tiering-child.ts', env: Record<string, string> = {}): Record<string, any> {
  const script = fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url));
  // Synchronous recompilation: "optimised after N calls" does not depend on a background thread's timing.
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--allow-natives-syntax', '--no-concurrent-recompilation', ...extra, script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '', ...env } });
  if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

t.test('held: a hot function stays unoptimised; released: the next one is optimised', async (t) => {
  const r = child([]);
  t.equal(r.held, true);
  t.equal(r.heldAfterRelease, false);
  t.equal(r.whileHeld & OPTIMIZED, 0, 'not optimised while held');
  t.equal(r.afterRelease & OPTIMIZED, OPTIMIZED, 'optimised after release');
});

t.test('the user chose: nothing is held, and --no-opt stays in force', async (t) => {
  const r = child(['--no-opt']);
  t.equal(r.held, false);
  t.equal(r.afterRelease & OPTIMIZED, 0, 'release() did not turn the optimiser on against --no-opt');
});

t.test('userChoseTiering reads the command line and NODE_OPTIONS', async (t) => {
  t.equal(userChoseTiering([], ''), false);
  t.equal(userChoseTiering(['--max-old-space-size=64'], '--enable-source-maps'), false);
  t.equal(userChoseTiering(['--no-opt'], ''), true);
  t.equal(userChoseTiering([], '--jitless'), true);
  t.equal(userChoseTiering(['--no_turbofan'], ''), true);
  t.equal(userChoseTiering(['--turbofan'], ''), true);
  t.equal(userChoseTiering(['--optimize-for-size'], ''), false, 'a flag that only starts like one is not one');
  t.equal(userChoseTiering(['--no-sparkplug'], ''), true, 'the baseline compiler is the user\'s choice too');
});

t.test('no BGP session: enough control-socket requests end the hold, so IPAM code is optimised', async (t) => {
  const r = child([], 'tiering-release-child.ts', { MODE: 'requests' });
  t.equal(r.held, true);
  t.equal(r.whileHeld & OPTIMIZED, 0, 'not optimised while held');
  t.equal(r.heldBeforeLast, true, 'after 9 of 10 requests: still held');
  t.equal(r.heldAfter, false, 'the 10th request released it');
  t.equal(r.afterRelease & OPTIMIZED, OPTIMIZED, 'optimised after release');
  t.equal(r.answers, 55, 'counted handlers still answer (1 + 2 + ... + 10)');
});

t.test('no BGP session and no requests: the hold ends after its time', async (t) => {
  const r = child([], 'tiering-release-child.ts', { MODE: 'timer' });
  t.equal(r.held, true);
  t.equal(r.heldBeforeLast, false, 'released by the timer');
  t.equal(r.afterRelease & OPTIMIZED, OPTIMIZED, 'optimised after release');
});

t.test('V8 refusing the flags: nothing is held, and release is harmless', async (t) => {
  const calls: string[] = [];
  const held = holdOptimizer({ setFlags: (f) => { calls.push(f); throw new Error(`unknown flag ${f}`); } });
  t.equal(held, false, 'not held when the flag is refused');
  t.equal(isHeld(), false);
  release();
  t.same(calls, ['--no-turbofan'], 'nothing else was tried, nothing to undo');
});

t.test('V8 taking the optimiser flag but refusing the baseline one: the optimiser alone is held', async (t) => {
  const calls: string[] = [];
  const held = holdOptimizer({ releaseAfterMs: 3_600_000, setFlags: (f) => { calls.push(f); if (f.includes('sparkplug')) throw new Error('no'); } });
  t.equal(held, true);
  release();
  t.equal(isHeld(), false);
  t.same(calls, ['--no-turbofan', '--no-sparkplug', BUDGET, '--turbofan', '--sparkplug'], 'held with the longer profiler budget, released without touching it');
});

t.test('the hold counts down its requests, and each hold starts the count afresh', async (t) => {
  const calls: string[] = [];
  const setFlags = (f: string) => { calls.push(f); };
  t.equal(holdOptimizer({ releaseAfterRequests: 3, releaseAfterMs: 3_600_000, setFlags }), true);
  noteRequest();
  noteRequest();
  t.equal(isHeld(), true, '2 of 3 requests: still held');
  noteRequest();
  t.equal(isHeld(), false, 'the 3rd request released it');
  noteRequest(); // not held: counts nothing, releases nothing
  t.same(calls, ['--no-turbofan', '--no-sparkplug', BUDGET, '--turbofan', '--sparkplug'], 'held with the longer profiler budget, released without touching it');
  t.equal(holdOptimizer({ releaseAfterRequests: 2, releaseAfterMs: 3_600_000, setFlags }), true);
  noteRequest();
  t.equal(isHeld(), true, 'the earlier requests do not count toward the new hold');
  noteRequest();
  t.equal(isHeld(), false);
});

t.test('the profiler budget only on the V8 it was measured on', async (t) => {
  const calls: string[] = [];
  t.equal(holdOptimizer({ setFlags: (f) => { calls.push(f); }, releaseAfterMs: 3_600_000, v8Version: '12.4.254.21-node.33' }), true);
  release();
  t.same(calls, ['--no-turbofan', '--no-sparkplug', '--turbofan', '--sparkplug'], "Node.js 22's V8 has no --interrupt-budget: not set");
  t.ok(BUDGET_V8.test('11.3.244.8-node.33'), "Node.js 20's V8 is the one");
});

t.test('the profiler budget: longer than V8\'s default, and a user\'s own is kept', async (t) => {
  t.ok(INTERRUPT_BUDGET > 67_584, "longer than V8 11.3's default");
  t.equal(userChoseBudget([], ''), false);
  t.equal(userChoseBudget(['--interrupt-budget=1000'], ''), true);
  t.equal(userChoseBudget([], '--max-semi-space-size=1 --interrupt_budget=5000'), true, 'in NODE_OPTIONS, with underscores');
  t.equal(userChoseBudget(['--interrupt-budget-for-feedback-allocation=100'], ''), false, 'another flag with the same start');
});
