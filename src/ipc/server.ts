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
import { randomBytes } from 'node:crypto';
import { ipcRequest } from './client.ts';
import { makeProof, PIPE_KEY_BYTES } from './proof.ts';
import type { Request, Response, StatusReply } from './protocol.ts';
import { Deframer, FrameTooLargeError, frame, INIT_TAG, T_CONNECTION, T_END, T_PING, T_PONG, T_REQUEST, T_RESPONSE, type Packet } from './wire.ts';

// Per-connection limits. The socket is mode 0600 / a pipe for SYSTEM and Administrators, so these bound
// what a buggy or hostile local client of that kind can cost the daemon, not who may connect.

/**
 * Largest request frame, 1 MiB (etcd's own request limit is 1.5 MiB). Our largest real request is a CNI call with its
 * netconf and prevResult, a few KB. A length tag announcing more closes the connection before any of the body is read:
 * without a limit, one never-ending 48 MB frame cost the daemon 12.4 s of CPU and held 64 MB.
 */
export const IPC_MAX_FRAME_BYTES = 1024 * 1024;

/**
 * A connection with no request in flight that completes no packet for this long is closed (an END packet says why).
 * The CLI (also `top`, once per redraw) and the CNI plugin open a connection per call, and there is no watch or
 * subscription method, so nothing of ours holds one idle; a slow request (a CNI ADD waiting on the dataplane) is not
 * idle, the timer stops while a response is pending. Bytes of an unfinished frame do not count as activity.
 */
export const IPC_IDLE_TIMEOUT_MS = 5 * 60_000;

/**
 * Requests in flight on one connection; one more is answered BUSY without running it. The CNI plugin and the CLI send
 * one request at a time; 64 leaves room for a client that pipelines, and bounds the handlers one connection can start.
 */
export const IPC_MAX_IN_FLIGHT = 64;

export interface IpcLimits {
  maxFrameBytes: number;
  idleTimeoutMs: number;
  maxInFlight: number;
}

const DEFAULT_LIMITS: IpcLimits = { maxFrameBytes: IPC_MAX_FRAME_BYTES, idleTimeoutMs: IPC_IDLE_TIMEOUT_MS, maxInFlight: IPC_MAX_IN_FLIGHT };

/** A method handler: gets the request's params, returns the result (or throws an error with a `code`). */
export type IpcHandler = (params: any, ctx: { connectionId: string }) => unknown;

export interface IpcServerOptions {
  path: string;
  handlers?: Record<string, IpcHandler>;
  /** Called for every failed request and socket error (the daemon logs them). */
  onError?: (err: unknown, method?: string) => void;
  /** Default: this machine's. */
  platform?: Platform;
  /** For tests only: override the per-connection limits (IPC_MAX_FRAME_BYTES, IPC_IDLE_TIMEOUT_MS, IPC_MAX_IN_FLIGHT). */
  limits?: Partial<IpcLimits>;
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
async function answersAsDaemon(endpoint: string, keyFile: string | null): Promise<boolean> {
  try {
    // On Windows only a daemon that proves itself with the key (src/ipc/proof.ts) counts: a squatter answering
    // "status" with a pid is still a squatter.
    const r = await ipcRequest<{ pid?: unknown }>(endpoint, 'status', {}, { connectTimeoutMs: 1000, timeoutMs: 1500, keyFile });
    return typeof r?.pid === 'number';
  } catch {
    return false;
  }
}

async function refuseTaken(path: string, endpoint: string, keyFile: string | null): Promise<void> {
  const who = await probe(endpoint);
  if (who === 'live' && await answersAsDaemon(endpoint, keyFile)) throw new IpcStartError(`another blockspeaker daemon is already listening on ${path}`);
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
  const keyFile = platform.ipcKeyFile(path) ?? null;
  if (platform.id === 'win32') return refuseTaken(path, platform.ipcListenPath(path), keyFile);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(endpoint);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!st.isSocket()) throw new IpcStartError(`${path} exists and is not a socket; refusing to replace it`);
  await refuseTaken(path, endpoint, keyFile);
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

  // Windows: a new key each start, written before we listen, so every connection can be sent a proof.
  const keyFile = platform.ipcKeyFile(path);
  const key = keyFile ? await writePipeKey(platform, path, keyFile) : undefined;
  const proof = key ? () => makeProof(key, Date.now()) : undefined;

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
  const limits: IpcLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  server.on('connection', (sock) => serveConnection(sock, sockets, onRequest, limits, opts.onError, proof));

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

/**
 * Make the pipe key's folder admin-only (the one access rule, nobody else may read it) and write a new random key
 * into it, replacing the last start's: whoever cannot read it cannot prove to be us.
 */
async function writePipeKey(platform: Platform, path: string, keyFile: string): Promise<Buffer> {
  const cut = Math.max(keyFile.lastIndexOf('/'), keyFile.lastIndexOf('\\'));
  const dir = keyFile.slice(0, cut);
  let r;
  try {
    r = await platform.prepareDir(dir, { othersMayRead: false });
  } catch (e) {
    throw new IpcStartError(`cannot keep the control pipe's key for ${path} in ${dir}: ${(e as Error)?.message ?? String(e)}`);
  }
  if (r && !r.enforced) throw new IpcStartError(`cannot keep the control pipe's key for ${path}: its folder may be readable by others (${r.what}); refusing to start`);
  const key = randomBytes(PIPE_KEY_BYTES);
  const tmp = `${keyFile}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, key, { mode: 0o600 });
    platform.replaceFile(tmp, keyFile);
  } catch (e) {
    try {
      fs.unlinkSync(tmp);
    } catch {
      /* not made */
    }
    throw new IpcStartError(`cannot write the control pipe's key ${keyFile}: ${(e as Error)?.message ?? String(e)}`);
  }
  return key;
}

let connectionSeq = 0;

/**
 * One client: the "IPC" tag, the handshake, then requests answered in any order (pings too), within `limits`: a frame
 * over the size limit or an idle connection is told why (an END packet, as on shutdown) and closed; a request over the
 * in-flight cap is answered BUSY.
 */
function serveConnection(sock: net.Socket, sockets: Set<net.Socket>, onRequest: (req: Request, conn: { id: string }) => Promise<Response>, limits: IpcLimits, onError?: (err: unknown, method?: string) => void, proof?: () => Buffer): void {
  sockets.add(sock);
  // Windows: prove we are the daemon before the client sends anything (src/ipc/proof.ts).
  if (proof) sock.write(proof());
  const conn = { id: `${process.pid.toString(36)}-${(connectionSeq++).toString(36)}` };
  const deframer = new Deframer({ maxFrameBytes: limits.maxFrameBytes });
  let tagged = false;
  let head = Buffer.alloc(0);
  let ready = false;
  let inFlight = 0;
  let closing = false;
  let busyLogged = false;
  const send = (p: Packet) => {
    if (!sock.destroyed && sock.writable) sock.write(frame(p));
  };
  /** Tell the client why, stop reading, and close (at once if it does not take the END packet within 100 ms). */
  const closeWith = (reason: string) => {
    if (closing) return;
    closing = true;
    clearTimeout(idle);
    sock.pause();
    if (sock.writable) sock.end(frame({ t: T_END, d: { m: reason, a: false } }));
    setTimeout(() => sock.destroy(), 100).unref();
  };
  // Restarted by every complete packet and whenever the last pending response goes out.
  const idle = setTimeout(() => {
    if (inFlight === 0) closeWith(`idle for ${limits.idleTimeoutMs >= 1000 ? `${Math.round(limits.idleTimeoutMs / 1000)} s` : `${limits.idleTimeoutMs} ms`} with no request; closed`);
  }, limits.idleTimeoutMs).unref();
  sock.on('close', () => {
    closing = true; // nothing re-arms the idle timer now
    clearTimeout(idle);
    sockets.delete(sock);
  });
  sock.on('error', (err) => onError?.(err));
  sock.on('data', (chunk: Buffer) => {
    if (closing) return;
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
      head = Buffer.alloc(0);
    }
    let packets: Packet[];
    try {
      packets = deframer.push(chunk);
    } catch (e) {
      if (e instanceof FrameTooLargeError) {
        const why = `${e.message}; connection closed`;
        onError?.(new Error(`control socket: ${why}`));
        closeWith(why);
        return;
      }
      onError?.(new Error(`control socket: ${(e as Error).message}; connection closed`));
      sock.destroy();
      return;
    }
    if (packets.length && !closing) idle.refresh();
    for (const p of packets) {
      if (p.t === T_CONNECTION) {
        ready = true;
        const id = (p.d as { id?: unknown } | undefined)?.id;
        if (typeof id === 'string' && id) conn.id = id;
        send({ t: T_CONNECTION, d: { id: conn.id, compress: false, messagepack: false }, ...(p.n ? { n: p.n } : {}) });
      } else if (!ready) {
        onError?.(new Error('control socket: a packet before the handshake; ignored'));
      } else if (p.t === T_REQUEST) {
        const n = p.n ? { n: p.n } : {};
        if (inFlight >= limits.maxInFlight) {
          if (!busyLogged) onError?.(new Error(`control socket: more than ${limits.maxInFlight} requests in flight on one connection; answered BUSY`));
          busyLogged = true;
          send({ t: T_RESPONSE, d: { ok: false, error: { code: 'BUSY', message: `${limits.maxInFlight} requests are already in flight on this connection; retry when one is answered` } } satisfies Response, ...n });
          continue;
        }
        inFlight++;
        void onRequest(p.d as Request, conn)
          .then((r) => send({ t: T_RESPONSE, d: r, ...n }), (err) => onError?.(err))
          .finally(() => {
            if (--inFlight === 0 && !closing) idle.refresh();
          });
      } else if (p.t === T_PING) {
        send({ t: T_PONG, d: p.d, ...(p.n ? { n: p.n } : {}) });
      }
      // T_MESSAGE (no reply expected) and T_END (the client closes) need nothing from us.
    }
  });
}
