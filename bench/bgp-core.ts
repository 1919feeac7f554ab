// bench/bgp-core: the daemon's receive path for a full table, in one process and without sockets: the framer, the
// UPDATE decoder with the sessions' shared scratch, the import side of the speaker and the RIB with its change
// feed flushed after every read, as `blockspeaker run` does them. What bench:bgp-ingest measures end to end (with
// BIRD beside it), this measures with far less noise, so that a change to the hot path can be judged in a few
// minutes: `--rounds` fresh RIBs in one process, the median of their CPU times.
//
//   npm run bench:bgp-core -- [--table FILE] [--order replay|bird] [--rounds N] [--chunk BYTES] [--seed N]
//                             [--cpu-prof FILE]   (a V8 CPU profile of the rounds alone, not the table's setup)
//                             [--alloc-prof FILE]   (a sampling heap profile of the rounds, counting what the GCs
//                                                    collected too: every allocation, by function; prints the top)
//                             [--stages]   (the rounds cut into cumulative stages: framing, decoding, the RIB's
//                                           work per prefix, interning the table's attribute sets; bench/lib/stages.ts)
//                             [--stream FILE]   (the encoded stream: read from FILE when it is there, else written to it;
//                                                for A/B runs, which then skip the encoding)
//
// Orders:
//   replay  bench:bgp-ingest's replay stream: runs of 1-5 consecutive prefixes (3 on average) per UPDATE, every run
//           with its own attribute set (an AS_PATH from a pool of 5,000 and a community of its own);
//   bird    the same routes as BIRD sends them: one prefix per UPDATE, in an order unrelated to the prefixes (BIRD
//           walks its hash table), so consecutive UPDATEs rarely share their attributes.
// The table: --table, else ../shared/data/tier1-table-2023.txt.gz when present, else the synthetic generator.
// Prints one line per round (with the time of the first exact lookups after it: they complete a prefix index that
// a table sent in prefix order leaves unbuilt), then a JSON line: the medians (ms of CPU and wall time per round,
// the first lookups' ms), the heap after the last round and the counts the RIB ends with, which are checked against
// the table.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { summarizeAllocations, type SamplingProfile } from './lib/allocprofile.ts';
import { parseArgs } from 'node:util';
import { DecodeScratch, decodeFramedAt, encodeUpdates, Framer, type DecodeOptions } from '../src/bgp/codec/index.ts';
import { Importer } from '../src/bgp/peer-import.ts';
import type { PeerState } from '../src/bgp/peer.ts';
import type { SpeakerConfig } from '../src/bgp/speaker-config.ts';
import { parseIP, parsePrefix, type Prefix } from '../src/net/ip.ts';
import { asSequence, makeAttrs } from '../src/rib/attrs.ts';
import { AttrInterner } from '../src/rib/interner.ts';
import { Rib } from '../src/rib/rib.ts';
import type { PrefixList } from '../src/rib/prefixlist.ts';
import { mulberry32 } from '../src/rib/tablegen.ts';
import { RECEIVER_AS, SENDER_AS } from './lib/bgp-receivers.ts';
import { loadFullTable, planTable, runCommunity } from './lib/full-table.ts';
import { STAGES, stageOrder, stageSplit, type Stage, type StageSplit } from './lib/stages.ts';
import type { ScratchUpdate } from '../src/bgp/codec/decode-state.ts';

const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    order: { type: 'string', default: 'replay' },
    rounds: { type: 'string', default: '5' },
    chunk: { type: 'string', default: '65536' },
    seed: { type: 'string', default: '1' },
    'cpu-prof': { type: 'string' },
    'alloc-prof': { type: 'string' },
    stream: { type: 'string' },
    stages: { type: 'boolean', default: false },
  },
});
if (values.order !== 'replay' && values.order !== 'bird') throw new Error('--order must be replay or bird');
const rounds = Number(values.rounds);
const chunkBytes = Number(values.chunk);
if (!(rounds >= 1)) throw new Error('--rounds must be a positive number');
if (!(chunkBytes >= 4096)) throw new Error('--chunk must be at least 4096 bytes');

const { v4, v6, path: tablePath } = await loadFullTable(values.table, Number(values.seed));

// ---- the stream: bench:bgp-ingest's replay, or the same routes in BIRD's order ---------------------------------

const nh4 = parseIP('192.0.2.1');
const nh6 = parseIP('2001:db8::1');

/** The table as encoded UPDATEs (made in a function: its Prefix objects are garbage before the rounds). */
function encodeTable(): { stream: Buffer; updates: number } {
  const { pathPool, runs4, runs6 } = planTable(Number(values.seed), v4.count, v6.count);
  // One UPDATE: its prefixes (first, count) of a family's list, the run's path and the run's number g.
  const updates: [list: PrefixList, first: number, count: number, path: number, g: number][] = [];
  let g = 0;
  for (const [list, runs] of [[v4, runs4], [v6, runs6]] as const) {
    for (let r = 0; r < runs.count; r++) {
      g++;
      if (values.order === 'replay') updates.push([list, runs.start[r], runs.len[r], runs.path[r], g]);
      else for (let i = 0; i < runs.len[r]; i++) updates.push([list, runs.start[r] + i, 1, runs.path[r], g]);
    }
  }
  if (values.order === 'bird') {
    // Shuffled (Fisher-Yates, seeded): BIRD sends in its hash table's order, unrelated to the prefixes'.
    const rnd = mulberry32(Number(values.seed) + 1);
    for (let i = updates.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [updates[i], updates[j]] = [updates[j], updates[i]];
    }
  }
  const parts: Uint8Array[] = [];
  for (const [list, first, count, path, run] of updates) {
    const [hi, lo] = runCommunity(run);
    const attrs = makeAttrs({
      origin: 0, asPath: [asSequence(SENDER_AS, ...pathPool[path])], nextHop: list.family === 6 ? nh6 : nh4, communities: [hi * 65536 + lo],
    });
    const prefixes: Prefix[] = [];
    for (let i = first; i < first + count; i++) prefixes.push(list.prefix(i));
    for (const b of encodeUpdates(attrs, prefixes, { fourOctetAs: true })) parts.push(b);
  }
  return { stream: Buffer.concat(parts), updates: parts.length };
}

/** UPDATE messages in a stream of whole messages (the 16-octet marker, then the length). */
function countUpdates(b: Buffer): { stream: Buffer; updates: number } {
  let n = 0;
  for (let off = 0; off < b.length; off += b.readUInt16BE(off + 16)) if (b[off + 18] === 2) n++;
  return { stream: b, updates: n };
}

const cached = values.stream !== undefined && existsSync(values.stream);
const { stream, updates } = cached ? countUpdates(readFileSync(values.stream!)) : encodeTable();
if (values.stream !== undefined && !cached) writeFileSync(values.stream, stream);
const prefixCount = v4.count + v6.count;
// Socket-sized reads, each a buffer of its own (the sessions' scratch borrows from them, as from socket chunks).
const chunks: Buffer[] = [];
for (let off = 0; off < stream.length; off += chunkBytes) chunks.push(Buffer.from(stream.subarray(off, off + chunkBytes)));
console.log(`table ${tablePath ?? 'synthetic'}: ${v4.count} + ${v6.count} prefixes, order ${values.order}: ` +
  `${updates} UPDATEs, ${(stream.length / 2 ** 20).toFixed(1)} MB in ${chunks.length} reads`);

// ---- one round: a fresh RIB takes the stream -----------------------------------------------------------------

const cfg = { asn: RECEIVER_AS, clusterId: undefined } as unknown as SpeakerConfig;
const peer = {
  source: 'peer 10.0.0.2', cfg: { allowAsIn: 0, localAs: RECEIVER_AS }, importFilter: null, importRoutePolicy: null, maxPrefix: null,
} as unknown as PeerState;
const families = ['ipv4', 'ipv6'] as const;

// Looked up after each round, outside its time: the first exact lookup of a family completes the prefix index that a
// table arriving in prefix order leaves unbuilt (Table.append), and its time is printed beside the round's.
const PROBES = [parsePrefix('192.0.2.0/24'), parsePrefix('2001:db8::/32')];

interface RoundResult { cpuMs: number; wallMs: number; prefixes: number; best: number; messages: number; lookupMs: number }

function round(stage: Stage = 'full'): RoundResult {
  // An interner of its own: the process-wide one would keep every earlier round's attribute sets.
  const rib = new Rib({ schedule: () => {}, interner: new AttrInterner() });
  rib.addSource(peer.source, { type: 'ebgp', routerId: 0x0a000002, address: parseIP('10.0.0.2'), asn: SENDER_AS });
  let changes = 0;
  rib.subscribe((batch) => {
    changes += batch.length;
  });
  const importer = new Importer(rib, 0x0a000001, cfg);
  const scratch = new DecodeScratch();
  scratch.borrowInput = true;
  const opts: DecodeOptions = { scratch, fourOctetAs: true, extendedMessage: false, external: true };
  const framer = new Framer();
  let messages = 0;
  // The 'shared' stage: every UPDATE of a family carries that family's first attribute set instead of its own.
  let shared4: ScratchUpdate['attrs'] = null;
  let shared6: ScratchUpdate['attrs'] = null;
  const onFrame = stage === 'frame'
    ? (): void => {
      messages++;
    }
    : (buf: Uint8Array, off: number, len: number): void => {
      const r = decodeFramedAt(buf, off, len, opts);
      if (r.action === 'notification') throw new Error(`decode: ${r.reason}`);
      messages++;
      if (stage === 'decode' || r.message.type !== 'update') return;
      const m = r.message as ScratchUpdate;
      if (stage === 'shared' && m.attrs !== null) {
        if (m.mpReach === null) m.attrs = shared4 ??= m.attrs;
        else m.attrs = shared6 ??= m.attrs;
      }
      importer.update(peer, families, m, r.action);
    };
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const c of chunks) {
    const err = framer.pushAt(c, onFrame);
    if (err) throw new Error(`framer: ${err.reason}`);
    rib.flush();
  }
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  if (messages !== updates) throw new Error(`${messages} messages framed of the stream's ${updates}`);
  // (The framer and decoder stages leave the RIB empty: its counts are checked on the other two.)
  if (stage === 'frame' || stage === 'decode') return { cpuMs: (c.user + c.system) / 1000, wallMs, prefixes: 0, best: 0, messages, lookupMs: 0 };
  if (changes !== prefixCount) throw new Error(`the change feed delivered ${changes} changes for ${prefixCount} prefixes`);
  const l0 = performance.now();
  for (const p of PROBES) rib.best(p);
  const lookupMs = performance.now() - l0;
  return { cpuMs: (c.user + c.system) / 1000, wallMs, prefixes: rib.prefixCount, best: rib.size, messages, lookupMs };
}

function post(s: Session, method: string): Promise<unknown> {
  return new Promise((res, rej) => s.post(method, (err, r) => (err ? rej(err) : res(r))));
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const profiler = values['cpu-prof'] ? new Session() : null;
if (profiler) {
  profiler.connect();
  await post(profiler, 'Profiler.enable');
  await post(profiler, 'Profiler.start');
}
const allocs = values['alloc-prof'] ? new Session() : null;
if (allocs) {
  allocs.connect();
  await post(allocs, 'HeapProfiler.enable');
  await new Promise<void>((res, rej) => allocs.post('HeapProfiler.startSampling', {
    samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true,
  }, (err) => (err ? rej(err) : res())));
}
const cpu: number[] = [];
const wall: number[] = [];
const lookups: number[] = [];
// --stages: per stage, its rounds' wall and CPU times.
const byStage = new Map<Stage, { cpu: number[]; wall: number[] }>(STAGES.map((s) => [s, { cpu: [], wall: [] }]));
let last = { prefixes: 0, best: 0 };
for (let i = 0; i < rounds; i++) {
  const parts: string[] = [];
  for (const stage of values.stages ? stageOrder(i) : ['full' as const]) {
    // Each run from a collected heap (node --expose-gc, as npm run bench:bgp-core starts it): the last run's RIB
    // is garbage and should not be marked on this run's time.
    (globalThis as { gc?: () => void }).gc?.();
    const r = round(stage);
    if ((stage === 'shared' || stage === 'full') && (r.prefixes !== prefixCount || r.best !== prefixCount)) {
      throw new Error(`round ${i + 1} (${stage}): the RIB holds ${r.prefixes} prefixes (${r.best} with a best path) of ${prefixCount}`);
    }
    byStage.get(stage)!.cpu.push(r.cpuMs);
    byStage.get(stage)!.wall.push(r.wallMs);
    if (stage === 'full') {
      cpu.push(r.cpuMs);
      wall.push(r.wallMs);
      lookups.push(r.lookupMs);
      last = r;
    }
    const lookup = stage === 'full' ? `, then ${r.lookupMs.toFixed(1)} ms for the first lookups` : '';
    parts.push(`${values.stages ? `${stage} ` : ''}${r.cpuMs.toFixed(0)} ms CPU, ${r.wallMs.toFixed(0)} ms wall${lookup}`);
  }
  console.log(`round ${i + 1}: ${parts.join('; ')}`);
}
let stages: object | undefined;
if (values.stages) {
  const med = (k: 'cpu' | 'wall') => Object.fromEntries(STAGES.map((s) => [s, median(byStage.get(s)![k])])) as Record<Stage, number>;
  const wallSplit = stageSplit(med('wall'));
  const cpuSplit = stageSplit(med('cpu'));
  const pct = (x: number) => `${((100 * x) / wallSplit.total).toFixed(0)}%`;
  console.log(`stages (medians of wall time per round; CPU in brackets): framing ${wallSplit.framing.toFixed(0)} ms (${cpuSplit.framing.toFixed(0)}), ` +
    `decoding ${wallSplit.decoding.toFixed(0)} ms ${pct(wallSplit.decoding)} (${cpuSplit.decoding.toFixed(0)}), ` +
    `per prefix ${wallSplit.perPrefix.toFixed(0)} ms ${pct(wallSplit.perPrefix)} (${cpuSplit.perPrefix.toFixed(0)}), ` +
    `interning ${wallSplit.interning.toFixed(0)} ms ${pct(wallSplit.interning)} (${cpuSplit.interning.toFixed(0)}), of ${wallSplit.total.toFixed(0)} ms`);
  const r1 = (o: StageSplit) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Math.round(v)]));
  stages = { wallMs: r1(wallSplit), cpuMs: r1(cpuSplit) };
}
if (profiler) {
  const { profile } = await post(profiler, 'Profiler.stop') as { profile: unknown };
  writeFileSync(values['cpu-prof']!, JSON.stringify(profile));
  console.log(`CPU profile of the rounds: ${values['cpu-prof']}`);
}
if (allocs) {
  const { profile } = await post(allocs, 'HeapProfiler.stopSampling') as { profile: SamplingProfile };
  writeFileSync(values['alloc-prof']!, JSON.stringify(profile));
  const sum = summarizeAllocations(profile, 10);
  console.log(`allocation profile of the rounds: ${values['alloc-prof']} (${(sum.totalBytes / 2 ** 20 / rounds).toFixed(1)} MB sampled per round)`);
  for (const f of sum.functions) console.log(`  ${(f.bytes / 2 ** 20 / rounds).toFixed(1).padStart(7)} MB/round ${f.pct.toFixed(1).padStart(5)}%  ${f.name}`);
}
const heapMB = process.memoryUsage().heapUsed / 2 ** 20;
console.log(JSON.stringify({
  bench: 'bgp-core', order: values.order, rounds, updates, prefixes: last.prefixes, best: last.best,
  cpuMs: Math.round(median(cpu)), wallMs: Math.round(median(wall)), firstLookupMs: Math.round(median(lookups) * 10) / 10, heapMB: Math.round(heapMB), ...(stages ? { stages } : {}),
}));
