// bench/compare: the headline figures of a base commit and of this working tree, measured in one run, alternating
// base and head, each side with its own version of each bench. Run it before a change that touches a hot path.
//
//   npm run bench:compare -- --base REF [--rounds N] [--only ingest,birdsender,peers,lpm,cni] [--keep]
//                            [--table FILE] [--limit N]   (passed to the two ingest shapes; --limit 100000 for a quick run)
//                            [--cni-count N]              (pods per CNI run, the bench's --count; its default otherwise)
//
// Shapes (bench/lib/compare.ts lists the figures picked from each bench's final JSON line):
//   ingest  npm run bench:bgp-ingest -- --no-bgperf --receivers blockspeaker,bird --sender replay --no-sink
//           full table over one session: time from Established until every prefix is held, CPU, peak RSS
//   birdsender  npm run bench:bgp-ingest -- --no-bgperf --receivers blockspeaker,bird --sender bird
//           the same table from BIRD as the sender (one prefix per UPDATE, in its own order), with the sink
//   peers   npm run bench:bgp-peers -- --receivers blockspeaker,bird
//           100 peers x 100 prefixes from BIRD: time from `birdc enable` until all 10,000 are held, CPU, peak RSS
//           (a checkout from before bench/bgp-peers.ts: npm run bench:bgp-ingest -- --no-full --no-sink --receivers ...)
// The BGP shapes run BIRD as a receiver too, in every run of either side: their figures are compared base to head
// like ours (a control: they should be level), and each side's medians give BIRD against ours with the project's
// goals ("versus" lines: BIRD's time over ours, our CPU and RSS over BIRD's, our time over the sink's).
//   lpm     npm run bench:rib -- --no-baseline --no-rib: IPv4 and IPv6 LPM rates (M lookups/s, wall clock)
//   cni     npm run bench:cni -- --no-tsx: ADD and DEL p50, the compiled plugin and the Perl shim
// The ingest shapes need root, bird2, gobgpd (the bench checks for both), curl and nsenter.
//
// The base is checked out beside the working tree: `git worktree add --detach var/compare/<short sha>`, with
// /work/main's node_modules linked into it when its package-lock.json is the working tree's, else `npm ci` there
// (`npm install` when npm ci refuses an old lock file that lacks some platform's optional packages).
// A bench that takes --no-build gets dist/ built once per checkout (`npm run build`) and --no-build on every run;
// one that does not builds dist/ itself on every run. The ingest shapes and the RIB bench are given the head's
// default table (../shared/data/tier1-table-2023.txt.gz) by path when it exists: from var/compare/ the base would
// not find it and would measure the synthetic table instead. Time-saving flags a side's bench lacks are left out;
// a shape whose bench, npm script or measuring flag a side lacks is reported "not in base" (or "not in head"). A shape
// whose bench was split off later is measured in an older checkout by the bench that held it then (bench/lib/compare.ts
// lists each shape's benches, newest first). A bench's flags are the parseArgs options of its file and of the ./lib/
// files it imports.
//
// Per round, per shape: base, then head in odd rounds, head, then base in even ones (sidesInRound). Each run's
// output goes to var/compare/logs-<time>/; a progress line per run, then per figure the base and head medians over
// the rounds, head/base and which way is better, then one JSON line with everything. The worktree is removed at the
// end (and on SIGINT/SIGTERM) unless --keep.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, lstatSync, mkdirSync, readFileSync, symlinkSync, unlinkSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  SHAPES, argvFor, declaredOptions, fmt, libImports, parseFinalJson, parseOnly, pickBench, pickFigures, sidesInRound, summarize, versusOf,
  type CompareOptions, type FigureSummary, type ShapeName,
} from './lib/compare.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    base: { type: 'string' },
    rounds: { type: 'string', default: '2' },
    only: { type: 'string' },
    keep: { type: 'boolean', default: false },
    table: { type: 'string' },
    limit: { type: 'string' },
    'cni-count': { type: 'string' },
  },
});
const usage = 'usage: npm run bench:compare -- --base REF [--rounds N] [--only ingest,peers,lpm,cni] [--keep] [--table FILE] [--limit N] [--cni-count N]';
if (!values.base) {
  console.error(`bench:compare: --base is required\n${usage}`);
  process.exit(2);
}
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`bench:compare: --rounds must be a whole number >= 1, got ${values.rounds}`);
  process.exit(2);
}
let only: ShapeName[];
try {
  only = parseOnly(values.only);
} catch (e) {
  console.error(`bench:compare: ${(e as Error).message}`);
  process.exit(2);
}
for (const [k, v] of [['limit', values.limit], ['cni-count', values['cni-count']]] as const) {
  if (v !== undefined && !/^\d+$/.test(v)) {
    console.error(`bench:compare: --${k} must be a whole number, got ${v}`);
    process.exit(2);
  }
}

const log = (s: string) => console.log(s);
const now = () => performance.now();
const git = (args: string[], cwd = repoRoot) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const started = now();
const loadStart = loadavg().map((x) => Math.round(x * 10) / 10);

// ---- the two checkouts -----------------------------------------------------------------------------------------

let baseSha: string;
try {
  baseSha = git(['rev-parse', '--verify', `${values.base}^{commit}`]);
} catch {
  console.error(`bench:compare: --base ${values.base} is not a commit here`);
  process.exit(2);
}
const baseShort = git(['rev-parse', '--short', baseSha]);
const headSha = git(['rev-parse', 'HEAD']);
const headDirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
const baseDir = join(repoRoot, 'var', 'compare', baseShort);
const logDir = join(repoRoot, 'var', 'compare', `logs-${new Date().toISOString().replace(/[:.]/g, '-')}`);
mkdirSync(logDir, { recursive: true });

interface Side {
  name: 'base' | 'head';
  dir: string;
  sha: string;
}
const base: Side = { name: 'base', dir: baseDir, sha: baseSha };
const head: Side = { name: 'head', dir: repoRoot, sha: headSha };

let worktreeAdded = false;
let linkedModules = false;
let current: ChildProcess | undefined;
let stopping = false;

function removeWorktree(): void {
  if (values.keep || !worktreeAdded) return;
  worktreeAdded = false;
  // The link first: the worktree's removal must never reach into the working tree's node_modules.
  const nm = join(baseDir, 'node_modules');
  try {
    if (lstatSync(nm).isSymbolicLink()) unlinkSync(nm);
  } catch { /* not there */ }
  try {
    git(['worktree', 'remove', '--force', baseDir]);
  } catch (e) {
    console.error(`bench:compare: git worktree remove ${relative(repoRoot, baseDir)} failed: ${(e as Error).message}`);
  }
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) process.exit(130);
    stopping = true;
    console.error(`bench:compare: ${sig}, stopping the running bench and removing the worktree`);
    if (current?.pid) {
      try {
        process.kill(-current.pid, 'SIGTERM');
      } catch { /* gone */ }
    }
  });
}

/** Runs a command in its own process group, output to a log file; resolves with its stdout and exit code. */
function run(cmd: string, args: string[], cwd: string, logFile: string, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderrTail: string; timedOut: boolean }> {
  return new Promise((resolveRun, reject) => {
    const out = createWriteStream(logFile);
    out.write(`$ (cd ${cwd} && ${cmd} ${args.join(' ')})\n`);
    const child = spawn(cmd, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    current = child;
    let stdout = '';
    let stderrTail = '';
    let timedOut = false;
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      out.write(d);
    });
    child.stderr!.on('data', (d: Buffer) => {
      stderrTail = (stderrTail + d.toString()).slice(-2000);
      out.write(d);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGTERM');
        setTimeout(() => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch { /* gone */ }
        }, 15_000).unref();
      } catch { /* gone */ }
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      out.end();
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      current = undefined;
      out.end(() => resolveRun({ code, stdout, stderrTail, timedOut }));
    });
  });
}

const lastLines = (s: string, n = 6) => s.trim().split('\n').slice(-n).map((l) => `      ${l}`).join('\n');

let nodeModules = 'linked';
try {
  if (existsSync(baseDir) && (() => {
    try {
      return resolve(git(['rev-parse', '--show-toplevel'], baseDir)) === baseDir && git(['rev-parse', 'HEAD'], baseDir) === baseSha;
    } catch {
      return false;
    }
  })()) {
    log(`base ${values.base} = ${baseShort}: reusing the worktree ${relative(repoRoot, baseDir)} (kept by an earlier --keep)`);
  } else {
    try {
      git(['worktree', 'add', '--detach', baseDir, baseSha]);
    } catch (e) {
      // A worktree whose directory was deleted by hand is still registered: add -f takes the place over.
      if (!/missing but already registered/.test((e as { stderr?: string }).stderr ?? '')) throw e;
      git(['worktree', 'add', '-f', '--detach', baseDir, baseSha]);
    }
    log(`base ${values.base} = ${baseShort}: git worktree add --detach ${relative(repoRoot, baseDir)}`);
  }
  worktreeAdded = true;
  const nm = join(baseDir, 'node_modules');
  let baseLock: string | null = null;
  try {
    baseLock = execFileSync('git', ['show', `${baseSha}:package-lock.json`], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch { /* no lock in base */ }
  const headLock = readFileSync(join(repoRoot, 'package-lock.json'), 'utf8');
  const isLink = existsSync(nm) && lstatSync(nm).isSymbolicLink();
  if (baseLock === headLock && (!existsSync(nm) || isLink)) {
    if (!existsSync(nm)) symlinkSync(join(repoRoot, 'node_modules'), nm, 'dir');
    linkedModules = true;
    nodeModules = 'linked';
    log(`  node_modules: linked to ${join(repoRoot, 'node_modules')} (package-lock.json identical)`);
  } else if (existsSync(nm) && !isLink) {
    nodeModules = 'npm ci (earlier, kept)';
    log('  node_modules: from an earlier `npm ci` in the kept worktree');
  } else {
    if (isLink) unlinkSync(nm);
    nodeModules = 'npm ci';
    log(`  node_modules: package-lock.json ${baseLock === null ? 'absent in base' : 'differs from the working tree\'s'}: npm ci in the worktree ...`);
    const t0 = now();
    const r = await run('npm', ['ci', '--no-audit', '--no-fund'], baseDir, join(logDir, 'base-npm-ci.log'), 30 * 60_000);
    if (r.code !== 0 && /npm error code EUSAGE|are in sync|from lock file/.test(readFileSync(join(logDir, 'base-npm-ci.log'), 'utf8'))) {
      // An old commit whose lock file lacks some platform's optional packages (npm ci refuses it): npm install
      // there, which keeps what the lock pins and adds only the missing entries. Only the throwaway worktree changes.
      nodeModules = 'npm install (base lock file out of sync for npm ci)';
      log('  npm ci refused the base\'s lock file (out of sync with its package.json): npm install in the worktree instead ...');
      const r2 = await run('npm', ['install', '--no-audit', '--no-fund'], baseDir, join(logDir, 'base-npm-install.log'), 30 * 60_000);
      if (r2.code !== 0) throw new Error(`npm install in ${baseDir} failed (${r2.code}); see ${join(logDir, 'base-npm-install.log')}\n${lastLines(r2.stderrTail)}`);
    } else if (r.code !== 0) throw new Error(`npm ci in ${baseDir} failed (${r.code}); see ${join(logDir, 'base-npm-ci.log')}\n${lastLines(r.stderrTail)}`);
    log(`  ${nodeModules} done in ${((now() - t0) / 1000).toFixed(0)} s`);
  }
} catch (e) {
  console.error(`bench:compare: cannot set up the base checkout: ${(e as Error).message}`);
  removeWorktree();
  process.exit(1);
}
log(`head ${headSha.slice(0, baseShort.length)}${headDirty ? ' + uncommitted changes' : ''}: the working tree ${repoRoot}`);

// ---- what each side can run ------------------------------------------------------------------------------------

const defaultTable = resolve(repoRoot, '../shared/data/tier1-table-2023.txt.gz');
const opts: CompareOptions = {
  table: values.table !== undefined ? resolve(values.table) : existsSync(defaultTable) ? defaultTable : undefined,
  ribTable: existsSync(defaultTable) ? defaultTable : undefined,
  limit: values.limit,
  cniCount: values['cni-count'],
};
if (opts.table !== undefined && !existsSync(opts.table)) {
  console.error(`bench:compare: --table ${opts.table} not found`);
  removeWorktree();
  process.exit(2);
}

interface Plan {
  runnable: boolean;
  /** The npm script that measures the shape in this checkout (the newest bench it has). */
  script?: string;
  /** "not in base" and why, or a build failure. */
  reason?: string;
  argv: string[];
  dropped: string[];
  noBuild: boolean;
}
const plans = new Map<string, Plan>();
const planKey = (shape: ShapeName, side: Side) => `${shape}/${side.name}`;
for (const side of [base, head]) {
  let scripts: Record<string, string> = {};
  try {
    scripts = (JSON.parse(readFileSync(join(side.dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }).scripts ?? {};
  } catch { /* none */ }
  for (const name of only) {
    const shape = SHAPES[name];
    const not = (why: string): Plan => ({ runnable: false, reason: `not in ${side.name} (${why})`, argv: [], dropped: [], noBuild: false });
    const picked = pickBench(shape, { script: (s) => !!scripts[s], file: (f) => existsSync(join(side.dir, f)) });
    if (!picked.bench) plans.set(planKey(name, side), not(picked.why));
    else {
      const { bench } = picked;
      const file = join(side.dir, bench.file);
      const source = readFileSync(file, 'utf8');
      const libs = libImports(source).map((l) => join(dirname(file), l)).filter((l) => existsSync(l));
      const declared = declaredOptions([source, ...libs.map((l) => readFileSync(l, 'utf8'))].join('\n'));
      const a = argvFor(bench.args(opts), declared);
      if (a.missing.length) plans.set(planKey(name, side), not(`${bench.file} has no ${a.missing.join(', ')}`));
      else plans.set(planKey(name, side), { runnable: true, script: bench.script, argv: a.argv, dropped: a.dropped, noBuild: a.argv.includes('--no-build') });
    }
  }
}

// dist/ once per checkout, for the benches that take --no-build (the others build it on every run).
const builds: Record<string, { seconds?: number; error?: string; note?: string }> = {};
for (const side of [base, head]) {
  const needs = only.filter((n) => SHAPES[n].needsBuild && plans.get(planKey(n, side))!.runnable);
  if (!needs.length || stopping) continue;
  if (!needs.some((n) => plans.get(planKey(n, side))!.noBuild)) {
    builds[side.name] = { note: 'its bench builds dist/ itself on every run (no --no-build)' };
    log(`${side.name}: ${builds[side.name].note}`);
    continue;
  }
  log(`${side.name}: npm run build in ${side.dir} ...`);
  const t0 = now();
  const file = join(logDir, `${side.name}-build.log`);
  const r = await run('npm', ['run', '-s', 'build'], side.dir, file, 20 * 60_000);
  if (r.code === 0) {
    builds[side.name] = { seconds: Math.round((now() - t0) / 100) / 10 };
    log(`  built in ${builds[side.name].seconds} s`);
  } else {
    const error = `npm run build failed (${r.timedOut ? 'timed out' : r.code}); see ${file}`;
    builds[side.name] = { error };
    log(`  ${error}\n${lastLines(r.stderrTail || r.stdout)}`);
    for (const n of needs) Object.assign(plans.get(planKey(n, side))!, { runnable: false, reason: `${side.name}: ${error}` });
  }
}

for (const name of only) {
  for (const side of [base, head]) {
    const p = plans.get(planKey(name, side))!;
    if (!p.runnable) log(`${name}: ${p.reason}`);
    else if (p.dropped.length) log(`${name} ${side.name}: its bench lacks ${p.dropped.join(', ')} (time savers only): run without`);
  }
}

// ---- the runs: per round, per shape, both sides (base first in odd rounds, head first in even) ----------------

interface RunRecord {
  round: number;
  seconds: number;
  exit: number | null;
  error?: string;
  log: string;
  figures: Record<string, number | null>;
}
const runs = new Map<string, RunRecord[]>();
for (const p of plans.keys()) runs.set(p, []);

outer: for (let round = 1; round <= rounds; round++) {
  for (const name of only) {
    const shape = SHAPES[name];
    for (const which of sidesInRound(round)) {
      const side = which === 'base' ? base : head;
      if (stopping) break outer;
      const plan = plans.get(planKey(name, side))!;
      if (!plan.runnable) continue;
      const file = join(logDir, `${name}-${side.name}-${round}.log`);
      const t0 = now();
      const r = await run('npm', ['run', '-s', plan.script!, '--', ...plan.argv], side.dir, file, 40 * 60_000);
      const seconds = Math.round((now() - t0) / 100) / 10;
      const json = parseFinalJson(r.stdout);
      const figures = json ? pickFigures(shape, json) : Object.fromEntries(shape.figures.map((f) => [f.key, null]));
      const rec: RunRecord = { round, seconds, exit: r.code, log: relative(repoRoot, file), figures };
      if (r.timedOut) rec.error = 'timed out';
      else if (stopping) rec.error = 'stopped';
      else if (r.code !== 0) rec.error = `exit ${r.code}${json && typeof json.error === 'string' ? `: ${json.error}` : ''}`;
      else if (!json) rec.error = 'no final JSON line';
      runs.get(planKey(name, side))!.push(rec);
      const got = shape.figures.map((f) => `${f.short} ${fmt(figures[f.key])}${f.unit === 'M lookups/s' ? 'M/s' : ` ${f.unit}`}`).join(', ');
      log(`[round ${round}/${rounds}] ${name} ${side.name}: ${seconds} s${rec.error ? `  FAILED (${rec.error}; ${rec.log})${stopping ? '' : `\n${lastLines(r.stderrTail || r.stdout)}`}` : ''}  ${got}`);
    }
  }
}

// ---- results -----------------------------------------------------------------------------------------------------

const shapesOut: Record<string, unknown> = {};
const allFigures: (FigureSummary & { shape: ShapeName })[] = [];
log('');
log(`bench:compare  base ${baseShort} (${values.base})  head ${headSha.slice(0, baseShort.length)}${headDirty ? '+dirty' : ''}  ` +
  `${rounds} round${rounds > 1 ? 's' : ''}, medians; head/base < 1 is head lower`);
for (const name of only) {
  const shape = SHAPES[name];
  const bp = plans.get(planKey(name, base))!;
  const hp = plans.get(planKey(name, head))!;
  const br = runs.get(planKey(name, base))!;
  const hr = runs.get(planKey(name, head))!;
  const figures = summarize(shape, br.map((r) => r.figures), hr.map((r) => r.figures));
  const w = Math.max(...shape.figures.map((f) => f.label.length + f.unit.length + 3));
  log(`${name}: ${shape.title}`);
  for (const why of [bp.reason, hp.reason]) if (why) log(`  ${why}`);
  for (const f of figures) {
    const unit = `(${f.unit})`;
    // No median: the side's bench (or a flag) is missing, or its runs succeeded without this figure, or they failed.
    const none = (p: Plan, rs: RunRecord[], side: string) =>
      !p.runnable ? (p.reason?.startsWith('not in') ? `not in ${side}` : 'failed') : rs.some((r) => !r.error) ? `not in ${side}` : rs.length ? 'failed' : '-';
    const b = f.base.median === null ? none(bp, br, 'base') : fmt(f.base.median);
    const h = f.head.median === null ? none(hp, hr, 'head') : fmt(f.head.median);
    const r = f.ratio === null ? '-' : f.ratio.toFixed(3);
    const runsTxt = rounds > 1 ? `  [base ${f.base.runs.map(fmt).join(' ')} | head ${f.head.runs.map(fmt).join(' ')}]` : '';
    log(`  ${`${f.label} ${unit}`.padEnd(w)}  base ${b.padStart(11)}  head ${h.padStart(11)}  head/base ${r.padStart(6)}  ${f.better} is better` +
      `${f.verdict && f.verdict !== 'level' ? `: head ${f.verdict}` : f.verdict === 'level' ? ': level (within 3%)' : ''}${runsTxt}`);
    allFigures.push({ shape: name, ...f });
  }
  // Ratios within each side's own runs: BIRD measured in the same runs as ours.
  const med = (side: 'base' | 'head') => Object.fromEntries(figures.map((f) => [f.key, f[side].median]));
  const versus = { base: versusOf(shape, med('base')), head: versusOf(shape, med('head')) };
  for (const [i, v] of versus.head.entries()) {
    const b = versus.base[i]!;
    log(`  ${v.label}${v.goal ? ` (goal ${v.goal})` : ''}: base ${b.value === null ? '-' : b.value.toFixed(2)}, head ${v.value === null ? '-' : v.value.toFixed(2)}` +
      `${v.met === null ? '' : v.met ? ': met' : ': not met'}`);
  }
  const sideOut = (p: Plan, rs: RunRecord[], side: string) => ({
    status: !p.runnable ? (p.reason?.startsWith('not in') ? `not in ${side}` : 'failed') : rs.some((r) => r.error) ? 'failed runs' : 'ok',
    ...(p.reason ? { reason: p.reason } : {}),
    ...(p.script ? { command: `npm run ${p.script}` } : {}),
    argv: p.argv, ...(p.dropped.length ? { dropped: p.dropped } : {}),
    runs: rs.map(({ round, seconds, exit, error, log: l, figures: f }) => ({ round, seconds, exit, ...(error ? { error } : {}), log: l, figures: f })),
  });
  shapesOut[name] = {
    command: `npm run ${hp.script ?? shape.benches[0].script}`, base: sideOut(bp, br, 'base'), head: sideOut(hp, hr, 'head'),
    figures: figures.map((f) => ({ ...f, ratio: f.ratio === null ? null : Math.round(f.ratio * 10000) / 10000 })),
    ...(shape.versus ? { versus } : {}),
  };
}
log(`logs: ${relative(repoRoot, logDir)}/`);
removeWorktree();
if (values.keep) log(`kept the base worktree: ${relative(repoRoot, baseDir)} (remove: git worktree remove --force ${relative(repoRoot, baseDir)}${linkedModules ? ', after rm of its node_modules link' : ''})`);

const anyFailed = [...runs.values()].some((rs) => rs.some((r) => r.error)) || Object.values(builds).some((b) => b.error);
console.log(JSON.stringify({
  bench: 'compare',
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, node: process.version, loadStart, loadEnd: loadavg().map((x) => Math.round(x * 10) / 10) },
  base: { ref: values.base, sha: baseSha, checkout: relative(repoRoot, baseDir), nodeModules, kept: values.keep, ...(builds.base ? { build: builds.base } : {}) },
  head: { sha: headSha, dirty: headDirty, checkout: repoRoot, ...(builds.head ? { build: builds.head } : {}) },
  rounds, only, options: opts, stopped: stopping,
  figures: Object.fromEntries(allFigures.map((f) => [f.key, { base: f.base.median, head: f.head.median, ratio: f.ratio === null ? null : Math.round(f.ratio * 1000) / 1000, better: f.better, unit: f.unit, verdict: f.verdict }])),
  shapes: shapesOut,
  logs: relative(repoRoot, logDir),
  totalS: Math.round((now() - started) / 100) / 10,
}));
process.exit(stopping ? 130 : anyFailed ? 1 : 0);
