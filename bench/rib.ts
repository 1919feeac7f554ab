// bench/rib: the radix trie on a full Internet table, against the npm `longest-prefix-match` package.
//
//   npm run bench:rib -- [--table FILE | --synthetic] [--lookups N] [--rounds R] [--baseline-lookups N]
//                        [--no-baseline] [--no-rib] [--seed S]
//
// Table: --table, else ../shared/data/tier1-table-2023.txt.gz (relative to the repo root) when present, else (or
// with --synthetic) the generator in src/rib/tablegen.ts with the real table's counts. Measures, per family: build time,
// LPM rate for pre-generated addresses (half uniformly random, half inside a random table prefix; median of R
// rounds, single calls and batch calls, by wall clock and by CPU time), trie bytes per prefix, heap/RSS deltas,
// delete-all + re-insert (memory must not grow), and the baseline on the same keys and addresses. The whole-RIB
// number (3 paths per prefix) comes from bench/rib-memory.ts (the RIB's own bench), run as a child process.
// Human-readable lines first, then one JSON line with every number.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { IP, formatIP } from '../src/net/ip.ts';
import type { PrefixList } from '../src/rib/prefixlist.ts';
import { REAL_TABLE_COUNTS, generateTable, mulberry32 } from '../src/rib/tablegen.ts';
import { readPrefixFile } from '../src/rib/tableio.ts';
import { Trie } from '../src/rib/trie.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    lookups: { type: 'string', default: String(1 << 20) },
    rounds: { type: 'string', default: '7' },
    builds: { type: 'string', default: '3' },
    'baseline-lookups': { type: 'string', default: '100000' },
    'no-baseline': { type: 'boolean', default: false },
    'no-rib': { type: 'boolean', default: false },
    synthetic: { type: 'boolean', default: false },
    seed: { type: 'string', default: '1' },
  },
});

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const settle = () => {
  for (let i = 0; i < 3; i++) gc();
};
const MB = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
const r1 = (n: number) => Math.round(n * 10) / 10;
const r3 = (n: number) => Math.round(n * 1000) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cpuMs = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};
const log = (s: string) => console.log(s);

// ---- the table -------------------------------------------------------------------------------------------------

const defaultTable = resolve(repoRoot, '../shared/data/tier1-table-2023.txt.gz');
const tablePath = values.synthetic ? undefined : values.table ?? (existsSync(defaultTable) ? defaultTable : undefined);
let v4: PrefixList;
let v6: PrefixList;
let parseMs = 0;
const loadStart = [loadavg()[0]];
if (tablePath) {
  const t0 = performance.now();
  const table = await readPrefixFile(tablePath);
  parseMs = performance.now() - t0;
  if (table.errorCount > 0) {
    console.error(`${tablePath}: ${table.errorCount} bad lines, first: line ${table.errors[0].line}: ${table.errors[0].message}`);
    process.exit(1);
  }
  ({ v4, v6 } = table);
  log(`table ${tablePath}: ${v4.count} IPv4 + ${v6.count} IPv6 prefixes, read and parsed in ${r1(parseMs)} ms`);
} else {
  const t0 = performance.now();
  ({ v4, v6 } = generateTable({ seed: Number(values.seed), v4: REAL_TABLE_COUNTS.v4, v6: REAL_TABLE_COUNTS.v6 }));
  parseMs = performance.now() - t0;
  log(`synthetic table (seed ${values.seed}): ${v4.count} IPv4 + ${v6.count} IPv6 prefixes, generated in ${r1(parseMs)} ms`);
}
log(`machine: ${process.version}, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} (rates below are also given per CPU-second)`);

function build(list: PrefixList, hint: boolean): Trie {
  // With the size hint the trie picks its root width up front and pre-sizes its pools, as a RIB loading a known
  // table would; without it, it grows by doubling and widens the IPv4 root once (a rebuild at 2^17 prefixes).
  const t = new Trie(list.family, hint ? { expectedSize: list.count } : {});
  const w = list.words;
  const lens = list.lens;
  if (list.family === 4) {
    for (let i = 0; i < list.count; i++) t.insertWords(w[i], 0, 0, 0, lens[i], i);
  } else {
    for (let i = 0; i < list.count; i++) {
      const b = i * 4;
      t.insertWords(w[b], w[b + 1], w[b + 2], w[b + 3], lens[i], i);
    }
  }
  return t;
}

// ---- build -----------------------------------------------------------------------------------------------------

const BUILDS = Number(values.builds);
const buildMs: Record<'v4' | 'v6', number[]> = { v4: [], v6: [] };
let t4!: Trie;
let t6!: Trie;
let buildMem = { heapDelta: 0, rssDelta: 0, abDelta: 0 };
for (let b = 0; b < BUILDS; b++) {
  t4 = undefined as unknown as Trie;
  t6 = undefined as unknown as Trie;
  settle();
  const m0 = process.memoryUsage();
  let t0 = performance.now();
  t4 = build(v4, true);
  buildMs.v4.push(performance.now() - t0);
  t0 = performance.now();
  t6 = build(v6, true);
  buildMs.v6.push(performance.now() - t0);
  if (b === BUILDS - 1) {
    settle();
    const m1 = process.memoryUsage();
    buildMem = { heapDelta: m1.heapUsed - m0.heapUsed, rssDelta: m1.rss - m0.rss, abDelta: m1.arrayBuffers - m0.arrayBuffers };
  }
}
const build4 = median(buildMs.v4);
const build6 = median(buildMs.v6);
log(`build: IPv4 ${r1(build4)} ms, IPv6 ${r1(build6)} ms, total ${r1(build4 + build6)} ms (median of ${BUILDS}; first build ${r1(buildMs.v4[0] + buildMs.v6[0])} ms)`);
// The same without the size hint (pools grow by doubling; raw memory below is from this trie).
const noHint = (() => {
  let t0 = performance.now();
  const g4 = build(v4, false);
  const ms4 = performance.now() - t0;
  t0 = performance.now();
  const g6 = build(v6, false);
  const ms6 = performance.now() - t0;
  return { ms4, ms6, mem: { v4: g4.memoryBytes(), v6: g6.memoryBytes() }, used: { v4: g4.usedBytes(), v6: g6.usedBytes() } };
})();
const grow4 = noHint.ms4;
const grow6 = noHint.ms6;
log(`build without size hint: IPv4 ${r1(grow4)} ms, IPv6 ${r1(grow6)} ms, total ${r1(grow4 + grow6)} ms`);

const n4 = v4.count;
const n6 = v6.count;
const nAll = n4 + n6;
const memHint = { v4: t4.memoryBytes(), v6: t6.memoryBytes() };
const memRaw = noHint.mem;
const usedRaw = noHint.used;
t4.compact();
t6.compact();
const memCompact = { v4: t4.memoryBytes(), v6: t6.memoryBytes() };
const bpp = (bytes: number, n: number) => r1(bytes / n);
log(`trie memory after a build with the size hint: IPv4 ${bpp(memHint.v4, n4)} B/prefix, IPv6 ${bpp(memHint.v6, n6)} B/prefix, ` +
  `all ${bpp(memHint.v4 + memHint.v6, nAll)} B/prefix`);
log(`trie memory after a build without hint (typed arrays incl. doubling slack): IPv4 ${MB(memRaw.v4)} MB = ${bpp(memRaw.v4, n4)} B/prefix, ` +
  `IPv6 ${MB(memRaw.v6)} MB = ${bpp(memRaw.v6, n6)} B/prefix, all ${bpp(memRaw.v4 + memRaw.v6, nAll)} B/prefix`);
log(`trie memory after compact(): IPv4 ${bpp(memCompact.v4, n4)} B/prefix, IPv6 ${bpp(memCompact.v6, n6)} B/prefix, ` +
  `all ${bpp(memCompact.v4 + memCompact.v6, nAll)} B/prefix (${MB(memCompact.v4 + memCompact.v6)} MB)`);
log(`process delta for the two tries: heap ${MB(buildMem.heapDelta)} MB, array buffers ${MB(buildMem.abDelta)} MB, RSS ${MB(buildMem.rssDelta)} MB`);
log(`pools: IPv4 ${JSON.stringify(t4.poolStats())}`);
log(`       IPv6 ${JSON.stringify(t6.poolStats())}`);

// ---- lookup addresses ------------------------------------------------------------------------------------------

const N = Number(values.lookups);
const rnd = mulberry32(Number(values.seed) + 1000);
const u32 = () => Math.floor(rnd() * 4294967296) >>> 0;
/** Random host bits below `len` in word k of a prefix. */
const hostBits = (len: number, k: number) => {
  const bits = len - k * 32;
  if (bits >= 32) return 0;
  if (bits <= 0) return u32();
  return u32() & (0xffffffff >>> bits);
};
const q4 = new Uint32Array(N);
const q6 = new Uint32Array(N * 4);
for (let i = 0; i < N; i++) {
  if (rnd() < 0.5) q4[i] = u32();
  else {
    const j = Math.floor(rnd() * n4);
    q4[i] = (v4.words[j] | hostBits(v4.lens[j], 0)) >>> 0;
  }
  const b = i * 4;
  if (rnd() < 0.5) {
    // Uniform over global unicast 2000::/3 (uniform over all of ::/0 would almost never get past the root table).
    q6[b] = (0x20000000 | (u32() & 0x1fffffff)) >>> 0;
    q6[b + 1] = u32();
    q6[b + 2] = u32();
    q6[b + 3] = u32();
  } else {
    const j = Math.floor(rnd() * n6);
    for (let k = 0; k < 4; k++) q6[b + k] = (v6.words[j * 4 + k] | hostBits(v6.lens[j], k)) >>> 0;
  }
}

// ---- lookup rates ----------------------------------------------------------------------------------------------

const ROUNDS = Number(values.rounds);
interface Rate {
  wall: number[];
  cpu: number[];
}
const rates: Record<string, Rate> = {};
const record = (name: string, wallMs: number, cpu: number) => {
  const r = (rates[name] ??= { wall: [], cpu: [] });
  r.wall.push(N / wallMs / 1000);
  r.cpu.push(N / Math.max(cpu, 0.001) / 1000);
};
const out4 = new Int32Array(N);
const out6 = new Int32Array(N);
let sink = 0;
for (let round = 0; round < ROUNDS; round++) {
  let c = process.cpuUsage();
  let t0 = performance.now();
  for (let i = 0; i < N; i++) sink ^= t4.lpm4(q4[i]);
  record('v4', performance.now() - t0, cpuMs(c));

  c = process.cpuUsage();
  t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const b = i * 4;
    sink ^= t6.lpm6(q6[b], q6[b + 1], q6[b + 2], q6[b + 3]);
  }
  record('v6', performance.now() - t0, cpuMs(c));

  c = process.cpuUsage();
  t0 = performance.now();
  t4.lpm4Batch(q4, out4);
  record('v4batch', performance.now() - t0, cpuMs(c));

  c = process.cpuUsage();
  t0 = performance.now();
  t6.lpm6Batch(q6, out6);
  record('v6batch', performance.now() - t0, cpuMs(c));
}
// Sanity: batch answers equal single answers, and a sample agrees with the slow covering walk.
let mismatches = 0;
let hits4 = 0;
let hits6 = 0;
for (let i = 0; i < N; i++) {
  const b = i * 4;
  if (out4[i] !== t4.lpm4(q4[i]) || out6[i] !== t6.lpm6(q6[b], q6[b + 1], q6[b + 2], q6[b + 3])) mismatches++;
  if (out4[i] >= 0) hits4++;
  if (out6[i] >= 0) hits6++;
}
for (let i = 0; i < 2000; i++) {
  const e = t4.lpm(new IP(4, q4[i]));
  if ((e ? e.value : -1) !== out4[i]) mismatches++;
}
const med = (name: string) => ({ wall: r1(median(rates[name].wall)), cpu: r1(median(rates[name].cpu)) });
const lpm = { v4: med('v4'), v6: med('v6'), v4batch: med('v4batch'), v6batch: med('v6batch') };
log(`LPM, ${N} addresses per family (half uniformly random, half inside a table prefix), median of ${ROUNDS} rounds, M lookups/s:`);
log(`  IPv4 lpm4():      ${lpm.v4.wall} wall, ${lpm.v4.cpu} per CPU-second   (hit rate ${r3(hits4 / N)})`);
log(`  IPv6 lpm6():      ${lpm.v6.wall} wall, ${lpm.v6.cpu} per CPU-second   (hit rate ${r3(hits6 / N)})`);
log(`  IPv4 lpm4Batch(): ${lpm.v4batch.wall} wall, ${lpm.v4batch.cpu} per CPU-second`);
log(`  IPv6 lpm6Batch(): ${lpm.v6batch.wall} wall, ${lpm.v6batch.cpu} per CPU-second`);
log(`  all rounds (wall): IPv4 ${rates.v4.wall.map(r1).join(' ')} | IPv6 ${rates.v6.wall.map(r1).join(' ')}`);
log(`  answer check: ${mismatches === 0 ? 'ok' : `${mismatches} MISMATCHES`}`);

// ---- delete everything, insert it again: pools must not grow -----------------------------------------------------

function churn(t: Trie, list: PrefixList) {
  const before = { bytes: t.memoryBytes(), ...t.poolStats() };
  const w = list.words;
  const st = list.family === 4 ? 1 : 4;
  let t0 = performance.now();
  for (let i = 0; i < list.count; i++) {
    const b = i * st;
    t.deleteWords(w[b], st === 4 ? w[b + 1] : 0, st === 4 ? w[b + 2] : 0, st === 4 ? w[b + 3] : 0, list.lens[i]);
  }
  const deleteMs = performance.now() - t0;
  const empty = { bytes: t.memoryBytes(), size: t.size, ...t.poolStats() };
  t0 = performance.now();
  for (let i = 0; i < list.count; i++) {
    const b = i * st;
    t.insertWords(w[b], st === 4 ? w[b + 1] : 0, st === 4 ? w[b + 2] : 0, st === 4 ? w[b + 3] : 0, list.lens[i], i);
  }
  const reinsertMs = performance.now() - t0;
  const after = { bytes: t.memoryBytes(), ...t.poolStats() };
  const grew = after.bytes > before.bytes;
  return { deleteMs: r1(deleteMs), reinsertMs: r1(reinsertMs), before, empty, after, grew };
}
const churn4 = churn(t4, v4);
const churn6 = churn(t6, v6);
for (const [name, c] of [['IPv4', churn4], ['IPv6', churn6]] as const) {
  log(`delete-all + re-insert ${name}: delete ${c.deleteMs} ms, re-insert ${c.reinsertMs} ms; trie bytes ${c.before.bytes} -> ` +
    `${c.empty.bytes} (empty, ${c.empty.chunks} chunks = the fixed top levels) -> ${c.after.bytes}: ${c.grew ? 'GREW' : 'did not grow'}`);
}

// ---- baseline: npm longest-prefix-match ---------------------------------------------------------------------------

let baseline: Record<string, unknown> | undefined;
if (!values['no-baseline']) {
  const require = createRequire(import.meta.url);
  const LongestPrefixMatch = require('longest-prefix-match') as new () => {
    addPrefix(p: string, data: unknown): void;
    getMatch(p: string, all?: boolean): unknown[];
  };
  // Same keys, pre-formatted (it takes strings); the value is the table index, as in the trie.
  const keys4 = Array.from({ length: n4 }, (_, i) => v4.format(i));
  const keys6 = Array.from({ length: n6 }, (_, i) => v6.format(i));
  const BL = Math.min(N, Number(values['baseline-lookups']));
  // It refuses bare addresses: lookups are "a.b.c.d/32" and "x::y/128" strings, the same addresses as above.
  const s4 = Array.from({ length: BL }, (_, i) => `${formatIP({ family: 4, w0: q4[i], w1: 0, w2: 0, w3: 0 })}/32`);
  const s6 = Array.from({ length: BL }, (_, i) =>
    `${formatIP({ family: 6, w0: q6[i * 4], w1: q6[i * 4 + 1], w2: q6[i * 4 + 2], w3: q6[i * 4 + 3] })}/128`);
  const t0 = performance.now();
  settle();
  const m0 = process.memoryUsage();
  const base = new LongestPrefixMatch();
  let c = process.cpuUsage();
  let t1 = performance.now();
  for (let i = 0; i < n4; i++) base.addPrefix(keys4[i], i);
  const ins4 = performance.now() - t1;
  const ins4cpu = cpuMs(c);
  c = process.cpuUsage();
  t1 = performance.now();
  for (let i = 0; i < n6; i++) base.addPrefix(keys6[i], i);
  const ins6 = performance.now() - t1;
  settle();
  const m1 = process.memoryUsage();
  const bRates: Record<string, { wall: number; cpu: number }> = {};
  let bMismatch = 0;
  for (const [name, list, ours] of [['v4', s4, out4], ['v6', s6, out6]] as const) {
    const walls: number[] = [];
    const cpus: number[] = [];
    for (let round = 0; round < 3; round++) {
      c = process.cpuUsage();
      t1 = performance.now();
      for (let i = 0; i < BL; i++) {
        const m = base.getMatch(list[i]);
        if (round === 0 && (m.length > 0 ? (m[0] as number) : -1) !== ours[i]) bMismatch++;
      }
      walls.push(BL / (performance.now() - t1) / 1000);
      cpus.push(BL / cpuMs(c) / 1000);
    }
    bRates[name] = { wall: r3(median(walls)), cpu: r3(median(cpus)) };
  }
  baseline = {
    package: 'longest-prefix-match@' + (require('longest-prefix-match/package.json') as { version: string }).version,
    insertMs: { v4: r1(ins4), v6: r1(ins6), total: r1(ins4 + ins6), v4cpu: r1(ins4cpu) },
    lookupsMeasured: BL,
    lookupInput: 'pre-formatted strings with /32 or /128 (it refuses bare addresses)',
    lpmMperSec: bRates,
    heapDeltaMB: MB(m1.heapUsed - m0.heapUsed),
    rssDeltaMB: MB(m1.rss - m0.rss),
    bytesPerPrefix: r1((m1.heapUsed - m0.heapUsed) / nAll),
    answerMismatches: bMismatch,
    benchSeconds: r1((performance.now() - t0) / 1000),
  };
  log(`baseline ${baseline.package}: insert IPv4 ${r1(ins4)} ms, IPv6 ${r1(ins6)} ms; heap +${baseline.heapDeltaMB} MB ` +
    `(${baseline.bytesPerPrefix} B/prefix), RSS +${baseline.rssDeltaMB} MB`);
  log(`  LPM on the first ${BL} of the same addresses, given as pre-formatted strings ("a.b.c.d/32", "x::y/128"), M lookups/s: ` +
    `IPv4 ${bRates.v4.wall} wall / ${bRates.v4.cpu} CPU, IPv6 ${bRates.v6.wall} wall / ${bRates.v6.cpu} CPU; ` +
    `answers differing from the trie: ${bMismatch}`);
  log(`  trie vs baseline: IPv4 lpm4 ${r1(lpm.v4.cpu / bRates.v4.cpu)}x, lpm4Batch ${r1(lpm.v4batch.cpu / bRates.v4.cpu)}x; ` +
    `IPv6 lpm6 ${r1(lpm.v6.cpu / bRates.v6.cpu)}x (per CPU-second); build ${r1((ins4 + ins6) / (build4 + build6))}x faster`);
  baseline.ratios = {
    v4Lpm: r1(lpm.v4.cpu / bRates.v4.cpu), v4LpmBatch: r1(lpm.v4batch.cpu / bRates.v4.cpu),
    v6Lpm: r1(lpm.v6.cpu / bRates.v6.cpu), v6LpmBatch: r1(lpm.v6batch.cpu / bRates.v6.cpu),
    v4LpmWall: r1(lpm.v4.wall / bRates.v4.wall), v6LpmWall: r1(lpm.v6.wall / bRates.v6.wall),
    build: r1((ins4 + ins6) / (build4 + build6)),
  };
}

// ---- whole RIB, 3 paths per prefix (the RIB's own bench, in a child so its RSS is its own) ----------------------

let rib3: unknown;
const ribBench = resolve(repoRoot, 'bench/rib-memory.ts');
if (!values['no-rib'] && existsSync(ribBench)) {
  const args = ['--expose-gc', '--import', 'tsx', ribBench, '--paths', '3'];
  if (tablePath) args.push('--table', tablePath);
  else args.push('--v4', String(REAL_TABLE_COUNTS.v4), '--v6', String(REAL_TABLE_COUNTS.v6));
  const res = spawnSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', maxBuffer: 1 << 24 });
  const last = res.stdout.trim().split('\n').pop() ?? '';
  try {
    rib3 = JSON.parse(last);
    const r = rib3 as { rssMB: number; prefixes: number; paths: number; loadSeconds: number };
    log(`whole RIB (bench/rib-memory.ts, 3 paths per prefix): ${r.prefixes} prefixes, ${r.paths} paths, RSS ${r.rssMB} MB, ` +
      `loaded in ${r.loadSeconds} s`);
  } catch {
    rib3 = { error: `bench/rib-memory.ts failed (status ${res.status}): ${(res.stderr || last).slice(0, 300)}` };
    log(`whole RIB: ${(rib3 as { error: string }).error}`);
  }
} else {
  // Hook: bench/rib-memory.ts (src/rib/rib.ts's bench) measures RSS of the whole RIB with 3 paths per prefix.
  rib3 = { skipped: values['no-rib'] ? '--no-rib' : 'bench/rib-memory.ts not found' };
}

// ---- JSON ------------------------------------------------------------------------------------------------------

const result = {
  bench: 'rib',
  source: tablePath ? 'table' : 'synthetic',
  table: tablePath ?? null,
  prefixes: { v4: n4, v6: n6 },
  node: process.version,
  loadAvg: { start: r1(loadStart[0]), end: r1(loadavg()[0]) },
  readMs: r1(parseMs),
  buildMs: {
    v4: r1(build4), v6: r1(build6), total: r1(build4 + build6), firstTotal: r1(buildMs.v4[0] + buildMs.v6[0]),
    noHint: { v4: r1(grow4), v6: r1(grow6), total: r1(grow4 + grow6) },
  },
  lpmMperSec: lpm,
  lookups: N,
  hitRate: { v4: r3(hits4 / N), v6: r3(hits6 / N) },
  answerMismatches: mismatches,
  trieBytes: {
    hinted: memHint, raw: memRaw, used: usedRaw, compacted: memCompact,
    perPrefixHinted: { v4: bpp(memHint.v4, n4), v6: bpp(memHint.v6, n6), all: bpp(memHint.v4 + memHint.v6, nAll) },
    perPrefixRaw: { v4: bpp(memRaw.v4, n4), v6: bpp(memRaw.v6, n6), all: bpp(memRaw.v4 + memRaw.v6, nAll) },
    perPrefixCompacted: { v4: bpp(memCompact.v4, n4), v6: bpp(memCompact.v6, n6), all: bpp(memCompact.v4 + memCompact.v6, nAll) },
  },
  processDeltaMB: { heap: MB(buildMem.heapDelta), arrayBuffers: MB(buildMem.abDelta), rss: MB(buildMem.rssDelta) },
  churn: {
    v4: { deleteMs: churn4.deleteMs, reinsertMs: churn4.reinsertMs, bytesBefore: churn4.before.bytes, bytesEmpty: churn4.empty.bytes, bytesAfter: churn4.after.bytes, grew: churn4.grew },
    v6: { deleteMs: churn6.deleteMs, reinsertMs: churn6.reinsertMs, bytesBefore: churn6.before.bytes, bytesEmpty: churn6.empty.bytes, bytesAfter: churn6.after.bytes, grew: churn6.grew },
  },
  goals: {
    v4LpmMperSec: 20, v6LpmMperSec: 5, buildMs: 1000, bytesPerPrefix: 40, baselineRatio: 50,
  },
  baseline: baseline ?? null,
  rib3paths: rib3,
  sink,
};
console.log(JSON.stringify(result));
