// deploy/linux/blockspeaker.yaml's install-cni init container, run for real: its command, rendered from the manifest
// (test/deploy/pod.ts: the host's folders moved into a temp dir, the image's /app is this checkout), installs a
// blockspeaker-cni launcher (with node and the plugin's files) into the "host", and the ConfigMap's network config. The
// launcher runs bin/blockspeaker-cni-shim (Perl, forwarding to the daemon) when the host has /usr/bin/perl and the
// Node.js plugin otherwise; both are driven here with the ConfigMap's own CNI config against a daemon stand-in.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cniInvoke } from '../../src/daemon/cni-invoke.ts';
import { startTestDaemon } from '../ipc/fixture.ts';
import { cniEnv, runPlugin } from '../cni/helpers.ts';
import { ETCD_SECRET, manifest, renderPod, repoRoot, type Obj, type RenderedContainer, type RenderedPod } from './pod.ts';

if (spawnSync('perl', ['-e', '1']).status !== 0) throw new Error('perl is missing (Debian: perl-base, which every Debian host has)');

const m = manifest('linux/blockspeaker.yaml');
const cm = m.configMap;

/** A clean environment for a container's process: no tap loaders, the container's env. */
function containerEnv(c: RenderedContainer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'NODE_OPTIONS' || /^_?TAP/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, BLOCKSPEAKER_FROM_SOURCE: '1', ...c.env };
}

/** The container's argv as a process here: the image's node is this node. */
export function hostArgv(c: RenderedContainer): [string, string[]] {
  const [cmd, ...args] = c.argv;
  return [cmd === 'node' ? process.execPath : cmd!, args];
}

/** Run the pod's install-cni init container. */
function runInstall(pod: RenderedPod): string {
  const c = pod.initContainers.find((x) => x.name === 'install-cni')!;
  const [cmd, args] = hostArgv(c);
  // Through env(1): tap's process hook would put its loaders back into NODE_OPTIONS.
  const r = spawnSync('/usr/bin/env', ['-u', 'NODE_OPTIONS', cmd, ...args], { encoding: 'utf8', env: containerEnv(c) });
  if (r.status !== 0) throw new Error(`install-cni failed (${r.status}): ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** Render the pod into `dir` and run its install-cni init container; the host's folders are under pod.host. */
function installInto(dir: string): { pod: RenderedPod; launcher: string; stdout: string } {
  const pod = renderPod(m, dir, { name: 'node-1', ip: '10.0.0.11' }, ETCD_SECRET, { '/app': repoRoot });
  return { pod, launcher: join(pod.host, 'opt/cni/bin/blockspeaker-cni'), stdout: runInstall(pod) };
}

/** The installed launcher with `perl` for /usr/bin/perl (a copy beside it: it finds its files from its own path). */
function launcherFor(installed: string, perl: string): string {
  if (perl === '/usr/bin/perl') return installed;
  const file = `${installed}-noperl`;
  writeFileSync(file, readFileSync(installed, 'utf8').replaceAll('/usr/bin/perl', perl));
  chmodSync(file, 0o755);
  return file;
}

t.test('install-cni, as the init container runs it, installs the launcher, what it runs, and the network config', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `deploy-cni-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { pod, launcher, stdout } = installInto(dir);
  const host = pod.host;
  t.ok(existsSync(launcher), "the launcher blockspeaker-cni is in the host's /opt/cni/bin");
  t.equal(statSync(launcher).mode & 0o777, 0o755, 'executable, writable by root only');
  const text = readFileSync(launcher, 'utf8');
  t.match(text.split('\n')[0], /^#!\/bin\/sh$/, 'a plain sh launcher');
  t.match(text, /\/usr\/bin\/perl .*blockspeaker-cni-shim/, 'the shim with the host perl');
  t.equal(readFileSync(join(host, 'etc/cni/net.d/10-blockspeaker.conflist'), 'utf8'), pod.text(cm.data['10-blockspeaker.conflist']),
    'the network config, as the ConfigMap has it');
  t.ok(stdout.trim(), `install-cni says what it did (${stdout.trim().split('\n').length} lines)`);
  // Installing again (a DaemonSet rollout, a container restart) changes nothing.
  const again = runInstall(pod);
  t.equal(readFileSync(launcher, 'utf8'), text, 'idempotent');
  t.notMatch(again, /: (installed|replaced|written)\b/, `the second run writes nothing (${again.trim().split('\n')[0]} ...)`);
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
    const bin = launcherFor(launcher, perl);
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
