// IpcClient: requests to the daemon's control socket.
//
// It speaks net-ipc's wire format (wire.ts) with node:net alone. Why not net-ipc's own Client: the
// CNI plugin starts once per pod, and loading net-ipc pulls in msgpackr and fast-zlib (~40 ms here); its client also
// never settles connect() when reconnects are off and the socket is missing, and shares pending requests across
// instances. This one sends the handshake and the first request in one write, and fails fast with a clear message.
//
// On Windows it first waits for the daemon's proof (./proof.ts) and sends nothing, not even the handshake, until the
// proof checks out: a process that took the pipe's name while the daemon was down gets no byte to impersonate the
// caller with, and no request to answer.
import net from 'node:net';
import { ipcKeyFile } from '../platform/paths.ts';
import { checkProof, PipeKeyError, PROOF_BYTES, readPipeKey, startsLikeProof } from './proof.ts';
import { DEFAULT_SOCKET, socketEndpoint, type IpcMethods, type Response } from './protocol.ts';
import { Deframer, frame, INIT_TAG, T_CONNECTION, T_END, T_REQUEST, T_RESPONSE, type Packet } from './wire.ts';

/** UNTRUSTED: the process at the pipe did not prove it is the daemon; nothing was sent to it. */
export type IpcErrorCode = 'NOT_RUNNING' | 'PERMISSION' | 'TIMEOUT' | 'CLOSED' | 'PROTOCOL' | 'REMOTE' | 'UNTRUSTED';

/** A failed call. `code` says whether the daemon was unreachable or answered with an error (`remoteCode`). */
export class IpcError extends Error {
  override name = 'IpcError';
  constructor(
    readonly code: IpcErrorCode,
    message: string,
    /** For REMOTE: the daemon's error code (e.g. an IpamError code such as NO_POOL). */
    readonly remoteCode?: string,
  ) {
    super(message);
  }
}

export interface IpcClientOptions {
  /** Give up connecting after this long. Default 2000 ms. */
  connectTimeoutMs?: number;
  /** Default per-request timeout. Default 10000 ms. */
  timeoutMs?: number;
  /**
   * The key file the server must prove itself with before anything is sent (./proof.ts). Default: this OS's
   * (Windows: the one the daemon writes for this pipe; Linux: none). null: do not check, skip a proof if one comes.
   */
  keyFile?: string | null;
  /**
   * Who owns the endpoint, in words, for the refusal's message (the CLI looks it up with the Win32 calls; the CNI
   * plugin carries no native code and passes none).
   */
  describeOwner?: (endpoint: string) => Promise<string | undefined>;
}

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: IpcError) => void;
  timer: NodeJS.Timeout | undefined;
}

let ownerLookup: ((endpoint: string) => Promise<string | undefined>) | undefined;

/** The CLI on Windows names a refused pipe's owner with the Win32 calls; the CNI plugin, free of native code, cannot. */
export function setPipeOwnerLookup(fn: ((endpoint: string) => Promise<string | undefined>) | undefined): void {
  ownerLookup = fn;
}

export class IpcClient {
  readonly endpoint: string;
  private socket: net.Socket | undefined;
  private connecting: Promise<void> | undefined;
  private readonly pending = new Map<string, Pending>();
  private deframer = new Deframer();
  private seq = 0;
  private closedBy: IpcError | undefined;
  private readonly connectTimeoutMs: number;
  private readonly timeoutMs: number;
  private readonly keyFile: string | undefined;
  /** Bytes for the server, held until its proof checks out (undefined: write straight to the socket). */
  private outbox: Buffer[] | undefined;
  /** What came before the proof was complete (or skipped); undefined once it is. */
  private head: Buffer | undefined;

  constructor(
    readonly path: string = DEFAULT_SOCKET,
    private readonly opts: IpcClientOptions = {},
  ) {
    this.endpoint = socketEndpoint(path);
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.keyFile = opts.keyFile === null ? undefined : (opts.keyFile ?? ipcKeyFile(path));
  }

  /** Connect now (calls connect lazily otherwise). Rejects with NOT_RUNNING, PERMISSION or TIMEOUT. */
  connect(): Promise<void> {
    if (this.connecting && this.socket && !this.socket.destroyed) return this.connecting;
    this.closedBy = undefined;
    this.deframer = new Deframer();
    this.head = Buffer.alloc(0);
    const hello = Buffer.concat([Buffer.from(INIT_TAG), frame({ t: T_CONNECTION, d: { compress: false, messagepack: false, extras: null, id: null } })]);
    this.connecting = new Promise<void>((resolve, reject) => {
      const sock = net.connect({ path: this.endpoint });
      this.socket = sock;
      let settled = false;
      const settle = (e?: IpcError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!e) {
          // Idle sockets do not keep the process alive; a pending request refs it again.
          if (this.pending.size === 0) sock.unref();
          return resolve();
        }
        sock.destroy();
        reject(e);
        this.fail(e);
      };
      const timer = setTimeout(() => settle(new IpcError('TIMEOUT', this.keyFile && sock.readyState === 'open'
        ? `the process at ${this.endpoint} sent no proof that it is the blockspeaker daemon within ${this.connectTimeoutMs} ms; nothing was sent to it`
        : `blockspeaker daemon at ${this.path} did not accept a connection within ${this.connectTimeoutMs} ms`)), this.connectTimeoutMs);
      let key: Buffer | undefined;
      sock.once('connect', () => {
        if (!this.keyFile) return settle();
        try {
          key = readPipeKey(this.keyFile);
        } catch (e) {
          const k = e as PipeKeyError;
          const permission = k.code === 'EACCES' || k.code === 'EPERM';
          void this.refusal(permission ? 'PERMISSION' : 'UNTRUSTED', k.message).then(settle);
        }
      });
      sock.on('error', (err: NodeJS.ErrnoException) => settle(this.describe(err)));
      sock.on('close', () => {
        if (this.outbox) return void this.refusal('UNTRUSTED', 'it closed the connection without a proof').then(settle);
        this.fail(this.closedBy ?? new IpcError('CLOSED', `blockspeaker daemon at ${this.path} closed the connection`));
      });
      sock.on('data', (chunk: Buffer) => {
        if (!this.outbox) return this.onData(chunk);
        // Checking: nothing has been sent yet. The proof first, then whatever followed it.
        this.head = Buffer.concat([this.head!, chunk]);
        if (!key) return; // the key is being read or could not be (settle runs)
        if (this.head.length < PROOF_BYTES && startsLikeProof(this.head)) return;
        const r = checkProof(key, this.head.subarray(0, PROOF_BYTES), Date.now());
        if (!r.ok) return void this.refusal('UNTRUSTED', r.why).then(settle);
        const rest = this.head.subarray(PROOF_BYTES);
        this.head = undefined;
        const out = this.outbox;
        this.outbox = undefined;
        sock.write(Buffer.concat(out));
        settle();
        if (rest.length) this.onData(rest);
      });
      // Without a key to check, the handshake goes out at once; requests written after it queue behind it. With one,
      // both wait in the outbox for the proof.
      this.outbox = this.keyFile ? [hello] : undefined;
      if (!this.outbox) sock.write(hello);
    });
    this.connecting.catch(() => undefined);
    return this.connecting;
  }

  /** A typed call. */
  call<M extends keyof IpcMethods>(method: M, params: IpcMethods[M]['params'], opts: { timeoutMs?: number } = {}): Promise<IpcMethods[M]['result']> {
    return this.request(method, params, opts) as Promise<IpcMethods[M]['result']>;
  }

  /** Any named method (the daemon may register more than IpcMethods lists). */
  async request<T = unknown>(method: string, params: unknown = {}, opts: { timeoutMs?: number } = {}): Promise<T> {
    if (!this.connecting || !this.socket || this.socket.destroyed) void this.connect();
    const sock = this.socket!;
    const nonce = `${process.pid.toString(36)}-${(this.seq++).toString(36)}`;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const result = new Promise<unknown>((resolve, reject) => {
      const timer =
        timeoutMs > 0
          ? setTimeout(() => {
              this.pending.delete(nonce);
              reject(new IpcError('TIMEOUT', `blockspeaker daemon at ${this.path} did not answer ${method} within ${timeoutMs} ms`));
            }, timeoutMs)
          : undefined;
      this.pending.set(nonce, { method, resolve, reject, timer });
    });
    result.catch(() => undefined); // a failed connect rejects both; the connect error is the one reported
    sock.ref();
    const req = frame({ t: T_REQUEST, d: { m: method, p: params }, n: nonce });
    if (this.outbox) this.outbox.push(req);
    else if (!sock.destroyed) sock.write(req);
    try {
      await this.connecting;
      const res = (await result) as Response;
      if (!res || typeof res !== 'object' || typeof res.ok !== 'boolean') {
        throw new IpcError('PROTOCOL', `blockspeaker daemon at ${this.path} sent a malformed answer to ${method}`);
      }
      if (!res.ok) throw new IpcError('REMOTE', res.error.message, res.error.code);
      return res.r as T;
    } finally {
      if (this.pending.size === 0 && !sock.destroyed) sock.unref();
    }
  }

  /** Close the connection (pending requests fail with CLOSED). */
  async close(): Promise<void> {
    const sock = this.socket;
    if (!sock || sock.destroyed) return;
    this.closedBy = new IpcError('CLOSED', 'client closed');
    await new Promise<void>((resolve) => {
      sock.once('close', () => resolve());
      sock.end(frame({ t: T_END, d: { m: 'bye', a: false } }));
      setTimeout(() => sock.destroy(), 200).unref();
    });
  }

  private describe(err: NodeJS.ErrnoException): IpcError {
    switch (err.code) {
      case 'ENOENT':
        return new IpcError('NOT_RUNNING', `blockspeaker daemon is not running (no socket at ${this.path})`);
      case 'ECONNREFUSED':
        return new IpcError('NOT_RUNNING', `blockspeaker daemon is not running (nothing listens on ${this.path}: a stale socket)`);
      case 'EACCES':
      case 'EPERM':
        // Say what actually guards the endpoint: the pipe's DACL the daemon sets, or a Unix socket's mode.
        return new IpcError('PERMISSION', this.endpoint.startsWith('\\\\.\\pipe\\')
          ? `permission denied on the pipe ${this.endpoint} (its DACL lets only SYSTEM and Administrators open it: run elevated, as an administrator)`
          : `permission denied on ${this.path} (the socket is mode 0600: run as the daemon's user, usually root)`);
      case 'ENOTSOCK':
        return new IpcError('NOT_RUNNING', `${this.path} is not a socket`);
      default:
        return new IpcError('CLOSED', `blockspeaker daemon at ${this.path}: ${err.message}`);
    }
  }

  private fail(e: IpcError): void {
    if (!this.closedBy) this.closedBy = e;
    for (const [n, p] of this.pending) {
      if (p.timer) clearTimeout(p.timer);
      this.pending.delete(n);
      p.reject(e.code === 'CLOSED' ? new IpcError('CLOSED', `${e.message} before answering ${p.method}`) : e);
    }
  }

  /** The error for a server that did not prove itself: names the pipe, why, and who owns it when that can be told. */
  private async refusal(code: IpcErrorCode, why: string): Promise<IpcError> {
    let owner: string | undefined;
    try {
      owner = await (this.opts.describeOwner ?? ownerLookup)?.(this.endpoint);
    } catch {
      /* a diagnostic only */
    }
    const found = owner ? `; its owner: ${owner}` : ownerLookup || this.opts.describeOwner ? '' : ' (`blockspeaker show status`, run as an administrator, names the process that owns it)';
    if (code === 'PERMISSION') return new IpcError(code, `${why}${found}`);
    return new IpcError(code, `refusing ${this.endpoint}: the process that owns it did not prove it is the blockspeaker daemon: ${why}${found}. Nothing was sent to it. A local user may have created the pipe while the daemon was down: stop that process, then start the daemon`);
  }

  private onData(chunk: Buffer): void {
    if (this.head) {
      // Not checking proofs (Linux, or keyFile null): skip one if the server sends it.
      const head = this.head.length ? Buffer.concat([this.head, chunk]) : chunk;
      if (startsLikeProof(head)) {
        if (head.length < PROOF_BYTES) return void (this.head = head);
        chunk = head.subarray(PROOF_BYTES);
      } else chunk = head;
      this.head = undefined;
      if (!chunk.length) return;
    }
    let packets: Packet[];
    try {
      packets = this.deframer.push(chunk);
    } catch {
      this.socket?.destroy();
      this.fail(new IpcError('PROTOCOL', `blockspeaker daemon at ${this.path} sent a frame that is not JSON`));
      return;
    }
    for (const msg of packets) {
      if (msg.t === T_RESPONSE && msg.n !== undefined) {
        const p = this.pending.get(msg.n);
        if (p) {
          if (p.timer) clearTimeout(p.timer);
          this.pending.delete(msg.n);
          p.resolve(msg.d);
        }
      } else if (msg.t === T_END) {
        this.closedBy = new IpcError('CLOSED', `blockspeaker daemon at ${this.path} closed the connection (${JSON.stringify((msg.d as { m?: unknown })?.m ?? '')})`);
      }
    }
  }
}

/** One request on a fresh connection, then close: what the CNI plugin and one-shot CLI commands do. */
export async function ipcRequest<T = unknown>(path: string, method: string, params: unknown = {}, opts: IpcClientOptions = {}): Promise<T> {
  const c = new IpcClient(path, opts);
  try {
    return await c.request<T>(method, params);
  } finally {
    void c.close();
  }
}
