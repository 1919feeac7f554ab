// Real etcd servers for the tests: a single member or a static cluster of several, on 127.0.0.1 with free high
// ports and fresh temp data dirs. Members can be stopped (SIGTERM), killed (SIGKILL) and restarted on the same
// data dir and ports. Everything is torn down on t.teardown (and killed if the test process exits first).
//
// Gate: without the etcd binary (Debian etcd-server) the tests skip with the reason, unless REQUIRE_PEERS=1 (CI),
// where that is a failure.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, mkdirSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const ETCD_BIN = process.env.ETCD_BIN ?? 'etcd';

export interface EtcdMember {
  name: string;
  clientPort: number;
  peerPort: number;
  /** host:port for clients. */
  endpoint: string;
  dataDir: string;
  logFile: string;
  proc?: ChildProcess;
}

/** Serve clients over TLS with these PEM files; clientCertAuth makes etcd require a client certificate signed by ca. */
export interface EtcdServerTls {
  ca: string;
  cert: string;
  key: string;
  clientCertAuth?: boolean;
  /** A client certificate and key for the harness's own health checks (needed with clientCertAuth). */
  clientCert?: string;
  clientKey?: string;
}

interface Teardown {
  teardown(fn: () => unknown): unknown;
}

interface GateTest {
  fail(message: string): unknown;
  comment(...args: unknown[]): unknown;
}

const live = new Set<ChildProcess>();
let exitHook = false;

export const requirePeers = (): boolean => process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true';

/** Why etcd cannot run here, or undefined when it can. */
export function etcdMissing(): string | undefined {
  const r = spawnSync(ETCD_BIN, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return `etcd not found (${ETCD_BIN}): apt-get install etcd-server etcd-client`;
  return undefined;
}

/**
 * true when etcd can run. Otherwise false, and with REQUIRE_PEERS=1 a failure on t, else a comment saying why
 * the test is skipped.
 */
export function etcdGate(t: GateTest): boolean {
  const why = etcdMissing();
  if (!why) return true;
  if (requirePeers()) t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else t.comment(`skipping: ${why} (set REQUIRE_PEERS=1 to make this a failure)`);
  return false;
}

/** A port nobody listens on right now (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class EtcdCluster {
  readonly members: EtcdMember[];
  private readonly root: string;
  private readonly token: string;
  private readonly logs = new Map<string, WriteStream>();
  private stopped = false;

  private constructor(root: string, members: EtcdMember[]) {
    this.root = root;
    this.members = members;
    this.token = `bs-${process.pid}-${Math.floor(Math.random() * 1e9)}`;
  }

  /** Start `size` members and wait until every one of them is healthy (a leader is elected). */
  static async start(t: Teardown, opts: { size?: number; extraArgs?: string[]; tls?: EtcdServerTls } = {}): Promise<EtcdCluster> {
    const why = etcdMissing();
    if (why) throw new Error(why);
    const size = opts.size ?? 1;
    for (let attempt = 0; ; attempt++) {
      const root = mkdtempSync(join(tmpdir(), 'bs-etcd-'));
      const members: EtcdMember[] = [];
      for (let i = 0; i < size; i++) {
        const clientPort = await freePort();
        const peerPort = await freePort();
        const dataDir = join(root, `m${i}`);
        mkdirSync(dataDir);
        members.push({ name: `m${i}`, clientPort, peerPort, endpoint: `127.0.0.1:${clientPort}`, dataDir, logFile: join(root, `m${i}.log`) });
      }
      const c = new EtcdCluster(root, members);
      c.extraArgs = opts.extraArgs ?? [];
      c.tls = opts.tls;
      t.teardown(() => c.destroy());
      try {
        for (let i = 0; i < size; i++) c.spawnMember(i, 'new');
        await c.waitHealthy(undefined, 30000);
        return c;
      } catch (e) {
        // Most likely a port taken between picking and binding: try again with new ones.
        await c.destroy();
        if (attempt >= 2) throw e;
      }
    }
  }

  private extraArgs: string[] = [];
  tls: EtcdServerTls | undefined;

  get endpoints(): string[] {
    return this.members.map((m) => m.endpoint);
  }

  /** etcd://host:port,... (etcds:// when serving TLS) for openStore. */
  get url(): string {
    return `${this.tls ? 'etcds' : 'etcd'}://${this.endpoints.join(',')}`;
  }

  private get clientScheme(): string {
    return this.tls ? 'https' : 'http';
  }

  private tlsArgs(): string[] {
    const s = this.tls;
    if (!s) return [];
    return ['--cert-file', s.cert, '--key-file', s.key, '--trusted-ca-file', s.ca, ...(s.clientCertAuth ? ['--client-cert-auth'] : [])];
  }

  private spawnMember(i: number, state: 'new' | 'existing'): void {
    const m = this.members[i];
    const cluster = this.members.map((x) => `${x.name}=http://127.0.0.1:${x.peerPort}`).join(',');
    const args = [
      '--name', m.name,
      '--data-dir', m.dataDir,
      '--listen-client-urls', `${this.clientScheme}://127.0.0.1:${m.clientPort}`,
      '--advertise-client-urls', `${this.clientScheme}://127.0.0.1:${m.clientPort}`,
      '--listen-peer-urls', `http://127.0.0.1:${m.peerPort}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${m.peerPort}`,
      '--initial-cluster', cluster,
      '--initial-cluster-state', state,
      '--initial-cluster-token', this.token,
      '--logger', 'zap',
      '--log-outputs', 'stderr',
      '--log-level', 'warn',
      ...this.tlsArgs(),
      ...this.extraArgs,
    ];
    let log = this.logs.get(m.name);
    if (!log) this.logs.set(m.name, (log = createWriteStream(m.logFile, { flags: 'a' })));
    // A clean environment: ETCD_* variables from the caller would override the flags.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
    const p = spawn(ETCD_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    p.stdout!.pipe(log, { end: false });
    p.stderr!.pipe(log, { end: false });
    m.proc = p;
    live.add(p);
    p.on('exit', () => live.delete(p));
    if (!exitHook) {
      exitHook = true;
      process.on('exit', () => {
        for (const q of live) q.kill('SIGKILL');
      });
    }
  }

  /** The last lines of a member's log (for failure messages). */
  logTail(i: number, lines = 20): string {
    try {
      return readFileSync(this.members[i].logFile, 'utf8').trim().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  private async healthy(i: number): Promise<boolean> {
    if (this.tls) return this.healthyTls(i);
    try {
      const res = await fetch(`http://${this.members[i].endpoint}/health`, { signal: AbortSignal.timeout(1000) });
      const body = (await res.json()) as { health?: string };
      return res.ok && body.health === 'true';
    } catch {
      return false;
    }
  }

  /** /health over TLS, with the harness's client certificate (fetch cannot take a private CA). */
  private healthyTls(i: number): Promise<boolean> {
    const s = this.tls!;
    return new Promise((resolve) => {
      const req = https.get(
        {
          host: '127.0.0.1', port: this.members[i].clientPort, path: '/health', timeout: 1000,
          ca: readFileSync(s.ca), cert: s.clientCert ? readFileSync(s.clientCert) : undefined, key: s.clientKey ? readFileSync(s.clientKey) : undefined,
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => {
            try {
              resolve(res.statusCode === 200 && (JSON.parse(body) as { health?: string }).health === 'true');
            } catch {
              resolve(false);
            }
          });
        },
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(false));
    });
  }

  /** Wait until the given members (default: all that are running) report healthy. */
  async waitHealthy(which?: number[], timeoutMs = 20000): Promise<void> {
    const ids = which ?? this.members.map((_, i) => i).filter((i) => this.members[i].proc && this.members[i].proc!.exitCode === null);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const dead = ids.filter((i) => this.members[i].proc?.exitCode !== null && this.members[i].proc?.exitCode !== undefined);
      if (dead.length) throw new Error(`etcd member ${this.members[dead[0]].name} exited: ${this.logTail(dead[0])}`);
      const ok = await Promise.all(ids.map((i) => this.healthy(i)));
      if (ok.every(Boolean)) return;
      if (Date.now() > deadline) {
        const bad = ids.filter((_, k) => !ok[k]);
        throw new Error(`etcd member(s) ${bad.map((i) => this.members[i].name).join(', ')} not healthy after ${timeoutMs} ms: ${this.logTail(bad[0])}`);
      }
      await sleep(100);
    }
  }

  /** Index of the member that is leader now, as the running members see it (undefined if none is known). */
  async leader(): Promise<number | undefined> {
    const ids: Array<string | undefined> = await Promise.all(
      this.members.map(async (m) => {
        if (!m.proc || m.proc.exitCode !== null || m.proc.signalCode !== null) return undefined;
        try {
          const res = await fetch(`http://${m.endpoint}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(1000) });
          const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
          return body.header?.member_id === body.leader ? 'leader' : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    const i = ids.indexOf('leader');
    return i < 0 ? undefined : i;
  }

  private async signal(i: number, sig: NodeJS.Signals): Promise<void> {
    const p = this.members[i].proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill(sig);
    const timer = setTimeout(() => p.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
  }

  /** Graceful stop (SIGTERM) and wait for the exit. */
  stop(i: number): Promise<void> {
    return this.signal(i, 'SIGTERM');
  }

  /** kill -9 and wait for the exit. */
  kill(i: number): Promise<void> {
    return this.signal(i, 'SIGKILL');
  }

  /** Start a stopped member again on its data dir and ports, and wait until it is healthy. */
  async restart(i: number, timeoutMs = 30000): Promise<void> {
    await this.stop(i);
    this.spawnMember(i, 'existing');
    await this.waitHealthy([i], timeoutMs);
  }

  async destroy(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.members.map((_, i) => this.kill(i)));
    for (const l of this.logs.values()) l.end();
    rmSync(this.root, { recursive: true, force: true });
  }
}
