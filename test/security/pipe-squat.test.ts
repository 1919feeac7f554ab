// Named-pipe squatting, through the Windows double (real sockets; the double maps the pipe name onto a socket file and
// gives the pipe's key folder Windows' admin-only semantics): a process that took the control pipe's name while the
// daemon was down is refused by the client before it sends a single byte, whatever it answers; the real daemon's
// proof is accepted; the daemon's own start refuses a squatter that answers "status" like a daemon. The same client
// code is the CNI plugin's; ./pipe-squat-wine.test.ts runs the packaged blockspeaker-cni.exe against a squatter.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { IpcClient, IpcError } from '../../src/ipc/client.ts';
import { checkProof, makeProof, PIPE_KEY_BYTES, PROOF_BYTES, PROOF_MAX_SKEW_MS } from '../../src/ipc/proof.ts';
import { startIpcServer } from '../../src/ipc/server.ts';
import { Deframer, frame, INIT_TAG, T_CONNECTION, T_REQUEST, T_RESPONSE } from '../../src/ipc/wire.ts';
import { ipcKeyFile, pipeKeyName } from '../../src/platform/paths.ts';
import { windowsDouble } from '../platform/windows-double.ts';

const PIPE = '\\\\.\\pipe\\blockspeaker';

function tmp(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-sec-pipe-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A squatter on the pipe: records every byte a client sends, writes `greeting` on each connection, and answers any
 * request it can parse as a daemon would ({ok: true, r: {pid}}): what a forger would do.
 */
async function squatter(t: Test, endpoint: string, greeting?: () => Buffer | undefined, hangUp = false) {
  const received: Buffer[] = [];
  let conns = 0;
  const server = net.createServer((sock) => {
    conns++;
    sock.on('error', () => undefined);
    const g = greeting?.();
    if (g) sock.write(g);
    if (hangUp) sock.end();
    const d = new Deframer();
    let tagged = false;
    sock.on('data', (chunk) => {
      received.push(chunk);
      if (!tagged) {
        tagged = true;
        chunk = chunk.subarray(INIT_TAG.length);
      }
      try {
        for (const p of d.push(chunk)) {
          if (p.t === T_CONNECTION) sock.write(frame({ t: T_CONNECTION, d: { id: 'x' } }));
          if (p.t === T_REQUEST) sock.write(frame({ t: T_RESPONSE, d: { ok: true, r: { pid: 4242, forged: true } }, n: p.n }));
        }
      } catch {
        /* whatever */
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(endpoint, resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { bytes: () => received.reduce((a, b) => a + b.length, 0), connections: () => conns };
}

/** The double: a pipe dir, the pipe's socket file, and the key file the daemon writes and clients read. */
function machine(t: Test) {
  const w = windowsDouble({ pipeDir: tmp(t) });
  return { w, endpoint: w.platform.ipcListenPath(PIPE), keyFile: w.platform.ipcKeyFile(PIPE)! };
}

t.test('the key file: one per pipe, under the store folder on Windows, none on Linux', async (t) => {
  t.equal(ipcKeyFile(PIPE, 'win32'), 'C:\\ProgramData\\blockspeaker\\pipe-keys\\blockspeaker.key');
  t.equal(ipcKeyFile('/run/blockspeaker.sock', 'win32'), 'C:\\ProgramData\\blockspeaker\\pipe-keys\\run-blockspeaker.sock.key', 'a Unix-style path names the pipe net-ipc makes of it');
  t.equal(pipeKeyName('\\\\.\\pipe\\BlockSpeaker'), 'blockspeaker.key', 'pipe names ignore case');
  t.equal(ipcKeyFile('/run/blockspeaker.sock', 'linux'), undefined);
});

t.test('the daemon writes a new key in an admin-only folder each start; its clients are served', async (t) => {
  const { w, endpoint, keyFile } = machine(t);
  const s1 = await startIpcServer({ path: PIPE, platform: w.platform, handlers: { echo: (p) => p } });
  const key1 = fs.readFileSync(keyFile);
  t.equal(key1.length, PIPE_KEY_BYTES);
  t.match(w.createdDirs, [{ dir: path.dirname(keyFile), sddl: /^D:P\(A;OICI;GA;;;SY\)\(A;OICI;GA;;;BA\)/ }], 'its folder made admin-only in one call');
  const c = new IpcClient(endpoint, { keyFile });
  t.same(await c.request('echo', { a: 1 }), { a: 1 });
  await c.close();
  await s1.close();
  const s2 = await startIpcServer({ path: PIPE, platform: w.platform, handlers: { echo: (p) => p } });
  t.teardown(() => s2.close());
  t.notSame(fs.readFileSync(keyFile), key1, 'a new key on the next start: a proof seen before is worth nothing after');
  t.same(await new IpcClient(endpoint, { keyFile }).request('echo', { b: 2 }), { b: 2 });
  t.same(await new IpcClient(endpoint, { keyFile: null }).request('echo', { c: 3 }), { c: 3 }, 'a client that does not check skips the proof');
  t.same(fs.readdirSync(path.dirname(keyFile)), [path.basename(keyFile)], 'no temporary file left');
});

t.test('a squatter is refused before the client sends a byte, whatever it answers', async (t) => {
  const { w, endpoint, keyFile } = machine(t);
  // The daemon ran once (its key is on disk), then went down; the squatter takes the name.
  const d = await startIpcServer({ path: PIPE, platform: w.platform });
  const realKey = fs.readFileSync(keyFile);
  await d.close();
  const otherKey = randomBytes(PIPE_KEY_BYTES);
  const captured = makeProof(realKey, Date.now() - PROOF_MAX_SKEW_MS - 60_000);
  const cases: [string, (() => Buffer | undefined) | undefined, RegExp][] = [
    ['sends nothing first', undefined, /sent no proof that it is the blockspeaker daemon within \d+ ms/],
    ['speaks first without a proof', () => frame({ t: T_CONNECTION, d: { id: 'x' } }), /it sent no proof frame/],
    ['sends a proof made with its own key', () => makeProof(otherKey, Date.now()), /not made with the key this daemon wrote/],
    ['replays a proof from long ago', () => captured, /its proof is \d+ s old \(a replay\)/],
    ['sends a proof with one bit flipped', () => { const p = makeProof(realKey, Date.now()); p[40]! ^= 1; return p; }, /not made with the key/],
    ['sends half a proof and closes', () => makeProof(realKey, Date.now()).subarray(0, 20), /closed the connection without a proof/],
  ];
  for (const [what, greeting, why] of cases) {
    await t.test(what, async (t) => {
      const sq = await squatter(t, endpoint, greeting, what.endsWith('closes'));
      const c = new IpcClient(endpoint, { keyFile, connectTimeoutMs: 800 });
      const e = await c.request('ipam.assign', { handle: 'pod', num4: 1 }).then(() => undefined, (err) => err as IpcError);
      t.ok(e instanceof IpcError, 'refused');
      t.equal(e?.code, what === 'sends nothing first' ? 'TIMEOUT' : 'UNTRUSTED');
      t.match(e?.message, why);
      t.match(e?.message, endpoint, 'names the pipe');
      if (e?.code === 'UNTRUSTED') t.match(e.message, /Nothing was sent to it/);
      await new Promise((r) => setTimeout(r, 50));
      t.equal(sq.bytes(), 0, 'the squatter received no byte: nothing to impersonate the caller with, no request to forge an answer to');
      t.equal(sq.connections(), 1);
    });
  }
  await t.test('without a key on disk (the daemon never ran here) the pipe is not trusted either', async (t) => {
    fs.rmSync(keyFile);
    const sq = await squatter(t, endpoint, () => makeProof(otherKey, Date.now()));
    const e = await new IpcClient(endpoint, { keyFile }).request('status').then(() => undefined, (err) => err as IpcError);
    t.equal(e?.code, 'UNTRUSTED');
    t.match(e?.message, /there is no pipe key at .*blockspeaker\.key/);
    t.equal(sq.bytes(), 0);
  });
});

t.test('the refusal names the owner when the caller can look it up (the CLI, with the Win32 calls)', async (t) => {
  const { endpoint, keyFile } = machine(t);
  fs.mkdirSync(path.dirname(keyFile), { recursive: true });
  fs.writeFileSync(keyFile, randomBytes(PIPE_KEY_BYTES));
  await squatter(t, endpoint, () => frame({ t: T_CONNECTION, d: {} }));
  const e = await new IpcClient(endpoint, { keyFile, describeOwner: async (ep) => `process 4242 (C:\\Users\\mallory\\evil.exe) of WIN-NODE-A\\mallory, at ${ep}` })
    .request('status').then(() => undefined, (err) => err as IpcError);
  t.match(e?.message, /its owner: process 4242 \(C:\\Users\\mallory\\evil\.exe\) of WIN-NODE-A\\mallory/);
});

t.test('the daemon\'s own start: a squatter that answers "status" with a pid is not taken for a live daemon', async (t) => {
  const { w, endpoint, keyFile } = machine(t);
  const d = await startIpcServer({ path: PIPE, platform: w.platform });
  await d.close();
  t.ok(fs.existsSync(keyFile));
  const sq = await squatter(t, endpoint);
  await t.rejects(startIpcServer({ path: PIPE, platform: w.platform }), {
    name: 'IpcStartError',
    message: /already owned by another process that does not answer as a blockspeaker daemon; refusing to start/,
  });
  t.equal(sq.bytes(), 0, 'the probe sent it nothing either');
});

t.test('a live daemon is told apart from a squatter: a second start says another daemon listens', async (t) => {
  const { w } = machine(t);
  const d = await startIpcServer({ path: PIPE, platform: w.platform });
  t.teardown(() => d.close());
  await t.rejects(startIpcServer({ path: PIPE, platform: w.platform }), { message: /another blockspeaker daemon is already listening/ });
});

t.test('property: a proof checks exactly with the key and a time within the skew; any flipped bit fails it', async (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.integer({ min: -2 * PROOF_MAX_SKEW_MS, max: 2 * PROOF_MAX_SKEW_MS }),
      fc.integer({ min: 0, max: PROOF_BYTES * 8 - 1 }),
      (k, k2, age, bit) => {
        const key = Buffer.from(k);
        const now = 1_800_000_000_000;
        const p = makeProof(key, now - age);
        if (p.length !== PROOF_BYTES) return false;
        if (checkProof(key, p, now).ok !== Math.abs(age) <= PROOF_MAX_SKEW_MS) return false;
        if (!Buffer.from(k2).equals(key) && checkProof(Buffer.from(k2), p, now).ok) return false;
        const flipped = Buffer.from(p);
        flipped[bit >> 3]! ^= 1 << (bit & 7);
        // A flipped bit in the timestamp or nonce breaks the MAC; in the magic or the MAC, the frame itself.
        return !checkProof(key, flipped, now).ok;
      },
    ),
    { numRuns: 500 },
  );
  t.pass('500 runs');
});
