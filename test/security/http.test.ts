// Hardening, the status server: both listeners time out request heads, cap their connections and the header size,
// /routes caps ?limit=, a malformed %-escape is a 400, the status listener checks the Host header (DNS rebinding)
// while the metrics listener's paths do not, and 15,000 half-open connections leave the server's RSS where it was.
import t from 'tap';
import net from 'node:net';
import http from 'node:http';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { HTTP_LIMITS, MAX_ROUTE_LIMIT, StatusServer, type HttpLimits } from '../../src/status/http.ts';
import { Rib } from '../../src/rib/rib.ts';
import { makeAttrs } from '../../src/rib/attrs.ts';
import { parsePrefix } from '../../src/net/ip.ts';

function server(limits?: Partial<HttpLimits>, rib: Rib | null = null): StatusServer {
  const s = new StatusServer({
    version: 't', startedAt: Date.now(), node: () => ({ name: 'n', os: 'linux' }), bgp: () => null, peers: () => [], rib: () => rib,
  }, { limits });
  s.route('/metrics', () => ({ body: 'blockspeaker_ready 1\n', contentType: 'text/plain' }));
  s.route('/', () => ({ body: '<html></html>', contentType: 'text/html' }));
  return s;
}

/** A GET with a chosen Host header (fetch does not let one set it). */
function get(port: number, path: string, host = `127.0.0.1:${port}`): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type'] ?? ''), text }));
    });
    req.on('error', reject);
  });
}

/** A connection that sends nothing; resolves with what the server sent and when it closed (ms after connect). */
function silent(port: number, send = ''): { socket: net.Socket; closed: Promise<{ after: number; data: string }> } {
  const socket = net.connect(port, '127.0.0.1');
  let data = '';
  let t0 = Date.now();
  socket.on('connect', () => {
    t0 = Date.now();
    if (send) socket.write(send);
  });
  socket.on('data', (d) => (data += d));
  socket.on('error', () => {});
  const closed = new Promise<{ after: number; data: string }>((resolve) => socket.on('close', () => resolve({ after: Date.now() - t0, data })));
  return { socket, closed };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the defaults, as named constants', async (t) => {
  t.same(HTTP_LIMITS, {
    headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000, connectionsCheckingInterval: 1_000,
    maxConnections: 256, maxHeaderSize: 8192, maxHeadersCount: 64,
  });
  t.equal(MAX_ROUTE_LIMIT, 10_000);
  t.same(server().limits, HTTP_LIMITS, 'a server without overrides uses them');
  t.same(server({ headersTimeout: 5 }).limits, { ...HTTP_LIMITS, headersTimeout: 5 });
});

t.test('a head that never comes (or never ends) is closed within headersTimeout, on both listeners', async (t) => {
  const s = server({ headersTimeout: 400, requestTimeout: 800, connectionsCheckingInterval: 100 });
  t.teardown(() => s.close());
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  for (const port of [main.port, m.port]) {
    const none = silent(port);
    const half = silent(port, 'GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    for (const [what, c] of [['no bytes', none], ['half a head', half]] as const) {
      const r = await Promise.race([c.closed, sleep(3000).then(() => null)]);
      t.ok(r, `${what} on ${port}: closed by the server`);
      if (!r) c.socket.destroy();
      else {
        t.ok(r.after < 2000, `${what}: within the timeout and one check interval (${r.after} ms)`);
        t.match(r.data, /^(HTTP\/1\.1 408 |$)/, `${what}: a 408 or nothing`);
      }
    }
    t.match(await get(port, '/healthz'), { status: 200 }, 'and it still answers');
  }
});

t.test('oversized heads are refused', async (t) => {
  const s = server();
  t.teardown(() => s.close());
  const { port } = await s.listen('127.0.0.1', 0);
  const big = silent(port, `GET /status HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(HTTP_LIMITS.maxHeaderSize)}\r\n\r\n`);
  t.match((await big.closed).data, /^HTTP\/1\.1 431 /, 'a head over maxHeaderSize: 431');
});

t.test('maxConnections refuses the excess at once, on both listeners', async (t) => {
  const N = 10;
  const s = server({ maxConnections: N });
  t.teardown(() => s.close());
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  for (const port of [main.port, m.port]) {
    const conns = [];
    for (let i = 0; i < N + 5; i++) {
      conns.push(silent(port));
      await sleep(5); // in order, so the server sees the first N first
    }
    await sleep(500);
    const closed = await Promise.all(conns.map((c) => Promise.race([c.closed.then(() => true), sleep(0).then(() => false)])));
    t.equal(closed.filter(Boolean).length, 5, `${port}: the 5 over ${N} closed promptly`);
    t.same(closed.slice(0, N), Array(N).fill(false), 'the first N kept');
    const refused = await get(port, '/healthz').catch((e: Error) => e);
    t.type(refused, Error, 'one more request while full: refused');
    for (const c of conns) c.socket.destroy();
    await sleep(100);
    t.match(await get(port, '/healthz'), { status: 200 }, 'answers again once they are gone');
  }
});

t.test('/routes caps limit', async (t) => {
  const rib = new Rib();
  rib.addSource('local', { type: 'local', routerId: 1, address: null, asn: 65000 });
  const attrs = makeAttrs({});
  for (let i = 0; i < MAX_ROUTE_LIMIT + 50; i++) rib.update('local', parsePrefix(`10.${i >> 8}.${i & 255}.0/24`), attrs);
  rib.flush();
  const s = server(undefined, rib);
  t.teardown(() => s.close());
  const { port } = await s.listen('127.0.0.1', 0);
  const json = async (path: string) => JSON.parse((await get(port, path)).text);
  for (const limit of ['0', String(MAX_ROUTE_LIMIT + 1), '1000000000']) {
    const r = await json(`/routes?limit=${limit}`);
    t.match(r, { count: MAX_ROUTE_LIMIT, truncated: true, capped: true, limit: MAX_ROUTE_LIMIT }, `limit=${limit}: capped and says so`);
    t.equal(r.routes.length, MAX_ROUTE_LIMIT);
  }
  const five = await json('/routes?limit=5');
  t.same(Object.keys(five), ['count', 'truncated', 'routes'], 'a limit under the cap: the reply as before');
  t.match(five, { count: 5, truncated: true });
  t.match(await json(`/routes?limit=${MAX_ROUTE_LIMIT}`), { count: MAX_ROUTE_LIMIT, truncated: true }, 'exactly the cap: not "capped"');
  t.notOk('capped' in (await json('/routes')), 'the default limit is not "capped"');
});

t.test('a malformed %-escape is a 400 with a short plain-text body', async (t) => {
  const s = server();
  t.teardown(() => s.close());
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  for (const path of ['/peers/%zz', '/peers/10.0.0.1%', '/peers/%E0%A4%A', '/routes?prefix=%zz', '/status?x=%', '/%zz', '/peers/%C3%28']) {
    const r = await get(main.port, path);
    t.equal(r.status, 400, `${path}: 400`);
    t.match(r.type, /^text\/plain/);
    t.match(r.text, /malformed percent-escape/);
    t.ok(r.text.length < 100, 'short');
  }
  t.match(await get(m.port, '/metrics?x=%zz'), { status: 400 }, 'on the metrics listener too');
  t.match(await get(main.port, '/peers/%31%30.0.0.1'), { status: 404, text: /no peer 10\.0\.0\.1/ }, 'good escapes still decode');
});

t.test('Host check: the status listener answers loopback names and its own address only; the metrics paths anyone', async (t) => {
  const s = server();
  t.teardown(() => s.close());
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  for (const host of ['evil.example', 'evil.example:9179', 'localhost.evil.example', '127.0.0.1.nip.io', '10.0.0.1:9179', '[fd00::1]:9179', 'a b', '::1']) {
    for (const path of ['/status', '/', '/peers', '/routes']) {
      const r = await get(main.port, path, host);
      t.equal(r.status, 421, `Host ${host} ${path}: refused`);
      t.match(r.text, /not accepted.*localhost, 127\.x\.x\.x and \[::1\]/);
    }
  }
  for (const host of ['localhost:9179', 'localhost', 'LOCALHOST:1', 'localhost.', '127.0.0.1', `127.0.0.1:${main.port}`, '127.3.4.5:80', '[::1]:9179', '[::1]']) {
    t.equal((await get(main.port, '/status', host)).status, 200, `Host ${host}: accepted`);
  }
  for (const path of ['/metrics', '/healthz', '/readyz']) {
    const r = await get(m.port, path, 'evil.example');
    t.not(r.status, 421, `metrics listener ${path} with Host evil.example: served (${r.status})`);
  }
  t.match(await get(m.port, '/metrics', '10.0.0.7:9180'), { status: 200, text: 'blockspeaker_ready 1\n' }, 'a scraper by node IP');
  t.match(await get(main.port, '/healthz', 'evil.example'), { status: 200 }, 'the metrics paths on the status listener: no check either');
});

t.test('15,000 half-open connections leave the server answering and its RSS within 20 MB', async (t) => {
  const child = fork(fileURLToPath(new URL('fixtures/http-server.ts', import.meta.url)), [], {
    execArgv: ['--import=tsx', '--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  t.teardown(() => child.kill());
  const next = () => new Promise<Record<string, number>>((resolve) => child.once('message', (m) => resolve(m as Record<string, number>)));
  const { metrics: port } = await next();
  const rss = async () => (child.send('rss'), (await next()).rss!);
  t.match(await get(port, '/healthz'), { status: 200 });
  const before = await rss();
  const conns: ReturnType<typeof silent>[] = [];
  for (let i = 0; i < 15_000; i++) {
    conns.push(silent(port));
    if (i % 200 === 199) await sleep(20);
  }
  await sleep(500);
  const during = await rss();
  for (const c of conns) c.socket.destroy();
  await Promise.all(conns.map((c) => c.closed));
  await sleep(200);
  t.match(await get(port, '/healthz'), { status: 200, text: 'ok\n' }, 'still answers');
  const after = await rss();
  const mb = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
  t.comment(`RSS before ${mb(before)} MB, with 15,000 connections open ${mb(during)} MB, after ${mb(after)} MB`);
  t.ok(after - before < 20 * 2 ** 20, `RSS grew ${mb(after - before)} MB after they closed (< 20)`);
  t.ok(during - before < 20 * 2 ** 20, `RSS grew ${mb(during - before)} MB while they were open (< 20)`);
});
