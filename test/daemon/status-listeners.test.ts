// The daemon's two status listeners. In this process: the metrics listener (status.metricsListen) answers
// /metrics, /healthz and /readyz and 404s the rest while status.listen serves everything; a reload opens, moves
// and closes the metrics listener without touching the other. As root, in network namespaces: a daemon with the
// default status.listen (loopback) cannot be reached on its interface address, from another namespace or its own,
// while its metrics listener on 0.0.0.0 answers there.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { ChildProcess } from 'node:child_process';
import { pino } from 'pino';
import { parseConfig } from '../../src/config/config.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { createLink, type Link, type Netns } from '../kit/interop/netns.ts';
import { toolsGate } from '../kit/tools.ts';
import { waitFor } from '../kit/wait.ts';

const METRICS_ONLY = ['/metrics', '/healthz', '/readyz'];
const STATUS_ONLY = ['/routes', '/status', '/peers', '/ipam/pools', '/'];

function config(dir: string, status: string): string {
  return `node: { name: node-s, os: linux }
bgp:
  asn: 65010
  routerId: 10.0.0.2
  listen: false
  peers: [{ address: 127.0.0.9, asn: 65001 }]
ipam:
  store: ${join(dir, 'store')}
  pools: [{ name: pods, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: none }
status: ${status}
ipc: false
`;
}

/** A daemon in this process from config text written to dir/node.yaml; its log lines are collected. */
async function startDaemon(t: Test, status: string) {
  const dir = mkdtempSync(join(tmpdir(), `bs-status-listeners-${process.pid}-`));
  const file = join(dir, 'node.yaml');
  const text = config(dir, status);
  writeFileSync(file, text);
  let logged = '';
  const sink = new Writable({ write(chunk, _enc, cb) { logged += String(chunk); cb(); } });
  const d = new Daemon({ file, config: parseConfig(text, file), log: pino({ level: 'info' }, sink), version: 'test' });
  t.teardown(async () => {
    await d.stop({ restart: false });
    rmSync(dir, { recursive: true, force: true });
  });
  await d.start();
  return { d, file, dir, log: () => logged };
}

async function get(port: number, path: string, host = '127.0.0.1') {
  const r = await fetch(`http://${host}:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
  return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text() };
}

t.test('the metrics listener serves /metrics, /healthz and /readyz only; the status listener everything', async (t) => {
  const { d, log } = await startDaemon(t, '{ listen: "127.0.0.1:0", metricsListen: "127.0.0.1:0" }');
  const main = d.status.address()!;
  const m = d.status.metricsAddress()!;
  t.ok(m, 'the metrics listener is bound');
  t.not(m.port, main.port);
  t.match(log(), new RegExp(`"msg":"status endpoint on http://127\\.0\\.0\\.1:${main.port}/status"`), 'the status listener is logged');
  t.match(log(), new RegExp(`"msg":"metrics endpoint on http://127\\.0\\.0\\.1:${m.port}/metrics \\(also /healthz, /readyz\\)"`), 'so is the metrics listener');
  await waitFor('/readyz 200', async () => (await get(main.port, '/readyz')).status === 200, 10_000);

  for (const path of METRICS_ONLY) {
    const r = await get(m.port, path);
    const s = await get(main.port, path);
    t.equal(r.status, 200, `${path} answers on the metrics listener`);
    t.same([r.status, r.type], [s.status, s.type], `${path}: as on the status listener`);
    if (path !== '/metrics') t.equal(r.text, s.text, `${path}: the same body`); // metric values move between scrapes
  }
  t.match((await get(m.port, '/metrics')).text, /^blockspeaker_ready 1$/m, '/metrics carries the daemon\'s metrics');
  t.match((await get(m.port, '/readyz')).text, /"ready": true/);
  for (const path of STATUS_ONLY) {
    const r = await get(m.port, path);
    t.equal(r.status, 404, `${path}: 404 on the metrics listener`);
    t.match(r.type, /^text\/plain/, `${path}: plain text`);
    t.match(r.text, /status address \(status\.listen\)/, `${path}: says where it is served`);
    t.equal((await get(main.port, path)).status, 200, `${path}: 200 on the status listener`);
  }
  t.match((await get(main.port, '/ipam/pools')).text, /"pods"/, 'the status listener has the IPAM state');
});

t.test('a reload opens, closes and moves the metrics listener alone', async (t) => {
  const { d, file, dir, log } = await startDaemon(t, '{ listen: "127.0.0.1:0" }');
  const main = d.status.address()!;
  t.equal(d.status.metricsAddress(), null, 'no metricsListen: no metrics listener');

  writeFileSync(file, config(dir, '{ listen: "127.0.0.1:0", metricsListen: "127.0.0.1:0" }'));
  await d.reload();
  const m = d.status.metricsAddress();
  t.ok(m, 'added by a reload');
  t.equal((await get(m!.port, '/healthz')).status, 200);
  t.equal((await get(m!.port, '/status')).status, 404);
  t.same(d.status.address(), main, 'the status listener stayed where it was');

  writeFileSync(file, config(dir, '{ listen: "127.0.0.1:0", metricsListen: "127.0.0.2:0" }'));
  await d.reload();
  t.equal(d.status.metricsAddress()?.address, '127.0.0.2', 'moved');
  await t.rejects(get(m!.port, '/healthz'), 'the old address is closed');

  // A port that is taken: the reload keeps the listener where it was.
  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => taken.close(r)));
  const before = d.status.metricsAddress()!;
  writeFileSync(file, config(dir, `{ listen: "127.0.0.1:0", metricsListen: "127.0.0.1:${(taken.address() as AddressInfo).port}" }`));
  await d.reload();
  t.same(d.status.metricsAddress(), before, 'a taken port: stays on the old address');
  t.match(log(), /status endpoint: cannot move; staying on the old addresses/);
  t.equal((await get(before.port, '/healthz', before.address)).status, 200, 'and answers there');
  t.same(d.status.address(), main);

  writeFileSync(file, config(dir, '{ listen: "127.0.0.1:0" }'));
  await d.reload();
  t.equal(d.status.metricsAddress(), null, 'removed by a reload');
  t.same(d.status.address(), main, 'the status listener still there');
  t.equal((await get(main.port, '/routes')).status, 200);

  writeFileSync(file, config(dir, 'false'));
  await d.reload();
  t.equal(d.status.address(), null, 'status: false closes it');
  t.equal(d.status.metricsAddress(), null);
});

// ---- reachability from other addresses (root, network namespaces) ------------------------------------------------

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;

/** GET each URL from inside ns: { url, status, text } or { url, error } (ECONNREFUSED, TimeoutError, ...). */
async function probe(ns: Netns, urls: string[]): Promise<{ url: string; status?: number; text?: string; error?: string }[]> {
  const script = `
    const out = [];
    for (const url of JSON.parse(process.argv[1])) {
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(3000) });
        out.push({ url, status: r.status, text: (await r.text()).slice(0, 300) });
      } catch (e) {
        out.push({ url, error: e.cause?.code ?? e.name });
      }
    }
    console.log(JSON.stringify(out));
    process.exit(0);`;
  const r = await ns.exec(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(urls)], { timeoutMs: 30_000 });
  return JSON.parse(r.stdout) as { url: string; status?: number; text?: string; error?: string }[];
}

t.test('a loopback status listener cannot be reached on another address; the metrics listener can', async (t) => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) {
    t.comment('skipping: needs Linux and root (network namespaces)');
    return;
  }
  if (!toolsGate(t, ['ip'])) return;
  const dir = mkdtempSync(join(tmpdir(), `bs-status-reach-${process.pid}-`));
  let link: Link | undefined;
  let child: ChildProcess | undefined;
  t.teardown(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGINT');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10_000)))]); // link.destroy SIGKILLs a laggard
      clearTimeout(timer);
    }
    await link?.destroy(); // kills whatever is still running in its namespaces
    rmSync(dir, { recursive: true, force: true });
  });
  // The daemon's namespace ("local", 10.255.N.1) and a client's ("peer", 10.255.N.2) on a veth pair.
  link = await createLink({ name: 'status-reach' });
  const here = link.local.v4;
  const here6 = link.local.v6;
  const file = join(dir, 'node.yaml');
  // status.listen left out: the default, 127.0.0.1:9179 (free in a fresh namespace).
  writeFileSync(file, `node: { name: node-r, os: linux }
ipam:
  store: ${join(dir, 'store')}
  pools: [{ name: pods, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: none }
status: { metricsListen: "0.0.0.0:9180" }
ipc: { path: ${join(dir, 'bs.sock')} }
`);
  child = link.local.ns.spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', dir], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' },
  });
  let logged = '';
  child.stderr!.on('data', (b: Buffer) => (logged += b));
  await waitFor('the daemon\'s metrics listener', () => {
    if (child!.exitCode !== null) throw new Error(`daemon exited ${child!.exitCode}: ${logged}`);
    return logged.includes('metrics endpoint on http://0.0.0.0:9180/metrics');
  }, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${logged.split('\n').slice(-20).join('\n')}`);
  });
  t.match(logged, /status endpoint on http:\/\/127\.0\.0\.1:9179\/status/, 'status.listen by default on 127.0.0.1:9179');

  const remote = await probe(link.peer.ns, [
    `http://${here}:9179/routes`, `http://${here}:9179/status`, `http://[${here6}]:9179/routes`,
    `http://${here}:9180/metrics`, `http://${here}:9180/healthz`, `http://${here}:9180/routes`,
  ]);
  t.match(remote[0], { error: 'ECONNREFUSED' }, `from another host: ${here}:9179/routes refused`);
  t.match(remote[1], { error: 'ECONNREFUSED' }, `from another host: ${here}:9179/status refused`);
  t.match(remote[2], { error: 'ECONNREFUSED' }, `from another host: [${here6}]:9179/routes refused`);
  t.match(remote[3], { status: 200, text: /^# TYPE blockspeaker_\w+ gauge$/m }, 'from another host: /metrics on the metrics listener');
  t.match(remote[4], { status: 200, text: 'ok\n' }, 'from another host: /healthz on the metrics listener');
  t.match(remote[5], { status: 404, text: /status address/ }, 'from another host: /routes is 404 on the metrics listener');

  // Its own namespace: its interface address is not loopback either; 127.0.0.1 serves everything.
  const local = await probe(link.local.ns, [`http://${here}:9179/routes`, 'http://127.0.0.1:9179/routes', 'http://127.0.0.1:9179/ipam/pools']);
  t.match(local[0], { error: 'ECONNREFUSED' }, `on the node: ${here}:9179 refused`);
  t.match(local[1], { status: 200, text: /"routes"/ }, 'on the node: 127.0.0.1:9179/routes answers');
  t.match(local[2], { status: 200, text: /"pods"/ }, 'on the node: 127.0.0.1:9179/ipam/pools answers');
});
