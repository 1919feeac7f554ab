// The synthetic table generator: deterministic, sorted, no duplicates, real-table shape.
import t from 'tap';
import { comparePrefix } from '../../src/net/ip.ts';
import { generateTable, mulberry32 } from '../../src/rib/tablegen.ts';
import { Trie } from '../../src/rib/trie.ts';
import type { PrefixList } from '../../src/rib/prefixlist.ts';

const formatAll = (l: PrefixList) => Array.from({ length: l.count }, (_, i) => l.format(i));

t.test('same seed, same table; other seed, other table', async (t) => {
  const a = generateTable({ seed: 42, v4: 3000, v6: 1000 });
  const b = generateTable({ seed: 42, v4: 3000, v6: 1000 });
  const c = generateTable({ seed: 43, v4: 3000, v6: 1000 });
  t.same(formatAll(a.v4), formatAll(b.v4));
  t.same(formatAll(a.v6), formatAll(b.v6));
  t.not(formatAll(a.v4).join(), formatAll(c.v4).join());
  t.equal(a.v4.count, 3000);
  t.equal(a.v6.count, 1000);
  const r = mulberry32(1);
  const x = [r(), r(), r()];
  t.ok(x.every((v) => v >= 0 && v < 1) && new Set(x).size === 3);
  t.throws(() => generateTable({ v4: -1 }), RangeError);
});

t.test('shape: sorted, unique, length mix and nesting like the real table', async (t) => {
  const g = generateTable({ seed: 7, v4: 60_000, v6: 15_000 });
  for (const [list, fam] of [[g.v4, 4], [g.v6, 6]] as const) {
    const trie = new Trie(fam);
    let nested = 0;
    let misordered = 0;
    const byLen = new Map<number, number>();
    for (let i = 0; i < list.count; i++) {
      const p = list.prefix(i);
      if (i > 0 && comparePrefix(list.prefix(i - 1), p) >= 0) misordered++;
      if (trie.covering(p).length > 0) nested++;
      trie.insert(p, i);
      byLen.set(p.len, (byLen.get(p.len) ?? 0) + 1);
    }
    // Sorted order puts a covering prefix before what it covers, so `nested` counted every nested prefix.
    t.equal(misordered, 0, `IPv${fam}: strictly increasing comparePrefix order`);
    t.equal(trie.size, list.count, `IPv${fam}: no duplicates`);
    const share = (len: number) => (byLen.get(len) ?? 0) / list.count;
    const frac = nested / list.count;
    if (fam === 4) {
      t.ok(Math.abs(share(24) - 0.596) < 0.01, `IPv4 /24 share ${share(24)}`);
      t.ok(Math.abs(share(22) - 0.12) < 0.01, `IPv4 /22 share ${share(22)}`);
      t.ok(Math.abs(share(16) - 0.015) < 0.005, `IPv4 /16 share ${share(16)}`);
      t.ok(frac > 0.45 && frac < 0.55, `IPv4 nested fraction ${frac}`);
    } else {
      t.ok(Math.abs(share(48) - 0.47) < 0.015, `IPv6 /48 share ${share(48)}`);
      t.ok(Math.abs(share(32) - 0.14) < 0.015, `IPv6 /32 share ${share(32)}`);
      t.ok(frac > 0.45 && frac < 0.62, `IPv6 nested fraction ${frac}`);
    }
  }
});
