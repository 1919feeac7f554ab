// The pure parts of bench/compare.ts (bench/lib/compare.ts): medians, ratios, reading a bench's final JSON line,
// picking each shape's figures from it, and which flags a checkout's bench takes.
import t from 'tap';
import fc from 'fast-check';
import {
  SHAPES, SHAPE_NAMES, argvFor, declaredOptions, libImports, median, parseFinalJson, parseOnly, pick, pickBench, pickFigures,
  ratio, sidesInRound, summarize, verdict, versusOf,
} from '../../bench/lib/compare.ts';

const finite = fc.double({ min: -1e9, max: 1e9, noNaN: true, noDefaultInfinity: true });

t.test('median', async (t) => {
  t.equal(median([]), null);
  t.equal(median([3]), 3);
  t.equal(median([5, 1, 3]), 3);
  t.equal(median([4, 1, 3, 2]), 2.5);
  fc.assert(fc.property(fc.array(finite, { minLength: 1, maxLength: 30 }), (xs) => {
    const m = median(xs)!;
    const s = [...xs].sort((a, b) => a - b);
    // between the smallest and the largest, and as many values at or below it as at or above it
    if (m < s[0] || m > s[s.length - 1]) return false;
    const below = xs.filter((x) => x <= m).length;
    const above = xs.filter((x) => x >= m).length;
    return below >= xs.length / 2 && above >= xs.length / 2;
  }));
  fc.assert(fc.property(fc.array(finite, { minLength: 1, maxLength: 30 }), (xs) => {
    // order does not matter, and the input is left alone
    const copy = [...xs];
    const m = median(xs);
    return m === median([...xs].reverse()) && xs.every((x, i) => Object.is(x, copy[i]));
  }));
});

t.test('ratio and verdict', async (t) => {
  t.equal(ratio(150, 100), 1.5);
  t.equal(ratio(null, 100), null);
  t.equal(ratio(100, null), null);
  t.equal(ratio(100, 0), null);
  t.equal(verdict(1.5, 'lower'), 'worse');
  t.equal(verdict(1.5, 'higher'), 'better');
  t.equal(verdict(0.5, 'lower'), 'better');
  t.equal(verdict(1.02, 'lower'), 'level');
  t.equal(verdict(null, 'lower'), null);
  fc.assert(fc.property(fc.double({ min: 1e-6, max: 1e9, noNaN: true }), fc.double({ min: 1e-6, max: 1e9, noNaN: true }), (h, b) => {
    const r = ratio(h, b)!;
    // head/base times base/head is 1, and the verdict flips with the direction that is better
    const back = ratio(b, h)!;
    if (Math.abs(r * back - 1) > 1e-9) return false;
    const v = verdict(r, 'lower');
    const w = verdict(r, 'higher');
    return v === 'level' ? w === 'level' : v !== w;
  }));
});

t.test('parseFinalJson takes the last JSON object line', async (t) => {
  t.same(parseFinalJson('text\n{"a":1}\nmore\n{"bench":"x","n":2}\n'), { bench: 'x', n: 2 });
  t.same(parseFinalJson('{"a":1}\n{ not json }\n'), { a: 1 }, 'a brace line that is not JSON is skipped');
  t.same(parseFinalJson('  {"a":1}  \n\n\n'), { a: 1 }, 'spaces and trailing blank lines');
  t.equal(parseFinalJson('[1,2]\nnull\n'), null, 'arrays and null are not a final line');
  t.equal(parseFinalJson(''), null);
  fc.assert(fc.property(
    fc.array(fc.string().map((s) => s.replace(/[\n{}]/g, '')), { maxLength: 5 }),
    fc.dictionary(fc.string(), fc.oneof(fc.integer(), fc.string(), fc.boolean(), fc.constant(null))),
    (noise, obj) => {
      const out = parseFinalJson([...noise, JSON.stringify(obj), ...noise].join('\n'));
      return JSON.stringify(out) === JSON.stringify(obj);
    },
  ));
});

t.test('pick and pickFigures', async (t) => {
  t.equal(pick({ a: { b: 3 } }, ['a', 'b']), 3);
  t.equal(pick({ a: { b: '3' } }, ['a', 'b']), null, 'only numbers');
  t.equal(pick({ a: null }, ['a', 'b']), null);
  t.equal(pick({ a: { b: Infinity } }, ['a', 'b']), null);
  t.equal(pick({}, ['constructor']), null, 'own properties only');

  // The final lines of the benches, trimmed to what is picked.
  const ingest = { bench: 'bgp-ingest', replay: { full: { blockspeaker: { ms: 1620, cpuMs: 1950, peakRssMB: 201.3, prefixes: 1 }, bird: { ms: 1080, cpuMs: 1060, peakRssMB: 204 } }, ratios: {} } };
  t.same(pickFigures(SHAPES.ingest, ingest), {
    'ingest.timeMs': 1620, 'ingest.cpuMs': 1950, 'ingest.peakRssMB': 201.3, 'ingest.birdTimeMs': 1080, 'ingest.birdCpuMs': 1060, 'ingest.birdPeakRssMB': 204,
  });
  const birdSender = { bench: 'bgp-ingest', bird: { full: { sink: { ms: 4170 }, blockspeaker: { ms: 4070, cpuMs: 4270, peakRssMB: 193 }, bird: { ms: 3730, cpuMs: 2670, peakRssMB: 204 } } } };
  t.same(pickFigures(SHAPES.birdsender, birdSender), {
    'birdsender.timeMs': 4070, 'birdsender.cpuMs': 4270, 'birdsender.peakRssMB': 193, 'birdsender.sinkTimeMs': 4170,
    'birdsender.birdTimeMs': 3730, 'birdsender.birdCpuMs': 2670, 'birdsender.birdPeakRssMB': 204,
  });
  const peers = { bench: 'bgp-peers', bgperf: { blockspeaker: { ms: 2100, fromFirstEstablishedMs: 900, cpuMs: 490, peakRssMB: 70 } } };
  t.same(pickFigures(SHAPES.peers, peers), { 'peers.convergeMs': 2100, 'peers.cpuMs': 490, 'peers.peakRssMB': 70, 'peers.birdConvergeMs': null, 'peers.birdCpuMs': null },
    'BIRD not in the run: its figures are null');
  const rib = { bench: 'rib', lpmMperSec: { v4: { wall: 31.2, cpu: 33 }, v6: { wall: 12.5, cpu: 13 } }, baseline: { lpmMperSec: { v4: { wall: 0.4 } } } };
  t.same(pickFigures(SHAPES.lpm, rib), { 'lpm.v4MperS': 31.2, 'lpm.v6MperS': 12.5 });
  const cni = { bench: 'cni', results: { dist: { add: { p50_ms: 292 }, del: { p50_ms: 240 } }, 'host-local': { add: { p50_ms: 18 } } } };
  t.same(pickFigures(SHAPES.cni, cni), { 'cni.distAddMs': 292, 'cni.distDelMs': 240, 'cni.shimAddMs': null, 'cni.shimDelMs': null },
    'a mode the bench did not run gives null');
});

t.test('declaredOptions reads parseArgs options', async (t) => {
  const src = `const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    limit: { type: "string" },
    'no-sink': { type: 'boolean', default: false },
    "no-build": {type:'boolean'},
  },
});
const other = { type: 'x' };`;
  t.same([...declaredOptions(src)].sort(), ['limit', 'no-build', 'no-sink', 'table']);
});

t.test('argvFor: optional flags are dropped, required ones make the shape missing', async (t) => {
  const args = SHAPES.ingest.benches[0].args({ table: '/t.gz', limit: '50000' });
  const all = new Set(['no-bgperf', 'receivers', 'sender', 'no-sink', 'no-build', 'table', 'limit']);
  t.same(argvFor(args, all), {
    argv: ['--no-bgperf', '--receivers', 'blockspeaker,bird', '--sender', 'replay', '--no-sink', '--no-build', '--table', '/t.gz', '--limit', '50000'],
    missing: [], dropped: [],
  });
  const old = new Set(['no-bgperf', 'receivers', 'sender', 'no-sink', 'table', 'limit']);
  t.same(argvFor(args, old).dropped, ['--no-build']);
  t.same(argvFor(args, new Set(['receivers', 'sender'])).missing, ['--no-bgperf', '--table', '--limit']);
  const [peers, peersBefore] = SHAPES.peers.benches;
  t.same(argvFor(peers.args({ limit: '10', table: '/t' }), new Set(['receivers', 'no-build'])),
    { argv: ['--receivers', 'blockspeaker,bird', '--no-build'], missing: [], dropped: [] }, 'peers: bench:bgp-peers reads no table');
  t.same(argvFor(peersBefore.args({ limit: '10' }), new Set(['no-full', 'receivers'])).missing, [], 'peers before bench:bgp-peers: --limit only saves time');
  const benches = SHAPE_NAMES.flatMap((n) => SHAPES[n].benches);
  fc.assert(fc.property(fc.constantFrom(...benches), fc.subarray(['no-bgperf', 'no-full', 'receivers', 'sender', 'no-sink', 'no-build', 'table', 'limit', 'no-baseline', 'no-rib', 'no-tsx', 'count']),
    (bench, have) => {
      const a = bench.args({ table: '/t', ribTable: '/r', limit: '5', cniCount: '7' });
      const r = argvFor(a, new Set(have));
      // every flag is either given, missing (required) or dropped (optional), never two of these
      const given = r.argv.filter((x) => x.startsWith('--'));
      return a.every((x) => [given.includes(x.flag), r.missing.includes(x.flag), r.dropped.includes(x.flag)].filter(Boolean).length === 1) &&
        r.missing.every((f) => a.find((x) => x.flag === f)!.required) && r.dropped.every((f) => !a.find((x) => x.flag === f)!.required);
    }));
});

t.test('pickBench: the newest bench a checkout has, else why not', async (t) => {
  const has = (scripts: string[], files: string[]) => ({ script: (s: string) => scripts.includes(s), file: (f: string) => files.includes(f) });
  const now = pickBench(SHAPES.peers, has(['bench:bgp-peers', 'bench:bgp-ingest'], ['bench/bgp-peers.ts', 'bench/bgp-ingest.ts']));
  t.equal(now.bench?.script, 'bench:bgp-peers', 'a checkout with the split benches runs bench:bgp-peers');
  const before = pickBench(SHAPES.peers, has(['bench:bgp-ingest'], ['bench/bgp-ingest.ts']));
  t.equal(before.bench?.script, 'bench:bgp-ingest', 'one from before the split runs the shape in bench:bgp-ingest');
  t.same(before.bench?.args({}).map((a) => a.flag), ['--no-full', '--receivers', '--no-sink', '--no-build'], 'with the flags it had then');
  t.same(pickBench(SHAPES.peers, has(['bench:bgp-peers'], [])), { bench: null, why: 'no bench/bgp-peers.ts, no npm script bench:bgp-ingest' });
  t.same(pickBench(SHAPES.lpm, has([], [])), { bench: null, why: 'no npm script bench:rib' });
});

t.test('libImports names the ./lib/ files a bench imports', async (t) => {
  const src = `import { a } from './lib/bgp-bench.ts';
import type { B } from "./lib/bgp-receivers.ts";
import { c } from '../test/kit/launcher.ts';
import { d } from './lib/bgp-bench.ts';
import x from 'node:fs';`;
  t.same(libImports(src), ['./lib/bgp-bench.ts', './lib/bgp-receivers.ts']);
  const shared = `export const bgpBenchOptions = {\n  receivers: { type: 'string', default: 'x' },\n  'no-build': { type: 'boolean', default: false },\n} as const;`;
  t.same([...declaredOptions(`parseArgs({ options: { ...bgpBenchOptions, 'no-full': { type: 'boolean' } } })\n${shared}`)].sort(),
    ['no-build', 'no-full', 'receivers'], 'flags spread in from a lib file count once its source is read with the bench');
});

t.test('parseOnly', async (t) => {
  t.same(parseOnly(undefined), ['ingest', 'birdsender', 'peers', 'lpm', 'cni']);
  t.same(parseOnly('cni, lpm'), ['lpm', 'cni'], 'in the run order');
  t.throws(() => parseOnly('lpm,bogus'), /unknown shape bogus/);
});

t.test('summarize: medians over the runs that gave a figure', async (t) => {
  const base = [{ 'lpm.v4MperS': 30, 'lpm.v6MperS': 10 }, { 'lpm.v4MperS': 34, 'lpm.v6MperS': null }];
  const head = [{ 'lpm.v4MperS': 40, 'lpm.v6MperS': 12 }, { 'lpm.v4MperS': 44, 'lpm.v6MperS': 12 }];
  const [v4, v6] = summarize(SHAPES.lpm, base, head);
  t.equal(v4.base.median, 32);
  t.equal(v4.head.median, 42);
  t.equal(v4.ratio, 42 / 32);
  t.equal(v4.verdict, 'better', 'higher is better for lookup rates');
  t.same(v6.base.runs, [10, null]);
  t.equal(v6.base.median, 10);
  t.equal(v6.ratio, 1.2);
  const none = summarize(SHAPES.cni, [], [{ 'cni.distAddMs': 100 }]);
  t.equal(none[0].base.median, null, 'a shape not in base has no base median');
  t.equal(none[0].ratio, null);
});

t.test('versusOf: BIRD against ours from one side\'s medians, with the goal', async (t) => {
  const v = versusOf(SHAPES.ingest, { 'ingest.timeMs': 720, 'ingest.birdTimeMs': 1080, 'ingest.cpuMs': 1100, 'ingest.birdCpuMs': 1000, 'ingest.peakRssMB': 200, 'ingest.birdPeakRssMB': null });
  t.same(v.map((x) => x.label), ["BIRD's time over ours", "our CPU over BIRD's", "our peak RSS over BIRD's"]);
  t.equal(v[0].value, 1.5);
  t.equal(v[0].met, true, '1.5 meets >= 1.5');
  t.equal(v[1].met, false, '1.1 misses <= 1');
  t.same([v[2].value, v[2].met], [null, null], 'a missing figure: no value, no verdict');
  t.same(versusOf(SHAPES.lpm, {}), [], 'shapes without BIRD have none');
  fc.assert(fc.property(fc.double({ min: 1, max: 1e6, noNaN: true }), fc.double({ min: 1, max: 1e6, noNaN: true }), (ours, sink) => {
    const [x] = versusOf(SHAPES.birdsender, { 'birdsender.timeMs': ours, 'birdsender.sinkTimeMs': sink });
    return x.value === ours / sink && x.met === (ours / sink <= 1.05);
  }));
});

t.test('property: over any number of rounds each side runs first in half of them (the base in the odd one out)', async (t) => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 50 }), (rounds) => {
    let baseFirst = 0;
    for (let r = 1; r <= rounds; r++) {
      const order = sidesInRound(r);
      if ([...order].sort().join() !== 'base,head') return false; // both sides, once each
      if (order[0] === 'base') baseFirst++;
    }
    return baseFirst === Math.ceil(rounds / 2) && sidesInRound(1)[0] === 'base';
  }));
  t.throws(() => sidesInRound(0), /round must be a whole number from 1/);
  t.throws(() => sidesInRound(1.5), /round must be a whole number from 1/);
});
