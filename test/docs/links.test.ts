// The documentation holds together: README.md stays a front door (at most 200 lines), every relative Markdown link in
// README.md and docs/ points at a file or folder that exists (and, with a #anchor, at a heading that is there), every
// repository path named in backticks exists (so a moved file is caught here, not by a reader), and no page speaks in
// the project tracker's shorthand, which a reader who has never seen the tracker cannot follow.
import t from 'tap';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function markdownUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = join(dir, e.name);
    if (e.isDirectory()) return markdownUnder(rel);
    return e.name.endsWith('.md') ? [rel] : [];
  });
}

const pages = ['README.md', ...markdownUnder('docs')];
const text = new Map(pages.map((p) => [p, readFileSync(join(root, p), 'utf8')]));

/** The page without fenced code blocks and inline code spans: links and paths are looked for in the prose. */
function prose(md: string): string {
  return md.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '``');
}

/** GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen; repeats get -1, -2, ... */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of md.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = m[1]!.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

t.test('README.md is a front door of at most 200 lines', async (t) => {
  const lines = text.get('README.md')!.replace(/\n$/, '').split('\n').length;
  t.ok(lines <= 200, `README.md has ${lines} lines`);
  t.match(text.get('README.md')!, /^# blockspeaker\n\n```sh\nnpm ci && npm start .*\nnpm ci && npm test .*\n```\n/,
    'it opens with the two commands a newcomer runs: the demo and the tests');
  t.match(text.get('README.md')!, /\]\(docs\/README\.md\)/, 'it links the map of docs/');
});

t.test('every relative link points at something that exists', async (t) => {
  let n = 0;
  for (const [page, md] of text) {
    for (const m of prose(md).matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue; // http:, https:, mailto:
      n++;
      const [path, anchor] = href.split('#') as [string, string | undefined];
      const target = path === '' ? join(root, page) : resolve(root, dirname(page), decodeURIComponent(path));
      const shown = relative(root, target) || '.';
      if (!t.ok(existsSync(target), `${page}: ${href} (${shown} exists)`)) continue;
      if (anchor === undefined) continue;
      if (!statSync(target).isFile() || !target.endsWith('.md')) {
        t.fail(`${page}: ${href}: an anchor into ${shown}, which is not a Markdown page`);
        continue;
      }
      const md2 = text.get(relative(root, target)) ?? readFileSync(target, 'utf8');
      t.ok(anchors(md2).has(anchor), `${page}: ${href} (${shown} has a heading #${anchor})`);
    }
  }
  t.ok(n >= 100, `the pages link to each other (${n} relative links)`);
});

t.test('every repository path named in backticks exists', async (t) => {
  let n = 0;
  for (const [page, md] of text) {
    const noFences = md.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
    for (const m of noFences.matchAll(/`((?:src|test|bench|scripts|deploy|packaging|fixtures|bin|docs)\/[\w./-]*)`/g)) {
      n++;
      t.ok(existsSync(join(root, m[1]!)), `${page}: \`${m[1]}\` exists`);
    }
  }
  t.ok(n >= 100, `the pages name files of the repository (${n})`);
});

t.test('no tracker shorthand: the pages say what a thing does, not which ticket it came from', async (t) => {
  for (const [page, md] of text) {
    const hits = [...md.matchAll(/\bissue[- ]?#?\d+[a-z]?\b|\bstop \d+\b|\bwave \d+\b|DESIGN\.md/gi)].map((m) => m[0]);
    t.same(hits, [], `${page}: no "issue N", "stop N", "wave N" or DESIGN.md`);
  }
});
