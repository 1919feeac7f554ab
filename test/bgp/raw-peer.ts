// Test helpers for the session and speaker tests: a hand-driven BGP peer on a raw socket (it sends exactly the
// bytes a test gives it and decodes what comes back), free ports, and waiting.
import * as net from 'node:net';
import {
  Afi, Framer, Safi, decodeMessage, encodeKeepalive, encodeOpen, type Capability, type DecodeResult, type Message,
  type OpenMessage,
} from '../../src/bgp/codec/index.ts';

export interface Received {
  raw: Buffer;
  result: DecodeResult;
  /** The decoded message, or null when it did not decode. */
  msg: Message | null;
}

/** A BGP peer driven byte by byte by a test. */
export class RawPeer {
  readonly received: Received[] = [];
  private waiters: (() => void)[] = [];
  private readonly framer = new Framer({ extendedMessage: true });
  closed = false;
  readonly closedP: Promise<void>;

  constructor(readonly sock: net.Socket) {
    sock.on('data', (chunk: Buffer) => {
      this.framer.push(chunk, (frame) => {
        const raw = Buffer.from(frame);
        const result = decodeMessage(raw, { extendedMessage: true });
        this.received.push({ raw, result, msg: result.action === 'notification' ? null : result.message });
      });
      this.wake();
    });
    sock.on('error', () => {});
    this.closedP = new Promise((resolve) => sock.on('close', () => {
      this.closed = true;
      this.wake();
      resolve();
    }));
  }

  static connect(port: number, host = '127.0.0.1', localAddress?: string): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ port, host, localAddress }, () => resolve(new RawPeer(s)));
      s.once('error', reject);
    });
  }

  send(...bufs: Buffer[]): void {
    for (const b of bufs) this.sock.write(b);
  }

  sendOpen(o: Partial<OpenMessage> & { asn?: number } = {}): OpenMessage {
    const asn = o.asn ?? 65002;
    const open: OpenMessage = {
      type: 'open',
      version: 4,
      myAs: o.myAs ?? (asn > 0xffff ? 23456 : asn),
      holdTime: o.holdTime ?? 90,
      bgpId: o.bgpId ?? 0x02020202,
      capabilities: o.capabilities ?? defaultCaps(asn),
    };
    this.send(encodeOpen(open));
    return open;
  }

  keepalive(): void {
    this.send(encodeKeepalive());
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Wait until `pred` holds over what was received (or the socket closed and it still does not). */
  async until<T>(pred: (r: Received[]) => T | undefined | null | false, timeoutMs = 5000, what = 'condition'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = pred(this.received);
      if (v) return v;
      if (this.closed) throw new Error(`${what}: connection closed; received ${this.describe()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: timed out; received ${this.describe()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** The first message of a type (after `from`), waiting for it. */
  async next(type: Message['type'] | 'malformed', timeoutMs = 5000, from = 0): Promise<Received> {
    return this.until((rs) => rs.slice(from).find((r) => (r.msg ? r.msg.type === type : type === 'malformed')), timeoutMs, `waiting for ${type}`);
  }

  /** The NOTIFICATION received, waiting for it; also waits for the close that must follow. */
  async notification(timeoutMs = 5000): Promise<{ code: number; subcode: number; data: string }> {
    const r = await this.next('notification', timeoutMs);
    const m = r.msg as Extract<Message, { type: 'notification' }>;
    await Promise.race([this.closedP, new Promise((_, rej) => setTimeout(() => rej(new Error('not closed after NOTIFICATION')), timeoutMs))]);
    return { code: m.code, subcode: m.subcode, data: Buffer.from(m.data).toString('hex') };
  }

  describe(): string {
    return JSON.stringify(this.received.map((r) => (r.msg ? r.msg.type : `malformed ${r.result.action}`)));
  }

  /** Complete the OPEN exchange as the passive side of a connection the speaker opened. */
  async establish(o: Partial<OpenMessage> & { asn?: number } = {}): Promise<OpenMessage> {
    const theirs = await this.next('open');
    this.sendOpen(o);
    this.keepalive();
    await this.next('keepalive');
    return theirs.msg as OpenMessage;
  }

  close(): void {
    this.sock.destroy();
  }
}

export function defaultCaps(asn: number, families: ('ipv4' | 'ipv6')[] = ['ipv4', 'ipv6']): Capability[] {
  return [
    ...families.map((f): Capability => ({ kind: 'multiprotocol', afi: f === 'ipv4' ? Afi.IPV4 : Afi.IPV6, safi: Safi.UNICAST })),
    { kind: 'route-refresh' },
    { kind: 'four-octet-as', asn },
  ];
}

/** A TCP server that hands each accepted socket to the test as a RawPeer. */
export class RawServer {
  readonly peers: RawPeer[] = [];
  private waiters: (() => void)[] = [];
  private constructor(readonly server: net.Server) {}

  static async listen(host = '127.0.0.1', port = 0): Promise<RawServer> {
    const server = net.createServer();
    const rs = new RawServer(server);
    server.on('connection', (s) => {
      rs.peers.push(new RawPeer(s));
      const w = rs.waiters;
      rs.waiters = [];
      for (const f of w) f();
    });
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    return rs;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** The n-th accepted connection (0-based), waiting for it. */
  async accepted(n = 0, timeoutMs = 5000): Promise<RawPeer> {
    const deadline = Date.now() + timeoutMs;
    while (this.peers.length <= n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no connection #${n} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.peers[n];
  }

  async close(): Promise<void> {
    for (const p of this.peers) p.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A port free on 127.0.0.1 now (used on several 127.0.0.x addresses at once: they rarely differ). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, host, resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Poll `fn` until it returns a truthy value. */
export async function waitFor<T>(fn: () => T | undefined | null | false, what: string, timeoutMs = 5000, stepMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let v: T | undefined | null | false;
    let err: unknown;
    try {
      v = fn();
    } catch (e) {
      err = e;
    }
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${err ? `: ${String(err)}` : ''}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An UPDATE from raw fields (withdrawn routes, path attributes, NLRI as bytes), lengths filled in. */
export function rawUpdate(withdrawn: number[], attrs: number[], nlri: number[]): Buffer {
  const body = [withdrawn.length >> 8, withdrawn.length & 255, ...withdrawn, attrs.length >> 8, attrs.length & 255, ...attrs, ...nlri];
  const len = 19 + body.length;
  return Buffer.from([...new Array(16).fill(0xff), len >> 8, len & 255, 2, ...body]);
}
