// `blockspeaker.exe install-cni` under wine, as the Windows DaemonSet's init container runs it:
//  - into folders that do not exist: each missing folder and parent is created admin-only (an independent reader
//    gets SYSTEM, Administrators and our account back), the plugin goes in under both names with nothing beside it
//    (and runs alone), and the network config list is built from the node config as the daemon writes it;
//  - again while a CNI call runs the old plugin (blockspeaker.exe waiting on a daemon stand-in's answer): the rename
//    over it is refused by Windows rules, so the old file is moved aside and the new one takes the name; the running
//    call completes and exits 0; the leftover is kept while it runs and removed by the next install, which otherwise
//    writes nothing;
//  - an existing folder others may change (0777: wine reads Everyone change back) is used, with a warning and the fix.
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, windowsDist, windowsNode, zPath, type WineChild } from '../../packaging/windows/wine.ts';
import { conflistText } from '../../src/daemon/conflist.ts';
import { dirAccessProblem } from '../../src/platform/dir-acl.ts';
import { readAcls } from './acl-reader.ts';
import { exe, until, windowsReady } from './harness.ts';

/**
 * A daemon on a named pipe (net-ipc framing) that answers each request {ok: true} only once the file `release`
 * exists, printing "request M" and "answered M": a CNI call to it runs until the test lets it finish. It proves
 * itself as the daemon does (src/ipc/proof.ts): a key of its own in C:\ProgramData\blockspeaker\pipe-keys, and on
 * every connection "BSP1", the time, a nonce and their HMAC-SHA256 under it, before anything else.
 */
const STANDIN = `
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const [pipe, release] = process.argv.slice(2);
const keyFile = 'C:\\\\ProgramData\\\\blockspeaker\\\\pipe-keys\\\\' + pipe.slice(9).toLowerCase() + '.key';
const key = crypto.randomBytes(32);
fs.mkdirSync(path.dirname(keyFile), { recursive: true });
fs.writeFileSync(keyFile, key);
function proof() {
  const head = Buffer.alloc(28);
  head.write('BSP1', 0, 'latin1');
  head.writeBigUInt64BE(BigInt(Date.now()), 4);
  crypto.randomBytes(16).copy(head, 12);
  const mac = crypto.createHmac('sha256', key).update('blockspeaker ipc server proof v1\\0').update(head).digest();
  return Buffer.concat([head, mac]);
}
function frame(o) {
  const body = Buffer.from(JSON.stringify(o));
  let size = body.length;
  const tag = [(size & 127) | 128];
  while ((size = Math.floor(size / 128)) > 0) tag.push(size & 127);
  tag.reverse();
  return Buffer.concat([Buffer.from(tag), body]);
}
net.createServer((sock) => {
  sock.write(proof());
  let buf = Buffer.alloc(0);
  let init = false;
  sock.on('error', () => undefined);
  sock.on('data', (c) => {
    buf = Buffer.concat([buf, c]);
    if (!init) {
      if (buf.length < 3) return;
      buf = buf.subarray(3);
      init = true;
    }
    for (;;) {
      let len = 0, i = 0, done = false;
      for (; i < buf.length; i++) {
        const b = buf[i];
        len = len * 128 + (b & 127);
        if (b & 128) { done = true; i++; break; }
      }
      if (!done || buf.length < i + len) return;
      const p = JSON.parse(buf.subarray(i, i + len).toString());
      buf = buf.subarray(i + len);
      if (p.t !== 2) continue;
      console.log('request ' + p.d.m);
      const t = setInterval(() => {
        if (!fs.existsSync(release)) return;
        clearInterval(t);
        sock.write(frame({ t: 3, n: p.n, d: { ok: true, r: {} } }));
        console.log('answered ' + p.d.m);
      }, 100);
    }
  });
}).listen(pipe, () => console.log('listening'));
`;

if (windowsReady(t)) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-install-cni-'));
  const top = `bs-icni-${process.pid}`;
  const running: WineChild[] = [];
  t.teardown(() => {
    for (const c of running) c.kill();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), top), { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), `${top}-wide`), { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), 'ProgramData', 'blockspeaker', 'pipe-keys', `bs-icni-${process.pid}.key`), { force: true });
  });
  const C = `C:\\${top}`;
  const binDir = `${C}\\opt\\cni\\bin`;
  const confDir = `${C}\\etc\\cni\\net.d`;
  const onLinux = (win: string) => path.join(driveC(), ...win.slice(3).split('\\'));
  const pipe = `\\\\.\\pipe\\bs-icni-${process.pid}`;
  const config = path.join(work, 'node.yaml');
  fs.writeFileSync(config, `node: { name: win-icni-1, os: windows }
ipam:
  store: ${C}\\store
  pools:
    - { name: b, cidr: 10.245.0.0/16, natOutgoing: true }
    - { name: a, cidr: 10.244.0.0/16, natOutgoing: false }
dataplane:
  kind: hns
  network: pods
  mode: l2bridge
  cni: { confDir: '${confDir}', serviceCidr: 10.96.0.0/12, nodeSubnet: 10.0.0.0/24 }
ipc: { path: '${pipe}' }
`);
  const conflistFile = `${confDir}\\10-blockspeaker.conflist`;
  const plugin = fs.readFileSync(exe.cni);
  // A "new version" of the package: the same plugin with bytes appended (a PE overlay: it still runs).
  const newer = path.join(work, 'newer');
  fs.mkdirSync(newer);
  const pluginV2 = Buffer.concat([plugin, Buffer.from(`\nblockspeaker install-cni test ${process.pid}\n`)]);
  fs.writeFileSync(path.join(newer, 'blockspeaker-cni.exe'), pluginV2);
  const install = (...extra: string[]) => runWine(exe.cli, ['install-cni', '--bin-dir', binDir, '-c', zPath(config), ...extra], { timeoutMs: 300_000 });
  const version = (file: string) => runWine(file, [], { stdin: '{"cniVersion":"1.0.0"}', env: { CNI_COMMAND: 'VERSION' } });

  t.test('into folders that do not exist: created admin-only, the plugin under both names and alone, the list from -c', async (t) => {
    const r = await install();
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '', 'no warning');
    const lines = r.stdout.trim().split(/\r?\n/);
    t.match(lines[0], `${C}: created with the DACL D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA) in one call (CreateDirectoryW), ${binDir} reads back `);
    t.match(lines[1], `${C}\\etc: created with the DACL D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA) in one call (CreateDirectoryW), ${confDir} reads back `);
    t.same(lines.slice(2), [`${binDir}\\blockspeaker.exe: installed`, `${binDir}\\blockspeaker-cni.exe: installed`, `${conflistFile}: written`]);

    const dirs = [C, `${C}\\opt`, `${C}\\opt\\cni`, binDir, `${C}\\etc`, `${C}\\etc\\cni`, confDir];
    const back = await readAcls(work, ...dirs);
    t.ok(back.user, `the reader's account: ${back.user}`);
    for (const d of dirs) {
      t.match(back[d], /^O:/, `${d} read back: ${back[d]}`);
      t.equal(dirAccessProblem(back[d]!, back.user), undefined, `${d}: SYSTEM, Administrators and our account only (no one else may even read it)`);
      t.equal(fs.statSync(onLinux(d)).mode & 0o007, 0, `${d}: on the Unix side, nothing for others`);
    }

    t.same(fs.readdirSync(onLinux(binDir)).sort(), ['blockspeaker-cni.exe', 'blockspeaker.exe'], 'the plugin under both names, nothing beside it');
    for (const n of ['blockspeaker.exe', 'blockspeaker-cni.exe']) t.ok(fs.readFileSync(path.join(onLinux(binDir), n)).equals(plugin), `${n}: blockspeaker-cni.exe of the package`);
    const v = await version(path.join(onLinux(binDir), 'blockspeaker.exe'));
    t.equal(v.code, 0, v.stderr);
    t.same(JSON.parse(v.stdout), { cniVersion: '1.0.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] }, 'the installed plugin runs on its own (no fs-native-extensions.node or koffi.node beside it)');

    const cni = { confDir, fileName: '10-blockspeaker.conflist', flavor: 'blockspeaker' as const, serviceCidr: '10.96.0.0/12', nodeSubnet: '10.0.0.0/24' };
    const pools = [
      { cidr: '10.244.0.0/16', natOutgoing: false, disabled: false, allowedUses: ['Workload' as const] },
      { cidr: '10.245.0.0/16', natOutgoing: true, disabled: false, allowedUses: ['Workload' as const] },
    ];
    t.equal(fs.readFileSync(onLinux(conflistFile), 'utf8'), conflistText(cni, 'pods', pools, { socket: pipe }), 'the network config list as the daemon writes it');
  });

  t.test('again while a CNI call runs the old plugin: moved aside, the new one in place, the call completes; the leftover goes next time', async (t) => {
    const release = path.join(work, 'release');
    fs.writeFileSync(path.join(work, 'standin.cjs'), STANDIN);
    const daemon = startWine(windowsNode(), [zPath(path.join(work, 'standin.cjs')), pipe, zPath(release)], { timeoutMs: 400_000 });
    running.push(daemon);
    await until('the daemon stand-in to listen', 120_000, () => daemon.output().stdout.includes('listening'));
    // containerd running the main plugin for a pod: DEL, stuck until the "daemon" answers.
    const call = startWine(path.join(onLinux(binDir), 'blockspeaker.exe'), [], {
      stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'pods', type: 'blockspeaker', socket: pipe }),
      env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'held-1', CNI_NETNS: 'c2b1f0de-7a0b-4b8e-9a57-3f4c7d1e2a10', CNI_IFNAME: 'eth0', CNI_PATH: binDir },
      timeoutMs: 400_000,
    });
    running.push(call);
    await until('the CNI call to reach the daemon', 120_000, () => daemon.output().stdout.includes('request cni.del'));

    const r = await install('--from', zPath(newer));
    t.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split(/\r?\n/);
    const m = /^(.*): replaced \(the old one is in use: moved aside to (.*\\blockspeaker\.exe\.old-\d+-\d+)\)$/.exec(lines[0] ?? '');
    t.ok(m, `the running blockspeaker.exe could not be renamed over, so it was moved aside: ${lines[0]}`);
    const aside = m?.[2] ?? '';
    t.same(lines, [
      `${binDir}\\blockspeaker.exe: replaced (the old one is in use: moved aside to ${aside})`,
      `${aside}: kept, still in use (EPERM); a later install-cni removes it`,
      `${binDir}\\blockspeaker-cni.exe: replaced`,
      `${conflistFile}: unchanged`,
    ], 'blockspeaker-cni.exe, not running, was simply renamed over');
    for (const n of ['blockspeaker.exe', 'blockspeaker-cni.exe']) t.ok(fs.readFileSync(path.join(onLinux(binDir), n)).equals(pluginV2), `${n}: the new version`);
    t.ok(fs.readFileSync(onLinux(aside)).equals(plugin), 'the old version, under the aside name');
    const v = await version(path.join(onLinux(binDir), 'blockspeaker.exe'));
    t.equal(v.code, 0, `the new plugin runs: ${v.stdout}${v.stderr}`);

    t.equal(daemon.output().stdout.includes('answered'), false, 'the old call is still waiting');
    fs.writeFileSync(release, '');
    t.equal(await call.exited, 0, 'the CNI call that ran the old plugin completes: DEL exits 0');
    t.same(call.output(), { stdout: '', stderr: '' }, 'a DEL prints nothing');
    t.match(daemon.output().stdout, /answered cni\.del/);

    const again = await install('--from', zPath(newer));
    t.equal(again.code, 0, again.stderr);
    t.same(again.stdout.trim().split(/\r?\n/), [
      `${binDir}\\blockspeaker.exe: unchanged`,
      `${aside}: removed (replaced earlier, no longer in use)`,
      `${binDir}\\blockspeaker-cni.exe: unchanged`,
      `${conflistFile}: unchanged`,
    ], 'the leftover is gone now that nothing runs it; nothing else is written');
    t.same(fs.readdirSync(onLinux(binDir)).sort(), ['blockspeaker-cni.exe', 'blockspeaker.exe']);
  });

  t.test('an existing folder others may change: used, with a warning naming the entry and the fix', async (t) => {
    const wide = path.join(driveC(), `${top}-wide`);
    fs.mkdirSync(wide);
    fs.chmodSync(wide, 0o777);
    const r = await runWine(exe.cli, ['install-cni', '--bin-dir', `C:\\${top}-wide`], { timeoutMs: 300_000 });
    t.equal(r.code, 0, r.stderr);
    t.match(r.stderr, `install-cni: warning: C:\\${top}-wide lets others add or replace files: entry (A;OICI;0x1301ff;;;WD) grants 0x1301ff (change) to WD (Everyone)`);
    t.match(r.stderr, /the container runtime runs what is there as SYSTEM\. Fix \(as Administrator\): powershell -NoProfile -Command/);
    t.same(r.stdout.trim().split(/\r?\n/), [`C:\\${top}-wide\\blockspeaker.exe: installed`, `C:\\${top}-wide\\blockspeaker-cni.exe: installed`]);
    t.equal(fs.statSync(wide).mode & 0o777, 0o777, 'its permissions are left as they were');
  });
}
