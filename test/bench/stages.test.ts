// bench/lib/stages.ts: the cumulative stages of bench:bgp-core --stages, their split and their order.
import t from 'tap';
import fc from 'fast-check';
import { STAGES, stageOrder, stageSplit, type Stage } from '../../bench/lib/stages.ts';

t.test('each layer is the difference of its stage and the one before', async (t) => {
  const s = stageSplit({ frame: 16, decode: 167, shared: 388, full: 447 });
  t.same(s, { framing: 16, decoding: 151, perPrefix: 221, interning: 59, total: 447 });
});

t.test('property: the layers add up to the full stage, whatever the medians', async (t) => {
  const ms = fc.double({ min: 0, max: 1e5, noNaN: true });
  fc.assert(fc.property(ms, ms, ms, ms, (frame, decode, shared, full) => {
    const s = stageSplit({ frame, decode, shared, full });
    const sum = s.framing + s.decoding + s.perPrefix + s.interning;
    return Math.abs(sum - full) <= 1e-9 * Math.max(1, full) && s.total === full;
  }));
  t.pass('checked by fast-check');
});

t.test('property: over any run of consecutive rounds as long as the stages, each stage takes every position once', async (t) => {
  fc.assert(fc.property(fc.integer({ min: -1000, max: 1000 }), (start) => {
    const seen = new Map<Stage, Set<number>>(STAGES.map((s) => [s, new Set<number>()]));
    for (let i = start; i < start + STAGES.length; i++) {
      const order = stageOrder(i);
      if (order.length !== STAGES.length || new Set(order).size !== STAGES.length) return false;
      order.forEach((s, pos) => seen.get(s)!.add(pos));
    }
    return [...seen.values()].every((positions) => positions.size === STAGES.length);
  }));
  t.same(stageOrder(0), [...STAGES], 'round 0 runs them in their own order');
});
