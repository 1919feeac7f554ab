// Table reading: the fast byte parser agrees with the ipaddr.js-based parser in src/net/ip.ts, line handling.
import t from 'tap';
import fc from 'fast-check';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { formatIP, parseIP, parsePrefix } from '../../src/net/ip.ts';
import { fastParseIP, fastParsePrefix, parseIPFast, parsePrefixFast, readPrefixFile, readPrefixStream } from '../../src/rib/tableio.ts';

// ---- address-like text: valid forms in many spellings, then mutated ---------------------------------------------

const octet = fc.oneof(fc.integer({ min: 0, max: 255 }).map(String), fc.constantFrom('00', '01', '256', '999', '1000', '', 'a'));
const v4Text = fc.tuple(octet, octet, octet, octet).map((o) => o.join('.'));
const hexGroup = fc.oneof(
  fc.integer({ min: 0, max: 0xffff }).map((v) => v.toString(16)),
  fc.integer({ min: 0, max: 0xffff }).map((v) => v.toString(16).toUpperCase().padStart(4, '0')),
  fc.constantFrom('0', '00000', 'g', '', '12345'),
);
const v6Text = fc.oneof(
  fc.array(hexGroup, { minLength: 8, maxLength: 8 }).map((g) => g.join(':')),
  // With a "::" somewhere.
  fc.tuple(fc.array(hexGroup, { maxLength: 8 }), fc.array(hexGroup, { maxLength: 8 })).map(([a, b]) => `${a.join(':')}::${b.join(':')}`),
  // Embedded IPv4.
  fc.tuple(fc.array(hexGroup, { maxLength: 6 }), v4Text).map(([a, v]) => `${a.join(':')}::${v}`),
  fc.tuple(fc.array(hexGroup, { minLength: 6, maxLength: 6 }), v4Text).map(([a, v]) => `${a.join(':')}:${v}`),
  fc.constantFrom('::', '::1', '1::', ':1', '1:', ':::', '1:::2', '::ffff:1.2.3.4', 'fe80::1%eth0'),
);
// Real-looking ones (from actual words) so that valid inputs are common.
const realV6 = fc.tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.constantFrom(0, 1, 0xffff), fc.constantFrom(0, 5)).map(([a, b, c]) =>
  formatIP({ family: 6, w0: a, w1: b, w2: 0, w3: c }));
const realV4 = fc.integer({ min: 0, max: 0xffffffff }).map((a) => formatIP({ family: 4, w0: a, w1: 0, w2: 0, w3: 0 }));
const addrText = fc.oneof(v4Text, v6Text, realV4, realV6);
const lenText = fc.oneof(fc.integer({ min: 0, max: 130 }).map(String), fc.constantFrom('', '024', '0008', 'x', '-1', ' 8', '8 '));

function mutate(s: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(s) },
    { weight: 1, arbitrary: fc.tuple(fc.nat(s.length), fc.constantFrom(' ', '.', ':', '/', 'x', '0', 'é', '\t')).map(([i, c]) => s.slice(0, i) + c + s.slice(i)) },
    { weight: 1, arbitrary: fc.nat(Math.max(0, s.length - 1)).map((i) => s.slice(0, i) + s.slice(i + 1)) },
  );
}

// A prefix text: either the network of a random address (so host bits are clear) or anything.
const prefixText = fc.oneof(
  fc.tuple(addrText, lenText).map(([a, l]) => `${a}/${l}`),
  fc.tuple(fc.oneof(realV4, realV6), fc.integer({ min: 0, max: 128 })).map(([a, l]) => {
    try {
      const ip = parseIP(a);
      const len = Math.min(l, ip.family === 4 ? 32 : 128);
      return parsePrefix(`${a}/${len}`).toString(); // throws when host bits are set: fall back below
    } catch {
      return `${a}/${l}`;
    }
  }),
).chain(mutate);

function outcome(f: () => { toString(): string }): string {
  try {
    return `ok ${f().toString()} ${JSON.stringify(f())}`;
  } catch (e) {
    return `error ${(e as Error).message}`;
  }
}

t.test('parsePrefixFast accepts and refuses exactly what parsePrefix does', async (t) => {
  let fastHits = 0;
  const out = new Uint32Array(5);
  fc.assert(
    fc.property(prefixText, (s) => {
      const buf = Buffer.from(s);
      const fam = fastParsePrefix(buf, 0, buf.length, out);
      const slow = outcome(() => parsePrefix(s));
      if (fam !== 0) {
        fastHits++;
        if (!slow.startsWith('ok')) throw new Error(`fast path accepted "${s}", parsePrefix: ${slow}`);
      }
      const fast = outcome(() => parsePrefixFast(s));
      if (fast !== slow) throw new Error(`"${s}": fast ${fast} vs ${slow}`);
    }),
    { numRuns: 20000 },
  );
  t.ok(fastHits > 2000, `the fast path decided ${fastHits} inputs`);
});

t.test('parseIPFast accepts and refuses exactly what parseIP does', async (t) => {
  const out = new Uint32Array(5);
  fc.assert(
    fc.property(addrText.chain(mutate), (s) => {
      const buf = Buffer.from(s);
      if (fastParseIP(buf, 0, buf.length, out) !== 0 && !outcome(() => parseIP(s)).startsWith('ok')) {
        throw new Error(`fast path accepted "${s}"`);
      }
      const fast = outcome(() => parseIPFast(s));
      const slow = outcome(() => parseIP(s));
      if (fast !== slow) throw new Error(`"${s}": fast ${fast} vs ${slow}`);
    }),
    { numRuns: 20000 },
  );
  t.pass();
});

const sample = [
  '# a comment',
  '10.0.0.0/8',
  '',
  '   192.168.0.0/16  \r',
  '2001:db8::/32',
  '10.0.0.1/8',
  'not a prefix',
  '\t# indented comment',
  '::/0',
  '1.2.3.4/33',
  '::ffff:1.2.3.0/120',
].join('\n');

t.test('readPrefixStream: comments, blanks, CRLF, bad lines with line numbers', async (t) => {
  const table = await readPrefixStream([Buffer.from(sample)]);
  t.equal(table.lines, 11);
  t.same(Array.from({ length: table.v4.count }, (_, i) => table.v4.format(i)), ['10.0.0.0/8', '192.168.0.0/16']);
  t.same(Array.from({ length: table.v6.count }, (_, i) => table.v6.format(i)), ['2001:db8::/32', '::/0', '::ffff:102:300/120']);
  t.equal(table.errorCount, 3);
  t.same(table.errors.map((e) => e.line), [6, 7, 10]);
  t.match(table.errors[0].message, /host bits set \(the network is 10\.0\.0\.0\/8\)/);
  t.equal(table.errors[1].text, 'not a prefix');
  const few = await readPrefixStream([Buffer.from(sample)], { maxErrors: 1 });
  t.equal(few.errors.length, 1);
  t.equal(few.errorCount, 3);
});

t.test('line splitting does not depend on where chunks end', async (t) => {
  const whole = await readPrefixStream([Buffer.from(sample)]);
  const summary = (x: typeof whole) => JSON.stringify({
    v4: Array.from({ length: x.v4.count }, (_, i) => x.v4.format(i)),
    v6: Array.from({ length: x.v6.count }, (_, i) => x.v6.format(i)),
    errors: x.errors, lines: x.lines,
  });
  const want = summary(whole);
  await fc.assert(
    fc.asyncProperty(fc.array(fc.nat(sample.length), { maxLength: 12 }), async (cuts) => {
      const points = [...new Set([0, ...cuts, sample.length])].sort((a, b) => a - b);
      const bytes = Buffer.from(sample);
      const chunks = points.slice(1).map((p, i) => bytes.subarray(points[i], p));
      const got = summary(await readPrefixStream(chunks));
      if (got !== want) throw new Error(`cuts ${points}: ${got}`);
    }),
    { numRuns: 300 },
  );
  t.pass();
});

t.test('readPrefixFile reads plain and gzip files', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tableio-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const text = '10.0.0.0/8\n2001:db8::/32\n10.1.0.0/16'; // no final newline
  writeFileSync(join(dir, 'a.txt'), text);
  writeFileSync(join(dir, 'a.txt.gz'), gzipSync(text));
  for (const f of ['a.txt', 'a.txt.gz']) {
    const table = await readPrefixFile(join(dir, f));
    t.equal(table.v4.count, 2, f);
    t.equal(table.v6.count, 1, f);
    t.equal(table.v4.format(1), '10.1.0.0/16', f);
  }
  await t.rejects(readPrefixFile(join(dir, 'missing.txt')), { code: 'ENOENT' });
});
