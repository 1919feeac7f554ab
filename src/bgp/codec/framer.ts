// Splits a TCP byte stream into BGP messages. Messages that lie wholly inside a chunk are handed out as views of
// that chunk (no copy); only a message split across chunks is copied, once, into a buffer of its exact length.
// Each header is checked (RFC 4271 6.1) as soon as its 19 octets are in, so a bad length or marker is reported
// without waiting for a body that may never come.
import { checkHeader, type NotificationResult } from './decode.ts';
import { HEADER_LEN, type SessionCodecOptions } from './messages.ts';

export class Framer {
  private readonly head = Buffer.alloc(HEADER_LEN);
  private headFill = 0;
  private body: Buffer | null = null;
  private bodyFill = 0;
  private failed: NotificationResult | null = null;
  private opts: SessionCodecOptions;

  constructor(opts: SessionCodecOptions = {}) {
    this.opts = { ...opts };
  }

  /** Change the session options (e.g. extended messages once the OPENs are exchanged); applies to the next header. */
  setOptions(opts: SessionCodecOptions): void {
    this.opts = { ...this.opts, ...opts };
  }

  /** Octets held for an incomplete message. */
  get buffered(): number {
    return this.body ? this.bodyFill : this.headFill;
  }

  /**
   * Feed one chunk. `onFrame` gets each complete message (header included) in order; the Buffer may be a view of
   * `chunk`, so it stays valid as long as the chunk's memory is not reused (Node socket chunks never are). Returns
   * null, or the header error to send as a NOTIFICATION; after an error the stream is out of sync and every later
   * call returns the same error.
   */
  push(chunk: Uint8Array, onFrame: (msg: Uint8Array) => void): NotificationResult | null {
    return this.pushAt(chunk, (buf, off, len) => onFrame(off === 0 && len === buf.length ? buf : new Uint8Array(buf.buffer, buf.byteOffset + off, len)));
  }

  /**
   * push, with each message given as where it lies (buf[off..off+len)) rather than as a view: no object per
   * message for a caller that decodes in place (decodeMessageAt). `buf` is `chunk`, or a copy for a message split
   * across chunks.
   */
  pushAt(chunk: Uint8Array, onFrame: (buf: Uint8Array, off: number, len: number) => void): NotificationResult | null {
    if (this.failed) return this.failed;
    const n = chunk.length;
    let off = 0;
    if (this.headFill > 0 || this.body) {
      if (!this.body) {
        const take = Math.min(HEADER_LEN - this.headFill, n);
        this.head.set(chunk.subarray(0, take), this.headFill);
        this.headFill += take;
        off = take;
        if (this.headFill < HEADER_LEN) return null;
        const err = this.check(this.head, 0);
        if (err) return err;
        this.body = Buffer.allocUnsafe(this.head.readUInt16BE(16));
        this.head.copy(this.body, 0);
        this.bodyFill = HEADER_LEN;
        this.headFill = 0;
      }
      const body: Buffer = this.body;
      const take = Math.min(body.length - this.bodyFill, n - off);
      body.set(chunk.subarray(off, off + take), this.bodyFill);
      this.bodyFill += take;
      off += take;
      if (this.bodyFill < body.length) return null;
      this.body = null;
      onFrame(body, 0, body.length);
    }
    const view = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (n - off >= HEADER_LEN) {
      const err = this.check(view, off);
      if (err) return err;
      const len = (view[off + 16] << 8) | view[off + 17];
      if (n - off < len) {
        this.body = Buffer.allocUnsafe(len);
        view.copy(this.body, 0, off, n);
        this.bodyFill = n - off;
        return null;
      }
      onFrame(view, off, len);
      off += len;
    }
    if (off < n) {
      this.head.set(view.subarray(off, n), 0);
      this.headFill = n - off;
    }
    return null;
  }

  private check(buf: Uint8Array, off: number): NotificationResult | null {
    const e = checkHeader(buf, off, this.opts);
    if (!e) return null;
    this.failed = { action: 'notification', code: e.code, subcode: e.subcode, data: e.data, reason: e.reason, msgType: buf[off + 18] };
    return this.failed;
  }
}
