// docs/guides/deploying.md is what an operator follows: its commands are checked against the manifests, both ways
// (as test/docs/configuration.test.ts checks docs/configuration.md against the code). Every `kubectl` command's
// namespace, resource, label
// and container exists in deploy/, the Secret it creates is the one the DaemonSets mount with exactly the keys their
// configs read, the etcd user and role it makes are the ones node.yaml names with the prefixes blockspeaker writes,
// the ports it names are the manifests'; and every DaemonSet, ConfigMap and Secret of the manifests is named there.
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { manifest, repoRoot, type Manifest, type Obj } from './pod.ts';

/** The whole guide: the deployment steps and the CNI plugin's installation. */
const section = readFileSync(join(repoRoot, 'docs', 'guides', 'deploying.md'), 'utf8');
/** The guide with every run of white space one space (it wraps lines inside `...`). */
const flat = section.replace(/\s+/g, ' ');
const manifests: Manifest[] = ['linux/blockspeaker.yaml', 'windows/blockspeaker.yaml'].map(manifest);

/** The section's shell commands: ```sh blocks, continuation lines joined, comments dropped, split into words. */
function commands(): string[][] {
  const out: string[][] = [];
  for (const m of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const text = m[1]!.replace(/\\\n\s*/g, ' ');
    for (const line of text.split('\n')) {
      const code = line.replace(/\s#\s.*$/, '').trim();
      if (!code || code.startsWith('#')) continue;
      out.push([...code.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((w) => w[1] ?? w[2] ?? w[3]!));
    }
  }
  return out;
}

/** A flag's values (`-n X`, `--from-file=K=V`, `-l X`), in order; kubectl's own (before `--`). */
function flag(all: string[], ...names: string[]): string[] {
  const words = all.includes('--') ? all.slice(0, all.indexOf('--')) : all;
  const vals: string[] = [];
  words.forEach((w, i) => {
    for (const n of names) {
      if (w === n && words[i + 1] !== undefined) vals.push(words[i + 1]!);
      else if (w.startsWith(`${n}=`)) vals.push(w.slice(n.length + 1));
    }
  });
  return vals;
}

const all = manifests.flatMap((m) => m.docs);
const byKind = (kind: string) => new Set(all.filter((d) => d.kind === kind).map((d) => d.metadata.name as string));
const secretVolumes = manifests.flatMap((m) => (m.pod.volumes as Obj[]).filter((v) => v.secret).map((v) => ({ m, v })));

/** The Secret keys each config reads: files it names under the Secret's mountPath (main container). */
function keysRead(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const { m, v } of secretVolumes) {
    const mount = ((m.pod.containers[0] as Obj).volumeMounts as Obj[]).find((x) => x.name === v.name)!.mountPath as string;
    const keys = out.get(v.secret.secretName) ?? new Set<string>();
    for (const f of (m.configMap.data['node.yaml'] as string).matchAll(new RegExp(`${mount.replace(/[/.]/g, '\\$&')}/([\\w.-]+)`, 'g'))) keys.add(f[1]!);
    out.set(v.secret.secretName, keys);
  }
  return out;
}

t.test("the guide's kubectl commands name what the manifests have", async (t) => {
  const kubectl = commands().filter((w) => w[0] === 'kubectl');
  t.ok(kubectl.length >= 8, `the guide has the operator's kubectl commands (${kubectl.length})`);
  const namespaces = new Set(all.map((d) => d.metadata.namespace as string));
  t.same([...namespaces], ['kube-system'], 'the manifests live in kube-system');
  const containers = new Set(manifests.flatMap((m) => [...m.pod.initContainers, ...m.pod.containers].map((c: Obj) => c.name as string)));
  const labels = new Set(manifests.flatMap((m) => Object.entries(m.daemonSet.spec.template.metadata.labels).map(([k, v]) => `${k}=${v}`)));
  const named = { DaemonSet: new Set<string>(), ConfigMap: new Set<string>(), Secret: new Set<string>() };
  for (const w of kubectl) {
    const cmd = w.join(' ');
    if (w[1] === 'apply') {
      for (const f of flag(w, '-f')) {
        t.ok(existsSync(join(repoRoot, f)), `${cmd}: ${f} exists`);
        t.ok(manifests.some((m) => `deploy/${m.file}` === f), `${cmd}: ${f} is one of the DaemonSet manifests`);
        for (const d of manifests.find((m) => `deploy/${m.file}` === f)?.docs ?? []) {
          if (d.kind in named) named[d.kind as keyof typeof named].add(d.metadata.name);
        }
      }
      continue;
    }
    for (const ns of flag(w, '-n', '--namespace')) t.ok(namespaces.has(ns), `${cmd}: namespace ${ns} is the manifests'`);
    t.ok(flag(w, '-n', '--namespace').length === 1, `${cmd}: names the namespace`);
    for (const l of flag(w, '-l', '--selector')) t.ok(labels.has(l), `${cmd}: label ${l} is the pods'`);
    for (const c of flag(w, '-c', '--container')) t.ok(containers.has(c), `${cmd}: container ${c} exists`);
    for (const ref of w.filter((x) => /^(daemonset|ds|configmap|cm|secret)\/[\w.-]+$/.test(x))) {
      const [kind, name] = ref.split('/') as [string, string];
      const k = { daemonset: 'DaemonSet', ds: 'DaemonSet', configmap: 'ConfigMap', cm: 'ConfigMap', secret: 'Secret' }[kind] as keyof typeof named;
      named[k].add(name);
      if (k === 'Secret') t.ok(secretVolumes.some(({ v }) => v.secret.secretName === name), `${cmd}: Secret ${name} is the one mounted`);
      else t.ok(byKind(k).has(name), `${cmd}: ${k} ${name} is in the manifests`);
    }
    const edit = w.indexOf('edit');
    if (edit > 0 && ['configmap', 'cm'].includes(w[edit + 1]!)) {
      named.ConfigMap.add(w[edit + 2]!);
      t.ok(byKind('ConfigMap').has(w[edit + 2]!), `${cmd}: ConfigMap ${w[edit + 2]} is in the manifests`);
    }
    if (w[1] === 'exec' || w.includes('exec')) {
      const argv = w.slice(w.indexOf('--') + 1);
      const main = manifests[0]!.pod.containers[0] as Obj;
      const prog = (main.command as string[]).slice(0, (main.command as string[]).indexOf('run'));
      t.same(argv.slice(0, 2), [prog[0], prog[prog.length - 1]], `${cmd}: runs the image's blockspeaker`);
      const c = argv[argv.indexOf('-c') + 1];
      if (c) t.equal(c, main.command[main.command.indexOf('-c') + 1], `${cmd}: on the config the daemon runs with`);
    }
  }
  // The other way: everything an operator creates or checks is in the guide.
  for (const name of byKind('DaemonSet')) t.ok(named.DaemonSet.has(name) && section.includes(`daemonset/${name}`), `DaemonSet ${name}: the guide checks its rollout`);
  for (const name of byKind('ConfigMap')) t.ok(named.ConfigMap.has(name), `ConfigMap ${name}: applied by a command of the guide`);
  for (const { v } of secretVolumes) t.ok(named.Secret.has(v.secret.secretName) || section.includes(`secret generic ${v.secret.secretName}`), `Secret ${v.secret.secretName}: the guide creates it`);
});

t.test('the Secret the guide creates is the one the DaemonSets mount, with exactly the keys their configs read', async (t) => {
  const create = commands().filter((w) => w[0] === 'kubectl' && w.includes('create') && w.includes('secret'));
  t.equal(create.length, 1, 'the guide creates one Secret');
  const w = create[0]!;
  const name = w[w.indexOf('generic') + 1]!;
  const read = keysRead();
  t.same([...read.keys()], [name], `both DaemonSets mount the Secret ${name}`);
  const given = [...flag(w, '--from-literal'), ...flag(w, '--from-file')].map((x) => x.split('=')[0]!).sort();
  t.same(given, [...read.get(name)!].sort(), `its keys (${given.join(', ')}) are the files the configs name under its mountPath`);
  t.same(flag(w, '-n'), ['kube-system'], 'in kube-system');
  const endpoints = flag(w, '--from-literal').find((x) => x.startsWith('endpoints='));
  t.ok(endpoints, 'the etcd endpoints are in it');
});

t.test("the guide's etcd user is the one node.yaml names, with the prefixes blockspeaker writes", async (t) => {
  const etcdctl = commands().filter((w) => w[0] === 'etcdctl');
  const user = etcdctl.find((w) => w[1] === 'user' && w[2] === 'add')?.[3];
  for (const m of manifests) {
    const cfg = parseYaml(m.configMap.data['node.yaml']) as Obj;
    t.equal(cfg.ipam.etcd.username, user, `${m.file}: ipam.etcd.username is the user the guide adds`);
  }
  const role = etcdctl.find((w) => w[1] === 'role' && w[2] === 'add')?.[3];
  t.ok(etcdctl.some((w) => w.join(' ') === `etcdctl user grant-role ${user} ${role}`), 'the user gets the role');
  const grants = etcdctl.filter((w) => w[2] === 'grant-permission' && w[3] === role).map((w) => w.slice(4).join(' '));
  t.same(grants.sort(), ['--from-key read ', '--prefix=true readwrite /blockspeaker/', '--prefix=true readwrite /calico/'].sort(),
    "write under Calico's keys and ours, read everything (what test/deploy/linux-cluster.test.ts grants)");
});

t.test('the ports and files the guide names are the manifests\'', async (t) => {
  for (const m of manifests) {
    const cfg = parseYaml(m.configMap.data['node.yaml']) as Obj;
    const metrics = String(cfg.status.metricsListen);
    t.match(flat, metrics, `${m.file}: status.metricsListen ${metrics} is in the guide`);
    t.match(flat, `\`status.listen\` stays on \`${cfg.status.listen}\``, `${m.file}: status.listen ${cfg.status.listen}`);
    const main = m.pod.containers[0] as Obj;
    t.match(flat, [...main.command].slice(main.command.indexOf('run')).join(' ').replace(/^run /, ''), `${m.file}: the guide gives the daemon's arguments`);
    const install = m.pod.initContainers[0] as Obj;
    const iargs = (install.command as string[]).slice((install.command as string[]).indexOf('install-cni'));
    t.ok(flat.includes(iargs.join(' ')) || flat.includes(`${iargs.slice(0, 2).join(' ')} ...`), `${m.file}: the guide gives install-cni's arguments (${iargs.join(' ')})`);
    t.match(flat, `prometheus.io/port: "${m.daemonSet.spec.template.metadata.annotations['prometheus.io/port']}"`, `${m.file}: the scrape port`);
  }
  t.match(flat, `curl -s http://NODE_IP:${parseYaml(manifests[0]!.configMap.data['node.yaml']).status.metricsListen.split(':')[1]}/readyz`, 'the readiness check on the metrics port');
  for (const f of ['deploy/linux/Dockerfile', 'deploy/windows/Dockerfile', 'deploy/linux/blockspeaker.yaml', 'deploy/windows/blockspeaker.yaml']) {
    t.ok(flat.includes(`\`${f}\``) && existsSync(join(repoRoot, f)), `${f}: named and there`);
  }
});
