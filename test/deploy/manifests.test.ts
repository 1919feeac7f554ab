// deploy/: every manifest parses and says what blockspeaker needs. Each DaemonSet is rendered as a node would run
// it (test/deploy/pod.ts: the ConfigMap and Secret laid out as volumes, the downward API filled in) and its config
// goes through blockspeaker's own validation with the pod's environment: the node's name and address come from
// NODE_NAME and NODE_IP, the store is the Secret's etcd endpoints in Calico's layout, every file the config names is
// in the pod. The containers run blockspeaker itself (no shell, no PowerShell); probes and scrape annotations are on
// status.metricsListen, and status.listen stays on loopback. The endpoints are checked on a real daemon started with
// the Linux ConfigMap's config (layout switched to ours on a local store, peers and dataplane made local).
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { parseConfig, type Config } from '../../src/config/config.ts';
import { linuxPlatform, realDeps } from '../../src/platform/platform.ts';
import { openFileStore } from '../../src/store/file.ts';
import { blockspeakerBin } from '../kit/cli.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { ETCD_SECRET, manifest, renderPod, repoRoot, type Manifest, type Obj, type RenderedPod } from './pod.ts';

const NODE = { name: 'node-7', ip: '10.0.0.7' };
const IMAGE = { '/app': repoRoot };
const SHELLS = /^(sh|bash|ash|dash|busybox|powershell(\.exe)?|pwsh(\.exe)?|cmd(\.exe)?)$|[\\/](sh|bash|powershell\.exe|pwsh\.exe|cmd\.exe)$/i;

function rendered(t: Test, m: Manifest): { pod: RenderedPod; cfg: Config; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'bs-manifest-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pod = renderPod(m, dir, NODE, ETCD_SECRET, IMAGE);
  const main = pod.containers[0]!;
  const configFile = main.argv[main.argv.indexOf('-c') + 1]!;
  const cfg = parseConfig(readFileSync(configFile, 'utf8'), `${m.file} node.yaml`, linuxPlatform({ ...realDeps(), env: main.env }));
  return { pod, cfg, env: main.env };
}

/** Every peer of a shipped config has a max-prefix limit: a neighbour leaking a full table closes its session, not the node. */
function maxPrefixOnEveryPeer(t: Test, cfg: Config, where: string): void {
  const peers = cfg.bgp?.peers ?? [];
  t.ok(peers.length > 0, `${where}: the config has peers`);
  for (const p of peers) t.ok(p.maxPrefixes !== undefined, `${where}: peer ${p.address} has maxPrefixes (${JSON.stringify(p.maxPrefixes)})`);
  // The mesh is on when the store is shared (etcd) unless the config turns it off: its sessions need a limit too.
  const shared = typeof cfg.ipam?.store === 'string' ? /^etcds?:/.test(cfg.ipam.store) : cfg.ipam?.store !== undefined;
  if (cfg.bgp && (cfg.bgp.nodeToNodeMeshEnabled ?? shared)) {
    t.ok(cfg.bgp.nodeMeshMaxPrefixes !== undefined, `${where}: the node-to-node mesh is on, and its sessions have a max-prefix (${JSON.stringify(cfg.bgp.nodeMeshMaxPrefixes)})`);
  }
}

function check(t: Test, path: string, os: 'linux' | 'windows'): { m: Manifest; cfg: Config; pod: RenderedPod } {
  const m = manifest(path);
  t.same(m.docs.map((d) => d.kind).sort(), ['ConfigMap', 'DaemonSet'], `${path}: a ConfigMap and a DaemonSet`);
  const ds = m.daemonSet;
  const spec = m.pod;
  t.equal(ds.apiVersion, 'apps/v1');
  t.same(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'the selector matches the pod labels');
  t.equal(spec.nodeSelector['kubernetes.io/os'], os, `runs on ${os} nodes only`);
  t.equal(spec.hostNetwork, true, 'host network: BGP on the node address, routes in the node');
  const all = [...spec.initContainers, ...spec.containers] as Obj[];
  for (const c of all) {
    t.match(c.image, /^[a-z0-9.-]+\/[a-z0-9./-]+:\d+\.\d+(\.\d+)?$/, `${c.name}: image pinned to a version (${c.image})`);
    const argv = [...(c.command ?? []), ...(c.args ?? [])] as string[];
    t.notOk(argv.some((a) => SHELLS.test(a)), `${c.name}: runs blockspeaker itself, no shell or PowerShell (${argv.join(' ')})`);
    t.notOk(argv.some((a) => /__NODE_|\$\{?\w+|\$env:/.test(a)), `${c.name}: nothing in the command is left for a shell to expand`);
  }

  const { pod, cfg, env } = rendered(t, m);
  maxPrefixOnEveryPeer(t, cfg, path);
  t.equal(cfg.node.name, NODE.name, 'node.name from NODE_NAME (spec.nodeName)');
  t.equal(cfg.bgp?.routerId, NODE.ip, 'bgp.routerId from NODE_IP (status.hostIP)');
  t.equal(cfg.node.bgp?.ipv4Address, `${NODE.ip}/32`, "the node's registered address from NODE_IP");
  t.equal(env.NODE_NAME, NODE.name);
  t.equal(cfg.node.os, os, `node.os ${os}`);
  const text = m.configMap.data['node.yaml'] as string;
  t.notMatch(text, /__NODE_/, 'no placeholders: the environment fills in what the config leaves out');
  t.notMatch(text, /^\s*(name|routerId):/m, 'the config leaves the node name and router ID to the environment');

  // One datastore: the Secret's etcd endpoints, TLS, a user, Calico's layout; our layout one uncommented line away.
  t.equal(cfg.ipam?.store, 'etcds://10.0.0.5:2379,10.0.0.6:2379', "the store: the Secret's endpoints file (Calico's https:// form)");
  t.equal(cfg.ipam?.layout, 'calico', "Calico's layout");
  const etcd = cfg.ipam?.etcd ?? {};
  for (const f of [etcd.ca, etcd.cert, etcd.key, etcd.password && 'file' in etcd.password ? etcd.password.file : undefined]) {
    t.ok(f && existsSync(f) && f.startsWith(pod.volumes.get('etcd')!), `${f}: a file of the Secret volume`);
  }
  t.ok(etcd.username, 'an etcd user');
  t.match(text, /^\s*# layout: blockspeaker\b/m, 'a commented switch to our layout');
  const ours = parseConfig(pod.text(text.replace(/^(\s*)layout: calico\b.*$/m, '').replace(/^(\s*)# (layout: blockspeaker)/m, '$1$2')), 'switched',
    linuxPlatform({ ...realDeps(), env }));
  t.equal(ours.ipam?.layout, 'blockspeaker', 'uncommented (and the calico line dropped), it is our layout on the same etcd');
  t.equal(ours.ipam?.store, cfg.ipam?.store);

  // Two listeners: everything on loopback, the probes and Prometheus on metricsListen.
  const main = spec.containers[0] as Obj;
  t.ok(cfg.status, 'the config serves the status endpoint');
  const status = cfg.status as Exclude<Config['status'], false>;
  t.equal(status.listen.address, '127.0.0.1', 'status.listen (the page, /status, /routes, /ipam/*) on loopback');
  t.ok(status.metricsListen, 'status.metricsListen is set');
  const port = status.metricsListen?.port ?? -1;
  t.equal(status.metricsListen?.address, '0.0.0.0', "metricsListen on every address: kubelet and Prometheus reach it on the node's address");
  t.not(port, status.listen.port, 'another port than status.listen');
  t.same(main.readinessProbe.httpGet, { path: '/readyz', port }, 'readiness on /readyz at the metrics port');
  t.same(main.livenessProbe.httpGet, { path: '/healthz', port }, 'liveness on /healthz at the metrics port');
  t.same(main.ports, [{ name: 'metrics', containerPort: port, protocol: 'TCP' }], 'the metrics port, named');
  const ann = ds.spec.template.metadata.annotations;
  t.same([ann['prometheus.io/scrape'], ann['prometheus.io/port'], ann['prometheus.io/path']], ['true', String(port), '/metrics'], 'Prometheus scrape annotations');

  // The CNI network config: our plugin as the main plugin (Windows) or as IPAM (Linux), talking to the daemon's socket.
  const conflist = JSON.parse(m.configMap.data['10-blockspeaker.conflist']) as Obj;
  const plugin = conflist.plugins[0];
  if (os === 'windows') {
    t.equal(plugin.type, 'blockspeaker', 'the Windows CNI config names blockspeaker as the main plugin');
    t.equal(plugin.name, cfg.dataplane.kind === 'hns' ? cfg.dataplane.network : undefined, 'named after the HNS network');
    t.equal(plugin.socket, cfg.ipc && cfg.ipc.path, "the CNI plugin's socket is the daemon's ipc.path");
  } else {
    t.equal(plugin.ipam.type, 'blockspeaker-cni', 'the CNI config uses blockspeaker-cni as IPAM');
    t.equal(pod.text(plugin.ipam.socket), cfg.ipc && cfg.ipc.path, "the CNI plugin's socket is the daemon's ipc.path");
  }

  // The commands: install-cni with the ConfigMap's network config, then run -c on the ConfigMap's node.yaml.
  const install = pod.initContainers.find((c) => c.name === 'install-cni')!;
  t.ok(install, 'an install-cni init container');
  t.equal(spec.initContainers.length, 1, 'and no other init container (nothing renders or pre-creates anything)');
  const run = pod.containers[0]!;
  const before = (argv: string[], word: string) => argv.slice(0, argv.indexOf(word));
  t.same(before(install.argv, 'install-cni'), before(run.argv, 'run'), 'install-cni and run: subcommands of the same program');
  const conflistArg = install.argv[install.argv.indexOf('--conflist') + 1]!;
  t.equal(readFileSync(conflistArg, 'utf8'), pod.text(m.configMap.data['10-blockspeaker.conflist']), "install-cni --conflist: the ConfigMap's network config");
  t.same(run.argv.slice(run.argv.indexOf('run'), run.argv.indexOf('run') + 2), ['run', '-c'], 'the main container runs the daemon');
  t.equal(readFileSync(run.argv[run.argv.indexOf('-c') + 1]!, 'utf8'), pod.text(m.configMap.data['node.yaml']), "on the ConfigMap's node.yaml");
  t.same(main.env.filter((e: Obj) => e.valueFrom).map((e: Obj) => [e.name, e.valueFrom.fieldRef.fieldPath]),
    [['NODE_NAME', 'spec.nodeName'], ['NODE_IP', 'status.hostIP']], 'NODE_NAME and NODE_IP from the downward API');

  // Every mount names a volume, every volume is mounted.
  const vols = new Map((spec.volumes as Obj[]).map((v) => [v.name, v]));
  const mounted = new Set<string>();
  for (const c of all) {
    for (const mt of c.volumeMounts ?? []) {
      t.ok(vols.has(mt.name), `${c.name}: volume ${mt.name} exists`);
      mounted.add(mt.name);
    }
  }
  t.same([...vols.keys()].filter((v) => !mounted.has(v)), [], 'every volume is mounted');
  t.notOk((spec.volumes as Obj[]).some((v) => v.emptyDir), 'no emptyDir: nothing is rendered at start');
  return { m, cfg, pod };
}

t.test('Linux DaemonSet', async (t) => {
  const { m, cfg, pod } = check(t, 'linux/blockspeaker.yaml', 'linux');
  const spec = m.pod;
  const vols = new Map((spec.volumes as Obj[]).map((v) => [v.name, v]));
  const main = spec.containers[0];
  const hostPathAt = (mountPath: string) => {
    const mt = (main.volumeMounts as Obj[]).find((x) => x.mountPath === mountPath);
    return mt && vols.get(mt.name)?.hostPath?.path;
  };
  const sockDir = dirname(m.configMap.data['node.yaml'].match(/ipc: \{ path: (\S+) \}/)[1]);
  t.equal(hostPathAt(sockDir), sockDir, 'the control socket is on the host, where the CNI plugin runs');
  t.equal(pod.text(sockDir), dirname(cfg.ipc ? cfg.ipc.path : ''));
  const cmd = main.command as string[];
  t.equal(hostPathAt(cmd[cmd.indexOf('--run-dir') + 1]), cmd[cmd.indexOf('--run-dir') + 1], 'the running marker survives a container restart (graceful restart)');
  t.equal(vols.get('etcd')?.secret?.defaultMode, 0o400, 'the Secret is readable by root only');
  const install = spec.initContainers[0] as Obj;
  const target = (flag: string) => {
    const at = install.command[install.command.indexOf(flag) + 1];
    const mt = (install.volumeMounts as Obj[]).find((x) => x.mountPath === at);
    return mt && vols.get(mt.name)?.hostPath?.path;
  };
  t.equal(target('--bin-dir'), '/opt/cni/bin', 'install-cni --bin-dir: the host CNI bin folder');
  t.equal(target('--conf-dir'), '/etc/cni/net.d', 'install-cni --conf-dir: the host CNI config folder');
  t.equal(cfg.dataplane.kind, 'linux', 'programs the kernel');
});

t.test('Windows DaemonSet (HostProcess)', async (t) => {
  const { m, cfg } = check(t, 'windows/blockspeaker.yaml', 'windows');
  const spec = m.pod;
  t.equal(spec.securityContext.windowsOptions.hostProcess, true, 'HostProcess pod');
  t.match(spec.securityContext.windowsOptions.runAsUserName, /^NT AUTHORITY\\(SYSTEM|system)$/i, 'runs as SYSTEM (HNS)');
  for (const c of [...spec.initContainers, ...spec.containers] as Obj[]) {
    t.equal(c.command[0], '%CONTAINER_SANDBOX_MOUNT_POINT%/blockspeaker.exe', `${c.name}: runs the image's blockspeaker.exe (hcsshim expands the variable)`);
  }
  const install = spec.initContainers[0] as Obj;
  t.same(install.command.slice(1, 2), ['install-cni'], 'install-cni: C:\\opt\\cni\\bin and C:\\etc\\cni\\net.d, its Windows defaults');
  t.notOk((spec.volumes as Obj[]).some((v) => v.hostPath), 'no hostPath: a HostProcess container sees the host itself, the daemon makes its folders');
  t.equal(cfg.dataplane.kind, 'hns', 'programs HNS');
  t.equal(cfg.ipc && cfg.ipc.path, '\\\\.\\pipe\\blockspeaker', 'control socket is a named pipe');
  t.equal(cfg.ipam?.strictAffinity, true, "strict affinity on (Calico's rule for Windows blocks)");
});

t.test('systemd unit and its config', async (t) => {
  const unit = readFileSync(join(repoRoot, 'deploy/systemd/blockspeaker.service'), 'utf8');
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
  const cfg = parseConfig(readFileSync(join(repoRoot, 'deploy/systemd/node.yaml'), 'utf8'), 'deploy/systemd/node.yaml');
  maxPrefixOnEveryPeer(t, cfg, 'deploy/systemd/node.yaml');
  t.equal(cfg.ipam!.store, `/var/lib/${svc.get('StateDirectory')}`, 'the store is the StateDirectory');
  t.equal(dirname(cfg.ipc ? cfg.ipc.path : ''), `/run/${svc.get('RuntimeDirectory')}`, 'the socket is in the RuntimeDirectory');
  t.equal(sections.get('Install')!.get('WantedBy'), 'multi-user.target');
  // systemd creates the StateDirectory with StateDirectoryMode (0755 when unset); the store must open in it.
  const mode = Number.parseInt(svc.get('StateDirectoryMode') ?? '0755', 8);
  const parent = mkdtempSync(join(tmpdir(), 'bs-unit-'));
  try {
    const dir = join(parent, 'blockspeaker');
    mkdirSync(dir, { mode });
    chmodSync(dir, mode);
    const store = await openFileStore(dir);
    await store.close();
    t.pass(`the store opens in a StateDirectory made with mode ${mode.toString(8).padStart(4, '0')}`);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

t.test('every peer of every shipped config (deploy/, the Windows package) has a max-prefix limit', async (t) => {
  // Found by content, so a config added later is held to it too: YAML files with a bgp section, and ConfigMap values.
  const files = readdirSync(join(repoRoot, 'deploy'), { recursive: true, encoding: 'utf8' }).filter((f) => /\.ya?ml$/.test(f)).map((f) => `deploy/${f}`);
  files.push('packaging/windows/node.yaml');
  const configs: [string, Obj][] = [];
  for (const f of files) {
    for (const doc of parseAllDocuments(readFileSync(join(repoRoot, f), 'utf8')).map((d) => d.toJS() as Obj | null)) {
      if (doc?.bgp) configs.push([f, doc]);
      for (const [k, v] of Object.entries((doc?.kind === 'ConfigMap' && doc.data) || {})) {
        const inner = typeof v === 'string' && /\.ya?ml$/.test(k) ? (parseYaml(v) as Obj | null) : null;
        if (inner?.bgp) configs.push([`${f} ${k}`, inner]);
      }
    }
  }
  t.same(configs.map(([f]) => f).sort(), ['deploy/linux/blockspeaker.yaml node.yaml', 'deploy/systemd/node.yaml', 'deploy/windows/blockspeaker.yaml node.yaml', 'packaging/windows/node.yaml'],
    'the shipped configs');
  for (const [f, c] of configs) {
    const peers = (c.bgp.peers ?? []) as Obj[];
    t.ok(peers.length > 0, `${f}: has peers`);
    for (const p of peers) t.ok(p.maxPrefixes, `${f}: peer ${p.address} sets maxPrefixes`);
  }
});

t.test("the probes' endpoints answer on the metrics listener of a daemon run with the Linux ConfigMap's config", async (t) => {
  const m = manifest('linux/blockspeaker.yaml');
  const doc = parseYaml(m.configMap.data['node.yaml']) as Obj;
  const dir = mkdtempSync(join(tmpdir(), 'bs-deploy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [port, metricsPort] = [await freePort(), await freePort()];
  // Local stand-ins for what needs root, a network or etcd: no peers, no kernel routes, our layout on a directory.
  Object.assign(doc.bgp, { peers: [] });
  Object.assign(doc, { dataplane: { kind: 'none' }, ipc: { path: join(dir, 'bs.sock') } });
  doc.status = { listen: `127.0.0.1:${port}`, metricsListen: `127.0.0.1:${metricsPort}` };
  doc.ipam = { store: join(dir, 'store'), pools: doc.ipam.pools };
  writeFileSync(join(dir, 'node.yaml'), JSON.stringify(doc));
  const env: NodeJS.ProcessEnv = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1', NODE_NAME: 'node-7', NODE_IP: '10.0.0.7' };
  delete env.NODE_OPTIONS; // tap's loaders: a real run would not have them
  const child = spawn(process.execPath, [blockspeakerBin, 'run', '-c', join(dir, 'node.yaml'), '--run-dir', dir], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  t.teardown(() => void child.kill('SIGKILL'));
  const get = async (p: number, path: string) => {
    try {
      const r = await fetch(`http://127.0.0.1:${p}${path}`);
      return { status: r.status, body: await r.text() };
    } catch {
      return { status: 0, body: '' };
    }
  };
  let ready = { status: 0, body: '' };
  for (let i = 0; i < 300 && ready.status !== 200 && child.exitCode === null; i++) {
    ready = await get(metricsPort, '/readyz');
    if (ready.status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(ready.status, 200, `/readyz answers 200 once ready (${stderr.slice(-500)})`);
  t.equal((await get(metricsPort, '/healthz')).status, 200, '/healthz answers 200');
  const metrics = await get(metricsPort, '/metrics');
  t.equal(metrics.status, 200, '/metrics answers 200');
  t.match(metrics.body, /blockspeaker_ready 1/, '/metrics is Prometheus text');
  t.match(metrics.body, /blockspeaker_node_info\{[^}]*node="node-7"/, 'the node named by NODE_NAME');
  t.not((await get(metricsPort, '/routes')).status, 200, '/routes is not served on the metrics listener');
  t.equal((await get(port, '/routes')).status, 200, 'but on status.listen');
  const s = JSON.parse((await get(port, '/status')).body) as Obj;
  t.match(s, { node: 'node-7', routerId: '10.0.0.7' }, 'the node name from NODE_NAME, the router ID from NODE_IP');
});
