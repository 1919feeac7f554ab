// The pure parts of bench/compare.ts: which benches make up each headline shape, the options they are run with, the
// figures picked from each bench's final JSON line, and the arithmetic (medians, ratios head/base). No I/O here, so
// test/bench/compare.test.ts can check it without running a bench.

export type ShapeName = 'ingest' | 'birdsender' | 'peers' | 'lpm' | 'cni';
export const SHAPE_NAMES: readonly ShapeName[] = ['ingest', 'birdsender', 'peers', 'lpm', 'cni'];

export interface Figure {
  /** Stable key in the final JSON line, e.g. "ingest.timeMs". */
  key: string;
  label: string;
  /** For the one-line progress report after each run. */
  short: string;
  /** Where the figure is in the bench's final JSON line. */
  path: readonly string[];
  unit: string;
  better: 'lower' | 'higher';
}

/** One command-line option given to a bench: `required` ones change what is measured, the others only save time. */
export interface BenchArg {
  flag: string;
  value?: string;
  required: boolean;
}

/** A ratio between two figures of one side's runs (medians), printed with its goal: e.g. BIRD's time over ours. */
export interface Versus {
  label: string;
  /** Figure keys: the ratio is num / den. */
  num: string;
  den: string;
  /** The project's goal for it, when there is one. */
  goal?: { op: '>=' | '<='; value: number };
}

/** A bench that measures a shape: its npm script, the file behind it, and the options it is run with. */
export interface ShapeBench {
  script: string;
  /** Its parseArgs options, with those of the ./lib/ files it imports, say which flags a checkout has. */
  file: string;
  args(o: CompareOptions): BenchArg[];
}

export interface Shape {
  name: ShapeName;
  title: string;
  /** Ratios within each side's runs (BIRD against ours in the same runs). */
  versus?: readonly Versus[];
  /**
   * The benches that measure it, newest first: a checkout runs the first whose npm script and file it has, so a
   * checkout from before a bench was split measures the shape with the bench (and flags) it had then.
   */
  benches: readonly ShapeBench[];
  /** The bench runs the compiled daemon: dist/ must be built in the checkout first. */
  needsBuild: boolean;
  figures: readonly Figure[];
}

export interface CompareOptions {
  /** Full-table file (absolute) for both checkouts' ingest shapes, when there is one. */
  table?: string;
  /** Table file (absolute) for both checkouts' RIB bench: the head's default, which a checkout elsewhere can't find. */
  ribTable?: string;
  /** --limit N for the full-table shape. */
  limit?: string;
  /** --count N for the CNI bench. */
  cniCount?: string;
}

const req = (flag: string, value?: string): BenchArg => ({ flag, value, required: true });
const opt = (flag: string, value?: string): BenchArg => ({ flag, value, required: false });

const fig = (shape: ShapeName, name: string, short: string, label: string, path: string[], unit: string, better: 'lower' | 'higher'): Figure =>
  ({ key: `${shape}.${name}`, label, short, path, unit, better });

/**
 * The figures of a full-table shape (bench:bgp-ingest's `sender` section: ours, BIRD's as a receiver in the same run,
 * and with BIRD as the sender the sink's, whose time is the sender's pace) and the project's goals against BIRD.
 */
function fullTable(shape: ShapeName, sender: 'replay' | 'bird'): Pick<Shape, 'figures' | 'versus'> {
  const at = (who: string, what: string) => [sender, 'full', who, what];
  const k = (name: string) => `${shape}.${name}`;
  return {
    figures: [
      fig(shape, 'timeMs', 'time', 'time, Established until every prefix held', at('blockspeaker', 'ms'), 'ms', 'lower'),
      fig(shape, 'cpuMs', 'CPU', 'CPU (utime + stime)', at('blockspeaker', 'cpuMs'), 'ms', 'lower'),
      fig(shape, 'peakRssMB', 'peak RSS', 'peak RSS', at('blockspeaker', 'peakRssMB'), 'MB', 'lower'),
      ...(sender === 'bird' ? [fig(shape, 'sinkTimeMs', 'sink time', 'sink (the sender\'s pace): time', at('sink', 'ms'), 'ms', 'lower')] : []),
      fig(shape, 'birdTimeMs', 'BIRD time', 'BIRD receiver: time', at('bird', 'ms'), 'ms', 'lower'),
      fig(shape, 'birdCpuMs', 'BIRD CPU', 'BIRD receiver: CPU', at('bird', 'cpuMs'), 'ms', 'lower'),
      fig(shape, 'birdPeakRssMB', 'BIRD RSS', 'BIRD receiver: peak RSS', at('bird', 'peakRssMB'), 'MB', 'lower'),
    ],
    versus: [
      sender === 'replay'
        ? { label: "BIRD's time over ours", num: k('birdTimeMs'), den: k('timeMs'), goal: { op: '>=', value: 1.5 } }
        : { label: "our time over the sink's", num: k('timeMs'), den: k('sinkTimeMs'), goal: { op: '<=', value: 1.05 } },
      { label: 'our CPU over BIRD\'s', num: k('cpuMs'), den: k('birdCpuMs'), goal: { op: '<=', value: 1 } },
      { label: 'our peak RSS over BIRD\'s', num: k('peakRssMB'), den: k('birdPeakRssMB'), goal: { op: '<=', value: 1 } },
    ],
  };
}

export const SHAPES: Record<ShapeName, Shape> = {
  ingest: {
    name: 'ingest',
    title: 'full-table ingest (replay sender, one session; blockspeaker, then BIRD as the receiver in the same run)',
    benches: [{
      script: 'bench:bgp-ingest',
      file: 'bench/bgp-ingest.ts',
      args: (o) => [req('--no-bgperf'), req('--receivers', 'blockspeaker,bird'), req('--sender', 'replay'), opt('--no-sink'), opt('--no-build'),
        ...(o.table !== undefined ? [req('--table', o.table)] : []), ...(o.limit !== undefined ? [req('--limit', o.limit)] : [])],
    }],
    needsBuild: true,
    ...fullTable('ingest', 'replay'),
  },
  birdsender: {
    name: 'birdsender',
    title: 'full-table ingest from BIRD as the sender (it sets the pace: the do-nothing sink, blockspeaker, BIRD receivers)',
    benches: [{
      script: 'bench:bgp-ingest',
      file: 'bench/bgp-ingest.ts',
      // With the sink: the sender's own pace is the yardstick here.
      args: (o) => [req('--no-bgperf'), req('--receivers', 'blockspeaker,bird'), req('--sender', 'bird'), opt('--no-build'),
        ...(o.table !== undefined ? [req('--table', o.table)] : []), ...(o.limit !== undefined ? [req('--limit', o.limit)] : [])],
    }],
    needsBuild: true,
    ...fullTable('birdsender', 'bird'),
  },
  peers: {
    name: 'peers',
    title: '100 peers x 100 prefixes (bgperf shape, BIRD sender; blockspeaker, then BIRD as the receiver in the same run)',
    benches: [{
      script: 'bench:bgp-peers',
      file: 'bench/bgp-peers.ts',
      args: () => [req('--receivers', 'blockspeaker,bird'), opt('--no-build')],
    }, {
      // Before bench/bgp-peers.ts the shape was bench:bgp-ingest's, without the full table.
      script: 'bench:bgp-ingest',
      file: 'bench/bgp-ingest.ts',
      // The table is read even with --no-full; it does not change the bgperf figures, so here it is optional.
      args: (o) => [req('--no-full'), req('--receivers', 'blockspeaker,bird'), opt('--no-sink'), opt('--no-build'),
        ...(o.table !== undefined ? [opt('--table', o.table)] : []), ...(o.limit !== undefined ? [opt('--limit', o.limit)] : [])],
    }],
    needsBuild: true,
    figures: [
      fig('peers', 'convergeMs', 'converged', 'converged, birdc enable until all held', ['bgperf', 'blockspeaker', 'ms'], 'ms', 'lower'),
      fig('peers', 'cpuMs', 'CPU', 'CPU (utime + stime)', ['bgperf', 'blockspeaker', 'cpuMs'], 'ms', 'lower'),
      fig('peers', 'peakRssMB', 'peak RSS', 'peak RSS', ['bgperf', 'blockspeaker', 'peakRssMB'], 'MB', 'lower'),
      fig('peers', 'birdConvergeMs', 'BIRD converged', 'BIRD receiver: converged', ['bgperf', 'bird', 'ms'], 'ms', 'lower'),
      fig('peers', 'birdCpuMs', 'BIRD CPU', 'BIRD receiver: CPU', ['bgperf', 'bird', 'cpuMs'], 'ms', 'lower'),
    ],
    versus: [
      { label: 'our CPU over BIRD\'s', num: 'peers.cpuMs', den: 'peers.birdCpuMs', goal: { op: '<=', value: 1.2 } },
    ],
  },
  lpm: {
    name: 'lpm',
    title: 'RIB longest-prefix match (trie, single lookups, wall clock)',
    benches: [{
      script: 'bench:rib',
      file: 'bench/rib.ts',
      args: (o) => [opt('--no-baseline'), opt('--no-rib'), ...(o.ribTable !== undefined ? [req('--table', o.ribTable)] : [])],
    }],
    needsBuild: false,
    figures: [
      fig('lpm', 'v4MperS', 'IPv4', 'IPv4 lpm4()', ['lpmMperSec', 'v4', 'wall'], 'M lookups/s', 'higher'),
      fig('lpm', 'v6MperS', 'IPv6', 'IPv6 lpm6()', ['lpmMperSec', 'v6', 'wall'], 'M lookups/s', 'higher'),
    ],
  },
  cni: {
    name: 'cni',
    title: 'CNI ADD+DEL (p50 per call; compiled plugin and the shim)',
    benches: [{
      script: 'bench:cni',
      file: 'bench/cni.ts',
      args: (o) => [opt('--no-tsx'), ...(o.cniCount !== undefined ? [req('--count', o.cniCount)] : [])],
    }],
    needsBuild: false,
    figures: [
      fig('cni', 'distAddMs', 'dist ADD', 'ADD p50, blockspeaker-cni compiled', ['results', 'dist', 'add', 'p50_ms'], 'ms', 'lower'),
      fig('cni', 'distDelMs', 'dist DEL', 'DEL p50, blockspeaker-cni compiled', ['results', 'dist', 'del', 'p50_ms'], 'ms', 'lower'),
      fig('cni', 'shimAddMs', 'shim ADD', 'ADD p50, blockspeaker-cni-shim', ['results', 'shim', 'add', 'p50_ms'], 'ms', 'lower'),
      fig('cni', 'shimDelMs', 'shim DEL', 'DEL p50, blockspeaker-cni-shim', ['results', 'shim', 'del', 'p50_ms'], 'ms', 'lower'),
    ],
  },
};

/**
 * The bench a checkout measures a shape with: the first (newest) of the shape's benches whose npm script and file
 * it has, else null and why (for each bench: "no npm script bench:x" or "no bench/x.ts").
 */
export function pickBench(shape: Shape, has: { script(name: string): boolean; file(path: string): boolean }): { bench: ShapeBench; why?: undefined } | { bench: null; why: string } {
  const whys: string[] = [];
  for (const b of shape.benches) {
    if (!has.script(b.script)) whys.push(`no npm script ${b.script}`);
    else if (!has.file(b.file)) whys.push(`no ${b.file}`);
    else return { bench: b };
  }
  return { bench: null, why: whys.join(', ') };
}

/** The ./lib/ files a bench imports (its shared flags may be declared there), as written: "./lib/x.ts". */
export function libImports(source: string): string[] {
  return [...new Set([...source.matchAll(/from\s+['"](\.\/lib\/[\w.-]+\.ts)['"]/g)].map((m) => m[1]))];
}

/** Option names a bench declares to node:util parseArgs (`name: { type: ... }`), read from its source text. */
export function declaredOptions(source: string): Set<string> {
  const out = new Set<string>();
  for (const m of source.matchAll(/(?:'([A-Za-z][\w-]*)'|"([A-Za-z][\w-]*)"|\b([A-Za-z_]\w*))\s*:\s*\{\s*type\s*:\s*['"](?:string|boolean)['"]/g)) {
    out.add(m[1] ?? m[2] ?? m[3]);
  }
  return out;
}

/**
 * The argv for a checkout whose bench declares `declared`: optional flags it lacks are left out; a required flag
 * it lacks makes the shape "not in base" (missing lists them).
 */
export function argvFor(args: readonly BenchArg[], declared: ReadonlySet<string>): { argv: string[]; missing: string[]; dropped: string[] } {
  const argv: string[] = [];
  const missing: string[] = [];
  const dropped: string[] = [];
  for (const a of args) {
    if (!declared.has(a.flag.replace(/^--/, ''))) {
      (a.required ? missing : dropped).push(a.flag);
      continue;
    }
    argv.push(a.flag);
    if (a.value !== undefined) argv.push(a.value);
  }
  return { argv, missing, dropped };
}

/** The last line of a bench's stdout that is a JSON object (its final line; npm or a logger may add lines around it). */
export function parseFinalJson(stdout: string): Record<string, unknown> | null {
  const lines = stdout.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i].trim();
    if (!l.startsWith('{') || !l.endsWith('}')) continue;
    try {
      const v = JSON.parse(l) as unknown;
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // not JSON after all: keep looking upwards
    }
  }
  return null;
}

/** The finite number at `path` in `obj`, else null. */
export function pick(obj: unknown, path: readonly string[]): number | null {
  let cur: unknown = obj;
  for (const p of path) {
    if (typeof cur !== 'object' || cur === null || !Object.hasOwn(cur, p)) return null;
    cur = (cur as Record<string, unknown>)[p];
  }
  return typeof cur === 'number' && Number.isFinite(cur) ? cur : null;
}

/** Each figure of a shape from one run's final JSON line (null where that run's bench has no such figure). */
export function pickFigures(shape: Shape, json: unknown): Record<string, number | null> {
  return Object.fromEntries(shape.figures.map((f) => [f.key, pick(json, f.path)]));
}

/** Median (the mean of the middle two for an even count); null for none. */
export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** head / base, or null when either is missing or base is 0. */
export function ratio(head: number | null, base: number | null): number | null {
  if (head === null || base === null || base === 0) return null;
  return head / base;
}

/** Whether head is better, worse or level (within `tolerance`, as a fraction) on a figure. */
export function verdict(r: number | null, better: 'lower' | 'higher', tolerance = 0.03): 'better' | 'worse' | 'level' | null {
  if (r === null) return null;
  if (Math.abs(r - 1) <= tolerance) return 'level';
  return (r < 1) === (better === 'lower') ? 'better' : 'worse';
}

/** Each Versus of a shape from one side's medians, with whether its goal is met (null: a figure is missing). */
export function versusOf(shape: Shape, medians: Record<string, number | null>): { label: string; value: number | null; goal?: string; met: boolean | null }[] {
  return (shape.versus ?? []).map((v) => {
    const value = ratio(medians[v.num] ?? null, medians[v.den] ?? null);
    const met = value === null || !v.goal ? null : v.goal.op === '>=' ? value >= v.goal.value : value <= v.goal.value;
    return { label: v.label, value, ...(v.goal ? { goal: `${v.goal.op} ${v.goal.value}` } : {}), met };
  });
}

/** Shapes named by --only ("ingest,birdsender,peers,lpm,cni"; all when absent). Throws on an unknown name. */
export function parseOnly(s: string | undefined): ShapeName[] {
  if (s === undefined || s.trim() === '') return [...SHAPE_NAMES];
  const want = s.split(',').map((x) => x.trim()).filter(Boolean);
  for (const w of want) if (!SHAPE_NAMES.includes(w as ShapeName)) throw new Error(`--only: unknown shape ${w} (${SHAPE_NAMES.join(', ')})`);
  return SHAPE_NAMES.filter((n) => want.includes(n));
}

export interface FigureSummary {
  key: string;
  label: string;
  unit: string;
  better: 'lower' | 'higher';
  base: { median: number | null; runs: (number | null)[] };
  head: { median: number | null; runs: (number | null)[] };
  ratio: number | null;
  verdict: 'better' | 'worse' | 'level' | null;
}

/** Per figure, the runs of each side (null where a run gave none), their medians and the ratio head/base. */
export function summarize(shape: Shape, base: Record<string, number | null>[], head: Record<string, number | null>[]): FigureSummary[] {
  return shape.figures.map((f) => {
    const b = base.map((r) => r[f.key] ?? null);
    const h = head.map((r) => r[f.key] ?? null);
    const bm = median(b.filter((x): x is number => x !== null));
    const hm = median(h.filter((x): x is number => x !== null));
    const r = ratio(hm, bm);
    return { key: f.key, label: f.label, unit: f.unit, better: f.better, base: { median: bm, runs: b }, head: { median: hm, runs: h }, ratio: r, verdict: verdict(r, f.better) };
  });
}

/** A number as printed: 3 significant figures at most, no exponent for the sizes benches give. */
export function fmt(x: number | null): string {
  if (x === null) return '-';
  const a = Math.abs(x);
  const d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return x.toFixed(d);
}

/**
 * Which side runs first in round `round` (1-based): the base in odd rounds, the head in even ones. Always base first
 * left the head with whatever the first run of a pair leaves behind (page cache, a warmer or busier machine): the
 * replay's peak RSS came out 5-7% worse for the head in three compares running, and level with the sides swapped.
 */
export function sidesInRound(round: number): readonly ['base', 'head'] | readonly ['head', 'base'] {
  if (!Number.isInteger(round) || round < 1) throw new Error(`round must be a whole number from 1, got ${round}`);
  return round % 2 === 1 ? (['base', 'head'] as const) : (['head', 'base'] as const);
}
