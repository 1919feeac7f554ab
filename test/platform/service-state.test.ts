// The Windows service status machine: what the SCM is told at each step (the native calls are proven under wine,
// test/windows/service.test.ts).
import t from 'tap';
import fc from 'fast-check';
import { Accept, ERROR_SERVICE_SPECIFIC_ERROR, ServiceState, States, controlOf, serviceStatus } from '../../src/platform/service-state.ts';

t.test('start pending -> running -> stop pending -> stopped', async (t) => {
  const s = new ServiceState(60_000);
  const a = s.current();
  const b = s.current();
  t.match(a, { state: States.START_PENDING, accepts: 0, waitHintMs: 60_000 });
  t.ok(b.checkPoint > a.checkPoint, 'the check point rises while pending, so the SCM sees progress');
  s.started();
  t.match(s.current(), { state: States.RUNNING, accepts: Accept.STOP | Accept.SHUTDOWN, checkPoint: 0, waitHintMs: 0 });
  t.equal(s.stopRequested(), true, 'the first stop asks the daemon to stop');
  t.equal(s.stopRequested(), false, 'a second one does not');
  t.match(s.current(), { state: States.STOP_PENDING, accepts: 0 });
  s.stopped(0);
  t.same(serviceStatus(s.current()), {
    dwServiceType: 0x10, dwCurrentState: States.STOPPED, dwControlsAccepted: 0, dwWin32ExitCode: 0, dwServiceSpecificExitCode: 0, dwCheckPoint: 0, dwWaitHint: 0,
  });
  t.equal(s.stopRequested(), false, 'nothing to stop once stopped');
});

t.test('a failed daemon stops with a service-specific exit code', async (t) => {
  const s = new ServiceState(1000);
  s.stopped(1);
  t.match(serviceStatus(s.current()), { dwCurrentState: States.STOPPED, dwWin32ExitCode: ERROR_SERVICE_SPECIFIC_ERROR, dwServiceSpecificExitCode: 1 });
});

t.test('started() after a stop request does not bring it back to RUNNING', async (t) => {
  const s = new ServiceState(1000);
  s.stopRequested();
  s.started();
  t.equal(s.current().state, States.STOP_PENDING);
});

t.test('controls: stop, shutdown and interrogate are known, the rest is not', async (t) => {
  t.equal(controlOf(1), 'stop');
  t.equal(controlOf(5), 'shutdown');
  t.equal(controlOf(4), 'interrogate');
  fc.assert(fc.property(fc.integer({ min: 0, max: 0xffff }).filter((c) => ![1, 4, 5].includes(c)), (c) => controlOf(c) === 'other'));
});

t.test('property: only RUNNING accepts controls, only pending states carry a check point', async (t) => {
  fc.assert(fc.property(fc.array(fc.constantFrom('current', 'started', 'stop', 'stopped'), { maxLength: 20 }), (steps) => {
    const s = new ServiceState(5000);
    for (const st of steps) {
      if (st === 'started') s.started();
      else if (st === 'stop') s.stopRequested();
      else if (st === 'stopped') s.stopped(0);
      const v = s.current();
      if ((v.accepts !== 0) !== (v.state === States.RUNNING)) return false;
      const pending = v.state === States.START_PENDING || v.state === States.STOP_PENDING;
      if ((v.checkPoint > 0) !== pending) return false;
    }
    return true;
  }));
  t.pass('holds');
});
