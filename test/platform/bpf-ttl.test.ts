// The BFD received-TTL filter: the program, run by a small classic-BPF interpreter (the oracle: what the kernel
// does with these opcodes), keeps exactly the datagrams with TTL / Hop Limit 255 and cuts every other one to its
// UDP header; then the same program attached to real sockets on loopback, both families.
import t from 'tap';
import fc from 'fast-check';
import * as dgram from 'node:dgram';
import {
  BPF_ABS, BPF_B, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, encodeFprog, encodeProgram, KEEP_ALL, KEEP_HEADER,
  SKF_NET_OFF, ttlFilterProgram, type BpfInsn,
} from '../../src/platform/bpf-ttl.ts';
import { dgramFd, udpTtlGuard, WINDOWS_TTL_UNSUPPORTED } from '../../src/platform/udp-ttl.ts';
import { HOST_PLATFORM } from '../../src/platform/paths.ts';

/** A datagram as a socket filter on a UDP socket sees it: the IP header (via SKF_NET_OFF) and the UDP part. */
interface Skb { net: Uint8Array; data: Uint8Array }

/** Classic BPF, the subset plus a guard: unknown opcodes throw, a load out of bounds ends the program with 0. */
function run(prog: BpfInsn[], skb: Skb): number {
  let a = 0;
  for (let pc = 0; pc < prog.length;) {
    const i = prog[pc];
    switch (i.code) {
      case BPF_LD | BPF_B | BPF_ABS: {
        const k = i.k | 0; // signed
        const [buf, off] = k >= SKF_NET_OFF && k < SKF_NET_OFF + 0x100000 && k < 0 ? [skb.net, k - SKF_NET_OFF] : [skb.data, k];
        if (off < 0 || off >= buf.length) return 0;
        a = buf[off];
        pc++;
        break;
      }
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += 1 + (a === i.k ? i.jt : i.jf);
        break;
      case BPF_RET | BPF_K:
        return i.k >>> 0;
      default:
        throw new Error(`opcode ${i.code} not in the oracle`);
    }
  }
  throw new Error('fell off the end of the program');
}

function decodeProgram(b: Buffer): BpfInsn[] {
  const out: BpfInsn[] = [];
  for (let o = 0; o < b.length; o += 8) out.push({ code: b.readUInt16LE(o), jt: b[o + 2], jf: b[o + 3], k: b.readUInt32LE(o + 4) });
  return out;
}

const header = (family: 4 | 6) => fc.uint8Array({ minLength: family === 4 ? 20 : 40, maxLength: family === 4 ? 60 : 40 });
const payload = fc.uint8Array({ minLength: 8, maxLength: 80 });

t.test('the program keeps exactly TTL / Hop Limit 255 (fast-check, interpreter oracle)', async (t) => {
  for (const family of [4, 6] as const) {
    const prog = ttlFilterProgram(family);
    t.same(decodeProgram(encodeProgram(prog)), prog, `IPv${family}: the encoding reads back`);
    const ttlAt = family === 4 ? 8 : 7;
    fc.assert(fc.property(header(family), payload, fc.oneof(fc.constant(255), fc.integer({ min: 0, max: 255 })), (net, data, ttl) => {
      net[ttlAt] = ttl;
      const r = run(prog, { net, data });
      return ttl === 255 ? r === KEEP_ALL : r === KEEP_HEADER;
    }), { numRuns: 2000 });
    t.pass(`IPv${family}: accepted iff the octet at ${ttlAt} of the IP header is 255`);
    // the check never looks at the payload: a BFD packet that spells 255 in its own octets does not pass
    const net = new Uint8Array(family === 4 ? 20 : 40).fill(255);
    net[ttlAt] = 64;
    t.equal(run(prog, { net, data: new Uint8Array(32).fill(255) }), KEEP_HEADER, `IPv${family}: TTL 64 cut even when all else is 255`);
  }
  t.throws(() => ttlFilterProgram(4, 256), /TTL must be 0\.\.255/);
  const fp = encodeFprog(4, 0x1122334455n);
  t.equal(fp.length, 16);
  t.equal(fp.readUInt16LE(0), 4);
  t.equal(fp.readBigUInt64LE(8), 0x1122334455n);
});

t.test('Windows: the guard says the check is not enforced and attaches nothing', async (t) => {
  let loaded = false;
  const g = udpTtlGuard('win32', async () => { loaded = true; return { attachFilter() {} }; });
  t.equal(g.unsupported, WINDOWS_TTL_UNSUPPORTED);
  await t.rejects(g.attach(dgram.createSocket('udp4'), 4), { message: WINDOWS_TTL_UNSUPPORTED });
  t.notOk(loaded, 'koffi never loaded');
});

t.test('a missing native module is said, with the reason', async (t) => {
  const g = udpTtlGuard('linux', async () => { throw new Error('Cannot find package koffi'); });
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  t.teardown(() => s.close());
  await t.rejects(g.attach(s, 4), /not checked: the koffi native module did not load: Cannot find package koffi/);
});

async function roundTrip(family: 4 | 6, ttl: number): Promise<number> {
  const type = family === 4 ? 'udp4' : 'udp6';
  const lo = family === 4 ? '127.0.0.1' : '::1';
  const rx = dgram.createSocket(type);
  const tx = dgram.createSocket(type);
  try {
    await new Promise<void>((r) => rx.bind(0, lo, r));
    await udpTtlGuard('linux').attach(rx, family);
    await new Promise<void>((r) => tx.bind(0, lo, r));
    tx.setTTL(ttl);
    const got = new Promise<number>((r) => rx.once('message', (m) => r(m.length)));
    tx.send(Buffer.alloc(24, 1), rx.address().port, lo);
    return await got;
  } finally {
    rx.close();
    tx.close();
  }
}

t.test('on real sockets (loopback): TTL 255 arrives whole, any other TTL arrives empty', { skip: HOST_PLATFORM === 'win32' && 'no socket filters on Windows' }, async (t) => {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  t.type(dgramFd(s), 'number', 'the bound socket\'s descriptor is found');
  s.close();
  for (const family of [4, 6] as const) {
    t.equal(await roundTrip(family, 255), 24, `IPv${family}: TTL 255 kept`);
    t.equal(await roundTrip(family, 254), 0, `IPv${family}: TTL 254 cut to an empty message`);
    t.equal(await roundTrip(family, 1), 0, `IPv${family}: TTL 1 cut to an empty message`);
  }
});
