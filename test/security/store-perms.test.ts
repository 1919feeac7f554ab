// Store permissions: the embedded store and the run dir on Linux are the daemon's alone. The attack: as uid 65534,
// open the store's LOCK read-only and take a shared lock on it (what Python's fcntl.lockf(fd, LOCK_SH) does: a
// POSIX read lock, which conflicts with the writers' exclusive OFD lock), and every `ipam assign` waits for it. Here,
// for real, as root with a second process running as uid 65534:
//   - the store `ipam` makes is 0700 and every file in it 0600, created so (under umask 000 too; a compaction's
//     log.tmp is 0600 before its first byte); the run dir run makes is 0700 and its marker 0600;
//   - uid 65534, trying again and again, cannot open LOCK (EACCES), not even through a store folder others may pass
//     through (0711: the file's own mode refuses), and an `ipam assign` run meanwhile finishes;
//   - the control: a store left with the old modes (0755, LOCK 0644) lets uid 65534 take the lock, and a write
//     then waits until it lets go; such a store is now refused at once, by `ipam` and by `run`, naming each path,
//     its mode and the command that fixes it;
//   - `run` refuses a store with a 0644 file, a 0755 store folder, a 0755 run dir and a 0644 marker in it.
import t, { type Test } from 'tap';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openFileStore } from '../../src/store/file.ts';
import { linuxPlatform } from '../../src/platform/platform.ts';
import { RunMarker } from '../../src/platform/runmarker.ts';
import { PRIVATE_FILE_MODE, writeFileIfChanged } from '../../src/platform/atomic-file.ts';
import { freePort, waitFor } from '../kit/wait.ts';

const ROOT = process.geteuid?.() === 0;
const LINUX = process.platform === 'linux';
const NOBODY = 65534;
const repo = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(repo, 'bin', 'blockspeaker.js');
const runFixture = path.join(repo, 'test', 'security', 'fixtures', 'run-default-rundir.ts');
const env = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };
const FSX = path.dirname(createRequire(import.meta.url).resolve('fs-native-extensions/package.json'));

/** A folder for one test, 0755 like /var/lib: uid 65534 may reach what is in it, so only the store's modes keep it out. */
function base(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-sec-store-${process.pid}-`));
  fs.chmodSync(dir, 0o755);
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // The timeout only ends a hung command so the test can say so; a stalled lock never lets go by itself.
    execFile(process.execPath, [bin, ...args], { env, cwd: repo, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }));
  });
}

/** Everything under `dir` (and `dir` itself as '.'), with its permission bits and type. */
function walk(dir: string): { rel: string; mode: number; dir: boolean }[] {
  const out: { rel: string; mode: number; dir: boolean }[] = [];
  const visit = (p: string) => {
    const st = fs.lstatSync(p);
    out.push({ rel: path.relative(dir, p) || '.', mode: st.mode & 0o7777, dir: st.isDirectory() });
    if (st.isDirectory()) for (const n of fs.readdirSync(p).sort()) visit(path.join(p, n));
  };
  visit(dir);
  return out;
}

function modesOk(t: Test, dir: string, what: string): void {
  const all = walk(dir);
  const wrong = all.filter((e) => e.mode !== (e.dir ? 0o700 : PRIVATE_FILE_MODE));
  t.same(wrong.map((e) => `${e.rel} ${e.mode.toString(8)}`), [], `${what}: folders 0700, files 0600 (${all.map((e) => `${e.rel} ${e.mode.toString(8)}`).join(', ')})`);
}

// The other user: tries open(LOCK, O_RDONLY) then a shared lock every 20 ms until it holds one or its stdin ends,
// saying the first result, a lock taken, and at the end how often each result came.
const ATTACK = `
const fs = require('node:fs');
const [lock, fsxDir] = process.argv.slice(1);
const fsx = require(fsxDir);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const seen = {};
let held;
let first = true;
function attempt() {
  let fd;
  try { fd = fs.openSync(lock, 'r'); } catch (e) { return 'open ' + e.code; }
  try {
    if (fsx.tryLock(fd, { shared: true })) { held = fd; return 'locked'; }
    fs.closeSync(fd);
    return 'lock busy';
  } catch (e) { fs.closeSync(fd); return 'lock ' + e.code; }
}
function tick() {
  if (held !== undefined) return;
  const r = attempt();
  seen[r] = (seen[r] || 0) + 1;
  if (first || r === 'locked') out({ attempt: r, uid: process.getuid() });
  first = false;
}
tick();
const timer = setInterval(tick, 20);
process.stdin.on('end', () => { clearInterval(timer); out({ seen }); process.exit(0); });
process.stdin.resume();
`;

interface Attacker {
  child: ChildProcess;
  /** The next line it says matching `pred`. */
  says(pred: (o: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** Close its stdin (it lets go of any lock by exiting) and get its tally. */
  stop(): Promise<Record<string, number>>;
}

function attacker(t: Test, lock: string): Attacker {
  const child = spawn(process.execPath, ['-e', ATTACK, lock, FSX], { uid: NOBODY, gid: NOBODY, cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  let buf = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      buf = buf.slice(i + 1);
    }
    waiters.splice(0).forEach((w) => w());
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  t.teardown(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
  });
  const says = (pred: (o: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const hit = lines.find(pred);
        if (hit) return resolve(hit);
        if (child.exitCode !== null) return reject(new Error(`the uid ${NOBODY} process exited ${child.exitCode}: ${err}`));
        waiters.push(check);
      };
      child.once('exit', () => waiters.splice(0).forEach((w) => w()));
      check();
    });
  return {
    child,
    says,
    async stop() {
      child.stdin!.end();
      const end = await says((o) => 'seen' in o);
      await exited;
      return end.seen as Record<string, number>;
    },
  };
}

const whom = 'root only';

t.test('the attack: another uid cannot open LOCK, so an `ipam assign` finishes meanwhile', { skip: (!ROOT || !LINUX) && 'needs root on Linux (a second uid)' }, async (t) => {
  const store = path.join(base(t), 'store');
  t.match(await cli(['ipam', '--store', store, 'pool', 'add', '--name', 'p', '--cidr', '10.244.0.0/16', '--block-size', '26']), { code: 0 }, 'ipam made the store');
  t.match(await cli(['ipam', '--store', store, 'host', 'set', '--name', 'n1', '--os', 'linux']), { code: 0 });
  t.same(walk(store).map((e) => e.rel), ['.', 'LOCK', 'log']);
  modesOk(t, store, 'the store ipam made');
  const lock = path.join(store, 'LOCK');

  const a = attacker(t, lock);
  t.match(await a.says((o) => 'attempt' in o), { attempt: 'open EACCES', uid: NOBODY }, `uid ${NOBODY}: open(LOCK, O_RDONLY) is refused`);
  // While it keeps trying: the real lock path (the CLI opening the store, the exclusive lock, a commit).
  const r = await cli(['ipam', '--store', store, 'assign', '--host', 'n1', '--num4', '1']);
  t.equal(r.code, 0, `ipam assign finished (${r.stderr.trim()})`);
  t.match(r.stdout, /10\.244\./, 'and assigned an address');
  const seen = await a.stop();
  t.same(Object.keys(seen), ['open EACCES'], `every attempt refused at open (${JSON.stringify(seen)})`);

  // A folder others may pass through (0711: not list, but open a name they know): the file's own 0600 still refuses.
  fs.chmodSync(store, 0o711);
  const b = attacker(t, lock);
  t.match(await b.says((o) => 'attempt' in o), { attempt: 'open EACCES' }, 'LOCK 0600 refuses on its own');
  t.same(Object.keys(await b.stop()), ['open EACCES']);
  fs.chmodSync(store, 0o700);
  modesOk(t, store, 'after assign');
});

t.test('the control: with the old modes the same lock stalls a writer; such a store is now refused at once', { skip: (!ROOT || !LINUX) && 'needs root on Linux (a second uid)' }, async (t) => {
  const store = path.join(base(t), 'store');
  const s = await openFileStore(store);
  t.teardown(() => s.close());
  await s.put('k', 'v1');
  // What an earlier version left (the umask's modes), while a daemon has the store open.
  fs.chmodSync(store, 0o755);
  fs.chmodSync(path.join(store, 'LOCK'), 0o644);
  fs.chmodSync(path.join(store, 'log'), 0o644);
  const a = attacker(t, path.join(store, 'LOCK'));
  t.match(await a.says((o) => o.attempt === 'locked'), { attempt: 'locked', uid: NOBODY }, `uid ${NOBODY} holds a shared lock on the old LOCK`);
  let done = false;
  const put = s.put('k', 'v2').then((rev) => ((done = true), rev));
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(done, false, 'a write waits for it (this is what made ipam assign time out)');

  // Opened now (a restart, the CLI): refused before the lock is tried, naming each path, its mode and the fix.
  const lock = path.join(store, 'LOCK');
  const log = path.join(store, 'log');
  const expected = `file:${store}: ${store} lets others read or change it: its mode 0755 (drwxr-xr-x) gives its group r-x and others r-x; it must be readable and changeable by ${whom}; ` +
    `${lock}, in ${store}, lets others read or change it: its mode 0644 (-rw-r--r--) gives its group r-- and others r--; it must be readable and changeable by ${whom}; ` +
    `${log}, in ${store}, lets others read or change it: its mode 0644 (-rw-r--r--) gives its group r-- and others r--; it must be readable and changeable by ${whom}; ` +
    `refusing to use it. Fix (as root): chmod 700 ${store} && chmod 600 ${lock} && chmod 600 ${log}`;
  await t.rejects(openFileStore(store), { name: 'StoreError', message: expected });
  const r = await cli(['ipam', '--store', store, 'assign', '--host', 'n1', '--num4', '1']);
  t.equal(r.code, 1, 'ipam assign exits 1 at once instead of waiting');
  t.equal(r.stderr.trim(), `blockspeaker: ${expected}`);

  t.same(await a.stop(), { locked: 1 });
  t.ok((await put) > 0, 'the write goes through once the other uid lets go');
  t.equal((await s.get('k'))?.value, 'v2');
});

t.test('created 0600 and 0700 whatever the umask: LOCK, logs, a compaction\'s log.tmp, the run dir and its marker', { skip: !LINUX && 'POSIX modes' }, async (t) => {
  const dir = base(t);
  const old = process.umask(0);
  t.teardown(() => void process.umask(old));
  const store = path.join(dir, 'store');
  const tmpModes: number[] = [];
  const s = await openFileStore(store, {
    compactMinBytes: 1,
    compactRatio: 1,
    onCompactionStep: (step) => {
      if (step === 'tmp-partial' && tmpModes.length === 0) tmpModes.push(fs.statSync(path.join(store, 'log.tmp')).mode & 0o7777);
    },
  });
  for (let i = 0; i < 5; i++) await s.put('k', `v${i}`);
  t.ok(s.stats().compactions > 0, 'compacted');
  t.same(tmpModes, [0o600], 'log.tmp was 0600 when its first buffer went in (created so by open)');
  await s.close();
  t.ok(walk(store).some((e) => /^log\.\d+$/.test(e.rel)), 'a later generation exists');
  modesOk(t, store, 'the store under umask 000');

  // A leftover log.tmp is removed and made anew, not reused with its mode.
  fs.writeFileSync(path.join(store, 'log.tmp'), 'x', { mode: 0o600 });
  const s2 = await openFileStore(store, { compactMinBytes: 1, compactRatio: 1 });
  for (let i = 0; i < 5; i++) await s2.put('k', `w${i}`);
  await s2.close();
  modesOk(t, store, 'after another compaction');

  const linux = linuxPlatform();
  const runDir = path.join(dir, 'run', 'blockspeaker');
  t.match(await linux.prepareDir(runDir), { created: path.join(dir, 'run') });
  const marker = new RunMarker(runDir, 'n1', `file:${store}#n1`, linux);
  marker.claim();
  modesOk(t, runDir, 'the run dir and its marker under umask 000');

  // writeFileIfChanged: the mode it is given (the temporary file is created with it), else 0666 less the umask.
  writeFileIfChanged(linux, path.join(dir, 'private'), 'x', PRIVATE_FILE_MODE);
  writeFileIfChanged(linux, path.join(dir, 'shared'), 'x');
  t.equal(fs.statSync(path.join(dir, 'private')).mode & 0o777, 0o600);
  t.equal(fs.statSync(path.join(dir, 'shared')).mode & 0o777, 0o666);
});

/** `blockspeaker run` with the default run dir at `runDir`; resolves on exit, or once it says "started" (then SIGTERM). */
async function runDaemon(t: Test, file: string, runDir: string): Promise<{ code: number | null; stderr: string; started: boolean }> {
  const child = spawn(process.execPath, ['--import', 'tsx', runFixture, runDir, '-c', file, '--log-level', 'info'], { cwd: repo, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let started = false;
  await waitFor('the daemon to start or exit', () => child.exitCode !== null || (started = /"msg":"started"/.test(stderr)), 60_000, 50);
  if (started) child.kill('SIGTERM');
  return { code: await exited, stderr, started };
}

t.test('run: the default run dir is made 0700 with its marker 0600; a wider store, store file, run dir or marker refuses the start', { skip: (!ROOT || !LINUX) && 'needs root on Linux' }, async (t) => {
  const dir = base(t);
  const store = path.join(dir, 'store');
  const runDir = path.join(dir, 'run', 'blockspeaker');
  const file = path.join(dir, 'node.yaml');
  fs.writeFileSync(file, `node: { name: perm-a, os: linux }
ipam:
  store: ${store}
  pools: [{ name: p, cidr: 10.245.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${await freePort('127.0.0.1')}" }
ipc: { path: ${path.join(dir, 'ctl.sock')} }
`, { mode: 0o644 });

  const first = await runDaemon(t, file, runDir);
  t.ok(first.started, `started (${first.stderr.split('\n').filter((l) => /"level":[56]0/.test(l)).join(' ')})`);
  t.equal(first.code, 0, 'a restart-stop');
  modesOk(t, store, 'the store the daemon made');
  modesOk(t, runDir, 'the default run dir (its marker stays after a restart-stop)');
  t.equal(fs.statSync(path.join(dir, 'run')).mode & 0o7777, 0o755, 'its missing parent 0755');
  const [marker] = fs.readdirSync(runDir);
  t.match(marker, /^perm-a-[0-9a-f]{16}\.running$/);

  // Each wider path on its own: exit 1, the path and its mode named, with the fix, and nothing started.
  const refuses = async (what: string, widen: () => void, narrow: () => void, message: RegExp) => {
    widen();
    const r = await runDaemon(t, file, runDir);
    t.equal(r.code, 1, `${what}: refused`);
    t.notOk(r.started, `${what}: not started`);
    t.match(r.stderr, message, `${what}: named with its mode and the fix`);
    narrow();
  };
  const q = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The run dir's first: a start refused at the store releases the marker (nothing of ours was announced).
  await refuses('a 0755 run dir', () => fs.chmodSync(runDir, 0o755), () => fs.chmodSync(runDir, 0o700),
    new RegExp(`^blockspeaker: ${q(runDir)} lets others read or change it: its mode 0755 \\(drwxr-xr-x\\) gives its group r-x and others r-x; .*Fix \\(as root\\): chmod 700 ${q(runDir)}$`, 'm'));
  const m = path.join(runDir, marker!);
  await refuses('a 0644 marker in the run dir', () => fs.chmodSync(m, 0o644), () => fs.chmodSync(m, 0o600),
    new RegExp(`^blockspeaker: ${q(m)}, in ${q(runDir)}, lets others read or change it: its mode 0644 \\(-rw-r--r--\\) .*Fix \\(as root\\): chmod 600 ${q(m)}$`, 'm'));
  const log = path.join(store, 'log');
  await refuses('a 0644 file in the store', () => fs.chmodSync(log, 0o644), () => fs.chmodSync(log, 0o600),
    new RegExp(`"err":"file:${q(store)}: ${q(log)}, in ${q(store)}, lets others read or change it: its mode 0644 \\(-rw-r--r--\\) gives its group r-- and others r--; .*Fix \\(as root\\): chmod 600 ${q(log)}","msg":"cannot start"`));
  await refuses('a 0755 store folder', () => fs.chmodSync(store, 0o755), () => fs.chmodSync(store, 0o700),
    new RegExp(`"err":"file:${q(store)}: ${q(store)} lets others read or change it: its mode 0755 \\(drwxr-xr-x\\) gives its group r-x and others r-x; .*Fix \\(as root\\): chmod 700 ${q(store)}","msg":"cannot start"`));

  const again = await runDaemon(t, file, runDir);
  t.ok(again.started, 'with the modes back it starts again');
  modesOk(t, store, 'the store after all that');
  modesOk(t, runDir, 'the run dir after all that');
});
