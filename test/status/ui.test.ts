// The status page and the Grafana dashboard against a running daemon (child process, loopback): the page, its
// script and stylesheet are served with a strict content-security policy and stay under 100 KB; the script compiles
// and never writes HTML; /overview carries what the page shows (a borrowed address with its block and host too);
// unknown paths are 404 JSON; every metric the dashboard queries exists in the daemon's /metrics. The page in a real
// browser: test/e2e/status-page.test.ts.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { borrowedFrom } from '../../src/daemon/overview.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { openFileStore } from '../../src/store/file.ts';
import { APP_JS, INDEX_HTML, STYLE_CSS } from '../../src/status/ui/assets.ts';
import { startTestDaemon } from '../kit/daemon.ts';
import { waitFor } from '../kit/wait.ts';

const HOSTILE = '<img src=x onerror="document.title=1">';
const DASHBOARD = new URL('../../deploy/grafana/blockspeaker.json', import.meta.url).pathname;

t.test('the embedded files: small, a script that compiles and builds its DOM without HTML strings', async (t) => {
  const total = Buffer.byteLength(INDEX_HTML) + Buffer.byteLength(APP_JS) + Buffer.byteLength(STYLE_CSS);
  t.ok(total < 100 * 1024, `page + script + stylesheet = ${total} bytes (< 100 KB)`);
  t.doesNotThrow(() => new Script(APP_JS, { filename: 'app.js' }), 'app.js compiles');
  t.notMatch(APP_JS, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/, 'no HTML parsing or eval in the script');
  t.notMatch(INDEX_HTML, /<script>|<script [^>]*>[^<]/, 'no inline script in the page (the CSP forbids it anyway)');
  t.notMatch(INDEX_HTML + APP_JS + STYLE_CSS, /https?:\/\/(?!www\.w3)/, 'nothing loaded from another origin');
});

t.test('borrowed addresses are matched to the block and host they come from', async (t) => {
  const blocks = [
    { cidr: '10.0.0.0/28', pool: 'p', affinity: 'a', os: 'linux' as const, borrowable: true, size: 16, allocated: 1, free: 15, reserved: 0 },
    { cidr: '10.0.0.16/28', pool: 'p', affinity: 'b', os: 'linux' as const, borrowable: true, size: 16, allocated: 2, free: 14, reserved: 0 },
    { cidr: '10.0.0.32/32', pool: 'p', affinity: 'a', os: 'linux' as const, borrowable: true, size: 1, allocated: 1, free: 0, reserved: 0 },
    { cidr: '10.0.0.48/28', pool: 'p', affinity: null, os: 'linux' as const, borrowable: true, size: 16, allocated: 1, free: 15, reserved: 0 },
  ];
  const announced = ['10.0.0.0/28', '10.0.0.17/32', '10.0.0.32/32', '10.0.0.50/32', '10.9.9.9/32'].map(parsePrefix);
  t.same(borrowedFrom(announced, blocks, 'a'), [
    { address: '10.0.0.17', block: '10.0.0.16/28', from: 'b' },
    { address: '10.0.0.50', block: '10.0.0.48/28', from: null },
    { address: '10.9.9.9', block: null, from: null },
  ], 'own aggregates and own /32 blocks are not borrows; a borrow outside any block says so');
});

t.test('a running daemon serves the page, /overview, 404 JSON, and every metric the dashboard uses', async (t) => {
  // A BGPConfiguration whose name is HTML is ignored (neither "default" nor "node.<name>") with a warning quoting the
  // name: it reaches /warnings and the page as text. (An unknown kind would refuse the file and stop the start.)
  const d = await startTestDaemon('bs-ui', { name: 'node-ui', asn: 65010, routerId: '10.0.0.1', poolCidr: '10.244.0.0/27',
    calicoManifest: `apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: { name: '${HOSTILE}' }\nspec: {}\n` }, t);
  const a = await ipcRequest<AssignReply>(d.socket, 'ipam.assign', { handle: 'ui-test', num4: 3, pools: ['pods'] });
  t.equal(a.ips.length, 3, 'three addresses assigned through the control socket');

  const page = await d.get('/');
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  t.match(page.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'/);
  t.equal(page.headers.get('x-content-type-options'), 'nosniff');
  t.equal(page.text, INDEX_HTML, 'the page is the embedded one');
  const js = await d.get('/ui/app.js');
  t.match(js.headers.get('content-type'), /^text\/javascript/);
  t.equal(js.text, APP_JS);
  t.match((await d.get('/ui/style.css')).headers.get('content-type'), /^text\/css/);

  for (const path of ['/nope', '/ui/nope.js', '/ui', '/index.html']) {
    const r = await d.get(path);
    t.equal(r.status, 404, `${path}: 404`);
    t.match(r.headers.get('content-type'), /^application\/json/, `${path}: JSON`);
    t.match(r.body, { error: /no such endpoint/ }, `${path}: says why`);
  }
  const post = await fetch(`http://127.0.0.1:${d.port}/`, { method: 'POST' });
  t.equal(post.status, 405, 'POST / is refused');

  const o = (await d.get('/overview')).body;
  t.match(o.node, { name: 'node-ui', os: 'linux', asn: 65010, routerId: '10.0.0.1', ready: true, notReady: [] });
  t.match(o.peers, [{ address: '127.0.0.9', asn: 65001, state: /Idle|Connect|Active/ }], 'the configured peer, not up');
  t.match(o.ipam.pools, [{ name: 'pods', cidr: '10.244.0.0/27', blocks: 1, allocated: 3 }]);
  t.equal(o.ipam.blocks.length, 1, 'one block of this node');
  t.match(o.ipam.blocks[0], { pool: 'pods', affinity: 'node-ui', size: 16, allocated: 3, free: 13, utilisation: 0.1875 });
  t.same(o.ipam.announced, [o.ipam.blocks[0].cidr], 'the block is announced');
  t.same(o.ipam.borrowed, []);
  t.match(o.dataplane, { kind: 'none', errors: 0 });
  t.ok(o.warnings.entries.some((w: { message: string }) => w.message.includes(HOSTILE)), 'the hostile warning is in /overview as plain text');
  t.match(o.warnings, { evicted: 0, limit: 256 }, 'the warnings are a bounded list');
  t.same((await d.get('/warnings')).body, o.warnings, '/warnings is the same list');
  t.match((await d.get('/routes?lpm=not-an-ip')).body, { error: /not-an-ip|address/i }, 'a bad lookup names the problem');

  // ---- the dashboard's metric names against this daemon's /metrics
  const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const exprs: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if ((k === 'expr' || k === 'definition') && typeof x === 'string') exprs.push(x);
        else if (k === 'query' && typeof x === 'string') exprs.push(x);
        else walk(x);
      }
    }
  };
  walk(dash);
  const used = new Set(exprs.flatMap((e) => e.match(/\bblockspeaker_[a-z0-9_]+/g) ?? []));
  t.ok(used.size >= 10, `the dashboard queries ${used.size} metrics`);
  const metrics = (await d.get('/metrics')).text;
  for (const name of used) {
    const samples = metrics.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
    t.ok(samples.length > 0, `${name}: in /metrics with ${samples.length} sample(s)`);
  }
  t.match(metrics, /blockspeaker_node_info\{node="node-ui",os="linux",asn="65010",router_id="10\.0\.0\.1",version="[^"]+"\} 1/);
  t.match(metrics, new RegExp(`blockspeaker_ipam_block_addresses\\{block="${o.ipam.blocks[0].cidr.replace(/\./g, '\\.')}",pool="pods",state="allocated"\\} 3`));

  // ---- the dashboard's own shape: Grafana imports it as it is
  t.equal(dash.uid, 'blockspeaker');
  const panels = dash.panels.filter((p: { type: string }) => p.type !== 'row');
  t.same(new Set(dash.panels.map((p: { id: number }) => p.id)).size, dash.panels.length, 'panel ids are unique');
  for (const p of panels) {
    t.ok(p.targets?.length && p.targets.every((x: { expr: string }) => x.expr), `${p.title}: has queries`);
    t.equal(p.datasource?.uid, '${datasource}', `${p.title}: uses the datasource variable`);
  }
  for (const want of ['blockspeaker_bgp_peer_up', 'blockspeaker_bgp_prefixes', 'blockspeaker_bgp_updates_total', 'blockspeaker_ipam_addresses',
    'blockspeaker_ipam_block_addresses', 'blockspeaker_dataplane_errors_total', 'blockspeaker_dataplane_last_success_timestamp_seconds']) {
    t.ok(used.has(want), `the dashboard shows ${want}`);
  }

  // ---- a borrowed address, and from whom: node-b (this process, same store) takes the pool's other /28 block,
  // node-ui fills its own, and its next address comes from node-b's block.
  const other = await openFileStore(join(d.dir, 'store'));
  const ipamB = new Ipam(other);
  await ipamB.setHost({ name: 'node-b', os: 'linux', labels: {} });
  const b = await ipamB.autoAssign({ host: 'node-b', num4: 1, handle: 'b-pod', pools: ['pods'] });
  await other.close();
  const fill = await ipcRequest<AssignReply>(d.socket, 'ipam.assign', { handle: 'fill', num4: 13, pools: ['pods'] });
  t.ok(fill.ips.every((x) => !x.borrowed), "node-ui's block filled");
  const lent = await ipcRequest<AssignReply>(d.socket, 'ipam.assign', { handle: 'borrower', pools: ['pods'] });
  t.equal(lent.ips[0]!.block, b.ipv4[0]!.block, "the next address is in node-b's block");
  const seen = await waitFor('the borrowed address in /overview', async () => {
    const x = (await d.get('/overview')).body;
    return x.ipam.borrowed.length > 0 && x;
  }, 20_000, 100);
  t.same(seen.ipam.borrowed, [{ address: lent.ips[0]!.ip, block: b.ipv4[0]!.block, from: 'node-b' }], 'borrowed, with block and host');
  t.same(seen.ipam.blocks.map((x: { cidr: string }) => x.cidr), [o.ipam.blocks[0].cidr], "node-b's block is not listed as this node's");
  t.match(seen.ipam.pools, [{ name: 'pods', blocks: 2, allocated: 18 }]);
});
