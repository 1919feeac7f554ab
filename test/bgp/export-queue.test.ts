// The export queue and the UPDATE packer (src/bgp/export-queue.ts, src/bgp/codec/updates.ts): whatever is queued,
// whenever the socket fills or drains, the peer ends with the latest state of every prefix; packed buffers hold
// whole messages that our decoder reads back as the same routes and attributes.
import { deepStrictEqual } from 'node:assert';
import t from 'tap';
import fc from 'fast-check';
import { IP, parseIP, parsePrefix, prefixOf, type Prefix } from '../../src/net/ip.ts';
import { asSequence, attrsEqual, makeAttrs, type PathAttrs } from '../../src/rib/attrs.ts';
import {
  Framer, UpdatePacker, cachedPathAttributes, decodeMessage, encodePathAttributes, prefixesOf, type UpdateMessage,
} from '../../src/bgp/codec/index.ts';
import { ExportQueue, PACK_BYTES, type ExportSession, type PumpHooks } from '../../src/bgp/export-queue.ts';
import type { AddressFamily } from '../../src/config/types.ts';
import { attrs4, attrs6, prefix4, prefix6 } from './codec-helpers.ts';

interface Decoded {
  attrs: PathAttrs | null;
  announce: string[];
  withdraw: string[];
  eor: boolean;
}

/** Every message in a byte stream, decoded (throws on a malformed or partial one). */
function decodeAll(bufs: readonly Buffer[], opts: { fourOctetAs?: boolean; extendedMessage?: boolean } = {}): Decoded[] {
  const f = new Framer(opts);
  const out: Decoded[] = [];
  for (const b of bufs) {
    const err = f.push(b, (m) => {
      const r = decodeMessage(m, opts);
      if (r.action !== 'ok' || r.message.type !== 'update') throw new Error(`not a good UPDATE: ${r.action}`);
      const u = r.message as UpdateMessage;
      const announce = prefixesOf(u.nlri).map(String);
      const withdraw = prefixesOf(u.withdrawn).map(String);
      if (u.mpReach) announce.push(...prefixesOf(u.mpReach.nlri).map(String));
      if (u.mpUnreach) withdraw.push(...prefixesOf(u.mpUnreach.withdrawn).map(String));
      out.push({ attrs: u.attrs, announce, withdraw, eor: announce.length === 0 && withdraw.length === 0 });
    });
    if (err) throw new Error(`framing: ${JSON.stringify(err)}`);
  }
  return out;
}

// ---- the packer ---------------------------------------------------------------------------------------------

t.test('UpdatePacker: announces and withdrawals packed back to back decode to the same routes, in order', async (t) => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('a4' as const), attrs: attrs4(true), prefixes: fc.array(prefix4, { maxLength: 1200 }) }),
    fc.record({ kind: fc.constant('a6' as const), attrs: attrs6(true), prefixes: fc.array(prefix6, { maxLength: 400 }) }),
    fc.record({ kind: fc.constant('w' as const), prefixes: fc.array(fc.oneof(prefix4, prefix6), { maxLength: 1200 }) }),
  );
  fc.assert(
    fc.property(fc.boolean(), fc.array(op, { minLength: 1, maxLength: 6 }), (ext, ops) => {
      const opts = { fourOctetAs: true, extendedMessage: ext };
      const k = new UpdatePacker(64);
      for (const o of ops) {
        if (o.kind === 'w') k.withdraw(o.prefixes, opts);
        else k.announce(o.attrs, o.prefixes, opts);
      }
      const messages = k.messages;
      const buf = k.take();
      if (k.bytes !== 0 || k.messages !== 0) throw new Error('take() must empty the packer');
      const got = decodeAll([buf], opts);
      if (got.length !== messages) throw new Error(`${got.length} messages decoded, ${messages} counted`);
      // The same routes in the same order (a withdrawal's IPv4 prefixes before its IPv6 ones), each announce with
      // its attributes.
      const want: [string, PathAttrs | null][] = [];
      for (const o of ops) {
        if (o.kind !== 'w') for (const p of o.prefixes) want.push([String(p), o.attrs]);
        else for (const f of [4, 6]) for (const p of o.prefixes) if (p.family === f) want.push([`-${p}`, null]);
      }
      const have: [string, PathAttrs | null][] = [];
      for (const m of got) {
        for (const p of m.withdraw) have.push([`-${p}`, null]);
        for (const p of m.announce) have.push([p, m.attrs]);
      }
      deepStrictEqual(have.map((x) => x[0]), want.map((x) => x[0]));
      have.forEach(([k, a], i) => {
        const w = want[i][1];
        if (w !== null && !attrsEqual(a!, w)) throw new Error(`${k}: attributes differ`);
      });
    }),
    { numRuns: 30 },
  );
  t.pass('round trip');
});

t.test('cachedPathAttributes: the same bytes as encodePathAttributes, one encoding per record and options', async (t) => {
  fc.assert(
    fc.property(fc.boolean(), fc.boolean(), fc.boolean().chain((f) => attrs4(f)), (four, nh, a) => {
      const opts = { fourOctetAs: four };
      const x = cachedPathAttributes(a, opts, nh);
      if (!Buffer.from(x).equals(Buffer.from(encodePathAttributes(a, opts, nh)))) throw new Error('bytes differ');
      if (cachedPathAttributes(a, opts, nh) !== x) throw new Error('not cached');
    }),
    { numRuns: 100 },
  );
  t.pass('cached');
});

t.test('UpdatePacker: a call that throws leaves what was packed before it, and nothing of its own', async (t) => {
  const k = new UpdatePacker(64);
  const a = makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1') });
  k.announce(a, [parsePrefix('10.1.0.0/16')]);
  const before = k.bytes;
  t.throws(() => k.announce(a, [parsePrefix('2001:db8::/32')]), /IPv6 NLRI need an IPv6 next hop/);
  t.equal(k.bytes, before);
  t.equal(k.messages, 1);
  t.same(decodeAll([k.take()]).map((m) => m.announce), [['10.1.0.0/16']]);
});

// ---- the queue ----------------------------------------------------------------------------------------------

/** A session double: `writable` as the test says, every write kept, drain callbacks fired on demand. */
class FakeSession implements ExportSession {
  writable = true;
  writes: { buf: Buffer; updates: number }[] = [];
  bytes: Buffer[] = [];
  eors: AddressFamily[] = [];
  drains: (() => void)[] = [];
  sendPacked(buf: Buffer, updates: number): void {
    this.writes.push({ buf, updates });
    this.bytes.push(buf);
  }
  sendEndOfRib(family: AddressFamily): void {
    this.eors.push(family);
    // Kept in the stream so its place can be checked: an empty IPv4 UPDATE.
    const b = Buffer.alloc(23, 0xff);
    b.writeUInt16BE(23, 16);
    b[18] = 2;
    b.fill(0, 19);
    this.bytes.push(b);
  }
  onDrain(fn: () => void): void {
    this.drains.push(fn);
  }
  drain(): void {
    const d = this.drains;
    this.drains = [];
    for (const f of d) f();
  }
}

function harness() {
  const s = new FakeSession();
  const q = new ExportQueue();
  const errors: string[] = [];
  const hooks: PumpHooks = { error: (m) => errors.push(m), endOfRibSent: () => {}, resume: () => q.pump(s, {}, hooks) };
  return { s, q, errors, pump: () => q.pump(s, {}, hooks) };
}

const A = makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('10.0.0.1') });
const B = makeAttrs({ asPath: [asSequence(65002)], nextHop: parseIP('10.0.0.1') });
const P = (s: string) => parsePrefix(s);

/** The peer's table after applying the decoded stream in order: prefix -> attrs. */
function peerTable(ms: readonly Decoded[]): Map<string, PathAttrs> {
  const table = new Map<string, PathAttrs>();
  for (const m of ms) {
    for (const p of m.withdraw) table.delete(p);
    for (const p of m.announce) table.set(p, m.attrs!);
  }
  return table;
}

t.test('a queue that waits for drain: a later withdraw of a queued prefix wins, a later announce joins its bucket', async (t) => {
  const { s, q, pump } = harness();
  s.writable = false;
  q.push({ announce: new Map([[A, [P('10.1.0.0/16'), P('10.2.0.0/16')]]]), withdraw: [] });
  pump();
  t.equal(s.writes.length, 0, 'nothing written while the socket is full');
  q.push({ announce: new Map(), withdraw: [P('10.1.0.0/16')] });
  q.push({ announce: new Map([[B, [P('10.2.0.0/16')]]]), withdraw: [] });
  q.push({ announce: new Map([[A, [P('10.3.0.0/16')]]]), withdraw: [] });
  pump();
  t.equal(s.drains.length, 1, 'one drain wait, however often the pump is called');
  s.writable = true;
  s.drain();
  const ms = decodeAll(s.bytes);
  const table = peerTable(ms);
  t.same([...table.keys()].sort(), ['10.2.0.0/16', '10.3.0.0/16']);
  t.ok(attrsEqual(table.get('10.2.0.0/16')!, B), 'the re-announce with B won over the queued A');
  t.ok(attrsEqual(table.get('10.3.0.0/16')!, A));
  t.same(ms.map((m) => [m.announce, m.withdraw]), [[['10.3.0.0/16'], []], [[], ['10.1.0.0/16']], [['10.2.0.0/16'], []]],
    'A bucket (10.1 and the first 10.2 skipped as superseded, 10.3 joined), then the withdraw, then B');
  t.equal(s.writes.length, 1, 'all of it in one write');
  t.equal(s.writes[0].updates, 3);
  t.equal(q.length, 0);
});

t.test('a queue that keeps up: each push is written as it comes, in order, re-announce after withdraw wins', async (t) => {
  const { s, q, pump } = harness();
  q.push({ announce: new Map([[A, [P('10.1.0.0/16')]], [B, [P('10.2.0.0/16')]]]), withdraw: [] });
  pump();
  q.push({ announce: new Map(), withdraw: [P('10.1.0.0/16')] });
  pump();
  q.push({ announce: new Map([[B, [P('10.1.0.0/16')]]]), withdraw: [] });
  pump();
  t.equal(s.writes.length, 3, 'one write per pump');
  t.same(s.writes.map((w) => w.updates), [2, 1, 1]);
  const table = peerTable(decodeAll(s.bytes));
  t.ok(attrsEqual(table.get('10.1.0.0/16')!, B));
  t.ok(attrsEqual(table.get('10.2.0.0/16')!, B));
});

t.test('End-of-RIB follows everything queued before it; the RIB\'s arrays are never modified', async (t) => {
  const { s, q, pump } = harness();
  s.writable = false;
  const shared = [P('10.1.0.0/16')];
  q.push({ announce: new Map([[A, shared]]), withdraw: [] });
  q.pushEndOfRib('ipv4');
  pump();
  q.push({ announce: new Map([[A, [P('10.9.0.0/16')]]]), withdraw: [] });
  s.writable = true;
  s.drain();
  t.same(shared.map(String), ['10.1.0.0/16'], 'the pushed array is untouched (a copy took the join)');
  const ms = decodeAll(s.bytes);
  t.same(ms.map((m) => (m.eor ? 'eor' : m.announce.join(','))), ['10.1.0.0/16,10.9.0.0/16', 'eor']);
  t.same(s.eors, ['ipv4']);
});

t.test('bytes encoded ahead of the socket stay bounded: one write is at most PACK_BYTES and a message', async (t) => {
  const { s, q, pump } = harness();
  const many = Array.from({ length: 60000 }, (_, i) => prefixOf(new IP(4, (0x0a000000 + (i << 8)) >>> 0), 24));
  q.push({ announce: new Map([[A, many]]), withdraw: [] });
  // The socket takes two writes, then is full.
  let n = 0;
  Object.defineProperty(s, 'writable', { get: () => n < 2 });
  const orig = s.sendPacked.bind(s);
  s.sendPacked = (b, u) => {
    n++;
    orig(b, u);
  };
  pump();
  t.equal(s.writes.length, 2, 'stopped when the socket was full');
  t.ok(s.writes.every((w) => w.buf.length <= PACK_BYTES + 4096), 'each write bounded');
  t.ok(q.pendingPrefixes() > 0, 'the rest waits in the queue, not in buffers');
  n = -1000;
  s.drain();
  const got = decodeAll(s.bytes).flatMap((m) => m.announce);
  t.equal(got.length, many.length, 'every prefix once after the drain');
});

t.test('property: after any interleaving of pushes, full sockets and drains, the peer holds the latest state', async (t) => {
  const v4 = Array.from({ length: 6 }, (_, i) => P(`10.${i}.0.0/16`));
  const v6 = Array.from({ length: 3 }, (_, i) => P(`2001:db8:${i}::/48`));
  const attrsPool4 = [A, B, makeAttrs({ asPath: [asSequence(65003, 65004)], nextHop: parseIP('10.0.0.2'), med: 5 })];
  const attrsPool6 = [makeAttrs({ asPath: [asSequence(65001)], nextHop: parseIP('2001:db8::1') }), makeAttrs({ asPath: [asSequence(65005)], nextHop: parseIP('2001:db8::2') })];
  const op = fc.oneof(
    fc.record({ k: fc.constant('push' as const), ann: fc.array(fc.tuple(fc.nat(2), fc.subarray(v4)), { maxLength: 3 }), ann6: fc.array(fc.tuple(fc.nat(1), fc.subarray(v6)), { maxLength: 2 }), wd: fc.subarray([...v4, ...v6]) }),
    fc.record({ k: fc.constant('full' as const), on: fc.boolean() }),
    fc.record({ k: fc.constant('drain' as const) }),
    fc.record({ k: fc.constant('pump' as const) }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
      const { s, q, pump, errors } = harness();
      const oracle = new Map<string, PathAttrs | null>();
      for (const o of ops) {
        if (o.k === 'full') s.writable = !o.on;
        else if (o.k === 'drain') s.drain();
        else if (o.k === 'pump') pump();
        else {
          // One ExportUpdate: a prefix appears once in it (the RIB's contract): the last mention wins here.
          const state = new Map<string, { p: Prefix; a: PathAttrs | null }>();
          for (const p of o.wd) state.set(String(p), { p, a: null });
          for (const [i, ps] of o.ann) for (const p of ps) state.set(String(p), { p, a: attrsPool4[i] });
          for (const [i, ps] of o.ann6) for (const p of ps) state.set(String(p), { p, a: attrsPool6[i] });
          const announce = new Map<PathAttrs, Prefix[]>();
          const withdraw: Prefix[] = [];
          for (const [k, { p, a }] of state) {
            oracle.set(k, a);
            if (a === null) withdraw.push(p);
            else announce.set(a, [...(announce.get(a) ?? []), p]);
          }
          q.push({ announce, withdraw });
        }
      }
      s.writable = true;
      s.drain();
      pump();
      if (errors.length) throw new Error(errors.join('; '));
      if (q.length !== 0) throw new Error('queue not empty after the final drain');
      const table = peerTable(decodeAll(s.bytes));
      for (const [k, a] of oracle) {
        const got = table.get(k);
        if (a === null ? got !== undefined : got === undefined || !attrsEqual(got, a)) throw new Error(`${k}: want ${a ? 'announced' : 'withdrawn'}`);
      }
      for (const k of table.keys()) if (!oracle.has(k)) throw new Error(`${k} never queued`);
    }),
    { numRuns: 300 },
  );
  t.pass('latest state everywhere');
});
