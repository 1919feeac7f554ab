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

/** A length tag announcing more than the Deframer's limit: thrown as soon as the tag says so, before any of the body. */
export class FrameTooLargeError extends WireError {
  override name = 'FrameTooLargeError';
  constructor(
    /** What the tag announces, at least (the tag is not read to its end once it is over the limit). */
    readonly atLeast: number,
    readonly limit: number,
  ) {
    super(`a frame of at least ${atLeast} bytes, over the ${limit}-byte limit`);
  }
}

/** Node's own cap on one Buffer: a length past it could never be joined, whatever the caller's limit. */
const MAX_BUFFER = 2 ** 31 - 1;

export interface DeframerOptions {
  /** Largest frame body accepted, in bytes; a tag announcing more throws FrameTooLargeError. Default: no limit (only Node's Buffer size). */
  maxFrameBytes?: number;
}

/**
 * Cuts a byte stream into packets. push() returns the complete ones; it throws WireError on a frame that is not JSON,
 * and FrameTooLargeError as soon as a length tag announces more than `maxFrameBytes`.
 *
 * A frame's body is kept as a list of the chunks it arrived in with a running length, joined once when the frame is
 * whole: a large frame that arrives in many small chunks costs O(n), not the O(n²) of concatenating per chunk. The tag
 * is read one byte at a time as it comes (a few bytes: it is refused once over the limit), so nothing is buffered for
 * a frame that is too large.
 */
export class Deframer {
  private readonly max: number;
  /** The body's length once its tag is complete, -1 while reading a tag. */
  private need = -1;
  /** The tag's value so far. */
  private len = 0;
  private parts: Buffer[] = [];
  private have = 0;

  constructor(opts: DeframerOptions = {}) {
    this.max = Math.min(opts.maxFrameBytes ?? Infinity, MAX_BUFFER);
  }

  push(chunk: Buffer): Packet[] {
    const out: Packet[] = [];
    let off = 0;
    while (off < chunk.length) {
      if (this.need < 0) {
        const b = chunk[off++]!;
        this.len = this.len * 128 + (b & 127);
        // Digits come most significant first, so the final length is at least this: refuse now.
        if (this.len > this.max) throw new FrameTooLargeError(this.len, this.max);
        if (!(b & 128)) continue;
        this.need = this.len;
        this.len = 0;
        if (this.need > 0) continue;
      } else {
        const take = Math.min(this.need - this.have, chunk.length - off);
        this.parts.push(chunk.subarray(off, off + take));
        this.have += take;
        off += take;
        if (this.have < this.need) continue;
      }
      const body = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.have);
      this.parts = [];
      this.have = 0;
      this.need = -1;
      out.push(decode(body));
    }
    return out;
  }
}

function decode(body: Buffer): Packet {
  let msg: unknown;
  try {
    msg = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WireError('a frame that is not JSON');
  }
  if (!msg || typeof msg !== 'object' || typeof (msg as Packet).t !== 'number') throw new WireError('a frame without a packet type');
  return msg as Packet;
}
