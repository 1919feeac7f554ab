// The full table the BGP benches send: the real tier-1 dump when it is there, else the synthetic generator with
// the real table's counts. One place, so that bench:bgp-ingest and bench:bgp-core load the same prefixes.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PrefixList } from '../../src/rib/prefixlist.ts';
import { REAL_TABLE_COUNTS, generateTable } from '../../src/rib/tablegen.ts';
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
