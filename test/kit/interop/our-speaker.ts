/**
 * Our speaker in an interop namespace: `blockspeaker run -c FILE` started with runNodeInNetns in link.local.ns,
 * inspected through its JSON status endpoint inside that namespace (a short `node -e fetch(...)` run there with
 * execInNetns, since the host cannot reach the namespace's loopback).
 *
 *   const us = await startOurs(link, { asn: 4200000001, peers: [...], announce: [...] });
 *   await us.waitPeer(link.peer.v4, 'Established');
 *   await us.route('10.2.0.0/24')        // { prefix, paths: [{ source, peer, best, stale, attributes }] } | null
 *   await us.reload({ ...cfg, announce: [...] })   // rewrites the file and sends SIGHUP; waits for the log line
 *   await us.kill(); await us.start()    // kill -9 and start again (same run dir: graceful restart R bit)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { execInNetns, runNodeInNetns, type Link } from './netns.ts';
import type { Peer } from './peer-types.ts';
import { waitFor } from './wait-for.ts';

const BIN = new URL('../../../bin/blockspeaker.js', import.meta.url).pathname;
const STATUS_PORT = 9179;

type Falsy = false | null | undefined | 0 | '';

export interface OurPeer {
  address: string;
  asn: number;
  families?: ('ipv4' | 'ipv6')[];
  holdTime?: number;
  passive?: boolean;
  gracefulRestart?: boolean | { restartTime: number };
  import?: { prefix: string; ge?: number; le?: number; action?: 'accept' | 'reject' }[];
  export?: { prefix: string; ge?: number; le?: number; action?: 'accept' | 'reject' }[];
  maxPrefixes?: number | { ipv4?: number; ipv6?: number; warningPercent?: number; restart?: number };
  password?: { file: string } | { env: string };
  ttlSecurity?: number;
  allowAsIn?: number;
  localAsn?: number;
  bfd?: boolean | { minRx?: number; minTx?: number; multiplier?: number };
}

export interface OurConfig {
  asn: number;
  routerId?: string;
  gracefulRestart?: { restartTime: number } | false;
  peers: OurPeer[];
  announce?: string[];
  communities?: { name: string; value: string }[];
  prefixAdvertisements?: { cidr: string; communities: string[] }[];
  /** Other top-level config sections (e.g. ipam with calico manifests), written as given; not part of bgp. */
  sections?: Record<string, unknown>;
}

/** The parts of /peers entries the tests read. */
export interface OurPeerStatus {
  address: string;
  asn: number;
  state: string;
  since: number;
  lastError: string | null;
  capabilities: { families: string[]; routeRefresh: boolean; fourOctetAs: boolean; gracefulRestart: unknown } | null;
  prefixes: { received: number; accepted: number; sent: number; stale: number };
  messages: { received: number; sent: number; updatesReceived: number; updatesSent: number };
  flaps: number;
}

export interface OurPath {
  source: string;
  peer: string | null;
  best: boolean;
  stale: boolean;
  attributes: { ORIGIN: string; AS_PATH: string; NEXT_HOP?: string; [k: string]: unknown };
}

export interface OurRoute {
  prefix: string;
  paths: OurPath[];
}

export class Ours {
  child: ChildProcess | null = null;
  readonly dir: string;
  private cfg: OurConfig;
  private readonly logFile: string;

  constructor(readonly link: Link, cfg: OurConfig) {
    this.cfg = cfg;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-interop-${process.pid}-ours-`));
    this.logFile = path.join(this.dir, 'blockspeaker.log');
  }

  get ns() {
    return this.link.local.ns;
  }

  private writeConfig(): string {
    const file = path.join(this.dir, 'blockspeaker.json');
    // JSON on purpose: the YAML path is covered by test/cli/run.test.ts.
    const { sections, ...bgp } = this.cfg;
    const doc = {
      node: { name: 'ours' },
      ...sections,
      bgp: { routerId: this.link.local.v4, announce: [], ...bgp },
      status: { listen: `127.0.0.1:${STATUS_PORT}` },
      ipc: false,
    };
    fs.writeFileSync(file, JSON.stringify(doc, null, 2));
    return file;
  }

  /** Starts the daemon (again); resolves once the status endpoint answers. */
  async start(): Promise<void> {
    const file = this.writeConfig();
    fs.appendFileSync(this.logFile, `----- start ${new Date().toISOString()}\n`);
    this.child = runNodeInNetns(this.ns, BIN, ['run', '-c', file, '--run-dir', this.dir, '--log-level', 'debug'], { logFile: this.logFile });
    await waitFor(async () => (await this.get('/healthz')).status === 200, { what: 'our status endpoint up', timeoutMs: 60_000 })
      .catch((e: Error) => {
        throw new Error(`${e.message}\n${this.logs(30)}`);
      });
  }

  /** kill -9: no NOTIFICATION, the running-marker stays, so the next start() is a graceful restart. */
  async kill(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }

  /** Stop with a signal (SIGTERM: graceful-restart stop; SIGINT: Cease); resolves with the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return c?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => c.once('exit', (code) => r(code)));
    c.kill(signal);
    return exited;
  }

  /** Rewrites the config and sends SIGHUP; resolves when the daemon logged the outcome. */
  async reload(cfg: OurConfig): Promise<void> {
    this.cfg = cfg;
    this.writeConfig();
    const before = this.countLog(/"msg":"(config reloaded|reload failed|reload partly applied)/);
    this.child!.kill('SIGHUP');
    await waitFor(() => this.countLog(/"msg":"(config reloaded|reload failed|reload partly applied)/) > before, { what: 'reload logged', timeoutMs: 10_000 });
    const last = this.logs(400).split('\n').reverse().find((l) => /"msg":"(config reloaded|reload failed|reload partly applied)/.test(l));
    if (!last?.includes('config reloaded')) throw new Error(`reload did not apply: ${last}`);
  }

  /** kill -9, then start with another config. */
  async restartWith(cfg: OurConfig): Promise<void> {
    await this.kill();
    this.cfg = cfg;
    await this.start();
  }

  config(): OurConfig {
    return structuredClone(this.cfg);
  }

  private countLog(re: RegExp): number {
    return this.logs(100_000).split('\n').filter((l) => re.test(l)).length;
  }

  logs(lines = 60): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** GET on the status endpoint, from inside our namespace. */
  async get(p: string): Promise<{ status: number; body: any }> {
    const script = `fetch(${JSON.stringify(`http://127.0.0.1:${STATUS_PORT}${p}`)}).then(async (r) => ` +
      'process.stdout.write(JSON.stringify({ status: r.status, text: await r.text() })), () => process.stdout.write("null"))';
    const r = await execInNetns(this.ns, process.execPath, ['-e', script], { timeoutMs: 10_000 });
    const res = JSON.parse(r.stdout || 'null') as { status: number; text: string } | null;
    if (!res) return { status: 0, body: null };
    let body: unknown = res.text;
    try {
      body = JSON.parse(res.text);
    } catch {
      /* text */
    }
    return { status: res.status, body };
  }

  async peers(): Promise<OurPeerStatus[]> {
    return (await this.get('/peers')).body as OurPeerStatus[];
  }

  async peer(addr: string): Promise<OurPeerStatus> {
    const r = await this.get(`/peers/${addr}`);
    if (r.status !== 200) throw new Error(`/peers/${addr}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as OurPeerStatus;
  }

  /** The prefix's paths, or null when we have no usable path for it. */
  async route(prefix: string): Promise<OurRoute | null> {
    const r = await this.get(`/routes?prefix=${encodeURIComponent(prefix)}`);
    return r.status === 200 ? (r.body as OurRoute) : null;
  }

  async waitPeer(addr: string, state: string, opts: { timeoutMs?: number; peers?: Peer[] } = {}): Promise<OurPeerStatus> {
    return this.wait(async () => {
      const p = await this.peer(addr);
      return p.state === state && p;
    }, `our session with ${addr} ${state}`, opts);
  }

  /** Waits until the route is present (with a path from `from`, when given) and `match` holds, or absent. */
  async waitRoute(prefix: string, opts: { from?: string; present?: boolean; match?: (p: OurPath) => boolean; timeoutMs?: number; peers?: Peer[] } = {}):
    Promise<OurPath | null> {
    const present = opts.present !== false;
    const found = await this.wait<OurPath | { gone: true }>(async () => {
      const r = await this.route(prefix);
      const path = r?.paths.find((p) => (opts.from === undefined || p.peer === opts.from) && (!opts.match || opts.match(p)));
      if (!present) return !path && { gone: true as const };
      return path ?? false;
    }, `our RIB ${present ? 'has' : 'lacks'} ${prefix}${opts.from ? ` from ${opts.from}` : ''}`, opts);
    return 'gone' in found ? null : (found as OurPath);
  }

  /** waitFor with our log tail in the error. */
  async wait<T>(fn: () => Falsy | T | Promise<Falsy | T>, what: string, opts: { timeoutMs?: number; peers?: Peer[] } = {}): Promise<T> {
    try {
      return (await waitFor(fn, { what, timeoutMs: opts.timeoutMs ?? 20_000, peers: opts.peers })) as T;
    } catch (e) {
      const err = e as Error & { details?: string };
      err.message += `\n----- our speaker (last log lines) -----\n${this.logs(40)}`;
      throw err;
    }
  }

  async dispose(): Promise<void> {
    await this.kill();
    if (!process.env.KEEP_INTEROP) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startOurs(link: Link, cfg: OurConfig, t?: { teardown(fn: () => unknown): unknown }): Promise<Ours> {
  const us = new Ours(link, cfg);
  t?.teardown(() => us.dispose());
  await us.start();
  return us;
}
