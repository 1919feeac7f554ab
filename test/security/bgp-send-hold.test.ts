// RFC 9687's Send Hold Timer. The pure FSM (src/bgp/fsm.ts) on a simulated clock: for any sequence
// of writes left waiting, writes that reached the kernel and time passing, the session ends with Send Hold Timer
// Expired (8/0) exactly when octets waited SendHoldTime with no write progressing, and never otherwise. Then a real
// speaker over loopback TCP: a peer that completes the OPEN exchange, keeps sending KEEPALIVEs but stops reading while
// we export megabytes is closed with that reason; a peer that reads slowly (pausing for less than SendHoldTime at a
// time, longer than it in total) and one that reads normally take the whole table and stay up.
import t from 'tap';
import fc from 'fast-check';
import { Fsm, SEND_HOLD_MIN, timerEvent, type FsmAction, type FsmConfig, type FsmEvent, type TimerName } from '../../src/bgp/fsm.ts';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { PeerStatus } from '../../src/bgp/peer.ts';
import { endOfRib, type Message } from '../../src/bgp/codec/index.ts';
import { parseConfig } from '../../src/config/config.ts';
import { RawPeer, freePort, waitFor } from '../bgp/raw-peer.ts';

const base: FsmConfig = {
  holdTime: 90, connectRetryTime: 5, connectRetryMax: 120, idleHoldTime: 1, idleHoldMax: 60, delayOpenTime: 0,
  passive: false, autoRestart: true, random: () => 1,
};

function established(cfg: Partial<FsmConfig>, peerHold = cfg.holdTime ?? 90, before: FsmEvent[] = []): { f: Fsm; acts: FsmAction[] } {
  const f = new Fsm({ ...base, ...cfg });
  const acts: FsmAction[] = [];
  for (const e of [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }, { type: 'BGPOpen', holdTime: peerHold }, ...before, { type: 'KeepAliveMsg' }] as FsmEvent[]) {
    acts.push(...f.handle(e));
  }
  if (f.state !== 'Established') throw new Error(`not Established: ${f.state}`);
  return { f, acts };
}

const started = (as: FsmAction[], tm: TimerName) => as.filter((a) => a.type === 'startTimer' && a.timer === tm).map((a) => (a as Extract<FsmAction, { type: 'startTimer' }>).seconds);

t.test('SendHoldTime: RFC 9687 4 default, the configured value, off with hold time 0 or sendHoldTime 0', async (t) => {
  for (const [hold, want] of [[90, 480], [3, 480], [240, 480], [241, 482], [600, 1200], [65535, 131070]] as const) {
    const { f } = established({ holdTime: hold });
    t.equal(f.sendHoldTime, want, `hold time ${hold}: the larger of 8 minutes and twice the hold time (${want})`);
  }
  t.equal(established({ holdTime: 600 }, 90).f.sendHoldTime, 480, 'from the negotiated hold time (90), not ours (600)');
  t.equal(established({ holdTime: 90, sendHoldTime: 100 }).f.sendHoldTime, 100, 'configured');
  t.equal(established({ holdTime: 90, sendHoldTime: 0 }).f.sendHoldTime, 0, 'sendHoldTime 0: off');
  t.equal(established({ holdTime: 90 }, 0).f.sendHoldTime, 0, 'negotiated hold time 0: off');
  t.equal(established({ holdTime: 0, sendHoldTime: 100 }).f.sendHoldTime, 0, 'our hold time 0: off whatever is configured');
  for (const cfg of [{ sendHoldTime: 0 }, { holdTime: 0 }]) {
    const { f } = established(cfg);
    t.same(started(f.handle({ type: 'WritePending' }), 'SendHold'), [], `${JSON.stringify(cfg)}: octets waiting start no timer`);
  }
});

t.test('the timer: started by octets waiting in Established, restarted by progress, stopped when the socket empties', async (t) => {
  const { f, acts } = established({ sendHoldTime: 100 });
  t.same(started(acts, 'SendHold'), [], 'nothing waiting: no timer on entering Established');
  t.same(started(f.handle({ type: 'WritePending' }), 'SendHold'), [100], 'octets wait: started');
  t.same(f.handle({ type: 'WritePending' }), [], 'more octets waiting are no progress: not restarted');
  t.same(started(f.handle({ type: 'WriteProgress', pending: true }), 'SendHold'), [100], 'a write reached the kernel, more wait: restarted');
  t.same(f.handle({ type: 'WriteProgress', pending: false }), [{ type: 'stopTimer', timer: 'SendHold' }], 'nothing waits: stopped');
  t.same(f.handle({ type: 'SendHoldTimer_Expires' }), [], 'a stale expiry after the stop is dropped');
  t.equal(f.state, 'Established');

  // Octets already waiting when the session comes up (RFC 9687 3.3: the timer starts with Established).
  const late = established({ sendHoldTime: 100 }, 90, [{ type: 'WritePending' }]);
  t.same(started(late.acts, 'SendHold'), [100], 'started on the way into Established');

  // Outside a connection's life, write reports change nothing (they belong to a socket that is gone).
  const idle = new Fsm({ ...base, sendHoldTime: 100 });
  t.same(idle.handle({ type: 'WritePending' }), [], 'Idle: ignored');
  t.equal(idle.sendPending, false);

  f.handle({ type: 'WritePending' });
  const down = f.handle({ type: 'SendHoldTimer_Expires' });
  t.equal(f.state, 'Idle', 'expiry: Idle');
  t.same(down.filter((a) => a.type === 'sendNotification').map((a) => a.type === 'sendNotification' && [a.code, a.subcode, a.data.length]), [[8, 0, 0]],
    'NOTIFICATION Send Hold Timer Expired, subcode 0, no data (RFC 9687 5)');
  t.match(down.find((a) => a.type === 'disconnect'), { type: 'disconnect', abort: true }, 'the stuck socket is destroyed, not flushed');
  t.match(down.find((a) => a.type === 'down'), { info: { reason: 'send hold timer expired', wasEstablished: true, notification: { code: 8, subcode: 0, direction: 'sent' } } });
  t.equal(f.connectRetryCounter, 1, 'ConnectRetryCounter incremented (damping)');
  t.ok(f.isRunning('IdleHold') && !f.isRunning('SendHold'), 'restart after IdleHold; the timer is gone with the session');
  t.equal(f.sendPending, false, 'the new connection starts with nothing waiting');
});

type Op = { k: 'wait'; dt: number } | { k: 'pending' } | { k: 'progress'; pending: boolean };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.integer({ min: 0, max: 40 }).map((dt): Op => ({ k: 'wait', dt })),
  fc.constant<Op>({ k: 'pending' }),
  fc.boolean().map((pending): Op => ({ k: 'progress', pending })),
);

t.test('property: expires exactly when octets waited SendHoldTime with no write progressing, never otherwise', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 60 }), fc.array(op, { maxLength: 80 }), (sendHold, ops) => {
      // Hold time 65535: the hold and keepalive timers stay out of the way of this simulation (a few thousand s).
      const { f } = established({ holdTime: 65535, sendHoldTime: sendHold });
      let now = 0;
      const timers = new Map<TimerName, number>(); // deadlines, as the adapter would run them
      let expiredAt: number | null = null;
      const apply = (acts: FsmAction[]) => {
        for (const a of acts) {
          if (a.type === 'startTimer') timers.set(a.timer, now + a.seconds);
          if (a.type === 'stopTimer') timers.delete(a.timer);
          if (a.type === 'down') {
            if (a.info.reason !== 'send hold timer expired' || a.info.notification?.code !== 8 || a.info.notification.subcode !== 0) throw new Error(`down: ${JSON.stringify(a.info)}`);
            expiredAt = now;
          }
        }
      };
      // The model: octets wait since `since` with no progress.
      let waiting = false;
      let since = 0;
      for (const o of ops) {
        if (o.k === 'wait') {
          const until = now + o.dt;
          for (;;) {
            let next: [TimerName, number] | null = null;
            for (const [tm, due] of timers) if (due <= until && (!next || due < next[1])) next = [tm, due];
            if (!next) break;
            now = next[1];
            timers.delete(next[0]);
            apply(f.handle(timerEvent(next[0])));
            if (expiredAt !== null) break;
          }
          if (expiredAt === null) now = until;
        } else if (o.k === 'pending') {
          if (!waiting) since = now;
          waiting = true;
          apply(f.handle({ type: 'WritePending' }));
        } else {
          since = now;
          waiting = o.pending;
          apply(f.handle({ type: 'WriteProgress', pending: o.pending }));
        }
        const due = waiting ? since + sendHold : Infinity;
        if (expiredAt !== null) return expiredAt === due; // expired: exactly at the model's moment
        if (now >= due) return false; // should have expired by now
        if (f.state !== 'Established') return false;
      }
      return true;
    }),
    { numRuns: 3000 },
  );
  t.pass('no counterexample');
});

t.test('property (random FSM events): the timer never runs outside Established, nor without octets waiting', async (t) => {
  const ev: fc.Arbitrary<FsmEvent> = fc.constantFrom<FsmEvent>(
    { type: 'ManualStart' }, { type: 'ManualStop' }, { type: 'Tcp_CR_Acked' }, { type: 'TcpConnectionConfirmed' },
    { type: 'TcpConnectionFails' }, { type: 'BGPOpen', holdTime: 90 }, { type: 'BGPOpen', holdTime: 0 }, { type: 'KeepAliveMsg' },
    { type: 'UpdateMsg' }, { type: 'NotifMsg' }, { type: 'HoldTimer_Expires' }, { type: 'KeepaliveTimer_Expires' },
    { type: 'IdleHoldTimer_Expires' }, { type: 'SendHoldTimer_Expires' }, { type: 'WritePending' },
    { type: 'WriteProgress', pending: true }, { type: 'WriteProgress', pending: false },
  );
  fc.assert(
    fc.property(fc.array(ev, { maxLength: 80 }), (evs) => {
      const f = new Fsm({ ...base, sendHoldTime: 100 });
      for (const e of evs) {
        f.handle(e);
        if (f.isRunning('SendHold') && (f.state !== 'Established' || !f.sendPending || f.holdTime === 0)) return false;
        if (f.state === 'Established' && f.sendPending && f.holdTime > 0 && !f.isRunning('SendHold')) return false;
      }
      return true;
    }),
    { numRuns: 3000 },
  );
  t.pass('no counterexample');
});

t.test('config: peers[].sendHoldTime is validated with errors naming the field', async (t) => {
  const cfg = (peer: object) => parseConfig(JSON.stringify({ bgp: { asn: 65001, routerId: '10.0.0.1', peers: [{ address: '10.0.0.2', asn: 65002, ...peer }] } }));
  t.equal(cfg({}).bgp!.peers[0].sendHoldTime, undefined, 'absent: left to the speaker (the RFC default from the negotiated hold time)');
  t.equal(cfg({ sendHoldTime: 600 }).bgp!.peers[0].sendHoldTime, 600);
  t.equal(cfg({ sendHoldTime: 0 }).bgp!.peers[0].sendHoldTime, 0, '0: off');
  t.equal(cfg({ holdTime: 0, sendHoldTime: 0 }).bgp!.peers[0].sendHoldTime, 0);
  t.throws(() => cfg({ sendHoldTime: 90 }), { message: /bgp\.peers\[0\]\.sendHoldTime: must be more than holdTime \(90\)/ }, 'not more than the hold time');
  t.throws(() => cfg({ holdTime: 30, sendHoldTime: 20 }), { message: /bgp\.peers\[0\]\.sendHoldTime: must be more than holdTime \(30\)/ });
  t.throws(() => cfg({ holdTime: 0, sendHoldTime: 600 }), { message: /bgp\.peers\[0\]\.sendHoldTime: has no effect with holdTime 0/ });
  t.throws(() => cfg({ sendHoldTime: -1 }), { message: /bgp\.peers\[0\]\.sendHoldTime: must be 0 \(off\) or seconds/ });
  t.throws(() => cfg({ sendHoldTime: 'ten' }), { message: /bgp\.peers\[0\]\.sendHoldTime: must be/ });
  t.throws(() => cfg({ sendHoldTime: 1e9 }), { message: /bgp\.peers\[0\]\.sendHoldTime: must be 0 \(off\) or seconds up to 2147483/ });
  t.throws(() => new Speaker({ asn: 1, routerId: '10.0.0.1', listen: false, peers: [{ address: '10.0.0.2', asn: 2, holdTime: 90, sendHoldTime: 60 }] }),
    { message: /peer 10\.0\.0\.2: sendHoldTime 60 must be 0 \(off\) or more than holdTime \(90\)/ }, 'the speaker checks it too');
});

// ---- a real speaker ------------------------------------------------------------------------------------------------

const isEor = (m: Message | null) => m?.type === 'update' && endOfRib(m) !== null;
const notifications = (p: RawPeer) => p.received.filter((r) => r.msg?.type === 'notification').map((r) => r.msg as Extract<Message, { type: 'notification' }>);

t.test('a new sendHoldTime is taken by the running session (a local timer, not in the OPEN): no restart', async (t) => {
  const port = await freePort();
  const cfg = (sendHoldTime: number | undefined) => ({
    asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port },
    peers: [{ address: '127.0.0.2', asn: 65002, passive: true, sendHoldTime }],
  });
  const speaker = new Speaker(cfg(600), { random: () => 0.5 });
  t.teardown(() => speaker.stop({ graceful: false }));
  await speaker.start();
  const peer = await RawPeer.connect(port, '127.0.0.1', '127.0.0.2');
  t.teardown(() => peer.close());
  await peer.establish({ holdTime: 90 });
  await waitFor(() => speaker.peers()[0].state === 'Established', 'Established');
  t.equal(speaker.peers()[0].sendHoldTime, 600, '/peers shows the SendHoldTime in effect');
  await speaker.reconfigure(cfg(700));
  t.equal(speaker.peers()[0].sendHoldTime, 700, 'the new value');
  await speaker.reconfigure(cfg(undefined));
  t.equal(speaker.peers()[0].sendHoldTime, SEND_HOLD_MIN, 'back to the default: 480 with hold time 90');
  t.equal(speaker.peers()[0].state, 'Established');
  t.equal(speaker.peers()[0].flaps, 0, 'never restarted');
  t.same(notifications(peer), [], 'no NOTIFICATION');
});

const HOLD = 4;
const SEND_HOLD = 5;
const ROUTES = 8000;
/** Large communities per route: ~1.2 KB of attributes each, so the table is ~10 MB (loopback buffers take ~4 MB). */
const COMMUNITIES = 100;

interface Lines {
  error: string[];
  warn: string[];
  info: string[];
}

function speakerWithTable(port: number): { speaker: Speaker; lines: Lines } {
  const lines: Lines = { error: [], warn: [], info: [] };
  const peer = (n: number) => ({ address: `127.0.0.${n}`, asn: 65002, passive: true, holdTime: HOLD, sendHoldTime: SEND_HOLD });
  const speaker = new Speaker(
    { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port }, peers: [peer(2), peer(3), peer(4)] },
    {
      random: () => 0.5,
      logger: { debug() {}, info: (m) => lines.info.push(m), warn: (m) => lines.warn.push(m), error: (m) => lines.error.push(m) },
    },
  );
  for (let i = 0; i < ROUTES; i++) {
    const large = Array.from({ length: COMMUNITIES }, (_, j) => [65001, i, j] as const);
    speaker.announce(`10.${(i >> 8) & 255}.${i & 255}.0/24`, { largeCommunities: large });
  }
  return { speaker, lines };
}

/** A peer from 127.0.0.N that completes the OPEN exchange and sends a KEEPALIVE every 500 ms until closed. */
async function peerUp(port: number, n: number): Promise<{ peer: RawPeer; stop: () => void }> {
  const peer = await RawPeer.connect(port, '127.0.0.1', `127.0.0.${n}`);
  await peer.establish({ holdTime: 90 });
  const timer = setInterval(() => {
    if (!peer.closed) peer.keepalive();
  }, 500);
  void peer.closedP.then(() => clearInterval(timer));
  return { peer, stop: () => clearInterval(timer) };
}


t.test('a peer that stops reading (and keeps sending KEEPALIVEs) is closed with Send Hold Timer Expired; readers are not', async (t) => {
  const port = await freePort();
  const { speaker, lines } = speakerWithTable(port);
  t.teardown(() => speaker.stop({ graceful: false }));
  await speaker.start();
  const status = (n: number): PeerStatus => speaker.peers().find((p) => p.address === `127.0.0.${n}`)!;

  // 127.0.0.2 never reads after the OPEN exchange; 127.0.0.3 reads in bursts with pauses shorter than SendHoldTime;
  // 127.0.0.4 reads normally.
  const stuck = await peerUp(port, 2);
  stuck.peer.sock.pause();
  const slow = await peerUp(port, 3);
  let burst = 0;
  let pauses = 0;
  slow.peer.sock.on('data', (chunk: Buffer) => {
    burst += chunk.length;
    if (burst < 2 << 20 || slow.peer.received.some((r) => isEor(r.msg))) return;
    burst = 0;
    pauses++;
    slow.peer.sock.pause();
    setTimeout(() => slow.peer.sock.resume(), 1500);
  });
  const normal = await peerUp(port, 4);
  t.teardown(() => [stuck, slow, normal].forEach((x) => { x.stop(); x.peer.close(); }));

  await waitFor(() => status(2).state !== 'Established', 'the stuck peer closed', 120_000, 50);
  const down = status(2);
  t.match(down.lastError, /sent NOTIFICATION Send Hold Timer Expired \/ subcode 0 \(8\/0\)/, 'the reason, as /peers shows it (lastError)');
  t.same(down.errorCounts['notification-sent'], { '8/0': 1 }, 'counted as a NOTIFICATION sent, 8/0');
  t.ok(lines.error.some((l) => /^peer 127\.0\.0\.2: send hold timer expired: nothing could be written to the socket for 5s, \d+ octets waiting \(RFC 9687\)/.test(l)),
    'an error line in the log (RFC 9687 3.3)');
  t.ok(lines.info.some((l) => l === 'peer 127.0.0.2: down (send hold timer expired)'), 'down, with the reason');
  t.ok(stuck.peer.received.every((r) => r.msg?.type !== 'update' || !endOfRib(r.msg)), 'it never got the whole table');

  // What the stuck peer can still read: whatever was in the kernel; a NOTIFICATION, if any got through, is 8/0.
  stuck.stop();
  stuck.peer.sock.resume();
  await stuck.peer.closedP;
  const got = notifications(stuck.peer);
  t.ok(got.length <= 1 && got.every((n) => n.code === 8 && n.subcode === 0 && n.data.length === 0),
    `the stuck peer received ${got.length ? 'NOTIFICATION 8/0' : 'no NOTIFICATION (expected: its socket was stuck)'}`);

  // The readers take the whole table and stay up through it all (the slow one stalled longer than SendHoldTime in total).
  for (const [name, x] of [['slow', slow], ['normal', normal]] as const) {
    await x.peer.until((rs) => rs.some((r) => isEor(r.msg)), 120_000, `${name}: End-of-RIB`);
    t.equal(x.peer.received.filter((r) => r.msg?.type === 'update').length > ROUTES / 100, true, `${name}: the table arrived`);
  }
  t.ok(pauses >= 3, `the slow reader paused ${pauses} times (1.5 s each, ${pauses * 1.5} s in all, SendHoldTime ${SEND_HOLD} s)`);
  // Time passing, measured by the speaker's own KEEPALIVEs: more than SendHoldTime with both still up.
  const from = normal.peer.received.length;
  await normal.peer.until((rs) => rs.slice(from).filter((r) => r.msg?.type === 'keepalive').length >= 6, 30_000, 'six more KEEPALIVEs');
  for (const n of [3, 4]) {
    t.equal(status(n).state, 'Established', `127.0.0.${n} still Established`);
    t.same(status(n).errorCounts, {}, `127.0.0.${n}: no error of any kind`);
  }
  t.same([...notifications(slow.peer), ...notifications(normal.peer)], [], 'no NOTIFICATION to the readers');
});
