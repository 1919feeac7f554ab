// The control socket: net-ipc server and our client, socket-file rules, and the IPAM methods over a real Ipam on a
// temporary file store.
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import netIpc from 'net-ipc';
import { IpcClient, IpcError, ipcRequest } from '../../src/ipc/client.ts';
import { socketEndpoint } from '../../src/ipc/protocol.ts';
import { netIpcPath } from './net-ipc-path.ts';
import { IpcStartError, startIpcServer } from '../../src/ipc/server.ts';
import { startTestDaemon } from './fixture.ts';

const posix = process.platform !== 'win32';

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'bs-ipc-t-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A Unix socket file nobody listens on: what a daemon killed with SIGKILL leaves behind. */
function staleSocket(path: string): void {
  const r = spawnSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`]);
  if (!existsSync(path)) throw new Error(`could not leave a stale socket (${r.stderr})`);
}

t.test('round trips: status, registered methods, errors with their codes', async (t) => {
  const dir = tmp(t);
  const path = join(dir, 'ctl.sock');
  const server = await startIpcServer({
    path,
    handlers: {
      echo: (p) => p,
      boom: () => {
        throw Object.assign(new Error('it broke'), { code: 'BROKEN' });
      },
      slow: () => new Promise(() => undefined),
    },
  });
  t.teardown(() => server.close());
  const c = new IpcClient(path, { timeoutMs: 2000 });
  t.teardown(() => c.close());
  const st = await c.call('status', {});
  t.equal(st.pid, process.pid);
  t.ok(st.methods.includes('echo') && st.methods.includes('status'));
  t.same(await c.request('echo', { a: [1, 'two', { three: null }] }), { a: [1, 'two', { three: null }] });
  const big = 'x'.repeat(300_000); // multi-byte length tag, many TCP-sized chunks
  t.equal(((await c.request('echo', { big })) as { big: string }).big.length, big.length);
  const many = await Promise.all(Array.from({ length: 50 }, (_, i) => c.request('echo', { i })));
  t.same(many.map((m) => (m as { i: number }).i), Array.from({ length: 50 }, (_, i) => i), 'concurrent requests on one connection');

  server.register('later', () => 'registered after start');
  t.equal(await c.request('later'), 'registered after start', 'the daemon adds queries (peers, routes) later');

  await t.rejects(c.request('boom'), { name: 'IpcError', code: 'REMOTE', remoteCode: 'BROKEN', message: 'it broke' });
  await t.rejects(c.request('nope'), { code: 'REMOTE', remoteCode: 'UNKNOWN_METHOD', message: /unknown method "nope"/ });
  await t.rejects(c.request('slow', {}, { timeoutMs: 150 }), { code: 'TIMEOUT', message: /did not answer slow within 150 ms/ });
  t.same(await c.request('echo', 'still fine'), 'still fine', 'a timed-out request does not spoil the connection');
});

t.test('the real net-ipc client talks to the server too', async (t) => {
  const dir = tmp(t);
  const path = join(dir, 'ctl.sock');
  const server = await startIpcServer({ path, handlers: { echo: (p) => p } });
  t.teardown(() => server.close());
  const client = new netIpc.Client({ path: netIpcPath(path), reconnect: false });
  await client.connect();
  t.same(await client.request({ m: 'echo', p: { hi: 1 } }), { ok: true, r: { hi: 1 } });
  await client.close();
});

t.test('socket file: mode 0600, removed on close', { skip: !posix && 'Unix sockets only' }, async (t) => {
  const dir = tmp(t);
  const path = join(dir, 'sub', 'ctl.sock');
  const server = await startIpcServer({ path });
  const st = statSync(path);
  t.ok(st.isSocket(), 'a socket');
  t.equal(st.mode & 0o777, 0o600, 'mode 0600');
  await server.close();
  t.notOk(existsSync(path), 'removed on close');
});

t.test('a stale socket is removed; a live daemon or a non-socket refuses the start', { skip: !posix && 'Unix sockets only' }, async (t) => {
  const dir = tmp(t);
  const path = join(dir, 'ctl.sock');
  staleSocket(path);
  await t.rejects(ipcRequest(path, 'status'), { code: 'NOT_RUNNING', message: `blockspeaker daemon is not running (nothing listens on ${path}: a stale socket)` });
  const first = await startIpcServer({ path });
  t.teardown(() => first.close());
  t.pass('started over a stale socket');
  await t.rejects(startIpcServer({ path }), IpcStartError);
  await t.rejects(startIpcServer({ path }), { message: `another blockspeaker daemon is already listening on ${path}` });
  t.equal(((await ipcRequest(path, 'status')) as { pid: number }).pid, process.pid, 'the first server still answers');

  const file = join(dir, 'regular');
  writeFileSync(file, 'precious');
  await t.rejects(startIpcServer({ path: file }), { message: `${file} exists and is not a socket; refusing to replace it` });
  t.equal(readFileSync(file, 'utf8'), 'precious', 'never deleted');
});

t.test('client errors say what is wrong', async (t) => {
  const dir = tmp(t);
  const missing = join(dir, 'blockspeaker.sock');
  const err = await new IpcClient(missing).request('status').catch((e: unknown) => e);
  t.type(err, IpcError);
  t.match(err, { code: 'NOT_RUNNING', message: `blockspeaker daemon is not running (no socket at ${missing})` });
  // A daemon that goes away mid-request fails the request rather than hanging it.
  const path = join(dir, 'ctl.sock');
  const server = await startIpcServer({ path, handlers: { hang: () => new Promise(() => undefined) } });
  const c = new IpcClient(path);
  const pending = c.request('hang');
  await new Promise((r) => setTimeout(r, 50));
  const failed = t.rejects(pending, { code: 'CLOSED' }); // before close(): the rejection may come while it runs
  await server.close();
  await failed;
});

t.test('Windows pipe names', async (t) => {
  t.equal(socketEndpoint('\\\\.\\pipe\\blockspeaker', 'win32'), '\\\\.\\pipe\\blockspeaker');
  t.equal(socketEndpoint('/run/blockspeaker.sock', 'win32'), '\\\\.\\pipe\\run-blockspeaker.sock');
  t.equal(netIpcPath('\\\\.\\pipe\\blockspeaker', 'win32'), 'blockspeaker', 'net-ipc adds the prefix itself');
  t.equal(socketEndpoint('/run/blockspeaker.sock', 'linux'), '/run/blockspeaker.sock');
  t.equal(netIpcPath('/run/blockspeaker.sock', 'linux'), '/run/blockspeaker.sock');
});

t.test('ipam.assign is idempotent per handle; release and check', async (t) => {
  const d = await startTestDaemon();
  t.teardown(() => d.close());
  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  const a = await c.call('ipam.assign', { containerId: 'c1', ifname: 'eth0', num4: 1 });
  t.equal(a.handle, 'c1.eth0');
  t.equal(a.existing, false);
  t.equal(a.ips.length, 1);
  t.match(a.ips[0], { family: 4, pool: 'pods', poolCidr: '10.99.0.0/24', prefixLen: 26, borrowed: false });
  const again = await c.call('ipam.assign', { containerId: 'c1', ifname: 'eth0', num4: 1 });
  t.equal(again.existing, true, 'a retried ADD');
  t.same(again.ips, a.ips, 'same addresses, nothing new allocated');
  const blocks = await d.ipam.blocks('node-a');
  t.equal(blocks.reduce((n, b) => n + b.allocated, 0), 1);

  // Concurrent retries for one handle never allocate twice.
  const [x, y] = await Promise.all([
    c.call('ipam.assign', { containerId: 'c2', ifname: 'eth0' }),
    c.call('ipam.assign', { containerId: 'c2', ifname: 'eth0' }),
  ]);
  t.same(x.ips, y.ips);
  t.equal((await d.ipam.blocks('node-a')).reduce((n, b) => n + b.allocated, 0), 2);

  t.same(await c.call('ipam.check', { handle: 'c1.eth0', ips: [`${a.ips[0]!.ip}/24`] }), { ok: true, held: [a.ips[0]!.ip], missing: [], extra: [] });
  const bad = await c.call('ipam.check', { handle: 'c1.eth0', ips: ['10.99.0.250'] });
  t.same(bad, { ok: false, held: [a.ips[0]!.ip], missing: ['10.99.0.250'], extra: [a.ips[0]!.ip] });

  t.same(await c.call('ipam.release', { handle: 'c1.eth0' }), { released: [a.ips[0]!.ip] });
  t.same(await c.call('ipam.release', { handle: 'c1.eth0' }), { released: [] }, 'release is idempotent');
  t.same(await c.call('ipam.release', { handle: 'never-existed.eth0' }), { released: [] });
  t.same((await c.call('ipam.check', { handle: 'c1.eth0', ips: [] })).ok, true, 'nothing held, nothing expected');

  await t.rejects(c.call('ipam.assign', { containerId: 'c3', ifname: 'eth0', num4: 1, num6: 1 }), { code: 'REMOTE', remoteCode: 'NO_POOL' });
  t.same((await c.call('ipam.check', { handle: 'c3.eth0', ips: [] })).held, [], 'all or nothing: no IPv4 left behind when IPv6 fails');
  await t.rejects(c.call('ipam.assign', { containerId: 'c4', ifname: 'eth0', num4: -1 }), { remoteCode: 'INVALID', message: /num4/ });
  await t.rejects(c.call('ipam.assign', { ifname: 'eth0' } as never), { remoteCode: 'INVALID', message: /containerId/ });
});

t.test('ipam.handles lists this node\'s handles, filtered by attributes', async (t) => {
  const d = await startTestDaemon({ hosts: [{ name: 'node-a', os: 'linux', labels: {} }, { name: 'node-b', os: 'linux', labels: {} }] });
  t.teardown(() => d.close());
  await d.ipam.autoAssign({ host: 'node-b', num4: 1, handle: 'other-node.eth0', attrs: { 'cni.network': 'k8s' } });
  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  await c.call('ipam.assign', { containerId: 'p1', ifname: 'eth0', attrs: { 'cni.network': 'k8s' } });
  await c.call('ipam.assign', { containerId: 'p2', ifname: 'net1', attrs: { 'cni.network': 'storage' } });
  await c.call('ipam.assign', { handle: 'cli-made' });
  const all = (await c.call('ipam.handles', {})).handles.map((h) => h.handle);
  t.same(all, ['cli-made', 'p1.eth0', 'p2.net1'], 'node-b\'s handle is not ours');
  const k8s = (await c.call('ipam.handles', { attrs: { 'cni.network': 'k8s' } })).handles;
  t.same(k8s.map((h) => h.handle), ['p1.eth0']);
  t.equal(k8s[0]!.ips.length, 1);
  t.same(k8s[0]!.attrs, { 'cni.network': 'k8s' });
});

t.test('CNI addressing: pool mode (default) and host mode, node gateway allocated once', async (t) => {
  const d = await startTestDaemon({ pools: [{ name: 'pods', cidr: '10.99.0.0/24', blockSize: 26 }, { name: 'pods6', cidr: 'fd00:99::/120', blockSize: 122 }] });
  t.teardown(() => d.close());
  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  const a = await c.call('ipam.assign', { containerId: 'c1', ifname: 'eth0', num4: 1, num6: 1, addressing: { routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }, { dst: '192.0.2.0/24', gw: '10.99.0.77' }] } });
  const gw4 = await c.call('ipam.gateway', { family: 4 });
  const gw6 = await c.call('ipam.gateway', { family: 6 });
  t.equal(gw4.pool, 'pods');
  t.equal(gw4.borrowed, false, 'from the node\'s own block');
  t.equal(gw4.block, a.ips[0]!.block, 'the same block as the pod');
  t.same(a.cni!.ips, [
    { family: 4, address: `${a.ips[0]!.ip}/24`, gateway: gw4.ip },
    { family: 6, address: `${a.ips[1]!.ip}/120`, gateway: gw6.ip },
  ]);
  t.same(a.cni!.routes, [
    { dst: '10.99.0.0/25', gw: gw4.ip },
    { dst: '10.99.0.128/25', gw: gw4.ip },
    { dst: 'fd00:99::/121', gw: gw6.ip },
    { dst: 'fd00:99::80/121', gw: gw6.ip },
    { dst: '0.0.0.0/0', gw: gw4.ip },
    { dst: '::/0', gw: gw6.ip },
    { dst: '192.0.2.0/24', gw: '10.99.0.77' },
  ]);
  const handles = (await c.call('ipam.handles', { attrs: { 'blockspeaker.role': 'gateway' } })).handles;
  t.same(handles.map((h) => h.handle).sort(), ['blockspeaker-gateway.node-a.pods', 'blockspeaker-gateway.node-a.pods6']);

  const b = await c.call('ipam.assign', { containerId: 'c2', ifname: 'eth0', addressing: { prefix: 'host' } });
  t.same(b.cni!.ips, [{ family: 4, address: `${b.ips[0]!.ip}/32`, gateway: gw4.ip }], 'the same gateway: allocated once');
  t.same(b.cni!.routes, [{ dst: `${gw4.ip}/32`, scope: 253 }, { dst: '10.99.0.0/24', gw: gw4.ip }]);

  const none = await c.call('ipam.assign', { containerId: 'c3', ifname: 'eth0', addressing: { gateway: 'none' } });
  t.same(none.cni!.ips, [{ family: 4, address: `${none.ips[0]!.ip}/24` }]);
  t.same(none.cni!.routes, []);
  const fixed = await c.call('ipam.assign', { containerId: 'c4', ifname: 'eth0', addressing: { gateway: ['10.99.0.254'], poolRoutes: false, routes: [{ dst: '0.0.0.0/0' }] } });
  t.same(fixed.cni!.routes, [{ dst: '0.0.0.0/0', gw: '10.99.0.254' }]);
  await t.rejects(c.call('ipam.assign', { containerId: 'c5', ifname: 'eth0', addressing: { routes: [{ dst: '10.0.0.1/8' }] } }), { remoteCode: 'INVALID', message: /route dst/ });
});

t.test('pool mode never gives a pod the pool\'s network or broadcast address', async (t) => {
  // One /28 pool = one block: the FIFO starts at the network address and ends at the broadcast address.
  const d = await startTestDaemon({ pools: [{ name: 'tiny', cidr: '10.98.0.0/28', blockSize: 28 }] });
  t.teardown(() => d.close());
  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  const got: string[] = [];
  for (let i = 0; i < 13; i++) {
    const r = await c.call('ipam.assign', { containerId: `c${i}`, ifname: 'eth0', addressing: {} });
    got.push(r.ips[0]!.ip);
  }
  t.notOk(got.includes('10.98.0.0') || got.includes('10.98.0.15'), `pods: ${got.join(' ')}`);
  t.equal(new Set(got).size, 13);
  // 16 addresses: 2 edges, 1 gateway, 13 pods. The next ask meets the broadcast address, parks it, and finds nothing.
  await t.rejects(c.call('ipam.assign', { containerId: 'c99', ifname: 'eth0', addressing: {} }), { remoteCode: 'NO_POOL', message: /could not assign/ });
  const parked = (await c.call('ipam.handles', {})).handles.find((h) => h.handle === 'blockspeaker-reserved.node-a');
  t.same(parked?.ips.sort(), ['10.98.0.0', '10.98.0.15'], 'parked under the reserved handle');
  const av = await c.call('ipam.available', {});
  t.match(av.v4, { free: 0, canClaim: false, borrowable: 0, pools: ['tiny'] });
});

t.test('ipam.available reports room for STATUS', async (t) => {
  const d = await startTestDaemon({ pools: [{ name: 'p', cidr: '10.97.0.0/27', blockSize: 28 }], hosts: [{ name: 'node-a', os: 'linux', labels: {} }, { name: 'node-b', os: 'linux', labels: {} }] });
  t.teardown(() => d.close());
  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  t.match((await c.call('ipam.available', {})).v4, { free: 0, canClaim: true, borrowable: 0 });
  await d.ipam.autoAssign({ host: 'node-b', num4: 1 });
  await d.ipam.autoAssign({ host: 'node-a', num4: 16 });
  t.match((await c.call('ipam.available', {})).v4, { free: 0, canClaim: false, borrowable: 15 }, 'pool full of blocks, node-b has room to borrow');
  await d.ipam.setConfig({ strictAffinity: true });
  t.match((await c.call('ipam.available', {})).v4, { borrowable: 0 });
});
