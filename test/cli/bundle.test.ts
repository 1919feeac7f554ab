// `npm run build`'s bundle (scripts/bundle.ts, dist/bundle) runs the same CLI and daemon: built here into a temp dir,
// the daemon started from it on the demo config answers /readyz, assigns an address over its control socket, holds
// the store's lock (a second daemon on the same store is refused) and logs pino's JSON lines; bin/blockspeaker.js
// picks the bundle only when it is not older than tsc's output.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundle } from '../../scripts/bundle.ts';
import { IpcClient } from '../../src/ipc/client.ts';
import { freePort, waitFor } from '../kit/wait.ts';

const root = new URL('../..', import.meta.url).pathname;

t.test('the bundled daemon serves the demo config', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `bundle-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // Inside the repository, as dist/bundle is: the packages left outside the bundle resolve from node_modules.
  const out = join(root, 'dist', `bundle-test-${process.pid}`);
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  await bundle(out);
  const env = { ...process.env };
  delete env.NODE_OPTIONS;

  const help = spawnSync(process.execPath, [join(out, 'main.js'), '--help'], { encoding: 'utf8', env });
  t.equal(help.status, 0, 'help exits 0');
  t.match(help.stdout, /usage: blockspeaker <command>/);
  t.match(help.stdout, /run\s+run the node daemon/, 'subcommands are listed');

  const port = await freePort('127.0.0.1');
  const socket = join(dir, 'bs.sock');
  const config = readFileSync(join(root, 'fixtures/demo/node.yaml'), 'utf8')
    .replace('./var/blockspeaker.sock', socket)
    .replace('./var/blockspeaker', join(dir, 'store'))
    .replace('127.0.0.1:9179', `127.0.0.1:${port}`);
  writeFileSync(join(dir, 'node.yaml'), config);
  const args = [join(out, 'main.js'), 'run', '-c', join(dir, 'node.yaml'), '--run-dir', dir];
  const d = spawn(process.execPath, ['--max-semi-space-size=1', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env });
  let stderr = '';
  d.stderr!.on('data', (c) => (stderr += c));
  t.teardown(() => { d.kill('SIGKILL'); });
  await waitFor("the bundled daemon's /readyz", async () => {
    if (d.exitCode !== null) throw new Error(`the daemon exited: ${stderr}`);
    return fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
  }, 60_000);

  const client = new IpcClient(socket);
  t.teardown(() => client.close());
  const r = await client.call('ipam.assign', { handle: 'bundle-pod', num4: 1 });
  t.equal(r.ips.length, 1, 'one address assigned');
  t.match(r.ips[0]!.ip, /^10\.244\./, 'from the demo pool');

  const second = spawnSync(process.execPath, args, { encoding: 'utf8', env, timeout: 60_000 });
  t.not(second.status, 0, 'a second daemon on the same store is refused');
  t.match(second.stderr, /running|lock|already/i, 'and says why');

  const line = stderr.split('\n').find((l) => l.includes('"control socket listening"'));
  t.ok(line, 'pino JSON line for the control socket (pino without its transports)');
  t.match(JSON.parse(line!), { level: 30, node: 'node-a', msg: 'control socket listening' });
  const chunks = readdirSync(out).filter((f) => f.endsWith('.js')).map((f) => readFileSync(join(out, f), 'utf8')).join('\n');
  t.notMatch(chunks, /thread-stream|new Worker\(/, 'no worker-thread transport code in the bundle');
  t.match(chunks, /pino transports are not in the blockspeaker bundle/, 'pino.transport() says why instead');
});

t.test('bin/blockspeaker.js runs the bundle only when it is not older than dist/src', async (t) => {
  const src = readFileSync(join(root, 'bin/blockspeaker.js'), 'utf8');
  t.match(src, /mtime\(bundleUrl\) \?\? -1\) >= \(mtime\(compiledUrl\) \?\? 0\)/, 'the staleness rule');
});
