// Every launcher of the daemon gives node the same flags and environment as bin/blockspeaker.js's own #! line
// (test/kit/launcher.ts reads it; today --max-semi-space-size=1, BENCHMARKS.md "Runtime flags and the status
// endpoint under load"), so they cannot drift apart: the Linux image and DaemonSet, the systemd unit, and on
// Windows (the single executable takes node flags from NODE_OPTIONS) the DaemonSet and the service installer.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { launcher, parseShebang } from '../kit/launcher.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const root = new URL('../..', import.meta.url).pathname;
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const { flags: FLAGS, env: ENV } = launcher(root);
const daemonSet = (p: string) => parseAllDocuments(read(p)).map((d) => d.toJS() as Obj).find((d) => d.kind === 'DaemonSet')!.spec.template.spec;
const env = { ...process.env };
delete env.NODE_OPTIONS; // tap's loaders
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

t.test('parseShebang: environment, then node, then its flags; anything else is refused', async (t) => {
  t.same(parseShebang('#!/usr/bin/env -S node --a=1 --b'), { env: {}, flags: ['--a=1', '--b'] });
  t.same(parseShebang('#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --a'), { env: { MALLOC_ARENA_MAX: '2' }, flags: ['--a'] });
  t.throws(() => parseShebang('#!/usr/bin/node --a'), /not an "#!\/usr\/bin\/env -S" line/);
  t.throws(() => parseShebang('#!/usr/bin/env -S bun --a'), /runs "bun", not node/);
  t.throws(() => parseShebang('#!/usr/bin/env -S node script.js'), /passes "script.js" to node/);
});

t.test("bin/blockspeaker.js: the #! line's interpreter takes the flags, and running the file directly works", async (t) => {
  t.ok(FLAGS.length > 0, `the launcher's flags: ${FLAGS.join(' ')}`);
  const [interp, ...args] = read('bin/blockspeaker.js').split('\n')[0]!.slice(2).split(' ');
  const r = spawnSync(interp!, [...args, '-p', 'process.execArgv.join(" ")'], { encoding: 'utf8', env });
  t.equal(r.status, 0, r.stderr);
  t.same(r.stdout.trim().split(' ').slice(0, FLAGS.length), FLAGS, `node runs with the flags (execArgv: ${r.stdout.trim()})`);
  const help = spawnSync(join(root, 'bin/blockspeaker.js'), ['--help'], { encoding: 'utf8', env });
  t.equal(help.status, 0, help.stderr);
  t.match(help.stdout, /usage: blockspeaker/);
});

t.test('Linux: image entrypoint, DaemonSet, systemd unit', async (t) => {
  const entry = JSON.stringify(['node', ...FLAGS, '/app/bin/blockspeaker.js']).replaceAll(',', ', ');
  t.match(read('deploy/linux/Dockerfile'), new RegExp(`^ENTRYPOINT ${escape(entry)}$`, 'm'), 'the image entrypoint');
  const main = daemonSet('deploy/linux/blockspeaker.yaml').containers[0];
  t.same((main.command as string[]).slice(0, FLAGS.length + 2), ['node', ...FLAGS, '/app/bin/blockspeaker.js'], 'the DaemonSet runs node with the flags');
  const unit = read('deploy/systemd/blockspeaker.service');
  t.match(unit, new RegExp(`^ExecStart=/usr/bin/node ${escape(FLAGS.join(' '))} /opt/blockspeaker/bin/blockspeaker.js run `, 'm'), 'the unit');
  for (const [k, v] of Object.entries(ENV)) {
    t.match(read('deploy/linux/Dockerfile'), new RegExp(`^ENV ${k}=${escape(v)}$`, 'm'), `the image sets ${k}`);
    t.same((main.env as Obj[] | undefined)?.find((e) => e.name === k), { name: k, value: v }, `the DaemonSet sets ${k}`);
    t.match(unit, new RegExp(`^Environment=${k}=${escape(v)}$`, 'm'), `the unit sets ${k}`);
  }
});

t.test('Windows: the HostProcess DaemonSet and the service installer set NODE_OPTIONS to the flags', async (t) => {
  const options = FLAGS.join(' ');
  const main = daemonSet('deploy/windows/blockspeaker.yaml').containers[0];
  t.same((main.env as Obj[]).find((e) => e.name === 'NODE_OPTIONS'), { name: 'NODE_OPTIONS', value: options });
  t.match(read('packaging/windows/install.ps1'), `-Name 'Environment' -PropertyType MultiString -Value @('NODE_OPTIONS=${options}')`, 'the service\'s environment (its registry Environment value)');
  // NODE_OPTIONS accepts every flag (not all are allowed there: --single-threaded is not), and gives the same heap as
  // the command line: V8's heap limit counts the young generation (3 x the semi-space), so it shows the flag works.
  const limit = (args: string[], nodeOptions?: string) => {
    const r = spawnSync(process.execPath, [...args, '-p', 'require("v8").getHeapStatistics().heap_size_limit'], { encoding: 'utf8', env: { ...env, ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}) } });
    t.equal(r.status, 0, r.stderr);
    return Number(r.stdout);
  };
  const viaOptions = limit([], options);
  t.equal(viaOptions, limit(FLAGS), 'NODE_OPTIONS gives the heap the command line gives');
  t.not(viaOptions, limit([]), 'and not the default heap');
});
