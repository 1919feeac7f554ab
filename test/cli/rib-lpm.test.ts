// `blockspeaker rib lpm`: spawn the real command and check its answers against a brute-force oracle.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { IP, type Prefix, formatIP, ipAt, prefixContainsIP, prefixSize } from '../../src/net/ip.ts';
import { generateTable, mulberry32 } from '../../src/rib/tablegen.ts';

import { runCli } from '../kit/cli.ts';

function oracle(prefixes: Prefix[], ip: IP): string {
  let best: Prefix | undefined;
  for (const p of prefixes) if (prefixContainsIP(p, ip) && (!best || p.len > best.len)) best = p;
  return best ? best.toString() : '-';
}

t.test('rib lpm answers like the oracle, for both families, plain and gzip tables', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rib-lpm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const g = generateTable({ seed: 5, v4: 1500, v6: 400 });
  const prefixes: Prefix[] = [];
  for (const list of [g.v4, g.v6]) for (let i = 0; i < list.count; i++) prefixes.push(list.prefix(i));
  const text = `# generated\n${prefixes.map(String).join('\n')}\n`;
  writeFileSync(join(dir, 'table.txt'), text);
  writeFileSync(join(dir, 'table.txt.gz'), gzipSync(text));

  // Addresses: inside random table prefixes (so there are hits at every depth) and random ones.
  const rnd = mulberry32(9);
  const u32 = () => Math.floor(rnd() * 2 ** 32) >>> 0;
  const ips: IP[] = [];
  for (let i = 0; i < 1500; i++) {
    const p = prefixes[Math.floor(rnd() * prefixes.length)];
    ips.push(ipAt(p, Math.floor(rnd() * Math.min(prefixSize(p), 2 ** 52))));
    ips.push(rnd() < 0.7 ? new IP(4, u32()) : new IP(6, 0x20000000 | (u32() & 0x1fffffff), u32(), u32(), u32()));
  }
  const lines = ips.map((ip) => formatIP(ip));
  const want = ips.map((ip) => oracle(prefixes, ip));
  t.ok(want.filter((w) => w !== '-').length > 1000, 'many addresses match something');

  for (const file of ['table.txt', 'table.txt.gz']) {
    const res = await runCli(['rib', 'lpm', '--table', join(dir, file)], lines.join('\n') + '\n');
    t.equal(res.code, 0, `${file}: exit 0`);
    t.equal(res.stderr, '', `${file}: nothing on stderr`);
    const got = res.stdout.trimEnd().split('\n');
    t.equal(got.length, lines.length, `${file}: one line per address`);
    const mismatches = got.map((g, i) => (g === want[i] ? '' : `${lines[i]}: ${g} != ${want[i]}`)).filter(Boolean);
    t.same(mismatches, [], `${file}: every answer matches the oracle`);
  }
});

t.test('rib lpm: bad address lines are reported with their line number; the rest is answered', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rib-lpm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 't.txt'), '10.0.0.0/8\n10.1.0.0/16\n2001:db8::/32\n');
  const input = '10.1.2.3\n\n# comment\nnot-an-ip\n11.0.0.1\n10.0.0.1/8\n2001:db8::5\r\n';
  const res = await runCli(['rib', 'lpm', '--table', join(dir, 't.txt')], input);
  t.equal(res.code, 1, 'exit status 1 after bad lines');
  t.equal(res.stdout, '10.1.0.0/16\n-\n2001:db8::/32\n');
  t.match(res.stderr, /stdin line 4: invalid IP address "not-an-ip"/);
  t.match(res.stderr, /stdin line 6: invalid IP address "10\.0\.0\.1\/8"/);

  const echo = await runCli(['rib', 'lpm', '--table', join(dir, 't.txt'), '--echo'], '10.1.2.3\n');
  t.equal(echo.stdout, '10.1.2.3 10.1.0.0/16\n');
  t.equal(echo.code, 0);

  writeFileSync(join(dir, 'bad.txt'), '10.0.0.0/8\n10.0.0.1/8\n');
  const badTable = await runCli(['rib', 'lpm', '--table', join(dir, 'bad.txt')], '10.0.0.1\n');
  t.equal(badTable.code, 1);
  t.equal(badTable.stdout, '');
  t.match(badTable.stderr, /bad\.txt:2: invalid prefix "10\.0\.0\.1\/8": host bits set/);

  const missing = await runCli(['rib', 'lpm'], '');
  t.equal(missing.code, 2, 'usage error');
  t.match(missing.stderr, /--table is required/);
  const nofile = await runCli(['rib', 'lpm', '--table', join(dir, 'nope.txt')], '');
  t.equal(nofile.code, 2);
  t.match(nofile.stderr, /cannot read table/);
});
