// A stand-in for the node daemon in tests: a real Ipam on a temporary file store, served on a temporary socket.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam } from '../../src/ipam/ipam.ts';
import type { Host, IpamConfig, PoolSpec } from '../../src/ipam/types.ts';
import { ipamHandlers } from '../../src/ipc/ipam.ts';
import { startIpcServer, type IpcHandler, type IpcServer } from '../../src/ipc/server.ts';
import { openFileStore, type FileStore } from '../../src/store/file.ts';

export interface TestDaemon {
  dir: string;
  path: string;
  host: string;
  ipam: Ipam;
  store: FileStore;
  server: IpcServer;
  /** Errors the server reported (failed requests). */
  errors: { method?: string; err: unknown }[];
  close(): Promise<void>;
}

export interface TestDaemonOptions {
  host?: string;
  pools?: PoolSpec[];
  hosts?: Host[];
  config?: Partial<IpamConfig>;
  handlers?: Record<string, IpcHandler>;
  /** Socket path; default <dir>/bs.sock. */
  path?: string;
  /** Reuse a store directory (default: a fresh temp dir, removed on close). */
  dir?: string;
}

export async function startTestDaemon(opts: TestDaemonOptions = {}): Promise<TestDaemon> {
  const own = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'bs-ipc-'));
  const host = opts.host ?? 'node-a';
  const store = await openFileStore(join(dir, 'store'));
  const ipam = new Ipam(store);
  if (opts.config) await ipam.setConfig(opts.config);
  for (const p of opts.pools ?? [{ name: 'pods', cidr: '10.99.0.0/24', blockSize: 26 }]) await ipam.addPool(p);
  for (const h of opts.hosts ?? [{ name: host, os: 'linux' as const, labels: {} }]) await ipam.setHost(h);
  const errors: TestDaemon['errors'] = [];
  const path = opts.path ?? join(dir, 'bs.sock');
  const server = await startIpcServer({
    path,
    handlers: { ...ipamHandlers(ipam, host), ...opts.handlers },
    onError: (err, method) => errors.push({ method, err }),
  });
  return {
    dir,
    path,
    host,
    ipam,
    store,
    server,
    errors,
    async close() {
      await server.close();
      await store.close();
      if (own) rmSync(dir, { recursive: true, force: true });
    },
  };
}
