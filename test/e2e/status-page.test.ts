// The status page in a real browser: headless Chromium (Debian's `chromium`, driven over the DevTools protocol on
// a pipe, test/kit/cdp.ts) loads http://127.0.0.1:9179/ from a daemon peered with BIRD in a namespace lab:
//
//   [ours: blockspeaker run + chromium] ── veth ── [BIRD, AS 65001, announces 10.77.0.0/24]
//
// and reads the rendered DOM: the peer Established with BIRD's prefix received, the pool and this node's block with
// its utilisation, a lookup for an address in BIRD's prefix returns it, garbage in the lookup box shows the daemon's
// error, a warning made of HTML shows as text. A screenshot is saved (its path printed; copied to
// $BLOCKSPEAKER_ARTIFACTS when set). Then BIRD stops and the page turns the peer down within two refreshes of the
// daemon knowing it, and when the daemon stops the page says it is unreachable and keeps its last view.
//
// Needs root, bird2, iproute2 and chromium; interopGate/REQUIRE_PEERS=1 decide skip vs fail.
import t from 'tap';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { interopGate, requirePeers } from '../kit/interop/gate.ts';
import { createLink, execInNetns, runInNetns } from '../kit/interop/netns.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { Browser, CHROMIUM } from '../kit/cdp.ts';

const BIN = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const HOSTILE = '<img src=x onerror="document.title=\'owned\'">';
const BIRD_PREFIX = '10.77.0.0/24';

/** No tap loaders in the child (a runtime would not have them); the sources under test. */
function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'NODE_OPTIONS' && !/^_?TAP/i.test(k)) env[k] = v;
  return { ...env, BLOCKSPEAKER_FROM_SOURCE: '1' };
}

const gate = interopGate(t, ['bird']);
if (!gate && !CHROMIUM) {
  const why = 'chromium not found: apt-get install chromium';
  if (requirePeers()) t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else t.comment(`skipping: ${why}`);
}

if (!gate && CHROMIUM) {
  t.test('the status page in headless Chromium, peered with BIRD', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), `bs-interop-${process.pid}-page-`));
    t.teardown(() => {
      if (process.env.KEEP_INTEROP !== '1') rmSync(dir, { recursive: true, force: true });
    });
    const link = await createLink({ name: 'page', t });
    const ours = link.local;
    const bird = await startPeer('bird', link, {
      asn: 65001, neighbors: [{ address: ours.v4, asn: 65010, holdTime: 9 }], announce: [BIRD_PREFIX],
    });

    const sock = join(dir, 'bs.sock');
    // A BGPConfiguration named neither "default" nor "node.<name>" is ignored with a warning that quotes its name:
    // the page must show that name as text. (An unknown kind would refuse the whole file, so the daemon would not start.)
    writeFileSync(join(dir, 'calico.yaml'), `apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: { name: '${HOSTILE.replace(/'/g, "''")}' }\nspec: {}\n`);
    const file = join(dir, 'node.yaml');
    writeFileSync(file, `node: { name: node-page, os: linux }
bgp:
  asn: 65010
  routerId: ${ours.v4}
  listen: false
  peers: [{ address: ${link.peer.v4}, asn: 65001, holdTime: 9 }]
ipam:
  store: ${join(dir, 'store')}
  calico: [calico.yaml]
  pools: [{ name: pods, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`);
    const log = join(dir, 'daemon.log');
    const daemon = runInNetns(ours.ns, process.execPath, [BIN, 'run', '-c', file, '--run-dir', dir], { logFile: log, env: childEnv() });
    t.teardown(() => {
      if (daemon.exitCode === null) daemon.kill('SIGKILL');
    });
    const logs = () => readFileSync(log, 'utf8').split('\n').slice(-20).join('\n');
    const curl = async (path: string) => JSON.parse((await execInNetns(ours.ns, '/usr/bin/curl', ['-s', `http://127.0.0.1:9179${path}`])).stdout);

    try {
      await bird.waitEstablished(ours.v4, 60_000);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${logs()}`);
    }
    await waitFor(async () => (await curl(`/peers/${link.peer.v4}`)).prefixes?.accepted === 1, { what: `our daemon accepted ${BIRD_PREFIX}`, timeoutMs: 30_000 });
    const assigned = await ipcRequest<AssignReply>(sock, 'ipam.assign', { handle: 'page-test', num4: 5, pools: ['pods'] });
    t.equal(assigned.ips.length, 5, 'five pod addresses assigned through the control socket');
    const block = assigned.ips[0]!.block;

    // ---- the browser, in our namespace (the status endpoint is bound to 127.0.0.1 there)
    const browser = Browser.launch({ userDataDir: join(dir, 'chromium'), netns: ours.ns.name, log: join(dir, 'chromium.log') });
    t.teardown(() => browser.close());
    const page = await browser.newPage();
    await page.goto('http://127.0.0.1:9179/?refresh=1');
    const dom = <T>(expr: string) => page.eval<T>(expr);
    const until = <T>(what: string, expr: string, timeoutMs = 30_000) =>
      waitFor(() => dom<T>(expr), { what: `the page: ${what}`, timeoutMs, intervalMs: 100 }).catch(async (e: Error) => {
        throw new Error(`${e.message}\n--- page text ---\n${await dom<string>('document.body.innerText').catch(() => '?')}`);
      });

    const row = await until<{ state: string; text: string }>('the BIRD peer Established',
      `(() => { const r = document.querySelector('tr[data-peer="${link.peer.v4}"]');
        return r && r.dataset.state === 'Established' && { state: r.querySelector('.state').textContent, text: r.innerText }; })()`);
    t.equal(row.state, 'Established', 'the peer row shows Established');
    t.match(row.text, /65001/, 'with its ASN');
    const counts = await dom<string[]>(`[...document.querySelectorAll('tr[data-peer="${link.peer.v4}"] td.num')].map((td) => td.textContent)`);
    t.same(counts.slice(0, 2), ['1', '1'], `${BIRD_PREFIX} received and accepted`);

    const pool = await until<string>('the pool', `(() => { const r = document.querySelector('tr[data-pool="pods"]'); return r && r.innerText; })()`);
    t.match(pool, /10\.244\.0\.0\/24/, 'the pool row shows its CIDR');
    const blk = await until<{ used: string; alloc: string; text: string }>('the block with its utilisation',
      `(() => { const b = document.querySelector('[data-block="${block}"]');
        return b && { used: b.querySelector('.used').textContent, alloc: b.querySelector('.bar .alloc').style.width, text: b.innerText }; })()`);
    t.equal(blk.used, '31.3% used', `block ${block}: 5 of 16 used`);
    t.equal(blk.alloc, '31.25%', 'the bar is 5/16 allocated');
    t.match(blk.text, /5 allocated · 11 free · 0 reserved/);
    const node = await dom<string>(`document.getElementById('node-facts').innerText`);
    t.match(node, /node-page/, 'node name');
    t.match(node, /65010/, 'ASN');
    t.match(node, new RegExp(ours.v4.replace(/\./g, '\\.')), 'router ID');
    t.equal(await dom<string>(`document.getElementById('node-ready').dataset.ready`), 'true', 'ready');

    // ---- escaping: the HTML warning is text; no element came of it
    const warn = await dom<{ text: string; imgs: number; title: string }>(
      `({ text: document.getElementById('warning-list').innerText, imgs: document.querySelectorAll('main img').length, title: document.title })`);
    t.ok(warn.text.includes(HOSTILE), 'the warning shows its HTML as text');
    t.equal(warn.imgs, 0, 'no element was made from it');
    t.equal(warn.title, 'blockspeaker node-page', 'and no script ran');

    // ---- route lookup through the box
    await page.typeAndEnter('#lpm-input', '10.77.0.42');
    const route = await until<{ prefix: string; text: string }>('the lookup result',
      `(() => { const r = document.getElementById('lpm-route'); return r && { prefix: r.dataset.prefix, text: r.innerText }; })()`);
    t.equal(route.prefix, BIRD_PREFIX, `10.77.0.42 is covered by BIRD's ${BIRD_PREFIX}`);
    t.match(route.text, new RegExp(`best\\s+${link.peer.v4.replace(/\./g, '\\.')}`), 'best path from BIRD');
    t.match(route.text, /65001/, 'AS path 65001');

    const shot = join(dir, 'status-page.png');
    await page.screenshot(shot);
    t.comment(`screenshot: ${shot}`);
    if (process.env.BLOCKSPEAKER_ARTIFACTS) {
      mkdirSync(process.env.BLOCKSPEAKER_ARTIFACTS, { recursive: true });
      copyFileSync(shot, join(process.env.BLOCKSPEAKER_ARTIFACTS, 'status-page.png'));
      t.comment(`screenshot copied to ${join(process.env.BLOCKSPEAKER_ARTIFACTS, 'status-page.png')}`);
    }
    t.ok(readFileSync(shot).subarray(1, 4).toString() === 'PNG', 'the screenshot is a PNG');

    // ---- garbage in the lookup box: the daemon's own message
    const daemonSays = (await curl('/routes?lpm=10.77.0.999%3Cb%3E')).error as string;
    await page.typeAndEnter('#lpm-input', '10.77.0.999<b>');
    const err = await until<{ text: string; bolds: number }>('the lookup error',
      `(() => { const e = document.getElementById('lpm-error'); return e && { text: e.textContent, bolds: document.querySelectorAll('#lpm-result b').length }; })()`);
    t.ok(daemonSays.length > 0, `the daemon says: ${daemonSays}`);
    t.equal(err.text, `HTTP 400: ${daemonSays}`, 'the page shows the daemon\'s error message');
    t.equal(err.bolds, 0, 'as text');

    // ---- BIRD goes away: the page follows within two refreshes of the daemon knowing
    await bird.stop();
    await waitFor(async () => (await curl(`/peers/${link.peer.v4}`)).state !== 'Established', { what: 'our daemon sees the session down', timeoutMs: 30_000 });
    const known = Number(await dom<string>('document.body.dataset.refreshes'));
    const down = await until<{ state: string; refreshes: number }>('the peer not Established',
      `(() => { const r = document.querySelector('tr[data-peer="${link.peer.v4}"]');
        return r && r.dataset.state !== 'Established' && { state: r.dataset.state, refreshes: Number(document.body.dataset.refreshes) }; })()`);
    t.ok(down.refreshes - known <= 2, `the page shows ${down.state} at refresh ${down.refreshes}, the daemon knew by refresh ${known}`);
    await page.screenshot(join(dir, 'status-page-peer-down.png'));
    t.comment(`screenshot: ${join(dir, 'status-page-peer-down.png')}`);

    const exited = new Promise<number | null>((r) => daemon.once('exit', (code) => r(code)));
    daemon.kill('SIGINT');
    t.equal(await exited, 0, 'the daemon stopped cleanly');
    // ---- the daemon gone: the page says so (and keeps retrying, with back-off) instead of going blank
    const conn = await until<string>('the page reporting the daemon unreachable',
      `(() => { const c = document.getElementById('conn'); return c.classList.contains('down') && c.textContent; })()`);
    t.match(conn, /^daemon unreachable \(.+\); retrying in \d+ s$/, conn);
    t.ok(await dom<boolean>(`document.querySelector('tr[data-peer="${link.peer.v4}"]') !== null`), 'the last view stays on the page');
  });
}
