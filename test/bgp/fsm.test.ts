// The pure FSM against RFC 4271 section 8.2.2, state by state (table-driven), with the NOTIFICATIONs it sends
// itself (RFC 4271 6, RFC 6608 FSM error subcodes), hold-time negotiation, ConnectRetry backoff and damping.
import t from 'tap';
import fc from 'fast-check';
import { Fsm, type FsmAction, type FsmConfig, type FsmEvent, type State, type TimerName } from '../../src/bgp/fsm.ts';

const base: FsmConfig = {
  holdTime: 90,
  connectRetryTime: 5,
  connectRetryMax: 120,
  idleHoldTime: 1,
  idleHoldMax: 60,
  delayOpenTime: 0,
  passive: false,
  autoRestart: true,
  random: () => 1, // jitter factor 1.0 exactly (0.75 + 0.25 * 1)
};

function fsmIn(state: State, cfg: Partial<FsmConfig> = {}): Fsm {
  const f = new Fsm({ ...base, ...cfg });
  const path: FsmEvent[] = {
    Idle: [],
    Connect: [{ type: 'ManualStart' }],
    Active: [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }, { type: 'TcpConnectionFails' }],
    OpenSent: [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }],
    OpenConfirm: [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }, { type: 'BGPOpen', holdTime: 90 }],
    Established: [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }, { type: 'BGPOpen', holdTime: 90 }, { type: 'KeepAliveMsg' }],
  }[state] as FsmEvent[];
  for (const e of path) f.handle(e);
  if (f.state !== state) throw new Error(`could not reach ${state}: in ${f.state}`);
  return f;
}

const notifs = (as: FsmAction[]) => as.filter((a) => a.type === 'sendNotification').map((a) => a.type === 'sendNotification' ? [a.code, a.subcode] : []);
const has = (as: FsmAction[], type: FsmAction['type']) => as.some((a) => a.type === type);
const timerStarted = (as: FsmAction[], t: TimerName) => as.find((a) => a.type === 'startTimer' && a.timer === t) as Extract<FsmAction, { type: 'startTimer' }> | undefined;

const HDR = { code: 1, subcode: 1 };
const OPENERR = { code: 2, subcode: 2, data: new Uint8Array([0xfd, 0xe9]) };
const UPDERR = { code: 3, subcode: 1 };

interface Row {
  from: State;
  ev: FsmEvent;
  to: State;
  /** The NOTIFICATION sent ([code, subcode]) or null for none. */
  notify: [number, number] | null;
  /** Change of ConnectRetryCounter: +1, 0, or 'reset'. */
  counter?: 1 | 0 | 'reset';
  also?: FsmAction['type'][];
  why: string;
}

const rows: Row[] = [
  // ---- Idle -------------------------------------------------------------------------------------------------
  { from: 'Idle', ev: { type: 'ManualStart' }, to: 'Connect', notify: null, also: ['connect', 'startTimer'], why: '8.2.2 Idle event 1' },
  { from: 'Idle', ev: { type: 'AutomaticStart' }, to: 'Connect', notify: null, also: ['connect'], why: 'Idle event 3' },
  { from: 'Idle', ev: { type: 'ManualStart_with_PassiveTcpEstablishment' }, to: 'Active', notify: null, why: 'Idle event 4' },
  { from: 'Idle', ev: { type: 'AutomaticStart_with_PassiveTcpEstablishment' }, to: 'Active', notify: null, why: 'Idle event 5' },
  { from: 'Idle', ev: { type: 'ManualStop' }, to: 'Idle', notify: null, why: 'Idle: event 2 ignored' },
  { from: 'Idle', ev: { type: 'KeepAliveMsg' }, to: 'Idle', notify: null, why: 'Idle: other events ignored' },
  { from: 'Idle', ev: { type: 'UpdateMsg' }, to: 'Idle', notify: null, why: 'Idle: other events ignored' },
  { from: 'Idle', ev: { type: 'BGPOpen', holdTime: 90 }, to: 'Idle', notify: null, why: 'Idle: other events ignored' },
  { from: 'Idle', ev: { type: 'TcpConnectionConfirmed' }, to: 'Idle', notify: null, also: ['disconnect'], why: 'Idle refuses connections' },
  // ---- Connect ----------------------------------------------------------------------------------------------
  { from: 'Connect', ev: { type: 'ManualStart' }, to: 'Connect', notify: null, why: 'Connect: starts ignored' },
  { from: 'Connect', ev: { type: 'ManualStop' }, to: 'Idle', notify: null, counter: 'reset', also: ['disconnect'], why: 'Connect event 2' },
  { from: 'Connect', ev: { type: 'ConnectRetryTimer_Expires' }, to: 'Connect', notify: null, also: ['disconnect', 'connect', 'startTimer'], why: 'Connect event 9' },
  { from: 'Connect', ev: { type: 'Tcp_CR_Acked' }, to: 'OpenSent', notify: null, also: ['sendOpen'], why: 'Connect event 16' },
  { from: 'Connect', ev: { type: 'TcpConnectionConfirmed' }, to: 'OpenSent', notify: null, also: ['sendOpen'], why: 'Connect event 17' },
  { from: 'Connect', ev: { type: 'TcpConnectionFails' }, to: 'Idle', notify: null, counter: 0, why: 'Connect event 18 (no DelayOpen)' },
  { from: 'Connect', ev: { type: 'BGPHeaderErr', notification: HDR }, to: 'Idle', notify: [1, 1], counter: 1, why: 'Connect events 21-22' },
  { from: 'Connect', ev: { type: 'NotifMsgVerErr', notification: { code: 2, subcode: 1 } }, to: 'Idle', notify: null, counter: 1, why: 'Connect event 24' },
  { from: 'Connect', ev: { type: 'KeepAliveMsg' }, to: 'Idle', notify: null, counter: 1, also: ['disconnect'], why: 'Connect: other events' },
  { from: 'Connect', ev: { type: 'AutomaticStop' }, to: 'Idle', notify: null, counter: 1, why: 'Connect: other events (8)' },
  // ---- Active -----------------------------------------------------------------------------------------------
  { from: 'Active', ev: { type: 'ManualStop' }, to: 'Idle', notify: null, counter: 'reset', why: 'Active event 2' },
  { from: 'Active', ev: { type: 'ConnectRetryTimer_Expires' }, to: 'Connect', notify: null, also: ['connect'], why: 'Active event 9' },
  { from: 'Active', ev: { type: 'TcpConnectionConfirmed' }, to: 'OpenSent', notify: null, also: ['sendOpen'], why: 'Active event 17' },
  { from: 'Active', ev: { type: 'Tcp_CR_Acked' }, to: 'OpenSent', notify: null, also: ['sendOpen'], why: 'Active event 16' },
  { from: 'Active', ev: { type: 'TcpConnectionFails' }, to: 'Idle', notify: null, counter: 1, why: 'Active event 18' },
  { from: 'Active', ev: { type: 'BGPOpenMsgErr', notification: OPENERR }, to: 'Idle', notify: [2, 2], counter: 1, why: 'Active events 21-22' },
  { from: 'Active', ev: { type: 'UpdateMsg' }, to: 'Idle', notify: null, counter: 1, why: 'Active: other events' },
  // ---- OpenSent ---------------------------------------------------------------------------------------------
  { from: 'OpenSent', ev: { type: 'ManualStart' }, to: 'OpenSent', notify: null, why: 'OpenSent: starts ignored' },
  { from: 'OpenSent', ev: { type: 'ManualStop' }, to: 'Idle', notify: [6, 2], counter: 'reset', why: 'OpenSent event 2: Cease' },
  { from: 'OpenSent', ev: { type: 'AutomaticStop', notification: { code: 6, subcode: 3 } }, to: 'Idle', notify: [6, 3], counter: 1, why: 'OpenSent event 8: Cease' },
  { from: 'OpenSent', ev: { type: 'HoldTimer_Expires' }, to: 'Idle', notify: [4, 0], counter: 1, why: 'OpenSent event 10' },
  { from: 'OpenSent', ev: { type: 'TcpConnectionConfirmed' }, to: 'OpenSent', notify: null, why: 'OpenSent: second connection tracked elsewhere' },
  { from: 'OpenSent', ev: { type: 'TcpConnectionFails' }, to: 'Active', notify: null, counter: 0, also: ['disconnect'], why: 'OpenSent event 18' },
  { from: 'OpenSent', ev: { type: 'BGPOpen', holdTime: 90 }, to: 'OpenConfirm', notify: null, also: ['sendKeepalive'], why: 'OpenSent event 19' },
  { from: 'OpenSent', ev: { type: 'BGPOpen', holdTime: 1 }, to: 'Idle', notify: [2, 6], counter: 1, why: '4271 6.2: hold time 1 refused' },
  { from: 'OpenSent', ev: { type: 'BGPOpen', holdTime: 2 }, to: 'Idle', notify: [2, 6], counter: 1, why: '4271 6.2: hold time 2 refused' },
  { from: 'OpenSent', ev: { type: 'BGPHeaderErr', notification: HDR }, to: 'Idle', notify: [1, 1], counter: 1, why: 'OpenSent event 21' },
  { from: 'OpenSent', ev: { type: 'BGPOpenMsgErr', notification: OPENERR }, to: 'Idle', notify: [2, 2], counter: 1, why: 'OpenSent event 22' },
  { from: 'OpenSent', ev: { type: 'OpenCollisionDump' }, to: 'Idle', notify: [6, 7], counter: 1, why: 'OpenSent event 23, RFC 4486 subcode 7' },
  { from: 'OpenSent', ev: { type: 'NotifMsgVerErr', notification: { code: 2, subcode: 1 } }, to: 'Idle', notify: null, counter: 0, why: 'OpenSent event 24' },
  { from: 'OpenSent', ev: { type: 'NotifMsg' }, to: 'Idle', notify: null, counter: 1, why: 'OpenSent event 25: never answer a NOTIFICATION' },
  { from: 'OpenSent', ev: { type: 'KeepAliveMsg' }, to: 'Idle', notify: [5, 1], counter: 1, why: 'RFC 6608: unexpected in OpenSent' },
  { from: 'OpenSent', ev: { type: 'UpdateMsg' }, to: 'Idle', notify: [5, 1], counter: 1, why: 'RFC 6608: unexpected in OpenSent' },
  { from: 'OpenSent', ev: { type: 'UpdateMsgErr', notification: UPDERR }, to: 'Idle', notify: [5, 1], counter: 1, why: 'RFC 6608: unexpected in OpenSent' },
  { from: 'OpenSent', ev: { type: 'RouteRefreshMsg' }, to: 'Idle', notify: [5, 1], counter: 1, why: 'RFC 6608: ROUTE-REFRESH in OpenSent' },
  // ---- OpenConfirm ------------------------------------------------------------------------------------------
  { from: 'OpenConfirm', ev: { type: 'ManualStop' }, to: 'Idle', notify: [6, 2], counter: 'reset', why: 'OpenConfirm event 2' },
  { from: 'OpenConfirm', ev: { type: 'AutomaticStop' }, to: 'Idle', notify: [6, 0], counter: 1, why: 'OpenConfirm event 8' },
  { from: 'OpenConfirm', ev: { type: 'HoldTimer_Expires' }, to: 'Idle', notify: [4, 0], counter: 1, why: 'OpenConfirm event 10' },
  { from: 'OpenConfirm', ev: { type: 'KeepaliveTimer_Expires' }, to: 'OpenConfirm', notify: null, also: ['sendKeepalive', 'startTimer'], why: 'OpenConfirm event 11' },
  { from: 'OpenConfirm', ev: { type: 'TcpConnectionConfirmed' }, to: 'OpenConfirm', notify: null, why: 'OpenConfirm: second connection' },
  { from: 'OpenConfirm', ev: { type: 'TcpConnectionFails' }, to: 'Idle', notify: null, counter: 1, why: 'OpenConfirm event 18' },
  { from: 'OpenConfirm', ev: { type: 'NotifMsg' }, to: 'Idle', notify: null, counter: 1, why: 'OpenConfirm event 25' },
  { from: 'OpenConfirm', ev: { type: 'NotifMsgVerErr', notification: { code: 2, subcode: 1 } }, to: 'Idle', notify: null, counter: 0, why: 'OpenConfirm event 24' },
  { from: 'OpenConfirm', ev: { type: 'BGPHeaderErr', notification: { code: 1, subcode: 2 } }, to: 'Idle', notify: [1, 2], counter: 1, why: 'OpenConfirm event 21' },
  { from: 'OpenConfirm', ev: { type: 'OpenCollisionDump' }, to: 'Idle', notify: [6, 7], counter: 1, why: 'OpenConfirm event 23' },
  { from: 'OpenConfirm', ev: { type: 'KeepAliveMsg' }, to: 'Established', notify: null, also: ['established'], why: 'OpenConfirm event 26' },
  { from: 'OpenConfirm', ev: { type: 'BGPOpen', holdTime: 90 }, to: 'Idle', notify: [5, 2], counter: 1, why: 'RFC 6608: second OPEN in OpenConfirm' },
  { from: 'OpenConfirm', ev: { type: 'UpdateMsg' }, to: 'Idle', notify: [5, 2], counter: 1, why: 'RFC 6608: UPDATE in OpenConfirm' },
  { from: 'OpenConfirm', ev: { type: 'UpdateMsgErr', notification: UPDERR }, to: 'Idle', notify: [5, 2], counter: 1, why: 'RFC 6608' },
  { from: 'OpenConfirm', ev: { type: 'RouteRefreshMsg' }, to: 'Idle', notify: [5, 2], counter: 1, why: 'RFC 6608' },
  // ---- Established ------------------------------------------------------------------------------------------
  { from: 'Established', ev: { type: 'ManualStart' }, to: 'Established', notify: null, why: 'Established: starts ignored' },
  { from: 'Established', ev: { type: 'ManualStop' }, to: 'Idle', notify: [6, 2], counter: 'reset', also: ['down'], why: 'Established event 2' },
  { from: 'Established', ev: { type: 'AutomaticStop', notification: { code: 6, subcode: 1 } }, to: 'Idle', notify: [6, 1], counter: 1, why: 'Established event 8' },
  { from: 'Established', ev: { type: 'HoldTimer_Expires' }, to: 'Idle', notify: [4, 0], counter: 1, also: ['down'], why: 'Established event 10' },
  { from: 'Established', ev: { type: 'KeepaliveTimer_Expires' }, to: 'Established', notify: null, also: ['sendKeepalive'], why: 'Established event 11' },
  { from: 'Established', ev: { type: 'TcpConnectionConfirmed' }, to: 'Established', notify: null, why: 'Established: second connection' },
  { from: 'Established', ev: { type: 'BGPOpen', holdTime: 90 }, to: 'Idle', notify: [5, 3], counter: 1, why: 'RFC 6608: OPEN in Established' },
  { from: 'Established', ev: { type: 'BGPOpenMsgErr', notification: OPENERR }, to: 'Idle', notify: [5, 3], counter: 1, why: 'RFC 6608: OPEN in Established' },
  { from: 'Established', ev: { type: 'BGPHeaderErr', notification: { code: 1, subcode: 3, data: new Uint8Array([9]) } }, to: 'Idle', notify: [1, 3], counter: 1, why: '4271 6.1 header error' },
  { from: 'Established', ev: { type: 'OpenCollisionDump' }, to: 'Idle', notify: [6, 7], counter: 1, why: 'Established event 23' },
  { from: 'Established', ev: { type: 'TcpConnectionFails' }, to: 'Idle', notify: null, counter: 1, also: ['down'], why: 'Established event 18' },
  { from: 'Established', ev: { type: 'NotifMsg' }, to: 'Idle', notify: null, counter: 1, also: ['down'], why: 'Established event 25' },
  { from: 'Established', ev: { type: 'NotifMsgVerErr', notification: { code: 2, subcode: 1 } }, to: 'Idle', notify: null, counter: 1, why: 'Established event 24' },
  { from: 'Established', ev: { type: 'KeepAliveMsg' }, to: 'Established', notify: null, also: ['startTimer'], why: 'Established event 26: hold timer restarted' },
  { from: 'Established', ev: { type: 'UpdateMsg' }, to: 'Established', notify: null, also: ['deliverUpdate', 'startTimer'], why: 'Established event 27' },
  { from: 'Established', ev: { type: 'RouteRefreshMsg' }, to: 'Established', notify: null, also: ['deliverRouteRefresh'], why: 'RFC 2918' },
  { from: 'Established', ev: { type: 'UpdateMsgErr', notification: { code: 3, subcode: 11 } }, to: 'Idle', notify: [3, 11], counter: 1, why: 'Established event 28' },
];

t.test('RFC 4271 8.2.2 transitions', async (t) => {
  for (const r of rows) {
    const f = fsmIn(r.from);
    const before = f.connectRetryCounter;
    const acts = f.handle(r.ev);
    const name = `${r.from} + ${r.ev.type} -> ${r.to} (${r.why})`;
    t.equal(f.state, r.to, name);
    t.same(notifs(acts), r.notify ? [r.notify] : [], `${name}: NOTIFICATION`);
    if (r.notify) {
      // The NOTIFICATION goes out before the connection is dropped.
      const ni = acts.findIndex((a) => a.type === 'sendNotification');
      const di = acts.findIndex((a) => a.type === 'disconnect');
      t.ok(di > ni, `${name}: disconnect after the NOTIFICATION`);
    }
    if (r.counter === 'reset') t.equal(f.connectRetryCounter, 0, `${name}: counter reset`);
    else if (r.counter !== undefined) t.equal(f.connectRetryCounter, before + r.counter, `${name}: counter ${r.counter >= 0 ? '+' : ''}${r.counter}`);
    for (const a of r.also ?? []) t.ok(has(acts, a), `${name}: ${a}`);
    if (r.to === 'Idle' && r.from !== 'Idle') {
      t.ok(has(acts, 'disconnect'), `${name}: TCP dropped`);
      // Only IdleHold may run in Idle.
      for (const tm of ['ConnectRetry', 'Hold', 'Keepalive', 'DelayOpen', 'Stable'] as const) t.notOk(f.isRunning(tm), `${name}: ${tm} stopped`);
    }
  }
});

t.test('NOTIFICATION data is passed through (shutdown communication, Bad Peer AS)', async (t) => {
  const f = fsmIn('Established');
  const data = new Uint8Array([3, 0x62, 0x79, 0x65]);
  const acts = f.handle({ type: 'ManualStop', notification: { code: 6, subcode: 2, data } });
  const n = acts.find((a) => a.type === 'sendNotification');
  t.same(n && n.type === 'sendNotification' ? [...n.data] : null, [...data]);
  const g = fsmIn('OpenSent');
  const n2 = g.handle({ type: 'BGPOpenMsgErr', notification: OPENERR }).find((a) => a.type === 'sendNotification');
  t.same(n2 && n2.type === 'sendNotification' ? [...n2.data] : null, [0xfd, 0xe9]);
});

t.test('down reports whether the session was Established and what was exchanged', async (t) => {
  const f = fsmIn('Established');
  const d = f.handle({ type: 'TcpConnectionFails', reason: 'reset' }).find((a) => a.type === 'down');
  t.same(d && d.type === 'down' ? d.info : null, { reason: 'reset', notification: null, wasEstablished: true });
  const g = fsmIn('Established');
  const d2 = g.handle({ type: 'HoldTimer_Expires' }).find((a) => a.type === 'down');
  t.match(d2 && d2.type === 'down' ? d2.info : null, { wasEstablished: true, notification: { code: 4, subcode: 0, direction: 'sent' } });
  const h = fsmIn('OpenSent');
  const d3 = h.handle({ type: 'NotifMsg', notification: { code: 6, subcode: 5 } }).find((a) => a.type === 'down');
  t.match(d3 && d3.type === 'down' ? d3.info : null, { wasEstablished: false, notification: { code: 6, subcode: 5, direction: 'received' } });
  // A refused TCP connect had no session: no down.
  const c = fsmIn('Connect');
  t.notOk(has(c.handle({ type: 'TcpConnectionFails' }), 'down'));
  // 'state' comes before 'down' and 'established', so status read in a handler is current.
  const e = fsmIn('OpenConfirm');
  const acts = e.handle({ type: 'KeepAliveMsg' });
  t.ok(acts.findIndex((a) => a.type === 'state') < acts.findIndex((a) => a.type === 'established'));
});

t.test('hold time negotiation', async (t) => {
  const cases: [local: number, peer: number, hold: number, keepalive: number][] = [
    [90, 180, 90, 30],
    [90, 30, 30, 10],
    [90, 3, 3, 1],
    [90, 0, 0, 0],
    [0, 90, 0, 0],
    [10, 11, 10, 3],
  ];
  for (const [local, peer, hold, ka] of cases) {
    const f = fsmIn('OpenSent', { holdTime: local });
    const acts = f.handle({ type: 'BGPOpen', holdTime: peer });
    t.equal(f.state, 'OpenConfirm');
    t.equal(f.holdTime, hold, `hold min(${local}, ${peer})`);
    t.equal(f.keepaliveTime, ka, `keepalive ${hold}/3`);
    const kt = timerStarted(acts, 'Keepalive');
    const ht = timerStarted(acts, 'Hold');
    if (hold === 0) {
      t.notOk(kt, 'hold 0: no keepalives');
      t.notOk(ht, 'hold 0: no hold timer');
      t.notOk(f.isRunning('Hold'));
    } else {
      t.equal(kt?.seconds, ka, 'keepalive timer (jitter factor 1)');
      t.equal(ht?.seconds, hold, 'hold timer');
    }
  }
  // OpenSent waits with a large hold timer (RFC 4271 8: 4 minutes suggested).
  const f = fsmIn('Connect');
  t.equal(timerStarted(f.handle({ type: 'Tcp_CR_Acked' }), 'Hold')?.seconds, 240);
  // Keepalive jitter: 0.75..1.0 of hold/3 (RFC 4271 10).
  const g = fsmIn('OpenSent', { random: () => 0 });
  t.equal(timerStarted(g.handle({ type: 'BGPOpen', holdTime: 90 }), 'Keepalive')?.seconds, 22.5);
  // A local minimum above the RFC's.
  const h = fsmIn('OpenSent', { minHoldTime: 9 });
  t.same(notifs(h.handle({ type: 'BGPOpen', holdTime: 6 })), [[2, 6]]);
});

t.test('ConnectRetry backs off exponentially with jitter and a cap', async (t) => {
  let r = 1;
  const f = fsmIn('Idle', { random: () => r, connectRetryTime: 5, connectRetryMax: 60 });
  const first = timerStarted(f.handle({ type: 'ManualStart' }), 'ConnectRetry')!;
  t.equal(first.seconds, 5);
  const seen: number[] = [];
  for (let i = 0; i < 6; i++) seen.push(timerStarted(f.handle({ type: 'ConnectRetryTimer_Expires' }), 'ConnectRetry')!.seconds);
  t.same(seen, [10, 20, 40, 60, 60, 60]);
  r = 0;
  t.equal(timerStarted(f.handle({ type: 'ConnectRetryTimer_Expires' }), 'ConnectRetry')!.seconds, 45, 'jitter 0.75');
  // TCP up resets the backoff.
  f.handle({ type: 'Tcp_CR_Acked' });
  t.equal(f.connectAttempts, 0);
});

t.test('a refused connection retries through IdleHold with the connect backoff', async (t) => {
  const f = fsmIn('Idle', { connectRetryTime: 2, connectRetryMax: 30, idleHoldTime: 1 });
  f.handle({ type: 'ManualStart' });
  const holds: number[] = [];
  for (let i = 0; i < 6; i++) {
    const acts = f.handle({ type: 'TcpConnectionFails' });
    t.equal(f.state, 'Idle');
    holds.push(timerStarted(acts, 'IdleHold')!.seconds);
    const again = f.handle({ type: 'IdleHoldTimer_Expires' });
    t.equal(f.state, 'Connect', 'AutomaticStart after IdleHold');
    t.ok(has(again, 'connect'));
  }
  t.same(holds, [4, 8, 16, 30, 30, 30]);
  t.equal(f.connectRetryCounter, 0, 'refused connections are not session failures (no damping)');
});

t.test('damping: IdleHold grows on repeated session failures and resets after a stable period', async (t) => {
  const f = fsmIn('Idle', { idleHoldTime: 1, idleHoldMax: 16, stablePeriod: 60 });
  f.handle({ type: 'ManualStart' });
  const flap = () => {
    f.handle({ type: 'Tcp_CR_Acked' });
    f.handle({ type: 'BGPOpen', holdTime: 90 });
    f.handle({ type: 'KeepAliveMsg' });
    t.equal(f.state, 'Established');
    const acts = f.handle({ type: 'HoldTimer_Expires' });
    return timerStarted(acts, 'IdleHold')!.seconds;
  };
  const holds: number[] = [];
  for (let i = 0; i < 6; i++) {
    holds.push(flap());
    // AutomaticStart is ignored while IdleHold runs (8.1.1 DampPeerOscillations).
    f.handle({ type: 'AutomaticStart' });
    t.equal(f.state, 'Idle');
    f.handle({ type: 'IdleHoldTimer_Expires' });
    t.equal(f.state, 'Connect');
  }
  t.same(holds, [1, 2, 4, 8, 16, 16]);
  t.equal(f.flaps, 6);
  // Stay up for the stable period: the counter resets and the next failure waits the base time again.
  f.handle({ type: 'Tcp_CR_Acked' });
  f.handle({ type: 'BGPOpen', holdTime: 90 });
  const up = f.handle({ type: 'KeepAliveMsg' });
  t.equal(timerStarted(up, 'Stable')?.seconds, 60);
  f.handle({ type: 'StableTimer_Expires' });
  t.equal(f.connectRetryCounter, 0);
  t.equal(timerStarted(f.handle({ type: 'HoldTimer_Expires' }), 'IdleHold')!.seconds, 1);
});

t.test('an incoming connection during IdleHold is taken unless the peer is damped', async (t) => {
  const f = fsmIn('Established', { dampThreshold: 3 });
  f.handle({ type: 'TcpConnectionFails' });
  t.equal(f.state, 'Idle');
  t.ok(f.isRunning('IdleHold'));
  const acts = f.handle({ type: 'TcpConnectionConfirmed' });
  t.equal(f.state, 'OpenSent', 'peer reconnecting after one failure is accepted');
  t.ok(has(acts, 'sendOpen'));
  t.notOk(f.isRunning('IdleHold'));
  // Three failures in a row: damped.
  const g = fsmIn('Established', { dampThreshold: 3 });
  g.connectRetryCounter = 2;
  g.handle({ type: 'TcpConnectionFails' });
  t.ok(g.damped);
  const refused = g.handle({ type: 'TcpConnectionConfirmed' });
  t.equal(g.state, 'Idle');
  t.ok(has(refused, 'disconnect'));
  // A manually stopped peer refuses too, and does not restart.
  const h = fsmIn('Established');
  h.handle({ type: 'ManualStop' });
  t.notOk(h.isRunning('IdleHold'), 'no automatic restart after ManualStop');
  h.handle({ type: 'TcpConnectionConfirmed' });
  t.equal(h.state, 'Idle');
});

t.test('passive peers never connect', async (t) => {
  const f = new Fsm({ ...base, passive: true });
  const acts = f.handle({ type: 'ManualStart' });
  t.equal(f.state, 'Active');
  t.notOk(has(acts, 'connect'));
  t.notOk(f.isRunning('ConnectRetry'));
  f.handle({ type: 'TcpConnectionConfirmed' });
  t.equal(f.state, 'OpenSent');
  const back = f.handle({ type: 'TcpConnectionFails' });
  t.equal(f.state, 'Active');
  t.notOk(has(back, 'connect'));
  t.notOk(f.isRunning('ConnectRetry'));
  // Its automatic restart after an error is passive too.
  f.handle({ type: 'TcpConnectionConfirmed' });
  f.handle({ type: 'HoldTimer_Expires' });
  const re = f.handle({ type: 'IdleHoldTimer_Expires' });
  t.equal(f.state, 'Active');
  t.notOk(has(re, 'connect'));
});

t.test('DelayOpen (RFC 4271 8.1.1, events 12 and 20)', async (t) => {
  const f = fsmIn('Connect', { delayOpenTime: 5 });
  const acts = f.handle({ type: 'Tcp_CR_Acked' });
  t.equal(f.state, 'Connect');
  t.equal(timerStarted(acts, 'DelayOpen')?.seconds, 5);
  t.notOk(has(acts, 'sendOpen'));
  const exp = f.handle({ type: 'DelayOpenTimer_Expires' });
  t.equal(f.state, 'OpenSent');
  t.ok(has(exp, 'sendOpen'));
  // The peer's OPEN arrives first: ours and a KEEPALIVE go out together, straight to OpenConfirm.
  const g = fsmIn('Active', { delayOpenTime: 5 });
  g.handle({ type: 'TcpConnectionConfirmed' });
  const o = g.handle({ type: 'BGPOpen', holdTime: 30 });
  t.equal(g.state, 'OpenConfirm');
  t.same(o.filter((a) => a.type === 'sendOpen' || a.type === 'sendKeepalive').map((a) => a.type), ['sendOpen', 'sendKeepalive']);
  t.equal(g.holdTime, 30);
  // TCP fails during DelayOpen in Connect: to Active (listening).
  const h = fsmIn('Connect', { delayOpenTime: 5 });
  h.handle({ type: 'Tcp_CR_Acked' });
  h.handle({ type: 'TcpConnectionFails' });
  t.equal(h.state, 'Active');
});

t.test('stale timer expiries are dropped', async (t) => {
  const f = fsmIn('Established');
  t.same(f.handle({ type: 'ConnectRetryTimer_Expires' }), [], 'ConnectRetry is not running in Established');
  t.same(f.handle({ type: 'DelayOpenTimer_Expires' }), []);
  t.equal(f.state, 'Established');
});

const anyEvent: fc.Arbitrary<FsmEvent> = fc.oneof(
  fc.constantFrom<FsmEvent>(
    { type: 'ManualStart' }, { type: 'ManualStop' }, { type: 'AutomaticStart' }, { type: 'AutomaticStop' },
    { type: 'ManualStart_with_PassiveTcpEstablishment' }, { type: 'AutomaticStart_with_PassiveTcpEstablishment' },
    { type: 'ConnectRetryTimer_Expires' }, { type: 'HoldTimer_Expires' }, { type: 'KeepaliveTimer_Expires' },
    { type: 'DelayOpenTimer_Expires' }, { type: 'IdleHoldTimer_Expires' }, { type: 'StableTimer_Expires' },
    { type: 'Tcp_CR_Acked' }, { type: 'TcpConnectionConfirmed' }, { type: 'TcpConnectionFails' },
    { type: 'BGPHeaderErr', notification: HDR }, { type: 'BGPOpenMsgErr', notification: OPENERR }, { type: 'OpenCollisionDump' },
    { type: 'NotifMsgVerErr', notification: { code: 2, subcode: 1 } }, { type: 'NotifMsg' }, { type: 'KeepAliveMsg' },
    { type: 'UpdateMsg' }, { type: 'UpdateMsgErr', notification: UPDERR }, { type: 'RouteRefreshMsg' },
  ),
  fc.integer({ min: 0, max: 300 }).map((h): FsmEvent => ({ type: 'BGPOpen', holdTime: h })),
);

t.test('properties over random event sequences', async (t) => {
  fc.assert(
    fc.property(
      fc.array(anyEvent, { maxLength: 60 }),
      fc.boolean(),
      fc.integer({ min: 0, max: 3 }),
      (events, passive, delay) => {
        const f = new Fsm({ ...base, passive, delayOpenTime: delay });
        const running = new Set<TimerName>();
        for (const ev of events) {
          const prev = f.state;
          // An expiry the FSM accepts ends that timer before any action restarts it.
          if (ev.type.endsWith('_Expires')) running.delete(ev.type.replace('Timer_Expires', '') as TimerName);
          const acts = f.handle(ev);
          for (const a of acts) {
            if (a.type === 'startTimer') running.add(a.timer);
            if (a.type === 'stopTimer') {
              if (!running.has(a.timer)) return false; // stops only what runs
              running.delete(a.timer);
            }
            if (a.type === 'connect' && passive) return false;
          }
          // Timers the adapter runs are exactly those the FSM thinks run.
          for (const tm of ['ConnectRetry', 'Hold', 'Keepalive', 'DelayOpen', 'IdleHold', 'Stable'] as const) {
            if (running.has(tm) !== f.isRunning(tm)) return false;
          }
          const sent = acts.filter((a) => a.type === 'sendNotification');
          if ((ev.type === 'NotifMsg' || ev.type === 'NotifMsgVerErr') && sent.length > 0) return false;
          if (sent.length > 1) return false;
          if (sent.length === 1 && !acts.slice(acts.indexOf(sent[0])).some((a) => a.type === 'disconnect')) return false;
          if (f.state === 'Idle') for (const tm of ['ConnectRetry', 'Hold', 'Keepalive', 'DelayOpen', 'Stable'] as const) if (f.isRunning(tm)) return false;
          if ((f.state === 'Established') !== (f.state === prev ? prev === 'Established' : acts.some((a) => a.type === 'established'))) return false;
        }
        return true;
      },
    ),
    { numRuns: 2000 },
  );
  t.pass('no property violated');
});

t.test('updateInEstablished is handle(UpdateMsg) without the objects: same hold restart, or -1 to fall back', async (t) => {
  for (const state of ['Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] as State[]) {
    for (const holdTime of [90, 0]) {
      const fast = fsmIn(state);
      const slow = fsmIn(state);
      if (state === 'Established' && holdTime === 0) {
        // Re-negotiate hold time 0 on both (a session whose peer asked for no keepalives).
        for (const f of [fast, slow]) {
          f.handle({ type: 'TcpConnectionFails' });
          for (const e of [{ type: 'ManualStart' }, { type: 'Tcp_CR_Acked' }, { type: 'BGPOpen', holdTime: 0 }, { type: 'KeepAliveMsg' }] as FsmEvent[]) f.handle(e);
        }
        if (fast.state !== 'Established') t.fail('could not reach Established with hold time 0');
      } else if (holdTime === 0) continue;
      const r = fast.updateInEstablished();
      const actions = slow.handle({ type: 'UpdateMsg' });
      if (state !== 'Established') {
        t.equal(r, -1, `${state}: not handled by the fast path`);
        t.equal(fast.state, state, `${state}: nothing changed`);
        continue;
      }
      t.ok(has(actions, 'deliverUpdate'), 'the slow path delivers');
      const started = timerStarted(actions, 'Hold');
      t.equal(r, started ? started.seconds : 0, `hold ${holdTime}: same hold time restarted`);
      t.equal(fast.state, slow.state, 'same state');
      t.equal(fast.isRunning('Hold'), slow.isRunning('Hold'), 'same belief about the hold timer');
    }
  }
});
