// `blockspeaker install-cni`: on Linux for real (temporary folders as the host's CNI folders, the command run as a
// child with a tight umask): folders made 0755, the launcher, node and the plugin's files, the network config; a
// second run writes nothing, a changed config is rewritten alone; the installed launcher answers ADD and DEL through
// the Perl shim and through the Node.js plugin. The Windows flow runs in process on the Windows double: folders made
// admin-only, the plugin under both names, a running one moved aside, an existing folder others may write warned
// about, the config-built network config list as the daemon writes it. Bad flags are refused by name.
import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import path, { join } from 'node:path';
import { cniInvoke } from '../../src/daemon/cni-invoke.ts';
import { conflistText } from '../../src/daemon/conflist.ts';
import { installCni, LINUX_LAUNCHER, LINUX_LIB, planInstall, WINDOWS_NAMES } from '../../src/cli/install-cni.ts';
import { ADMIN_ONLY_DIR_SDDL } from '../../src/platform/dir-acl.ts';
import { cniEnv, runPlugin } from '../cni/helpers.ts';
import { startTestDaemon } from '../ipc/fixture.ts';
import { PROGRAMDATA_CHILD_SDDL, windowsDouble } from '../platform/windows-double.ts';

const root = new URL('../..', import.meta.url).pathname;
const bin = join(root, 'bin/blockspeaker.js');
const dir = fs.mkdtempSync(join(tmpdir(), `bs-install-cni-${process.pid}-`));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a child, from the sources, under umask 077 (so a 0755 folder is the command's doing). */
function cli(...args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };
    delete env.NODE_OPTIONS;
    const child = spawn('/bin/sh', ['-c', 'umask 077; exec /usr/bin/env -u NODE_OPTIONS "$@"', 'sh', process.execPath, bin, 'install-cni', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Every file under `d` with its inode and mtime: "nothing written" is this staying the same. */
function snapshot(d: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(d, { recursive: true, withFileTypes: true })) {
    const f = join(e.parentPath, e.name);
    const st = fs.statSync(f);
    out[path.relative(d, f)] = `${st.ino}:${st.mtimeMs}:${(st.mode & 0o7777).toString(8)}`;
  }
  return out;
}

const CONFLIST = `{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipam": { "type": "blockspeaker-cni", "socket": "SOCKET", "prefix": "pool" } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
`;

t.test('Linux: installs into folders that do not exist, then writes nothing; a changed config is rewritten alone', async (t) => {
  const host = join(dir, 'linux-host');
  const binDir = join(host, 'opt/cni/bin');
  const confDir = join(host, 'etc/cni/net.d');
  const cfg = join(dir, 'linux-10-blockspeaker.conflist');
  fs.writeFileSync(cfg, CONFLIST);
  const args = ['--bin-dir', binDir, '--conf-dir', confDir, '--conflist', cfg, '--from', root];

  const first = await cli(...args);
  t.equal(first.code, 0, first.stderr);
  t.equal(first.stderr, '', 'no warning');
  const lines = first.stdout.trim().split('\n');
  t.equal(lines[0], `${binDir}: created, mode 0755 (and its missing parents from ${host})`);
  t.equal(lines[1], `${confDir}: created, mode 0755 (and its missing parents from ${join(host, 'etc')})`);
  for (const d of [host, join(host, 'opt'), join(host, 'opt/cni'), binDir, join(host, 'etc'), join(host, 'etc/cni'), confDir, join(binDir, LINUX_LIB)]) {
    t.equal(fs.statSync(d).mode & 0o777, 0o755, `${path.relative(dir, d)}: 0755 under umask 077`);
  }
  const launcher = join(binDir, 'blockspeaker-cni');
  t.equal(fs.readFileSync(launcher, 'utf8'), LINUX_LAUNCHER, 'the launcher');
  t.equal(fs.statSync(launcher).mode & 0o777, 0o755, 'executable');
  const lib = join(binDir, LINUX_LIB);
  t.ok(fs.readFileSync(join(lib, 'node')).equals(fs.readFileSync(process.execPath)), 'node: this runtime');
  t.equal(fs.statSync(join(lib, 'node')).mode & 0o777, 0o755);
  for (const f of ['app/bin/blockspeaker-cni', 'app/bin/blockspeaker-cni-shim', 'app/package.json', 'app/dist/src/cni/main.js', 'app/dist/src/cni/plugin.js', 'app/dist/src/ipc/client.js']) {
    t.ok(fs.readFileSync(join(lib, f)).equals(fs.readFileSync(join(root, f.slice(4)))), `${f}: copied`);
  }
  t.equal(fs.statSync(join(lib, 'app/bin/blockspeaker-cni-shim')).mode & 0o777, 0o755);
  t.notOk(fs.existsSync(join(lib, 'app/node_modules')), 'no node_modules: the plugin uses node builtins only');
  t.equal(fs.readFileSync(join(confDir, 'linux-10-blockspeaker.conflist'), 'utf8'), CONFLIST, 'the network config, byte for byte, under its own name');
  t.match(first.stdout, `${launcher}: installed\n`);
  t.match(first.stdout, `${join(confDir, 'linux-10-blockspeaker.conflist')}: written\n`);

  const before = snapshot(host);
  const second = await cli(...args);
  t.equal(second.code, 0, second.stderr);
  t.same(second.stdout.trim().split('\n').filter((l) => !/: unchanged$/.test(l)), [], 'every line says unchanged');
  t.same(snapshot(host), before, 'nothing written: same inodes, mtimes and modes');

  fs.writeFileSync(cfg, CONFLIST.replace('"pool"', '"pool2"'));
  const third = await cli(...args);
  t.equal(third.code, 0, third.stderr);
  t.same(third.stdout.trim().split('\n').filter((l) => !/: unchanged$/.test(l)), [`${join(confDir, 'linux-10-blockspeaker.conflist')}: written`], 'only the network config');
  t.match(fs.readFileSync(join(confDir, 'linux-10-blockspeaker.conflist'), 'utf8'), /"pool2"/);
  const after = snapshot(host);
  for (const [f, v] of Object.entries(before)) if (!f.endsWith('.conflist') && f !== 'etc/cni/net.d') t.equal(after[f], v, `${f} untouched`);
});

t.test('Linux: the installed launcher runs the Perl shim, or the Node.js plugin without perl; ADD and DEL against a daemon', async (t) => {
  const binDir = join(dir, 'linux-run/opt/cni/bin');
  const r = await cli('--bin-dir', binDir, '--from', root);
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stdout, /conflist|net\.d/, 'no network config without -c or --conflist');
  const d = await startTestDaemon({ handlers: { 'cni.invoke': cniInvoke } });
  t.teardown(() => d.close());
  const net = JSON.parse(CONFLIST.replace('SOCKET', d.path));
  const conf = { cniVersion: net.cniVersion, name: net.name, ...net.plugins[0] };
  // The same launcher beside the real one, with a perl that does not exist: the Node.js plugin's path.
  const noPerl = join(binDir, 'blockspeaker-cni-noperl');
  fs.writeFileSync(noPerl, LINUX_LAUNCHER.replaceAll('/usr/bin/perl', join(dir, 'no-perl-here')), { mode: 0o755 });
  for (const [launcher, which] of [[join(binDir, 'blockspeaker-cni'), 'shim'], [noPerl, 'Node.js plugin']] as const) {
    const id = `pod-${which.length}`;
    const add = await runPlugin(cniEnv('ADD', id), conf, { bin: launcher, fromSource: false });
    t.equal(add.code, 0, `${which}: ADD exits 0 (${add.stdout}${add.stderr})`);
    t.match(add.json, { cniVersion: '1.0.0', ips: [{ address: /^10\.99\.0\.\d+\/24$/ }] }, `${which}: an address from the daemon`);
    const del = await runPlugin(cniEnv('DEL', id), conf, { bin: launcher, fromSource: false });
    t.equal(del.code, 0, `${which}: DEL exits 0 (${del.stdout}${del.stderr})`);
    const err = await runPlugin(cniEnv('ADD', id), { ...conf, ipam: { ...conf.ipam, socket: join(dir, 'nobody.sock') } }, { bin: launcher, fromSource: false });
    t.match(err.json.msg, which === 'shim' ? /^the blockspeaker daemon is not running/ : /^ADD: blockspeaker daemon is not running/, `${which} answered`);
  }
  t.same(d.errors, [], 'no failed requests at the daemon');
});

t.test('bad arguments are refused, naming the flag; nothing is written', async (t) => {
  const out = join(dir, 'bad');
  const ok = join(dir, 'ok.conflist');
  fs.writeFileSync(ok, CONFLIST);
  const cases: [string[], RegExp][] = [
    [['--bogus'], /^blockspeaker: install-cni: Unknown option '--bogus'/],
    [['--bin-dir', 'relative/bin'], /--bin-dir must be an absolute path, got "relative\/bin"/],
    [['--bin-dir', ''], /--bin-dir must not be empty/],
    [['--bin-dir', out, '--conf-dir', join(out, 'c')], /--conf-dir without -c or --conflist/],
    [['--bin-dir', out, '-c', join(dir, 'x.yaml'), '--conflist', ok], /-c \(--config\) and --conflist: give one of them/],
    [['--bin-dir', out, '--conflist', join(dir, 'missing.conflist')], /--conflist .*missing\.conflist: cannot read it: no such file/],
    [['--bin-dir', out, '--conflist', join(dir, 'ok.txt')], /--conflist .*ok\.txt: the name must end in \.conflist, \.conf or \.json/],
    [['--bin-dir', out, '--from', join(dir, 'nowhere')], /--from .*nowhere: no package\.json/],
  ];
  fs.writeFileSync(join(dir, 'ok.txt'), CONFLIST);
  fs.writeFileSync(join(dir, 'broken.conflist'), '{ "name": ');
  fs.writeFileSync(join(dir, 'empty.conflist'), '{ "name": "pods", "plugins": [] }');
  cases.push([['--bin-dir', out, '--conflist', join(dir, 'broken.conflist')], /--conflist .*broken\.conflist: not JSON/]);
  cases.push([['--bin-dir', out, '--conflist', join(dir, 'empty.conflist')], /--conflist .*empty\.conflist: a \.conflist needs a non-empty "plugins" list/]);
  fs.writeFileSync(join(dir, 'linux.yaml'), 'node: { name: n1 }\nipam: { store: /tmp/none, pools: [{ name: p, cidr: 10.9.0.0/16 }] }\ndataplane: { kind: linux }\n');
  cases.push([['--bin-dir', out, '-c', join(dir, 'linux.yaml')], /-c .*linux\.yaml: the config has no dataplane\.cni \(dataplane kind hns\).*pass --conflist FILE/]);
  for (const [args, want] of cases) {
    const r = await cli(...args);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2 (${r.stderr.trim()})`);
    t.match(r.stderr, want);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  t.notOk(fs.existsSync(out), 'nothing was made');
  const help = await cli('--help');
  t.equal(help.code, 0);
  t.match(help.stdout, /^usage: blockspeaker install-cni /);
  for (const f of ['-c, --config FILE', '--conflist FILE', '--bin-dir DIR', '--conf-dir DIR', '--from DIR']) t.match(help.stdout, `  ${f}`, `help: ${f}`);
});

t.test('a folder that cannot be written: exit 1, one line naming it', async (t) => {
  fs.writeFileSync(join(dir, 'a-file'), ''); // a file where a folder should be (root may write anywhere else)
  const r = await cli('--bin-dir', join(dir, 'a-file', 'bin'), '--from', root);
  t.equal(r.code, 1, r.stderr);
  t.match(r.stderr, new RegExp(`^blockspeaker: install-cni: cannot prepare the folder ${join(dir, 'a-file', 'bin')}: `));
  t.notMatch(r.stderr, /\n\s+at /);
});

t.test('Windows double: folders made admin-only, the plugin under both names, a running one moved aside', async (t) => {
  const w = windowsDouble();
  const base = join(dir, 'win');
  const pkg = join(base, 'pkg');
  fs.mkdirSync(pkg, { recursive: true });
  fs.writeFileSync(join(pkg, 'blockspeaker-cni.exe'), 'MZ v1');
  fs.writeFileSync(join(pkg, 'blockspeaker.exe'), 'MZ the CLI');
  const binDir = join(base, 'opt/cni/bin');
  const confDir = join(base, 'etc/cni/net.d');
  const conflist = join(base, '10-blockspeaker.conflist');
  fs.writeFileSync(conflist, CONFLIST);
  const ctx = { platform: w.platform, execPath: join(pkg, 'blockspeaker.exe') };
  const values = { 'bin-dir': binDir, 'conf-dir': confDir, conflist };

  const first = await installCni(planInstall(values, ctx));
  t.same(w.createdDirs, [join(base, 'opt'), join(base, 'opt/cni'), binDir, join(base, 'etc'), join(base, 'etc/cni'), confDir].map((d) => ({ dir: d, sddl: ADMIN_ONLY_DIR_SDDL })),
    'each missing folder and parent made by CreateDirectoryW with SYSTEM and Administrators only');
  t.match(first.lines[0], `${join(base, 'opt')}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} in one call (CreateDirectoryW), ${binDir} reads back`);
  t.same(first.warnings, []);
  for (const name of WINDOWS_NAMES) t.equal(fs.readFileSync(join(binDir, name), 'utf8'), 'MZ v1', `${name}: blockspeaker-cni.exe from this executable's folder`);
  t.same(fs.readdirSync(binDir).sort(), ['blockspeaker-cni.exe', 'blockspeaker.exe'], 'and nothing else (the plugin needs nothing beside it)');
  t.equal(first.conflist, 'written');
  t.equal(fs.readFileSync(join(confDir, '10-blockspeaker.conflist'), 'utf8'), CONFLIST);

  // An upgrade while a CNI call runs the main plugin.
  const running = w.execute(join(binDir, 'blockspeaker.exe'));
  fs.writeFileSync(join(pkg, 'blockspeaker-cni.exe'), 'MZ v2');
  const second = await installCni(planInstall(values, ctx), { now: () => 42 });
  const aside = join(binDir, `blockspeaker.exe.old-${process.pid}-42`);
  t.same(second.lines, [
    `${join(binDir, 'blockspeaker.exe')}: replaced (the old one is in use: moved aside to ${aside})`,
    `${aside}: kept, still in use (EPERM); a later install-cni removes it`,
    `${join(binDir, 'blockspeaker-cni.exe')}: replaced`,
    `${join(confDir, '10-blockspeaker.conflist')}: unchanged`,
  ], 'the folders exist now: nothing said about them');
  t.equal(running.path(), aside, 'the running CNI call keeps its image');
  for (const name of WINDOWS_NAMES) t.equal(fs.readFileSync(join(binDir, name), 'utf8'), 'MZ v2', `${name}: the new one`);
  running.exit();
  const third = await installCni(planInstall(values, ctx));
  t.same(third.lines.filter((l) => !/: unchanged$/.test(l)), [`${aside}: removed (replaced earlier, no longer in use)`], 'the leftover goes once free; the rest is unchanged');
  t.same(fs.readdirSync(binDir).sort(), ['blockspeaker-cni.exe', 'blockspeaker.exe']);
});

t.test('Windows double: an existing folder others may add files to is used, with a warning and the fix', async (t) => {
  const base = join(dir, 'win-wide');
  const binDir = join(base, 'bin');
  fs.mkdirSync(binDir, { recursive: true });
  fs.writeFileSync(join(base, 'blockspeaker-cni.exe'), 'MZ');
  const w = windowsDouble();
  w.dirSecurity.set(binDir, PROGRAMDATA_CHILD_SDDL); // Users may create files and folders in it (inherited)
  const r = await installCni(planInstall({ 'bin-dir': binDir, from: base }, { platform: w.platform, execPath: '/nowhere/blockspeaker.exe' }));
  t.equal(r.warnings.length, 1);
  t.match(r.warnings[0], `${binDir} lets others add or replace files: entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR (change) to BU (Users), inherited from its parent`);
  t.match(r.warnings[0], /the container runtime runs what is there as SYSTEM\. Fix \(as Administrator\): powershell -NoProfile -Command/);
  t.same(w.createdDirs, [], 'nothing created');
  t.equal(fs.readFileSync(join(binDir, 'blockspeaker.exe'), 'utf8'), 'MZ', 'installed all the same');
});

t.test('Windows double: -c builds the network config list as the daemon writes it, into dataplane.cni.confDir', async (t) => {
  const base = join(dir, 'win-config');
  fs.mkdirSync(base, { recursive: true });
  fs.writeFileSync(join(base, 'blockspeaker-cni.exe'), 'MZ');
  const confDir = join(base, 'net.d');
  const file = join(base, 'node.yaml');
  fs.writeFileSync(file, `node: { name: win-1, os: windows }
ipam:
  store: ${join(base, 'store')}
  pools: [{ name: b, cidr: 10.245.0.0/16 }, { name: a, cidr: 10.244.0.0/16 }]
dataplane:
  kind: hns
  network: pods
  mode: l2bridge
  cni: { confDir: ${confDir}, fileName: 05-pods.conflist, serviceCidr: 10.96.0.0/12, nodeSubnet: 10.0.0.0/24 }
ipc: { path: '\\\\.\\pipe\\bs-other' }
`);
  const w = windowsDouble();
  const ctx = { platform: w.platform, execPath: join(base, 'blockspeaker.exe') };
  const r = await installCni(planInstall({ 'bin-dir': join(base, 'bin'), config: file }, ctx));
  t.equal(r.conflist, 'written', r.lines.join('\n'));
  const text = fs.readFileSync(join(confDir, '05-pods.conflist'), 'utf8');
  const cni = { confDir, fileName: '05-pods.conflist', flavor: 'blockspeaker' as const, serviceCidr: '10.96.0.0/12', nodeSubnet: '10.0.0.0/24' };
  const pools = [{ cidr: '10.244.0.0/16', natOutgoing: false, disabled: false, allowedUses: ['Workload' as const] }, { cidr: '10.245.0.0/16', natOutgoing: false, disabled: false, allowedUses: ['Workload' as const] }];
  t.equal(text, conflistText(cni, 'pods', pools, { socket: '\\\\.\\pipe\\bs-other' }), 'pools sorted by CIDR, the socket that is not the default: what the daemon writes');
  t.match(JSON.parse(text), { name: 'pods', plugins: [{ type: 'blockspeaker', socket: '\\\\.\\pipe\\bs-other' }] });
  t.throws(() => planInstall({ 'bin-dir': join(base, 'bin'), config: file, 'conf-dir': join(base, 'elsewhere') }, ctx),
    { name: 'CliError', message: /--conf-dir .*elsewhere is not dataplane\.cni\.confDir .*net\.d of .*node\.yaml, where the daemon writes the list/ });
  t.throws(() => planInstall({ 'bin-dir': join(base, 'bin') }, { platform: w.platform, execPath: '/nowhere/blockspeaker.exe' }),
    { name: 'CliError', message: /no blockspeaker-cni\.exe in \/nowhere: pass --from DIR/ });
  const sandboxed = windowsDouble({ env: { CONTAINER_SANDBOX_MOUNT_POINT: base } });
  const plan = planInstall({ 'bin-dir': join(base, 'bin') }, { platform: sandboxed.platform, execPath: '/nowhere/blockspeaker.exe' });
  t.equal(plan.files[0]!.source, join(base, 'blockspeaker-cni.exe'), 'in a HostProcess container: from CONTAINER_SANDBOX_MOUNT_POINT');
});
