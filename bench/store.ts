// Micro-benchmark of the file store: txns/s and latency with 1 and 64 txns in flight, and fdatasyncs per txn.
// Usage: node --import tsx bench/store.ts [dir]   (default: a fresh temp dir, removed at the end)
// Prints human-readable lines, then one JSON line with the results.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openFileStore, type FileStore } from '../src/store/file.ts';

const dir = process.argv[2] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'bs-bench-'));
const cleanup = process.argv[2] === undefined;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function run(store: FileStore, inFlight: number, total: number, keys: number) {
  const lat: number[] = [];
  const syncs0 = store.stats().syncs;
  let issued = 0;
  const t0 = process.hrtime.bigint();
  async function worker(): Promise<void> {
    while (issued < total) {
      const i = issued++;
      const key = `bench/${i % keys}`;
      const s = process.hrtime.bigint();
      // A realistic IPAM-style write: CAS on the key's current revision.
      const cur = await store.get(key);
      const r = await store.txn([{ key, modRevision: cur?.modRevision ?? 0 }], [{ type: 'put', key, value: `{"i":${i},"pad":"${'x'.repeat(100)}"}` }]);
      lat.push(Number(process.hrtime.bigint() - s) / 1e6);
      if (!r.succeeded && inFlight === 1) throw new Error('unexpected CAS failure');
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  lat.sort((a, b) => a - b);
  const syncs = store.stats().syncs - syncs0;
  return {
    inFlight,
    txns: total,
    txnsPerSec: Math.round(total / secs),
    p50ms: +pct(lat, 50).toFixed(3),
    p99ms: +pct(lat, 99).toFixed(3),
    syncs,
    txnsPerSync: +(total / syncs).toFixed(1),
  };
}

/** The floor for 1 in flight: a 200-byte append + fdatasync on the same disk, measured now. */
function rawSync(n: number) {
  const file = path.join(dir, 'raw-sync-probe');
  const fd = fs.openSync(file, 'w');
  const b = Buffer.alloc(200, 1);
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    fs.writeSync(fd, b, 0, b.length, i * b.length);
    const s = process.hrtime.bigint();
    fs.fdatasyncSync(fd);
    lat.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  fs.closeSync(fd);
  fs.rmSync(file);
  lat.sort((a, b) => a - b);
  return { p50ms: +pct(lat, 50).toFixed(3), p99ms: +pct(lat, 99).toFixed(3) };
}

const raw = rawSync(1000);
console.log(`raw append+fdatasync: p50 ${raw.p50ms} ms, p99 ${raw.p99ms} ms`);
const store = await openFileStore(dir);
await run(store, 1, 200, 1000); // warm-up
const one = await run(store, 1, 3000, 1000);
console.log(`1 in flight:  ${one.txnsPerSec} txns/s, p50 ${one.p50ms} ms, p99 ${one.p99ms} ms, ${one.syncs} syncs`);
// 64 in flight, distinct keys per worker slot mostly, so most CAS succeed.
const many = await run(store, 64, 40000, 5000);
console.log(`64 in flight: ${many.txnsPerSec} txns/s, p50 ${many.p50ms} ms, p99 ${many.p99ms} ms, ${many.syncs} syncs`);
const t0 = process.hrtime.bigint();
let gets = 0;
for (let i = 0; i < 100000; i++) if (await store.get(`bench/${i % 5000}`)) gets++;
const getsPerSec = Math.round(100000 / (Number(process.hrtime.bigint() - t0) / 1e9));
console.log(`get: ${getsPerSec} ops/s`);
const stats = store.stats();
await store.close();
if (cleanup) fs.rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ bench: 'store', rawFdatasync: raw, oneInFlight: one, inFlight64: many, getsPerSec, compactions: stats.compactions, logBytes: stats.logBytes }));
