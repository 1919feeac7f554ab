// What a Windows service tells the Service Control Manager, as a pure state machine (service-koffi.ts sends it):
// START_PENDING with a wait hint and a rising check point until the daemon has started, RUNNING accepting stop and
// shutdown, STOP_PENDING once asked, STOPPED with the exit code. winsvc.h's values.
export const SERVICE_WIN32_OWN_PROCESS = 0x10;
export const States = { STOPPED: 1, START_PENDING: 2, STOP_PENDING: 3, RUNNING: 4 } as const;
export const Accept = { STOP: 0x1, SHUTDOWN: 0x4 } as const;
/** The Win32 exit code that says "see the service-specific code". */
export const ERROR_SERVICE_SPECIFIC_ERROR = 1066;

export type ServiceControl = 'stop' | 'shutdown' | 'interrogate' | 'other';

/** SERVICE_CONTROL_* -> what the daemon does with it. */
export function controlOf(code: number): ServiceControl {
  switch (code) {
    case 1:
      return 'stop';
    case 5:
      return 'shutdown';
    case 4:
      return 'interrogate';
    default:
      return 'other';
  }
}

export interface StatusView {
  state: number;
  accepts: number;
  exitCode: number;
  checkPoint: number;
  waitHintMs: number;
}

export class ServiceState {
  private state: number = States.START_PENDING;
  private checkPoint = 1;
  private exitCode = 0;

  constructor(private readonly startWaitMs: number) {}

  current(): StatusView {
    const pending = this.state === States.START_PENDING || this.state === States.STOP_PENDING;
    return {
      state: this.state,
      // A pending service takes no controls (the SCM would queue them); RUNNING takes stop and shutdown.
      accepts: this.state === States.RUNNING ? Accept.STOP | Accept.SHUTDOWN : 0,
      exitCode: this.exitCode,
      checkPoint: pending ? this.checkPoint++ : 0,
      waitHintMs: this.state === States.START_PENDING ? this.startWaitMs : this.state === States.STOP_PENDING ? 30_000 : 0,
    };
  }

  started(): void {
    if (this.state === States.START_PENDING) this.state = States.RUNNING;
  }

  /** A stop or shutdown: true the first time (the daemon must stop), false when already stopping or stopped. */
  stopRequested(): boolean {
    if (this.state === States.STOP_PENDING || this.state === States.STOPPED) return false;
    this.state = States.STOP_PENDING;
    this.checkPoint = 1;
    return true;
  }

  stopped(exitCode: number): void {
    this.state = States.STOPPED;
    this.exitCode = exitCode;
  }
}

/** The SERVICE_STATUS struct's fields for a view. */
export function serviceStatus(v: StatusView): Record<string, number> {
  return {
    dwServiceType: SERVICE_WIN32_OWN_PROCESS,
    dwCurrentState: v.state,
    dwControlsAccepted: v.accepts,
    dwWin32ExitCode: v.exitCode === 0 ? 0 : ERROR_SERVICE_SPECIFIC_ERROR,
    dwServiceSpecificExitCode: v.exitCode,
    dwCheckPoint: v.checkPoint,
    dwWaitHint: v.waitHintMs,
  };
}
