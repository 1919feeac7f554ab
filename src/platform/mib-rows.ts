// IP Helper's rows as bytes: MIB_IPFORWARD_ROW2 (a route), MIB_IPFORWARD_TABLE2 (GetIpForwardTable2's answer) and
// the few fields of MIB_IPINTERFACE_ROW the forwarding switch uses, at the byte offsets of netioapi.h on x64
// (checked against mingw-w64's headers with offsetof). Pure: no koffi, so the layout is tested on Linux; the
// binding (./iphlpapi-koffi.ts) hands these functions the buffers the native calls fill.
import type { IpForwardRow } from './windows-net-api.ts';
import { formatIP, formatPrefix, IP, parseIP, parsePrefix, prefixOf, type Family } from '../net/ip.ts';

// ws2def.h address families.
export const AF_UNSPEC = 0;
export const AF_INET = 2;
export const AF_INET6 = 23;

/** SOCKADDR_INET: a union of SOCKADDR_IN and SOCKADDR_IN6 (the larger, 28 bytes, 4-byte aligned). */
export const SOCKADDR_INET = {
  size: 28,
  family: 0, // u16, host order
  port: 2, // u16, network order (0 in routes)
  v4Address: 4, // 4 bytes, network order
  v6FlowInfo: 4, // u32
  v6Address: 8, // 16 bytes, network order
  v6ScopeId: 24, // u32
} as const;

/** IP_ADDRESS_PREFIX: SOCKADDR_INET then the UINT8 length, padded to 4-byte alignment. */
export const IP_ADDRESS_PREFIX = { size: 32, prefix: 0, prefixLength: 28 } as const;

/** MIB_IPFORWARD_ROW2 (8-byte aligned by its NET_LUID). */
export const FORWARD_ROW = {
  size: 104,
  interfaceLuid: 0, // u64 (NET_LUID)
  interfaceIndex: 8, // u32 (NET_IFINDEX)
  destinationPrefix: 12, // IP_ADDRESS_PREFIX: Prefix 12..40, PrefixLength 40
  nextHop: 44, // SOCKADDR_INET, 44..72
  sitePrefixLength: 72, // u8
  validLifetime: 76, // u32
  preferredLifetime: 80, // u32
  metric: 84, // u32
  protocol: 88, // u32 (NL_ROUTE_PROTOCOL)
  loopback: 92, // BOOLEAN
  autoconfigureAddress: 93, // BOOLEAN
  publish: 94, // BOOLEAN
  immortal: 95, // BOOLEAN
  age: 96, // u32
  origin: 100, // u32 (NL_ROUTE_ORIGIN)
} as const;

/** MIB_IPFORWARD_TABLE2: ULONG NumEntries, then the rows from offset 8 (the rows' 8-byte alignment). */
export const FORWARD_TABLE = { numEntries: 0, rows: 8 } as const;

/** MIB_IPINTERFACE_ROW, the fields we read or write (the rest is carried through unchanged). */
export const INTERFACE_ROW = {
  size: 168,
  family: 0, // u16 (ADDRESS_FAMILY)
  interfaceLuid: 8, // u64
  interfaceIndex: 16, // u32
  forwardingEnabled: 41, // BOOLEAN
  sitePrefixLength: 144, // u32 (after ZoneIndices[16] at 80..144)
} as const;

/** Infinite lifetime (what a persistent, never-expiring route has). */
export const INFINITE_LIFETIME = 0xffff_ffff;
const MIB_IPPROTO_NETMGMT = 3;

const U64_MAX = (1n << 64n) - 1n;

export const afOf = (family: Family): number => (family === 4 ? AF_INET : AF_INET6);

function familyOfAf(af: number, what: string): Family {
  if (af === AF_INET) return 4;
  if (af === AF_INET6) return 6;
  throw new RangeError(`${what}: address family ${af} is neither AF_INET (2) nor AF_INET6 (23)`);
}

function checkU32(v: number, what: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff) throw new RangeError(`${what} ${v} is not an unsigned 32-bit integer`);
  return v;
}

function checkLuid(v: bigint, what = 'interface LUID'): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) throw new RangeError(`${what} ${String(v)} is not an unsigned 64-bit integer`);
  return v;
}

function need(buf: Uint8Array, offset: number, size: number, what: string): Buffer {
  if (!Number.isInteger(offset) || offset < 0 || buf.length < offset + size) {
    throw new RangeError(`${what}: needs ${size} bytes at offset ${offset}, the buffer has ${buf.length}`);
  }
  return Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Write an address into the SOCKADDR_INET at `at` (port, flow info and scope id 0). */
export function writeSockaddr(buf: Buffer, at: number, ip: IP): void {
  buf.fill(0, at, at + SOCKADDR_INET.size);
  buf.writeUInt16LE(afOf(ip.family), at + SOCKADDR_INET.family);
  if (ip.family === 4) {
    buf.writeUInt32BE(ip.w0, at + SOCKADDR_INET.v4Address);
  } else {
    const a = at + SOCKADDR_INET.v6Address;
    buf.writeUInt32BE(ip.w0, a);
    buf.writeUInt32BE(ip.w1, a + 4);
    buf.writeUInt32BE(ip.w2, a + 8);
    buf.writeUInt32BE(ip.w3, a + 12);
  }
}

/**
 * The address in the SOCKADDR_INET at `at`. AF_UNSPEC (an unset next hop) reads as the unspecified address of
 * `fallback`, the family of the route it belongs to.
 */
export function readSockaddr(buf: Buffer, at: number, fallback?: Family): IP {
  const af = buf.readUInt16LE(at + SOCKADDR_INET.family);
  const family = af === AF_UNSPEC && fallback ? fallback : familyOfAf(af, `SOCKADDR_INET at offset ${at}`);
  if (af === AF_UNSPEC) return new IP(family, 0);
  if (family === 4) return new IP(4, buf.readUInt32BE(at + SOCKADDR_INET.v4Address));
  const a = at + SOCKADDR_INET.v6Address;
  return new IP(6, buf.readUInt32BE(a), buf.readUInt32BE(a + 4), buf.readUInt32BE(a + 8), buf.readUInt32BE(a + 12));
}

/** The route as we create it (or name it to delete it). */
export type ForwardRowInput = Omit<IpForwardRow, 'interfaceIndex'> & { interfaceIndex?: number };

/**
 * Fill the fields of a route we own into a MIB_IPFORWARD_ROW2 that InitializeIpForwardEntry prepared (the other
 * fields keep its defaults): interface, destination, next hop, metric, protocol, infinite lifetimes, not published,
 * not immortal, site prefix length 0. Throws RangeError or AddressError on input Windows would refuse.
 */
export function fillForwardRow(buf: Uint8Array, row: ForwardRowInput, offset = 0): Buffer {
  const b = need(buf, offset, FORWARD_ROW.size, 'MIB_IPFORWARD_ROW2');
  const dest = parsePrefix(row.destination);
  const hop = parseIP(row.nextHop);
  if (row.family !== 4 && row.family !== 6) throw new RangeError(`route family ${String(row.family)} is neither 4 nor 6`);
  if (dest.family !== row.family) throw new RangeError(`route destination ${row.destination} is not IPv${row.family}`);
  if (hop.family !== row.family) throw new RangeError(`route next hop ${row.nextHop} is not IPv${row.family} like ${row.destination}`);
  const o = offset;
  b.writeBigUInt64LE(checkLuid(row.interfaceLuid), o + FORWARD_ROW.interfaceLuid);
  b.writeUInt32LE(checkU32(row.interfaceIndex ?? 0, 'interface index'), o + FORWARD_ROW.interfaceIndex);
  const dp = o + FORWARD_ROW.destinationPrefix;
  b.fill(0, dp, dp + IP_ADDRESS_PREFIX.size);
  writeSockaddr(b, dp + IP_ADDRESS_PREFIX.prefix, dest.ip);
  b.writeUInt8(dest.len, dp + IP_ADDRESS_PREFIX.prefixLength);
  writeSockaddr(b, o + FORWARD_ROW.nextHop, hop);
  b.writeUInt8(0, o + FORWARD_ROW.sitePrefixLength);
  b.writeUInt32LE(INFINITE_LIFETIME, o + FORWARD_ROW.validLifetime);
  b.writeUInt32LE(INFINITE_LIFETIME, o + FORWARD_ROW.preferredLifetime);
  b.writeUInt32LE(checkU32(row.metric, 'route metric'), o + FORWARD_ROW.metric);
  b.writeUInt32LE(checkU32(row.protocol ?? MIB_IPPROTO_NETMGMT, 'route protocol'), o + FORWARD_ROW.protocol);
  b.writeUInt8(0, o + FORWARD_ROW.publish);
  b.writeUInt8(0, o + FORWARD_ROW.immortal);
  return b;
}

/** A fresh zeroed MIB_IPFORWARD_ROW2 holding `row` (tests, and what fillForwardRow writes over zeros). */
export function encodeForwardRow(row: ForwardRowInput): Buffer {
  return fillForwardRow(Buffer.alloc(FORWARD_ROW.size), row);
}

/** The MIB_IPFORWARD_ROW2 at `offset`, with canonical address text. */
export function decodeForwardRow(buf: Uint8Array, offset = 0): IpForwardRow {
  const b = need(buf, offset, FORWARD_ROW.size, 'MIB_IPFORWARD_ROW2');
  const dp = offset + FORWARD_ROW.destinationPrefix;
  const destIp = readSockaddr(b, dp + IP_ADDRESS_PREFIX.prefix);
  const len = b.readUInt8(dp + IP_ADDRESS_PREFIX.prefixLength);
  // prefixOf refuses a length past the family's maximum and masks stray host bits: the text is canonical.
  const dest = prefixOf(destIp, len);
  const hop = readSockaddr(b, offset + FORWARD_ROW.nextHop, destIp.family);
  if (hop.family !== destIp.family) throw new RangeError(`MIB_IPFORWARD_ROW2 at offset ${offset}: next hop family differs from the destination's`);
  return {
    family: destIp.family,
    interfaceLuid: b.readBigUInt64LE(offset + FORWARD_ROW.interfaceLuid),
    interfaceIndex: b.readUInt32LE(offset + FORWARD_ROW.interfaceIndex),
    destination: formatPrefix(dest),
    nextHop: formatIP(hop),
    metric: b.readUInt32LE(offset + FORWARD_ROW.metric),
    protocol: b.readUInt32LE(offset + FORWARD_ROW.protocol),
  };
}

/** The number of rows a MIB_IPFORWARD_TABLE2 says it has, and the bytes the whole table then spans. */
export function forwardTableSize(numEntries: number): number {
  return FORWARD_TABLE.rows + checkU32(numEntries, 'NumEntries') * FORWARD_ROW.size;
}

/** Every row of a MIB_IPFORWARD_TABLE2 copied into `buf` (NumEntries first, rows from offset 8). */
export function decodeForwardTable(buf: Uint8Array): IpForwardRow[] {
  const b = need(buf, 0, FORWARD_TABLE.rows, 'MIB_IPFORWARD_TABLE2');
  const n = b.readUInt32LE(FORWARD_TABLE.numEntries);
  need(b, 0, forwardTableSize(n), `MIB_IPFORWARD_TABLE2 of ${n} rows`);
  const rows: IpForwardRow[] = [];
  for (let i = 0; i < n; i++) rows.push(decodeForwardRow(b, FORWARD_TABLE.rows + i * FORWARD_ROW.size));
  return rows;
}

/** The MIB_IPINTERFACE_ROW fields we use. */
export interface InterfaceRowFields {
  family: Family;
  interfaceLuid: bigint;
  interfaceIndex: number;
  forwardingEnabled: boolean;
  sitePrefixLength: number;
}

/** Name the interface and family for GetIpInterfaceEntry in a row InitializeIpInterfaceEntry prepared. */
export function fillInterfaceKey(buf: Uint8Array, family: Family, luid: bigint): Buffer {
  const b = need(buf, 0, INTERFACE_ROW.size, 'MIB_IPINTERFACE_ROW');
  if (family !== 4 && family !== 6) throw new RangeError(`interface family ${String(family)} is neither 4 nor 6`);
  b.writeUInt16LE(afOf(family), INTERFACE_ROW.family);
  b.writeBigUInt64LE(checkLuid(luid), INTERFACE_ROW.interfaceLuid);
  b.writeUInt32LE(0, INTERFACE_ROW.interfaceIndex); // the LUID names it
  return b;
}

export function decodeInterfaceRow(buf: Uint8Array): InterfaceRowFields {
  const b = need(buf, 0, INTERFACE_ROW.size, 'MIB_IPINTERFACE_ROW');
  return {
    family: familyOfAf(b.readUInt16LE(INTERFACE_ROW.family), 'MIB_IPINTERFACE_ROW'),
    interfaceLuid: b.readBigUInt64LE(INTERFACE_ROW.interfaceLuid),
    interfaceIndex: b.readUInt32LE(INTERFACE_ROW.interfaceIndex),
    forwardingEnabled: b.readUInt8(INTERFACE_ROW.forwardingEnabled) !== 0,
    sitePrefixLength: b.readUInt32LE(INTERFACE_ROW.sitePrefixLength),
  };
}

/**
 * Turn forwarding on or off in a row GetIpInterfaceEntry filled, ready for SetIpInterfaceEntry. For IPv4 the site
 * prefix length must be 0: GetIpInterfaceEntry reads back 64 and SetIpInterfaceEntry refuses that with
 * ERROR_INVALID_PARAMETER.
 */
export function setInterfaceForwarding(buf: Uint8Array, on: boolean): Buffer {
  const b = need(buf, 0, INTERFACE_ROW.size, 'MIB_IPINTERFACE_ROW');
  b.writeUInt8(on ? 1 : 0, INTERFACE_ROW.forwardingEnabled);
  if (b.readUInt16LE(INTERFACE_ROW.family) === AF_INET) b.writeUInt32LE(0, INTERFACE_ROW.sitePrefixLength);
  return b;
}

/** Encode the fields of an interface row into a zeroed buffer (tests; the binding reads real rows). */
export function encodeInterfaceRow(f: InterfaceRowFields): Buffer {
  const b = fillInterfaceKey(Buffer.alloc(INTERFACE_ROW.size), f.family, f.interfaceLuid);
  b.writeUInt32LE(checkU32(f.interfaceIndex, 'interface index'), INTERFACE_ROW.interfaceIndex);
  b.writeUInt8(f.forwardingEnabled ? 1 : 0, INTERFACE_ROW.forwardingEnabled);
  b.writeUInt32LE(checkU32(f.sitePrefixLength, 'site prefix length'), INTERFACE_ROW.sitePrefixLength);
  return b;
}

/** A NET_LUID as the 8 bytes a `const NET_LUID *` points to. */
export function luidBytes(luid: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(checkLuid(luid));
  return b;
}

/** The NUL-terminated UTF-16LE text at the start of `buf` (a WCHAR buffer a call filled). */
export function utf16z(buf: Uint8Array): string {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let end = 0;
  while (end + 1 < b.length && (b[end] !== 0 || b[end + 1] !== 0)) end += 2;
  return b.toString('utf16le', 0, end);
}
