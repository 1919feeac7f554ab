// The reference pages name what the code has, both ways: every Prometheus metric the daemon defines is in
// docs/reference/metrics.md (and nothing else is), every path the status endpoint serves is in
// docs/reference/status-api.md, and every `blockspeaker` subcommand is in docs/reference/cli.md. The code is read as
// text (every file under src/), so a metric or route moved to another file is still found.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const doc = (name: string) => readFileSync(join(root, 'docs', 'reference', name), 'utf8');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
    return e.name.endsWith('.ts') ? [readFileSync(join(root, rel), 'utf8')] : [];
  });
}
const src = sources('src');

t.test('docs/reference/metrics.md lists exactly the metrics the daemon defines', async (t) => {
  const defined = new Set(src.flatMap((s) => [...s.matchAll(/\bname: '(blockspeaker_[a-z0-9_]+)'/g)].map((m) => m[1]!)));
  t.ok(defined.size >= 20, `the daemon defines metrics (${defined.size})`);
  const rows = new Set([...doc('metrics.md').matchAll(/^\| `(blockspeaker_[a-z0-9_]+)` \|/gm)].map((m) => m[1]!));
  for (const name of defined) t.ok(rows.has(name), `${name}: has a row`);
  for (const name of rows) t.ok(defined.has(name), `${name}: the daemon defines it`);
});

t.test('docs/reference/status-api.md names every path the status endpoint serves', async (t) => {
  const paths = new Set(src.flatMap((s) => [...s.matchAll(/\.route\('(\/[^']*)'/g)].map((m) => m[1]!)));
  t.ok(paths.size >= 15, `the daemon serves paths (${paths.size})`);
  const page = doc('status-api.md');
  for (const p of paths) {
    // "/peers/" is /peers/ADDR, "/ui/" the page's files under /ui/...
    const shown = p === '/peers/' ? '/peers/ADDR' : p === '/ui/' ? '/ui/...' : p;
    t.ok(page.includes(`\`${shown}`), `${p}: named on the page`);
  }
});

t.test('docs/reference/cli.md has a section for every blockspeaker subcommand', async (t) => {
  const main = readFileSync(join(root, 'src', 'cli', 'main.ts'), 'utf8');
  const table = main.slice(main.indexOf('const groups'), main.indexOf('};', main.indexOf('const groups')));
  const commands = [...table.matchAll(/^\s+'?([a-z-]+)'?: \{ describe:/gm)].map((m) => m[1]!);
  t.ok(commands.length >= 10, `main.ts has subcommands (${commands.length})`);
  const page = doc('cli.md');
  for (const c of commands) t.match(page, new RegExp(`^## .*\`(blockspeaker )?${c}\\b`, 'm'), `blockspeaker ${c}: has a section`);
});
