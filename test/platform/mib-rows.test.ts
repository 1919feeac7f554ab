// IP Helper's rows as bytes (src/platform/mib-rows.ts): round trips, hand-made rows byte by byte, the offsets
// against netioapi.h (mingw's offsetof values when the stand-in build's layout file is there), and refused input.
import t from 'tap';
import * as layout from '../kit/windows-standin/layout.ts';
import fc from 'fast-check';
import type { IpForwardRow } from '../../src/platform/windows-net-api.ts';
import { formatIP, formatPrefix, IP, prefixOf } from '../../src/net/ip.ts';
import {
  decodeForwardRow, decodeForwardTable, decodeInterfaceRow, encodeForwardRow, encodeInterfaceRow, fillForwardRow,
  fillInterfaceKey, FORWARD_ROW, FORWARD_TABLE, forwardTableSize, INTERFACE_ROW, IP_ADDRESS_PREFIX, luidBytes,
  setInterfaceForwarding, SOCKADDR_INET, utf16z,
} from '../../src/platform/mib-rows.ts';

type T = Parameters<Parameters<typeof t.test>[0]>[0];

/** Same fields and values (bigints included); fast-check's records have no prototype, so no strictSame. */
const same = (a: object, b: object): boolean =>
  JSON.stringify(a, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)) === JSON.stringify({ ...b }, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));

function holds(t: T, prop: fc.IProperty<any>, runs = 500): void {
  const r = fc.check(prop, { numRuns: runs });
  t.notOk(r.failed, r.failed ? `${String(r.errorInstance)}\n${fc.defaultReportMessage(r)}` : `property holds (${r.numRuns} runs)`);
}

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const luid = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const v4 = u32.map((w) => new IP(4, w));
const v6 = fc.tuple(u32, u32, u32, u32).map(([a, b, c, d]) => new IP(6, a, b, c, d));

function rowArb(family: 4 | 6): fc.Arbitrary<IpForwardRow> {
  const ip = family === 4 ? v4 : v6;
  return fc.record({
    family: fc.constant(family),
    interfaceLuid: luid,
    interfaceIndex: u32,
    destination: fc.tuple(ip, fc.integer({ min: 0, max: family === 4 ? 32 : 128 })).map(([a, len]) => formatPrefix(prefixOf(a, len))),
    nextHop: ip.map((a) => formatIP(a)),
    metric: u32,
    protocol: u32,
  });
}

t.test('MIB_IPFORWARD_ROW2 round trips, IPv4 and IPv6', async (t) => {
  for (const family of [4, 6] as const) {
    holds(t, fc.property(rowArb(family), (row) => {
      const buf = encodeForwardRow(row);
      if (buf.length !== 104) return false;
      return same(decodeForwardRow(buf), row);
    }));
  }
});

t.test('a table of mixed rows decodes row by row from offset 8', async (t) => {
  holds(t, fc.property(fc.array(fc.oneof(rowArb(4), rowArb(6)), { maxLength: 12 }), (rows) => {
    const buf = Buffer.alloc(forwardTableSize(rows.length), 0xee); // padding bytes are junk on purpose
    buf.writeUInt32LE(rows.length, 0);
    rows.forEach((r, i) => encodeForwardRow(r).copy(buf, FORWARD_TABLE.rows + i * FORWARD_ROW.size));
    const back = decodeForwardTable(buf);
    return back.length === rows.length && back.every((r, i) => same(r, rows[i]));
  }), 200);
  t.strictSame(decodeForwardTable(Buffer.from([0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd])), [], 'an empty table');
  t.throws(() => decodeForwardTable(Buffer.from([2, 0, 0, 0, 0, 0, 0, 0, ...new Array(104).fill(0)])), /MIB_IPFORWARD_TABLE2 of 2 rows/, 'NumEntries past the bytes');
});

t.test('a hand-made IPv4 route, byte by byte', async (t) => {
  const row: IpForwardRow = {
    family: 4, interfaceLuid: 0x0006_0000_0100_0000n, interfaceIndex: 12, destination: '10.244.1.0/26',
    nextHop: '192.168.1.20', metric: 256, protocol: 3,
  };
  const b = encodeForwardRow(row);
  const want = Buffer.alloc(104);
  want.set([0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x06, 0x00], 0); // NET_LUID little-endian
  want.set([12, 0, 0, 0], 8); // InterfaceIndex
  want.set([2, 0], 12); // DestinationPrefix.Prefix.si_family AF_INET
  want.set([0, 0], 14); // port (network order)
  want.set([10, 244, 1, 0], 16); // sin_addr in network order
  want[40] = 26; // PrefixLength
  want.set([2, 0, 0, 0, 192, 168, 1, 20], 44); // NextHop AF_INET, port 0, address
  want[72] = 0; // SitePrefixLength
  want.set([0xff, 0xff, 0xff, 0xff], 76); // ValidLifetime infinite
  want.set([0xff, 0xff, 0xff, 0xff], 80); // PreferredLifetime infinite
  want.set([0x00, 0x01, 0, 0], 84); // Metric 256
  want.set([3, 0, 0, 0], 88); // Protocol MIB_IPPROTO_NETMGMT
  t.equal(b.toString('hex'), want.toString('hex'));
  t.strictSame(decodeForwardRow(want), row);
});

t.test('a hand-made IPv6 route, byte by byte', async (t) => {
  const b = Buffer.alloc(104);
  b.writeBigUInt64LE(0x0018_0000_0200_0000n, 0);
  b.writeUInt32LE(7, 8);
  b.set([23, 0], 12); // AF_INET6
  b.set([0xfd, 0x00, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 12 + 8); // fd00:10::
  b[40] = 64;
  b.set([23, 0], 44);
  b.set([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 44 + 8); // fe80::1
  b.writeUInt32LE(5, 44 + 24); // scope id of the link-local next hop: read, not kept
  b.writeUInt32LE(100, 84);
  b.writeUInt32LE(2, 88);
  t.strictSame(decodeForwardRow(b), {
    family: 6, interfaceLuid: 0x0018_0000_0200_0000n, interfaceIndex: 7, destination: 'fd00:10::/64', nextHop: 'fe80::1', metric: 100, protocol: 2,
  });
  const enc = encodeForwardRow({ family: 6, interfaceLuid: 0x0018_0000_0200_0000n, interfaceIndex: 7, destination: 'fd00:10::/64', nextHop: 'fe80::1', metric: 100, protocol: 2 });
  t.equal(enc.subarray(12, 44).toString('hex'), b.subarray(12, 44).toString('hex'), 'the destination prefix bytes');
  t.equal(enc.readUInt32LE(44 + 24), 0, 'we write scope id 0');
  t.equal(enc.subarray(44, 68).toString('hex'), b.subarray(44, 68).toString('hex'), 'the next hop up to the scope id');
});

t.test('fill keeps InitializeIpForwardEntry defaults we do not own', async (t) => {
  const b = Buffer.alloc(104, 0x5a);
  fillForwardRow(b, { family: 4, interfaceLuid: 1n, destination: '0.0.0.0/0', nextHop: '10.0.0.1', metric: 0, protocol: 3 });
  t.equal(b[FORWARD_ROW.loopback], 0x5a);
  t.equal(b[FORWARD_ROW.autoconfigureAddress], 0x5a);
  t.equal(b.readUInt32LE(FORWARD_ROW.age), 0x5a5a5a5a);
  t.equal(b.readUInt32LE(FORWARD_ROW.origin), 0x5a5a5a5a);
  t.equal(b[FORWARD_ROW.publish], 0, 'not published');
  t.equal(b[FORWARD_ROW.immortal], 0, 'not immortal');
  t.equal(b.readUInt32LE(FORWARD_ROW.interfaceIndex), 0, 'no index: the LUID names the interface');
  t.equal(b.subarray(12 + 8, 12 + 28).toString('hex'), '00'.repeat(20), 'union tail past sin_addr zeroed');
  t.equal(b[41] + b[42] + b[43], 0, 'prefix padding zeroed');
});

t.test('odd rows read canonically: stray host bits masked, AF_UNSPEC next hop is on-link', async (t) => {
  const b = encodeForwardRow({ family: 4, interfaceLuid: 1n, destination: '10.0.0.0/24', nextHop: '0.0.0.0', metric: 1, protocol: 3 });
  b[16 + 3] = 77; // 10.0.0.77/24
  b.writeUInt16LE(0, 44); // next hop family unset
  t.match(decodeForwardRow(b), { destination: '10.0.0.0/24', nextHop: '0.0.0.0' });
  const v6 = encodeForwardRow({ family: 6, interfaceLuid: 1n, destination: '::/0', nextHop: '::', metric: 1, protocol: 3 });
  v6.writeUInt16LE(0, 44);
  t.match(decodeForwardRow(v6), { destination: '::/0', nextHop: '::', family: 6 });
});

t.test('bad input is refused with a reason', async (t) => {
  const base: IpForwardRow = { family: 4, interfaceLuid: 1n, interfaceIndex: 1, destination: '10.0.0.0/24', nextHop: '10.0.0.1', metric: 1, protocol: 3 };
  t.throws(() => encodeForwardRow({ ...base, destination: '10.0.0.1/24' }), /host bits set/);
  t.throws(() => encodeForwardRow({ ...base, destination: 'fd00::/64' }), /not IPv4/);
  t.throws(() => encodeForwardRow({ ...base, nextHop: 'fd00::1' }), /next hop fd00::1 is not IPv4/);
  t.throws(() => encodeForwardRow({ ...base, nextHop: 'nope' }), /invalid IP address/);
  t.throws(() => encodeForwardRow({ ...base, metric: -1 }), /route metric -1/);
  t.throws(() => encodeForwardRow({ ...base, metric: 2 ** 32 }), /route metric/);
  t.throws(() => encodeForwardRow({ ...base, interfaceLuid: -1n }), /interface LUID/);
  t.throws(() => encodeForwardRow({ ...base, interfaceLuid: 1n << 64n }), /interface LUID/);
  t.throws(() => encodeForwardRow({ ...base, family: 5 as 4 }), /family 5/);
  t.throws(() => fillForwardRow(Buffer.alloc(103), base), /needs 104 bytes/);
  t.throws(() => decodeForwardRow(Buffer.alloc(104)), /address family 0/);
  t.throws(() => decodeForwardRow(Buffer.alloc(200), 97), /needs 104 bytes at offset 97/);
  const longPrefix = encodeForwardRow(base);
  longPrefix[40] = 33;
  t.throws(() => decodeForwardRow(longPrefix), /prefix length 33 out of range/);
  const mixed = encodeForwardRow(base);
  mixed.writeUInt16LE(23, 44);
  t.throws(() => decodeForwardRow(mixed), /next hop family/);
  t.throws(() => decodeInterfaceRow(Buffer.alloc(168)), /address family 0/);
  t.throws(() => fillInterfaceKey(Buffer.alloc(167), 4, 1n), /needs 168 bytes/);
});

t.test('MIB_IPINTERFACE_ROW: key, forwarding switch, IPv4 site prefix length', async (t) => {
  holds(t, fc.property(fc.constantFrom(4 as const, 6 as const), luid, u32, fc.boolean(), u32, (family, l, index, fwd, site) => {
    const f = { family, interfaceLuid: l, interfaceIndex: index, forwardingEnabled: fwd, sitePrefixLength: site };
    const back = decodeInterfaceRow(encodeInterfaceRow(f));
    return back.family === family && back.interfaceLuid === l && back.interfaceIndex === index && back.forwardingEnabled === fwd && back.sitePrefixLength === site;
  }));
  const got = encodeInterfaceRow({ family: 4, interfaceLuid: 0x0006_0000_0100_0000n, interfaceIndex: 9, forwardingEnabled: false, sitePrefixLength: 64 });
  t.equal(got.readUInt16LE(0), 2, 'Family AF_INET at 0');
  t.equal(got.readBigUInt64LE(8), 0x0006_0000_0100_0000n, 'InterfaceLuid at 8');
  t.equal(got.readUInt32LE(16), 9, 'InterfaceIndex at 16');
  setInterfaceForwarding(got, true);
  t.equal(got[41], 1, 'ForwardingEnabled at 41');
  t.equal(got.readUInt32LE(144), 0, 'IPv4: SitePrefixLength 0, or SetIpInterfaceEntry refuses');
  const six = encodeInterfaceRow({ family: 6, interfaceLuid: 1n, interfaceIndex: 9, forwardingEnabled: true, sitePrefixLength: 64 });
  setInterfaceForwarding(six, false);
  t.match(decodeInterfaceRow(six), { forwardingEnabled: false, sitePrefixLength: 64 }, 'IPv6 keeps its site prefix length');
  const init = Buffer.alloc(168, 0x11);
  fillInterfaceKey(init, 6, 5n);
  t.match(decodeInterfaceRow(init), { family: 6, interfaceLuid: 5n, interfaceIndex: 0 });
  t.equal(init[40], 0x11, 'other fields are left as initialised');
});

t.test('small helpers', async (t) => {
  t.equal(luidBytes(0x0102030405060708n).toString('hex'), '0807060504030201');
  t.equal(utf16z(Buffer.from('vEthernet (nat)\0garbage', 'utf16le')), 'vEthernet (nat)');
  t.equal(utf16z(Buffer.from('no terminator', 'utf16le')), 'no terminator');
  t.equal(utf16z(Buffer.alloc(10)), '');
});

t.test('offsets: netioapi.h on x64', async (t) => {
  // Alignment reasoning (and mingw-w64's headers, checked with _Static_assert(offsetof(...))): NET_LUID (8) makes
  // the row 8-aligned; SOCKADDR_INET is 28 bytes, 4-aligned; IP_ADDRESS_PREFIX pads its UINT8 length to 32.
  t.strictSame(
    { ...FORWARD_ROW },
    { size: 104, interfaceLuid: 0, interfaceIndex: 8, destinationPrefix: 12, nextHop: 44, sitePrefixLength: 72, validLifetime: 76,
      preferredLifetime: 80, metric: 84, protocol: 88, loopback: 92, autoconfigureAddress: 93, publish: 94, immortal: 95, age: 96, origin: 100 },
  );
  t.equal(FORWARD_ROW.destinationPrefix + IP_ADDRESS_PREFIX.prefixLength, 40);
  t.equal(SOCKADDR_INET.size, 28);
  t.strictSame({ ...INTERFACE_ROW }, { size: 168, family: 0, interfaceLuid: 8, interfaceIndex: 16, forwardingEnabled: 41, sitePrefixLength: 144 });
  t.equal(FORWARD_TABLE.rows, 8);

  // The stand-in build's record of mingw's offsetof values (test/windows/standin.test.ts checks it against
  // a probe compiled with mingw's netioapi.h).
  const l = layout as unknown as Record<string, { size: number; align: number; fields: Record<string, number> }>;
  const row2 = l.MIB_IPFORWARD_ROW2.fields;
  t.equal(FORWARD_ROW.size, l.MIB_IPFORWARD_ROW2.size, 'MIB_IPFORWARD_ROW2 size (mingw)');
  for (const [ours, theirs] of Object.entries({
    interfaceLuid: 'InterfaceLuid', interfaceIndex: 'InterfaceIndex', destinationPrefix: 'DestinationPrefix', nextHop: 'NextHop',
    sitePrefixLength: 'SitePrefixLength', validLifetime: 'ValidLifetime', preferredLifetime: 'PreferredLifetime', metric: 'Metric',
    protocol: 'Protocol', loopback: 'Loopback', autoconfigureAddress: 'AutoconfigureAddress', publish: 'Publish', immortal: 'Immortal',
    age: 'Age', origin: 'Origin',
  })) {
    t.equal(FORWARD_ROW[ours as keyof typeof FORWARD_ROW], row2[theirs], `MIB_IPFORWARD_ROW2.${theirs} (mingw)`);
  }
  t.equal(FORWARD_ROW.destinationPrefix + IP_ADDRESS_PREFIX.prefixLength, row2['DestinationPrefix.PrefixLength'], 'DestinationPrefix.PrefixLength (mingw)');
  t.equal(IP_ADDRESS_PREFIX.size, l.IP_ADDRESS_PREFIX.size, 'IP_ADDRESS_PREFIX size (mingw)');
  t.equal(SOCKADDR_INET.size, l.SOCKADDR_INET.size, 'SOCKADDR_INET size (mingw)');
  t.equal(SOCKADDR_INET.v6FlowInfo, l.SOCKADDR_IN6.fields.sin6_flowinfo);
  t.equal(SOCKADDR_INET.v6Address, l.SOCKADDR_IN6.fields.sin6_addr);
  t.equal(SOCKADDR_INET.v6ScopeId, l.SOCKADDR_IN6.fields.sin6_scope_id);
  t.equal(SOCKADDR_INET.v4Address, l.SOCKADDR_IN.fields.sin_addr);
  t.equal(FORWARD_TABLE.rows, l.MIB_IPFORWARD_TABLE2.fields.Table, 'MIB_IPFORWARD_TABLE2.Table (mingw)');
  const ifr = l.MIB_IPINTERFACE_ROW;
  t.equal(INTERFACE_ROW.size, ifr.size, 'MIB_IPINTERFACE_ROW size (mingw)');
  for (const [ours, theirs] of Object.entries({
    family: 'Family', interfaceLuid: 'InterfaceLuid', interfaceIndex: 'InterfaceIndex', forwardingEnabled: 'ForwardingEnabled', sitePrefixLength: 'SitePrefixLength',
  })) {
    t.equal(INTERFACE_ROW[ours as keyof typeof INTERFACE_ROW], ifr.fields[theirs], `MIB_IPINTERFACE_ROW.${theirs} (mingw)`);
  }
});
