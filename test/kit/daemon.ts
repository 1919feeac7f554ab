// `blockspeaker run` as a child process on loopback for tests that need a running daemon: temp dir, embedded store,
// control socket, status endpoint on a free port. Resolves once /healthz answers.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { parseConfig } from '../../src/config/config.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import type { HnsReconciler } from '../../src/hns/reconcile.ts';
import { freePort, waitFor } from './wait.ts';

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;

export interface TestDaemon {
  dir: string;
  socket: string;
  port: number;
  child: ChildProcess;
  stderr(): string;
  get(path: string): Promise<{ status: number; headers: Headers; text: string; body: any }>;
  stop(): Promise<void>;
}

export interface TestDaemonOptions {
  name: string;
  asn: number;
  routerId: string;
  /** The one pool (name "pods", /28 blocks). */
  poolCidr: string;
  /** A Calico manifest the config imports (ipam.calico). */
  calicoManifest?: string;
}

/**
 * A daemon with one configured peer that never answers (127.0.0.9, AS 65001), the pool, dataplane none; it runs
 * from the sources (BLOCKSPEAKER_FROM_SOURCE=1).
 */
/** GET a path of a status listener on 127.0.0.1: the status, headers, text, and the body as JSON (null if not). */
export async function getStatus(port: number, path: string): Promise<{ status: number; headers: Headers; text: string; body: unknown }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  const text = await r.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    /* html, js, css, metrics */
  }
  return { status: r.status, headers: r.headers, text, body };
}

export async function startTestDaemon(prefix: string, o: TestDaemonOptions, t: { teardown(fn: () => unknown): unknown }): Promise<TestDaemon> {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-${process.pid}-`));
  const port = await freePort('127.0.0.1');
  const socket = join(dir, 'bs.sock');
  const file = join(dir, 'node.yaml');
  if (o.calicoManifest !== undefined) writeFileSync(join(dir, 'calico.yaml'), o.calicoManifest);
  writeFileSync(file, `node: { name: ${o.name}, os: linux }
bgp:
  asn: ${o.asn}
  routerId: ${o.routerId}
  listen: false
  peers: [{ address: 127.0.0.9, asn: 65001 }]
ipam:
  store: ${join(dir, 'store')}${o.calicoManifest !== undefined ? '\n  calico: [calico.yaml]' : ''}
  pools: [{ name: pods, cidr: ${o.poolCidr}, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: ${socket} }
`);
  const child = spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', dir], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' },
  });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => (text += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const d: TestDaemon = {
    dir, socket, port, child,
    stderr: () => text,
    get: (path) => getStatus(port, path),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        await exited;
      }
    },
  };
  t.teardown(async () => {
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  await waitFor('the daemon\'s status endpoint', async () => {
    if (child.exitCode !== null) throw new Error(`daemon exited ${child.exitCode}: ${text}`);
    return (await d.get('/healthz')).status === 200;
  }, 30_000, 100).catch((e: Error) => {
    throw new Error(`${e.message}\n${text.split('\n').slice(-20).join('\n')}`);
  });
  return d;
}

/**
 * `blockspeaker run -c FILE` from the sources, stopped (SIGTERM) on teardown; `stderr()` is what it logged so far.
 * For tests that write their own config (Calico's layout on etcd, ...).
 */
export function spawnRun(file: string, runDir: string, t: { teardown(fn: () => unknown): unknown }): { child: ChildProcess; stderr(): string } {
  const child = spawn(process.execPath, [bin, 'run', '-c', file, '--run-dir', runDir], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' },
  });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => (text += d));
  const exited = new Promise((r) => child.once('exit', r));
  t.teardown(async () => {
    child.kill('SIGTERM');
    await exited;
  });
  return { child, stderr: () => text };
}

/**
 * A daemon in this process with the HNS dataplane on an in-memory fake the test holds (to play win-bridge, which
 * creates each pod's endpoint after the IPAM plugin answers), from config `text` written to `file`.
 */
export async function startHnsDaemon(file: string, text: string, t: { teardown(fn: () => unknown): unknown }) {
  writeFileSync(file, text);
  const fake = new FakeHns();
  const d = new Daemon({ file, config: parseConfig(text, file), log: pino({ level: 'silent' }), version: 'test', fakeHns: fake });
  await d.start();
  t.teardown(() => d.stop({ restart: false } as never));
  const reconciler = (d as unknown as { hns: { reconciler: HnsReconciler } }).hns.reconciler;
  const port = d.status.address()!.port;
  const get = async (path: string) => (await fetch(`http://127.0.0.1:${port}${path}`)).text();
  return { d, fake, reconciler, get };
}
