// The node daemon as a child process on loopback with temp dirs: IPAM through the control socket, the block
// announced to an in-process BGP peer, status endpoints and metrics with real values, config refusal, SIGHUP
// reload, SIGTERM shutdown with the store flushed.
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Speaker } from '../../src/bgp/speaker.ts';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { getStatus } from '../kit/daemon.ts';
import { openFileStore } from '../../src/store/file.ts';
import { freePort, waitFor as waitForShared } from '../kit/wait.ts';


/** Run node with args, without blocking the event loop; resolves with the exit status and output. */
function runAsync(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
// The sources under test, whatever an older dist/ holds.
const env = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };

const waitFor = <T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000) =>
  waitForShared(what, fn, timeoutMs, 50);

interface Child {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
  get(path: string): Promise<{ status: number; text: string; body: any }>;
}

function start(file: string, runDir: string, statusPort: number): Child {
  const child = spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', runDir], { stdio: ['ignore', 'ignore', 'pipe'], env });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => (text += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    stderr: () => text,
    exited,
    get: (path) => getStatus(statusPort, path),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'bs-daemon-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A metric sample's value from Prometheus text, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || line.startsWith('#')) continue;
    const m = /^([a-z_]+)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return undefined;
}

t.test('a bad config is refused before anything starts, naming the field', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['pool block size', 'ipam: { store: STORE, pools: [{ name: p, cidr: 10.0.0.0/16, blockSize: 99 }] }\nipc: false\nstatus: false\n', /ipam\.pools\[0\]\.blockSize: must be/],
    ['unknown dataplane', 'dataplane: { kind: bogus }\nipc: false\nstatus: false\n', /dataplane\.kind:/],
    ['unknown field', 'ipam: { store: STORE, strictAfinity: true }\nipc: false\nstatus: false\n', /ipam\.strictAfinity: unknown field/],
    ['calico not a list', 'ipam: { store: STORE, calico: 3 }\nipc: false\nstatus: false\n', /ipam\.calico:/],
    ['calico file missing', 'ipam: { store: STORE, calico: [nope.yaml] }\nipc: false\nstatus: false\n', /ipam\.calico: cannot read .*nope\.yaml/],
  ];
  for (const [what, text, re] of cases) {
    const f = join(dir, 'bad.yaml');
    writeFileSync(f, text.replace('STORE', join(dir, 'bad-store')));
    const r = spawnSync(process.execPath, [bin, 'run', '-c', f, '--run-dir', dir], { encoding: 'utf8', env, timeout: 60_000 });
    t.not(r.status, 0, `${what}: non-zero exit`);
    t.match(r.stderr, re, `${what}: the message names the field`);
  }
});

t.test('running daemon: IPC assign -> announced to a BGP peer -> status, metrics; SIGHUP; SIGTERM', async (t) => {
  const [bgpPort, peerPort, statusPort] = [await freePort('127.0.0.1'), await freePort('127.0.0.3'), await freePort('127.0.0.1')];
  const store = join(dir, 'store');
  const sock = join(dir, 'bs.sock');
  const file = join(dir, 'node.yaml');
  const conf = (pools: string) => `node: { name: node-a, labels: { rack: r1 } }
bgp:
  asn: 65010
  routerId: 127.0.0.1
  listen: { address: 127.0.0.1, port: ${bgpPort} }
  peers: [{ address: 127.0.0.3, asn: 65099, port: ${peerPort}, holdTime: 9 }]
  announce: [192.0.2.0/24]
ipam:
  store: ${store}
  pools: [${pools}]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: ${sock} }
`;
  const TINY = '{ name: tiny, cidr: 10.250.0.0/28, blockSize: 29 }';
  writeFileSync(file, conf(`{ name: p4, cidr: 10.244.0.0/16, blockSize: 26 }, ${TINY}`));
  // The peer: an in-process speaker that only listens.
  const peer = new Speaker({ asn: 65099, routerId: '127.0.0.3', listen: { address: '127.0.0.3', port: peerPort },
    peers: [{ address: '127.0.0.1', asn: 65010, passive: true, holdTime: 9 }] });
  await peer.start();
  t.teardown(() => peer.stop());
  const d = start(file, dir, statusPort);
  t.teardown(() => {
    if (d.child.exitCode === null) d.child.kill('SIGKILL');
  });

  await waitFor('status endpoint', async () => (await d.get('/healthz')).status === 200);
  const ready = await waitFor('/readyz 200', async () => {
    const r = await d.get('/readyz');
    return r.status === 200 && r.body;
  });
  t.match(ready, { ready: true, store: true, speaker: true, dataplane: true });
  await waitFor('session Established', async () => (await d.get('/peers/127.0.0.3')).body?.state === 'Established');

  // ---- assign through the control socket: the block reaches the peer (order, not timing)
  // Nothing from the pool is at the peer before the assign (the UPDATE may then overtake the IPC reply).
  t.notOk([...peer.rib.entries()].some((r) => r.prefix.toString().startsWith('10.244.')), 'no pool block at the peer before the assign');
  const a = await ipcRequest<AssignReply>(sock, 'ipam.assign', { handle: 'pod-1' });
  t.equal(a.ips.length, 1);
  const block = a.ips[0].block;
  await waitFor(`peer has ${block}`, () => peer.rib.paths(parsePrefix(block)).length > 0);
  t.ok(peer.rib.paths(parsePrefix('192.0.2.0/24')).length > 0, 'static announcement at the peer too');

  const blocks = (await d.get('/ipam/blocks')).body;
  t.match(blocks, [{ cidr: block, pool: 'p4', affinity: 'node-a', size: 64, allocated: 1, free: 63, reserved: 0 }]);
  t.equal(blocks[0].utilisation, 0.0156);
  t.match((await d.get('/ipam/pools')).body, [{ name: 'p4', cidr: '10.244.0.0/16', blocks: 1, allocated: 1, free: 63 }, { name: 'tiny', blocks: 0 }]);
  t.match((await d.get('/dataplane')).body, { kind: 'none', errors: 0 });
  const st = (await d.get('/status')).body;
  t.match(st, { node: 'node-a', asn: 65010, routerId: '127.0.0.1', peers: { configured: 1, established: 1 } });
  t.match(st.control, { endpoint: sock, access: /Unix socket mode 0600/ }, '/status says what protects the control socket');

  let m = (await waitFor('metrics with the allocation', async () => {
    const r = await d.get('/metrics');
    return sample(r.text, 'blockspeaker_ipam_addresses', { pool: 'p4', state: 'allocated' }) === 1 && r;
  })).text;
  t.equal(sample(m, 'blockspeaker_bgp_peer_state', { peer: '127.0.0.3' }), 6, 'peer state Established = 6');
  t.equal(sample(m, 'blockspeaker_bgp_peer_up', { peer: '127.0.0.3' }), 1);
  t.equal(sample(m, 'blockspeaker_ipam_addresses', { pool: 'p4', state: 'free' }), 63);
  t.equal(sample(m, 'blockspeaker_ipam_addresses', { pool: 'p4', state: 'reserved' }), 0);
  t.equal(sample(m, 'blockspeaker_announced_prefixes'), 1);
  t.equal(sample(m, 'blockspeaker_ready'), 1);
  t.ok((sample(m, 'blockspeaker_bgp_updates_total', { peer: '127.0.0.3', direction: 'out' }) ?? 0) >= 1, 'updates out counted');
  await waitFor('prefixes sent = 2', async () => sample((await d.get('/metrics')).text, 'blockspeaker_bgp_prefixes', { peer: '127.0.0.3', kind: 'sent' }) === 2);
  t.match(m, /# TYPE blockspeaker_bgp_updates_total counter/);

  // ---- the CLI over the socket
  // Async children: a spawnSync would stop this process's in-process BGP peer from sending keepalives (hold 9 s).
  const show = await runAsync([bin, 'show', '--socket', sock, 'ipam'], env);
  t.equal(show.status, 0, show.stderr);
  t.match(show.stdout, new RegExp(`${block.replace(/\./g, '\\.')}\\s+p4\\s+node-a\\s+1\\s+63`));
  const peersJson = await runAsync([bin, 'show', '--socket', sock, '--json', 'peers'], env);
  t.match(JSON.parse(peersJson.stdout), [{ address: '127.0.0.3', state: 'Established' }]);

  // ---- a borrowed address: announced as a /32, withdrawn on release. Pool "tiny" holds two /29 blocks; node-b
  // (another process on the same store: this test) takes one, node-a fills the other, the next address is borrowed.
  const other = await openFileStore(store);
  const ipamB = new Ipam(other);
  await ipamB.setHost({ name: 'node-b', os: 'linux', labels: {} });
  const b1 = await ipamB.autoAssign({ host: 'node-b', num4: 1, handle: 'b-pod', pools: ['tiny'] });
  await other.close();
  t.equal(b1.ipv4.length, 1, 'node-b claimed a tiny block');
  const fill = await ipcRequest<AssignReply>(sock, 'ipam.assign', { handle: 'fill', num4: 8, pools: ['tiny'] });
  t.equal(fill.ips.filter((x) => !x.borrowed).length, 8, "node-a's tiny block is full");
  const borrowed = await ipcRequest<AssignReply>(sock, 'ipam.assign', { handle: 'borrower', pools: ['tiny'] });
  t.equal(borrowed.ips[0].borrowed, true, 'the next address is borrowed');
  t.equal(borrowed.ips[0].block, b1.ipv4[0].block, "from node-b's block");
  const host32 = parsePrefix(`${borrowed.ips[0].ip}/32`);
  await waitFor(`peer has the borrowed ${borrowed.ips[0].ip}/32`, () => peer.rib.paths(host32).length > 0);
  await ipcRequest(sock, 'ipam.release', { handle: 'borrower' });
  await waitFor('borrowed /32 withdrawn at the peer', () => peer.rib.paths(host32).length === 0);
  await ipcRequest(sock, 'ipam.release', { handle: 'fill' });

  // ---- release: the address is free again (the empty block stays affine to node-a, and announced, as in Calico)
  await ipcRequest(sock, 'ipam.release', { handle: 'pod-1' });
  m = (await waitFor('metrics after release', async () => {
    const r = await d.get('/metrics');
    return sample(r.text, 'blockspeaker_ipam_addresses', { pool: 'p4', state: 'allocated' }) === 0 && r;
  })).text;
  t.equal(sample(m, 'blockspeaker_ipam_addresses', { pool: 'p4', state: 'free' }), 64);
  t.ok(peer.rib.paths(parsePrefix(block)).length > 0, 'the empty affine block stays announced');

  // ---- SIGHUP: a pool added, the session stays
  const since = (await d.get('/peers/127.0.0.3')).body.since;
  writeFileSync(file, conf(`{ name: p4, cidr: 10.244.0.0/16, blockSize: 26 }, ${TINY}, { name: p6, cidr: "fd00:244::/48", blockSize: 122 }`));
  d.child.kill('SIGHUP');
  const pools = await waitFor('pool p6 after reload', async () => {
    const r = (await d.get('/ipam/pools')).body;
    return r.length === 3 && r;
  });
  t.match(pools.map((p: { name: string }) => p.name), ['p4', 'p6', 'tiny']);
  const after = (await d.get('/peers/127.0.0.3')).body;
  t.equal(after.state, 'Established');
  t.equal(after.since, since, 'the unchanged session was not reset');
  t.match(d.stderr(), /"msg":"config reloaded"/);

  // ---- a bad reload is refused, the daemon keeps running
  writeFileSync(file, 'ipam: { store: 3 }\n');
  d.child.kill('SIGHUP');
  await waitFor('reload refused', () => /reload failed: config invalid/.test(d.stderr()));
  t.equal((await d.get('/healthz')).status, 200);

  // ---- SIGTERM: clean exit, socket gone, the store closed and its data durable
  await ipcRequest(sock, 'ipam.assign', { handle: 'pod-2' });
  d.child.kill('SIGTERM');
  t.equal(await d.exited, 0, 'exit 0');
  t.match(d.stderr(), /"msg":"stopped"/);
  t.notOk(existsSync(sock), 'control socket removed');
  const s = await openFileStore(store); // would fail while the daemon still held it
  const ipam = new Ipam(s);
  const held = (await ipam.blocks('node-a')).reduce((n, b) => n + b.allocated, 0);
  t.equal(held, 1, 'pod-2 persisted');
  await s.close();
  await waitFor('peer saw the session go down', () => peer.peers()[0].state !== 'Established');
});
