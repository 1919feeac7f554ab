// Process control and bad input, end to end: `blockspeaker daemon reload | stop | stop --withdraw` over the
// control socket (what Windows uses instead of signals) between two daemons peering on loopback; a second daemon
// on the same store, a control path that is taken, a missing config and a store directory without access are
// refused with the path and the cause, exit 1, and nothing written.
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '../kit/wait.ts';

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'bs-ctl-'));
const children: ChildProcess[] = [];
t.teardown(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function start(file: string) {
  const child = spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, stderr: () => err };
}

const cli = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });

async function get(port: number, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: res.headers.get('content-type')?.startsWith('application/json') ? await res.json() : await res.text() };
}

/** Every file of a directory tree, for "nothing written". */
function contents(d: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of readdirSync(d)) out[n] = readFileSync(join(d, n)).toString('base64');
  return out;
}

t.test('daemon reload / stop / stop --withdraw over the control socket; bad input refused', async (t) => {
  const [bgpA, bgpB, stA, stB] = [await freePort('127.0.0.1'), await freePort('127.0.0.2'), await freePort('127.0.0.1'), await freePort('127.0.0.1')];
  const sockA = join(dir, 'a.sock');
  const storeA = join(dir, 'store-a');
  // Both speak graceful restart (RFC 4724), so a restart-stop leaves the other's routes stale rather than gone.
  const bgp = (asn: number, me: string, port: number, peer: string, peerAsn: number, peerPort: number) => `bgp:
  asn: ${asn}
  routerId: ${me}
  listen: { address: ${me}, port: ${port} }
  gracefulRestart: { restartTime: 120 }
  peers: [{ address: ${peer}, asn: ${peerAsn}, port: ${peerPort}, holdTime: 9 }]`;
  const confA = (announce: string) => `node: { name: node-a }
${bgp(65001, '127.0.0.1', bgpA, '127.0.0.2', 65002, bgpB)}
  announce: [${announce}]
ipam: { store: ${storeA}, pools: [{ name: p, cidr: 10.50.0.0/16 }] }
status: { listen: "127.0.0.1:${stA}" }
ipc: { path: ${sockA} }
`;
  const fileA = join(dir, 'a.yaml');
  const fileB = join(dir, 'b.yaml');
  writeFileSync(fileA, confA('10.1.0.0/24'));
  writeFileSync(fileB, `node: { name: node-b }
${bgp(65002, '127.0.0.2', bgpB, '127.0.0.1', 65001, bgpA)}
status: { listen: "127.0.0.1:${stB}" }
ipc: false
`);
  let a = start(fileA);
  const b = start(fileB);
  await waitFor('B learns 10.1.0.0/24 from A', async () => (await get(stB, '/routes?prefix=10.1.0.0/24')).status === 200, 60_000);

  // ---- bad input: each refused with the path and the cause, exit 1, nothing written
  const missing = cli('run', '-c', join(dir, 'missing.yaml'), '--run-dir', dir);
  t.equal(missing.status, 1);
  t.match(missing.stderr, `cannot read ${join(dir, 'missing.yaml')}: no such file (ENOENT)`);

  const before = contents(storeA);
  const sockA2 = join(dir, 'a2.sock');
  writeFileSync(join(dir, 'a2.yaml'), confA('10.1.0.0/24').replace(`port: ${bgpA}`, 'port: 0').replace(sockA, sockA2).replace(`127.0.0.1:${stA}`, '127.0.0.1:0'));
  const second = cli('run', '-c', join(dir, 'a2.yaml'), '--run-dir', dir);
  t.equal(second.status, 1, 'a second daemon on the same store');
  t.match(second.stderr, new RegExp(`another blockspeaker daemon \\(pid ${a.child.pid}\\) is running as node-a on ${storeA}`));
  t.same(contents(storeA), before, 'the store is untouched');
  t.notOk(existsSync(sockA2), 'no control socket made');

  const storeC = join(dir, 'store-c');
  writeFileSync(join(dir, 'c.yaml'), confA('10.1.0.0/24').replace(`port: ${bgpA}`, 'port: 0').replace(storeA, storeC).replace(`127.0.0.1:${stA}`, '127.0.0.1:0'));
  const taken = cli('run', '-c', join(dir, 'c.yaml'), '--run-dir', dir);
  t.equal(taken.status, 1, 'the control path is taken');
  t.match(taken.stderr, `another blockspeaker daemon is already listening on ${sockA}`);
  t.notOk(existsSync(storeC), 'the store was not even created');

  writeFileSync(join(dir, 'a-file'), 'not a directory');
  writeFileSync(join(dir, 'd.yaml'), confA('10.1.0.0/24').replace(`port: ${bgpA}`, 'port: 0').replace(storeA, join(dir, 'a-file', 'store')).replace(sockA, join(dir, 'd.sock')).replace(`127.0.0.1:${stA}`, '127.0.0.1:0'));
  const noAccess = cli('run', '-c', join(dir, 'd.yaml'), '--run-dir', dir);
  t.equal(noAccess.status, 1, 'a store directory that cannot be made');
  t.match(noAccess.stderr, `cannot create directory ${join(dir, 'a-file', 'store')}`);
  t.match(noAccess.stderr, /ENOTDIR/);

  // ---- reload over IPC
  writeFileSync(fileA, confA('10.1.0.0/24, 10.1.5.0/24'));
  const reload = cli('daemon', '--socket', sockA, 'reload');
  t.equal(reload.status, 0, reload.stderr);
  t.equal(reload.stdout, 'config reloaded\n');
  await waitFor('B learns 10.1.5.0/24 after the reload', async () => (await get(stB, '/routes?prefix=10.1.5.0/24')).status === 200);
  writeFileSync(fileA, confA('10.1.0.0/33'));
  const badReload = cli('daemon', '--socket', sockA, 'reload');
  t.equal(badReload.status, 1, 'an invalid file is refused');
  t.match(badReload.stderr, /bgp\.announce\[0\]: length 33 out of range/);
  t.equal(a.child.exitCode, null, 'still running');
  writeFileSync(fileA, confA('10.1.0.0/24'));

  // ---- daemon stop: a graceful-restart stop, B keeps A's routes as stale
  const stop = cli('daemon', '--socket', sockA, 'stop');
  t.equal(stop.status, 0, stop.stderr);
  t.match(stop.stdout, /stopped \(graceful-restart stop/);
  t.equal(await a.exited, 0);
  const stale = await waitFor('B holds A\'s route as stale', async () => {
    const r = await get(stB, '/routes?prefix=10.1.0.0/24');
    return r.status === 200 && r.body.paths?.[0]?.stale === true && r.body;
  });
  t.match(stale, { prefix: '10.1.0.0/24', paths: [{ stale: true }] }, 'the route survives the restart-stop');
  t.ok(readdirSync(dir).some((n) => /^node-a-[0-9a-f]{16}\.running$/.test(n)), 'the marker stays');

  // ---- back up as a restarting speaker; then stop --withdraw: Cease, B drops the routes
  a = start(fileA);
  await waitFor('A logs a graceful restart', () => /restarting speaker/.test(a.stderr()), 60_000);
  await waitFor('B has A\'s route fresh again', async () => {
    const r = await get(stB, '/routes?prefix=10.1.0.0/24');
    return r.status === 200 && r.body.paths?.[0]?.stale === false;
  }, 60_000);
  const withdraw = cli('daemon', '--socket', sockA, 'stop', '--withdraw');
  t.equal(withdraw.status, 0, withdraw.stderr);
  t.match(withdraw.stdout, /withdrawn/);
  t.equal(await a.exited, 0);
  await waitFor('B dropped A\'s routes', async () => (await get(stB, '/routes?prefix=10.1.0.0/24')).status === 404);
  t.notOk(readdirSync(dir).some((n) => /^node-a-[0-9a-f]{16}\.running$/.test(n)), 'a full stop removes the marker');
  b.child.kill('SIGINT');
  t.equal(await b.exited, 0);
});
