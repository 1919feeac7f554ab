// bench/export-pump: the export side of the bgperf shape in one process, steady enough for an A/B on a busy machine.
//
//   npm run bench:export-pump -- [--peers 99] [--senders 100] [--prefixes 100] [--per-flush 10] [--rounds 3]
//                                [--pump-every N]
//
// 99 real TCP connections on loopback (a server reads and drops everything). 100 senders x 100 /24s reach the RIB
// in flushes of --per-flush prefixes (senders interleaved, as BIRD's one-prefix UPDATEs from 100 sessions arrive),
// and every flush is exported to every peer, each with its own attribute record per sender (next hop = our address
// on that session, AS path = ours + the sender's), as the RIB's export cache hands them out. Two ways, alternated:
//   per-update  the way before the export queue: the attribute block encoded per UPDATE (encodeUpdate), one
//               socket.write per UPDATE, corked per tick
//   packed      src/bgp/export-queue.ts: attribute blocks cached per record, one write per pump step
// CPU = process.cpuUsage() from the first flush until the server has every byte. Prints medians, then one JSON line.
import { createServer, connect, type Socket } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { encodeUpdate } from '../src/bgp/codec/index.ts';
import { ExportQueue, type ExportSession } from '../src/bgp/export-queue.ts';
import { IP, prefixOf, type Prefix } from '../src/net/ip.ts';
import { asSequence, makeAttrs, type PathAttrs } from '../src/rib/attrs.ts';
import { AttrInterner } from '../src/rib/interner.ts';

const { values: o } = parseArgs({
  options: {
    peers: { type: 'string', default: '99' },
    senders: { type: 'string', default: '100' },
    prefixes: { type: 'string', default: '100' },
    'per-flush': { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    'pump-every': { type: 'string', default: '1' },
  },
});
const PEERS = Number(o.peers);
const SENDERS = Number(o.senders);
const PREFIXES = Number(o.prefixes);
const PER_FLUSH = Number(o['per-flush']);
const ROUNDS = Number(o.rounds);
/** Packed way only: pump every Nth flush (what an export delay spanning N flushes would do); 1 = every flush. */
const PUMP_EVERY = Number(o['pump-every']);

/** A socket with the session's write discipline: cork for the rest of the tick, count messages and writes. */
class Out implements ExportSession {
  corked = false;
  writes = 0;
  messages = 0;
  constructor(readonly s: Socket) {}
  get writable(): boolean {
    return this.s.writableLength < 64 * 1024;
  }
  write(b: Buffer, messages: number): void {
    if (!this.corked) {
      this.corked = true;
      this.s.cork();
      process.nextTick(() => {
        this.corked = false;
        this.s.uncork();
      });
    }
    this.writes++;
    this.messages += messages;
    this.s.write(b);
  }
  sendPacked(buf: Buffer, updates: number): void {
    this.write(buf, updates);
  }
  sendEndOfRib(): void {}
  onDrain(fn: () => void): void {
    this.s.once('drain', fn);
  }
}

async function connections(n: number): Promise<{ outs: Out[]; received: () => number; close: () => Promise<void> }> {
  let got = 0;
  const server = createServer((c) => c.on('data', (d) => (got += d.length)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const socks = await Promise.all(Array.from({ length: n }, () => new Promise<Socket>((r) => {
    const s = connect(port, '127.0.0.1', () => r(s));
    s.setNoDelay(true);
  })));
  return {
    outs: socks.map((s) => new Out(s)),
    received: () => got,
    close: async () => {
      for (const s of socks) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// The workload: flushes of [sender, prefix] and, per peer and sender, the attribute record sent.
const interner = new AttrInterner();
const attrsFor: PathAttrs[][] = Array.from({ length: PEERS }, (_, p) => Array.from({ length: SENDERS }, (_, s) =>
  interner.intern(makeAttrs({ asPath: [asSequence(65010, 64512 + s)], nextHop: new IP(4, (0x0a640000 + p + 1) >>> 0) }))));
const routes: [number, Prefix][] = [];
for (let i = 0; i < PREFIXES; i++) for (let s = 0; s < SENDERS; s++) routes.push([s, prefixOf(new IP(4, (0x14000000 + ((s * PREFIXES + i) << 8)) >>> 0), 24)]);
const flushes: [number, Prefix][][] = [];
for (let i = 0; i < routes.length; i += PER_FLUSH) flushes.push(routes.slice(i, i + PER_FLUSH));

/** One flush's ExportUpdate for one peer: announcements grouped by attribute record, as Rib.exportChanges does. */
function exportFor(peer: number, flush: [number, Prefix][]): Map<PathAttrs, Prefix[]> {
  const m = new Map<PathAttrs, Prefix[]>();
  for (const [s, p] of flush) {
    const a = attrsFor[peer][s];
    const l = m.get(a);
    if (l) l.push(p);
    else m.set(a, [p]);
  }
  return m;
}

type Mode = 'per-update' | 'packed';

async function run(mode: Mode): Promise<{ cpuMs: number; wallMs: number; writes: number; messages: number; bytes: number }> {
  const c = await connections(PEERS);
  const queues = c.outs.map(() => new ExportQueue());
  const opts = { fourOctetAs: true };
  const t0 = process.cpuUsage();
  const w0 = performance.now();
  for (let fi = 0; fi < flushes.length; fi++) {
    const f = flushes[fi];
    await new Promise((r) => setImmediate(r));
    const pumpNow = fi % PUMP_EVERY === PUMP_EVERY - 1 || fi === flushes.length - 1;
    for (let p = 0; p < PEERS; p++) {
      const u = exportFor(p, f);
      const out = c.outs[p];
      if (mode === 'per-update') {
        for (const [a, ps] of u) {
          out.write(encodeUpdate({ attrs: a, nlri: ps }, opts), 1);
        }
      } else {
        const q = queues[p];
        q.push({ announce: u, withdraw: [] });
        const hooks = { error: (m: string) => { throw new Error(m); }, endOfRibSent: () => {}, resume: () => q.pump(out, opts, hooks) };
        if (pumpNow) q.pump(out, opts, hooks);
      }
    }
  }
  // Everything handed to the sockets, then wait until the server has it all.
  const want = () => c.outs.reduce((n, x) => n + x.s.bytesWritten, 0);
  for (;;) {
    await new Promise((r) => setTimeout(r, 5));
    const pending = queues.some((q) => q.length > 0) || c.outs.some((x) => x.s.writableLength > 0);
    if (!pending && c.received() >= want()) break;
  }
  const cpu = process.cpuUsage(t0);
  const wallMs = performance.now() - w0;
  const r = {
    cpuMs: (cpu.user + cpu.system) / 1000, wallMs, writes: c.outs.reduce((n, x) => n + x.writes, 0),
    messages: c.outs.reduce((n, x) => n + x.messages, 0), bytes: c.received(),
  };
  await c.close();
  return r;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results: Record<Mode, Awaited<ReturnType<typeof run>>[]> = { 'per-update': [], packed: [] };
const load0 = loadavg().map((x) => Math.round(x * 10) / 10);
await run('packed'); // warm-up (JIT), not counted
await run('per-update');
for (let i = 0; i < ROUNDS; i++) {
  for (const m of ['per-update', 'packed'] as Mode[]) results[m].push(await run(m));
}
const summary: Record<string, unknown> = {};
for (const m of ['per-update', 'packed'] as Mode[]) {
  const rs = results[m];
  const s = { cpuMs: median(rs.map((r) => r.cpuMs)), wallMs: median(rs.map((r) => r.wallMs)), writes: rs[0].writes, messages: rs[0].messages, bytes: rs[0].bytes, cpuRuns: rs.map((r) => Math.round(r.cpuMs)) };
  summary[m] = s;
  console.log(`${m.padEnd(10)}  CPU ${s.cpuMs.toFixed(0)} ms (runs ${s.cpuRuns.join(', ')})  wall ${s.wallMs.toFixed(0)} ms  ${s.writes} writes, ${s.messages} UPDATEs, ${s.bytes} bytes`);
}
const a = summary['per-update'] as { cpuMs: number };
const b = summary.packed as { cpuMs: number };
console.log(`packed / per-update CPU: ${(b.cpuMs / a.cpuMs).toFixed(2)}x  (${PEERS} peers, ${SENDERS} x ${PREFIXES} prefixes, ${PER_FLUSH} per flush, packed pumps every ${PUMP_EVERY}; load ${load0.join(' ')})`);
console.log(JSON.stringify({ bench: 'export-pump', date: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version, loadStart: load0, loadEnd: loadavg().map((x) => Math.round(x * 10) / 10) }, peers: PEERS, senders: SENDERS, prefixes: PREFIXES, perFlush: PER_FLUSH, pumpEvery: PUMP_EVERY, rounds: ROUNDS, ...summary, cpuRatio: b.cpuMs / a.cpuMs }));
