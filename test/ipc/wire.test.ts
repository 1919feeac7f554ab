// net-ipc's wire format without the net-ipc package (src/ipc/wire.ts): framing against an oracle, and the server
// against the real net-ipc client and against clients that break the protocol.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import netIpc from 'net-ipc';
import { netIpcPath } from './net-ipc-path.ts';
import { startIpcServer } from '../../src/ipc/server.ts';
import { Deframer, frame, type Packet } from '../../src/ipc/wire.ts';

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'bs-wire-t-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The oracle: the length as base-128 digits, most significant first, high bit on the last, written out longhand. */
function oracleTag(n: number): number[] {
  const digits: number[] = [];
  do {
    digits.unshift(n % 128);
    n = Math.floor(n / 128);
  } while (n > 0);
  digits[digits.length - 1]! += 128;
  return digits;
}

t.test('frame: length tag as net-ipc writes it, then the JSON', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 40_000 }), (s) => {
      const p: Packet = { t: 2, d: s, n: 'x' };
      const body = Buffer.from(JSON.stringify(p));
      const f = frame(p);
      const tag = oracleTag(body.length);
      return Buffer.compare(f, Buffer.concat([Buffer.from(tag), body])) === 0;
    }),
    { numRuns: 200 },
  );
});

t.test('Deframer: packets cut at any byte boundaries come out whole and in order', async (t) => {
  const packetArb = fc.record({ t: fc.integer({ min: 0, max: 6 }), d: fc.jsonValue(), n: fc.string({ maxLength: 8 }) });
  fc.assert(
    fc.property(fc.array(packetArb, { maxLength: 8 }), fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 20 }), (packets, cuts) => {
      const stream = Buffer.concat(packets.map((p) => frame(p as Packet)));
      const d = new Deframer();
      const got: Packet[] = [];
      let at = 0;
      for (let i = 0; at < stream.length; i++) {
        const len = cuts[i % cuts.length]!;
        got.push(...d.push(stream.subarray(at, at + len)));
        at += len;
      }
      t.same(got, JSON.parse(JSON.stringify(packets)));
      return got.length === packets.length;
    }),
    { numRuns: 150 },
  );
});

t.test('Deframer: a frame that is not JSON is an error, not a hang', async (t) => {
  const body = Buffer.from('{nope');
  t.throws(() => new Deframer().push(Buffer.concat([Buffer.from([body.length | 128]), body])), { name: 'WireError', message: 'a frame that is not JSON' });
  const noType = Buffer.from('{"d":1}');
  t.throws(() => new Deframer().push(Buffer.concat([Buffer.from([noType.length | 128]), noType])), { message: 'a frame without a packet type' });
});

t.test('server: the real net-ipc client gets answers and pongs', async (t) => {
  const path = join(tmp(t), 'ctl.sock');
  const server = await startIpcServer({ path, handlers: { add: (p: { a: number; b: number }) => p.a + p.b } });
  t.teardown(() => server.close());
  const client = new netIpc.Client({ path: netIpcPath(path), reconnect: false });
  await client.connect();
  const big = 'x'.repeat(300_000); // a multi-digit length tag, split over many reads
  const [sum, unknown, echoed] = await Promise.all([
    client.request({ m: 'add', p: { a: 2, b: 3 } }),
    client.request({ m: 'nope' }),
    client.request({ m: 'status', p: { big } }),
  ]);
  t.same(sum, { ok: true, r: 5 });
  t.match(unknown, { ok: false, error: { code: 'UNKNOWN_METHOD' } });
  t.match(echoed, { ok: true, r: { pid: process.pid } });
  const rtt = await client.ping('hello');
  t.type(rtt, 'number', 'ping answered with a pong');
  await client.close();
});

t.test('server: a client that does not speak the protocol is dropped and reported', async (t) => {
  const path = join(tmp(t), 'ctl.sock');
  const errors: string[] = [];
  const server = await startIpcServer({ path, handlers: {}, onError: (e) => errors.push((e as Error).message) });
  t.teardown(() => server.close());
  const closed = (payload: Buffer) =>
    new Promise<void>((resolve) => {
      const s = net.connect({ path }, () => s.write(payload));
      s.on('error', () => undefined);
      s.on('close', () => resolve());
    });
  await closed(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
  const junk = Buffer.from('{junk');
  await closed(Buffer.concat([Buffer.from('IPC'), Buffer.from([junk.length | 128]), junk]));
  t.match(errors, [/no "IPC" tag/, /a frame that is not JSON; connection closed/]);
  // The server still serves well-behaved clients afterwards.
  const client = new netIpc.Client({ path: netIpcPath(path), reconnect: false });
  await client.connect();
  t.match(await client.request({ m: 'methods' }), { ok: true, r: ['methods', 'status'] });
  await client.close();
});
