// The NLRI readers (src/bgp/codec/nlri.ts) against a plain oracle: every prefix's words are its first `len` bits
// and nothing else, whatever octets surround the field (the IPv4 reader reads four octets per prefix and masks), and
// a malformed field is refused with the list left as it was.
import t from 'tap';
import fc from 'fast-check';
import { readPrefixes4, readPrefixes6 } from '../../src/bgp/codec/nlri.ts';
import { PrefixList } from '../../src/rib/prefixlist.ts';

/** Word k of the prefix with address octets `bytes` and length `len`: bits past len cleared. */
function oracleWord(bytes: number[], len: number, k: number): number {
  let w = 0;
  for (let bit = 0; bit < 32; bit++) {
    const at = k * 32 + bit;
    if (at >= len) break;
    const octet = bytes[at >> 3] ?? 0;
    if (octet & (0x80 >> (at & 7))) w |= 1 << (31 - bit);
  }
  return w >>> 0;
}

const arbPrefix = (max: number) => fc.integer({ min: 0, max }).chain((len) =>
  fc.array(fc.nat(255), { minLength: (len + 7) >> 3, maxLength: (len + 7) >> 3 }).map((bytes) => ({ len, bytes })));

for (const family of [4, 6] as const) {
  const max = family === 4 ? 32 : 128;
  const read = family === 4 ? readPrefixes4 : readPrefixes6;
  const wpr = family === 4 ? 1 : 4;

  t.test(`IPv${family}: words and lengths as the oracle says, whatever octets lie around the field`, async (t) => {
    fc.assert(fc.property(
      fc.array(arbPrefix(max), { maxLength: 12 }), fc.array(fc.nat(255), { maxLength: 5 }), fc.array(fc.nat(255), { maxLength: 5 }), fc.nat(3),
      (prefixes, before, after, already) => {
        const field = prefixes.flatMap((p) => [p.len, ...p.bytes]);
        const buf = new Uint8Array([...before, ...field, ...after]);
        const list = new PrefixList(family, already + prefixes.length + 1);
        list.count = already; // appended after what the list holds
        if (!read(buf, before.length, before.length + field.length, list)) return false;
        if (list.count !== already + prefixes.length) return false;
        return prefixes.every((p, i) => {
          const n = already + i;
          if (list.lens[n] !== p.len) return false;
          for (let k = 0; k < wpr; k++) if (list.words[n * wpr + k] !== oracleWord(p.bytes, p.len, k)) return false;
          return true;
        });
      }), { numRuns: 2000 });
    t.pass('every prefix read as the oracle reads it');
  });

  t.test(`IPv${family}: a length over ${max} or a prefix running past the field is refused, the list unchanged`, async (t) => {
    fc.assert(fc.property(
      fc.array(arbPrefix(max), { maxLength: 6 }), fc.oneof(fc.integer({ min: max + 1, max: 255 }).map((len) => ({ len, cut: 0 })),
        arbPrefix(max).filter((p) => p.bytes.length > 0).map((p) => ({ len: p.len, cut: p.bytes.length }))),
      fc.array(fc.nat(255), { maxLength: 4 }),
      (good, bad, after) => {
        const field = [...good.flatMap((p) => [p.len, ...p.bytes]), bad.len, ...Array(Math.max(0, bad.cut - 1)).fill(0)];
        const buf = new Uint8Array([...field, ...after]);
        const list = new PrefixList(family, good.length + 2);
        list.count = 1;
        return read(buf, 0, field.length, list) === false && list.count === 1;
      }), { numRuns: 1000 });
    t.pass('refused, and nothing appended');
  });
}
