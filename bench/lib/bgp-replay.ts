// A BGP sender that replays a pre-encoded stream of UPDATEs as fast as TCP takes it: connects to the receiver,
// exchanges OPEN/KEEPALIVE, writes the whole stream in one go, then End-of-RIB for IPv4 and IPv6, and keeps the
// session up (KEEPALIVEs, incoming data discarded) until killed. Sending costs it next to nothing, so a receiver
// is measured against its own limits rather than against the sender's (a BIRD sender tops out near 150k
// prefixes/s on the bench machine).
//
//   node --import tsx bench/lib/bgp-replay.ts --stream FILE --connect ADDR --local ADDR --asn N --peer-asn N
//                                           --nh4 ADDR --nh6 ADDR
//
// The stream file holds UPDATE messages back to back (at most 4096 octets each, 4-octet AS_PATHs, IPv6 in
// MP_REACH_NLRI); its NEXT_HOP and MP_REACH_NLRI next hops are rewritten to --nh4 / --nh6 before connecting, so one
// file serves every link. Prints JSON lines: {"event":"established","t":ms}, {"event":"sent","t":ms} (the last
// octet handed to the kernel), {"event":"notification",...} / {"event":"closed",...}; t is the wall clock in ms.
import * as net from 'node:net';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Afi, encodeEndOfRib, encodeKeepalive, encodeOpen, Safi } from '../../src/bgp/codec/index.ts';
import { parseIP } from '../../src/net/ip.ts';

const { values } = parseArgs({
  options: {
    stream: { type: 'string' },
    connect: { type: 'string' },
    local: { type: 'string' },
    port: { type: 'string', default: '179' },
    asn: { type: 'string' },
    'peer-asn': { type: 'string' },
    nh4: { type: 'string' },
    nh6: { type: 'string' },
  },
});
const now = () => performance.timeOrigin + performance.now();
const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const asn = Number(values.asn);
const local = parseIP(values.local!);

// ---- the stream, with this link's next hops ----------------------------------------------------------------

const stream = readFileSync(values.stream!);
const nh4 = parseIP(values.nh4!);
const nh6 = parseIP(values.nh6!);
const nh6Bytes = Buffer.alloc(16);
[nh6.w0, nh6.w1, nh6.w2, nh6.w3].forEach((w, i) => nh6Bytes.writeUInt32BE(w >>> 0, i * 4));
let messages = 0;
for (let off = 0; off < stream.length;) {
  const len = stream.readUInt16BE(off + 16);
  const wl = stream.readUInt16BE(off + 19);
  let a = off + 21 + wl;
  const attrEnd = a + 2 + stream.readUInt16BE(a);
  a += 2;
  while (a < attrEnd) {
    const flags = stream[a];
    const type = stream[a + 1];
    const ext = flags & 0x10;
    const alen = ext ? stream.readUInt16BE(a + 2) : stream[a + 2];
    const v = a + (ext ? 4 : 3);
    if (type === 3) stream.writeUInt32BE(nh4.w0 >>> 0, v);
    else if (type === 14 && stream.readUInt16BE(v) === Afi.IPV6 && stream[v + 3] === 16) nh6Bytes.copy(stream, v + 4);
    a = v + alen;
  }
  off += len;
  messages++;
}

// ---- the session -------------------------------------------------------------------------------------------

const open = encodeOpen({
  myAs: asn > 0xffff ? 23456 : asn,
  holdTime: 240,
  bgpId: local.w0 >>> 0,
  capabilities: [
    { kind: 'multiprotocol', afi: Afi.IPV4, safi: Safi.UNICAST },
    { kind: 'multiprotocol', afi: Afi.IPV6, safi: Safi.UNICAST },
    { kind: 'route-refresh' },
    { kind: 'four-octet-as', asn },
  ],
});

function connect(): void {
  const sock = net.connect({ host: values.connect!, port: Number(values.port), localAddress: values.local! });
  let opened = false;
  let established = false;
  let pending = Buffer.alloc(0);
  let ka: NodeJS.Timeout | null = null;
  sock.on('connect', () => sock.write(open));
  sock.on('error', (e) => emit({ event: 'error', t: now(), message: e.message }));
  sock.on('close', () => {
    if (ka) clearInterval(ka);
    emit({ event: 'closed', t: now(), established });
    // A receiver that refused us (not listening yet, or reset): try again; the bench kills us when done.
    if (!established) setTimeout(connect, 500);
  });
  sock.on('data', (chunk: Buffer) => {
    const buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let off = 0;
    while (buf.length - off >= 19) {
      const len = buf.readUInt16BE(off + 16);
      if (buf.length - off < len) break;
      const type = buf[off + 18];
      if (type === 1 && !opened) {
        opened = true;
        sock.write(encodeKeepalive());
      } else if (type === 4 && opened && !established) {
        established = true;
        emit({ event: 'established', t: now(), messages, bytes: stream.length });
        ka = setInterval(() => sock.write(encodeKeepalive()), 30_000);
        sock.write(stream);
        sock.write(encodeEndOfRib(Afi.IPV4, Safi.UNICAST));
        sock.write(encodeEndOfRib(Afi.IPV6, Safi.UNICAST), () => emit({ event: 'sent', t: now() }));
      } else if (type === 3) {
        emit({ event: 'notification', t: now(), code: buf[off + 19], subcode: buf[off + 20] });
      }
      off += len;
    }
    pending = off < buf.length ? Buffer.from(buf.subarray(off)) : Buffer.alloc(0);
  });
}

connect();
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => process.exit(0));
