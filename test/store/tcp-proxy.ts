// A TCP proxy on 127.0.0.1 that can lose a request or its answer on purpose, to give a client a write whose
// outcome it cannot know. Bytes pass through untouched until armed:
//   cutAfterForward: the next large client chunk (a request, not a small HTTP/2 control frame) reaches the server,
//                    then, after `delayMs`, the connection is cut before the answer gets back.
//   dropNext:        the next large client chunk is swallowed and the connection cut.
// After a cut, new connections are refused for `blackoutMs` (the client cannot look before the test is ready).
import net from 'node:net';

type Arm = { kind: 'cutAfterForward' | 'dropNext'; delayMs: number; blackoutMs: number; skip: number; done: () => void };

export class TcpProxy {
  private server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private arm: Arm | undefined;
  private blackoutUntil = 0;
  /** How many connections were cut on purpose. */
  cuts = 0;
  port = 0;

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client));
  }

  static async start(target: string): Promise<TcpProxy> {
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    const p = new TcpProxy({ host, port });
    await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
    p.port = (p.server.address() as net.AddressInfo).port;
    return p;
  }

  get endpoint(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Arm a cut (after letting `skip` requests through); the promise resolves once it happened. */
  cut(kind: Arm['kind'], opts: { delayMs?: number; blackoutMs?: number; skip?: number } = {}): Promise<void> {
    return new Promise((done) => (this.arm = { kind, delayMs: opts.delayMs ?? 200, blackoutMs: opts.blackoutMs ?? 300, skip: opts.skip ?? 0, done }));
  }

  /** Refuse new connections (and cut the open ones) for `ms`. */
  blackout(ms: number): void {
    this.blackoutUntil = Date.now() + ms;
    for (const s of this.sockets) s.destroy();
  }

  private accept(client: net.Socket): void {
    if (Date.now() < this.blackoutUntil) {
      client.destroy();
      return;
    }
    const server = net.connect(this.target.port, this.target.host);
    this.sockets.add(client);
    this.sockets.add(server);
    const drop = () => {
      client.destroy();
      server.destroy();
      this.sockets.delete(client);
      this.sockets.delete(server);
    };
    client.on('error', drop);
    server.on('error', drop);
    client.on('close', drop);
    server.on('close', drop);
    server.on('data', (d) => client.write(d));
    client.on('data', (d) => {
      const arm = this.arm;
      // HTTP/2 control frames (settings, pings, window updates) are small; a request is headers + data.
      if (arm && d.length >= 40 && arm.skip-- <= 0) {
        this.arm = undefined;
        this.cuts++;
        if (arm.kind === 'cutAfterForward') {
          server.write(d);
          // Answers from here on are lost.
          server.removeAllListeners('data');
          setTimeout(() => {
            this.blackoutUntil = Date.now() + arm.blackoutMs;
            drop();
            arm.done();
          }, arm.delayMs);
        } else {
          this.blackoutUntil = Date.now() + arm.blackoutMs;
          drop();
          arm.done();
        }
        return;
      }
      server.write(d);
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
