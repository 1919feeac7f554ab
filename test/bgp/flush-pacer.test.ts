// FlushPacer against a fake clock: a lone request flushes on the next turn, requests within the gap after a flush
// wait for the gap's end, and any number of requests before a flush give exactly one.
import t from 'tap';
import fc from 'fast-check';
import { FlushPacer, type PacerClock } from '../../src/bgp/flush-pacer.ts';

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
