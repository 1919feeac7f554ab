// Received communities end to end: daemon A (AS 65001) puts communities on its routes with bgp.communities and
// bgp.prefixAdvertisements; daemon B (AS 65002) receives them and shows them in /routes (JSON) and in
// `blockspeaker show route` (text and --json) over its control socket.
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '../kit/wait.ts';

const bin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), `bs-comm-${process.pid}-`));
const children: ChildProcess[] = [];
t.teardown(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

t.test('communities a peer attached show in /routes and show route', async (t) => {
  const [bgpA, bgpB, stB] = [await freePort('127.0.0.1'), await freePort('127.0.0.2'), await freePort('127.0.0.1')];
  const sockB = join(dir, 'b.sock');
  writeFileSync(join(dir, 'a.yaml'), `node: { name: node-a }
bgp:
  asn: 65001
  routerId: 127.0.0.1
  listen: { address: 127.0.0.1, port: ${bgpA} }
  peers: [{ address: 127.0.0.2, asn: 65002, port: ${bgpB}, holdTime: 9 }]
  announce: [10.61.0.0/26, 10.62.0.0/24]
  communities: [{ name: pods, value: "65001:100" }]
  prefixAdvertisements: [{ cidr: 10.61.0.0/16, communities: [pods, "65001:7:8"] }]
status: false
ipc: false
`);
  writeFileSync(join(dir, 'b.yaml'), `node: { name: node-b }
bgp:
  asn: 65002
  routerId: 127.0.0.2
  listen: { address: 127.0.0.2, port: ${bgpB} }
  peers: [{ address: 127.0.0.1, asn: 65001, port: ${bgpA}, holdTime: 9 }]
status: { listen: "127.0.0.1:${stB}" }
ipc: { path: ${sockB} }
`);
  for (const f of ['a.yaml', 'b.yaml']) {
    const c = spawn(process.execPath, [bin, 'run', '-c', join(dir, f), '--run-dir', join(dir, f + '.run')], { stdio: 'ignore' });
    children.push(c);
  }
  const route = async (p: string) => {
    const r = await fetch(`http://127.0.0.1:${stB}/routes?prefix=${p}`);
    return r.status === 200 ? (await r.json() as { paths: { attributes: Record<string, unknown> }[] }).paths[0]!.attributes : undefined;
  };
  const a = await waitFor('B learns 10.61.0.0/26', () => route('10.61.0.0/26'), 60_000);
  t.same(a.COMMUNITIES, ['65001:100'], '/routes: the standard community');
  t.same(a.LARGE_COMMUNITY, ['65001:7:8'], '/routes: the large community');
  await waitFor('B learns 10.62.0.0/24', () => route('10.62.0.0/24'), 30_000);

  const text = spawnSync(process.execPath, [bin, 'show', '--socket', sockB, 'route'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(text.status, 0, text.stderr);
  t.match(text.stdout, /^PREFIX\s+NEXT HOP\s+SOURCE\s+AS PATH\s+ORIGIN\s+COMMUNITIES/);
  t.match(text.stdout, /10\.61\.0\.0\/26\s+127\.0\.0\.1\s+\S+\s+65001\s+\S+\s+65001:100 65001:7:8/, 'show route: the communities column');
  t.match(text.stdout, /10\.62\.0\.0\/24\s+127\.0\.0\.1\s+\S+\s+65001\s+\S+\s+-/, 'a route without communities: -');
  const json = spawnSync(process.execPath, [bin, 'show', '--socket', sockB, '--json', 'route', '10.61.0.0/26'], { encoding: 'utf8', timeout: 60_000 });
  t.same(JSON.parse(json.stdout)[0].communities, ['65001:100', '65001:7:8'], 'show route --json');
});
