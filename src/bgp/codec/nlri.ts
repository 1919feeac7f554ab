// NLRI prefix encoding (RFC 4271 4.3, RFC 4760 5): <length in bits, the minimum number of octets>, read straight
// from the Buffer into uint32 words. This is the hot path of a full-table ingest: no strings, no objects.
import { type Family, Prefix } from '../../net/ip.ts';
import { PrefixList } from '../../rib/prefixlist.ts';

// MASK[len * 4 + k]: the mask of word k for a prefix of length len (0..128).
const MASK = new Uint32Array(129 * 4);
for (let len = 0; len <= 128; len++) {
  for (let k = 0; k < 4; k++) {
    const bits = len - k * 32;
    MASK[len * 4 + k] = bits <= 0 ? 0 : bits >= 32 ? 0xffffffff : (0xffffffff << (32 - bits)) >>> 0;
  }
}

/** Octets one prefix of this length takes on the wire. */
export function prefixWireLen(len: number): number {
  return 1 + ((len + 7) >> 3);
}

/**
 * Append the IPv4 prefixes in buf[pos, end) to `list`, which must have room for (end - pos) more (every prefix
 * takes at least one octet). Trailing bits past the length are ignored (RFC 4271 4.3). Returns false when the
 * field is syntactically wrong (length > 32, or a prefix runs past `end`); the list's count is then unchanged.
 */
export function readPrefixes4(buf: Uint8Array, pos: number, end: number, list: PrefixList): boolean {
  const words = list.words;
  const lens = list.lens;
  let n = list.count;
  while (pos < end) {
    const len = buf[pos];
    if (len > 32) return false;
    const p = pos + 1;
    const nb = (len + 7) >> 3;
    if (p + nb > end) return false;
    // Four octets whatever the length (those past it are the next prefix's, or nothing past `end`), the mask
    // keeping the length's bits: every prefix runs the same four reads, where a switch on the octet count left the
    // reads of /25-/32 and /1-/8 prefixes without feedback until one arrived, and its arrival made V8 throw away the
    // optimised UPDATE decoder and compile it again.
    const w = (p < end ? buf[p] << 24 : 0) | (p + 1 < end ? buf[p + 1] << 16 : 0) |
      (p + 2 < end ? buf[p + 2] << 8 : 0) | (p + 3 < end ? buf[p + 3] : 0);
    words[n] = w & MASK[len << 2]; // the Uint32Array store makes it unsigned
    lens[n++] = len;
    pos = p + nb;
  }
  list.count = n;
  return true;
}

// Word k (0..3) of a prefix whose nb address octets start at p.
function readWord(buf: Uint8Array, p: number, nb: number, k: number): number {
  const s = k << 2;
  if (s >= nb) return 0;
  if (s + 4 <= nb) return (buf[p + s] << 24) | (buf[p + s + 1] << 16) | (buf[p + s + 2] << 8) | buf[p + s + 3];
  let w = buf[p + s] << 24;
  if (s + 1 < nb) w |= buf[p + s + 1] << 16;
  if (s + 2 < nb) w |= buf[p + s + 2] << 8;
  return w;
}

/** Like readPrefixes4 for IPv6 (lengths up to 128, four words per prefix). */
export function readPrefixes6(buf: Uint8Array, pos: number, end: number, list: PrefixList): boolean {
  const words = list.words;
  const lens = list.lens;
  let n = list.count;
  while (pos < end) {
    const len = buf[pos];
    if (len > 128) return false;
    const p = pos + 1;
    const nb = (len + 7) >> 3;
    if (p + nb > end) return false;
    const m = len << 2;
    const b = n << 2;
    words[b] = readWord(buf, p, nb, 0) & MASK[m];
    words[b + 1] = readWord(buf, p, nb, 1) & MASK[m + 1];
    words[b + 2] = readWord(buf, p, nb, 2) & MASK[m + 2];
    words[b + 3] = readWord(buf, p, nb, 3) & MASK[m + 3];
    lens[n++] = len;
    pos = p + nb;
  }
  list.count = n;
  return true;
}

/** A callback receiving one prefix: words (IPv4 uses w0 only) and length. */
export type PrefixSink = (w0: number, w1: number, w2: number, w3: number, len: number) => void;

/**
 * Call `sink` for each prefix in buf[start, end) without storing them. Returns false on a syntax error (prefixes
 * before the error have been delivered).
 */
export function forEachPrefix(buf: Uint8Array, start: number, end: number, family: Family, sink: PrefixSink): boolean {
  const max = family === 4 ? 32 : 128;
  let pos = start;
  while (pos < end) {
    const len = buf[pos];
    if (len > max) return false;
    const p = pos + 1;
    const nb = (len + 7) >> 3;
    if (p + nb > end) return false;
    const m = len << 2;
    sink(
      (readWord(buf, p, nb, 0) & MASK[m]) >>> 0,
      (readWord(buf, p, nb, 1) & MASK[m + 1]) >>> 0,
      (readWord(buf, p, nb, 2) & MASK[m + 2]) >>> 0,
      (readWord(buf, p, nb, 3) & MASK[m + 3]) >>> 0,
      len,
    );
    pos = p + nb;
  }
  return true;
}

function writeWord(buf: Uint8Array, pos: number, w: number, n: number): void {
  // The top n (1..4) octets of w.
  buf[pos] = w >>> 24;
  if (n > 1) buf[pos + 1] = w >>> 16;
  if (n > 2) buf[pos + 2] = w >>> 8;
  if (n > 3) buf[pos + 3] = w;
}

/** Write one prefix at pos; returns the position after it. Bits past `len` are written as zero. */
export function writePrefix(
  buf: Uint8Array, pos: number, w0: number, w1: number, w2: number, w3: number, len: number,
): number {
  buf[pos++] = len;
  let nb = (len + 7) >> 3;
  const m = len << 2;
  for (let k = 0; nb > 0; k++) {
    const w = k === 0 ? w0 : k === 1 ? w1 : k === 2 ? w2 : w3;
    const n = nb > 4 ? 4 : nb;
    writeWord(buf, pos, w & MASK[m + k], n);
    pos += n;
    nb -= n;
  }
  return pos;
}

/** IPv4 fast path of writePrefix. */
export function writePrefix4(buf: Uint8Array, pos: number, w0: number, len: number): number {
  buf[pos++] = len;
  const nb = (len + 7) >> 3;
  if (nb > 0) writeWord(buf, pos, w0 & MASK[len << 2], nb);
  return pos + nb;
}

/** A source of prefixes for the encoder: Prefix objects or a columnar PrefixList. */
export type PrefixSource = readonly Prefix[] | PrefixList;

/** Family, length and words of prefix i of a source, without creating objects for a PrefixList. */
export class PrefixReader {
  private readonly list: PrefixList | null;
  private readonly arr: readonly Prefix[] | null;
  readonly count: number;
  constructor(src: PrefixSource) {
    if (src instanceof PrefixList) {
      this.list = src;
      this.arr = null;
      this.count = src.count;
    } else {
      this.list = null;
      this.arr = src;
      this.count = src.length;
    }
  }
  family(i: number): Family {
    return this.list ? this.list.family : this.arr![i].family;
  }
  len(i: number): number {
    return this.list ? this.list.lens[i] : this.arr![i].len;
  }
  word(i: number, k: number): number {
    if (this.list) return this.list.word(i, k);
    const p = this.arr![i];
    return k === 0 ? p.w0 : k === 1 ? p.w1 : k === 2 ? p.w2 : p.w3;
  }
}

/** A PrefixList with room for `n` prefixes (the field length in octets bounds the count). */
export function newPrefixList(family: Family, n: number): PrefixList {
  return new PrefixList(family, Math.max(1, n));
}

/** The prefixes of a list as objects (tests, tools). */
export function prefixesOf(list: PrefixList): Prefix[] {
  const out: Prefix[] = new Array(list.count);
  for (let i = 0; i < list.count; i++) out[i] = list.prefix(i);
  return out;
}
