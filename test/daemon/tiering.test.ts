// The daemon's start-up without TurboFan (src/daemon/tiering.ts): held means hot code stays unoptimised,
// released means it is optimised again, and a user's own choice of compiler flags is left alone.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { userChoseTiering } from '../../src/daemon/tiering.ts';

const OPTIMIZED = 1 << 4; // V8's OptimizationStatus::kOptimized

function child(extra: string[]): { held: boolean; heldAfterRelease: boolean; whileHeld: number; afterRelease: number } {
  const script = fileURLToPath(new URL('./fixtures/tiering-child.ts', import.meta.url));
  // Synchronous recompilation: "optimised after N calls" does not depend on a background thread's timing.
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--allow-natives-syntax', '--no-concurrent-recompilation', ...extra, script], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
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
});
