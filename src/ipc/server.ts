// The daemon's control socket: request/response in net-ipc's wire format (wire.ts) over a Unix socket, mode 0600 (on
// Windows a named pipe whose DACL is set to SYSTEM and Administrators only once it listens; what each enforces:
// Platform.secureIpc in src/platform/platform.ts).
//
// Start-up rules: a path that answers is a live daemon, so we refuse to start; a socket file nobody listens on is
// stale and is removed; anything else at the path (a regular file, a directory) is refused, never deleted. A pipe
// name another process already owns (libuv creates the first instance only) is refused too.
import fs from 'node:fs';
import net from 'node:net';
import { hostPlatform, type Platform } from '../platform/platform.ts';
import { ipcRequest } from './client.ts';
import type { Request, Response, StatusReply } from './protocol.ts';
import { Deframer, frame, INIT_TAG, T_CONNECTION, T_END, T_PING, T_PONG, T_REQUEST, T_RESPONSE, type Packet } from './wire.ts';

/** A method handler: gets the request's params, returns the result (or throws an error with a `code`). */
export type IpcHandler = (params: any, ctx: { connectionId: string }) => unknown;

export interface IpcServerOptions {
  path: string;
  handlers?: Record<string, IpcHandler>;
  /** Called for every failed request and socket error (the daemon logs them). */
  onError?: (err: unknown, method?: string) => void;
  /** Default: this machine's. */
  platform?: Platform;
}

export interface IpcServer {
  readonly path: string;
  /** The socket file or pipe name actually listened on. */
  readonly endpoint: string;
  /** What protects the endpoint, in words (for the log). */
  readonly access: string;
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

/**
 * Who is at the endpoint: 'live' (accepts connections, or exists but does not answer in `timeoutMs`), 'denied'
 * (exists, but we may not connect: on Windows a pipe another account created), or 'free' (nothing, or a stale
 * Unix socket nobody listens on).
 */
function probe(endpoint: string, timeoutMs = 500): Promise<'live' | 'denied' | 'free'> {
  return new Promise((resolve) => {
    const s = net.connect({ path: endpoint });
    const done = (v: 'live' | 'denied' | 'free') => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done('live'), timeoutMs); // it accepted nothing yet but exists: treat as live
    s.once('connect', () => done('live'));
    s.once('error', (e: NodeJS.ErrnoException) => done(e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EBUSY' ? 'denied' : 'free'));
  });
}

/** Whether whatever accepts connections at `endpoint` answers a status request as a blockspeaker daemon does. */
async function answersAsDaemon(endpoint: string): Promise<boolean> {
  try {
    const r = await ipcRequest<{ pid?: unknown }>(endpoint, 'status', {}, { connectTimeoutMs: 1000, timeoutMs: 1500 });
    return typeof r?.pid === 'number';
  } catch {
    return false;
  }
}

async function refuseTaken(path: string, endpoint: string): Promise<void> {
  const who = await probe(endpoint);
  if (who === 'live' && await answersAsDaemon(endpoint)) throw new IpcStartError(`another blockspeaker daemon is already listening on ${path}`);
  // A squatter: something else took the name first (on Windows, to receive what the CLI and CNI plugin send).
  if (who === 'live') throw new IpcStartError(`${path} is already owned by another process that does not answer as a blockspeaker daemon; refusing to start`);
  if (who === 'denied') throw new IpcStartError(`${path} is already owned by another process that denies us access (${endpoint}); refusing to start`);
}

/**
 * Make sure the control path can be ours: refuse a live daemon, a name another process owns, or a path that is not a
 * socket; remove a stale socket file. The daemon calls this before it writes anything (store, routes, peers).
 */
export async function checkIpcPath(path: string, platform: Platform = hostPlatform()): Promise<void> {
  return clearPath(path, platform.socketEndpoint(path), platform);
}

async function clearPath(path: string, endpoint: string, platform: Platform): Promise<void> {
  if (platform.id === 'win32') return refuseTaken(path, endpoint);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(endpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new IpcStartError(`${path} exists and is not a socket; refusing to replace it`);
  await refuseTaken(path, endpoint);
  // Stale: left by a daemon that died. Remove it so listen() can bind.
  try {
    fs.unlinkSync(endpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/** A listen failure in words: who holds the name, or which permission is missing. */
export function listenError(path: string, e: unknown): Error {
  // net-ipc reports a path it finds present before listening as a plain Error with this message and no code.
  const code = (e as NodeJS.ErrnoException)?.code ?? (/^EADDRINUSE\b/.test((e as Error)?.message ?? '') ? 'EADDRINUSE' : undefined);
  if (code === 'EADDRINUSE')
    return new IpcStartError(`${path} is already owned by another process that does not answer as a blockspeaker daemon (EADDRINUSE); refusing to start`);
  if (code === 'EACCES' || code === 'EPERM')
    return new IpcStartError(`cannot listen on ${path}: permission denied (${code})`);
  return e instanceof Error ? e : new Error(String(e));
}

function errorReply(err: unknown): Response {
  const e = err as { code?: unknown; message?: unknown; name?: string };
  const code = typeof e?.code === 'string' ? e.code : e?.name && e.name !== 'Error' ? e.name : 'INTERNAL';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return { ok: false, error: { code, message } };
}

export async function startIpcServer(opts: IpcServerOptions): Promise<IpcServer> {
  const path = opts.path;
  const platform = opts.platform ?? hostPlatform();
  const unix = platform.id !== 'win32';
  const endpoint = platform.socketEndpoint(path);
  await clearPath(path, endpoint, platform);
  if (unix) {
    const dir = endpoint.slice(0, endpoint.lastIndexOf('/')) || '/';
    try {
      fs.mkdirSync(dir, { recursive: true });
    } catch (e) {
      throw new IpcStartError(`cannot create the directory ${dir} for the control socket ${path}: ${(e as Error).message}`);
    }
  }

  const handlers = new Map<string, IpcHandler>(Object.entries(opts.handlers ?? {}));
  const started = Date.now();
  if (!handlers.has('status')) {
    handlers.set('status', (): StatusReply => ({ pid: process.pid, uptimeSeconds: Math.round((Date.now() - started) / 1000), methods: [...handlers.keys()].sort() }));
  }
  handlers.set('methods', () => [...handlers.keys()].sort());

  const onRequest = (req: Request, conn: { id: string }): Promise<Response> => {
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
    return reply();
  };
  const server = net.createServer();
  const sockets = new Set<net.Socket>();
  server.on('error', (err: unknown) => opts.onError?.(err));
  server.on('connection', (sock) => serveConnection(sock, sockets, onRequest, opts.onError));

  // The socket is created with mode 0600 from the start (umask around the synchronous bind inside start()),
  // and chmod'ed again after listen for filesystems that ignore the umask.
  const oldMask = unix ? process.umask(0o177) : undefined;
  let listening: Promise<unknown>;
  try {
    listening = new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    server.listen({ path: platform.ipcListenPath(path) }); // binds synchronously, inside the umask
  } finally {
    if (oldMask !== undefined) process.umask(oldMask);
  }
  try {
    await listening;
  } catch (e) {
    throw listenError(path, e);
  }
  let ino: number | undefined;
  if (unix) {
    fs.chmodSync(endpoint, 0o600);
    ino = fs.statSync(endpoint).ino;
  }
  // Windows: the pipe's DACL becomes SYSTEM and Administrators only, read back, before anyone is told we listen.
  let access: string;
  try {
    access = (await platform.secureIpc(endpoint)).what;
  } catch (e) {
    await server.close();
    throw e instanceof IpcStartError ? e : new IpcStartError((e as Error)?.message ?? String(e));
  }

  let closed = false;
  return {
    path,
    endpoint,
    access,
    register: (name, h) => void handlers.set(name, h),
    unregister: (name) => void handlers.delete(name),
    methods: () => [...handlers.keys()].sort(),
    async close() {
      if (closed) return;
      closed = true;
      const done = new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
      // Each client is told why (an END packet, as net-ipc does), then its socket goes.
      for (const sock of sockets) sock.end(frame({ t: T_END, d: { m: 'Server was shut down', a: false } }));
      const t = setTimeout(() => sockets.forEach((s) => s.destroy()), 200);
      await done;
      clearTimeout(t);
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

let connectionSeq = 0;

/** One client: the "IPC" tag, the handshake, then requests answered in any order (pings too). */
function serveConnection(sock: net.Socket, sockets: Set<net.Socket>, onRequest: (req: Request, conn: { id: string }) => Promise<Response>, onError?: (err: unknown, method?: string) => void): void {
  sockets.add(sock);
  const conn = { id: `${process.pid.toString(36)}-${(connectionSeq++).toString(36)}` };
  const deframer = new Deframer();
  let tagged = false;
  let head = Buffer.alloc(0);
  let ready = false;
  const send = (p: Packet) => {
    if (!sock.destroyed && sock.writable) sock.write(frame(p));
  };
  sock.on('close', () => sockets.delete(sock));
  sock.on('error', (err) => onError?.(err));
  sock.on('data', (chunk: Buffer) => {
    if (!tagged) {
      head = Buffer.concat([head, chunk]);
      if (head.length < INIT_TAG.length) return;
      if (head.subarray(0, INIT_TAG.length).toString('latin1') !== INIT_TAG) {
        onError?.(new Error('control socket: a client that does not speak the IPC protocol (no "IPC" tag)'));
        sock.destroy();
        return;
      }
      tagged = true;
      chunk = head.subarray(INIT_TAG.length);
    }
    let packets: Packet[];
    try {
      packets = deframer.push(chunk);
    } catch (e) {
      onError?.(new Error(`control socket: ${(e as Error).message}; connection closed`));
      sock.destroy();
      return;
    }
    for (const p of packets) {
      if (p.t === T_CONNECTION) {
        ready = true;
        const id = (p.d as { id?: unknown } | undefined)?.id;
        if (typeof id === 'string' && id) conn.id = id;
        send({ t: T_CONNECTION, d: { id: conn.id, compress: false, messagepack: false }, ...(p.n ? { n: p.n } : {}) });
      } else if (!ready) {
        onError?.(new Error('control socket: a packet before the handshake; ignored'));
      } else if (p.t === T_REQUEST) {
        void onRequest(p.d as Request, conn).then((r) => send({ t: T_RESPONSE, d: r, ...(p.n ? { n: p.n } : {}) }), (err) => onError?.(err));
      } else if (p.t === T_PING) {
        send({ t: T_PONG, d: p.d, ...(p.n ? { n: p.n } : {}) });
      }
      // T_MESSAGE (no reply expected) and T_END (the client closes) need nothing from us.
    }
  });
}
