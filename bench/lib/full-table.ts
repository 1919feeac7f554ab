// The full table the BGP benches send: the real tier-1 dump when it is there, else the synthetic generator with
// the real table's counts, and the plan of its attributes. One place, so that bench:bgp-ingest and bench:bgp-core
// send the same UPDATEs.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PrefixList } from '../../src/rib/prefixlist.ts';
import { REAL_TABLE_COUNTS, generateTable, mulberry32 } from '../../src/rib/tablegen.ts';
import { readPrefixFile } from '../../src/rib/tableio.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const DEFAULT_TABLE = resolve(repoRoot, '../shared/data/tier1-table-2023.txt.gz');

/**
 * `file` (one prefix per line, gzip or not), else DEFAULT_TABLE when present, else the synthetic table of `seed`.
 * A file with bad lines ends the bench with the first of them.
 */
export async function loadFullTable(file: string | undefined, seed: number): Promise<{ v4: PrefixList; v6: PrefixList; path: string | undefined }> {
  const path = file ?? (existsSync(DEFAULT_TABLE) ? DEFAULT_TABLE : undefined);
  if (path === undefined) return { ...generateTable({ seed, v4: REAL_TABLE_COUNTS.v4, v6: REAL_TABLE_COUNTS.v6 }), path };
  const t = await readPrefixFile(path);
  if (t.errorCount > 0) {
    console.error(`${path}: ${t.errorCount} bad lines, first: line ${t.errors[0].line}: ${t.errors[0].message}`);
    process.exit(1);
  }
  return { v4: t.v4, v6: t.v6, path };
}

/** Runs of consecutive prefixes of one family that share an attribute set (one UPDATE each from the replay sender). */
export interface Runs {
  start: Uint32Array;
  len: Uint8Array;
  /** The run's AS path, an index into TablePlan.pathPool. */
  path: Uint16Array;
  count: number;
}

/** The attributes of a full table: a pool of AS paths and the runs of each family. */
export interface TablePlan {
  /** 5,000 paths of 1-4 public-looking ASNs (the sender's AS is prepended by whoever sends). */
  pathPool: number[][];
  runs4: Runs;
  runs6: Runs;
}

const PATHS = 5000;

/**
 * Runs of 1-5 consecutive prefixes (3 on average), each with a path from the pool ("realistic"), or runs of up to 255
 * prefixes with one path ("packed"), for the first n4 IPv4 and n6 IPv6 prefixes; the same seed, the same plan.
 */
export function planTable(seed: number, n4: number, n6: number, packed = false): TablePlan {
  const rnd = mulberry32(seed);
  // A public-looking ASN: never the sender's or receiver's (loop detection) nor AS_TRANS.
  const randomAsn = (): number => {
    const r = 1 + Math.floor(rnd() * 330_000);
    const a = r <= 60_000 ? r : r + 71_072; // 1..60000 and 131073..400000
    return a === 23456 ? 23457 : a;
  };
  const pathPool = Array.from({ length: PATHS }, () => Array.from({ length: 1 + Math.floor(rnd() * 4) }, randomAsn));
  const makeRuns = (count: number): Runs => {
    const runs: Runs = { start: new Uint32Array(count), len: new Uint8Array(count), path: new Uint16Array(count), count: 0 };
    for (let i = 0; i < count;) {
      const len = packed ? Math.min(255, count - i) : Math.min(1 + Math.floor(rnd() * 5), count - i);
      runs.start[runs.count] = i;
      runs.len[runs.count] = len;
      runs.path[runs.count] = Math.floor(rnd() * PATHS);
      runs.count++;
      i += len;
    }
    return runs;
  };
  const runs4 = makeRuns(n4);
  return { pathPool, runs4, runs6: makeRuns(n6) };
}

/** The community of run g (counted from 1, IPv6 runs after the IPv4 ones) as [high, low]: distinct per run. */
export const runCommunity = (g: number) => [1 + (g >>> 16), g & 0xffff] as const;
