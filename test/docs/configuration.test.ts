// docs/configuration.md says what the code does: its defaults table matches the validator (every row, and every
// default the validator fills in has a row), and every YAML config shown in README.md or under docs/ validates.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config/config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const configuration = readFileSync(join(root, 'docs', 'configuration.md'), 'utf8');

/** README.md and every page under docs/, by path. */
function pages(): [string, string][] {
  const under = (dir: string): string[] => readdirSync(join(root, dir), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? under(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : []));
  return ['README.md', ...under('docs')].map((p) => [p, readFileSync(join(root, p), 'utf8')]);
}

// A config with every section and one peer and pool, giving only what has no default.
const INPUT = {
  node: {},
  bgp: { asn: 65010, routerId: '10.0.0.2', peers: [{ address: '10.0.0.1', asn: 65001 }] },
  ipam: { pools: [{ name: 'p', cidr: '10.244.0.0/16' }] },
  dataplane: { kind: 'linux' },
  status: {},
  ipc: {},
};
const withDataplane = (dp: object, node: object = {}) => parseConfig(JSON.stringify({ ...INPUT, node, dataplane: dp }), 'configuration.md defaults') as unknown;
const linux = withDataplane({ kind: 'linux' });
// The HNS dataplane is for Windows nodes only (IPAM reserves its gateway and host endpoint in Windows blocks).
const hns = withDataplane({ kind: 'hns' }, { os: 'windows' });
const none = withDataplane({});

interface Row {
  field: string;
  qualifier: string | undefined;
  cell: string;
}

function rows(): Row[] {
  const m = /<!-- config-defaults[^>]*-->\n([\s\S]*?)<!-- \/config-defaults -->/.exec(configuration);
  if (!m) throw new Error('docs/configuration.md has no <!-- config-defaults --> table');
  return m[1].split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => {
      const [, f, cell] = l.split('|').map((x) => x.trim());
      const fm = /^`([^`]+)`(?: \((\w+)\))?$/.exec(f);
      if (!fm) throw new Error(`configuration.md defaults: bad field cell ${JSON.stringify(f)}`);
      return { field: fm[1], qualifier: fm[2], cell };
    });
}

/** Value at a dotted path; "x[]" steps into the first element of a list. */
function at(v: unknown, path: string): unknown {
  let cur = v;
  for (const part of path.split('.')) {
    const list = part.endsWith('[]');
    cur = (cur as Record<string, unknown> | undefined)?.[list ? part.slice(0, -2) : part];
    if (list) cur = (cur as unknown[] | undefined)?.[0];
  }
  return cur;
}

/** Dotted paths of every leaf (lists of objects by their first element, other lists and {} as leaves). */
function leaves(v: unknown, prefix = ''): string[] {
  if (Array.isArray(v)) {
    if (v.length && typeof v[0] === 'object' && v[0] !== null) return leaves(v[0], `${prefix}[]`);
    return [prefix];
  }
  if (typeof v === 'object' && v !== null && Object.keys(v).length) {
    return Object.entries(v).flatMap(([k, x]) => leaves(x, prefix ? `${prefix}.${k}` : k));
  }
  return [prefix];
}

t.test('the config defaults table in docs/configuration.md matches the validator', async (t) => {
  const table = rows();
  t.ok(table.length >= 20, `the table has rows (${table.length})`);
  const fields = new Set(table.map((r) => r.field));
  for (const r of table) {
    const cfg = r.qualifier === 'hns' ? hns : r.qualifier === 'linux' ? linux : r.field === 'dataplane.kind' ? none : linux;
    const actual = at(cfg, r.field);
    const code = [...r.cell.matchAll(/`([^`]+)`/g)].map((x) => x[1]);
    if (r.field === 'node.name') {
      t.equal(actual, hostname(), 'node.name: the host name');
      continue;
    }
    if (r.field === 'bgp.peers[].families') {
      t.same(actual, ['ipv4'], 'families: that of the (IPv4) peer address');
      t.same(at(parseConfig(JSON.stringify({ ...INPUT, bgp: { ...INPUT.bgp, peers: [{ address: 'fd00::1', asn: 1 }] } })), r.field), ['ipv6'],
        'families: that of the (IPv6) peer address');
      continue;
    }
    // "none: ..." (not quoted): an optional field the validator leaves out unless the file gives it.
    if (/^none\b/.test(r.cell)) {
      t.equal(actual, undefined, `${r.field}: absent unless given`);
      continue;
    }
    t.ok(code.length, `${r.field}: the default is quoted in backticks`);
    // A default named as another field ("`bgp.gracefulRestart`") is that field's value.
    if (fields.has(code[0])) {
      t.same(actual, at(cfg, code[0]), `${r.field} defaults to ${code[0]}`);
      continue;
    }
    // The first quoted value; a value the cell marks "on Windows" is the alternative on that platform.
    const accepted = [parseYaml(code[0])];
    const win = /`([^`]+)` on Windows/.exec(r.cell);
    if (win) accepted.push(parseYaml(win[1]));
    if (r.field === 'ipam.pools[].blockSize') {
      t.equal(at(parseConfig(JSON.stringify({ ...INPUT, ipam: { pools: [{ name: 'p6', cidr: 'fd00:10::/64' }] } })), r.field), parseYaml(code[1]),
        'blockSize: the IPv6 default');
    }
    t.ok(accepted.some((x) => JSON.stringify(x) === JSON.stringify(actual)),
      `${r.field}: configuration.md says ${accepted.map((x) => JSON.stringify(x)).join(' or ')}, the validator gives ${JSON.stringify(actual)}`);
  }
  // The other direction: every field the validator fills in is in the table (itself or a parent).
  const given = new Set(leaves(INPUT));
  const covered = (p: string) => p.split('.').some((_, i, a) => fields.has(a.slice(0, i + 1).join('.')));
  for (const cfg of [linux, hns]) {
    for (const p of leaves(cfg)) {
      if (given.has(p)) continue;
      t.ok(covered(p), `${p}: its default is in configuration.md's table`);
    }
  }
});

t.test('every config example in README.md and docs/ validates', async (t) => {
  let n = 0;
  for (const [page, md] of pages()) {
    for (const m of md.matchAll(/```yaml\n([\s\S]*?)```/g)) {
      const text = m[1]!;
      const docs = parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown> | null);
      // Config examples are one document that starts with the config's own sections; Kubernetes and Calico manifests
      // (kind:, often several documents) and fragments of a section are not configs.
      if (docs.length !== 1) continue;
      const doc = docs[0];
      if (!doc || typeof doc !== 'object' || 'kind' in doc || !('node' in doc || 'bgp' in doc || 'ipam' in doc)) continue;
      n++;
      t.doesNotThrow(() => parseConfig(text, page), `${page}: the example starting ${JSON.stringify(text.split('\n')[0])} validates`);
    }
  }
  t.ok(n >= 9, `README.md and docs/ have config examples (${n})`);
});
