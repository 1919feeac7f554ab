// Decoding in place: decodeMessageAt reads a message where it lies inside a larger buffer (the socket's chunk), and
// Framer.pushAt hands out where each message lies instead of a view; decodeFramedAt decodes what a Framer handed
// out without checking the header again. Oracles: decodeMessage of the message on its own, and Framer.push (views)
// over the same chunks.
import t from 'tap';
import fc from 'fast-check';
import type { PrefixList } from '../../src/rib/prefixlist.ts';
import { DecodeScratch, Framer, decodeFramedAt, decodeMessage, decodeMessageAt, type DecodeOptions, type DecodeResult } from '../../src/bgp/codec/index.ts';
import { corpus, mutate } from './codec-fuzz-lib.ts';
import { mulberry32 } from '../../src/rib/tablegen.ts';

const list = (l: PrefixList | undefined | null) => (l ? Array.from({ length: l.count }, (_, i) => l.format(i)) : null);

/** Everything a decode says, as one string (taken at once: a scratch's lists are reused by the next decode). */
function canon(r: DecodeResult): string {
  return JSON.stringify(r, (k, v: unknown) => {
    if (v instanceof Uint8Array) return [...v];
    if (v !== null && typeof v === 'object' && 'words' in v && 'lens' in v) return list(v as PrefixList);
    return v;
  });
}

const seeds = corpus(7, 40);
const rnd = mulberry32(11);
const messages = [...seeds, ...Array.from({ length: 400 }, (_, i) => mutate(seeds[i % seeds.length]!, seeds, rnd))];

t.test('property: decodeMessageAt at any offset says what decodeMessage says of the message alone', async (t) => {
  const opts: DecodeOptions[] = [{ fourOctetAs: true }, { fourOctetAs: false, external: true }];
  let n = 0;
  fc.assert(fc.property(fc.nat(messages.length - 1), fc.nat(64), fc.nat(64), fc.nat(1), fc.boolean(), (i, before, after, o, scratch) => {
    const m = messages[i]!;
    const buf = new Uint8Array(before + m.length + after).fill(0xa5);
    buf.set(m, before);
    const a = { ...opts[o]!, ...(scratch ? { scratch: new DecodeScratch() } : {}) };
    const b = { ...opts[o]!, ...(scratch ? { scratch: new DecodeScratch() } : {}) };
    const want = canon(decodeMessage(m, a));
    const got = canon(decodeMessageAt(buf, before, m.length, b));
    n++;
    return got === want;
  }), { seed: 28, numRuns: 1500 });
  t.ok(n >= 1500, `${n} messages compared, valid and mutated`);
});

t.test('property: Framer.pushAt finds the messages Framer.push does, over any chunking', async (t) => {
  const valid = seeds.filter((m) => decodeMessage(m).action !== 'notification');
  t.ok(valid.length > 10, 'enough valid seed messages');
  fc.assert(fc.property(fc.array(fc.nat(valid.length - 1), { minLength: 1, maxLength: 30 }), fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 20 }), (picks, cuts) => {
    const stream = Buffer.concat(picks.map((i) => valid[i]!));
    const chunks: Buffer[] = [];
    for (let off = 0, k = 0; off < stream.length; k++) {
      const len = Math.min(cuts[k % cuts.length]!, stream.length - off);
      chunks.push(stream.subarray(off, off + len));
      off += len;
    }
    const viaViews: string[] = [];
    const viaAt: string[] = [];
    const f1 = new Framer();
    const f2 = new Framer();
    for (const c of chunks) {
      f1.push(c, (m) => viaViews.push(Buffer.from(m).toString('hex')));
      f2.pushAt(c, (b, off, len) => viaAt.push(Buffer.from(b.subarray(off, off + len)).toString('hex')));
    }
    return viaViews.length === picks.length && JSON.stringify(viaAt) === JSON.stringify(viaViews);
  }), { seed: 29, numRuns: 300 });
});

t.test('property: whatever a Framer hands out, decodeFramedAt says of it what decodeMessage says, valid or mutated', async (t) => {
  let framed = 0;
  let refused = 0;
  fc.assert(fc.property(fc.array(fc.nat(messages.length - 1), { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 300 }), fc.boolean(), fc.boolean(), (picks, cut, extendedMessage, scratch) => {
    // Mutated messages among them: a broken header stops the Framer (it is never handed out), a wrong length cuts
    // the stream elsewhere; whatever passes the Framer's check is what decodeFramedAt gets.
    const stream = Buffer.concat(picks.map((i) => messages[i]!));
    const opts = { fourOctetAs: true, extendedMessage };
    const f = new Framer(opts);
    const a = { ...opts, ...(scratch ? { scratch: new DecodeScratch() } : {}) };
    const b = { ...opts, ...(scratch ? { scratch: new DecodeScratch() } : {}) };
    let same = true;
    for (let off = 0; off < stream.length; off += cut) {
      const err = f.pushAt(stream.subarray(off, off + cut), (buf, o, len) => {
        framed++;
        const want = canon(decodeMessage(new Uint8Array(buf.subarray(o, o + len)), a));
        if (canon(decodeFramedAt(buf, o, len, b)) !== want) same = false;
      });
      if (err) {
        refused++;
        t.equal(err.action, 'notification');
        break;
      }
    }
    return same;
  }), { seed: 30, numRuns: 400 });
  t.ok(framed > 1000, `${framed} framed messages compared`);
  t.ok(refused > 0, `${refused} streams stopped by the Framer at a broken header`);
});
