// The packaged daemon's state directories under wine: `blockspeaker.exe run` creates its store directory (and every
// missing parent) with CreateDirectoryW and the admin-only descriptor, and a separate program reading the owner and
// DACL back gets what the daemon logged; an existing store directory others may read refuses the start, naming the
// path, the entry and the fix, and nothing is written into it. A config in a folder others may read (an ordinary
// 0755 one) starts; one others may change (0777), or that someone else owns, refuses naming the entry or the owner.
//
// What wine does here (wine 8 from Debian, found with these executables): it honours the descriptor given to
// CreateDirectoryW by turning it into the directory's Unix mode (SYSTEM and Administrators only -> 0740), and reads a
// DACL back from the mode: the owner is the user wine runs as (S-1-5-21-0-0-0-1000, also the token user), entries
// for SYSTEM and that user, plus Everyone (WD) read (0x1200a9) when the mode lets others read, and Everyone change
// (0x1301ff: add, delete and replace files) when it lets others write; the group bits are not read back. A folder
// another Unix uid owns reads back with the owner AN (Anonymous). So under wine "only SYSTEM, Administrators and the
// daemon's own account" holds for what we create, a 0755 directory is one Everyone may read (refused for the store,
// fine for the config's folder), and a 0777 one is one Everyone may change (refused for both).
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, zPath } from '../../packaging/windows/wine.ts';
import { dirAccessProblem, dirRefusal, fixCommand } from '../../src/platform/dir-acl.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { readAcls } from './acl-reader.ts';
import { exe, parseLog, windowsReady, untilDaemon } from './harness.ts';


if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-diracl-'));
  const top = `bs-diracl-${process.pid}`;
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), top), { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), `${top}-wide`), { recursive: true, force: true });
  });
  // Owners and DACLs read back by a program of its own (not the code under test).
  const read = (...dirs: string[]) => readAcls(dir, ...dirs);
  /** A node config in `cfgDir` (a Linux directory, seen through Z:) with its store at `store`. */
  const config = (cfgDir: string, store: string, statusPort: number) => {
    const file = path.join(cfgDir, `node-${statusPort}.yaml`);
    fs.writeFileSync(file, `node: { name: win-diracl-1, os: windows }
ipam:
  store: ${store}
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '\\\\.\\pipe\\bs-diracl-${statusPort}' }
`);
    return zPath(file);
  };

  t.test('blockspeaker.exe run creates its store directories admin-only, and an independent reader gets that back', async (t) => {
    const store = `C:\\${top}\\state\\store`;
    const port = await freePort();
    const d = startWine(exe.cli, ['run', '-c', config(dir, store, port)], { timeoutMs: 400_000 });
    t.teardown(() => d.kill());
    const lines = await untilDaemon('the daemon to start', 180_000, d, () => {
      const l = parseLog(d.output().stderr);
      return (l.some((x) => x.msg === 'started' || x.msg === 'cannot start') || /^blockspeaker: /m.test(d.output().stderr)) && l;
    });
    t.ok(lines.some((l) => l.msg === 'started'), `started: ${d.output().stderr}`);
    const back = await read(`C:\\${top}`, store);
    t.ok(back.user, 'the reader knows its account');
    for (const p of [`C:\\${top}`, store]) {
      t.match(back[p], /^O:/, `${p} read back: ${back[p]}`);
      t.equal(dirAccessProblem(back[p]!, back.user), undefined, `${p}: SYSTEM, Administrators and the daemon's account only`);
    }
    // Wine maps the DACL onto the owner and "other" bits (it leaves the group's read bit: 0740), and Everyone is "other".
    t.equal(fs.statSync(path.join(driveC(), top)).mode & 0o007, 0, 'on the Unix side: no access for others (wine made the mode from the descriptor)');
    const said = lines.find((l) => String(l.msg).startsWith(`C:\\${top}: created with the DACL`));
    t.equal(said?.msg, `C:\\${top}: created with the DACL D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA) in one call (CreateDirectoryW), ${store} reads back ${back[store]} (read and change: SYSTEM, Administrators and this daemon's account ${back.user} only)`, 'what the daemon says is what the directory holds');
    t.equal(said?.level, 30);
    const cfgSaid = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`${zPath(dir)}: existing directory checked`));
    t.ok(cfgSaid, 'the config directory was checked too');
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace in the daemon log');
  });

  t.test('an existing store directory Everyone may read: the start is refused, naming it, the entry and the fix', async (t) => {
    const wide = path.join(driveC(), `${top}-wide`);
    fs.mkdirSync(wide, { mode: 0o755 });
    fs.chmodSync(wide, 0o755);
    const store = `C:\\${top}-wide`;
    const port = await freePort();
    const r = await runWine(exe.cli, ['run', '-c', config(dir, store, port)], { timeoutMs: 300_000 });
    t.not(r.code, 0, 'non-zero exit');
    const back = await read(store);
    t.match(back[store], /\(A;OICI;0x1200a9;;;WD\)/, `wine reads Everyone's access back: ${back[store]}`);
    const failed = parseLog(r.stderr).find((l) => l.msg === 'cannot start');
    t.equal(failed?.err, `file:${store}: ${store} lets others read or change it: ${dirAccessProblem(back[store]!, back.user)} (read back: ${back[store]}); it must be readable and changeable by SYSTEM, Administrators and this daemon's account ${back.user} only; refusing to use it. Fix (as Administrator): ${fixCommand(store)}`, r.stderr);
    t.equal(dirAccessProblem(back[store]!, back.user), 'entry (A;OICI;0x1200a9;;;WD) grants 0x1200a9 (read) to WD (Everyone)', 'refused for the read entry alone');
    t.same(fs.readdirSync(wide), [], 'nothing written into it');
    t.equal(fs.statSync(wide).mode & 0o777, 0o755, 'its permissions are left as they were');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('a config in a folder Everyone may read but not change (0755): the daemon starts, and says what it checked', async (t) => {
    const cfgDir = path.join(dir, 'readable-config');
    fs.mkdirSync(cfgDir);
    fs.chmodSync(cfgDir, 0o755);
    const port = await freePort();
    const file = config(cfgDir, `C:\\${top}\\readable\\store`, port);
    fs.chmodSync(path.join(cfgDir, `node-${port}.yaml`), 0o644);
    const d = startWine(exe.cli, ['run', '-c', file], { timeoutMs: 400_000 });
    t.teardown(() => d.kill());
    const lines = await untilDaemon('the daemon to start', 180_000, d, () => {
      const l = parseLog(d.output().stderr);
      return (l.some((x) => x.msg === 'started' || x.msg === 'cannot start') || /^blockspeaker: /m.test(d.output().stderr)) && l;
    });
    t.ok(lines.some((l) => l.msg === 'started'), `started: ${d.output().stderr}`);
    const back = await read(zPath(cfgDir));
    t.match(back[zPath(cfgDir)], /\(A;OICI;0x1200a9;;;WD\)/, `wine reads Everyone's read access back: ${back[zPath(cfgDir)]}`);
    const said = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`${zPath(cfgDir)}: existing directory checked`));
    t.equal(said?.msg, `${zPath(cfgDir)}: existing directory checked, ${back[zPath(cfgDir)]} read back (change: SYSTEM, Administrators and this daemon's account ${back.user} only; others may read)`);
    t.ok(lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith(`${file}: existing file checked`)), 'the config file (Everyone may read it) passed too');
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('a config in a folder Everyone may change (0777): refused before anything is written, naming the entry', async (t) => {
    const cfgDir = path.join(dir, 'wide-config');
    fs.mkdirSync(cfgDir);
    fs.chmodSync(cfgDir, 0o777);
    const port = await freePort();
    const store = `C:\\${top}\\never`;
    const file = config(cfgDir, store, port);
    const r = await runWine(exe.cli, ['run', '-c', file], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    const back = await read(zPath(cfgDir));
    t.match(back[zPath(cfgDir)], /\(A;OICI;0x1301ff;;;WD\)/, `wine reads Everyone's change access back: ${back[zPath(cfgDir)]}`);
    const problem = dirAccessProblem(back[zPath(cfgDir)]!, back.user, false);
    t.equal(problem, 'entry (A;OICI;0x1301ff;;;WD) grants 0x1301ff (change) to WD (Everyone)');
    t.match(r.stderr, `blockspeaker: config ${file}: ${dirRefusal(zPath(cfgDir), problem!, back[zPath(cfgDir)]!, back.user, false, false)}`);
    t.match(r.stderr, /it must be changeable by SYSTEM, Administrators and this daemon's account S-1-5-21-\S+ only \(others may read it\); refusing to use it\. Fix \(as Administrator\): powershell -NoProfile -Command/);
    t.notOk(fs.existsSync(path.join(driveC(), top, 'never')), 'no store was created');
    t.equal(fs.statSync(cfgDir).mode & 0o777, 0o777, 'its permissions are left as they were');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('a config in a folder another account owns: refused naming the owner', { skip: process.geteuid?.() !== 0 && 'chown needs root' }, async (t) => {
    const cfgDir = path.join(dir, 'other-owner');
    fs.mkdirSync(cfgDir);
    fs.chmodSync(cfgDir, 0o755);
    const port = await freePort();
    const file = config(cfgDir, `C:\\${top}\\never2`, port);
    fs.chownSync(cfgDir, 65534, 65534);
    const r = await runWine(exe.cli, ['run', '-c', file], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    const back = await read(zPath(cfgDir));
    t.match(back[zPath(cfgDir)], /^O:AN/, `wine reads another uid's folder back as owned by Anonymous: ${back[zPath(cfgDir)]}`);
    t.match(r.stderr, `blockspeaker: config ${file}: ${zPath(cfgDir)} lets others change it: its owner is AN (Anonymous) (an owner may rewrite the DACL)`);
    t.notOk(fs.existsSync(path.join(driveC(), top, 'never2')), 'no store was created');
  });
}
