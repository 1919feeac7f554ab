// Named-pipe squatting, under wine with the packaged executables: the daemon (blockspeaker.exe) runs on a pipe and
// serves a CNI ADD through blockspeaker-cni.exe, called as containerd calls it; then it goes down and another
// program (the Windows node.exe, not blockspeaker) takes the pipe's name and answers as a daemon would. The CNI
// plugin refuses it naming the pipe, and sends it nothing; the CLI refuses it too and names its process, read with
// GetNamedPipeServerProcessId. Needs wine; with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, windowsNode, zPath, type WineResult } from '../../packaging/windows/wine.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, parseLog, until, windowsReady } from '../windows/harness.ts';

/** Takes the pipe, logs each connection and every byte it is sent, greets with a net-ipc handshake and answers all. */
const SQUATTER = `
const fs = require('node:fs');
const [pipe, log] = process.argv.slice(2);
const frame = (o) => { const b = Buffer.from(JSON.stringify(o)); return Buffer.concat([Buffer.from([0x80 | b.length]), b]); };
require('node:net').createServer((c) => {
  fs.appendFileSync(log, 'connection\\n');
  c.on('error', () => {});
  c.write(frame({ t: 0, d: { id: 'x' } }));
  c.on('data', (d) => { fs.appendFileSync(log, 'bytes ' + d.length + '\\n'); c.write(frame({ t: 3, d: { ok: true, r: { pid: 4242 } } })); });
}).listen(pipe, () => console.log('squatting ' + pipe));
setTimeout(() => process.exit(0), 400000);
`;

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-sec-pipe-wine-'));
  const storeName = `bs-squat-${process.pid}`;
  const pipe = `\\\\.\\pipe\\bs-squat-${process.pid}`;
  const keyFile = path.join(driveC(), 'ProgramData', 'blockspeaker', 'pipe-keys', `bs-squat-${process.pid}.key`);
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
    fs.rmSync(keyFile, { force: true });
  });
  fs.writeFileSync(path.join(dir, 'squatter.cjs'), SQUATTER);

  const cniAdd = (id: string): Promise<WineResult> => runWine(exe.cni, [], {
    stdin: JSON.stringify({ cniVersion: '1.1.0', name: 'k8s-pod-network', type: 'sdnbridge', ipam: { type: 'blockspeaker-cni', socket: pipe } }),
    env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: 'c2b1f0de-7a0b-4b8e-9a57-3f4c7d1e2a10', CNI_IFNAME: 'eth0', CNI_PATH: 'C:\\Program Files\\containerd\\cni\\bin' },
  });
  const json = (r: WineResult) => {
    try {
      return JSON.parse(r.stdout) as Record<string, unknown>;
    } catch {
      return { stdout: r.stdout, stderr: r.stderr };
    }
  };

  t.test('the daemon proves itself: the CNI plugin is served', async (t) => {
    const port = await freePort();
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-squat-1, os: windows }
ipam:
  store: C:\\${storeName}\\store
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: '${pipe}' }
`);
    const d = startWine(exe.cli, ['run', '-c', zPath(config)], { timeoutMs: 400_000 });
    t.teardown(() => d.kill());
    await until('the daemon to start', 180_000, () => parseLog(d.output().stderr).some((l) => l.msg === 'started'));
    t.ok(fs.existsSync(keyFile), 'the daemon wrote its key for this pipe under C:\\ProgramData\\blockspeaker\\pipe-keys');
    t.equal(fs.statSync(keyFile).size, 32);
    const add = await cniAdd('pod-before');
    t.equal(add.code, 0, add.stdout + add.stderr);
    t.match(json(add), { ips: [{ address: /^10\.244\./ }] }, 'an address, through a pipe whose owner proved itself');
    d.kill();
    await d.exited;
  });

  t.test('the daemon is down and another program holds the pipe: the CNI plugin and the CLI refuse it, sending nothing', async (t) => {
    const log = path.join(dir, 'squatter.log');
    const squatter = startWine(windowsNode(), [zPath(path.join(dir, 'squatter.cjs')), pipe, zPath(log)], { timeoutMs: 400_000 });
    t.teardown(() => squatter.kill());
    await until('the squatter to listen', 120_000, () => squatter.output().stdout.includes('squatting'));

    const add = await cniAdd('pod-after');
    t.not(add.code, 0, 'the ADD fails');
    const err = json(add);
    t.match(err, { cniVersion: '1.1.0', code: Number, msg: String }, 'a CNI error object');
    t.match(String(err.msg), `refusing ${pipe}: the process that owns it did not prove it is the blockspeaker daemon`, String(err.msg));
    t.match(String(err.msg), /Nothing was sent to it/);
    t.notMatch(add.stdout + add.stderr, /\n\s+at /, 'no stack trace');

    const show = await runWine(exe.cli, ['show', 'status', '--socket', pipe]);
    t.not(show.code, 0, 'the CLI refuses too');
    t.match(show.stderr, `refusing ${pipe}`);
    t.match(show.stderr, /its owner: process \d+( \([^)]*node\.exe\))?/i, `the owner named from GetNamedPipeServerProcessId: ${show.stderr}`);

    const seen = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
    t.match(seen, /connection/, 'the clients did connect');
    t.notMatch(seen, /bytes/, `the squatter received no byte (${JSON.stringify(seen)})`);
  });
}
