// The Linux reconcile loop with injected timers and an in-memory kernel table: scheduling, debounce, backoff,
// drift records, and convergence under random failures (fast-check).
import t from 'tap';
import fc from 'fast-check';
import { parseIP, parsePrefix, type Prefix } from '../../src/net/ip.ts';
import { desiredRoutes, type RemoteRoute } from '../../src/linux/desired.ts';
import type { RouteOp } from '../../src/linux/planner.ts';
import type { ApplyResult, OpFailure, ReadResult } from '../../src/linux/programmer.ts';
import { LinuxReconciler, type RouteProgrammerPort, type Timers } from '../../src/linux/reconcile.ts';
import { type KernelRoute, type Owner, routeKey, routeSatisfies } from '../../src/linux/route.ts';

const OWNER: Owner = { table: 200, protocol: 181 };

class FakeClock implements Timers {
  now = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }
  get pending(): number {
    return this.timers.size;
  }
  /** Move time forward, firing due timers in order and letting the async runs they start finish. */
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= target && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
      await settle();
    }
    this.now = target;
    await settle();
  }
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** A routing table with the kernel's add/replace/delete rules, and failure injection. */
class MemoryKernel implements RouteProgrammerPort {
  readonly owner = OWNER;
  table: KernelRoute[] = [];
  reads = 0;
  applied: RouteOp[][] = [];
  /** Next read or apply throws this. */
  throwNext: Error | null = null;
  /** Decides per op whether the kernel refuses it. */
  refuse: (op: RouteOp) => boolean = () => false;

  async read(): Promise<ReadResult> {
    this.reads++;
    if (this.throwNext) {
      const e = this.throwNext;
      this.throwNext = null;
      throw e;
    }
    return { routes: this.table.map((r) => ({ ...r })), unparsed: [] };
  }

  async apply(ops: readonly RouteOp[]): Promise<ApplyResult> {
    this.applied.push([...ops]);
    const failed: OpFailure[] = [];
    for (const op of ops) {
      if (this.refuse(op)) {
        failed.push({ op, line: op.op, error: 'Error: injected' });
        continue;
      }
      const i = this.table.findIndex((r) => r.table === op.route.table && routeKey(r) === routeKey(op.route)
        && (op.op !== 'delete' || r.protocol === op.route.protocol));
      if (op.op === 'add') {
        if (i >= 0) failed.push({ op, line: op.op, error: 'RTNETLINK answers: File exists' });
        else this.table.push(op.route);
      } else if (op.op === 'replace') {
        if (i >= 0) this.table[i] = op.route;
        else this.table.push(op.route);
      } else if (i < 0) failed.push({ op, line: op.op, error: 'RTNETLINK answers: No such process' });
      else this.table.splice(i, 1);
    }
    return { attempted: ops.length, failed };
  }
}

function setup(opts: { intervalMs?: number } = {}) {
  const clock = new FakeClock();
  const kernel = new MemoryKernel();
  const input: { local: Prefix[]; remote: RemoteRoute[] } = { local: [], remote: [] };
  const desired = () => desiredRoutes({ localBlocks: input.local, remote: input.remote }, OWNER);
  const loop = new LinuxReconciler({
    programmer: kernel, desired, timers: clock, now: () => clock.now, intervalMs: opts.intervalMs ?? 30_000,
    debounceMs: 50, retry: { initialMs: 1_000, factor: 2, maxMs: 8_000 },
  });
  return { clock, kernel, input, loop, desired };
}

const remote = (p: string, nh: string): RemoteRoute => ({ prefix: parsePrefix(p), nextHop: parseIP(nh) });

t.test('start runs at once, then every interval', async (t) => {
  const { clock, kernel, input, loop } = setup();
  input.local = [parsePrefix('10.0.0.0/26')];
  loop.start();
  await clock.advance(0);
  t.equal(kernel.reads, 1);
  t.equal(kernel.table.length, 1);
  t.match(loop.status(), { runs: 1, lastRun: { trigger: 'start', ok: true }, nextRunAt: 30_000, nextRunReason: 'interval' });
  await clock.advance(29_999);
  t.equal(kernel.reads, 1);
  await clock.advance(1);
  t.equal(kernel.reads, 2);
  t.match(loop.status().lastRun, { trigger: 'interval', planned: { add: 0, replace: 0, delete: 0 }, drift: 0 });
  t.same(kernel.applied.map((a) => a.length), [1, 0], 'the idle run applies nothing');
  await loop.stop();
  t.equal(clock.pending, 0, 'stop clears the timer');
});

t.test('changes are debounced into one run; a change during a run causes one more', async (t) => {
  const { clock, kernel, input, loop } = setup();
  loop.start();
  await clock.advance(0);
  for (let i = 0; i < 5; i++) {
    input.remote.push(remote(`10.1.${i}.0/24`, '192.0.2.1'));
    loop.changed();
    await clock.advance(10);
  }
  await clock.advance(100);
  t.equal(kernel.reads, 2, 'five changes within the debounce window, one run');
  t.equal(kernel.table.length, 5);
  // The first due time holds (no trailing debounce), so a steady stream of changes cannot starve the runs.
  for (let i = 5; i < 30; i++) {
    input.remote.push(remote(`10.1.${i}.0/24`, '192.0.2.1'));
    loop.changed();
    await clock.advance(10);
  }
  t.ok(kernel.reads >= 2 + 4, `a 250 ms stream of changes: runs every ~50 ms during it (${kernel.reads - 2})`);
  await clock.advance(100);
  t.equal(kernel.table.length, 30);
  const reads = kernel.reads;
  t.match(loop.status().lastRun, { trigger: 'change' });

  // Start a manual run and change the inputs while it is in flight.
  input.remote.push(remote('10.2.0.0/24', '192.0.2.1'));
  const p = loop.runOnce();
  loop.changed();
  await p;
  input.remote.push(remote('10.2.1.0/24', '192.0.2.1'));
  await clock.advance(50);
  t.equal(kernel.reads, reads + 2, 'the change seen mid-run gets its own run');
  t.equal(kernel.table.length, 32);
  await loop.stop();
});

t.test('failures back off exponentially up to the cap; changes wait for the retry; success resets', async (t) => {
  const { clock, kernel, input, loop } = setup({ intervalMs: 60_000 });
  input.remote = [remote('10.3.0.0/24', '192.0.2.1')];
  kernel.refuse = () => true;
  loop.start();
  await clock.advance(0);
  const times: number[] = [];
  for (let i = 0; i < 6; i++) {
    const before = kernel.reads;
    const from = clock.now;
    while (kernel.reads === before) await clock.advance(100);
    times.push(clock.now - from);
  }
  t.same(times, [1_000, 2_000, 4_000, 8_000, 8_000, 8_000], 'backoff 1 s, 2 s, 4 s, then capped at 8 s');
  t.match(loop.status(), { consecutiveFailures: 7, failures: 7, lastError: { message: /1 of 1 route ops failed; first: add 10\.3\.0\.0\/24/ } });

  loop.changed();
  await clock.advance(100);
  t.equal(loop.status().runs, 7, 'a change during backoff does not bypass it');
  kernel.refuse = () => false;
  await clock.advance(8_000);
  t.match(loop.status(), { consecutiveFailures: 0, lastRun: { ok: true, trigger: 'retry', drift: 0 }, nextRunReason: 'interval' });
  t.equal(kernel.table.length, 1);
  await loop.stop();
});

t.test('a thrown read (ip missing, namespace gone) is a failed run with its message', async (t) => {
  const { clock, kernel, loop } = setup();
  kernel.throwNext = new Error('cannot run ip: spawn ip ENOENT');
  loop.start();
  await clock.advance(0);
  t.match(loop.status(), { consecutiveFailures: 1, lastError: { message: 'cannot run ip: spawn ip ENOENT' }, nextRunReason: 'retry' });
  await clock.advance(1_000);
  t.match(loop.status(), { consecutiveFailures: 0, runs: 2 });
  await loop.stop();
});

t.test('drift: changes behind our back are repaired on the interval and recorded; input changes are not drift', async (t) => {
  const { clock, kernel, input, loop } = setup();
  input.local = [parsePrefix('10.4.0.0/26')];
  input.remote = [remote('10.4.1.0/26', '192.0.2.1'), remote('10.4.2.0/26', '192.0.2.1')];
  loop.start();
  await clock.advance(0);
  kernel.table.splice(0, 1); // someone deleted one
  kernel.table[0] = { ...kernel.table[0], via: parseIP('192.0.2.99') }; // and changed another
  await clock.advance(30_000);
  t.match(loop.status(), { driftRepairs: 1, lastDrift: { at: 30_000, ops: 2 }, lastRun: { drift: 2, ok: true } });
  t.match(loop.status().lastDrift!.sample, ['replace 10.4.1.0/26 via 192.0.2.1 table 200 proto 181 metric 0',
    'add blackhole 10.4.0.0/26 table 200 proto 181 metric 0']);
  input.remote.pop();
  loop.changed();
  await clock.advance(50);
  t.match(loop.status(), { driftRepairs: 1, lastRun: { trigger: 'change', drift: 0, planned: { delete: 1 } } });
  await loop.stop();
});

t.test('property: with random refusals and crashes the loop converges once the kernel behaves', async (t) => {
  const dst = fc.constantFrom(...['10.0.0.0/26', '10.0.1.0/26', '10.0.2.0/26', '10.0.2.5/32', 'fd00::/64', 'fd00:1::/64']);
  const inputArb = fc.record({
    local: fc.uniqueArray(dst, { maxLength: 3 }),
    remote: fc.array(fc.tuple(dst, fc.constantFrom('192.0.2.1', '192.0.2.2')), { maxLength: 4 }),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(inputArb, { minLength: 1, maxLength: 6 }), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 2 ** 31 }),
      async (inputs, coins, seed) => {
        const { clock, kernel, input, loop, desired } = setup({ intervalMs: 5_000 });
        let c = seed;
        const coin = () => coins[c++ % coins.length];
        // Some foreign routes in the table from the start.
        kernel.table.push({ dst: parsePrefix('10.0.1.0/26'), metric: 0, kind: 'via', via: parseIP('192.0.2.77'), onlink: false, table: 200, protocol: 12 });
        kernel.table.push({ dst: parsePrefix('10.9.0.0/24'), metric: 0, kind: 'blackhole', onlink: false, table: 200, protocol: 4 });
        const foreign = kernel.table.map((r) => ({ ...r }));
        kernel.refuse = () => coin() < 0.3;
        loop.start();
        for (const inp of inputs) {
          // desiredRoutes itself drops remote routes on our blocks and IPv6 prefixes with these IPv4 next hops.
          input.local = inp.local.map((s) => parsePrefix(s));
          input.remote = inp.remote.map(([p, nh]) => remote(p, nh));
          if (coin() < 0.2) kernel.throwNext = new Error('ip crashed');
          loop.changed();
          await clock.advance(Math.floor(coin() * 3_000));
        }
        kernel.refuse = () => false;
        await clock.advance(20_000); // past the longest backoff
        const want = desired().routes;
        const mine = kernel.table.filter((r) => r.protocol === 181);
        const foreignKeys = new Set(foreign.map(routeKey));
        const expected = want.filter((d) => !foreignKeys.has(routeKey(d)));
        await loop.stop();
        return loop.status().consecutiveFailures === 0
          && mine.length === expected.length
          && expected.every((d) => mine.some((r) => routeKey(r) === routeKey(d) && routeSatisfies(r, d)))
          && JSON.stringify(kernel.table.filter((r) => r.protocol !== 181)) === JSON.stringify(foreign);
      }),
    { numRuns: 150 },
  );
});
