// bench/rib-memory: RSS of a full Internet table in the RIB: N prefixes, each learned from 3 eBGP peers, with
// ~2000 distinct attribute sets, change feed subscribed and flushed as a BGP session would (every 1000 updates).
//
//   node --expose-gc --import tsx bench/rib-memory.ts [--v4 1040000] [--v6 220000] [--paths 3] [--attrs 2000]
//                                                     [--table ../shared/data/tier1-table-2023.txt.gz] [--seed 1]
//
// Without --table the prefixes come from src/rib/tablegen.ts (the real table's length mix and clustering); with
// --table the real prefixes are used instead of --v4/--v6. --compact compacts the tries after the load (it trims
// their pools, but the copy leaves freed buffers in malloc's arenas, so RSS goes *up* by ~10 MB: off by default). The target is < 300 MB RSS for 1.26M prefixes x 3 paths. The last
// line is JSON.
import { parseArgs } from 'node:util';
import { parseIP } from '../src/net/ip.ts';
import { Origin, asSequence, makeAttrs, type PathAttrs } from '../src/rib/attrs.ts';
import { AttrInterner } from '../src/rib/interner.ts';
import type { PrefixList } from '../src/rib/prefixlist.ts';
import { Rib } from '../src/rib/rib.ts';
import { generateTable, mulberry32 } from '../src/rib/tablegen.ts';
import { readPrefixFile } from '../src/rib/tableio.ts';

const { values } = parseArgs({
  options: {
    v4: { type: 'string', default: '1040000' },
    v6: { type: 'string', default: '220000' },
    paths: { type: 'string', default: '3' },
    attrs: { type: 'string', default: '2000' },
    table: { type: 'string' },
    seed: { type: 'string', default: '1' },
    'no-feed': { type: 'boolean', default: false },
    compact: { type: 'boolean', default: false },
  },
});

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) console.error('note: run with --expose-gc for settled numbers');
const settle = () => {
  for (let i = 0; i < 3; i++) gc?.();
};
const MB = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
const mem = () => {
  const m = process.memoryUsage();
  return { rssMB: MB(m.rss), heapUsedMB: MB(m.heapUsed), heapTotalMB: MB(m.heapTotal), arrayBuffersMB: MB(m.arrayBuffers) };
};

const rand = mulberry32(Number(values.seed));

// ---- attribute sets -------------------------------------------------------------------------------------------

const PATHS = Number(values.paths);
const ATTR_SETS = Number(values.attrs);

// Per peer, ATTR_SETS / PATHS distinct sets (they differ in next hop, AS path, MED, communities), like a real feed.
function makeAttrPool(peer: number, count: number): PathAttrs[] {
  const out: PathAttrs[] = [];
  for (let i = 0; i < count; i++) {
    const hops = 1 + Math.floor(rand() * 5);
    const asns = [65000 + peer];
    for (let h = 0; h < hops; h++) asns.push(1 + Math.floor(rand() * 64000));
    out.push(
      makeAttrs({
        origin: rand() < 0.9 ? Origin.IGP : Origin.INCOMPLETE,
        asPath: [asSequence(...asns)],
        nextHop: parseIP(`192.0.2.${peer + 1}`),
        med: rand() < 0.3 ? Math.floor(rand() * 100) : undefined,
        communities: rand() < 0.6 ? [(((65000 + peer) << 16) | Math.floor(rand() * 50)) >>> 0] : [],
        largeCommunities: rand() < 0.1 ? [[65000 + peer, 1, Math.floor(rand() * 10)]] : [],
      }),
    );
  }
  return out;
}

// ---- run -----------------------------------------------------------------------------------------------------

settle();
const baseline = mem();

let lists: PrefixList[] = values.table
  ? await readPrefixFile(values.table).then((t) => [t.v4, t.v6])
  : (({ v4, v6 }) => [v4, v6])(generateTable({ seed: Number(values.seed), v4: Number(values.v4), v6: Number(values.v6) }));
const nPrefixes = lists[0].count + lists[1].count;
settle();
const generated = mem();

const interner = new AttrInterner();
const rib = new Rib({ interner });
const pools: PathAttrs[][] = [];
for (let p = 0; p < PATHS; p++) {
  rib.addSource(`peer${p}`, { type: 'ebgp', routerId: 0x0a000001 + p, address: parseIP(`192.0.2.${p + 1}`), asn: 65000 + p });
  pools.push(makeAttrPool(p, Math.ceil(ATTR_SETS / PATHS)));
}
let events = 0;
if (!values['no-feed']) rib.subscribe((b) => (events += b.length));

const t0 = performance.now();
let updates = 0;
// Peer-major order: each peer sends its whole table, as after session establishment.
for (let p = 0; p < PATHS; p++) {
  const source = `peer${p}`;
  const pool = pools[p];
  for (const list of lists) {
    for (let i = 0; i < list.count; i++) {
      rib.update(source, list.prefix(i), pool[(i * 7 + p * 13 + list.family) % pool.length]);
      if (++updates % 1000 === 0) rib.flush();
    }
  }
}
rib.flush();
const loadSecs = (performance.now() - t0) / 1000;

settle();
const beforeCompact = mem();
if (values.compact) rib.compact();
// Drop the prefix lists so only the RIB is measured.
lists = [];
pools.length = 0;
settle();
const loaded = mem();

// A quick sanity pass: LPM for random addresses (throughput, and that lookups find routes).
const t1 = performance.now();
let hits = 0;
const LOOKUPS = 200_000;
for (let i = 0; i < LOOKUPS; i++) {
  const ip = parseIP(`${1 + Math.floor(rand() * 222)}.${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}.1`);
  if (rib.lpm(ip)) hits++;
}
const lpmPerSec = LOOKUPS / ((performance.now() - t1) / 1000);

const result = {
  bench: 'rib-memory',
  source: values.table ? 'table' : 'synthetic',
  prefixes: nPrefixes,
  paths: rib.pathCount,
  attrSets: interner.size,
  bestPrefixes: rib.size,
  events,
  loadSeconds: Math.round(loadSecs * 100) / 100,
  updatesPerSec: Math.round(updates / loadSecs),
  baselineRssMB: baseline.rssMB,
  afterGenerateRssMB: generated.rssMB,
  beforeCompactRssMB: beforeCompact.rssMB,
  rssMB: loaded.rssMB,
  heapTotalMB: loaded.heapTotalMB,
  heapUsedMB: loaded.heapUsedMB,
  arrayBuffersMB: loaded.arrayBuffersMB,
  ribTypedArraysMB: MB(rib.memoryBytes()),
  parts: Object.fromEntries(Object.entries(rib.memoryStats()).map(([k, v]) => [k + 'MB', MB(v)])),
  lpmPerSec: Math.round(lpmPerSec),
  lpmHitRate: Math.round((hits / LOOKUPS) * 1000) / 1000,
  targetRssMB: 300,
};
console.log(`loaded ${nPrefixes} prefixes x ${PATHS} paths (${interner.size} attribute sets) in ${result.loadSeconds}s`);
console.log(`RSS ${loaded.rssMB} MB (baseline ${baseline.rssMB} MB), heap ${loaded.heapUsedMB} MB, typed arrays ${result.ribTypedArraysMB} MB`);
console.log(JSON.stringify(result));
