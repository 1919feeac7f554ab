// A long-lived script worker: one process per daemon (powershell.exe running worker.ps1 on Windows) that takes
// scripts and answers with their output, as JSON lines in UTF-8 over stdin/stdout:
//   request  {"id": 1, "script": "..."}            reply  {"id": 1, "code": 0, "stdout": "...", "stderr": "..."}
// So HNS.V2.psm1 is imported (and its Add-Type compiled) once per worker, not once per pass. Every call has a
// timeout: a hung call kills the worker, the call fails (the reconcile loop retries the pass with backoff) and the
// next call starts a fresh worker. Counted for status and metrics.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PowerShellResult, PowerShellRunner } from './powershell.ts';

export interface WorkerOptions {
  /** The worker's command and arguments. */
  command: string;
  args: string[];
  /** Per call; default 60 s. */
  timeoutMs?: number;
}

export interface WorkerStats {
  calls: number;
  timeouts: number;
  /** Workers started (the first one included). */
  starts: number;
  /** Workers that exited or were killed while running. */
  deaths: number;
  pid: number | null;
}

export class WorkerTimeoutError extends Error {
  override name = 'WorkerTimeoutError';
}

interface Pending {
  resolve: (r: PowerShellResult) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class ScriptWorker implements PowerShellRunner {
  private child: ChildProcess | null = null;
  private buf = '';
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly st: WorkerStats = { calls: 0, timeouts: 0, starts: 0, deaths: 0, pid: null };
  /** Calls run one at a time: HNS changes are ordered, and a timeout then names the call that hung. */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: WorkerOptions) {}

  stats(): WorkerStats {
    return { ...this.st, pid: this.child?.pid ?? null };
  }

  /** Run one script; `timeoutMs` overrides the worker's default for this call. */
  run(script: string, timeoutMs?: number): Promise<PowerShellResult> {
    const p = this.chain.then(() => this.call(script, timeoutMs ?? this.o.timeoutMs ?? 60_000));
    this.chain = p.catch(() => undefined);
    return p;
  }

  close(): void {
    const c = this.child;
    this.child = null;
    c?.kill();
    this.failAll(new Error('worker closed'));
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(this.o.command, this.o.args, { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
    this.st.starts++;
    this.buf = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => this.onData(child, d));
    child.stderr!.resume(); // the worker reports per call; stray stderr must not block it
    child.stdin!.on('error', () => undefined);
    const gone = () => {
      if (this.child !== child) return;
      this.child = null;
      this.st.deaths++;
      this.failAll(new Error('the script worker exited'));
    };
    child.on('exit', gone);
    child.on('error', gone);
    this.child = child;
    return child;
  }

  private call(script: string, timeoutMs: number): Promise<PowerShellResult> {
    const child = this.ensure();
    const id = this.nextId++;
    this.st.calls++;
    return new Promise<PowerShellResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.st.timeouts++;
        this.pending.delete(id);
        // Kill it: its HNS call may still complete, which the next pass's read sees.
        if (this.child === child) {
          this.child = null;
          this.st.deaths++;
        }
        child.kill('SIGKILL');
        reject(new WorkerTimeoutError(`script worker: no answer within ${timeoutMs} ms; worker killed, the next call starts a new one`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      child.stdin!.write(JSON.stringify({ id, script }) + '\n', 'utf8');
    });
  }

  private onData(child: ChildProcess, d: string): void {
    if (child !== this.child) return;
    this.buf += d;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl).trim();
      this.buf = this.buf.slice(nl + 1);
      if (!line) continue;
      let msg: { id?: number; code?: number | null; stdout?: string; stderr?: string };
      try {
        msg = JSON.parse(line);
      } catch {
        continue; // not a reply (a module's chatter): ignored
      }
      const p = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
      if (!p) continue;
      this.pending.delete(msg.id!);
      clearTimeout(p.timer);
      p.resolve({ code: msg.code ?? null, stdout: msg.stdout ?? '', stderr: msg.stderr ?? '' });
    }
  }

  private failAll(e: Error): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(e);
      this.pending.delete(id);
    }
  }
}

/** worker.ps1, found beside the executable (packaged) or beside this module (from source). */
export function findWorkerScript(execPath: string = process.execPath, here: string | null = sourceDir()): string | null {
  // Packaged: beside the executable (or its windows/ folder); from source: src/hns; from dist/src/hns or from
  // `npm run build`'s dist/bundle: back to src/hns.
  const dirs = [dirname(execPath), join(dirname(execPath), 'windows')];
  if (here) dirs.push(here, join(here, '..', '..', '..', 'src', 'hns'), join(here, '..', '..', 'src', 'hns'));
  for (const dir of dirs) {
    const f = join(dir, 'worker.ps1');
    if (existsSync(f)) return f;
  }
  return null;
}

/** This module's folder; null inside the Windows single executable (a CommonJS bundle has no import.meta.url). */
function sourceDir(): string | null {
  try {
    return dirname(new URL(import.meta.url).pathname);
  } catch {
    return null;
  }
}

/** The PowerShell worker on a Windows host. */
export function powershellWorker(script: string, timeoutMs?: number): ScriptWorker {
  return new ScriptWorker({ command: 'powershell.exe', args: ['-NoProfile', '-NonInteractive', '-ExecutionPolicy', 'Bypass', '-File', script], timeoutMs });
}
