// The packaged daemon's config file and the secret files it names, under wine: `blockspeaker.exe run` reads each
// one's owner and DACL back through the Win32 calls, and its folder's, before it writes anything. A config file others
// may change, an etcd password file others may read, or one in a folder others may change, refuses the start naming
// the file (and the config field) or the folder, the entry in SDDL and the fix; a password file only its owner may
// read passes, and so does a config others may read. (Wine reads a DACL back from the Unix mode, see
// ./dir-acl.test.ts: "other" bits become an Everyone entry.) Wine does not enforce DACLs: the check's logic is
// covered through the Windows double in test/platform/file-acl.test.ts.
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runWine, startWine, zPath } from '../../packaging/windows/wine.ts';
import { fixCommand } from '../../src/platform/dir-acl.ts';
import { fixFileCommand } from '../../src/platform/file-acl.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, parseLog, windowsReady, untilDaemon } from './harness.ts';

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-windows-fileacl-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A node config (etcd store with a password file, which is never reached) in its own admin-only directory. */
  const config = async (name: string, mode: number, pw?: string) => {
    const cfgDir = path.join(dir, name);
    fs.mkdirSync(cfgDir, { mode: 0o700 });
    const port = await freePort();
    const file = path.join(cfgDir, 'node.yaml');
    const etcd = pw ? `\n  etcd: { username: bs, password: { file: '${zPath(pw)}' }, allowInsecure: true }` : '';
    fs.writeFileSync(file, `node: { name: win-fileacl, os: windows }
ipam:
  store: ${pw ? 'etcd://127.0.0.1:1' : `'${zPath(path.join(cfgDir, 'store'))}'`}${etcd}
  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: '\\\\.\\pipe\\bs-fileacl-${port}' }
`);
    fs.chmodSync(file, mode);
    return { cfgDir, file: zPath(file) };
  };

  t.test('a config file Everyone may change: refused before anything is written', async (t) => {
    const c = await config('wide', 0o666);
    const r = await runWine(exe.cli, ['run', '-c', c.file], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    t.match(r.stderr, `blockspeaker: config ${c.file}: ${c.file} lets others change it: entry (`);
    t.match(r.stderr, /grants 0x1301ff \(change\) to WD \(Everyone\)/);
    t.match(r.stderr, `refusing to use it. Fix (as Administrator): ${fixFileCommand(c.file)}`);
    t.same(fs.readdirSync(c.cfgDir), ['node.yaml'], 'no store, nothing written');
    t.equal(fs.statSync(path.join(c.cfgDir, 'node.yaml')).mode & 0o777, 0o666, 'its permissions are left as they were');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('an etcd password file Everyone may read: refused naming the field; readable by its owner only: passes', async (t) => {
    const pw = path.join(dir, 'etcd-password');
    fs.writeFileSync(pw, 'not-this-one\n');
    fs.chmodSync(pw, 0o644);
    const c = await config('secret', 0o644, pw);
    const r = await runWine(exe.cli, ['run', '-c', c.file], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    t.match(r.stderr, `blockspeaker: config ${c.file}: ${zPath(pw)} (ipam.etcd.password.file) holds a secret and lets others read or change it: entry (`);
    t.match(r.stderr, /grants \S+ \(read\) to WD \(Everyone\)/);
    t.match(r.stderr, `Fix (as Administrator): ${fixFileCommand(zPath(pw))}`);
    t.notMatch(r.stderr, /not-this-one/, 'the password is in no message');

    fs.chmodSync(pw, 0o600);
    const d = startWine(exe.cli, ['run', '-c', c.file], { timeoutMs: 300_000 });
    t.teardown(() => d.kill());
    const lines = await untilDaemon('the password file to be checked', 180_000, d, () => {
      const l = parseLog(d.output().stderr);
      return (l.some((x) => typeof x.msg === 'string' && x.msg.startsWith(`${zPath(pw)}: existing file checked`)) || /^blockspeaker: /m.test(d.output().stderr)) && l;
    });
    const said = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`${zPath(pw)}: existing file checked`));
    t.match(said?.msg, new RegExp(`read back \\(read and change: SYSTEM, Administrators and this daemon's account S-1-5-21-\\S+ only\\); its folder ${zPath(dir).replace(/\\/g, '\\\\')} reads back \\S+ \\(change: SYSTEM, Administrators and this daemon's account S-1-5-21-\\S+ only; others may read\\)$`), 'the owner-only password file passes, and its folder');
    const cfgSaid = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`${c.file}: existing file checked`));
    t.match(cfgSaid?.msg, /\(A;;0x1200a9;;;WD\) read back \(change: .* only; others may read\)/, 'the config file (0644: Everyone may read it) passes');
    t.notMatch(d.output().stderr, /not-this-one/, 'the password is in no log line');
  });

  t.test('a password file only its owner may read, in a folder Everyone may change: refused naming the folder', async (t) => {
    const secrets = path.join(dir, 'open-secrets');
    fs.mkdirSync(secrets);
    fs.chmodSync(secrets, 0o777);
    const pw = path.join(secrets, 'etcd-password');
    fs.writeFileSync(pw, 'not-this-one\n');
    fs.chmodSync(pw, 0o600);
    const c = await config('secret-folder', 0o644, pw);
    const r = await runWine(exe.cli, ['run', '-c', c.file], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    t.match(r.stderr, `blockspeaker: config ${c.file}: ${zPath(pw)} is in a folder others may change: ${zPath(secrets)} lets others change it: entry (A;OICI;0x1301ff;;;WD) grants 0x1301ff (change) to WD (Everyone)`);
    t.match(r.stderr, `Fix (as Administrator): ${fixCommand(zPath(secrets))}`);
    t.notMatch(r.stderr, /not-this-one/, 'the password is in no message');
    t.same(fs.readdirSync(c.cfgDir), ['node.yaml'], 'nothing written');
  });
}
