// deploy/: every manifest parses and says what blockspeaker needs: the kinds, pinned images, the host network,
// the state directory and control socket on the host, probes and scrape annotations on the status server's real
// endpoints and port, and a config in each ConfigMap that passes blockspeaker's own validation. The endpoints are
// checked on a real daemon started with the Linux ConfigMap's config (peers, dataplane and paths made local).
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { parseConfig, type Config } from '../../src/config/config.ts';
import { blockspeakerBin } from '../lib/cli.ts';
import { freePort } from '../store/etcd-harness.ts';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const file = (p: string) => readFileSync(new URL(`../../deploy/${p}`, import.meta.url), 'utf8');
const docs = (p: string): Obj[] => parseAllDocuments(file(p)).map((d) => {
  if (d.errors.length) throw new Error(`${p}: ${d.errors[0].message}`);
  return d.toJS() as Obj;
});
/** The ConfigMap's config as one node would get it (placeholders filled in by the init container). */
const render = (text: string) => text.replaceAll('__NODE_NAME__', 'node-7').replaceAll('__NODE_IP__', '10.0.0.7');

function check(t: Test, path: string, os: 'linux' | 'windows'): { cfg: Config; ds: Obj } {
  const all = docs(path);
  t.same(all.map((d) => d.kind).sort(), ['ConfigMap', 'DaemonSet'], `${path}: a ConfigMap and a DaemonSet`);
  const cm = all.find((d) => d.kind === 'ConfigMap')!;
  const ds = all.find((d) => d.kind === 'DaemonSet')!;
  const cfg = parseConfig(render(cm.data['node.yaml']), `${path} node.yaml`);
  t.equal(cfg.node.name, 'node-7', 'node name from the placeholder');
  t.equal(cfg.bgp?.routerId, '10.0.0.7', 'router ID from the placeholder');
  t.equal(cfg.node.os, os, `node.os ${os}`);
  const spec = ds.spec.template.spec;
  t.equal(ds.apiVersion, 'apps/v1');
  t.same(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'the selector matches the pod labels');
  t.equal(spec.nodeSelector['kubernetes.io/os'], os, `runs on ${os} nodes only`);
  t.equal(spec.hostNetwork, true, 'host network: BGP on the node address, routes in the node');
  for (const c of [...spec.initContainers, ...spec.containers]) {
    t.match(c.image, /^[a-z0-9.-]+\/[a-z0-9./-]+:\d+\.\d+(\.\d+)?$/, `${c.name}: image pinned to a version (${c.image})`);
  }
  const [main] = spec.containers;
  t.ok(cfg.status, 'the config serves the status endpoint');
  const port = cfg.status ? cfg.status.listen.port : -1;
  t.equal(cfg.status && cfg.status.listen.address, '0.0.0.0', 'status listens on every address: kubelet and Prometheus reach it on the node IP');
  t.same(main.readinessProbe.httpGet, { path: '/readyz', port }, 'readiness on /readyz at the status port');
  t.same(main.livenessProbe.httpGet, { path: '/healthz', port }, 'liveness on /healthz at the status port');
  const ann = ds.spec.template.metadata.annotations;
  t.same([ann['prometheus.io/scrape'], ann['prometheus.io/port'], ann['prometheus.io/path']], ['true', String(port), '/metrics'], 'Prometheus scrape annotations');
  // The CNI network config: our plugin as the main plugin (Windows) or as IPAM (Linux), talking to the daemon's socket.
  const conflist = JSON.parse(cm.data['10-blockspeaker.conflist']) as Obj;
  const plugin = conflist.plugins[0];
  if (os === 'windows') {
    t.equal(plugin.type, 'blockspeaker', 'the Windows CNI config names blockspeaker as the main plugin');
    t.equal(plugin.name, cfg.dataplane.kind === 'hns' ? cfg.dataplane.network : undefined, 'named after the HNS network');
    t.equal(plugin.socket, cfg.ipc && cfg.ipc.path, "the CNI plugin's socket is the daemon's ipc.path");
  } else {
    t.equal(plugin.ipam.type, 'blockspeaker-cni', 'the CNI config uses blockspeaker-cni as IPAM');
    t.equal(plugin.ipam.socket, cfg.ipc && cfg.ipc.path, "the CNI plugin's socket is the daemon's ipc.path");
  }
  // Every mount names a volume that exists.
  const vols = new Map((spec.volumes as Obj[]).map((v) => [v.name, v]));
  for (const c of [...spec.initContainers, ...spec.containers]) {
    for (const m of c.volumeMounts ?? []) t.ok(vols.has(m.name), `${c.name}: volume ${m.name} exists`);
  }
  return { cfg, ds };
}

t.test('Linux DaemonSet', async (t) => {
  const { cfg, ds } = check(t, 'linux/blockspeaker.yaml', 'linux');
  const spec = ds.spec.template.spec;
  const vols = new Map((spec.volumes as Obj[]).map((v) => [v.name, v]));
  const main = spec.containers[0];
  const hostPathAt = (mountPath: string) => {
    const m = (main.volumeMounts as Obj[]).find((x) => x.mountPath === mountPath);
    return m && vols.get(m.name)?.hostPath?.path;
  };
  t.equal(hostPathAt(cfg.ipam!.store), cfg.ipam!.store, 'the store directory is the same directory on the host');
  const sockDir = dirname(cfg.ipc ? cfg.ipc.path : '');
  t.equal(hostPathAt(sockDir), sockDir, 'the control socket is on the host, where the CNI plugin runs');
  const cmd = main.command as string[];
  t.same(cmd.slice(cmd.indexOf('run'), cmd.indexOf('run') + 3), ['run', '-c', '/config/node.yaml'], 'runs the daemon on the rendered config');
  t.equal(hostPathAt(cmd[cmd.indexOf('--run-dir') + 1]), cmd[cmd.indexOf('--run-dir') + 1], 'the running marker survives a container restart (graceful restart)');
  t.ok((main.volumeMounts as Obj[]).some((m) => m.mountPath === '/config' && vols.get(m.name)?.emptyDir), 'config rendered into an emptyDir');
  t.match(spec.initContainers.find((c: Obj) => c.name === 'install-cni').command.join(' '), /\/host\/opt\/cni\/bin\/blockspeaker-cni/, 'the CNI plugin is installed into the host CNI bin directory');
  t.equal(cfg.dataplane.kind, 'linux', 'programs the kernel');
});

t.test('Windows DaemonSet (HostProcess)', async (t) => {
  const { cfg, ds } = check(t, 'windows/blockspeaker.yaml', 'windows');
  const spec = ds.spec.template.spec;
  t.equal(spec.securityContext.windowsOptions.hostProcess, true, 'HostProcess pod');
  t.match(spec.securityContext.windowsOptions.runAsUserName, /^NT AUTHORITY\\(SYSTEM|system)$/i, 'runs as SYSTEM (HNS)');
  const install = spec.initContainers.find((c: Obj) => c.name === 'install-cni');
  const installText = install.command.join(' ');
  t.match(installText, /foreach \(\$name in 'blockspeaker\.exe', 'blockspeaker-cni\.exe'\)/, 'the plugin under both names: blockspeaker.exe (main) and blockspeaker-cni.exe (IPAM)');
  t.match(installText, /\$src\\blockspeaker-cni\.exe" "C:\\opt\\cni\\bin\\\$name\.new"/, 'copied into C:\\opt\\cni\\bin beside, then renamed over');
  t.match(install.command.join(' '), /10-blockspeaker\.conflist.*C:\\etc\\cni\\net\.d/s, 'and the network config into C:\\etc\\cni\\net.d');
  t.match(spec.containers[0].command.join(' '), /blockspeaker\.exe" run -c C:\\ProgramData\\blockspeaker\\node\.yaml/, 'runs blockspeaker.exe run -c on the rendered config');
  t.equal(cfg.dataplane.kind, 'hns', 'programs HNS');
  t.equal(cfg.ipc && cfg.ipc.path, '\\\\.\\pipe\\blockspeaker', 'control socket is a named pipe');
});

t.test('systemd unit and its config', async (t) => {
  const unit = file('systemd/blockspeaker.service');
  const sections = new Map<string, Map<string, string>>();
  let cur: Map<string, string> | undefined;
  for (const line of unit.split('\n')) {
    const s = /^\[(\w+)\]$/.exec(line);
    if (s) sections.set(s[1], (cur = new Map()));
    else if (cur && /^\w+=/.test(line)) cur.set(line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1));
  }
  t.same([...sections.keys()], ['Unit', 'Service', 'Install'], 'the three sections');
  const svc = sections.get('Service')!;
  t.match(svc.get('ExecStart'), / run -c \/etc\/blockspeaker\/node\.yaml/, 'ExecStart runs the daemon on /etc/blockspeaker/node.yaml');
  t.equal(svc.get('KillSignal'), 'SIGTERM', 'stop is SIGTERM (graceful restart)');
  t.match(svc.get('ExecReload'), /-HUP/, 'reload is SIGHUP');
  const cfg = parseConfig(file('systemd/node.yaml'), 'deploy/systemd/node.yaml');
  t.equal(cfg.ipam!.store, `/var/lib/${svc.get('StateDirectory')}`, 'the store is the StateDirectory');
  t.equal(dirname(cfg.ipc ? cfg.ipc.path : ''), `/run/${svc.get('RuntimeDirectory')}`, 'the socket is in the RuntimeDirectory');
  t.equal(sections.get('Install')!.get('WantedBy'), 'multi-user.target');
});

t.test("the probes' endpoints answer on a daemon run with the Linux ConfigMap's config", async (t) => {
  const cm = docs('linux/blockspeaker.yaml').find((d) => d.kind === 'ConfigMap')!;
  const doc = parseYaml(render(cm.data['node.yaml'])) as Obj;
  const dir = mkdtempSync(join(tmpdir(), 'bs-deploy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  // Local stand-ins for what needs root or a network: no peers, no kernel routes, paths in a temp dir.
  Object.assign(doc.bgp, { peers: [] });
  Object.assign(doc, { dataplane: { kind: 'none' }, status: { listen: `127.0.0.1:${port}` }, ipc: { path: join(dir, 'bs.sock') } });
  doc.ipam.store = join(dir, 'store');
  writeFileSync(join(dir, 'node.yaml'), JSON.stringify(doc));
  const env: NodeJS.ProcessEnv = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1' };
  delete env.NODE_OPTIONS; // tap's loaders: a real run would not have them
  const child = spawn(process.execPath, [blockspeakerBin, 'run', '-c', join(dir, 'node.yaml'), '--run-dir', dir], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  t.teardown(() => void child.kill('SIGKILL'));
  const get = async (path: string) => {
    try {
      const r = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: r.status, body: await r.text() };
    } catch {
      return { status: 0, body: '' };
    }
  };
  let ready = { status: 0, body: '' };
  for (let i = 0; i < 300 && ready.status !== 200 && child.exitCode === null; i++) {
    ready = await get('/readyz');
    if (ready.status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(ready.status, 200, `/readyz answers 200 once ready (${stderr.slice(-500)})`);
  t.equal((await get('/healthz')).status, 200, '/healthz answers 200');
  const metrics = await get('/metrics');
  t.equal(metrics.status, 200, '/metrics answers 200');
  t.match(metrics.body, /blockspeaker_ready 1/, '/metrics is Prometheus text');
});
