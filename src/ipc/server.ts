// The daemon's control socket: net-ipc request/response over a Unix socket (a named pipe on Windows), mode 0600.
//
// Start-up rules: a path that answers is a live daemon, so we refuse to start; a socket file nobody listens on is
// stale and is removed; anything else at the path (a regular file, a directory) is refused, never deleted.
import fs from 'node:fs';
import net from 'node:net';
import netIpc from 'net-ipc';
import { netIpcPath, socketEndpoint, type Request, type Response, type StatusReply } from './protocol.ts';

/** A method handler: gets the request's params, returns the result (or throws an error with a `code`). */
export type IpcHandler = (params: any, ctx: { connectionId: string }) => unknown;

export interface IpcServerOptions {
  path: string;
  handlers?: Record<string, IpcHandler>;
  /** Called for every failed request and socket error (the daemon logs them). */
  onError?: (err: unknown, method?: string) => void;
}

export interface IpcServer {
  readonly path: string;
  /** The socket file or pipe name actually listened on. */
  readonly endpoint: string;
  /** Add or replace a method. */
  register(name: string, handler: IpcHandler): void;
  unregister(name: string): void;
  methods(): string[];
  close(): Promise<void>;
}

/** Thrown when the path is taken: a live daemon, or something that is not a socket. */
export class IpcStartError extends Error {
  override name = 'IpcStartError';
}

/** Whether something accepts connections at the endpoint within `timeoutMs`. */
function answers(endpoint: string, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ path: endpoint });
    const done = (v: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(true), timeoutMs); // it accepted nothing yet but exists: treat as live
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

async function clearPath(path: string, endpoint: string): Promise<void> {
  if (process.platform === 'win32') {
    if (await answers(endpoint)) throw new IpcStartError(`another blockspeaker daemon is already listening on ${path}`);
    return;
  }
  let st: fs.Stats;
  try {
    st = fs.lstatSync(endpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new IpcStartError(`${path} exists and is not a socket; refusing to replace it`);
  if (await answers(endpoint)) throw new IpcStartError(`another blockspeaker daemon is already listening on ${path}`);
  // Stale: left by a daemon that died. Remove it so listen() can bind.
  try {
    fs.unlinkSync(endpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

function errorReply(err: unknown): Response {
  const e = err as { code?: unknown; message?: unknown; name?: string };
  const code = typeof e?.code === 'string' ? e.code : e?.name && e.name !== 'Error' ? e.name : 'INTERNAL';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return { ok: false, error: { code, message } };
}

export async function startIpcServer(opts: IpcServerOptions): Promise<IpcServer> {
  const path = opts.path;
  const endpoint = socketEndpoint(path);
  await clearPath(path, endpoint);
  if (process.platform !== 'win32') fs.mkdirSync(endpoint.slice(0, endpoint.lastIndexOf('/')) || '/', { recursive: true });

  const handlers = new Map<string, IpcHandler>(Object.entries(opts.handlers ?? {}));
  const started = Date.now();
  if (!handlers.has('status')) {
    handlers.set('status', (): StatusReply => ({ pid: process.pid, uptimeSeconds: Math.round((Date.now() - started) / 1000), methods: [...handlers.keys()].sort() }));
  }
  handlers.set('methods', () => [...handlers.keys()].sort());

  const server = new netIpc.Server({ path: netIpcPath(path) });
  server.on('error', (err: unknown) => opts.onError?.(err));
  server.on('request', (req: Request, respond: (r: Response) => Promise<void>, conn: { id: string }) => {
    const method = req && typeof req === 'object' && typeof req.m === 'string' ? req.m : undefined;
    const reply = async (): Promise<Response> => {
      if (!method) return { ok: false, error: { code: 'BAD_REQUEST', message: 'request must be {m: method, p: params}' } };
      const h = handlers.get(method);
      if (!h) return { ok: false, error: { code: 'UNKNOWN_METHOD', message: `unknown method "${method}" (known: ${[...handlers.keys()].sort().join(', ')})` } };
      try {
        const r = await h(req.p ?? {}, { connectionId: conn.id });
        return { ok: true, r: r === undefined ? null : r };
      } catch (err) {
        opts.onError?.(err, method);
        return errorReply(err);
      }
    };
    void reply().then((r) => respond(r)).catch((err) => opts.onError?.(err, method));
  });

  // The socket is created with mode 0600 from the start (umask around the synchronous bind inside start()),
  // and chmod'ed again after listen for filesystems that ignore the umask.
  const oldMask = process.platform === 'win32' ? undefined : process.umask(0o177);
  let listening: Promise<unknown>;
  try {
    listening = server.start();
  } finally {
    if (oldMask !== undefined) process.umask(oldMask);
  }
  await listening;
  let ino: number | undefined;
  if (process.platform !== 'win32') {
    fs.chmodSync(endpoint, 0o600);
    ino = fs.statSync(endpoint).ino;
  }

  let closed = false;
  return {
    path,
    endpoint,
    register: (name, h) => void handlers.set(name, h),
    unregister: (name) => void handlers.delete(name),
    methods: () => [...handlers.keys()].sort(),
    async close() {
      if (closed) return;
      closed = true;
      const netServer = server.server;
      await server.close();
      if (netServer) await new Promise<void>((resolve) => (netServer.listening ? netServer.once('close', () => resolve()) : resolve()));
      // net removes its socket file on close; make sure, but only if it is still ours.
      if (ino !== undefined) {
        try {
          if (fs.statSync(endpoint).ino === ino) fs.unlinkSync(endpoint);
        } catch {
          /* already gone */
        }
      }
    },
  };
}
