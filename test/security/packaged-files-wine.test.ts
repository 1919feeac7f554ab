// What the packaged daemon loads, under wine with the packaged blockspeaker.exe: `run` checks what it loads from beside itself
// (koffi.node, fs-native-extensions.node, etcd's .proto files) against the SHA-256s its build compiled in, before it
// loads any of them, then who may change the executable, each file and their folder. An install copied as built
// starts; a changed addon, an addon Everyone may change, or a folder Everyone may change refuses the start naming it.
// (Wine reads a DACL back from the Unix mode: "other" bits become an Everyone entry; see test/windows/file-acl.)
// Needs wine; with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runWine, startWine, windowsDist, zPath } from '../../packaging/windows/wine.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, parseLog, until, windowsReady } from '../windows/harness.ts';

if (windowsReady(t)) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-sec-packaged-wine-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));

  /** A copy of the install (the exe hard-linked, never changed; the rest copied) and a config beside it. */
  const copy = async (name: string) => {
    const dir = path.join(root, name);
    fs.mkdirSync(path.join(dir, 'proto'), { recursive: true, mode: 0o755 });
    fs.chmodSync(dir, 0o755);
    fs.linkSync(exe.cli, path.join(dir, 'blockspeaker.exe'));
    for (const f of ['koffi.node', 'fs-native-extensions.node', ...fs.readdirSync(path.join(windowsDist, 'proto')).map((p) => `proto/${p}`)]) {
      fs.copyFileSync(path.join(windowsDist, f), path.join(dir, f));
      fs.chmodSync(path.join(dir, f), 0o644);
    }
    const cfgDir = path.join(root, `${name}-config`);
    fs.mkdirSync(cfgDir, { mode: 0o700 });
    const port = await freePort();
    const config = path.join(cfgDir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-packaged, os: windows }
ipam:
  store: '${zPath(path.join(cfgDir, 'store'))}'
  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: '\\\\.\\pipe\\bs-packaged-${port}' }
`);
    return { dir, exe: path.join(dir, 'blockspeaker.exe'), config: zPath(config), cfgDir };
  };

  /** `run` on a broken install: it must exit non-zero with one line saying why, and write no store. */
  const refused = async (t: Test, c: Awaited<ReturnType<typeof copy>>, want: RegExp) => {
    const r = await runWine(c.exe, ['run', '-c', c.config], { timeoutMs: 300_000 });
    t.not(r.code, 0, 'non-zero exit');
    // A start refused before the daemon exists: one line from main, after the "starting" log line.
    const said = r.stderr.split('\n').find((l) => l.startsWith('blockspeaker: '));
    t.match(said, want, r.stderr);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.notOk(fs.existsSync(path.join(c.cfgDir, 'store')), 'nothing written: the check comes first');
  };

  t.test('an install as built starts, and says what it checked', async (t) => {
    const c = await copy('clean');
    const d = startWine(c.exe, ['run', '-c', c.config], { timeoutMs: 300_000 });
    t.teardown(() => d.kill());
    const lines = await until('the daemon to start', 180_000, () => {
      const l = parseLog(d.output().stderr);
      return (l.some((x) => x.msg === 'started' || x.msg === 'cannot start')) && l;
    });
    t.notOk(lines.find((l) => l.msg === 'cannot start'), JSON.stringify(lines.find((l) => l.msg === 'cannot start')));
    t.match(lines.find((l) => String(l.msg).startsWith('the executable and the files it loads')), { files: 6, dir: zPath(c.dir) },
      'the exe, two addons and three .proto files, as built and admin-only');
  });

  t.test('a changed addon is refused before it is loaded, naming it', async (t) => {
    const c = await copy('changed');
    fs.appendFileSync(path.join(c.dir, 'fs-native-extensions.node'), Buffer.from([0]));
    await refused(t, c, /fs-native-extensions\.node is not the file this executable was built with \(SHA-256 [0-9a-f]{16}…, built with [0-9a-f]{16}…\): someone changed it/);
  });

  t.test('an addon Everyone may change is refused, naming it and the entry', async (t) => {
    const c = await copy('writable');
    fs.chmodSync(path.join(c.dir, 'koffi.node'), 0o666);
    await refused(t, c, /koffi\.node.*(WD|Everyone)/);
  });

  t.test('a folder Everyone may change (put another koffi.node in) is refused, naming it', async (t) => {
    const c = await copy('folder');
    fs.chmodSync(c.dir, 0o777);
    await refused(t, c, new RegExp(`${zPath(c.dir).replace(/[\\.]/g, '\\$&')}.*(WD|Everyone)`));
  });
}
