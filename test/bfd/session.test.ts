// The BFD session state machine on a simulated clock: two sessions joined by a simulated wire (1 ms delay) come
// Up from any start, go Down within the detection time when the wire is cut, run Poll/Final to the configured
// rates, honour AdminDown without calling it a failure, and jitter their packets as RFC 5880 6.8.7 says.
// The clock is simulated, so the bounds asserted here are exact properties, not wall-clock timings.
import t from 'tap';
import fc from 'fast-check';
import { BfdSession, SLOW_TX_US, type BfdAction, type BfdParams } from '../../src/bfd/session.ts';
import { decode, BfdState } from '../../src/bfd/codec.ts';

interface Log { at: number; side: 0 | 1; action: BfdAction }

/** Two sessions, a wire with a fixed delay that can be cut, a discrete event loop. */
class Sim {
  now = 0;
  cut = false;
  readonly s: [BfdSession, BfdSession];
  readonly log: Log[] = [];
  private inflight: { at: number; to: 0 | 1; buf: Buffer }[] = [];
  constructor(pa: BfdParams, pb: BfdParams, random: () => number, readonly delay = 1) {
    this.s = [new BfdSession(0x1111, pa, random, 0), new BfdSession(0x2222, pb, random, 0)];
  }
  emit(side: 0 | 1, acts: BfdAction[] | { discard: string }): void {
    if (!Array.isArray(acts)) return;
    for (const a of acts) {
      this.log.push({ at: this.now, side, action: a });
      if (a.type === 'send' && !this.cut) this.inflight.push({ at: this.now + this.delay, to: side === 0 ? 1 : 0, buf: a.packet });
    }
  }
  run(until: number): void {
    while (true) {
      const next = Math.min(this.s[0].deadline(), this.s[1].deadline(), ...this.inflight.map((p) => p.at));
      if (next > until) break;
      this.now = next;
      const due = this.inflight.filter((p) => p.at <= next);
      this.inflight = this.inflight.filter((p) => p.at > next);
      for (const p of due) {
        const d = decode(p.buf);
        if (!d.ok) throw new Error(d.reason);
        this.emit(p.to, this.s[p.to].receive(d.packet, this.now));
      }
      for (const i of [0, 1] as const) if (this.s[i].deadline() <= this.now) this.emit(i, this.s[i].advance(this.now));
    }
    this.now = until;
  }
  states(): string[] {
    return this.s.map((x) => x.stateName);
  }
  received(side: 0 | 1): number[] {
    const other = side === 0 ? 1 : 0;
    return this.log.filter((l) => l.side === other && l.action.type === 'send').map((l) => l.at + this.delay);
  }
}

const params = fc.record({
  desiredMinTx: fc.integer({ min: 10, max: 2000 }).map((ms) => ms * 1000),
  requiredMinRx: fc.integer({ min: 10, max: 2000 }).map((ms) => ms * 1000),
  detectMult: fc.integer({ min: 1, max: 10 }),
});
const seeded = (seed: number) => {
  let x = seed || 1;
  return () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
};

t.test('any two sessions come Up, and go Down within the detection time when the wire is cut', async (t) => {
  fc.assert(fc.property(params, params, fc.integer(), fc.integer({ min: 0, max: 5000 }), (pa, pb, seed, cutAfter) => {
    const sim = new Sim(pa, pb, seeded(seed));
    sim.run(5000);
    if (sim.states().join() !== 'Up,Up') return false;
    // After the Poll Sequence both use the agreed rates.
    sim.run(5000 + 3 * Math.max(pa.desiredMinTx, pb.desiredMinTx, pa.requiredMinRx, pb.requiredMinRx) / 1000 + 100);
    const st = sim.s.map((s) => s.status());
    if (st.some((x) => x.pollInProgress)) return false;
    if (st[0].txInterval !== Math.max(pa.desiredMinTx, pb.requiredMinRx) / 1000) return false;
    if (st[0].detectionTime !== pb.detectMult * Math.max(pa.requiredMinRx, pb.desiredMinTx) / 1000) return false;
    sim.run(sim.now + cutAfter);
    const cutAt = sim.now;
    sim.cut = true;
    const detect = [st[0].detectionTime!, st[1].detectionTime!];
    sim.run(cutAt + Math.max(...detect) + 10);
    for (const side of [0, 1] as const) {
      const down = sim.log.find((l) => l.side === side && l.at >= cutAt && l.action.type === 'state' && l.action.to === 'Down');
      if (!down || down.action.type !== 'state' || down.action.diag !== 1 || down.action.remoteAdminDown) return false;
      const lastRx = Math.max(...sim.received(side).filter((x) => x <= cutAt + sim.delay));
      // Down exactly when the detection time has passed since the last packet received.
      if (Math.abs(down.at - (lastRx + detect[side])) > 1e-6) return false;
    }
    return true;
  }), { numRuns: 150 });
  t.pass('150 pairs');
});

t.test('the three-way handshake: Down -> Init -> Up, then Poll/Final moves both to the configured rate', async (t) => {
  const p = { desiredMinTx: 300_000, requiredMinRx: 300_000, detectMult: 3 };
  const sim = new Sim(p, p, () => 0.5);
  sim.run(10);
  const trans = sim.log.filter((l) => l.action.type === 'state').map((l) => `${l.side}:${(l.action as { from: string }).from}->${(l.action as { to: string }).to}`);
  t.same(trans.filter((x) => x.startsWith('0:')), ['0:Down->Init', '0:Init->Up'], 'side 0 goes through Init');
  t.same(trans.filter((x) => x.startsWith('1:')), ['1:Down->Init', '1:Init->Up'], 'side 1 goes through Init');
  t.same(sim.states(), ['Up', 'Up']);
  const polls = sim.log.filter((l) => l.action.type === 'send' && l.action.poll);
  const finals = sim.log.filter((l) => l.action.type === 'send' && l.action.final);
  t.ok(polls.length >= 2 && finals.length >= 2, 'each side polled and answered with a Final');
  t.notOk(sim.log.some((l) => l.action.type === 'send' && l.action.poll && l.action.final), 'never P and F together');
  sim.run(2000);
  t.same(sim.s.map((s) => s.status().txInterval), [300, 300]);
  t.same(sim.s.map((s) => s.status().detectionTime), [900, 900]);
});

t.test('while not Up, packets go no faster than once a second (6.8.3)', async (t) => {
  const s = new BfdSession(5, { desiredMinTx: 10_000, requiredMinRx: 10_000, detectMult: 3 }, () => 0, 0);
  t.equal(s.status().txInterval, SLOW_TX_US / 1000);
  const a = s.advance(0);
  t.equal(a.length, 1);
  t.equal(s.deadline(), 1000, 'next packet a full second later with zero jitter');
});

t.test('jitter: each interval is 75-100% of the nominal, 75-90% with Detect Mult 1', async (t) => {
  for (const mult of [3, 1]) {
    fc.assert(fc.property(fc.double({ min: 0, max: 0.999999, noNaN: true }), (r) => {
      const s = new BfdSession(5, { desiredMinTx: 1_000_000, requiredMinRx: 1_000_000, detectMult: mult }, () => r, 0);
      s.advance(0);
      const iv = s.deadline();
      return mult === 1 ? iv >= 750 && iv <= 900 : iv > 750 && iv <= 1000;
    }), { numRuns: 500 });
  }
  t.pass('jitter bounds hold');
});

t.test('remote AdminDown takes us Down without a failure; local AdminDown is sent to the remote', async (t) => {
  const p = { desiredMinTx: 100_000, requiredMinRx: 100_000, detectMult: 3 };
  const sim = new Sim(p, p, () => 0.3);
  sim.run(3000);
  t.same(sim.states(), ['Up', 'Up']);
  const acts = sim.s[1].setAdminDown(true, sim.now);
  t.match(acts[0], { type: 'state', to: 'AdminDown', diag: 7 });
  for (const a of acts) if (a.type === 'send') {
    const d = decode(a.packet);
    t.ok(d.ok && d.packet.state === BfdState.AdminDown, 'AdminDown on the wire');
    if (d.ok) {
      const r = sim.s[0].receive(d.packet, sim.now);
      t.ok(Array.isArray(r));
      if (Array.isArray(r)) t.match(r[0], { type: 'state', from: 'Up', to: 'Down', diag: 3, remoteAdminDown: true });
    }
  }
  t.match(sim.s[1].status(), { state: 'AdminDown', diag: 'Administratively Down' });
});

t.test('a packet naming another session is discarded', async (t) => {
  const s = new BfdSession(5, { desiredMinTx: 300_000, requiredMinRx: 300_000, detectMult: 3 }, () => 0, 0);
  const r = s.receive({ version: 1, diag: 0, state: BfdState.Up, poll: false, final: false, controlPlaneIndependent: false, authPresent: false,
    demand: false, multipoint: false, detectMult: 3, length: 24, myDiscriminator: 9, yourDiscriminator: 6,
    desiredMinTxInterval: 1, requiredMinRxInterval: 1, requiredMinEchoRxInterval: 0, auth: null }, 0);
  t.match(r, { discard: /Your Discriminator 6/ });
  t.equal(s.stateName, 'Down');
});

t.test('setParams while Up polls, and a slower rate waits for the Final', async (t) => {
  const p = { desiredMinTx: 100_000, requiredMinRx: 100_000, detectMult: 3 };
  const sim = new Sim(p, p, () => 0.1);
  sim.run(3000);
  t.same(sim.states(), ['Up', 'Up']);
  const acts = sim.s[0].setParams({ desiredMinTx: 500_000, requiredMinRx: 100_000, detectMult: 3 }, sim.now);
  t.ok(acts.some((a) => a.type === 'send' && a.poll), 'a Poll goes out');
  sim.emit(0, acts);
  t.equal(sim.s[0].status().txInterval, 100, 'old rate until the Final');
  sim.run(sim.now + 50);
  t.equal(sim.s[0].status().pollInProgress, false, 'the Final ended the poll');
  t.equal(sim.s[0].status().txInterval, 500);
  sim.run(sim.now + 5000);
  t.same(sim.states(), ['Up', 'Up'], 'stays Up at the new rate');
  t.equal(sim.s[1].status().detectionTime, 1500, 'the remote detects on 3 x 500 ms');
});
