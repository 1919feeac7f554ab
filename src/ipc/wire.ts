// net-ipc's wire format with node:net alone, for both ends of the control socket (client.ts, server.ts).
//
// Why not the net-ipc package: it loads msgpackr (with a native addon), fast-zlib and tls whether or not a
// connection asks for them, about 8 MB of the idle daemon's RSS (BENCHMARKS.md "Footprint"); we use neither
// compression nor MessagePack. The format stays net-ipc's, so its own Client still talks to our server (a test
// proves it), and older CLIs keep working.
//
// A connection starts with the 3 bytes "IPC"; then each packet is a JSON object {t: type, d: data, n?: nonce},
// preceded by its length as base-128 digits, most significant first, the last one with the high bit set.

export const T_CONNECTION = 0;
export const T_MESSAGE = 1;
export const T_REQUEST = 2;
export const T_RESPONSE = 3;
export const T_PING = 4;
export const T_PONG = 5;
export const T_END = 6;

export const INIT_TAG = 'IPC';

export interface Packet {
  t: number;
  d?: unknown;
  n?: string;
}

/** One packet: length tag + JSON. */
export function frame(obj: Packet): Buffer {
  const body = Buffer.from(JSON.stringify(obj));
  let size = body.length;
  const tag = [(size & 127) | 128];
  while ((size = Math.floor(size / 128)) > 0) tag.push(size & 127);
  tag.reverse();
  const out = Buffer.allocUnsafe(tag.length + body.length);
  for (let i = 0; i < tag.length; i++) out[i] = tag[i]!;
  body.copy(out, tag.length);
  return out;
}

export class WireError extends Error {
  override name = 'WireError';
}

/** Cuts a byte stream into packets. push() returns the complete ones; it throws WireError on a frame that is not JSON. */
export class Deframer {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Packet[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Packet[] = [];
    for (;;) {
      let len = 0;
      let i = 0;
      let done = false;
      for (; i < this.buf.length; i++) {
        const b = this.buf[i]!;
        len = len * 128 + (b & 127);
        if (b & 128) {
          done = true;
          i++;
          break;
        }
      }
      if (!done || this.buf.length < i + len) return out;
      const body = this.buf.subarray(i, i + len);
      this.buf = this.buf.subarray(i + len);
      let msg: unknown;
      try {
        msg = JSON.parse(body.toString('utf8'));
      } catch {
        throw new WireError('a frame that is not JSON');
      }
      if (!msg || typeof msg !== 'object' || typeof (msg as Packet).t !== 'number') throw new WireError('a frame without a packet type');
      out.push(msg as Packet);
    }
  }
}
