// blockspeaker.exe as a Windows service of its own, answering the Service Control Manager through advapi32 with
// koffi: no service wrapper (NSSM, WinSW) to ship or fetch. The dispatcher (StartServiceCtrlDispatcherW) blocks
// for the life of the service, so it runs on one of koffi's worker threads (an async call); ServiceMain and the
// control handler are koffi callbacks that the SCM calls on its own threads, and koffi queues them to the JS thread.
//
// States as the SCM wants them: START_PENDING (with a wait hint) as soon as ServiceMain runs, RUNNING once the daemon
// has started, STOP_PENDING when asked to stop or the machine shuts down, STOPPED with the exit code at the end;
// after STOPPED the dispatcher returns and the process may exit.
import { ServiceState, serviceStatus, type ServiceControl, controlOf } from './service-state.ts';

type Fn = ((...args: unknown[]) => any) & { async: (...args: unknown[]) => void }; // eslint-disable-line @typescript-eslint/no-explicit-any

interface KoffiLike {
  load(path: string): { func(definition: string): Fn };
  proto(definition: string): unknown;
  pointer(type: unknown): unknown;
  register(fn: (...args: never[]) => unknown, type: unknown): unknown;
  unregister(p: unknown): void;
  struct(name: string, def: Record<string, string>): unknown;
}

async function loadKoffi(): Promise<KoffiLike> {
  const mod = (await import('koffi')) as unknown as { default?: KoffiLike } & KoffiLike;
  return typeof mod.load === 'function' ? mod : (mod.default as KoffiLike);
}

export interface ServiceHost {
  /** The daemon has started: RUNNING, accepting stop and shutdown. */
  running(): void;
  /** The daemon has stopped: STOPPED with this exit code; the dispatcher returns. */
  stopped(exitCode: number): Promise<void>;
}

export interface ServiceOptions {
  /** The service's name, as installed (`sc create NAME ...`). */
  name: string;
  /** advapi32.dll, by full path from System32. */
  advapi32: string;
  /** Stop or shutdown asked by the SCM (called once per request; the daemon stops, then calls stopped()). */
  onControl(control: ServiceControl): void;
  /** How long the SCM may wait for the start (ms); default 60 s. */
  startWaitMs?: number;
}

/** koffi type names are process-wide: made once. */
let types: { main: unknown; handler: unknown } | undefined;

/**
 * Connects this process to the SCM as service `name`. Rejects when the process was not started by the SCM (the
 * dispatcher gives up at once) or ServiceMain is not called within `connectMs`.
 */
export async function connectService(o: ServiceOptions, connectMs = 30_000): Promise<ServiceHost> {
  const koffi = await loadKoffi();
  const advapi32 = koffi.load(o.advapi32);
  if (!types) {
    types = {
      main: koffi.proto('void __stdcall BsServiceMain(uint32_t argc, void *argv)'),
      handler: koffi.proto('uint32_t __stdcall BsHandlerEx(uint32_t control, uint32_t eventType, void *eventData, void *context)'),
    };
    koffi.struct('BS_SERVICE_TABLE_ENTRYW', { lpServiceName: 'const char16_t *', lpServiceProc: 'BsServiceMain *' });
    koffi.struct('BS_SERVICE_STATUS', {
      dwServiceType: 'uint32_t', dwCurrentState: 'uint32_t', dwControlsAccepted: 'uint32_t', dwWin32ExitCode: 'uint32_t',
      dwServiceSpecificExitCode: 'uint32_t', dwCheckPoint: 'uint32_t', dwWaitHint: 'uint32_t',
    });
  }
  const StartServiceCtrlDispatcherW = advapi32.func('int __stdcall StartServiceCtrlDispatcherW(BS_SERVICE_TABLE_ENTRYW *table)');
  const RegisterServiceCtrlHandlerExW = advapi32.func('void * __stdcall RegisterServiceCtrlHandlerExW(const char16_t *name, BsHandlerEx *proc, void *context)');
  const SetServiceStatus = advapi32.func('int __stdcall SetServiceStatus(void *handle, BS_SERVICE_STATUS *status)');

  const state = new ServiceState(o.startWaitMs ?? 60_000);
  let handle: unknown = null;
  const report = () => {
    if (handle) SetServiceStatus(handle, serviceStatus(state.current()));
  };
  let connected!: () => void;
  let failed!: (e: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    connected = resolve;
    failed = reject;
  });
  let dispatcherDone!: () => void;
  const dispatcherEnded = new Promise<void>((resolve) => (dispatcherDone = resolve));

  const handler = koffi.register((control: number) => {
    const c = controlOf(control);
    if (c === 'interrogate') {
      report();
      return 0; // NO_ERROR
    }
    if (c === 'stop' || c === 'shutdown') {
      if (state.stopRequested()) {
        report();
        o.onControl(c);
      }
      return 0;
    }
    return 120; // ERROR_CALL_NOT_IMPLEMENTED
  }, koffi.pointer(types.handler));
  const main = koffi.register(() => {
    handle = RegisterServiceCtrlHandlerExW(o.name, handler, null);
    if (!handle) {
      failed(new Error(`RegisterServiceCtrlHandlerExW(${o.name}) failed: the name is not the service the SCM started`));
      return;
    }
    report(); // START_PENDING
    connected();
  }, koffi.pointer(types.main));

  const table = [{ lpServiceName: o.name, lpServiceProc: main }, { lpServiceName: null, lpServiceProc: null }];
  StartServiceCtrlDispatcherW.async(table, (err: unknown, ok: number) => {
    dispatcherDone();
    if (err || !ok) failed(new Error(`not started by the service control manager as ${o.name} (StartServiceCtrlDispatcherW failed): run it as the service, or without --service`));
  });
  const timer = setTimeout(() => failed(new Error(`the service control manager did not start service ${o.name} within ${connectMs} ms`)), connectMs);
  try {
    await ready;
  } finally {
    clearTimeout(timer);
  }
  return {
    running() {
      state.started();
      report();
    },
    async stopped(exitCode: number) {
      state.stopped(exitCode);
      report();
      // The dispatcher returns once every service of the process is STOPPED; wait a little for it, never forever.
      await Promise.race([dispatcherEnded, new Promise((r) => setTimeout(r, 5_000).unref())]);
      koffi.unregister(main);
      koffi.unregister(handler);
    },
  };
}
