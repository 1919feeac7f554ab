// The store's log file format: framing, checksums and the two-slot header (the format is described at the top of
// ./file.ts). Pure byte-level helpers over an fd; no knowledge of keys, locks or processes.
import fs from 'node:fs';
import zlib from 'node:zlib';

export const MAGIC = Buffer.from('BSKVLOG1', 'latin1');
export const HEADER = 48;
export const SLOT = 20;
export const FRAME = 8;
export const SEALED = 1;
export const READ_CHUNK = 4 << 20;
export const SNAPSHOT_CHUNK = 1 << 20;
export const INDEX_EVERY = 64;

// zlib.crc32 exists from Node 20.15; older 20.x gets the table version (same polynomial and seeding).
let crcTable: Uint32Array | undefined;
function crc32Table(data: Uint8Array, seed: number): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = ~seed;
  for (let i = 0; i < data.length; i++) c = crcTable[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
const zcrc = (zlib as unknown as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;
export const crc32: (data: Uint8Array, seed?: number) => number = zcrc
  ? (data, seed = 0) => zcrc(data, seed)
  : (data, seed = 0) => crc32Table(data, seed);
/** Exposed for tests: the portable fallback. */
export const crc32Portable = (data: Uint8Array, seed = 0): number => crc32Table(data, seed);

export interface Header {
  committed: number;
  flags: number;
  seq: number;
}

export function encodeFrame(payload: string): Buffer {
  const len = Buffer.byteLength(payload);
  const buf = Buffer.allocUnsafe(FRAME + len);
  buf.write(payload, FRAME, 'utf8');
  buf.writeUInt32LE(len, 0);
  buf.writeUInt32LE(crc32(buf.subarray(FRAME), len), 4);
  return buf;
}

export function headerSlot(committed: number, flags: number, seq: number): Buffer {
  const b = Buffer.alloc(SLOT);
  b.writeUInt32LE(committed % 0x100000000, 0);
  b.writeUInt32LE(Math.floor(committed / 0x100000000), 4);
  b.writeUInt32LE(flags, 8);
  b.writeUInt32LE(seq >>> 0, 12);
  b.writeUInt32LE(crc32(b.subarray(0, 16)), 16);
  return b;
}

/** The header of a new file: slot 0 holds seq 1, slot 1 is empty (its checksum does not match). */
export function newHeader(committed: number): Buffer {
  const b = Buffer.alloc(HEADER);
  MAGIC.copy(b, 0);
  headerSlot(committed, 0, 1).copy(b, 8);
  return b;
}

/** The valid slot with the higher seq (seq wraps: compared as a signed difference). */
export function parseHeader(b: Buffer): Header | undefined {
  let best: Header | undefined;
  for (let at = 8; at < HEADER; at += SLOT) {
    if (crc32(b.subarray(at, at + 16)) !== b.readUInt32LE(at + 16)) continue;
    const h = {
      committed: b.readUInt32LE(at) + b.readUInt32LE(at + 4) * 0x100000000,
      flags: b.readUInt32LE(at + 8),
      seq: b.readUInt32LE(at + 12),
    };
    if (!best || ((h.seq - best.seq) | 0) > 0) best = h;
  }
  return best;
}

export function writeAll(fd: number, buf: Buffer, position: number): void {
  let done = 0;
  while (done < buf.length) done += fs.writeSync(fd, buf, done, buf.length - done, position + done);
}

/**
 * Walk the frames in [from, to), calling onFrame for each valid one. Stops at the first frame that is cut short or
 * fails its CRC and says where (`bad`), or at `to` (`bad` false).
 */
export function scanFrames(
  fd: number,
  from: number,
  to: number,
  onFrame: (payload: Buffer, start: number, end: number) => boolean | void,
): { end: number; bad: boolean } {
  let buf = Buffer.alloc(0);
  let bufStart = from;
  const ensure = (pos: number, n: number): void => {
    if (pos >= bufStart && pos + n <= bufStart + buf.length) return;
    const size = Math.min(to - pos, Math.max(n, READ_CHUNK));
    buf = Buffer.allocUnsafe(size);
    let got = 0;
    while (got < size) {
      const r = fs.readSync(fd, buf, got, size - got, pos + got);
      if (r === 0) break;
      got += r;
    }
    buf = buf.subarray(0, got);
    bufStart = pos;
  };
  let pos = from;
  while (pos < to) {
    if (pos + FRAME > to) return { end: pos, bad: true };
    ensure(pos, FRAME);
    if (buf.length - (pos - bufStart) < FRAME) return { end: pos, bad: true };
    const len = buf.readUInt32LE(pos - bufStart);
    const crc = buf.readUInt32LE(pos - bufStart + 4);
    // Zero-filled space (a common shape of a torn write) would otherwise pass as an empty record.
    if (len === 0 || pos + FRAME + len > to) return { end: pos, bad: true };
    ensure(pos, FRAME + len);
    const off = pos - bufStart + FRAME;
    if (buf.length < off + len) return { end: pos, bad: true };
    const payload = buf.subarray(off, off + len);
    if (crc32(payload, len) !== crc) return { end: pos, bad: true };
    if (onFrame(payload, pos, pos + FRAME + len) === false) return { end: pos, bad: false };
    pos += FRAME + len;
  }
  return { end: pos, bad: false };
}

// ---- file names ---------------------------------------------------------------------------------------------

const LOG_NAME = /^log(?:\.(\d+))?$/;

/** The file name of a log generation. */
export function logFileName(gen: number): string {
  return gen === 0 ? 'log' : `log.${gen}`;
}

/** Generations of the log files in a directory listing, ascending. */
export function logGenerations(names: string[]): number[] {
  const gens: number[] = [];
  for (const n of names) {
    const m = LOG_NAME.exec(n);
    if (m) gens.push(m[1] === undefined ? 0 : Number(m[1]));
  }
  return gens.sort((a, b) => a - b);
}
