// deploy/linux/blockspeaker.yaml's install-cni step, run for real: its script (host paths moved into a temp dir)
// installs node, the app and a blockspeaker-cni launcher into the "host", and the network config. The launcher it
// writes runs bin/blockspeaker-cni-shim (Perl, forwarding to the daemon) when the host has /usr/bin/perl and the
// Node.js plugin otherwise; both are driven here with the ConfigMap's own CNI config against a daemon stand-in.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { cniInvoke } from '../../src/daemon/cni-invoke.ts';
import { startTestDaemon } from '../ipc/fixture.ts';
import { cniEnv, runPlugin } from '../cni/helpers.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const root = new URL('../..', import.meta.url).pathname;
if (spawnSync('perl', ['-e', '1']).status !== 0) throw new Error('perl is missing (Debian: perl-base, which every Debian host has)');

const [cm, ds] = ['ConfigMap', 'DaemonSet'].map((kind) =>
  parseAllDocuments(readFileSync(join(root, 'deploy/linux/blockspeaker.yaml'), 'utf8')).map((d) => d.toJS() as Obj).find((d) => d.kind === kind)!);
const install = (ds.spec.template.spec.initContainers as Obj[]).find((c) => c.name === 'install-cni')!;
const script = install.command[install.command.length - 1] as string;

/** The install script with the container's paths (/host, /app, /template, node) moved to `dir`. */
function installInto(dir: string): { host: string; launcher: string } {
  const host = join(dir, 'host');
  const app = join(dir, 'app');
  const template = join(dir, 'template');
  mkdirSync(join(app, 'bin'), { recursive: true });
  cpSync(join(root, 'bin'), join(app, 'bin'), { recursive: true }); // the image's /app/bin (the rest is not needed here)
  mkdirSync(template, { recursive: true });
  for (const [name, text] of Object.entries(cm.data as Record<string, string>)) writeFileSync(join(template, name), text);
  const moved = script
    .replaceAll('/host/', `${host}/`)
    .replaceAll('cp -r /app ', `cp -r ${app} `)
    .replaceAll('/template/', `${template}/`)
    .replaceAll('/usr/local/bin/node', process.execPath);
  const r = spawnSync('sh', ['-c', moved], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`install-cni failed (${r.status}): ${r.stderr}`);
  return { host, launcher: join(host, 'opt/cni/bin/blockspeaker-cni') };
}

/** The installed launcher with /opt/blockspeaker pointing at this checkout (the real app: dist and node_modules). */
function launcherFor(dir: string, installed: string, perl: string): string {
  const text = readFileSync(installed, 'utf8')
    .replaceAll('/opt/blockspeaker/app/', `${root}`)
    .replaceAll('/opt/blockspeaker/node', process.execPath)
    .replaceAll('/usr/bin/perl', perl);
  const file = join(dir, `blockspeaker-cni-${perl === '/usr/bin/perl' ? 'perl' : 'noperl'}`);
  writeFileSync(file, text);
  chmodSync(file, 0o755);
  return file;
}

t.test('install-cni installs node, the app, the launcher and the network config', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `deploy-cni-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { host, launcher } = installInto(dir);
  t.ok(statSync(launcher).mode & 0o111, 'the launcher is executable');
  t.ok(existsSync(join(host, 'opt/blockspeaker/node')), 'node copied to /opt/blockspeaker/node');
  t.ok(existsSync(join(host, 'opt/blockspeaker/app/bin/blockspeaker-cni-shim')), 'the shim is in the installed app');
  t.ok(existsSync(join(host, 'opt/blockspeaker/app/bin/blockspeaker-cni')), 'and the Node.js plugin');
  t.equal(readFileSync(join(host, 'etc/cni/net.d/10-blockspeaker.conflist'), 'utf8'), cm.data['10-blockspeaker.conflist'], 'the network config');
  const text = readFileSync(launcher, 'utf8');
  t.match(text.split('\n')[0], /^#!\/bin\/sh$/, 'a plain sh launcher');
  t.match(text, /^\[ -x \/usr\/bin\/perl \] && exec \/usr\/bin\/perl \/opt\/blockspeaker\/app\/bin\/blockspeaker-cni-shim "\$@"$/m, 'the shim first, with the host perl');
  t.match(text, /^exec \/opt\/blockspeaker\/node \/opt\/blockspeaker\/app\/bin\/blockspeaker-cni "\$@"$/m, 'the Node.js plugin without perl');
  // Installing again (a DaemonSet rollout) replaces everything in place.
  installInto(dir);
  t.equal(readFileSync(launcher, 'utf8'), text, 'idempotent');
});

t.test("the installed launcher: shim with perl, Node.js plugin without; ADD and DEL with the ConfigMap's CNI config", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `deploy-cni-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { launcher } = installInto(dir);
  const d = await startTestDaemon({ handlers: { 'cni.invoke': cniInvoke } });
  t.teardown(() => d.close());
  // The bridge plugin hands its ipam section to the IPAM plugin inside the network's config.
  const net = JSON.parse(cm.data['10-blockspeaker.conflist']) as Obj;
  const conf = { cniVersion: net.cniVersion, name: net.name, ...net.plugins[0], ipam: { ...net.plugins[0].ipam, socket: d.path } };
  const down = { ...conf, ipam: { ...conf.ipam, socket: join(dir, 'nobody.sock') } };

  for (const [perl, which] of [['/usr/bin/perl', 'shim'], [join(dir, 'no-perl-here'), 'Node.js plugin']] as const) {
    const bin = launcherFor(dir, launcher, perl);
    const id = `pod-${which.length}`;
    const add = await runPlugin(cniEnv('ADD', id), conf, { bin, fromSource: false });
    t.equal(add.code, 0, `${which}: ADD exits 0 (${add.stdout}${add.stderr})`);
    t.match(add.json, { cniVersion: net.cniVersion, ips: [{ address: /^10\.99\.0\.\d+\/24$/ }] }, `${which}: an address from the daemon's pool`);
    const del = await runPlugin(cniEnv('DEL', id), conf, { bin, fromSource: false });
    t.equal(del.code, 0, `${which}: DEL exits 0`);
    // Which program answered: each names a missing daemon in its own words.
    const err = await runPlugin(cniEnv('ADD', id), down, { bin, fromSource: false });
    t.match(err.json, { code: 11 }, `${which}: no daemon is CNI error 11 (try again later)`);
    t.match(err.json.msg, which === 'shim' ? /^the blockspeaker daemon is not running/ : /^ADD: blockspeaker daemon is not running/, `${which} answered`);
  }
  t.same(d.errors, [], 'no failed requests at the daemon');
});
