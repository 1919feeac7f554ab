// Hardening: the control socket's per-connection limits against a real server. A frame announcing 48 MB is
// refused from its length tag (within 50 ms of the server's CPU, measured in the server's own process), a frame under
// the limit still works, frames cut anywhere decode the same, an idle connection is closed, and requests over the
// in-flight cap are answered BUSY without running.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { IpcClient } from '../../src/ipc/client.ts';
import { IPC_IDLE_TIMEOUT_MS, IPC_MAX_FRAME_BYTES, IPC_MAX_IN_FLIGHT, startIpcServer, type IpcServerOptions } from '../../src/ipc/server.ts';
import { Deframer, frame, FrameTooLargeError, INIT_TAG, T_CONNECTION, T_END, T_REQUEST, T_RESPONSE, type Packet } from '../../src/ipc/wire.ts';

const MiB = 1024 * 1024;

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'bs-sec-ipc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function server(t: Test, opts: Omit<IpcServerOptions, 'path'> = {}) {
  const errors: string[] = [];
  const s = await startIpcServer({ path: join(tmp(t), 'ctl.sock'), onError: (e) => errors.push((e as Error)?.message ?? String(e)), ...opts });
  t.teardown(() => s.close());
  return { s, errors };
}

/** The length tag net-ipc puts before a body of `n` bytes (base-128, most significant first, high bit on the last). */
function tag(n: number): Buffer {
  const d: number[] = [];
  do {
    d.unshift(n % 128);
    n = Math.floor(n / 128);
  } while (n > 0);
  d[d.length - 1]! |= 128;
  return Buffer.from(d);
}

const hello = () => Buffer.concat([Buffer.from(INIT_TAG), frame({ t: T_CONNECTION, d: { id: null } })]);

/** A client on a bare socket: what it receives, decoded, and when the server closes. */
function rawClient(endpoint: string) {
  const sock = net.connect({ path: endpoint });
  const d = new Deframer();
  const packets: Packet[] = [];
  const waiters: (() => void)[] = [];
  sock.on('data', (c) => {
    packets.push(...d.push(c));
    waiters.splice(0).forEach((w) => w());
  });
  sock.on('error', () => undefined); // EPIPE / ECONNRESET once the server closes on us
  const closed = new Promise<void>((r) => sock.once('close', () => r()));
  const until = (pred: (ps: Packet[]) => boolean) =>
    new Promise<void>((r) => {
      const check = () => (pred(packets) ? r() : waiters.push(check));
      check();
    });
  /** Write and wait until the bytes are handed to the kernel (or the socket fails). */
  const write = (b: Buffer) => new Promise<boolean>((r) => (sock.destroyed ? r(false) : sock.write(b, (err) => r(!err))));
  return { sock, packets, closed, until, write };
}

const ended = (ps: Packet[]) => ps.find((p) => p.t === T_END) as { d: { m: string } } | undefined;

t.test('the defaults are the documented ones', async (t) => {
  t.equal(IPC_MAX_FRAME_BYTES, 1_048_576, '1 MiB');
  t.equal(IPC_IDLE_TIMEOUT_MS, 300_000, '5 minutes');
  t.equal(IPC_MAX_IN_FLIGHT, 64);
});

t.test('a frame announcing 48 MB is refused from its tag: connection closed with an END packet, < 50 ms of server CPU', async (t) => {
  // The server runs in a child so that process.cpuUsage() there counts the server alone, not this attacker.
  const dir = tmp(t);
  const path = join(dir, 'ctl.sock');
  const serverUrl = pathToFileURL(resolve('src/ipc/server.ts')).href;
  const code = `
    import { startIpcServer } from ${JSON.stringify(serverUrl)};
    const errors = [];
    const s = await startIpcServer({ path: process.env.BS_PATH, onError: (e) => errors.push(String(e?.message ?? e)),
      handlers: { cpu: () => process.cpuUsage(), rss: () => process.memoryUsage().rss, errors: () => errors, echo: (p) => p } });
    process.stdout.write(JSON.stringify({ endpoint: s.endpoint }) + '\\n');
    process.stdin.on('end', () => s.close().then(() => process.exit(0)));
    process.stdin.resume();`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { env: { ...process.env, BS_PATH: path }, stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.stdin.end();
    setTimeout(() => child.kill(), 2000).unref();
  });
  const endpoint = await new Promise<string>((res, rej) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const nl = out.indexOf('\n');
      if (nl >= 0) res(JSON.parse(out.slice(0, nl)).endpoint);
    });
    child.once('exit', (c) => rej(new Error(`server child exited (${c})`)));
  });

  const c = new IpcClient(path, { timeoutMs: 10_000 });
  t.teardown(() => c.close());
  type Cpu = { user: number; system: number };
  const cpu = async () => c.request<Cpu>('cpu');
  await c.request('echo', { warm: 'up'.repeat(1000) });
  await cpu();
  const rssBefore = await c.request<number>('rss');
  const before = await cpu();

  // The attack: the handshake, a tag announcing 48 MB, then the body streamed for as long as the server reads it.
  const a = rawClient(endpoint);
  const size = 48 * MiB;
  let sent = 0;
  let open = await a.write(Buffer.concat([hello(), tag(size)]));
  const chunk = Buffer.alloc(64 * 1024, 0x78);
  let isClosed = false;
  void a.closed.then(() => (isClosed = true));
  while (open && !isClosed && sent < size) {
    open = await a.write(chunk);
    if (open) sent += chunk.length;
  }
  await a.closed;
  const after = await cpu();
  const usedMs = (after.user - before.user + after.system - before.system) / 1000;
  t.ok(usedMs < 50, `the server spent ${usedMs.toFixed(1)} ms of CPU on the attack (bound: 50 ms; before the limit, 12.4 s)`);
  t.ok(sent < size, `the server closed before the whole body was sent (${(sent / MiB).toFixed(1)} MiB of 48 written, most into kernel buffers)`);
  t.match(ended(a.packets)?.d.m, /a frame of at least 50331648 bytes, over the 1048576-byte limit; connection closed/, 'told why in an END packet');
  const rssAfter = await c.request<number>('rss');
  t.ok(rssAfter - rssBefore < 8 * MiB, `server RSS grew ${((rssAfter - rssBefore) / MiB).toFixed(1)} MiB (before the limit: 64 MB held)`);

  t.same(await c.request('echo', { still: 'answers' }), { still: 'answers' }, 'the server still answers a normal request');
  const errors = await c.request<string[]>('errors');
  t.equal(errors.filter((e) => /over the 1048576-byte limit/.test(e)).length, 1, 'logged once');
});

t.test('frame size: a request just under 1 MiB and one of exactly 1 MiB are served; 1 MiB + 1 byte closes the connection', async (t) => {
  const { s, errors } = await server(t, { handlers: { echo: (p) => p } });
  /** A request whose frame body (its JSON) is exactly `n` bytes. */
  const requestOf = (n: number) => {
    const empty = Buffer.byteLength(JSON.stringify({ t: T_REQUEST, d: { m: 'echo', p: '' }, n: '1' }));
    const p: Packet = { t: T_REQUEST, d: { m: 'echo', p: 'x'.repeat(n - empty) }, n: '1' };
    const body = Buffer.from(JSON.stringify(p));
    t.equal(body.length, n);
    return Buffer.concat([tag(n), body]);
  };
  for (const n of [MiB - 100, MiB]) {
    const a = rawClient(s.endpoint);
    await a.write(Buffer.concat([hello(), requestOf(n)]));
    await a.until((ps) => ps.some((p) => p.t === T_RESPONSE));
    const r = a.packets.find((p) => p.t === T_RESPONSE)!;
    t.equal(((r.d as { r: string }).r).length, n - Buffer.byteLength(JSON.stringify({ t: T_REQUEST, d: { m: 'echo', p: '' }, n: '1' })), `a ${n}-byte frame is served`);
    a.sock.destroy();
  }
  const a = rawClient(s.endpoint);
  await a.write(Buffer.concat([hello(), tag(MiB + 1)]));
  await a.closed;
  t.match(ended(a.packets)?.d.m, /over the 1048576-byte limit/, 'MiB + 1: refused from the tag alone');
  t.equal(errors.length, 1, 'one log line');

  // Through IpcClient: the caller gets CLOSED, with the server's reason, or EPIPE if its own write was still going (the
  // server stops reading at the tag).
  const c = new IpcClient(s.path, { timeoutMs: 5000 });
  t.teardown(() => c.close());
  await t.rejects(c.request('echo', 'y'.repeat(MiB + 10)), { code: 'CLOSED', message: /over the 1048576-byte limit|EPIPE|ECONNRESET/ });
});

t.test('Deframer: any frames cut into any chunks (down to one byte) decode the same; over the limit throws before the body', async (t) => {
  const packetArb = fc.record({ t: fc.integer({ min: 0, max: 6 }), d: fc.jsonValue(), n: fc.string({ maxLength: 8 }) });
  fc.assert(
    fc.property(fc.array(packetArb, { minLength: 1, maxLength: 6 }), fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 30 }), fc.boolean(), (packets, cuts, bytewise) => {
      const stream = Buffer.concat(packets.map((p) => frame(p as Packet)));
      const d = new Deframer({ maxFrameBytes: IPC_MAX_FRAME_BYTES });
      const got: Packet[] = [];
      for (let at = 0, i = 0; at < stream.length; i++) {
        const len = bytewise ? 1 : cuts[i % cuts.length]!;
        got.push(...d.push(stream.subarray(at, at + len)));
        at += len;
      }
      t.same(got, JSON.parse(JSON.stringify(packets)));
      return got.length === packets.length;
    }),
    { numRuns: 200 },
  );
  // Over the limit: refused on the tag byte that crosses it, however the tag is cut.
  fc.assert(
    fc.property(fc.integer({ min: 101, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 4 }), (size, cut) => {
      const d = new Deframer({ maxFrameBytes: 100 });
      const bytes = Buffer.concat([frame({ t: 1 }), tag(size), Buffer.alloc(16, 0x78)]);
      try {
        for (let at = 0; at < bytes.length; at += cut) d.push(bytes.subarray(at, at + cut));
      } catch (e) {
        return e instanceof FrameTooLargeError && e.limit === 100 && e.atLeast > 100 && e.atLeast <= size;
      }
      return false;
    }),
    { numRuns: 300 },
  );
});

t.test('server: requests cut into random chunks, one byte per write included, are answered as whole', async (t) => {
  const { s, errors } = await server(t, { handlers: { echo: (p) => p } });
  await fc.assert(
    fc.asyncProperty(fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 4 }), fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 10 }), fc.boolean(), async (params, cuts, bytewise) => {
      const a = rawClient(s.endpoint);
      const stream = Buffer.concat([hello(), ...params.map((p, i) => frame({ t: T_REQUEST, d: { m: 'echo', p: { v: p } }, n: String(i) }))]);
      for (let at = 0, i = 0; at < stream.length; i++) {
        const len = bytewise ? 1 : cuts[i % cuts.length]!;
        await a.write(stream.subarray(at, at + len));
        at += len;
      }
      await a.until((ps) => ps.filter((p) => p.t === T_RESPONSE).length === params.length);
      a.sock.destroy();
      const byNonce = new Map(a.packets.filter((p) => p.t === T_RESPONSE).map((p) => [p.n, (p.d as { r: { v: unknown } }).r.v]));
      t.same(params.map((_, i) => byNonce.get(String(i))), JSON.parse(JSON.stringify(params)));
      return true;
    }),
    { numRuns: 25 },
  );
  t.same(errors, [], 'no errors');
});

t.test('idle connections are closed after the timeout; a pending request is not idleness; trickled bytes are', async (t) => {
  let release: () => void = () => undefined;
  const { s, errors } = await server(t, {
    limits: { idleTimeoutMs: 200 },
    handlers: { slow: () => new Promise<string>((r) => (release = () => r('done'))) },
  });
  // Handshake, then nothing.
  const a = rawClient(s.endpoint);
  await a.write(hello());
  await a.closed;
  t.match(ended(a.packets)?.d.m, /idle for 200 ms with no request; closed/, 'told why');

  // A request pending for longer than the timeout: answered, and the connection is closed only once idle after it.
  const b = rawClient(s.endpoint);
  await b.write(Buffer.concat([hello(), frame({ t: T_REQUEST, d: { m: 'slow', p: {} }, n: 's' })]));
  await new Promise((r) => setTimeout(r, 600));
  t.notOk(b.sock.destroyed || ended(b.packets), 'still open while the request is pending (3 timeouts later)');
  release();
  await b.until((ps) => ps.some((p) => p.t === T_RESPONSE));
  t.same(b.packets.find((p) => p.t === T_RESPONSE)?.d, { ok: true, r: 'done' });
  await b.closed;
  t.ok(ended(b.packets), 'then closed when idle');

  // Bytes of a frame that never completes do not keep the connection open.
  const c = rawClient(s.endpoint);
  await c.write(Buffer.concat([hello(), tag(1000)]));
  let trickled = 0;
  while (!c.sock.destroyed && trickled < 40) {
    await c.write(Buffer.from('x'));
    trickled++;
    await new Promise((r) => setTimeout(r, 25));
  }
  t.ok(trickled < 40, `closed while trickling (after ${trickled} bytes, 25 ms apart)`);
  t.same(errors, [], 'idle closes are not logged as errors');
});

t.test('requests over the in-flight cap are answered BUSY without running; the cap frees as answers go out', async (t) => {
  let ran = 0;
  const gates: (() => void)[] = [];
  const { s, errors } = await server(t, {
    limits: { maxInFlight: 4 },
    handlers: {
      hold: () => {
        ran++;
        return new Promise<number>((r) => gates.push(() => r(ran)));
      },
      echo: (p) => p,
    },
  });
  const c = new IpcClient(s.path, { timeoutMs: 5000 });
  t.teardown(() => c.close());
  const calls = Array.from({ length: 6 }, () => c.request('hold'));
  calls.forEach((p) => p.catch(() => undefined));
  await t.rejects(calls[4]!, { code: 'REMOTE', remoteCode: 'BUSY', message: /4 requests are already in flight/ });
  await t.rejects(calls[5]!, { code: 'REMOTE', remoteCode: 'BUSY' });
  t.equal(ran, 4, 'the refused requests did not run');
  gates.splice(0).forEach((g) => g());
  t.same((await Promise.all(calls.slice(0, 4))).length, 4, 'the four in flight are answered');
  t.equal(await c.request('echo', 'again'), 'again', 'room again once answered');
  t.equal(errors.filter((e) => /answered BUSY/.test(e)).length, 1, 'logged once per connection');

  // The daemon's default cap leaves room for the existing 50-at-once use (test/ipc/ipc.test.ts).
  const d = await server(t, { handlers: { echo: (p) => p } });
  const c2 = new IpcClient(d.s.path, { timeoutMs: 5000 });
  t.teardown(() => c2.close());
  t.equal((await Promise.all(Array.from({ length: 64 }, (_, i) => c2.request('echo', i)))).length, 64, '64 at once by default');
});
