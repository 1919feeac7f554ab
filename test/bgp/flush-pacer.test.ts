// FlushPacer against a fake clock: a lone request flushes on the next turn, requests within the gap after a flush
// wait for the gap's end (or longer after a long flush), and any number of requests before a flush give exactly one.
import t from 'tap';
import fc from 'fast-check';
import { BUSY_WAIT_MAX_MS, FlushPacer, type PacerClock } from '../../src/bgp/flush-pacer.ts';

class FakeClock implements PacerClock {
  t = 0;
  queue: { at: number; fn: () => void; seq: number }[] = [];
  seq = 0;
  now(): number { return this.t; }
  soon(fn: () => void): void { this.queue.push({ at: this.t, fn, seq: this.seq++ }); }
  after(ms: number, fn: () => void): void { this.queue.push({ at: this.t + ms, fn, seq: this.seq++ }); }
  /** Run everything due by `until`, in time order. */
  advance(until: number): void {
    for (;;) {
      this.queue.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.queue[0];
      if (!next || next.at > until) break;
      this.queue.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
    }
    this.t = Math.max(this.t, until);
  }
}

t.test('a lone request flushes on the next turn, a second one within the gap at its end', async (t) => {
  const clock = new FakeClock();
  const at: number[] = [];
  const p = new FlushPacer(() => at.push(clock.now()), 10, clock);
  p.request();
  p.request();
  clock.advance(0);
  t.same(at, [0], 'one flush, at once');
  clock.advance(3);
  p.request();
  clock.advance(9);
  t.same(at, [0], 'not before the gap has passed');
  clock.advance(10);
  t.same(at, [0, 10], 'at the end of the gap');
  clock.advance(50);
  p.request();
  clock.advance(50);
  t.same(at, [0, 10, 50], 'after a quiet spell, at once again');
});

t.test('property: every request is followed by a flush no later than the gap; flushes are at least the gap apart', async (t) => {
  fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 60 }), fc.integer({ min: 0, max: 20 }), (steps, gap) => {
    const clock = new FakeClock();
    const flushes: number[] = [];
    const p = new FlushPacer(() => flushes.push(clock.now()), gap, clock);
    const requests: number[] = [];
    for (const dt of steps) {
      clock.advance(clock.now() + dt);
      requests.push(clock.now());
      p.request();
    }
    clock.advance(clock.now() + gap + 1);
    for (const r of requests) {
      // the first flush at or after the request (a flush at the same instant that ran before it does not count)
      const f = flushes.find((x) => x >= r);
      if (f === undefined || f > r + gap) return false;
    }
    for (let i = 1; i < flushes.length; i++) if (flushes[i] - flushes[i - 1] < gap) return false;
    return flushes.length <= requests.length;
  }));
  t.pass('held for every sequence');
});

t.test('a flush that took long holds the next back for busyFactor times its length; a cheap one keeps the gap', async (t) => {
  const clock = new FakeClock();
  const at: number[] = [];
  let cost = 0;
  const p = new FlushPacer(() => {
    at.push(clock.now());
    clock.t += cost; // the flush's own work
  }, 10, clock, 10);
  cost = 3;
  p.request();
  clock.advance(0);
  t.same(at, [0], 'the first at once');
  t.equal(clock.now(), 3, 'it took 3 ms');
  cost = 0.2;
  p.request();
  clock.advance(32);
  t.same(at, [0], 'not before 3 + 10 x 3 = 33');
  clock.advance(33);
  t.same(at, [0, 33], 'at 33');
  p.request();
  clock.advance(42);
  t.same(at, [0, 33], 'after a 0.2 ms flush: not before the 10 ms gap');
  clock.advance(43);
  t.same(at, [0, 33, 43], 'the plain gap again (10 x 0.2 = 2 ms < 10)');
  clock.advance(100);
  cost = 5;
  p.request();
  clock.advance(100);
  t.same(at, [0, 33, 43, 100], 'after a quiet spell, at once however long the last took');
  cost = 60; // 10 x 60 = 600 ms, more than the cap
  clock.advance(200);
  p.request();
  clock.advance(200);
  t.same(at, [0, 33, 43, 100, 200]);
  cost = 0;
  p.request();
  clock.advance(260 + BUSY_WAIT_MAX_MS - 1);
  t.same(at, [0, 33, 43, 100, 200], `a 60 ms flush holds the next back ${BUSY_WAIT_MAX_MS} ms at most`);
  clock.advance(260 + BUSY_WAIT_MAX_MS);
  t.same(at, [0, 33, 43, 100, 200, 260 + BUSY_WAIT_MAX_MS]);
});

t.test('property: with flushes of any cost, flushes never overlap, are the gap apart, and at most busyFactor x the last one\'s length after it ends', async (t) => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 40 })), { maxLength: 60 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 12 }), (steps, gap, factor) => {
    const clock = new FakeClock();
    const runs: { start: number; end: number }[] = [];
    let cost = 0;
    const p = new FlushPacer(() => {
      const start = clock.now();
      clock.t += cost;
      runs.push({ start, end: clock.now() });
    }, gap, clock, factor);
    const requests: number[] = [];
    for (const [dt, c] of steps) {
      clock.advance(clock.now() + dt);
      cost = c;
      requests.push(clock.now());
      p.request();
    }
    clock.advance(clock.now() + 1000);
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1];
      const wantAfter = Math.max(prev.start + gap, prev.end + Math.min((prev.end - prev.start) * factor, BUSY_WAIT_MAX_MS));
      if (runs[i].start < wantAfter) return false;
    }
    // Every request is served: some flush starts at or after it (a flush that began before it does not count).
    for (const r of requests) if (!runs.some((x) => x.start >= r)) return false;
    return runs.length <= requests.length;
  }));
  t.pass('held for every sequence');
});

t.test('requestSoon flushes on the next turn inside the gap and the busy hold, and a flush arranged before it does not run as well', async (t) => {
  const clock = new FakeClock();
  const at: number[] = [];
  let cost = 0;
  const p = new FlushPacer(() => {
    at.push(clock.now());
    clock.t += cost;
  }, 10, clock);
  cost = 20; // holds the next flush back 200 ms
  p.request();
  clock.advance(0);
  t.same(at, [0]);
  cost = 0;
  p.request(); // arranged for 220
  clock.advance(50);
  p.requestSoon();
  p.requestSoon();
  clock.advance(50);
  t.same(at, [0, 50], 'one flush, on the next turn after the ask');
  clock.advance(219);
  t.same(at, [0, 50], 'nothing more before the pacing allows');
  clock.advance(400);
  t.same(at, [0, 50], 'the flush arranged for 220 was dropped: it had nothing left to do');
  p.request();
  clock.advance(400);
  t.same(at, [0, 50, 400], 'after a quiet spell, requests flush at once again');
  p.request();
  clock.advance(405);
  t.same(at, [0, 50, 400], 'and the gap holds after a flush');
  clock.advance(410);
  t.same(at, [0, 50, 400, 410]);
});

t.test('property: with requestSoon mixed in, every request is flushed, no flush runs twice for one arrangement, and requestSoon is never held back', async (t) => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.boolean()), { maxLength: 60 }), fc.integer({ min: 1, max: 20 }), (steps, gap) => {
    const clock = new FakeClock();
    const flushes: number[] = [];
    const p = new FlushPacer(() => flushes.push(clock.now()), gap, clock);
    const asks: { at: number; soon: boolean }[] = [];
    for (const [dt, soon] of steps) {
      clock.advance(clock.now() + dt);
      asks.push({ at: clock.now(), soon });
      if (soon) p.requestSoon();
      else p.request();
    }
    clock.advance(clock.now() + 1000);
    for (const a of asks) {
      const first = flushes.find((f) => f >= a.at);
      if (first === undefined) return false; // every ask is followed by a flush
      if (a.soon && first !== a.at) return false; // at once (the fake clock's next turn is the same instant)
      if (!a.soon && first > a.at + gap) return false;
    }
    // No more flushes than asks (a dropped arrangement does not fire as well).
    return flushes.length <= asks.length;
  }), { numRuns: 500 });
  t.pass('held for any sequence');
});
