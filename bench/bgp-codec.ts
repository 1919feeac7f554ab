// bench/bgp-codec: decode and encode rates of the BGP codec on a full IPv4 table.
//
//   node --import tsx bench/bgp-codec.ts [--table FILE] [--rounds R] [--seed S]
//
// Table: --table, else ../shared/data/tier1-table-2023.txt.gz when present, else the synthetic generator. Two
// shapes of the same prefixes:
//   packed     - 1,000 attribute sets, so UPDATEs are full (about 900 prefixes per 4096 octets);
//   realistic  - one attribute set per 3 prefixes on average (a real table has hundreds of thousands of distinct
//                AS_PATH/community combinations), so most UPDATEs carry a few prefixes and attribute decoding
//                weighs in.
// Decode = the ingest path: the whole stream through the Framer in 64 KiB chunks, decodeMessage with a
// DecodeScratch, and a read of every prefix word. Encode = encodeUpdates per attribute set. Median of R rounds,
// by wall clock and by this process's CPU time (GC included).
// Human-readable lines first, then one JSON line.
import { existsSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { IP } from '../src/net/ip.ts';
import { makeAttrs, SegmentType, type PathAttrs } from '../src/rib/attrs.ts';
import { PrefixList } from '../src/rib/prefixlist.ts';
import { REAL_TABLE_COUNTS, generateTable, mulberry32 } from '../src/rib/tablegen.ts';
import { readPrefixFile } from '../src/rib/tableio.ts';
import { DecodeScratch, Framer, decodeMessage, encodeUpdates } from '../src/bgp/codec/index.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    seed: { type: 'string', default: '1' },
  },
});
const rounds = Number(values.rounds);
const rnd = mulberry32(Number(values.seed));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const defaultTable = resolve(repoRoot, '../shared/data/tier1-table-2023.txt.gz');
const tablePath = values.table ?? (existsSync(defaultTable) ? defaultTable : undefined);
const v4: PrefixList = tablePath
  ? (await readPrefixFile(tablePath)).v4
  : generateTable({ seed: Number(values.seed), v4: REAL_TABLE_COUNTS.v4, v6: 0 }).v4;
const N = v4.count;
console.log(`table: ${tablePath ?? 'synthetic'} (${N} IPv4 prefixes)`);

function randomAttrs(): PathAttrs {
  const len = 1 + Math.floor(rnd() * 6);
  const asns = Array.from({ length: len }, () => 1 + Math.floor(rnd() * 400000));
  const communities = Array.from({ length: Math.floor(rnd() * 5) }, () => Math.floor(rnd() * 2 ** 32));
  return makeAttrs({
    origin: rnd() < 0.9 ? 0 : 2,
    asPath: [{ type: SegmentType.AS_SEQUENCE, asns: [65001, ...asns] }],
    nextHop: new IP(4, 0x0a000001),
    med: rnd() < 0.3 ? Math.floor(rnd() * 1000) : undefined,
    communities,
  });
}

/** Prefixes grouped by attribute set: `sets` groups, prefixes dealt out in table order in runs. */
function groups(avgRun: number): { attrs: PathAttrs; prefixes: PrefixList }[] {
  const out: { attrs: PathAttrs; prefixes: PrefixList }[] = [];
  for (let i = 0; i < N;) {
    const run = Math.max(1, Math.round(avgRun * 2 * rnd()));
    const list = new PrefixList(4, run);
    for (let k = 0; k < run && i < N; k++, i++) list.push(v4.words[i], 0, 0, 0, v4.lens[i]);
    out.push({ attrs: randomAttrs(), prefixes: list });
  }
  return out;
}

interface ShapeResult {
  updates: number;
  prefixesPerUpdate: number;
  streamMB: number;
  decode_prefixes_per_s: number;
  decode_updates_per_s: number;
  encode_prefixes_per_s: number;
  /** The same by CPU time of this process (less sensitive to a busy machine than wall clock). */
  decode_prefixes_per_cpu_s: number;
  encode_prefixes_per_cpu_s: number;
}

const cpuMs = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

function runShape(name: string, gs: { attrs: PathAttrs; prefixes: PrefixList }[]): ShapeResult {
  // Encode.
  const encTimes: number[] = [];
  const encCpu: number[] = [];
  let msgs: Buffer[] = [];
  for (let r = 0; r < rounds; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const out: Buffer[] = [];
    for (const g of gs) for (const m of encodeUpdates(g.attrs, g.prefixes)) out.push(m);
    encTimes.push(performance.now() - t0);
    encCpu.push(cpuMs(c0));
    msgs = out;
  }
  const stream = Buffer.concat(msgs);
  const chunks: Buffer[] = [];
  for (let p = 0; p < stream.length; p += 65536) chunks.push(stream.subarray(p, p + 65536));

  // Decode through the framer, as a session would.
  const decTimes: number[] = [];
  const decCpu: number[] = [];
  let seen = 0;
  for (let r = 0; r < rounds; r++) {
    const scratch = new DecodeScratch();
    const framer = new Framer();
    let count = 0;
    let xor = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (const c of chunks) {
      framer.push(c, (m) => {
        const res = decodeMessage(m, { scratch });
        if (res.action !== 'ok' || res.message.type !== 'update') throw new Error('bench: unexpected decode result');
        const l = res.message.nlri;
        for (let i = 0; i < l.count; i++) xor ^= l.words[i] ^ l.lens[i];
        count += l.count;
      });
    }
    decTimes.push(performance.now() - t0);
    decCpu.push(cpuMs(c0));
    if (count !== N) throw new Error(`decoded ${count} prefixes, expected ${N} (${xor})`);
    seen = count;
  }
  const dec = median(decTimes) / 1000;
  const enc = median(encTimes) / 1000;
  const res: ShapeResult = {
    updates: msgs.length,
    prefixesPerUpdate: Math.round((N / msgs.length) * 10) / 10,
    streamMB: Math.round((stream.length / 2 ** 20) * 10) / 10,
    decode_prefixes_per_s: Math.round(seen / dec),
    decode_updates_per_s: Math.round(msgs.length / dec),
    encode_prefixes_per_s: Math.round(N / enc),
    decode_prefixes_per_cpu_s: Math.round(seen / (median(decCpu) / 1000)),
    encode_prefixes_per_cpu_s: Math.round(N / (median(encCpu) / 1000)),
  };
  console.log(
    `${name.padEnd(10)} ${res.updates} UPDATEs (${res.prefixesPerUpdate} prefixes each, ${res.streamMB} MB): ` +
      `decode ${(res.decode_prefixes_per_s / 1e6).toFixed(2)} M prefixes/s (${(dec * 1000).toFixed(0)} ms), ` +
      `encode ${(res.encode_prefixes_per_s / 1e6).toFixed(2)} M prefixes/s (${(enc * 1000).toFixed(0)} ms); ` +
      `per CPU second: decode ${(res.decode_prefixes_per_cpu_s / 1e6).toFixed(2)} M, encode ${(res.encode_prefixes_per_cpu_s / 1e6).toFixed(2)} M`,
  );
  return res;
}

const packed = runShape('packed', groups(N / 1000));
const realistic = runShape('realistic', groups(3));
console.log(
  JSON.stringify({
    bench: 'bgp-codec',
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model,
    node: process.version,
    table: tablePath ? 'tier1-table-2023' : 'synthetic',
    prefixes: N,
    rounds,
    packed,
    realistic,
  }),
);
