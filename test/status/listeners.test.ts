// The status server's two listeners: the main one serves every path, the metrics one only /metrics, /healthz and
// /readyz (the same handlers) and a short plain-text 404 for the rest; each opens, reports and closes on its own.
import t from 'tap';
import { METRICS_PATHS, StatusServer } from '../../src/status/http.ts';

function server(): StatusServer {
  const s = new StatusServer({
    version: 't', startedAt: Date.now(), node: () => ({ name: 'n', os: 'linux' }), bgp: () => null, peers: () => [], rib: () => null,
  });
  s.route('/readyz', () => ({ status: 503, body: { ready: false } }));
  s.route('/metrics', () => ({ body: 'blockspeaker_ready 0\n', contentType: 'text/plain' }));
  s.route('/', () => ({ body: '<html></html>', contentType: 'text/html' }));
  return s;
}

async function get(port: number, path: string, method = 'GET') {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text() };
}

t.test('the metrics listener serves the metrics paths only, with the same handlers', async (t) => {
  const s = server();
  t.teardown(() => s.close());
  t.same([...METRICS_PATHS].sort(), ['/healthz', '/metrics', '/readyz']);
  t.equal(s.metricsAddress(), null, 'no metrics listener until opened');
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  t.same(s.address(), main);
  t.same(s.metricsAddress(), m);
  t.not(m.port, main.port);

  for (const port of [main.port, m.port]) {
    t.match(await get(port, '/healthz'), { status: 200, text: 'ok\n' }, `/healthz on ${port}`);
    t.match(await get(port, '/readyz'), { status: 503, text: /"ready": false/ }, `/readyz on ${port}: the handler's own status`);
    t.match(await get(port, '/metrics?x=1'), { status: 200, text: 'blockspeaker_ready 0\n' }, `/metrics on ${port}`);
    t.match(await get(port, '/metrics/'), { status: 200 }, 'trailing slash as on the main listener');
    t.match(await get(port, '/healthz', 'HEAD'), { status: 200, text: '' });
    t.match(await get(port, '/healthz', 'POST'), { status: 405 }, 'methods as on the main listener');
  }
  for (const path of ['/', '/status', '/peers', '/peers/10.0.0.1', '/routes', '/routes?lpm=10.0.0.1', '/nope', '/metricsx', '/healthz/x']) {
    const r = await get(m.port, path);
    t.equal(r.status, 404, `${path}: 404 on the metrics listener`);
    t.match(r.type, /^text\/plain/);
    t.match(r.text, /status\.metricsListen.*\/metrics, \/healthz and \/readyz only.*status address \(status\.listen\)/);
    t.ok(r.text.length < 200, 'a short body');
    t.equal((await get(m.port, path, 'POST')).status, 404, `${path}: 404 for other methods too`);
  }
  t.match(await get(main.port, '/status'), { status: 200 }, 'the main listener still serves everything');
  t.match(await get(main.port, '/'), { status: 200, text: '<html></html>' });
});

t.test('each listener closes on its own; close() closes both', async (t) => {
  const s = server();
  t.teardown(() => s.close());
  const main = await s.listen('127.0.0.1', 0);
  const m = await s.listenMetrics('127.0.0.1', 0);
  await t.rejects(s.listenMetrics('127.0.0.1', 0), /metrics listener is already open/);
  await s.close('metrics');
  t.equal(s.metricsAddress(), null);
  await t.rejects(get(m.port, '/healthz'), 'the metrics port is closed');
  t.match(await get(main.port, '/healthz'), { status: 200 }, 'the main one still answers');
  const m2 = await s.listenMetrics('127.0.0.1', 0);
  t.match(await get(m2.port, '/healthz'), { status: 200 }, 'reopened');
  await s.close();
  t.equal(s.address(), null);
  t.equal(s.metricsAddress(), null);
  await t.rejects(get(main.port, '/healthz'));
  await t.rejects(get(m2.port, '/healthz'));
});
