// TCP-MD5 and GTSM: the option layouts against a decoder written from linux/tcp.h (property-tested), and two
// speakers of ours on loopback through the real kernel (keys on the listener and on the connecting socket, GTSM's
// TTL 255 / minimum 255), a wrong password, an unreadable one, and a Windows host (refused, with the reason).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import { PeerKey, peerSecurity, readPeerPassword } from '../../src/bgp/peer-security.ts';
import type { SpeakerConfig, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import {
  AF_INET, AF_INET6, IP_MINTTL, IP_TTL, IPV6_MINHOPCOUNT, IPV6_UNICAST_HOPS, SOL_IP, SOL_IPV6, SOL_TCP, TCP_MD5SIG,
  TCP_MD5SIG_SIZE, WINDOWS_UNSUPPORTED, acceptedOptions, connectOptions, encodeMd5Sig, gtsmOptions, listenerOptions,
  socketOptionsHost, type SockAddr,
} from '../../src/platform/sockopt.ts';
import { waitFor } from './raw-peer.ts';
import { loopbackSpeakers } from './loopback.ts';

// ---- pure ------------------------------------------------------------------------------------------------------

/** The oracle: struct tcp_md5sig read field by field as linux/tcp.h declares it. */
function decodeMd5Sig(b: Buffer): { family: number; addr: number[]; flags: number; prefixlen: number; key: number[] } {
  const family = b.readUInt16LE(0);
  const addr = family === AF_INET ? [...b.subarray(4, 8)] : [...b.subarray(8, 24)];
  const keylen = b.readUInt16LE(130);
  return { family, addr, flags: b[128], prefixlen: b[129], key: [...b.subarray(136, 136 + keylen)] };
}

const v4 = (s: string): SockAddr => ({ family: 4, bytes: Uint8Array.from(s.split('.').map(Number)) });

t.test('struct tcp_md5sig: layout, IPv4 peers on IPv6 sockets as ::ffff:a.b.c.d, key limits', async (t) => {
  const b = encodeMd5Sig(v4('10.0.0.1'), Buffer.from('secret'), 4);
  t.equal(b.length, TCP_MD5SIG_SIZE);
  t.same(decodeMd5Sig(b), { family: AF_INET, addr: [10, 0, 0, 1], flags: 0, prefixlen: 0, key: [...Buffer.from('secret')] });
  const m = decodeMd5Sig(encodeMd5Sig(v4('10.0.0.1'), Buffer.from('k'), 6));
  t.same(m, { family: AF_INET6, addr: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 1], flags: 0, prefixlen: 0, key: [107] });
  t.throws(() => encodeMd5Sig(v4('10.0.0.1'), Buffer.alloc(81), 4), /at most 80/);
  t.throws(() => encodeMd5Sig({ family: 6, bytes: new Uint8Array(16) }, Buffer.from('k'), 4), /IPv6 peer/);
  fc.assert(fc.property(
    fc.oneof(fc.uint8Array({ minLength: 4, maxLength: 4 }), fc.uint8Array({ minLength: 16, maxLength: 16 })),
    fc.uint8Array({ minLength: 0, maxLength: 80 }),
    (addr, key) => {
      const peer: SockAddr = { family: addr.length === 4 ? 4 : 6, bytes: addr };
      const d = decodeMd5Sig(encodeMd5Sig(peer, key, peer.family));
      return d.family === (peer.family === 4 ? AF_INET : AF_INET6) && d.addr.join() === [...addr].join() && d.key.join() === [...key].join();
    },
  ));
});

t.test('GTSM: TTL 255 out, 256 - hops minimum in, per family; where each option goes', async (t) => {
  const val = (o: { value: Buffer }) => o.value.readInt32LE(0);
  t.same(gtsmOptions(4, 1).map((o) => [o.level, o.name, val(o)]), [[SOL_IP, IP_TTL, 255], [SOL_IP, IP_MINTTL, 255]]);
  t.same(gtsmOptions(6, 2).map((o) => [o.level, o.name, val(o)]), [[SOL_IPV6, IPV6_UNICAST_HOPS, 255], [SOL_IPV6, IPV6_MINHOPCOUNT, 254]]);
  t.throws(() => gtsmOptions(4, 0), /1\.\.255/);
  t.throws(() => gtsmOptions(4, 256), /1\.\.255/);
  const needs = { md5Key: Buffer.from('pw'), ttlSecurity: 1 };
  t.same(connectOptions(v4('10.0.0.1'), 'p', needs).map((o) => [o.level, o.name]), [[SOL_TCP, TCP_MD5SIG], [SOL_IP, IP_TTL], [SOL_IP, IP_MINTTL]]);
  // Dual-stack listener, IPv4 peer: the key as ::ffff:..., and the SYN-ACK's TTL from the IPv4 stack (IP_TTL).
  const l = listenerOptions(v4('10.0.0.1'), 'p', needs, 6);
  t.same(l.map((o) => [o.level, o.name]), [[SOL_TCP, TCP_MD5SIG], [SOL_IP, IP_TTL]], 'no minimum TTL on the listener (it would bind every peer)');
  t.equal(decodeMd5Sig(l[0].value).family, AF_INET6);
  t.same(acceptedOptions(v4('10.0.0.1'), needs).map((o) => o.name), [IP_TTL, IP_MINTTL]);
  t.same(acceptedOptions(v4('10.0.0.1'), { md5Key: Buffer.from('x') }), [], 'the key of an accepted connection comes from the listener');
  for (const o of [...l, ...connectOptions(v4('10.0.0.1'), 'p', needs)]) t.notMatch(o.what, /pw/, 'option names never carry the key');
});

t.test('passwords: file (final newline dropped) or env; errors name the source, never the value', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-md5-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'pw'), 'hunter2\n');
  fs.writeFileSync(path.join(dir, 'long'), 'x'.repeat(81));
  fs.writeFileSync(path.join(dir, 'empty'), '\n');
  t.same(readPeerPassword({ file: path.join(dir, 'pw') }).bytes, Buffer.from('hunter2'));
  t.same(readPeerPassword({ env: 'PW' }, { PW: 'hunter2' }).bytes, Buffer.from('hunter2'));
  t.throws(() => readPeerPassword({ file: path.join(dir, 'nope') }), new RegExp(`cannot read file ${path.join(dir, 'nope')}: ENOENT`));
  t.throws(() => readPeerPassword({ env: 'NOPE_X' }, {}), /environment variable NOPE_X is not set/);
  t.throws(() => readPeerPassword({ file: path.join(dir, 'long') }), /81 octets; a TCP-MD5 key has at most 80/);
  t.throws(() => readPeerPassword({ file: path.join(dir, 'empty') }), /is empty/);
  const k = new PeerKey(Buffer.from('hunter2'));
  t.notMatch(JSON.stringify({ k }), /hunter2/);
  t.notMatch(String(k), /hunter2/);
  t.notMatch((await import('node:util')).inspect({ k }), /hunter2/);
  t.not(new PeerKey(Buffer.from('a')).fingerprint, new PeerKey(Buffer.from('b')).fingerprint, 'a changed key is seen as a change');
  const bad = peerSecurity({ password: { env: 'NOPE_X' } }, {});
  t.match(bad, { problem: /NOPE_X is not set/, ttlSecurity: null });
  t.ok(bad.md5Key, 'an unreadable password still counts as a password: the peer is refused, not run unprotected');
});

// ---- real sockets on loopback -------------------------------------------------------------------------------------

const lo = loopbackSpeakers(t);
const mk = lo.mk;
const peer = (n: number, asn: number, extra: Partial<SpeakerPeerConfig> = {}): SpeakerPeerConfig =>
  lo.peer(n, asn, { connectRetryMax: 2, idleHold: 1, ...extra });

t.test('same password (file on one side, env on the other) and GTSM: Established through the kernel, routes flow', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-md5-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'pw'), 'correct horse\n');
  process.env.BS_TEST_MD5 = 'correct horse';
  t.teardown(() => delete process.env.BS_TEST_MD5);
  // b is passive: a's signed SYN (TTL 255) reaches b's keyed listener; b's accepted socket gets GTSM's minimum.
  const a = mk(11, 65011, [peer(12, 65012, { password: { file: path.join(dir, 'pw') }, ttlSecurity: 1 })], { announce: ['10.11.0.0/24'] });
  const b = mk(12, 65012, [peer(11, 65011, { password: { env: 'BS_TEST_MD5' }, ttlSecurity: 1, passive: true })], { announce: ['10.12.0.0/24'] });
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => b.rib.best(parsePrefix('10.11.0.0/24')) && a.rib.best(parsePrefix('10.12.0.0/24')), 'routes exchanged', 15000);
  const st = a.peers()[0];
  t.match(st, { state: 'Established', md5: true, ttlSecurity: 1, refused: null, lastError: null });
  t.match(b.peers()[0], { state: 'Established', md5: true, ttlSecurity: 1 });
  t.notMatch(JSON.stringify([a.peers(), b.peers()]), /correct horse/, 'the password is in no status');

  // GTSM on one side only: d's connecting socket wants TTL 255, c's SYN-ACK leaves at the default TTL: dropped.
  const c = mk(13, 65013, [peer(14, 65014, { password: { env: 'BS_TEST_MD5' }, passive: true })]);
  const d = mk(14, 65014, [peer(13, 65013, { password: { env: 'BS_TEST_MD5' }, ttlSecurity: 1 })], { announce: ['10.14.0.0/24'] });
  await Promise.all([c.start(), d.start()]);
  await waitFor(() => (d.peers()[0].connectAttempts ?? 0) >= 2, 'GTSM mismatch: attempts unanswered', 20000);
  t.not(c.peers()[0].state, 'Established');
  t.not(d.peers()[0].state, 'Established');
  t.match(d.peers()[0].lastError, /with GTSM \(ttlSecurity 1\), a segment arriving with TTL below 255 \(the peer more than 1 hop\(s\) away, or not sending at TTL 255\) is dropped without an answer/, '/peers names GTSM as a cause');
});

t.test('wrong password: no session, and /peers says why it hangs', async (t) => {
  process.env.BS_TEST_MD5_A = 'one password';
  process.env.BS_TEST_MD5_B = 'another password';
  t.teardown(() => {
    delete process.env.BS_TEST_MD5_A;
    delete process.env.BS_TEST_MD5_B;
  });
  const a = mk(15, 65015, [peer(16, 65016, { password: { env: 'BS_TEST_MD5_A' } })]);
  const b = mk(16, 65016, [peer(15, 65015, { password: { env: 'BS_TEST_MD5_B' } })]);
  await Promise.all([a.start(), b.start()]);
  const st = await waitFor(() => a.peers().find((p) => (p.connectAttempts ?? 0) >= 2), 'two unanswered connection attempts', 20000);
  t.not(st.state, 'Established');
  t.match(st.lastError, /no TCP connection after \d+ attempt\(s\): with TCP-MD5, a wrong or missing password/);
  t.equal(b.peers()[0].uptime, 0);
  t.equal(a.peers()[0].messages.received, 0, 'not one BGP message got through');
});

t.test('a peer without a password cannot reach a keyed listener; the keyless peer of the same speaker can', async (t) => {
  process.env.BS_TEST_MD5 = 'pw';
  t.teardown(() => delete process.env.BS_TEST_MD5);
  const a = mk(17, 65017, [peer(18, 65018, { password: { env: 'BS_TEST_MD5' }, passive: true }), peer(19, 65019, { passive: true })]);
  const b = mk(18, 65018, [peer(17, 65017)]);
  const c = mk(19, 65019, [peer(17, 65017)]);
  await Promise.all([a.start(), b.start(), c.start()]);
  await waitFor(() => a.peers().find((p) => p.address === '127.0.0.19')?.state === 'Established', 'keyless peer up', 15000);
  await waitFor(() => (b.peers()[0].connectAttempts ?? 0) >= 2, 'unkeyed SYNs dropped', 20000);
  t.not(a.peers()[0].state, 'Established');
});

t.test('unreadable password, Windows, koffi missing: the peer is refused with the reason, others run', async (t) => {
  process.env.BS_TEST_MD5_W = 'pw';
  t.teardown(() => delete process.env.BS_TEST_MD5_W);
  const win = mk(21, 65021, [peer(22, 65022, { password: { env: 'BS_TEST_MD5_W' } }), peer(23, 65023, { ttlSecurity: 1 }), peer(24, 65024)], {},
    { socketOptions: socketOptionsHost('win32') });
  const logs: string[] = [];
  const noKoffi = mk(25, 65025, [peer(26, 65026, { ttlSecurity: 2 })], {}, {
    socketOptions: socketOptionsHost('linux', () => Promise.reject(new Error("Cannot find package 'koffi'"))),
    logger: { debug() {}, info() {}, warn() {}, error: (m) => logs.push(m) },
  });
  const noFile = mk(27, 65027, [peer(28, 65028, { password: { file: '/nonexistent/bgp-password' } })]);
  await Promise.all([win.start(), noKoffi.start(), noFile.start()]);
  const [p22, p23, p24] = win.peers();
  t.match(p22, { state: 'Idle', md5: true, refused: WINDOWS_UNSUPPORTED, lastError: WINDOWS_UNSUPPORTED });
  t.match(p23, { state: 'Idle', ttlSecurity: 1, refused: /not available on Windows/ });
  t.match(p24, { refused: null, md5: false, ttlSecurity: null }, 'a peer without them is unaffected');
  t.not(p24.state, 'Idle', 'and runs');
  t.match(noKoffi.peers()[0], { state: 'Idle', refused: /need the koffi native module, which did not load: Cannot find package 'koffi'/ });
  t.match(logs.join('\n'), /peer 127\.0\.0\.26: not started: .*koffi/);
  t.match(noFile.peers()[0], { state: 'Idle', refused: 'password: cannot read file /nonexistent/bgp-password: ENOENT' });
});

t.test('reconfigure: a changed password goes on the running session (no restart); removing it restarts without keys', async (t) => {
  process.env.BS_TEST_MD5_1 = 'first';
  process.env.BS_TEST_MD5_2 = 'second';
  t.teardown(() => {
    delete process.env.BS_TEST_MD5_1;
    delete process.env.BS_TEST_MD5_2;
  });
  const cfgA = (env: string | null): SpeakerConfig => ({
    asn: 65031, routerId: '10.0.0.31', listen: { address: '127.0.0.31', port: lo.port() },
    peers: [peer(32, 65032, { passive: true, ...(env ? { password: { env } } : {}) })],
  });
  const a = mk(31, 65031, cfgA('BS_TEST_MD5_1').peers);
  const b = mk(32, 65032, [peer(31, 65031, { password: { env: 'BS_TEST_MD5_1' } })]);
  await Promise.all([a.start(), b.start()]);
  await waitFor(() => a.peers()[0].state === 'Established' && b.peers()[0].state === 'Established', 'up with the first key', 15000);
  const flaps = [a.peers()[0].flaps, b.peers()[0].flaps];
  await a.reconfigure(cfgA('BS_TEST_MD5_2'));
  await b.reconfigure({ asn: 65032, routerId: '10.0.0.32', listen: { address: '127.0.0.32', port: lo.port() }, peers: [peer(31, 65031, { password: { env: 'BS_TEST_MD5_2' } })] });
  t.same([a.peers()[0].state, b.peers()[0].state], ['Established', 'Established'], 'the sessions were not restarted');
  // An UPDATE from a, signed with the second key, reaches b on the same session: the new key works there.
  const received = b.peers()[0].prefixes.received;
  a.announce('10.99.31.0/24');
  await waitFor(() => b.peers()[0].prefixes.received > received, 'b got an UPDATE on the re-keyed session', 20000);
  t.same([a.peers()[0].flaps, b.peers()[0].flaps], flaps, 'no flap on either side');
  await a.reconfigure(cfgA(null));
  await b.reconfigure({ asn: 65032, routerId: '10.0.0.32', listen: { address: '127.0.0.32', port: lo.port() }, peers: [peer(31, 65031)] });
  await waitFor(() => a.peers()[0].state === 'Established', 'up without keys', 20000);
  t.equal(a.peers()[0].md5, false);
});

t.test('the native module is loaded only when a peer needs it, once, and again after a reload adds such a peer', async (t) => {
  let loads = 0;
  const host = socketOptionsHost('linux', async () => {
    loads++;
    return (await import('../../src/platform/sockopt-koffi.ts')).loadSocketCalls();
  });
  const base = { asn: 65041, routerId: '10.0.0.41', listen: { address: '127.0.0.41', port: lo.port() } };
  const a = mk(41, 65041, [peer(42, 65042)], {}, { socketOptions: host });
  await a.start();
  t.equal(loads, 0, 'no peer with a password or ttlSecurity: koffi not loaded');
  await a.reconfigure({ ...base, peers: [peer(42, 65042), peer(43, 65043, { ttlSecurity: 1 })] });
  t.equal(loads, 1, 'a reload that adds one loads it');
  await a.reconfigure({ ...base, peers: [peer(42, 65042), peer(43, 65043, { ttlSecurity: 2 }), peer(44, 65044, { ttlSecurity: 1 })] });
  t.equal(loads, 1, 'once');
  t.match(a.peers().map((p) => p.refused), [null, null, null]);
});
