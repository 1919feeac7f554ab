import t from 'tap';
import fc from 'fast-check';
import {
  IP, Prefix, comparePrefix, formatPrefix, ipAt, parseIP, parsePrefix, prefixContainsIP, prefixContainsPrefix,
  prefixSize, subnetAt,
} from '../../src/net/ip.ts';
import { announcements, diffAnnouncements, summarise } from '../../src/rib/aggregate.ts';

const P = parsePrefix;
const str = (ps: Prefix[]) => ps.map(formatPrefix);

t.test('blocks are announced, host routes inside them suppressed, borrowed outside announced', async (t) => {
  const out = announcements({
    blocks: [P('10.0.0.0/26'), P('10.0.1.0/26')],
    borrowed: [parseIP('10.0.5.7'), parseIP('10.0.0.9'), P('fd00::5/128')],
    hostRoutes: [parseIP('10.0.1.3'), parseIP('10.0.9.9')],
  });
  t.same(str(out), ['10.0.0.0/26', '10.0.1.0/26', '10.0.5.7/32', '10.0.9.9/32', 'fd00::5/128']);
});

t.test('summarisation merges siblings across levels, never across families or gaps', async (t) => {
  t.same(str(summarise([P('10.0.0.0/26'), P('10.0.0.64/26')])), ['10.0.0.0/25']);
  t.same(str(summarise([P('10.0.0.64/26'), P('10.0.0.0/26'), P('10.0.0.128/25'), P('10.0.1.0/24')])), ['10.0.0.0/23']);
  t.same(str(summarise([P('10.0.0.0/26'), P('10.0.0.128/26')])), ['10.0.0.0/26', '10.0.0.128/26'], 'not adjacent siblings');
  t.same(str(summarise([P('10.0.0.64/26'), P('10.0.0.128/26')])), ['10.0.0.64/26', '10.0.0.128/26'], 'adjacent but different parents');
  t.same(str(summarise([P('0.0.0.0/1'), P('128.0.0.0/1'), P('::/1'), P('8000::/1')])), ['0.0.0.0/0', '::/0']);
  t.same(str(summarise([P('10.0.0.0/24'), P('10.0.0.0/26'), P('10.0.1.0/24')])), ['10.0.0.0/23'], 'covered dropped first');
  const out = announcements({ blocks: [P('10.0.0.0/26'), P('10.0.0.64/26')], borrowed: [parseIP('10.0.0.65')], summarise: true });
  t.same(str(out), ['10.0.0.0/25']);
});

t.test('diff', async (t) => {
  const d = diffAnnouncements([P('10.0.0.0/26'), P('10.0.0.5/32'), P('fd00::/64')], [P('fd00::/64'), P('10.0.0.0/25')]);
  t.same(str(d.add), ['10.0.0.0/25']);
  t.same(str(d.withdraw), ['10.0.0.0/26', '10.0.0.5/32']);
  t.same(diffAnnouncements([P('10.0.0.0/26')], [P('10.0.0.0/26')]), { add: [], withdraw: [] });
});

// ---- property against a brute-force oracle over two 16-address universes -----------------------------------

const U4 = P('10.0.0.0/28');
const U6 = P('fd00::/124');
const universes = [U4, U6];

// A prefix inside a universe: pick the universe, a length 0..4 bits below it, and an index.
const arbPrefix = fc
  .tuple(fc.constantFrom(...universes), fc.integer({ min: 0, max: 4 }), fc.nat())
  .map(([u, extra, i]) => subnetAt(u, u.len + extra, i % 2 ** extra));
const arbIP = fc.tuple(fc.constantFrom(...universes), fc.integer({ min: 0, max: 15 })).map(([u, i]) => ipAt(u, i));

const addrs = (p: Prefix): IP[] => Array.from({ length: prefixSize(p) }, (_, i) => ipAt(p, i));
const key = (ip: IP) => `${ip.family}:${ip.w0}:${ip.w3}`;
const hostOf = (ip: IP) => P(`${ip}/${ip.family === 4 ? 32 : 128}`);

// The unique minimal CIDR cover of an address set, by recursive halving of each universe.
function minimalCover(owned: Set<string>): Prefix[] {
  const out: Prefix[] = [];
  const walk = (p: Prefix): void => {
    const inside = addrs(p).filter((a) => owned.has(key(a))).length;
    if (inside === 0) return;
    if (inside === prefixSize(p)) return void out.push(p);
    walk(subnetAt(p, p.len + 1, 0));
    walk(subnetAt(p, p.len + 1, 1));
  };
  universes.forEach(walk);
  return out.sort(comparePrefix);
}

t.test('property: announcements match the brute-force oracle', async (t) => {
  fc.assert(
    fc.property(
      fc.array(arbPrefix, { maxLength: 8 }),
      fc.array(arbIP, { maxLength: 6 }),
      fc.array(arbIP, { maxLength: 4 }),
      fc.boolean(),
      (blocks, borrowed, hostRoutes, summariseOn) => {
        const out = announcements({ blocks, borrowed, hostRoutes, summarise: summariseOn });
        const owned = new Set(blocks.flatMap(addrs).map(key));
        const held = new Set([...owned, ...borrowed.map(key), ...hostRoutes.map(key)]);
        const outside = [...borrowed, ...hostRoutes].filter((ip) => !owned.has(key(ip)));

        // Sorted and unique.
        for (let i = 1; i < out.length; i++) if (comparePrefix(out[i - 1], out[i]) >= 0) return false;
        // No announced prefix covers space the host does not hold.
        if (!out.every((p) => addrs(p).every((a) => held.has(key(a))))) return false;
        // Announced prefixes are disjoint: no more-specific under another announcement (e.g. inside own blocks).
        for (const p of out) for (const q of out) if (p !== q && prefixContainsPrefix(p, q)) return false;
        // Every held address outside own blocks is announced as its own host route.
        for (const ip of outside) if (!out.some((p) => comparePrefix(p, hostOf(ip)) === 0)) return false;
        // Together they cover exactly what is held.
        const covered = new Set(out.flatMap(addrs).map(key));
        if (covered.size !== held.size || ![...held].every((k) => covered.has(k))) return false;
        // The aggregate part is exactly: the minimal cover (summarised) or the outermost blocks (not).
        const aggs = out.filter((p) => !outside.some((ip) => comparePrefix(p, hostOf(ip)) === 0));
        const expected = summariseOn
          ? minimalCover(owned)
          : blocks.filter((b) => !blocks.some((c) => c.len < b.len && prefixContainsPrefix(c, b)));
        const e = [...new Map(expected.map((p) => [formatPrefix(p), p])).values()].sort(comparePrefix);
        return aggs.length === e.length && aggs.every((p, i) => comparePrefix(p, e[i]) === 0);
      },
    ),
    { numRuns: 3000 },
  );
  t.pass('property holds');
});

t.test('property: applying the diff to prev gives next', async (t) => {
  fc.assert(
    fc.property(fc.array(arbPrefix, { maxLength: 8 }), fc.array(arbPrefix, { maxLength: 8 }), (prev, next) => {
      const d = diffAnnouncements(prev, next);
      const s = new Set(prev.map(formatPrefix));
      for (const w of d.withdraw) if (!s.delete(formatPrefix(w))) return false;
      for (const a of d.add) {
        if (s.has(formatPrefix(a))) return false;
        s.add(formatPrefix(a));
      }
      const n = new Set(next.map(formatPrefix));
      return s.size === n.size && [...n].every((x) => s.has(x));
    }),
  );
  t.pass('property holds');
});

t.test('helpers used by the oracle agree with ip.ts', async (t) => {
  t.ok(prefixContainsIP(U4, ipAt(U4, 15)));
  t.notOk(prefixContainsIP(U4, ipAt(U4, 16)));
});
