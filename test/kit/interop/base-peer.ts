// What every peer kind (BIRD, GoBGP, FRR) has in common: its daemons as tracked processes in a namespace, stop,
// kill and restart, log tails, and waiting for a session or a route. The kinds add config, queries and parsing.
import { type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runInNetns, type Netns } from './netns.ts';
import { canonAddr, canonPrefix, normAnnouncement, tailLines } from './normalise.ts';
import type { Announcement, Family, NeighborStatus, Peer, PeerKind, PeerOptions, Route, SessionState } from './peer-types.ts';
import { waitFor } from './wait-for.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export abstract class BasePeer implements Peer {
  abstract readonly kind: PeerKind;
  protected procs = new Map<string, ChildProcess>();
  protected announced = new Map<string, Announcement>();

  constructor(readonly name: string, readonly ns: Netns, readonly dir: string, readonly options: PeerOptions) {
    for (const a of options.announce ?? []) {
      const ann = normAnnouncement(a);
      this.announced.set(ann.prefix, ann);
    }
  }

  get running(): boolean {
    return [...this.procs.values()].some(alive);
  }

  /** Starts the daemon(s) and waits until they answer queries. */
  abstract start(recovery?: boolean): Promise<void>;
  abstract neighbor(addr: string): Promise<NeighborStatus>;
  abstract routes(family: Family): Promise<Route[]>;
  abstract routeCount(family: Family): Promise<number>;
  abstract announce(a: string | Announcement): Promise<void>;
  abstract withdraw(prefix: string): Promise<void>;
  protected abstract status(): Promise<string>;
  protected abstract logFiles(): string[];

  async state(addr: string): Promise<SessionState> {
    if (!this.running) return 'Down';
    return (await this.neighbor(addr)).state;
  }

  protected spawnDaemon(key: string, cmd: string, args: string[], logFile: string): ChildProcess {
    fs.appendFileSync(logFile, `\n=== ${new Date().toISOString()} ${cmd} ${args.join(' ')}\n`);
    const child = runInNetns(this.ns, cmd, args, { logFile });
    child.on('error', (e) => fs.appendFileSync(logFile, `spawn error: ${e.message}\n`));
    const pid = child.pid;
    child.once('exit', (code, sig) => {
      try { fs.appendFileSync(logFile, `=== ${new Date().toISOString()} ${path.basename(cmd)} exited (${code ?? sig})\n`); } catch { /* dir gone */ }
      this.afterExit(key, pid);
    });
    this.procs.set(key, child);
    return child;
  }

  protected async stopProc(key: string, signal: NodeJS.Signals, timeoutMs = 5000): Promise<void> {
    const child = this.procs.get(key);
    if (!child || !alive(child)) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(signal);
    const timer = sleep(timeoutMs).then(() => 'timeout' as const);
    if ((await Promise.race([exited, timer])) === 'timeout') {
      child.kill('SIGKILL');
      await exited;
    }
  }

  /** Hook to remove per-pid debris a daemon leaves behind. */
  protected afterExit(_key: string, _pid: number | undefined): void {}

  async stop(): Promise<void> {
    for (const key of [...this.procs.keys()].reverse()) await this.stopProc(key, 'SIGTERM');
  }

  async kill(): Promise<void> {
    for (const key of [...this.procs.keys()].reverse()) await this.stopProc(key, 'SIGKILL');
  }

  async restart(opts: { gracefulRestart?: boolean } = {}): Promise<void> {
    if (this.running) await this.stop();
    await this.start(opts.gracefulRestart ?? false);
  }

  /** Teardown: SIGKILL, no waiting for graceful shutdown. */
  async dispose(): Promise<void> {
    await this.kill();
  }

  logs(lines = 80): string {
    return this.logFiles().map((f) => {
      let text: string;
      try { text = fs.readFileSync(f, 'utf8'); } catch { text = '(no log yet)'; }
      return `--- ${path.basename(f)} ---\n${tailLines(text.trimEnd(), lines)}`;
    }).join('\n');
  }

  async describe(): Promise<string> {
    let st: string;
    try { st = this.running ? await this.status() : '(daemon not running)'; } catch (e) { st = `(status failed: ${(e as Error).message})`; }
    return `${st}\n${this.logs(40)}`;
  }

  async waitEstablished(addr: string, timeoutMs = 20_000): Promise<void> {
    await waitFor(async () => (await this.state(addr)) === 'Established',
      { what: `${this.kind} ${this.name}: session with ${addr} Established`, timeoutMs, peers: [this] });
  }

  async waitRoute(family: Family, prefix: string,
    opts: { from?: string | null; present?: boolean; timeoutMs?: number } = {}): Promise<Route | undefined> {
    const want = canonPrefix(prefix);
    const present = opts.present ?? true;
    const from = opts.from === undefined ? undefined : opts.from === null ? null : canonAddr(opts.from);
    const match = (r: Route) => r.prefix === want && (from === undefined || r.from === from);
    let found: Route | undefined;
    await waitFor(async () => {
      const rs = await this.routes(family);
      found = rs.find(match);
      return present ? !!found : !found;
    }, {
      what: `${this.kind} ${this.name}: route ${want}${from !== undefined ? ` from ${from}` : ''} ${present ? 'present' : 'gone'}`,
      timeoutMs: opts.timeoutMs ?? 20_000, peers: [this],
    });
    return found;
  }

  protected async waitReady(what: string, probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    const start = Date.now();
    for (;;) {
      const dead = [...this.procs.entries()].find(([, c]) => !alive(c));
      if (dead) {
        throw new Error(`${what}: ${dead[0]} exited (${dead[1].exitCode ?? dead[1].signalCode}) during startup`);
      }
      try { if (await probe()) return; } catch { /* not yet */ }
      if (Date.now() - start > timeoutMs) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
      await sleep(50);
    }
  }
}

export function alive(c: ChildProcess): boolean {
  return c.exitCode === null && c.signalCode === null && c.pid !== undefined;
}
