// BFD Control packet codec: round trip against the encoder, the RFC 5880 4.1 layout of one hand-built packet, and
// each reception check of 6.8.6 rejecting exactly the packets that violate it (fast-check; the oracle is a plain
// reading of the check list).
import t from 'tap';
import fc from 'fast-check';
import { decode, encode, checkForSession, BfdState, MIN_LENGTH, type EncodeInput } from '../../src/bfd/codec.ts';

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const nz32 = fc.integer({ min: 1, max: 0xffffffff });
const validInput: fc.Arbitrary<EncodeInput> = fc.record({
  diag: fc.integer({ min: 0, max: 31 }),
  state: fc.constantFrom(BfdState.AdminDown, BfdState.Down, BfdState.Init, BfdState.Up),
  poll: fc.boolean(),
  final: fc.boolean(),
  controlPlaneIndependent: fc.boolean(),
  demand: fc.boolean(),
  detectMult: fc.integer({ min: 1, max: 255 }),
  myDiscriminator: nz32,
  yourDiscriminator: nz32,
  desiredMinTxInterval: u32,
  requiredMinRxInterval: u32,
  requiredMinEchoRxInterval: u32,
});

t.test('a hand-built packet has the RFC 5880 4.1 layout', async (t) => {
  const b = encode({ diag: 3, state: BfdState.Up, poll: true, detectMult: 3, myDiscriminator: 0x01020304, yourDiscriminator: 0x0a0b0c0d,
    desiredMinTxInterval: 300_000, requiredMinRxInterval: 300_000, requiredMinEchoRxInterval: 0 });
  t.same([...b], [0x23, 0xe0, 3, 24, 1, 2, 3, 4, 10, 11, 12, 13, 0, 0x04, 0x93, 0xe0, 0, 0x04, 0x93, 0xe0, 0, 0, 0, 0]);
  const d = decode(b);
  t.ok(d.ok);
  if (d.ok) t.match(d.packet, { version: 1, diag: 3, state: BfdState.Up, poll: true, final: false, length: 24, detectMult: 3 });
});

t.test('round trip: decode(encode(p)) gives p back', async (t) => {
  fc.assert(fc.property(validInput, (p) => {
    const d = decode(encode(p));
    if (!d.ok) return false;
    const q = d.packet;
    return q.version === 1 && q.diag === p.diag && q.state === p.state && q.poll === !!p.poll && q.final === !!p.final &&
      q.controlPlaneIndependent === !!p.controlPlaneIndependent && q.demand === !!p.demand && !q.multipoint && !q.authPresent &&
      q.detectMult === p.detectMult && q.length === MIN_LENGTH && q.myDiscriminator === p.myDiscriminator &&
      q.yourDiscriminator === p.yourDiscriminator && q.desiredMinTxInterval === p.desiredMinTxInterval &&
      q.requiredMinRxInterval === p.requiredMinRxInterval && q.requiredMinEchoRxInterval === p.requiredMinEchoRxInterval;
  }), { numRuns: 2000 });
  t.pass('2000 packets');
});

/** The 6.8.6 list, read straight from the bytes: the oracle for the rejection property. */
function oracleRejects(b: Uint8Array): boolean {
  if (b.length < 4) return true;
  if (b[0] >> 5 !== 1) return true;
  const a = (b[1] & 4) !== 0;
  if (b[3] < (a ? 26 : 24)) return true;
  if (b[3] > b.length) return true;
  if (b[2] === 0) return true;
  if (b[1] & 1) return true;
  const dv = Buffer.from(b);
  if (dv.readUInt32BE(4) === 0) return true;
  const st = b[1] >> 6;
  if (dv.readUInt32BE(8) === 0 && st !== 0 && st !== 1) return true;
  if (a && (b[25] < 2 || 24 + b[25] > b[3])) return true;
  return false;
}

t.test('rejection: byte mutations of valid packets are rejected exactly when a 6.8.6 check fails', async (t) => {
  let rejected = 0;
  fc.assert(fc.property(validInput, fc.array(fc.tuple(fc.nat(31), fc.nat(255)), { minLength: 1, maxLength: 4 }), fc.nat(40),
    (p, muts, extra) => {
      const b = Buffer.concat([encode(p), Buffer.alloc(extra % 9)]);
      for (const [i, v] of muts) if (i < b.length) b[i] = v;
      const truncated = b.subarray(0, Math.max(0, b.length - (extra > 32 ? extra - 32 : 0)));
      const d = decode(truncated);
      if (!d.ok) rejected++;
      return d.ok === !oracleRejects(truncated);
    }), { numRuns: 5000 });
  t.ok(rejected > 0, `${rejected} of 5000 mutated packets rejected`);
});

t.test('each reception check names what is wrong', async (t) => {
  const base = () => encode({ state: BfdState.Up, detectMult: 3, myDiscriminator: 7, yourDiscriminator: 9, desiredMinTxInterval: 1, requiredMinRxInterval: 1 });
  const cases: [string, (b: Buffer) => Uint8Array, RegExp][] = [
    ['version 2', (b) => { b[0] = (2 << 5); return b; }, /version 2, not 1/],
    ['Length 20', (b) => { b[3] = 20; return b; }, /Length 20 below 24/],
    ['A bit with Length 24', (b) => { b[1] |= 4; return b; }, /Length 24 below 26 \(A bit set\)/],
    ['Length beyond payload', (b) => { b[3] = 30; return b; }, /Length 30 beyond the 24-octet payload/],
    ['Detect Mult 0', (b) => { b[2] = 0; return b; }, /Detect Mult is zero/],
    ['M bit', (b) => { b[1] |= 1; return b; }, /Multipoint/],
    ['My Discriminator 0', (b) => { b.writeUInt32BE(0, 4); return b; }, /My Discriminator is zero/],
    ['Your Discriminator 0 while Up', (b) => { b.writeUInt32BE(0, 8); return b; }, /Your Discriminator is zero in state Up/],
    ['truncated', (b) => b.subarray(0, 3), /truncated/],
  ];
  for (const [name, mut, re] of cases) {
    const d = decode(mut(base()));
    t.equal(d.ok, false, name);
    if (!d.ok) t.match(d.reason, re, name);
  }
  const down = encode({ state: BfdState.Down, detectMult: 3, myDiscriminator: 7, desiredMinTxInterval: 1, requiredMinRxInterval: 1 });
  t.ok(decode(down).ok, 'Your Discriminator 0 is fine in Down');
});

t.test('session checks: unknown Your Discriminator, authentication mismatch', async (t) => {
  const d = decode(encode({ state: BfdState.Up, detectMult: 3, myDiscriminator: 7, yourDiscriminator: 9, desiredMinTxInterval: 1, requiredMinRxInterval: 1 }));
  if (!d.ok) throw new Error(d.reason);
  t.equal(checkForSession(d.packet, 9), null);
  t.match(checkForSession(d.packet, 8), /Your Discriminator 9 names no session/);
  t.match(checkForSession({ ...d.packet, authPresent: true }, 9), /no authentication is configured/);
  t.match(checkForSession(d.packet, 9, true), /authentication is configured/);
});

t.test('encode refuses out-of-range fields', async (t) => {
  t.throws(() => encode({ state: BfdState.Up, detectMult: 256, myDiscriminator: 1, desiredMinTxInterval: 1, requiredMinRxInterval: 1 }), /detectMult/);
  t.throws(() => encode({ state: BfdState.Up, detectMult: 3, myDiscriminator: -1, desiredMinTxInterval: 1, requiredMinRxInterval: 1 }), /myDiscriminator/);
  t.throws(() => encode({ state: BfdState.Up, detectMult: 3, myDiscriminator: 1, desiredMinTxInterval: 2 ** 32, requiredMinRxInterval: 1 }), /desiredMinTxInterval/);
});
