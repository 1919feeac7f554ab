// Installing over a plugin executable that may be running (src/platform/replace-exe.ts): on the Windows double, a
// running image can be renamed but not replaced or removed, so the old one is moved aside, the new one takes the
// name, and the leftover goes once nothing runs it; on Linux a rename over the running file is all it takes.
import t from 'tap';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { linuxPlatform } from '../../src/platform/platform.ts';
import { removeLeftovers, replaceExecutable, sameBytes } from '../../src/platform/replace-exe.ts';
import { windowsDouble } from './windows-double.ts';

const root = fs.mkdtempSync(join(tmpdir(), `bs-replace-exe-${process.pid}-`));
t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));

let n = 0;
/** A fresh folder with a "package" holding `v` as the plugin's bytes, and an empty bin folder. */
function setup(v: string) {
  const dir = join(root, `case-${++n}`);
  const pkg = join(dir, 'pkg');
  const bin = join(dir, 'bin');
  fs.mkdirSync(pkg, { recursive: true });
  fs.mkdirSync(bin);
  const src = join(pkg, 'blockspeaker-cni.exe');
  fs.writeFileSync(src, v);
  return { pkg, bin, src, target: join(bin, 'blockspeaker.exe'), set: (x: string) => fs.writeFileSync(src, x) };
}

t.test('Windows double: the double enforces the running-image rules', async (t) => {
  const w = windowsDouble();
  const { target, src } = setup('v1');
  fs.copyFileSync(src, target);
  const run = w.execute(target);
  t.throws(() => w.platform.files.remove(target), { code: 'EPERM' }, 'a running executable cannot be deleted');
  t.throws(() => w.platform.files.open(target, 'w'), { code: 'EBUSY' }, 'nor opened for writing');
  fs.writeFileSync(`${target}.new`, 'v2');
  t.throws(() => w.platform.files.rename(`${target}.new`, target), { code: 'EPERM' }, 'nor replaced by a rename');
  const fd = w.platform.files.open(target, 'r');
  w.platform.files.close(fd);
  t.pass('but read');
  w.platform.files.rename(target, `${target}.moved`);
  t.equal(run.path(), `${target}.moved`, 'and renamed: the process runs it under its new name');
  t.throws(() => w.platform.files.remove(`${target}.moved`), { code: 'EPERM' }, 'still running there');
  w.platform.files.rename(`${target}.new`, target);
  t.equal(fs.readFileSync(target, 'utf8'), 'v2', 'the name is free for the new one');
  run.exit();
  w.platform.files.remove(`${target}.moved`);
  t.notOk(fs.existsSync(`${target}.moved`), 'gone once the process exited');
});

t.test('Windows double: first install, then unchanged, then a plain replace while nothing runs it', async (t) => {
  const w = windowsDouble();
  const { src, target, bin, set } = setup('v1');
  const a = replaceExecutable(w.platform, src, target);
  t.same(a, { target, outcome: 'installed', removed: [], kept: [] });
  t.equal(fs.readFileSync(target, 'utf8'), 'v1');
  const ino = fs.statSync(target).ino;
  const b = replaceExecutable(w.platform, src, target);
  t.same(b, { target, outcome: 'unchanged', removed: [], kept: [] }, 'same bytes: not touched');
  t.equal(fs.statSync(target).ino, ino, 'the same file');
  set('v2');
  const c = replaceExecutable(w.platform, src, target);
  t.same(c, { target, outcome: 'replaced', removed: [], kept: [] }, 'renamed over: nothing moved aside');
  t.equal(fs.readFileSync(target, 'utf8'), 'v2');
  t.same(fs.readdirSync(bin), ['blockspeaker.exe'], 'no temporary file left');
  t.same(w.openPaths(), [], 'no handle left open');
});

t.test('Windows double: the old one running is moved aside, the new one takes the name, the leftover goes once free', async (t) => {
  const w = windowsDouble();
  const { src, target, bin, set } = setup('v1');
  replaceExecutable(w.platform, src, target);
  const cni = w.execute(target); // a CNI ADD running the old plugin
  set('v2');
  const r = replaceExecutable(w.platform, src, target, { now: () => 1700000000000 });
  const aside = `${target}.old-${process.pid}-1700000000000`;
  t.same(r, { target, outcome: 'replaced', movedAside: aside, removed: [], kept: [{ path: aside, code: 'EPERM' }] }, 'moved aside, and kept: it still runs');
  t.equal(fs.readFileSync(target, 'utf8'), 'v2', 'the new plugin under the name');
  t.equal(cni.path(), aside, 'the running process keeps its image, now under the aside name');
  t.equal(fs.readFileSync(aside, 'utf8'), 'v1');
  t.ok(w.refused.some((x) => x.includes('target is a running executable')), 'the rename over it was refused first');

  // Another install while it still runs: unchanged, the leftover is kept again.
  const again = replaceExecutable(w.platform, src, target);
  t.same(again, { target, outcome: 'unchanged', removed: [], kept: [{ path: aside, code: 'EPERM' }] });

  cni.exit(); // the CNI call is over
  const later = replaceExecutable(w.platform, src, target);
  t.same(later, { target, outcome: 'unchanged', removed: [aside], kept: [] }, 'the next install removes the leftover');
  t.same(fs.readdirSync(bin), ['blockspeaker.exe']);
});

t.test('Windows double: leftovers of other names are not touched; names compare case-insensitively', async (t) => {
  const w = windowsDouble();
  const { bin, target } = setup('v1');
  for (const f of ['blockspeaker.exe', 'BLOCKSPEAKER.EXE.old-1-2', 'blockspeaker-cni.exe.old-1-2', 'blockspeaker.exe.new-77', 'other.exe']) fs.writeFileSync(join(bin, f), 'x');
  const r = removeLeftovers(w.platform, target);
  t.same(r, { removed: [join(bin, 'BLOCKSPEAKER.EXE.old-1-2')], kept: [] });
  t.same(fs.readdirSync(bin).sort(), ['blockspeaker-cni.exe.old-1-2', 'blockspeaker.exe', 'blockspeaker.exe.new-77', 'other.exe']);
});

t.test('Windows double: held by a handle without FILE_SHARE_DELETE it cannot even be moved aside: refused, nothing changed', async (t) => {
  const w = windowsDouble();
  const { src, target, bin, set } = setup('v1');
  replaceExecutable(w.platform, src, target);
  const fd = w.platform.files.open(target, 'r'); // a scanner holding it
  set('v2');
  t.throws(() => replaceExecutable(w.platform, src, target, { tries: 3 }), { message: /cannot replace .*blockspeaker\.exe: it is in use \(EPERM\) and cannot be moved aside either/ });
  t.equal(fs.readFileSync(target, 'utf8'), 'v1', 'the old one is intact under its name');
  t.same(fs.readdirSync(bin), ['blockspeaker.exe'], 'no temporary file left');
  w.platform.files.close(fd);
  t.equal(replaceExecutable(w.platform, src, target).outcome, 'replaced', 'once the handle is closed it goes through');
});

t.test('Linux: a running file is replaced by a plain rename; nothing is moved aside', async (t) => {
  const p = linuxPlatform();
  const { src, target, bin, set } = setup('#!/bin/sh\nsleep 30\n');
  t.equal(replaceExecutable(p, src, target, { mode: 0o755 }).outcome, 'installed');
  t.equal(fs.statSync(target).mode & 0o777, 0o755, 'the mode asked for, whatever the umask');
  const { spawn } = await import('node:child_process');
  const child = spawn(target, [], { stdio: 'ignore' });
  t.teardown(() => child.kill('SIGKILL'));
  await new Promise((r) => child.once('spawn', r));
  const before = fs.statSync(target).ino;
  set('#!/bin/sh\nexit 0\n');
  const r = replaceExecutable(p, src, target, { mode: 0o755 });
  t.same(r, { target, outcome: 'replaced', removed: [], kept: [] }, 'replaced in one rename while it runs');
  t.not(fs.statSync(target).ino, before, 'a new file under the name (the running one keeps its inode)');
  t.equal(child.exitCode, null, 'the running one still runs');
  t.same(fs.readdirSync(bin), ['blockspeaker.exe']);
  t.ok(sameBytes(p, src, target));
  t.equal(replaceExecutable(p, { bytes: Buffer.from('#!/bin/sh\nexit 0\n') }, target, { mode: 0o755 }).outcome, 'unchanged', 'bytes in memory compare the same way');
});
