// The platform module's decisions, Linux and Windows, the Windows ones through the Windows double.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../../src/config/config.ts';
import { icaclsArgs, linuxPlatform, realDeps, SID_ADMINISTRATORS, SID_SYSTEM } from '../../src/platform/platform.ts';
import { defaultPaths, socketEndpoint } from '../../src/platform/paths.ts';
import { netIpcPath } from '../ipc/net-ipc-path.ts';
import { markerSubject, RunMarker, RunMarkerError } from '../../src/platform/runmarker.ts';
import { listenError } from '../../src/ipc/server.ts';
import { IpcClient } from '../../src/ipc/client.ts';
import { windowsDouble } from './windows-double.ts';

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-plat-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('default paths and pipe names', async (t) => {
  t.match(defaultPaths('win32'), { store: 'C:\\ProgramData\\blockspeaker', ipcPath: '\\\\.\\pipe\\blockspeaker', runDir: 'C:\\ProgramData\\blockspeaker\\run' });
  t.match(defaultPaths('linux'), { store: '/var/lib/blockspeaker', ipcPath: '/run/blockspeaker.sock', runDir: '/run/blockspeaker' });
  t.equal(socketEndpoint('/run/blockspeaker.sock', 'win32'), '\\\\.\\pipe\\run-blockspeaker.sock');
  t.equal(netIpcPath('\\\\.\\pipe\\blockspeaker', 'win32'), 'blockspeaker');
  t.equal(windowsDouble().platform.socketEndpoint('/x/y'), '\\\\.\\pipe\\x-y');
});

t.test('node name: config, else NODENAME, else NODE_NAME, else the lower-cased host name', async (t) => {
  const win = (env: Record<string, string>) => windowsDouble({ hostname: 'WIN-NODE-7', env }).platform;
  t.match(parseConfig('', 'x', win({})).node, { name: 'win-node-7', os: 'windows' }, 'Windows host names are upper case; Kubernetes names are not');
  t.equal(parseConfig('', 'x', win({ NODE_NAME: 'from-node-name' })).node.name, 'from-node-name');
  t.equal(parseConfig('', 'x', win({ NODENAME: 'from-nodename', NODE_NAME: 'other' })).node.name, 'from-nodename', 'NODENAME first (Calico)');
  t.equal(parseConfig('node: { name: cfg-name }', 'x', win({ NODENAME: 'env' })).node.name, 'cfg-name', 'the config wins');
  const lin = linuxPlatform({ ...realDeps(), hostname: () => 'Mixed-Case', env: {} });
  t.match(parseConfig('', 'x', lin).node, { name: 'mixed-case', os: 'linux' });
});

t.test('stop controls: Windows has no SIGTERM; Ctrl+C, Ctrl+Break and console close are restart-stops', async (t) => {
  const w = windowsDouble().platform;
  const sigs = Object.fromEntries(w.controls.map((c) => [c.signal, c.action]));
  t.same(sigs, { SIGINT: 'restart', SIGBREAK: 'restart', SIGHUP: 'restart' });
  t.notOk('SIGTERM' in sigs);
  const l = Object.fromEntries(linuxPlatform().controls.map((c) => [c.signal, c.action]));
  t.same(l, { SIGTERM: 'restart', SIGINT: 'withdraw', SIGHUP: 'reload' });
});

t.test('state directories: Linux makes them 0700 (parents 0755) and checks them; the Windows fallback command is icacls', async (t) => {
  t.same(icaclsArgs('C:\\ProgramData\\blockspeaker'), ['C:\\ProgramData\\blockspeaker', '/inheritance:r', '/grant:r', `*${SID_SYSTEM}:(OI)(CI)F`, `*${SID_ADMINISTRATORS}:(OI)(CI)F`]);
  const dir = tmpDir(t);
  const linux = linuxPlatform();
  t.match(await linux.prepareDir(path.join(dir, 'a', 'b')), { created: path.join(dir, 'a'), enforced: true, what: /created by mkdir with mode 0755, .*b 0700;/ });
  t.equal(fs.statSync(path.join(dir, 'a', 'b')).mode & 0o077, 0, 'nobody else may enter the store');
  t.match(await linux.prepareDir(path.join(dir, 'a', 'b')), { created: undefined, enforced: true, what: /existing directory checked/ }, 'an existing directory is checked (test/platform/posix-access.test.ts)');
  await t.rejects(linux.prepareDir(path.join(dir, 'c'), { create: false }), { name: 'DirAclError', reason: 'read' });
  t.notOk(fs.existsSync(path.join(dir, 'c')), 'create: false makes nothing');
});

t.test('a store directory created under the double is made admin-only through the platform; an existing one is checked', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const reports: string[] = [];
  const { openFileStore } = await import('../../src/store/file.ts');
  const s = await openFileStore(path.join(dir, 'state'), { platform: w.platform, onAccess: (r) => reports.push(r.what) });
  await s.close();
  t.same(w.createdDirs.map((x) => x.dir), [path.join(dir, 'state')]);
  t.equal(w.spawned.length, 0, 'no icacls: the DACL came with CreateDirectoryW');
  t.match(reports, [/created with the DACL .* in one call \(CreateDirectoryW\)/]);
  const s2 = await openFileStore(path.join(dir, 'state'), { platform: w.platform, onAccess: (r) => reports.push(r.what) });
  await s2.close();
  t.equal(w.createdDirs.length, 1, 'an existing directory is not made again');
  t.match(reports[1], /existing directory checked/);
  const s3 = await openFileStore(path.join(dir, 'ProgramData', 'blockspeaker'), { platform: w.platform });
  await s3.close();
  t.same(w.createdDirs.slice(1).map((x) => x.dir), [path.join(dir, 'ProgramData'), path.join(dir, 'ProgramData', 'blockspeaker')], 'every missing component, top down');
});

t.test('run marker: keyed by the store, records the boot, refuses a live daemon on the same store', async (t) => {
  const dir = tmpDir(t);
  let uptime = 5000;
  let alive = false;
  const w = windowsDouble({ uptime: () => uptime, processAlive: () => alive, now: () => 1_800_000_000_000 });
  const p = w.platform;
  const subject = markerSubject('/srv/state-a', 'node-a', 'x.yaml');
  const m = new RunMarker(dir, 'node-a', subject, p);
  t.not(m.path, new RunMarker(dir, 'node-a', markerSubject('/srv/state-b', 'node-a', 'x.yaml'), p).path, 'same node name, other store: another marker');
  t.not(m.path, new RunMarker(dir, 'node-b', markerSubject('/srv/state-a', 'node-b', 'x.yaml'), p).path, 'other node sharing the store: another marker');
  t.same(m.claim(), { restarted: false }, 'first start: fresh');
  t.equal(m.read()?.boot, p.bootId());
  // the process died without a full stop (crash, or a restart-stop): same boot -> restarting speaker
  fs.writeFileSync(m.path, JSON.stringify({ pid: 999_999, boot: p.bootId(), guards: subject }));
  t.match(m.claim(), { restarted: true, note: /did not stop for good/ });
  // the machine rebooted since: the marker is ignored (routes are gone, peers flushed us)
  fs.writeFileSync(m.path, JSON.stringify({ pid: 999_999, boot: p.bootId(), guards: subject }));
  uptime = 30; // booted 30 s ago: a different boot time
  t.match(m.claim(), { restarted: false, note: /earlier boot/ });
  // a live daemon on the same store: refused, and the marker is not touched
  fs.writeFileSync(m.path, JSON.stringify({ pid: 4242, boot: p.bootId(), guards: subject }));
  const before = fs.readFileSync(m.path, 'utf8');
  alive = true;
  t.throws(() => m.claim(), RunMarkerError);
  t.throws(() => m.claim(), { message: /another blockspeaker daemon \(pid 4242\) is running as node-a on \/srv\/state-a \(marker .*\)/ });
  t.equal(fs.readFileSync(m.path, 'utf8'), before, 'nothing written');
  // an old plain-pid marker still reads
  fs.writeFileSync(m.path, '123\n');
  alive = false;
  t.match(m.claim(), { restarted: true });
  m.release();
  t.notOk(fs.existsSync(m.path));
  t.same(w.refused, [], 'the marker is replaced only while closed');
  t.equal(markerSubject('etcd://h:2379', 'n1', 'x'), 'etcd://h:2379#n1', 'etcd is shared by nodes: keyed per node');
});

t.test('boot identity: Windows boot times within a minute are the same boot', async (t) => {
  const at = (uptime: number, now: number) => windowsDouble({ uptime: () => uptime, now: () => now }).platform.bootId();
  const p = windowsDouble().platform;
  t.ok(p.sameBoot(at(100, 1_000_000), at(130, 1_030_500)), 'uptime and clock drift a little');
  t.notOk(p.sameBoot(at(100, 1_000_000), at(10, 1_100_000)));
  const l = linuxPlatform({ ...realDeps(), readBootId: () => 'b1' });
  t.equal(l.bootId(), 'b1');
  t.notOk(l.sameBoot('b1', 'b2'));
});

t.test('messages say what is enforced: a taken pipe name, a denied pipe, a denied socket', async (t) => {
  t.match(listenError('\\\\.\\pipe\\blockspeaker', Object.assign(new Error('x'), { code: 'EADDRINUSE' })).message,
    /\\\\\.\\pipe\\blockspeaker is already owned by another process .*refusing to start/);
  t.match(windowsDouble().platform.ipcAccess, /DACL D:P\(A;;GA;;;SY\)\(A;;GA;;;BA\): SYSTEM and Administrators only/);
  t.match(linuxPlatform().ipcAccess, /0600/);
  const describe = (p: string) => (new IpcClient(p) as unknown as { describe(e: NodeJS.ErrnoException): Error }).describe(Object.assign(new Error('denied'), { code: 'EACCES' })).message;
  t.match(describe('\\\\.\\pipe\\blockspeaker'), /its DACL lets only SYSTEM and Administrators open it/);
  t.notMatch(describe('\\\\.\\pipe\\blockspeaker'), /0600/, 'no POSIX mode claimed for a pipe');
  t.match(describe('/run/blockspeaker.sock'), /mode 0600/);
});

t.test('process spawning: the real spawner', async (t) => {
  const r = await linuxPlatform().spawn('sh', ['-c', 'printf "é\\n"; echo oops >&2; exit 3']);
  t.same(r, { code: 3, stdout: 'é\n', stderr: 'oops\n' });
  const missing = await linuxPlatform().spawn('/nonexistent/icacls', []);
  t.equal(missing.code, null, 'a command that cannot start is a result, not a throw');
  t.match(missing.stderr, /ENOENT/);
});
