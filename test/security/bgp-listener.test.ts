// Connections to the BGP listener from addresses that are not peers. Each is closed at once (the
// speaker reads and sends nothing and keeps no socket, as BIRD does), and the log gets at most one line a minute per
// address, carrying the count since that address's last line; the tracking is bounded (src/bgp/refused-log.ts) so a
// scan from many sources cannot grow it. A configured peer still comes up afterwards.
import t from 'tap';
import * as net from 'node:net';
import { RefusedLog } from '../../src/bgp/refused-log.ts';
import { Speaker } from '../../src/bgp/speaker.ts';
import { encodeKeepalive } from '../../src/bgp/codec/index.ts';
import { RawPeer, freePort, waitFor } from '../bgp/raw-peer.ts';

t.test('RefusedLog: one line per address per interval with the count since the last one; bounded', async (t) => {
  const log = new RefusedLog(4, 60_000, 3);
  t.same(log.note('a', 0), { address: 'a', count: 1 }, 'the first refusal is logged');
  for (let i = 1; i < 100; i++) t.equal(log.note('a', i * 100), null);
  t.ok(log.waiting(), 'a count waits');
  t.same(log.flush(59_999), [], 'not before the minute is up');
  t.same(log.note('a', 60_000), { address: 'a', count: 100 }, 'a minute later: the 99 refused since, and this one');
  t.notOk(log.waiting());
  t.equal(log.note('a', 60_001), null);
  t.same(log.flush(120_000), [{ address: 'a', count: 1 }], 'an address gone quiet: its count at the next flush after its minute');
  t.same(log.flush(200_000), [], 'and nothing more');

  // At most 3 new addresses get a line per minute; the others are counted together.
  const lines = ['b', 'c', 'd', 'e', 'f'].map((x) => log.note(x, 300_000));
  t.same(lines, [{ address: 'b', count: 1 }, { address: 'c', count: 1 }, { address: 'd', count: 1 }, null, null]);
  t.same(log.flush(300_000, true), [{ address: null, count: 2 }], 'the untracked ones as one line');
  // At most 4 tracked (a, b, c, d): the least recently refused goes first, a waiting count joining the others.
  t.same(log.note('c', 360_000), { address: 'c', count: 1 }, 'c: its minute is up');
  t.equal(log.note('c', 360_001), null, 'c: a count waits');
  t.same(log.note('b', 360_002), { address: 'b', count: 1 });
  for (const [x, at] of [['e', 360_003], ['f', 360_004], ['g', 360_005]] as const) t.same(log.note(x, at), { address: x, count: 1 }, `${x}: new, a line`);
  t.equal(log.size, 4, 'a, d, then c (with its waiting count) evicted for e, f, g');
  t.equal(log.note('h', 360_006), null, 'h: over this minute\'s 3 new lines');
  t.equal(log.note('c', 360_007), null, 'c: forgotten, so new again, and over the 3');
  t.same(log.flush(360_008, true), [{ address: null, count: 3 }], "at stop: c's waiting count and h's and c's refusals, as one line");
  t.equal(log.total, 115, 'every refusal counted');

  // A scan from many sources: memory and lines stay bounded.
  const big = new RefusedLog();
  let n = 0;
  for (let minute = 0; minute < 30; minute++) {
    for (let i = 0; i < 5000; i++) if (big.note(`fd00::${minute}:${i}`, minute * 60_000 + i)) n++;
  }
  t.ok(big.size <= 1024, `tracked addresses bounded (${big.size})`);
  t.equal(n, 30 * 100, '100 new addresses a minute get a line');
  t.same(big.flush(30 * 60_000, true), [{ address: null, count: 30 * 4900 }], 'the rest: one line');
});

/** Connect from `from`, send nothing (or an OPEN-sized KEEPALIVE burst), never close our side: what happens. */
function probe(port: number, from: string, send: boolean): Promise<{ bytes: number; how: string }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from, allowHalfOpen: true });
    s.on('connect', () => {
      if (send) s.write(Buffer.concat([encodeKeepalive(), encodeKeepalive()]));
    });
    s.on('data', (b) => {
      bytes += b.length;
    });
    // The speaker closes: FIN ('end'), or a reset when it left our bytes unread.
    s.on('end', () => {
      s.destroy();
      resolve({ bytes, how: 'end' });
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNRESET') resolve({ bytes, how: 'reset' });
      else reject(e);
    });
  });
}

async function probes(port: number, from: (i: number) => string, count: number, concurrency = 100): Promise<{ bytes: number; closed: number }> {
  let next = 0;
  let bytes = 0;
  let closed = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const r = await probe(port, from(i), i % 2 === 1);
      bytes += r.bytes;
      closed++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { bytes, closed };
}

t.test('3,000 connections from an address that is not a peer: each closed at once, one log line, the peer still comes up', async (t) => {
  const port = await freePort();
  let clock = 1_000_000;
  const info: string[] = [];
  const speaker = new Speaker(
    { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port }, peers: [{ address: '127.0.0.2', asn: 65002, passive: true }] },
    { random: () => 0.5, now: () => clock, logger: { debug() {}, info: (m) => info.push(m), warn() {}, error() {} } },
  );
  await speaker.start();
  let stopped = false;
  t.teardown(() => (stopped ? undefined : speaker.stop({ graceful: false })));
  const server = (speaker as unknown as { listener: { socket: net.Server } }).listener.socket;
  const connections = () => new Promise<number>((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
  let accepted = 0;
  server.on('connection', () => accepted++);

  const r = await probes(port, () => '127.0.0.9', 3000);
  t.equal(r.closed, 3000, 'all 3,000 closed by the speaker (we never closed our side)');
  t.equal(accepted, 3000, 'each one was accepted by the listener');
  t.equal(r.bytes, 0, 'not one byte sent back: no OPEN, no NOTIFICATION');
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(await connections(), 0, 'the speaker holds none of them (no linger after its close)');
  const refused = (addr: string) => info.filter((l) => l.includes(` from ${addr} refused`));
  t.same(refused('127.0.0.9'), ['connection from 127.0.0.9 refused: not a configured peer'], 'one log line for 3,000 connections in the same minute');

  // Other addresses: a line each. A minute later the first address's line carries what was refused since.
  for (const a of ['127.0.0.10', '127.0.0.11', '127.0.0.12']) await probes(port, () => a, 20, 10);
  for (const a of ['127.0.0.10', '127.0.0.11', '127.0.0.12']) t.equal(refused(a).length, 1, `${a}: one line`);
  clock += 60_000;
  await probes(port, () => '127.0.0.9', 1, 1);
  t.same(refused('127.0.0.9').slice(1), ['3000 connections from 127.0.0.9 refused: not a configured peer'],
    'a minute later: the count since the last line (2,999 then, and this one)');

  // Many sources (the whole of 127/8 is loopback): at most 100 new addresses a minute get their own line.
  const before = info.length;
  await probes(port, (i) => `127.1.${(i >> 7) + 1}.${(i & 127) + 1}`, 1200, 100);
  const perSource = info.slice(before).filter((l) => /from 127\.1\./.test(l));
  t.equal(perSource.length, 100, 'a scan from 1,200 addresses: 100 lines');

  // The configured peer.
  const ok = await RawPeer.connect(port, '127.0.0.1', '127.0.0.2');
  await ok.establish();
  await waitFor(() => speaker.peers()[0].state === 'Established', 'the configured peer Established');
  t.pass('the configured peer comes up');

  await speaker.stop({ graceful: false });
  stopped = true;
  t.same(info.filter((l) => /refused from other addresses|from 127\.0\.0\.1[012] refused/.test(l)).slice(-4).sort(), [
    '1100 connections refused from other addresses: not configured peers (not logged one by one)',
    '19 connections from 127.0.0.10 refused: not a configured peer',
    '19 connections from 127.0.0.11 refused: not a configured peer',
    '19 connections from 127.0.0.12 refused: not a configured peer',
  ], 'at stop, the counts still waiting are logged');
});
