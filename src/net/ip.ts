// Compact addresses and prefixes used everywhere in blockspeaker.
//
// One representation for both families: four unsigned 32-bit words, most significant first. IPv4 uses w0 only
// (w1..w3 are 0), so an IPv4 address is just a uint32 and no BigInt is ever needed. Text is parsed and printed
// with ipaddr.js at the edges only.
import ipaddr from 'ipaddr.js';

export type Family = 4 | 6;

export const maxLen = (family: Family): number => (family === 4 ? 32 : 128);

/** An IPv4 or IPv6 address. Immutable. */
export class IP {
  constructor(
    readonly family: Family,
    readonly w0: number,
    readonly w1: number = 0,
    readonly w2: number = 0,
    readonly w3: number = 0,
  ) {}
  toString(): string {
    return formatIP(this);
  }
}

/** A prefix: address words with every bit past `len` zero, and a length. Immutable. */
export class Prefix {
  constructor(
    readonly family: Family,
    readonly w0: number,
    readonly w1: number,
    readonly w2: number,
    readonly w3: number,
    readonly len: number,
  ) {}
  toString(): string {
    return formatPrefix(this);
  }
  /** The network address as an IP. */
  get ip(): IP {
    return new IP(this.family, this.w0, this.w1, this.w2, this.w3);
  }
}

/** A bad address or prefix in user input; the message names the text and what is wrong with it. */
export class AddressError extends Error {
  override name = 'AddressError';
}

// ---- masks --------------------------------------------------------------------------------------------------

/** The mask for word `i` (0..3) of a prefix of length `len`, as uint32. */
export function wordMask(len: number, i: number): number {
  const bits = len - i * 32;
  if (bits <= 0) return 0;
  if (bits >= 32) return 0xffffffff;
  return (0xffffffff << (32 - bits)) >>> 0;
}

function maskWords(family: Family, w0: number, w1: number, w2: number, w3: number, len: number): Prefix {
  return new Prefix(
    family,
    (w0 & wordMask(len, 0)) >>> 0,
    (w1 & wordMask(len, 1)) >>> 0,
    (w2 & wordMask(len, 2)) >>> 0,
    (w3 & wordMask(len, 3)) >>> 0,
    len,
  );
}

/** The prefix of length `len` that contains `ip`. */
export function prefixOf(ip: IP, len: number): Prefix {
  if (!Number.isInteger(len) || len < 0 || len > maxLen(ip.family)) {
    throw new AddressError(`prefix length ${len} out of range 0..${maxLen(ip.family)} for IPv${ip.family}`);
  }
  return maskWords(ip.family, ip.w0, ip.w1, ip.w2, ip.w3, len);
}

/** The host prefix (/32 or /128) of an address. */
export function hostPrefix(ip: IP): Prefix {
  return new Prefix(ip.family, ip.w0, ip.w1, ip.w2, ip.w3, maxLen(ip.family));
}

// ---- parsing and formatting (edges only) --------------------------------------------------------------------

function fromIpaddr(a: ipaddr.IPv4 | ipaddr.IPv6): IP {
  if (a.kind() === 'ipv4') {
    const o = (a as ipaddr.IPv4).octets;
    return new IP(4, ((o[0] << 24) | (o[1] << 16) | (o[2] << 8) | o[3]) >>> 0);
  }
  const p = (a as ipaddr.IPv6).parts;
  return new IP(
    6,
    ((p[0] << 16) | p[1]) >>> 0,
    ((p[2] << 16) | p[3]) >>> 0,
    ((p[4] << 16) | p[5]) >>> 0,
    ((p[6] << 16) | p[7]) >>> 0,
  );
}

function parseAddressText(text: string, what: string): IP {
  if (typeof text !== 'string') throw new AddressError(`invalid ${what} ${JSON.stringify(text)}: not a string`);
  const s = text.trim();
  // Strict forms only: dotted quad for IPv4 (no "10.1" or octal shorthands), no zone IDs for IPv6.
  if (s.includes(':')) {
    if (s.includes('%') || !ipaddr.IPv6.isValid(s)) throw new AddressError(`invalid ${what} "${text}"`);
    return fromIpaddr(ipaddr.IPv6.parse(s));
  }
  if (!ipaddr.IPv4.isValidFourPartDecimal(s)) throw new AddressError(`invalid ${what} "${text}"`);
  return fromIpaddr(ipaddr.IPv4.parse(s));
}

/** Parse an IPv4 or IPv6 address ("10.0.0.1", "fd00::1"). */
export function parseIP(text: string): IP {
  return parseAddressText(text, 'IP address');
}

function splitCidr(text: string): { ip: IP; len: number } {
  if (typeof text !== 'string') throw new AddressError(`invalid prefix ${JSON.stringify(text)}: not a string`);
  const slash = text.indexOf('/');
  if (slash < 0) throw new AddressError(`invalid prefix "${text}": missing "/length"`);
  const lenText = text.slice(slash + 1).trim();
  let ip: IP;
  try {
    ip = parseAddressText(text.slice(0, slash), 'address');
  } catch {
    throw new AddressError(`invalid prefix "${text}": bad address "${text.slice(0, slash)}"`);
  }
  if (!/^\d{1,3}$/.test(lenText)) throw new AddressError(`invalid prefix "${text}": bad length "${lenText}"`);
  const len = Number(lenText);
  if (len > maxLen(ip.family)) {
    throw new AddressError(`invalid prefix "${text}": length ${len} out of range 0..${maxLen(ip.family)}`);
  }
  return { ip, len };
}

/** Parse a network prefix. Host bits must be zero ("10.0.0.1/24" is refused and the error names the network). */
export function parsePrefix(text: string): Prefix {
  const { ip, len } = splitCidr(text);
  const p = prefixOf(ip, len);
  if (p.w0 !== ip.w0 || p.w1 !== ip.w1 || p.w2 !== ip.w2 || p.w3 !== ip.w3) {
    throw new AddressError(`invalid prefix "${text}": host bits set (the network is ${formatPrefix(p)})`);
  }
  return p;
}

/** Parse "address/len" where host bits are allowed ("10.0.0.5/26", an interface address). */
export function parseIPWithLen(text: string): { ip: IP; len: number } {
  return splitCidr(text);
}

/** Parse either a bare address or a prefix; a bare address becomes a host prefix. */
export function parsePrefixOrIP(text: string): Prefix {
  return typeof text === 'string' && text.includes('/') ? parsePrefix(text) : hostPrefix(parseIP(text));
}

export function formatIP(ip: { family: Family; w0: number; w1: number; w2: number; w3: number }): string {
  if (ip.family === 4) {
    const v = ip.w0;
    return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  const parts = [
    ip.w0 >>> 16, ip.w0 & 0xffff, ip.w1 >>> 16, ip.w1 & 0xffff,
    ip.w2 >>> 16, ip.w2 & 0xffff, ip.w3 >>> 16, ip.w3 & 0xffff,
  ];
  return new ipaddr.IPv6(parts).toRFC5952String();
}

export function formatPrefix(p: Prefix): string {
  return `${formatIP(p)}/${p.len}`;
}

// ---- comparisons and containment ----------------------------------------------------------------------------

export function ipEquals(a: IP, b: IP): boolean {
  return a.family === b.family && a.w0 === b.w0 && a.w1 === b.w1 && a.w2 === b.w2 && a.w3 === b.w3;
}

export function prefixEquals(a: Prefix, b: Prefix): boolean {
  return a.len === b.len && a.family === b.family && a.w0 === b.w0 && a.w1 === b.w1 && a.w2 === b.w2 && a.w3 === b.w3;
}

/** Order: family, then address words, then length (shorter first). A total order usable for sorting. */
export function comparePrefix(a: Prefix, b: Prefix): number {
  return (
    a.family - b.family || a.w0 - b.w0 || a.w1 - b.w1 || a.w2 - b.w2 || a.w3 - b.w3 || a.len - b.len
  );
}

export function compareIP(a: IP, b: IP): number {
  return a.family - b.family || a.w0 - b.w0 || a.w1 - b.w1 || a.w2 - b.w2 || a.w3 - b.w3;
}

export function prefixContainsIP(p: Prefix, ip: IP): boolean {
  if (p.family !== ip.family) return false;
  const len = p.len;
  return (
    ((ip.w0 & wordMask(len, 0)) >>> 0) === p.w0 &&
    ((ip.w1 & wordMask(len, 1)) >>> 0) === p.w1 &&
    ((ip.w2 & wordMask(len, 2)) >>> 0) === p.w2 &&
    ((ip.w3 & wordMask(len, 3)) >>> 0) === p.w3
  );
}

/** True when `inner` lies inside `outer` (equal counts as inside). */
export function prefixContainsPrefix(outer: Prefix, inner: Prefix): boolean {
  return outer.family === inner.family && outer.len <= inner.len && prefixContainsIP(outer, inner.ip);
}

export function prefixesOverlap(a: Prefix, b: Prefix): boolean {
  return prefixContainsPrefix(a, b) || prefixContainsPrefix(b, a);
}

// ---- offsets inside a prefix (blocks are small: at most 2^52 addresses are addressable this way) -------------

/** Number of addresses in a prefix, as a float (exact up to 2^53). */
export function prefixSize(p: Prefix): number {
  return 2 ** (maxLen(p.family) - p.len);
}

/** The address `offset` places after the start of `p`. Offset must be a non-negative integer inside the prefix. */
export function ipAt(p: Prefix, offset: number): IP {
  if (p.family === 4) return new IP(4, (p.w0 + offset) >>> 0);
  // Add a number < 2^53 to a 128-bit value held in four words.
  const lo = offset % 0x100000000;
  const hi = Math.floor(offset / 0x100000000);
  let w3 = p.w3 + lo;
  let carry = w3 >= 0x100000000 ? 1 : 0;
  w3 -= carry * 0x100000000;
  let w2 = p.w2 + hi + carry;
  carry = w2 >= 0x100000000 ? 1 : 0;
  w2 -= carry * 0x100000000;
  let w1 = p.w1 + carry;
  carry = w1 >= 0x100000000 ? 1 : 0;
  w1 -= carry * 0x100000000;
  const w0 = (p.w0 + carry) >>> 0;
  return new IP(6, w0, w1, w2, w3);
}

/** The offset of `ip` from the start of `p`; `ip` must be inside `p` and `p` at most 2^52 addresses. */
export function offsetOf(p: Prefix, ip: IP): number {
  if (p.family === 4) return (ip.w0 - p.w0) >>> 0;
  // Plain 128-bit subtraction, the inverse of ipAt: a range that starts at an address with low bits set (or the
  // last block before a word boundary) can carry into any higher word, w0 included. Exact while the result < 2^53.
  return (ip.w0 - p.w0) * 2 ** 96 + (ip.w1 - p.w1) * 2 ** 64 + (ip.w2 - p.w2) * 0x100000000 + (ip.w3 - p.w3);
}

/** The `index`-th subnet of length `subLen` inside `p` (index counted from 0, must be < 2^53). */
export function subnetAt(p: Prefix, subLen: number, index: number): Prefix {
  const step = 2 ** (maxLen(p.family) - subLen);
  if (p.family === 4) return new Prefix(4, (p.w0 + index * step) >>> 0, 0, 0, 0, subLen);
  // For v6 the product can exceed 2^53; add it word by word instead.
  const base = addShifted(p, index, maxLen(6) - subLen);
  return new Prefix(6, base[0], base[1], base[2], base[3], subLen);
}

/** How many subnets of length `subLen` fit in `p` (may be a huge float for IPv6). */
export function subnetCount(p: Prefix, subLen: number): number {
  return 2 ** (subLen - p.len);
}

/** p + (n << shift) over 128 bits, n < 2^53. */
function addShifted(p: Prefix, n: number, shift: number): [number, number, number, number] {
  const w = [p.w0, p.w1, p.w2, p.w3];
  // Split n into 16-bit chunks and add each at its bit position.
  let pos = shift;
  let rest = n;
  while (rest > 0) {
    const chunk = rest % 0x10000;
    rest = Math.floor(rest / 0x10000);
    if (chunk) addAtBit(w, chunk, pos);
    pos += 16;
  }
  return [w[0] >>> 0, w[1] >>> 0, w[2] >>> 0, w[3] >>> 0];
}

function addAtBit(w: number[], value: number, bit: number): void {
  // bit counted from the least significant end of the 128-bit number.
  let word = 3 - Math.floor(bit / 32);
  let v = value * 2 ** (bit % 32); // < 2^48, exact
  while (word >= 0 && v > 0) {
    const sum = w[word] + (v % 0x100000000);
    w[word] = sum % 0x100000000;
    v = Math.floor(v / 0x100000000) + Math.floor(sum / 0x100000000);
    word--;
  }
}

/** Index of the subnet of length `subLen` inside `p` that holds `ip` (for subLen - p.len <= 52). */
export function subnetIndexOf(p: Prefix, subLen: number, ip: IP): number {
  const hostBits = maxLen(p.family) - subLen;
  if (p.family === 4) return Math.floor(((ip.w0 - p.w0) >>> 0) / 2 ** hostBits);
  return offsetOfWide(p, ip, hostBits);
}

// Offset of ip from p, shifted right by `shiftBits`, computed without losing precision for big IPv6 prefixes.
function offsetOfWide(p: Prefix, ip: IP, shiftBits: number): number {
  const a = [ip.w0 - p.w0, ip.w1 - p.w1, ip.w2 - p.w2, ip.w3 - p.w3];
  // Normalise borrows so every word is in 0..2^32-1.
  for (let i = 3; i > 0; i--) {
    if (a[i] < 0) {
      a[i] += 0x100000000;
      a[i - 1] -= 1;
    }
  }
  // Shift right by shiftBits and fold to a number.
  let result = 0;
  for (let bit = 127; bit >= shiftBits; bit--) {
    const word = 3 - Math.floor(bit / 32);
    const b = Math.floor(a[word] / 2 ** (bit % 32)) & 1;
    if (result || b) result = result * 2 + b;
  }
  return result;
}

export function familyOfText(text: string): Family {
  return text.includes(':') ? 6 : 4;
}
