// A client of BIRD's control socket (what birdc speaks), kept open: polling fifty BIRDs through fifty `birdc`
// processes per round would measure process spawning, not BIRD. The protocol is line based: every reply line
// starts with a 4-digit code, followed by '-' when more lines of the reply follow, or ' ' on the last line; a line
// starting with a space continues the previous code. The server greets with "0001 BIRD x.y ready.".
import { createConnection, type Socket } from 'node:net';

export class BirdCtl {
  private buf = '';
  private lines: string[] = [];
  private waiter: ((lines: string[]) => void) | null = null;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(private readonly sock: Socket) {
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.lines.push(line);
        if (/^\d{4} /.test(line) && this.waiter) {
          const w = this.waiter;
          const out = this.lines;
          this.waiter = null;
          this.lines = [];
          w(out);
        }
      }
    });
  }

  /** Connect to the control socket at `path` and read the greeting. */
  static async connect(path: string): Promise<BirdCtl> {
    const sock = createConnection(path);
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    const c = new BirdCtl(sock);
    await new Promise<string[]>((r) => (c.waiter = r));
    return c;
  }

  /** Run one command; the reply's lines with their codes. Commands on one connection run one at a time. */
  cmd(line: string): Promise<string[]> {
    const run = () => new Promise<string[]>((resolve) => {
      this.waiter = resolve;
      this.sock.write(`${line}\n`);
    });
    const p = this.queue.then(run, run);
    this.queue = p;
    return p;
  }

  close(): void {
    this.sock.destroy();
  }
}
