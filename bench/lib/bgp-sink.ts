// A BGP receiver that only counts: accepts one session, answers OPEN/KEEPALIVE, walks each UPDATE just far enough
// to count its IPv4 and MP_REACH prefixes, and throws everything else away. bench/bgp-ingest runs it in a receiver
// namespace to measure how fast the *sender* can push a table (the ceiling every real receiver is measured under).
//
//   node --import tsx bench/lib/bgp-sink.ts --asn N --expect PREFIXES [--port 179]
//
// Prints JSON lines on stdout: {"event":"established","t":ms} then {"event":"done","t":ms,"prefixes":..,
// "updates":..,"bytes":..} once `expect` prefixes arrived (t: wall clock, ms since the epoch, sub-ms).
// The counting walk is hand-written rather than the project's decoder so that the sink costs as little as possible.
import * as net from 'node:net';
import { parseArgs } from 'node:util';
import { Afi, encodeKeepalive, encodeOpen, Safi } from '../../src/bgp/codec/index.ts';

const { values } = parseArgs({
  options: {
    asn: { type: 'string' },
    expect: { type: 'string' },
    port: { type: 'string', default: '179' },
    'router-id': { type: 'string', default: '10.254.254.254' },
    progress: { type: 'boolean', default: false },
  },
});
const asn = Number(values.asn);
const expect = Number(values.expect);
const now = () => performance.timeOrigin + performance.now();
const emit = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const rid = values['router-id']!.split('.').reduce((a, o) => a * 256 + Number(o), 0);

const open = encodeOpen({
  myAs: asn > 0xffff ? 23456 : asn,
  holdTime: 240,
  bgpId: rid,
  capabilities: [
    { kind: 'multiprotocol', afi: Afi.IPV4, safi: Safi.UNICAST },
    { kind: 'multiprotocol', afi: Afi.IPV6, safi: Safi.UNICAST },
    { kind: 'route-refresh' },
    { kind: 'four-octet-as', asn },
  ],
});

/** Number of prefixes in an NLRI field (length octet + ceil(len/8) octets each). */
function countNlri(b: Buffer, off: number, end: number): number {
  let n = 0;
  while (off < end) {
    off += 1 + ((b[off] + 7) >> 3);
    n++;
  }
  return n;
}

/** Prefixes announced by one UPDATE (classic NLRI + MP_REACH_NLRI); m is the whole message. */
function countUpdate(m: Buffer): number {
  let off = 19;
  const wl = m.readUInt16BE(off);
  off += 2 + wl;
  const al = m.readUInt16BE(off);
  off += 2;
  const attrEnd = off + al;
  let n = countNlri(m, attrEnd, m.length);
  while (off < attrEnd) {
    const flags = m[off];
    const type = m[off + 1];
    const ext = flags & 0x10;
    const len = ext ? m.readUInt16BE(off + 2) : m[off + 2];
    const v = off + (ext ? 4 : 3);
    if (type === 14) {
      const nhLen = m[v + 3];
      n += countNlri(m, v + 4 + nhLen + 1, v + len);
    }
    off = v + len;
  }
  return n;
}

let prefixes = 0;
let updates = 0;
let bytes = 0;
let done = false;
const server = net.createServer((sock) => {
  sock.setNoDelay(true);
  let opened = false;
  let established = false;
  let pending: Buffer = Buffer.alloc(0);
  const ka = setInterval(() => sock.write(encodeKeepalive()), 30_000);
  sock.on('close', () => clearInterval(ka));
  sock.on('error', () => {});
  sock.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    const buf = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    let off = 0;
    while (buf.length - off >= 19) {
      const len = buf.readUInt16BE(off + 16);
      if (buf.length - off < len) break;
      const type = buf[off + 18];
      if (type === 2) {
        updates++;
        prefixes += countUpdate(buf.subarray(off, off + len));
      } else if (type === 1 && !opened) {
        opened = true;
        sock.write(open);
        sock.write(encodeKeepalive());
      } else if (type === 4 && opened && !established) {
        established = true;
        emit({ event: 'established', t: now() });
      } else if (type === 3) {
        emit({ event: 'notification', t: now(), code: buf[off + 19], subcode: buf[off + 20] });
      }
      off += len;
    }
    pending = off < buf.length ? Buffer.from(buf.subarray(off)) : Buffer.alloc(0);
    if (!done && prefixes >= expect) {
      done = true;
      emit({ event: 'done', t: now(), prefixes, updates, bytes });
    }
  });
});
if (values.progress) {
  // debugging aid: the arrival curve, 10 points a second
  setInterval(() => emit({ event: 'progress', t: now(), prefixes, updates, bytes }), 100).unref();
}
server.listen(Number(values.port), '0.0.0.0', () => emit({ event: 'listening', t: now() }));
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => process.exit(0));
