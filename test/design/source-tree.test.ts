// The source tree stays walkable: no file under src/ over 800 lines (src/rib/trie.ts excepted: one structure, as
// BIRD keeps trie.c), the parts of the files that were split by responsibility at most 600 each, and no comment or
// help text that sends a reader to something they cannot find: tracker numbers ("issue 17"), a DESIGN.md the
// project does not have, a README section that is not there, or a docs/ page that does not exist.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'fixtures' ? [] : filesUnder(rel, keep);
    return keep(e.name) ? [rel] : [];
  });
}

const lineCount = (file: string) => readFileSync(join(root, file), 'utf8').split('\n').length - 1;

const MAX_LINES = 800;
const ONE_STRUCTURE = new Set(['src/rib/trie.ts']);
// What the six largest files became; each part holds one responsibility.
const SPLIT_PARTS = /^src\/(bgp\/(speaker|peer|listener|graceful-restart|codec\/decode)[\w-]*|rib\/(rib|path-store|change-feed|entry-pool|types)|store\/file(-[\w]+)?|ipam\/(ipam|batcher|claim|assign|release|views?)[\w-]*|daemon\/(daemon|linux|reload|views?)[\w-]*)\.ts$/;
const MAX_PART_LINES = 600;

const sources = filesUnder('src', (n) => n.endsWith('.ts'));

t.test(`no file under src/ over ${MAX_LINES} lines, and no part of a split file over ${MAX_PART_LINES}`, async (t) => {
  t.ok(sources.length > 100, `src/ holds the program (${sources.length} files)`);
  let parts = 0;
  for (const f of sources) {
    const n = lineCount(f);
    if (!ONE_STRUCTURE.has(f)) t.ok(n <= MAX_LINES, `${f}: ${n} lines`, { skip: false });
    if (SPLIT_PARTS.test(f)) {
      parts++;
      t.ok(n <= MAX_PART_LINES, `${f}: ${n} lines (a part of a split file)`);
    }
  }
  t.ok(parts >= 20, `the split files' parts are found (${parts})`);
});

// Files whose comments and strings a reader follows. Fixtures and the docs' own test are left out.
const readable = [
  ...sources,
  ...filesUnder('scripts', (n) => /\.(ts|mjs|js|sh)$/.test(n)),
  ...filesUnder('bench', (n) => /\.(ts|cjs|mjs)$/.test(n)),
  ...filesUnder('test', (n) => /\.(ts|mjs|c|h|sh)$/.test(n)).filter((f) => !f.startsWith('test/docs/') && f !== 'test/design/source-tree.test.ts'),
  ...filesUnder('deploy', () => true),
  ...filesUnder('packaging', (n) => /\.(ts|ps1|c|h|json|yaml|md)$/.test(n)),
  ...filesUnder('bin', () => true),
  '.ci/run',
];

t.test('no tracker numbers and no DESIGN.md in code, tests, scripts or manifests', async (t) => {
  t.ok(readable.length > sources.length, `files read (${readable.length})`);
  for (const f of readable) {
    const text = readFileSync(join(root, f), 'utf8');
    const hits = [...text.matchAll(/\bissue[- ]?#?\d+[a-z]?\b|\bstop \d+\b|\bwave \d+\b|DESIGN\.md/gi)].map((m) => m[0]);
    if (hits.length) t.same(hits, [], `${f}: says what a thing does, not which ticket it came from`);
  }
  t.pass('every file read');
});

t.test('every README section and docs/ page that code names is there', async (t) => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const headings = new Set([...readme.matchAll(/^#+ (.+)$/gm)].map((m) => m[1].trim()));
  let named = 0;
  for (const f of readable) {
    const text = readFileSync(join(root, f), 'utf8');
    for (const m of text.matchAll(/README(?:'s)?,? "([^"]+)"/g)) {
      named++;
      t.ok([...headings].some((h) => h.startsWith(m[1])), `${f}: README section "${m[1]}" exists`);
    }
    for (const m of text.matchAll(/\bdocs\/[\w./-]+\.md\b/g)) {
      named++;
      t.ok(existsSync(join(root, m[0])), `${f}: ${m[0]} exists`);
    }
  }
  t.ok(named >= 10, `code names the docs in places (${named})`);
  t.equal(relative(root, join(root, 'README.md')), 'README.md');
});
