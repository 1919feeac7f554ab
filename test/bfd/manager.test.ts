// The UDP adapter: two managers over real loopback UDP sockets (listening on ephemeral ports, each sending to the
// other's) come Up; a crashed side (no packets any more) is a failure the other reports once as 'down' with the
// diagnostic; a removed side says AdminDown, which is not a failure (RFC 5882 3.2); garbage is counted, not fatal.
import t, { type Test } from 'tap';
import * as dgram from 'node:dgram';
import { BfdManager, type BfdManagerOptions } from '../../src/bfd/manager.ts';
import { udpTtlGuard } from '../../src/platform/udp-ttl.ts';
import { HOST_PLATFORM } from '../../src/platform/paths.ts';

async function until<T>(fn: () => T | null | undefined | false, what: string, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function pair(t: Test, bOpts: BfdManagerOptions = {}) {
  const a = new BfdManager({ port: 0 });
  const b = new BfdManager({ port: 0, ...bOpts });
  const peer = { address: '127.0.0.1', minRx: 100, minTx: 100, multiplier: 3 };
  await a.configure([peer]);
  await b.configure([peer]);
  // each sends to the other's listener
  (a as unknown as { opts: { peerPort: number } }).opts.peerPort = b.listeningPort()!;
  (b as unknown as { opts: { peerPort: number } }).opts.peerPort = a.listeningPort()!;
  t.teardown(() => Promise.all([a.close({ silent: true }), b.close({ silent: true })]));
  return { a, b };
}

t.test('two managers come Up, and a crashed side is a failure', async (t) => {
  const { a, b } = await pair(t);
  await until(() => a.status('127.0.0.1')?.state === 'Up' && b.status('127.0.0.1')?.state === 'Up', 'both Up');
  const st = a.status('127.0.0.1')!;
  t.ok(st.localPort! >= 49152 && st.localPort! <= 65535, `source port ${st.localPort} in 49152-65535`);
  await until(() => !a.status('127.0.0.1')!.pollInProgress, 'poll done');
  t.match(a.status('127.0.0.1'), { txInterval: 100, detectionTime: 300, remoteDetectMult: 3 });
  t.equal(a.status('::ffff:127.0.0.1')?.localPort, st.localPort, 'an IPv4-mapped form of the address finds the same session');
  t.equal(a.status('127.0.0.9'), null, 'no session for another address');
  t.equal(a.status('not an address'), null, 'nor for text that is no address');
  t.equal(new BfdManager({ port: 0 }).status('127.0.0.1'), null, 'a manager with no sessions has none');
  const downs: string[] = [];
  a.onDown((addr, why) => downs.push(`${addr} ${why}`));
  const base = a.status('127.0.0.1')!.downs; // a loaded machine may have flapped already
  await b.close({ silent: true });
  await until(() => a.status('127.0.0.1')!.state === 'Down', 'a reports the failure');
  t.equal(downs.at(-1), '127.0.0.1 BFD session down: Control Detection Time Expired');
  t.match(a.status('127.0.0.1'), { state: 'Down', diag: 'Control Detection Time Expired', downs: base + downs.length });
});

t.test('a removed peer says AdminDown: Down, but not a failure', async (t) => {
  const { a, b } = await pair(t);
  await until(() => a.status('127.0.0.1')?.state === 'Up' && b.status('127.0.0.1')?.state === 'Up', 'both Up');
  const downs: string[] = [];
  a.onDown((addr) => downs.push(addr));
  const base = a.status('127.0.0.1')!.downs;
  await b.configure([]);
  t.equal(b.status('127.0.0.1'), null, 'b has no session');
  await until(() => a.status('127.0.0.1')?.state === 'Down', 'a Down');
  t.match(a.status('127.0.0.1'), { diag: 'Neighbor Signaled Session Down', remoteState: 'AdminDown' });
  t.equal(a.status('127.0.0.1')!.downs, base, 'not counted as a failure');
  t.equal(downs.length, 0, 'no down event');
});

t.test('malformed packets are discarded and counted; the session stays Up', async (t) => {
  const { a, b } = await pair(t);
  await until(() => a.status('127.0.0.1')?.state === 'Up' && b.status('127.0.0.1')?.state === 'Up', 'both Up');
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  s.setTTL(255); // through the TTL filter, so the decoder sees it
  await new Promise<void>((r) => s.send(Buffer.from([0x40, 0xc0, 3, 24, ...new Array(20).fill(0)]), a.listeningPort()!, '127.0.0.1', () => r()));
  s.close();
  await until(() => a.status('127.0.0.1')!.discarded > 0, 'discard counted');
  t.match(a.status('127.0.0.1'), { state: 'Up', lastDiscard: /version 2, not 1/ });
});

t.test('reconfigure intervals while Up runs a Poll Sequence and stays Up', async (t) => {
  const { a, b } = await pair(t);
  await until(() => a.status('127.0.0.1')?.state === 'Up' && b.status('127.0.0.1')?.state === 'Up', 'both Up');
  await a.configure([{ address: '127.0.0.1', minRx: 150, minTx: 150, multiplier: 4 }]);
  await until(() => b.status('127.0.0.1')?.detectionTime === 600 && !a.status('127.0.0.1')!.pollInProgress, 'b detects on 4 x 150 ms');
  t.match(a.status('127.0.0.1'), { state: 'Up', txInterval: 150, detectMult: 4 });
  t.equal(b.status('127.0.0.1')!.state, 'Up');
});

t.test('a port already taken is a clear error', async (t) => {
  const a = new BfdManager({ port: 0 });
  await a.configure([{ address: '127.0.0.1', minRx: 300, minTx: 300, multiplier: 3 }]);
  const b = new BfdManager({ port: a.listeningPort()! });
  await t.rejects(b.configure([{ address: '127.0.0.1', minRx: 300, minTx: 300, multiplier: 3 }]), /bfd: cannot listen on 0\.0\.0\.0 port \d+/);
  await a.close();
  await b.close();
});

t.test('RFC 5881 5: packets sent with TTL 254 are discarded and counted; the session never comes Up', { skip: HOST_PLATFORM === 'win32' && 'no socket filter on Windows' }, async (t) => {
  const { a, b } = await pair(t, { ttl: 254 });
  t.same(a.status('127.0.0.1')!.ttlCheck, { enforced: true }, 'the filter is on');
  // a hears nothing valid: it stays Down however many of b's packets arrive (counted, not timed)
  const st = await until(() => {
    const s = a.status('127.0.0.1')!;
    if (s.state !== 'Down') throw new Error(`a went ${s.state} on TTL-254 packets`);
    return s.discarded >= 10 && s;
  }, '10 discards');
  t.match(st, { state: 'Down', packetsIn: 0, lastDiscard: 'received with a TTL / Hop Limit other than 255 (RFC 5881 5)' });
  t.not(b.status('127.0.0.1')!.state, 'Up', 'b is not Up either');
});

t.test('where the TTL check cannot be had, the status says it is not enforced, and why', async (t) => {
  const warns: string[] = [];
  const m = new BfdManager({ port: 0, ttlGuard: udpTtlGuard('win32'), logger: { info() {}, warn: (w) => warns.push(w) } });
  t.teardown(() => m.close({ silent: true }));
  await m.configure([{ address: '127.0.0.1', minRx: 100, minTx: 100, multiplier: 3 }]);
  t.match(m.status('127.0.0.1')!.ttlCheck, { enforced: false, why: /not checked \(RFC 5881 5\): Windows offers no socket filter/ });
  t.match(warns.join('\n'), /bfd: IPv4: the received TTL of BFD packets is not checked/, 'and the log says so');
  const n = new BfdManager({ port: 0, ttlGuard: null });
  t.teardown(() => n.close({ silent: true }));
  await n.configure([{ address: '127.0.0.1', minRx: 100, minTx: 100, multiplier: 3 }]);
  t.match(n.status('127.0.0.1')!.ttlCheck, { enforced: false, why: /no TTL guard/ });
});
