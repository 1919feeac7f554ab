// The import graph of src/ against the layer order written down in docs/design/layers.md: no file imports from a
// folder above its own, and no two files import each other, directly or round a longer circle. Imports are read by
// TypeScript's own pre-processor (static, type-only, re-exports and import() calls alike), relative ones resolved to
// files; packages and node: modules are not part of the graph.
import t from 'tap';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface Edge {
  from: string;
  to: string;
  line: number;
}

/** The folders of the layer list, top first. */
export function layerOrder(markdown: string): string[] {
  const out: string[] = [];
  for (const m of markdown.matchAll(/^\d+\.\s+`src\/([a-z0-9-]+)\/`/gm)) out.push(m[1]);
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|mts|cts)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every relative import of every file (paths relative to the repository). */
function importEdges(files: string[]): Edge[] {
  const edges: Edge[] = [];
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    const info = ts.preProcessFile(text, true, true);
    for (const imp of info.importedFiles) {
      if (!imp.fileName.startsWith('.')) continue;
      const target = resolve(dirname(f), imp.fileName);
      if (!existsSync(target)) throw new Error(`${relative(root, f)} imports ${imp.fileName}, which is not a file`);
      const line = text.slice(0, imp.pos).split('\n').length;
      edges.push({ from: relative(root, f), to: relative(root, target), line });
    }
  }
  return edges;
}

/** The layer folder of a file under src/ ("src/bgp/codec/x.ts" -> "bgp"). */
const folderOf = (file: string): string => file.split('/')[1];

/** Imports from a folder listed above the importer's own (or from a folder the list does not have). */
export function upwardImports(edges: readonly Edge[], order: readonly string[]): string[] {
  const rank = new Map(order.map((f, i) => [f, i]));
  const out: string[] = [];
  for (const e of edges) {
    const a = folderOf(e.from);
    const b = folderOf(e.to);
    if (a === b) continue;
    const ra = rank.get(a);
    const rb = rank.get(b);
    if (ra === undefined || rb === undefined) out.push(`${e.from}:${e.line} -> ${e.to}: ${ra === undefined ? a : b}/ is not in the layer list`);
    else if (rb < ra) out.push(`${e.from}:${e.line} imports ${e.to}: ${b}/ is layer ${rb + 1}, above ${a}/ (layer ${ra + 1})`);
  }
  return out;
}

/** Strongly connected groups of two or more files (Tarjan), each sorted: the circles. */
export function circles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, []);
    next.get(e.from)!.push(e.to);
    if (!next.has(e.to)) next.set(e.to, []);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || next.get(v)!.includes(v)) out.push(group.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return out;
}

const order = layerOrder(readFileSync(join(root, 'docs/design/layers.md'), 'utf8'));
const files = sourceFiles(join(root, 'src'));
const edges = importEdges(files);

t.test('the checks catch what they are for', async (t) => {
  const fake: Edge[] = [
    { from: 'src/rib/a.ts', to: 'src/bgp/b.ts', line: 3 }, // upward
    { from: 'src/bgp/b.ts', to: 'src/rib/c.ts', line: 1 },
    { from: 'src/rib/c.ts', to: 'src/rib/d.ts', line: 1 },
    { from: 'src/rib/d.ts', to: 'src/rib/c.ts', line: 2 }, // c <-> d
    { from: 'src/bgp/b.ts', to: 'src/nowhere/x.ts', line: 4 },
  ];
  const up = upwardImports(fake, ['bgp', 'rib']);
  t.equal(up.length, 2, 'one upward import and one folder off the list');
  t.match(up[0], /^src\/rib\/a\.ts:3 imports src\/bgp\/b\.ts: bgp\/ is layer 1, above rib\/ \(layer 2\)/);
  t.match(up[1], /nowhere\/ is not in the layer list/);
  t.same(circles(fake), [['src/rib/c.ts', 'src/rib/d.ts']], 'the two-file circle, and no other');
  t.same(circles([...fake, { from: 'src/rib/c.ts', to: 'src/rib/a.ts', line: 9 }]).map((c) => c.length), [4],
    'a longer circle through three folders');
});

t.test('the graph is read whole: type-only imports, re-exports and import() calls are edges', async (t) => {
  t.ok(files.length > 150, `${files.length} files under src/`);
  t.ok(edges.length > 500, `${edges.length} relative imports`);
  const has = (from: string, to: string) => edges.some((e) => e.from === from && e.to === to);
  t.ok(has('src/platform/sockopt.ts', 'src/platform/sockopt-koffi.ts'), 'a lazy import() (the koffi socket calls)');
  t.ok(has('src/rib/adj-rib-out.ts', 'src/rib/types.ts'), 'an import type');
  t.ok(has('src/config/types.ts', 'src/bgp/session.ts'), 'an export type ... from');
});

t.test('every folder under src/ has its place in docs/design/layers.md, once', async (t) => {
  const folders = [...new Set(files.map((f) => folderOf(relative(root, f))))].sort();
  t.same([...order].sort(), folders, 'the list names exactly the folders there are');
  t.equal(new Set(order).size, order.length, 'no folder twice');
});

t.test('no file imports from a layer above its own', async (t) => {
  const up = upwardImports(edges, order);
  t.same(up, [], up.length ? `upward imports:\n${up.join('\n')}` : 'none');
});

t.test('no circles among the files of src/', async (t) => {
  const found = circles(edges);
  t.same(found, [], found.length ? `circles:\n${found.map((c) => c.join(' -> ')).join('\n')}` : 'none');
});
