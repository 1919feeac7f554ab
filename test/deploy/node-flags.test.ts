// Every launcher of the daemon gives node --max-semi-space-size=1 (a 1 MB young generation: ~1.4 MB less idle RSS,
// BENCHMARKS.md "Footprint"): bin/blockspeaker.js's own #! line, the Linux image and DaemonSet, the systemd unit, and
// on Windows (the single executable takes node flags from NODE_OPTIONS) the DaemonSet and the service installer.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const root = new URL('../..', import.meta.url).pathname;
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const FLAG = '--max-semi-space-size=1';
const daemonSet = (p: string) => parseAllDocuments(read(p)).map((d) => d.toJS() as Obj).find((d) => d.kind === 'DaemonSet')!.spec.template.spec;
const env = { ...process.env };
delete env.NODE_OPTIONS; // tap's loaders

t.test("bin/blockspeaker.js: the #! line's interpreter takes the flag, and running the file directly works", async (t) => {
  const shebang = read('bin/blockspeaker.js').split('\n')[0]!;
  t.equal(shebang, `#!/usr/bin/env -S node ${FLAG}`);
  const [interp, ...args] = shebang.slice(2).split(' ');
  const r = spawnSync(interp!, [...args, '-p', 'process.execArgv.join(" ")'], { encoding: 'utf8', env });
  t.equal(r.status, 0, r.stderr);
  t.ok(r.stdout.trim().split(' ').includes(FLAG), `node runs with the flag (execArgv: ${r.stdout.trim()})`);
  const help = spawnSync(join(root, 'bin/blockspeaker.js'), ['--help'], { encoding: 'utf8', env });
  t.equal(help.status, 0, help.stderr);
  t.match(help.stdout, /usage: blockspeaker/);
});

t.test('Linux: image entrypoint, DaemonSet, systemd unit', async (t) => {
  t.match(read('deploy/linux/Dockerfile'), new RegExp(`^ENTRYPOINT \\["node", "${FLAG}", "/app/bin/blockspeaker.js"\\]$`, 'm'));
  const cmd = daemonSet('deploy/linux/blockspeaker.yaml').containers[0].command as string[];
  t.same(cmd.slice(0, 3), ['node', FLAG, '/app/bin/blockspeaker.js'], 'the DaemonSet runs node with the flag');
  t.match(read('deploy/systemd/blockspeaker.service'), new RegExp(`^ExecStart=/usr/bin/node ${FLAG} /opt/blockspeaker/bin/blockspeaker.js run `, 'm'));
});

t.test('Windows: the HostProcess DaemonSet and the service installer set NODE_OPTIONS', async (t) => {
  const main = daemonSet('deploy/windows/blockspeaker.yaml').containers[0];
  t.same((main.env as Obj[]).find((e) => e.name === 'NODE_OPTIONS'), { name: 'NODE_OPTIONS', value: FLAG });
  t.match(read('packaging/windows/install.ps1'), `'AppEnvironmentExtra', 'NODE_OPTIONS=${FLAG}'`);
  // NODE_OPTIONS accepts it (not every V8 flag is allowed there).
  const r = spawnSync(process.execPath, ['-p', 'require("v8").getHeapSpaceStatistics().length > 0'], { encoding: 'utf8', env: { ...env, NODE_OPTIONS: FLAG } });
  t.equal(r.status, 0, r.stderr);
});
