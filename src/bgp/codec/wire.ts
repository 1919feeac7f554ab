// Low-level readers shared by the decoder's modules (decode*.ts) and writers shared by the encoders (encode.ts,
// updates.ts). Internal to the codec: not re-exported by index.ts.
import { IP } from '../../net/ip.ts';
import { EncodeError } from './errors.ts';

export function w16(b: Uint8Array, p: number, v: number): number {
  b[p] = v >>> 8;
  b[p + 1] = v;
  return p + 2;
}

export function w32(b: Uint8Array, p: number, v: number): number {
  b[p] = v >>> 24;
  b[p + 1] = v >>> 16;
  b[p + 2] = v >>> 8;
  b[p + 3] = v;
  return p + 4;
}

export function wIP(b: Uint8Array, p: number, ip: IP): number {
  p = w32(b, p, ip.w0);
  if (ip.family === 6) {
    p = w32(b, p, ip.w1);
    p = w32(b, p, ip.w2);
    p = w32(b, p, ip.w3);
  }
  return p;
}

/** The marker, length and type of a message of `len` octets written at p. */
export function writeHeader(b: Uint8Array, p: number, len: number, type: number): void {
  b.fill(0xff, p, p + 16);
  w16(b, p + 16, len);
  b[p + 18] = type;
}

/** A message buffer of `len` octets with the header filled in. */
export function newMessage(len: number, type: number): Buffer {
  const b = Buffer.allocUnsafe(len);
  writeHeader(b, 0, len, type);
  return b;
}

/** Octets of an MP_REACH next hop: 4 (IPv4), 16 (IPv6 global) or 32 (global + link-local). */
export function mpNextHopLen(nextHop: IP | null, linkLocal: IP | null | undefined): number {
  if (nextHop === null) throw new EncodeError('MP_REACH_NLRI needs a next hop');
  if (nextHop.family === 4) {
    if (linkLocal) throw new EncodeError('a link-local next hop needs an IPv6 global next hop');
    return 4;
  }
  if (linkLocal && linkLocal.family !== 6) throw new EncodeError('the link-local next hop must be IPv6');
  return linkLocal ? 32 : 16;
}

// ---- readers ------------------------------------------------------------------------------------------------

export const EMPTY = new Uint8Array(0);

export const u16 = (b: Uint8Array, p: number): number => (b[p] << 8) | b[p + 1];
export const u32 = (b: Uint8Array, p: number): number => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
export const copy = (b: Uint8Array, s: number, e: number): Uint8Array => new Uint8Array(b.subarray(s, e));
export const be16 = (n: number): Uint8Array => new Uint8Array([(n >>> 8) & 255, n & 255]);

export function ipv6At(b: Uint8Array, p: number): IP {
  return new IP(6, u32(b, p), u32(b, p + 4), u32(b, p + 8), u32(b, p + 12));
}
