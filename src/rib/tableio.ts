// Reading prefix tables (one prefix per line, optionally gzip-compressed) quickly.
//
// Lines are split and parsed straight from the byte buffers. A hand-written parser handles the common strict
// forms (dotted quads, plain hex IPv6 with at most one "::"); anything it is not sure about (embedded IPv4 in
// IPv6, inner spaces, host bits set, plain garbage) goes to parsePrefix/parseIP in src/net/ip.ts, which decides.
// So the accepted language and the error messages are exactly those of the rest of the project.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import type { Readable } from 'node:stream';
import { AddressError, IP, Prefix, parseIP, parsePrefix, wordMask } from '../net/ip.ts';
import { PrefixList } from './prefixlist.ts';

// ---- fast parsers over bytes ------------------------------------------------------------------------------------

const DOT = 46;
const COLON = 58;
const SLASH = 47;

function hexVal(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20; // ASCII lower case
  if (l >= 97 && l <= 102) return l - 87;
  return -1;
}

/** Strict dotted quad at buf[i..]; returns the index after it, or -1. Writes the address to out[0]. */
function fastIPv4(buf: Uint8Array, i: number, end: number, out: Uint32Array): number {
  let addr = 0;
  for (let part = 0; part < 4; part++) {
    if (part > 0) {
      if (i >= end || buf[i] !== DOT) return -1;
      i++;
    }
    const start = i;
    let v = 0;
    while (i < end && i - start < 4) {
      const d = buf[i] - 48;
      if (d < 0 || d > 9) break;
      v = v * 10 + d;
      i++;
    }
    const n = i - start;
    // One to three digits, no leading zero (ipaddr.js reads "010" as octal; ip.ts refuses it), at most 255.
    if (n === 0 || n > 3 || (n > 1 && buf[start] === 48) || v > 255) return -1;
    addr = (addr << 8) | v;
  }
  out[0] = addr >>> 0;
  out[1] = out[2] = out[3] = 0;
  return i;
}

/** Plain hex IPv6 (groups of 1-4 hex digits, at most one "::") at buf[i..]; index after it, or -1. */
function fastIPv6(buf: Uint8Array, i: number, end: number, out: Uint32Array, groups: Uint16Array): number {
  let n = 0;
  let gap = -1; // number of groups before the "::"
  if (i + 1 < end && buf[i] === COLON && buf[i + 1] === COLON) {
    gap = 0;
    i += 2;
  }
  while (i < end && buf[i] !== SLASH) {
    let v = 0;
    const start = i;
    while (i < end && i - start < 5) {
      const h = hexVal(buf[i]);
      if (h < 0) break;
      v = (v << 4) | h;
      i++;
    }
    if (i === start || i - start > 4 || n === 8) return -1;
    groups[n++] = v;
    if (i >= end || buf[i] === SLASH) break;
    if (buf[i] !== COLON) return -1; // a dot (embedded IPv4), a space, anything else: let the full parser decide
    i++;
    if (i < end && buf[i] === COLON) {
      if (gap >= 0) return -1;
      gap = n;
      i++;
      if (i >= end || buf[i] === SLASH) break;
    } else if (i >= end || buf[i] === SLASH) return -1; // trailing single colon
  }
  if (gap < 0 ? n !== 8 : n > 7) return -1;
  // Expand: groups before the gap, zeros, groups after it.
  let w0 = 0, w1 = 0, w2 = 0, w3 = 0;
  const tail = gap < 0 ? 0 : n - gap;
  for (let g = 0; g < 8; g++) {
    let v = 0;
    if (gap < 0) v = groups[g];
    else if (g < gap) v = groups[g];
    else if (g >= 8 - tail) v = groups[gap + g - (8 - tail)];
    if (g < 2) w0 = (w0 << 16) | v;
    else if (g < 4) w1 = (w1 << 16) | v;
    else if (g < 6) w2 = (w2 << 16) | v;
    else w3 = (w3 << 16) | v;
  }
  out[0] = w0 >>> 0;
  out[1] = w1 >>> 0;
  out[2] = w2 >>> 0;
  out[3] = w3 >>> 0;
  return i;
}

const groupsScratch = new Uint16Array(8);

/**
 * Fast path for "address/len" in buf[start, end) (already trimmed). On success writes the words to out[0..3] and
 * the length to out[4] and returns the family; returns 0 when the full parser has to decide (which includes
 * every malformed input). Never accepts anything parsePrefix refuses.
 */
export function fastParsePrefix(buf: Uint8Array, start: number, end: number, out: Uint32Array): 0 | 4 | 6 {
  // A colon within the first five bytes means IPv6 (a group has at most four digits).
  let family: 4 | 6 = 4;
  for (let j = start; j < end && j < start + 5; j++) {
    if (buf[j] === COLON) {
      family = 6;
      break;
    }
    if (buf[j] === DOT) break;
  }
  let i = family === 4 ? fastIPv4(buf, start, end, out) : fastIPv6(buf, start, end, out, groupsScratch);
  if (i < 0 || i >= end || buf[i] !== SLASH) return 0;
  i++;
  const lstart = i;
  let len = 0;
  while (i < end) {
    const d = buf[i] - 48;
    if (d < 0 || d > 9) return 0;
    len = len * 10 + d;
    i++;
  }
  if (i === lstart || i - lstart > 3 || len > (family === 4 ? 32 : 128)) return 0;
  // Host bits set: refused by parsePrefix with a message naming the network, so let it speak.
  for (let k = 0; k < 4; k++) if ((out[k] & ~wordMask(len, k)) !== 0) return 0;
  out[4] = len;
  return family;
}

/** Fast path for a bare address in buf[start, end); like fastParsePrefix, 0 means "ask parseIP". */
export function fastParseIP(buf: Uint8Array, start: number, end: number, out: Uint32Array): 0 | 4 | 6 {
  let colon = false;
  for (let j = start; j < end && j < start + 5; j++) {
    if (buf[j] === COLON) {
      colon = true;
      break;
    }
  }
  if (!colon && fastIPv4(buf, start, end, out) === end) return 4;
  if (fastIPv6(buf, start, end, out, groupsScratch) === end) return 6;
  return 0;
}

const textScratch = new Uint32Array(5);

/** parsePrefix with the fast path first (same results, same errors). */
export function parsePrefixFast(text: string): Prefix {
  const buf = Buffer.from(text, 'utf8');
  const fam = fastParsePrefix(buf, 0, buf.length, textScratch);
  if (fam === 0) return parsePrefix(text);
  const o = textScratch;
  return new Prefix(fam, o[0], o[1], o[2], o[3], o[4]);
}

/** parseIP with the fast path first (same results, same errors). */
export function parseIPFast(text: string): IP {
  const buf = Buffer.from(text, 'utf8');
  const fam = fastParseIP(buf, 0, buf.length, textScratch);
  if (fam === 0) return parseIP(text);
  const o = textScratch;
  return new IP(fam, o[0], o[1], o[2], o[3]);
}

// ---- lines -----------------------------------------------------------------------------------------------------

/**
 * Calls fn(buf, start, end, lineNo) for every line of the stream that is not blank and not a "#" comment, with
 * start/end trimmed of spaces, tabs and CR. Line numbers count from 1 and include skipped lines. The buffer is
 * only valid during the call. `afterChunk` runs (and is awaited) after each chunk of the stream.
 */
export async function forEachLine(
  stream: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
  fn: (buf: Uint8Array, start: number, end: number, lineNo: number) => void,
  afterChunk?: () => Promise<void> | void,
): Promise<number> {
  let lineNo = 0;
  let carry: Buffer | null = null;
  const visit = (buf: Uint8Array, s: number, e: number): void => {
    lineNo++;
    while (s < e && (buf[s] === 32 || buf[s] === 9 || buf[s] === 13)) s++;
    while (e > s && (buf[e - 1] === 32 || buf[e - 1] === 9 || buf[e - 1] === 13)) e--;
    if (s === e || buf[s] === 35) return;
    fn(buf, s, e, lineNo);
  };
  for await (const piece of stream) {
    const chunk = typeof piece === 'string' ? Buffer.from(piece) : piece;
    let pos = 0;
    if (carry) {
      // Finish the line that straddles the chunk boundary.
      const nl = chunk.indexOf(10);
      if (nl < 0) {
        carry = Buffer.concat([carry, chunk]);
        continue;
      }
      const line = Buffer.concat([carry, chunk.subarray(0, nl)]);
      carry = null;
      visit(line, 0, line.length);
      pos = nl + 1;
    }
    for (;;) {
      const nl = chunk.indexOf(10, pos);
      if (nl < 0) break;
      visit(chunk, pos, nl);
      pos = nl + 1;
    }
    if (pos < chunk.length) carry = Buffer.from(chunk.subarray(pos));
    if (afterChunk) await afterChunk(); // e.g. flush output and wait for the consumer
  }
  if (carry) visit(carry, 0, carry.length);
  return lineNo;
}

/** Opens a file for reading, gunzipping it when it starts with the gzip magic bytes. */
export async function openMaybeGzip(path: string): Promise<Readable> {
  const fh = await open(path, 'r');
  let gz = false;
  try {
    const head = Buffer.alloc(2);
    const { bytesRead } = await fh.read(head, 0, 2, 0);
    gz = bytesRead === 2 && head[0] === 0x1f && head[1] === 0x8b;
  } finally {
    await fh.close();
  }
  const raw = createReadStream(path, { highWaterMark: 1 << 20 });
  if (!gz) return raw;
  const gunzip = createGunzip({ chunkSize: 1 << 20 });
  raw.on('error', (e) => gunzip.destroy(e));
  return raw.pipe(gunzip);
}

// ---- tables ----------------------------------------------------------------------------------------------------

export interface TableLineError {
  line: number;
  text: string;
  message: string;
}

export interface PrefixTable {
  v4: PrefixList;
  v6: PrefixList;
  /** Lines read (including blank and comment lines). */
  lines: number;
  /** The first `maxErrors` bad lines. */
  errors: TableLineError[];
  /** All bad lines. */
  errorCount: number;
}

export interface ReadTableOptions {
  /** How many bad lines to keep with their messages (default 100); all are counted. */
  maxErrors?: number;
}

/** Read a prefix table from a stream of text (one prefix per line, "#" comments and blank lines skipped). */
export async function readPrefixStream(stream: AsyncIterable<Buffer | string> | Iterable<Buffer | string>, options: ReadTableOptions = {}): Promise<PrefixTable> {
  const maxErrors = options.maxErrors ?? 100;
  const v4 = new PrefixList(4, 1 << 16);
  const v6 = new PrefixList(6, 1 << 14);
  const errors: TableLineError[] = [];
  let errorCount = 0;
  const out = new Uint32Array(5);
  const lines = await forEachLine(stream, (buf, s, e, lineNo) => {
    let fam = fastParsePrefix(buf, s, e, out);
    if (fam === 0) {
      const text = Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('utf8');
      try {
        const p = parsePrefix(text);
        out[0] = p.w0;
        out[1] = p.w1;
        out[2] = p.w2;
        out[3] = p.w3;
        out[4] = p.len;
        fam = p.family;
      } catch (err) {
        if (!(err instanceof AddressError)) throw err;
        errorCount++;
        if (errors.length < maxErrors) errors.push({ line: lineNo, text, message: err.message });
        return;
      }
    }
    (fam === 4 ? v4 : v6).push(out[0], out[1], out[2], out[3], out[4]);
  });
  return { v4, v6, lines, errors, errorCount };
}

/** Read a prefix table file; gzip-compressed files are recognised by their magic bytes. */
export async function readPrefixFile(path: string, options: ReadTableOptions = {}): Promise<PrefixTable> {
  return readPrefixStream(await openMaybeGzip(path), options);
}
