// `blockspeaker run -c FILE` end to end on loopback: two daemons (127.0.0.1 and 127.0.0.2) peer with each other;
// the status endpoint shows the session and the routes; SIGHUP reloads without resetting an unchanged session and
// survives a bad file; SIGINT sends Cease (full stop), SIGTERM is a graceful-restart stop; both exit 0.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor as waitForShared } from '../kit/wait.ts';

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;

const waitFor = <T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000) =>
  waitForShared(what, fn, timeoutMs, 100);

interface Daemon {
  child: ChildProcess;
  logs: Record<string, unknown>[];
  stderr: () => string;
  exited: Promise<number | null>;
  get(path: string): Promise<{ status: number; body: any }>;
}

function startDaemon(file: string, runDir: string, statusPort: number): Daemon {
  const child = spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', runDir, '--log-level', 'debug'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  const logs: Record<string, unknown>[] = [];
  let partial = '';
  child.stderr!.on('data', (d: Buffer) => {
    text += d;
    partial += d;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const l of lines) {
      try {
        logs.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        /* not a log line (a crash trace): kept in text */
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    logs,
    stderr: () => text,
    exited,
    async get(path) {
      const res = await fetch(`http://127.0.0.1:${statusPort}${path}`);
      const raw = await res.text();
      let body: unknown = raw;
      if (res.headers.get('content-type')?.startsWith('application/json')) body = JSON.parse(raw);
      return { status: res.status, body };
    },
  };
}

const dir = mkdtempSync(join(tmpdir(), 'bs-run-'));
/** Whether the node's running-marker (<node>-<hash of what it guards>.running) is in the run dir. */
const hasMarker = (node: string) => readdirSync(dir).some((n) => new RegExp(`^${node}-[0-9a-f]{16}\\.running$`).test(n));
const daemons: Daemon[] = [];
t.teardown(() => {
  for (const d of daemons) if (d.child.exitCode === null) d.child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

t.test('--check prints the config with defaults; a bad config is refused before anything starts', async (t) => {
  writeFileSync(join(dir, 'ok.yaml'), 'bgp: { asn: 65001, routerId: 10.0.0.1 }\n');
  writeFileSync(join(dir, 'bad.yaml'), 'bgp:\n  asn: 0\n  routerId: 10.0.0.1\n  peers: [{ address: 10.0.0.2, asn: 1, holdtime: 3 }]\n');
  const run = (args: string[]) => new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const c = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    c.on('close', (code) => resolve({ code, out, err }));
  });
  const ok = await run(['run', '-c', join(dir, 'ok.yaml'), '--check']);
  t.equal(ok.code, 0, ok.err);
  t.match(ok.out, /bgp:\n  asn: 65001\n  routerId: 10\.0\.0\.1\n  listen:\n    address: "::"\n    port: 179\n/);
  const bad = await run(['run', '-c', join(dir, 'bad.yaml'), '--run-dir', dir]);
  t.equal(bad.code, 1);
  t.equal(bad.err, `blockspeaker: bgp.asn: must be 1..4294967295, got 0 (${join(dir, 'bad.yaml')}:2)\n` +
    `bgp.peers[0].holdtime: unknown field (did you mean holdTime?) (${join(dir, 'bad.yaml')}:4)\n`);
  const noFile = await run(['run']);
  t.equal(noFile.code, 2);
  t.match(noFile.err, /run: --config is required/);
});

t.test('two daemons on loopback: session, status endpoint, SIGHUP reload, SIGTERM', async (t) => {
  const [bgpA, bgpB, statusA, statusB] = [await freePort('127.0.0.1'), await freePort('127.0.0.2'), await freePort('127.0.0.1'), await freePort('127.0.0.1')];
  const conf = (me: 'a' | 'b', announce: string[], extraPeers = '') => {
    const [asn, addr, port, peerAddr, peerAsn, peerPort, statusPort] = me === 'a'
      ? [65001, '127.0.0.1', bgpA, '127.0.0.2', 4200000002, bgpB, statusA]
      : [4200000002, '127.0.0.2', bgpB, '127.0.0.1', 65001, bgpA, statusB];
    return `node: { name: node-${me} }
bgp:
  asn: ${asn}
  routerId: ${addr}
  listen: { address: ${addr}, port: ${port} }
  peers:
    - { address: ${peerAddr}, asn: ${peerAsn}, port: ${peerPort}, holdTime: 9 }${extraPeers}
  announce: [${announce.join(', ')}]
status: { listen: "127.0.0.1:${statusPort}" }
ipc: false
`;
  };
  const fileA = join(dir, 'a.yaml');
  const fileB = join(dir, 'b.yaml');
  writeFileSync(fileA, conf('a', ['10.1.0.0/24']));
  writeFileSync(fileB, conf('b', ['10.2.0.0/24', '10.2.1.0/24']));
  const a = startDaemon(fileA, dir, statusA);
  const b = startDaemon(fileB, dir, statusB);
  daemons.push(a, b);

  // ---- session and status
  const peerB = await waitFor('A: session with B Established', async () => {
    const r = await a.get('/peers/127.0.0.2');
    return r.status === 200 && r.body.state === 'Established' && r.body;
  });
  t.match(peerB, { address: '127.0.0.2', asn: 4200000002, type: 'ebgp', routerId: '127.0.0.2', holdTime: 9 });
  t.equal((await a.get('/healthz')).body, 'ok\n');
  const st = (await a.get('/status')).body;
  t.match(st, { node: 'node-a', asn: 65001, routerId: '127.0.0.1', version: /^\d+\.\d+\.\d+/, peers: { configured: 1, established: 1 } });
  t.type(st.uptime, 'number');
  const peers = (await b.get('/peers')).body;
  t.match(peers, [{ address: '127.0.0.1', asn: 65001, state: 'Established', capabilities: { fourOctetAs: true } }]);
  t.equal((await b.get('/status')).body.asn, 4200000002, '4-octet local ASN');

  const routeA = await waitFor('A learns 10.2.1.0/24', async () => {
    const r = await a.get('/routes?prefix=10.2.1.0/24');
    return r.status === 200 && r.body;
  });
  t.match(routeA, { prefix: '10.2.1.0/24', paths: [{ source: '127.0.0.2', peer: '127.0.0.2', best: true, stale: false, attributes: { ORIGIN: 'IGP', AS_PATH: '4200000002', NEXT_HOP: '127.0.0.2' } }] });
  const all = (await a.get('/routes')).body;
  t.same(all.routes.map((r: { prefix: string }) => r.prefix), ['10.1.0.0/24', '10.2.0.0/24', '10.2.1.0/24'], 'all best routes, in prefix order');
  t.match(all.routes[0], { prefix: '10.1.0.0/24', paths: [{ source: 'local', peer: null }] });
  t.same((await a.get('/routes?family=ipv6')).body, { count: 0, truncated: false, routes: [] });
  t.match((await a.get('/routes?limit=1')).body, { count: 1, truncated: true });
  t.match((await a.get('/routes?lpm=10.2.0.77')).body, { address: '10.2.0.77', prefix: '10.2.0.0/24' });
  t.equal((await a.get('/routes?lpm=192.0.2.1')).status, 404);
  t.equal((await a.get('/routes?prefix=10.9.0.0/16')).status, 404);
  t.match(await a.get('/routes?prefix=10.9.0.1/16'), { status: 400, body: { error: /host bits set/ } });
  t.match(await a.get('/routes?family=ipv5'), { status: 400, body: { error: /family must be ipv4 or ipv6/ } });
  t.equal((await a.get('/peers/192.0.2.9')).status, 404);
  t.equal((await a.get('/peers/nope')).status, 400);
  t.equal((await a.get('/nope')).status, 404);
  t.equal((await fetch(`http://127.0.0.1:${statusA}/status`, { method: 'POST' })).status, 405);
  await waitFor('B learns 10.1.0.0/24', async () => (await b.get('/routes?prefix=10.1.0.0/24')).status === 200);

  // ---- SIGHUP: a new static route and a new peer; the session with B is not reset
  const before = (await a.get('/peers/127.0.0.2')).body;
  writeFileSync(fileA, conf('a', ['10.1.0.0/24', '10.1.5.0/24'], '\n    - { address: 127.0.0.3, asn: 65003, port: 9, passive: true }'));
  a.child.kill('SIGHUP');
  await waitFor('B learns 10.1.5.0/24 after the reload', async () => (await b.get('/routes?prefix=10.1.5.0/24')).status === 200);
  const peersAfter = (await a.get('/peers')).body;
  t.same(peersAfter.map((p: { address: string }) => p.address), ['127.0.0.2', '127.0.0.3'], 'new peer configured');
  t.match(peersAfter[0], { state: 'Established', since: before.since, flaps: 0 }, 'unchanged session kept');
  t.ok(a.logs.some((l) => l.msg === 'config reloaded'), 'reload logged');

  // a bad file: logged, the old config keeps running
  writeFileSync(fileA, conf('a', ['10.1.0.0/24', '10.1.5.0/33']));
  a.child.kill('SIGHUP');
  const err = await waitFor('reload error logged', () => a.logs.find((l) => String(l.msg).startsWith('reload failed')));
  t.match(err, { errors: ['bgp.announce[1]: length 33 out of range 0..32, got "10.1.5.0/33"'] });
  t.equal((await a.get('/peers')).body.length, 2, 'still the old config');
  t.equal((await b.get('/routes?prefix=10.1.5.0/24')).status, 200, 'still announcing');
  t.equal(a.child.exitCode, null, 'still running');

  // ---- SIGINT: a full stop. Cease to B, exit 0, the running marker removed.
  t.ok(hasMarker('node-a'), 'running marker present');
  a.child.kill('SIGINT');
  t.equal(await a.exited, 0, 'exit 0');
  t.notOk(hasMarker('node-a'), 'marker removed on a full stop');
  t.ok(a.logs.some((l) => l.msg === 'stopped'), a.stderr().split('\n').slice(-15).join('\n'));
  const downAtB = await waitFor('B sees the Cease', async () => {
    const p = (await b.get('/peers/127.0.0.1')).body;
    return p.state !== 'Established' && p;
  });
  t.match(downAtB.lastError, /Cease|Administrative Shutdown|ECONNREFUSED/);
  await waitFor('B withdrew A\'s routes', async () => (await b.get('/routes?prefix=10.1.0.0/24')).status === 404);

  // ---- SIGTERM: a graceful-restart stop. Exit 0, and the marker stays so the next start is a restarting speaker.
  t.ok(hasMarker('node-b'), 'B running marker present');
  b.child.kill('SIGTERM');
  t.equal(await b.exited, 0, 'SIGTERM: exit 0 too');
  t.ok(hasMarker('node-b'), 'SIGTERM keeps the marker: the next start sets the graceful-restart R bit');
});
