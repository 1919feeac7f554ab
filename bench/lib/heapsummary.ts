// bench/lib/heapsummary: where a V8 heap snapshot's memory is, by node type and constructor name (self sizes, the
// figures DevTools' "Summary" view shows), biggest first. Typed arrays' backing stores are "native" nodes whose
// self size is their byte length.
//
//   node --import tsx bench/lib/heapsummary.ts FILE.heapsnapshot [--top N]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export function summarize(snap: Snapshot): { total: number; rows: { key: string; count: number; bytes: number }[] } {
  const f = snap.snapshot.meta.node_fields;
  const width = f.length;
  const iType = f.indexOf('type');
  const iName = f.indexOf('name');
  const iSize = f.indexOf('self_size');
  const types = snap.snapshot.meta.node_types[0];
  const by = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + iType]!]!;
    const size = snap.nodes[i + iSize]!;
    total += size;
    // Names of strings and code are their contents: group those by type only.
    const name = type === 'object' || type === 'native' || type === 'closure' ? snap.strings[snap.nodes[i + iName]!]!.slice(0, 60) : '';
    const key = `${type}${name ? ` ${name}` : ''}`;
    const e = by.get(key) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += size;
    by.set(key, e);
  }
  const rows = [...by].map(([key, v]) => ({ key, ...v })).sort((a, b) => b.bytes - a.bytes);
  return { total, rows };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' } } });
  if (!positionals[0]) throw new Error('usage: heapsummary FILE.heapsnapshot [--top N]');
  const { total, rows } = summarize(JSON.parse(readFileSync(positionals[0], 'utf8')) as Snapshot);
  const mb = (b: number) => (b / 1048576).toFixed(2).padStart(8);
  console.log(`total self size ${mb(total)} MB`);
  for (const r of rows.slice(0, Number(values.top))) console.log(`${mb(r.bytes)} MB ${String(r.count).padStart(9)}  ${r.key}`);
}
