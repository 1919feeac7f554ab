// The reconcile loop, driven by a manual clock: passes on start, change and interval; drift; backoff; a failed
// read never plans; and with an HNS that fails at random it still converges.
import t from 'tap';
import fc from 'fast-check';
import type { DesiredState } from '../../src/hns/desired.ts';
import { FakeExecutor, FakeHns } from '../../src/hns/fake.ts';
import { HCN, HcnError, type HnsExecutor, type HnsOp } from '../../src/hns/model.ts';
import { desiredView, observe, planHns } from '../../src/hns/planner.ts';
import { HnsReconciler } from '../../src/hns/reconcile.ts';
import { mulberry32 } from '../../src/rib/tablegen.ts';
import { MODES, ManualTime, desired, fromSpec, stateArb } from './helpers.ts';

async function fire(time: ManualTime, r: HnsReconciler): Promise<void> {
  time.fireNext();
  await r.idle();
}

t.test('start, change batches, periodic passes, drift from lost host routes', async (t) => {
  const time = new ManualTime();
  const fake = new FakeHns();
  let d = desired('l2bridge', ['10.0.1.0/26'], { '10.0.5.0/26': '192.168.1.5', '10.0.6.0/26': '192.168.1.6' });
  const r = new HnsReconciler({ executor: new FakeExecutor(fake), desired: () => d, clock: time, timers: time, intervalMs: 30_000, debounceMs: 100 });
  r.start();
  t.match(r.status(), { nextRunAt: 0, nextReason: 'start' });
  await fire(time, r);
  t.match(r.status(), { passes: 1, lastPlan: { reason: 'start', ok: true, ops: 3, applied: 3, byOp: { 'create-network': 1, 'add-host-route': 2 } }, nextRunAt: 30_000, nextReason: 'periodic', drift: null });

  // A change batch: planned after the debounce, not at the interval.
  time.advance(1000);
  d = desired('l2bridge', ['10.0.1.0/26', '10.0.2.0/26'], { '10.0.5.0/26': '192.168.1.5', '10.0.6.0/26': '192.168.1.6' });
  r.notify();
  r.notify();
  t.match(r.status(), { nextRunAt: 1100, nextReason: 'change' });
  await fire(time, r);
  t.match(r.status().lastPlan, { reason: 'change', ops: 1, byOp: { 'add-ip-subnet': 1 } });
  t.equal(r.status().drift, null, 'a change is not drift');

  // Nothing changes: the periodic pass finds nothing.
  await fire(time, r);
  t.match(r.status(), { lastPlan: { reason: 'periodic', ops: 0 }, driftEvents: 0 });

  // Host routes get lost; the next periodic pass puts them back and records drift.
  fake.loseHostRoutes();
  await fire(time, r);
  t.match(r.status(), { lastPlan: { reason: 'periodic', ops: 2, ok: true }, driftEvents: 1, drift: { ops: 2, byOp: { 'add-host-route': 2 } } });
  t.same(planHns(fake.snapshot(), d).ops, []);
  r.stop();
  t.equal(time.pending, 0, 'stop clears the timer');
});

/** An executor that fails its first `n` applies (or reads) with `err`. */
function flaky(inner: HnsExecutor, n: { apply?: number; read?: number }, err: () => Error): HnsExecutor & { applies: HnsOp[][] } {
  let applyFails = n.apply ?? 0;
  let readFails = n.read ?? 0;
  const applies: HnsOp[][] = [];
  return {
    applies,
    async read() {
      if (readFails-- > 0) throw err();
      return inner.read();
    },
    async apply(ops) {
      applies.push([...ops]);
      if (applyFails-- > 0) return { applied: 0, error: err(), failedOp: ops[0] };
      return inner.apply(ops);
    },
  };
}

t.test('backoff after failures; a change batch does not cut it short; success resets it', async (t) => {
  const time = new ManualTime();
  const fake = new FakeHns();
  const ex = flaky(new FakeExecutor(fake), { apply: 4 }, () => new HcnError(HCN.UNAVAILABLE, 'HNS restarting'));
  const d = desired('overlay', ['10.0.1.0/26']);
  const r = new HnsReconciler({ executor: ex, desired: () => d, clock: time, timers: time, backoff: { initialMs: 1000, factor: 2, maxMs: 5000 } });
  r.start();
  const delays: number[] = [];
  for (let i = 0; i < 4; i++) {
    await fire(time, r);
    delays.push(r.status().nextRunAt! - time.now());
  }
  t.same(delays, [1000, 2000, 4000, 5000], 'exponential, capped');
  t.match(r.status(), { consecutiveFailures: 4, lastError: { stage: 'apply', code: '0x800706BA', op: 'create-network', message: /HNS restarting/ }, nextReason: 'retry' });
  const next = r.status().nextRunAt;
  r.notify();
  t.equal(r.status().nextRunAt, next, 'notify waits for the retry');
  await fire(time, r);
  t.match(r.status(), { consecutiveFailures: 0, lastPlan: { ok: true, reason: 'retry' }, nextReason: 'periodic' }, 'the retry pass took the change in');
  t.same(planHns(fake.snapshot(), d).ops, []);
  r.stop();
});

t.test('a failed read never plans, not even when its code says NOT_FOUND', async (t) => {
  const time = new ManualTime();
  const ex = flaky(new FakeExecutor(new FakeHns()), { read: 2 }, () => new HcnError(HCN.NETWORK_NOT_FOUND, 'enumerate failed'));
  const r = new HnsReconciler({ executor: ex, desired: () => desired('l2bridge', ['10.0.1.0/26']), clock: time, timers: time });
  r.start();
  await fire(time, r);
  await fire(time, r);
  t.equal(ex.applies.length, 0, 'nothing applied after failed reads');
  t.match(r.status(), { consecutiveFailures: 2, lastError: { stage: 'read', code: '0x803B0001' } });
  await fire(time, r);
  t.equal(ex.applies.length, 1);
  t.match(r.status(), { consecutiveFailures: 0, lastPlan: { ok: true, ops: 1 } });
  r.stop();
});

t.test('a desired state that cannot be built is an error with backoff, not a crash', async (t) => {
  const time = new ManualTime();
  let bad = true;
  const r = new HnsReconciler({
    executor: new FakeExecutor(new FakeHns()),
    desired: () => (bad ? desired('l2bridge', ['192.168.0.0/26']) : desired('l2bridge', [])),
    clock: time,
    timers: time,
  });
  r.start();
  await fire(time, r);
  t.match(r.status().lastError, { stage: 'desired', message: /inside no configured pool/ });
  bad = false;
  await fire(time, r);
  t.match(r.status(), { consecutiveFailures: 0, lastPlan: { ok: true } });
  r.stop();
});

t.test('runOnce joins a running pass', async (t) => {
  const fake = new FakeHns();
  const time = new ManualTime();
  const r = new HnsReconciler({ executor: new FakeExecutor(fake), desired: () => desired('l2bridge', ['10.0.1.0/26']), clock: time, timers: time });
  const a = r.runOnce();
  const b = r.runOnce();
  t.equal(a, b);
  t.match(await a, { ok: true, ops: 1 });
  t.equal(r.status().passes, 1);
});

t.test('property: with an HNS that fails at random (before or after changes, and on reads), the loop converges to every desired state', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...MODES), fc.integer({ min: 1, max: 2 ** 31 - 1 }), fc.array(stateArb, { minLength: 1, maxLength: 4 }), async (mode, seed, specs) => {
      const time = new ManualTime();
      const fake = new FakeHns({ faults: { random: mulberry32(seed), rate: 0.3, readRate: 0.15 } });
      let d: DesiredState = fromSpec(mode, specs[0]);
      const r = new HnsReconciler({ executor: new FakeExecutor(fake), desired: () => d, clock: time, timers: time, backoff: { initialMs: 10, maxMs: 100 } });
      r.start();
      for (const spec of specs) {
        d = fromSpec(mode, spec);
        r.notify();
        let fired = 0;
        // Converged: a pass that succeeded and found nothing to do.
        for (;;) {
          await fire(time, r);
          const s = r.status();
          if (s.lastPlan?.ok && s.lastPlan.ops === 0) break;
          if (++fired > 300) throw new Error(`no convergence after 300 passes: ${JSON.stringify(s.lastError)}`);
        }
        const snap = fake.snapshot();
        const existed = snap.Networks.some((n) => n.Name === 'pods');
        if (JSON.stringify(observe(snap, d)) !== JSON.stringify(desiredView(d, existed))) throw new Error('converged to the wrong state');
      }
      r.stop();
    }),
    { numRuns: 60 },
  );
  t.pass('60 random runs converged');
});
