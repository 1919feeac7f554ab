// The status endpoint on its own: a StatusServer over a hand-filled RIB and fake peers, on an ephemeral port.
import t from 'tap';
import v8 from 'node:v8';
import { StatusServer } from '../../src/status/http.ts';
import { Rib } from '../../src/rib/rib.ts';
import { makeAttrs, asSequence } from '../../src/rib/attrs.ts';
import { parseIP, parsePrefix } from '../../src/net/ip.ts';
import type { PeerStatus } from '../../src/bgp/peer.ts';

const rib = new Rib();
rib.addSource('local', { type: 'local', routerId: 1, address: null, asn: 65000 });
rib.addSource('10.0.0.2', { type: 'ebgp', routerId: 2, address: parseIP('10.0.0.2'), asn: 65002 });
rib.addSource('10.0.0.3', { type: 'ebgp', routerId: 3, address: parseIP('10.0.0.3'), asn: 65003 });
rib.update('local', parsePrefix('10.1.0.0/24'), makeAttrs({}));
const viaB = makeAttrs({ asPath: [asSequence(65002)], nextHop: parseIP('10.0.0.2'), med: 5 });
const viaC = makeAttrs({ asPath: [asSequence(65003, 65009)], nextHop: parseIP('10.0.0.3') });
rib.update('10.0.0.2', parsePrefix('10.2.0.0/16'), viaB);
rib.update('10.0.0.3', parsePrefix('10.2.0.0/16'), viaC);
rib.update('10.0.0.2', parsePrefix('10.2.3.0/24'), viaB);
rib.update('10.0.0.2', parsePrefix('fd00:2::/48'), makeAttrs({ asPath: [asSequence(65002)], nextHop: parseIP('fd00::2') }));
rib.flush();

const peer = { address: '10.0.0.2', asn: 65002, state: 'Established' } as PeerStatus;
let now = 1_000_000;
const server = new StatusServer({
  version: '9.9.9',
  startedAt: now - 42_000,
  node: () => ({ name: 'node-x', os: 'linux' }),
  bgp: () => ({ asn: 65000, routerId: '10.0.0.1' }),
  peers: () => [peer, { ...peer, address: 'fd00::3', state: 'Active' }],
  rib: () => rib,
  now: () => now,
});
t.teardown(() => server.close());

t.test('endpoints', async (t) => {
  const { port } = await server.listen('127.0.0.1', 0);
  const get = async (p: string, method = 'GET') => {
    const r = await fetch(`http://127.0.0.1:${port}${p}`, { method });
    const text = await r.text();
    return { status: r.status, type: r.headers.get('content-type'), body: text && r.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : text };
  };

  t.same((await get('/status')).body, {
    node: 'node-x', os: 'linux', asn: 65000, routerId: '10.0.0.1', version: '9.9.9', node_version: process.version,
    runtime: { execArgv: process.execArgv, nodeOptions: process.env.NODE_OPTIONS ?? null, heapSizeLimitMB: Math.round((v8.getHeapStatistics().heap_size_limit / 2 ** 20) * 10) / 10 },
    startedAt: new Date(now - 42_000).toISOString(), uptime: 42, peers: { configured: 2, established: 1 }, routes: 4,
  });
  now += 3000;
  t.equal((await get('/status')).body.uptime, 45, 'uptime from the injected clock');

  // A source that counts its peers itself: /status asks it rather than building every peer's status.
  let built = 0;
  const counted = new StatusServer({
    version: '9.9.9', startedAt: now, node: () => ({ name: 'node-y', os: 'linux' }), bgp: () => null, rib: () => null,
    peers: () => { built++; return []; },
    peerCounts: () => ({ configured: 7, established: 5 }),
  });
  t.teardown(() => counted.close());
  const { port: port2 } = await counted.listen('127.0.0.1', 0);
  const st2 = await (await fetch(`http://127.0.0.1:${port2}/status`)).json();
  t.same(st2.peers, { configured: 7, established: 5 }, '/status takes the counts from peerCounts');
  t.equal(built, 0, 'and builds no peer status for them');
  t.match(await get('/healthz'), { status: 200, body: 'ok\n', type: /^text\/plain/ });
  t.same((await get('/peers')).body.map((p: PeerStatus) => p.address), ['10.0.0.2', 'fd00::3']);
  t.match((await get('/peers/FD00:0::3')).body, { address: 'fd00::3', state: 'Active' }, 'address in any spelling');
  t.match((await get('/peers/10.0.0.2/')).body, { address: '10.0.0.2' }, 'trailing slash');
  t.match(await get('/peers/10.0.0.9'), { status: 404, body: { error: 'no peer 10.0.0.9' } });

  const all = (await get('/routes')).body;
  t.same(all.routes.map((r: { prefix: string }) => r.prefix), ['10.1.0.0/24', '10.2.0.0/16', '10.2.3.0/24', 'fd00:2::/48']);
  t.same((await get('/routes?family=ipv6')).body.routes.map((r: { prefix: string }) => r.prefix), ['fd00:2::/48']);
  t.same((await get('/routes?family=ipv4&limit=2')).body.count, 2);
  t.equal((await get('/routes?family=ipv4&limit=2')).body.truncated, true);
  t.equal((await get('/routes?limit=0')).body.count, 4, 'limit=0: everything up to the cap (test/security/http.test.ts)');

  const exact = (await get('/routes?prefix=10.2.0.0/16')).body;
  t.same(exact, {
    prefix: '10.2.0.0/16',
    paths: [
      { source: '10.0.0.2', peer: '10.0.0.2', type: 'ebgp', best: true, stale: false, attributes: { ORIGIN: 'IGP', AS_PATH: '65002', NEXT_HOP: '10.0.0.2', MULTI_EXIT_DISC: 5 } },
      { source: '10.0.0.3', peer: '10.0.0.3', type: 'ebgp', best: false, stale: false, attributes: { ORIGIN: 'IGP', AS_PATH: '65003 65009', NEXT_HOP: '10.0.0.3' } },
    ],
  }, 'every candidate path, best first');
  t.match((await get('/routes?lpm=10.2.3.4')).body, { address: '10.2.3.4', prefix: '10.2.3.0/24' });
  t.match((await get('/routes?lpm=10.2.99.1')).body, { prefix: '10.2.0.0/16', paths: [{ best: true, peer: '10.0.0.2' }] });
  t.match((await get('/routes?lpm=fd00:2::1')).body, { prefix: 'fd00:2::/48', paths: [{ attributes: { NEXT_HOP: 'fd00::2' } }] });
  t.match(await get('/routes?lpm=192.0.2.1'), { status: 404, body: { error: 'no route covers 192.0.2.1' } });
  t.match(await get('/routes?lpm=nope'), { status: 400 });
  t.match(await get('/routes?prefix=10.2.0.0/16&lpm=10.2.0.1'), { status: 400, body: { error: /not both/ } });
  t.match(await get('/routes?limit=-1'), { status: 400 });
  t.match(await get('/metrics'), { status: 404, body: { error: /no such endpoint/ } });
  t.match(await get('/status', 'DELETE'), { status: 405 });
  t.match(await get('/status', 'HEAD'), { status: 200, body: '' });

  server.route('/extra', () => ({ body: { added: true } }));
  t.same((await get('/extra')).body, { added: true }, 'later parts register their own endpoints');
  server.route('/boom', () => {
    throw new Error('bug');
  });
  t.match(await get('/boom'), { status: 500, body: { error: 'bug' } });
});
