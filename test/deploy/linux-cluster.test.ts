// The Linux DaemonSet as a cluster runs it, as root, in network namespaces this test creates:
//
//                        ┌── eth0 [node-1: install-cni, then blockspeaker run]  10.77.0.11
//   [etcd: TLS, client   │
//    certs, auth on] br0 ┼── eth0 [node-2: install-cni, then blockspeaker run]  10.77.0.12
//    10.77.0.1:2379      │
//                        └── eth0 [node-3: the same, started later]             10.77.0.13
//
// Each node's containers run the commands deploy/linux/blockspeaker.yaml gives them, rendered from the manifest
// (test/deploy/pod.ts): the ConfigMap and the Secret blockspeaker-etcd laid out as kubelet lays out volumes (the
// Secret holds the endpoints in Calico's https:// form, the CA, a client certificate whose name is no etcd user, and
// the password of the etcd user the ConfigMap names), NODE_NAME and NODE_IP from the downward API, the host's
// folders in a temp dir per node, the image's /app this checkout. One etcd, Calico's layout: two nodes come up on
// it and hand out pod addresses through the CNI plugin install-cni put on each "host", and no block is claimed by
// both (read back from etcd's own keys); a third node started from the same rendered commands joins with a block of
// its own. Probes: /readyz on the metrics listener at the node's address, where /routes is not served, and the full
// status endpoint answers on the node's loopback only.
//
// Needs root, iproute2, etcd-server, etcd-client, openssl, curl and perl; skipped by hand without them, a failure
// under REQUIRE_PEERS=1.
import t from 'tap';
import { execFileSync, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { interopGate } from '../kit/interop/gate.ts';
import { createNetns, execInNetns, runInNetns, type Netns } from '../kit/interop/netns.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { toolPath, toolsGate } from '../kit/tools.ts';
import { manifest, renderPod, repoRoot, type Obj, type RenderedContainer, type RenderedPod } from './pod.ts';

const HUB_IP = '10.77.0.1';
const PREFIX = 24;
const PASSWORD = 'pod-etcd-Pa55';
const m = manifest('linux/blockspeaker.yaml');

/** A clean environment for a container's process: none of tap's loaders, the sources under test, the container's env. */
function containerEnv(c: RenderedContainer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'NODE_OPTIONS' || k.startsWith('CNI_') || /^_?TAP/i.test(k) || k === 'NODE_NAME' || k === 'NODE_IP') continue;
    env[k] = v;
  }
  return { ...env, BLOCKSPEAKER_FROM_SOURCE: '1', ...c.env };
}

/**
 * A container's process here, for `ip netns exec NS ...` (which gives it a mount namespace of its own): its read-only
 * volumes bind-mounted read-only onto themselves first, as kubelet mounts ConfigMaps and Secrets, then its argv (the
 * image's node is this node) through env(1) without tap's NODE_OPTIONS.
 */
function argvHere(c: RenderedContainer): string[] {
  const [cmd, ...args] = c.argv;
  const ro = 'while [ "$1" != -- ]; do mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 97; shift; done; shift; exec "$@"';
  return ['/bin/sh', '-c', ro, 'sh', ...c.readOnly, '--', '/usr/bin/env', '-u', 'NODE_OPTIONS', cmd === 'node' ? process.execPath : cmd!, ...args];
}

/** CA, etcd's server certificate for HUB_IP, and client certificates by common name (ECDSA P-256, openssl). */
function makePki(dir: string): { ca: string; server: { cert: string; key: string }; client(cn: string): { cert: string; key: string } } {
  const p = (f: string) => join(dir, f);
  const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  ssl('req', '-x509', ...EC, '-keyout', p('ca.key'), '-out', p('ca.pem'), '-days', '2', '-subj', '/CN=bs-deploy-ca');
  const sign = (name: string, cn: string, ext: string) => {
    writeFileSync(p(`${name}.ext`), ext);
    ssl('req', ...EC, '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', p(`${name}.csr`), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p(`${name}.pem`), '-days', '2', '-extfile', p(`${name}.ext`));
    return { cert: p(`${name}.pem`), key: p(`${name}.key`) };
  };
  return {
    ca: p('ca.pem'),
    server: sign('server', 'etcd', `subjectAltName=IP:${HUB_IP},IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n`),
    client: (cn: string) => sign(`client-${cn}`, cn, 'extendedKeyUsage=clientAuth\n'),
  };
}

interface Node {
  name: string;
  ip: string;
  ns: Netns;
  pod: RenderedPod;
  daemon?: ChildProcess;
  log: string;
}

interface CalicoBlock {
  cidr: string;
  affinity: string | null;
  allocations: (number | null)[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const gate = interopGate(t, []);
const toolsOk = !gate && toolsGate(t, ['etcd', 'etcdctl', 'openssl', 'curl']);
if (!gate && toolsOk) {
  t.test('the Linux DaemonSet: two nodes on one etcd (TLS, a user) in Calico\'s layout, no shared block; a third joins', { timeout: 170_000 }, async (t) => {
    const t0 = Date.now();
    const pid = process.pid;
    const dir = mkdtempSync(join(tmpdir(), `bs-interop-${pid}-deploy-`));
    t.teardown(() => {
      if (process.env.KEEP_INTEROP !== '1') rmSync(dir, { recursive: true, force: true });
    });
    const ip = toolPath('ip')!;
    const sh = (...args: string[]) => execFileSync(ip, args, { stdio: ['ignore', 'ignore', 'pipe'] });

    // ---- the network: a bridge in etcd's namespace, one veth per node
    const hub = await createNetns(`bs-dhub-${pid}`);
    sh('-n', hub.name, 'link', 'add', 'br0', 'type', 'bridge');
    sh('-n', hub.name, 'addr', 'add', `${HUB_IP}/${PREFIX}`, 'dev', 'br0');
    sh('-n', hub.name, 'link', 'set', 'br0', 'up');
    const nodeNs = async (i: number): Promise<Netns> => {
      const ns = await createNetns(`bs-dnode${i}-${pid}`);
      sh('link', 'add', `dn${i}h`, 'netns', hub.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.name);
      sh('-n', hub.name, 'link', 'set', `dn${i}h`, 'master', 'br0', 'up');
      sh('-n', ns.name, 'addr', 'add', `10.77.0.1${i}/${PREFIX}`, 'dev', 'eth0');
      sh('-n', ns.name, 'link', 'set', 'eth0', 'up');
      return ns;
    };

    // ---- etcd: TLS with client certificates, then a root user and the ConfigMap's user with a password, auth on
    const pki = makePki(mkdtempSync(join(dir, 'pki-')));
    const admin = pki.client('root');
    const etcdDir = join(dir, 'etcd');
    const etcd = runInNetns(hub, toolPath('etcd')!, [
      '--name', 'm0', '--data-dir', etcdDir,
      '--listen-client-urls', `https://${HUB_IP}:2379`, '--advertise-client-urls', `https://${HUB_IP}:2379`,
      '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls', 'http://127.0.0.1:2380',
      '--initial-cluster', 'm0=http://127.0.0.1:2380', '--initial-cluster-state', 'new',
      '--cert-file', pki.server.cert, '--key-file', pki.server.key, '--trusted-ca-file', pki.ca, '--client-cert-auth',
      '--logger', 'zap', '--log-outputs', 'stderr', '--log-level', 'warn',
    ], { logFile: join(dir, 'etcd.log'), env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir } });
    t.teardown(() => void etcd.kill('SIGKILL'));
    const etcdctl = async (...args: string[]) => {
      const r = await execInNetns(hub, toolPath('etcdctl')!, ['--endpoints', `https://${HUB_IP}:2379`, '--cacert', pki.ca,
        '--cert', admin.cert, '--key', admin.key, ...args], { check: false, timeoutMs: 10_000 });
      if (r.code !== 0) throw new Error(`etcdctl ${args.join(' ')}: ${r.stderr.trim()}`);
      return r.stdout;
    };
    await waitFor(async () => (await etcdctl('endpoint', 'health', '-w', 'json')).includes('"health":true'),
      { what: `etcd healthy (${readFileSync(join(dir, 'etcd.log'), 'utf8').slice(-300)})`, timeoutMs: 30_000 });
    const user = (m.configMap.data['node.yaml'] as string).match(/username: (\S+)/)![1]!;
    for (const args of [
      ['user', 'add', 'root', '--no-password'], ['role', 'add', 'root'], ['user', 'grant-role', 'root', 'root'],
      ['user', 'add', `${user}:${PASSWORD}`], ['role', 'add', 'blockspeaker'],
      // docs/guides/deploying.md: write Calico's keys and ours, read everything (history reads after a lost answer).
      ['role', 'grant-permission', 'blockspeaker', '--prefix=true', 'readwrite', '/calico/'],
      ['role', 'grant-permission', 'blockspeaker', '--prefix=true', 'readwrite', '/blockspeaker/'],
      ['role', 'grant-permission', 'blockspeaker', '--from-key', 'read', ''],
      ['user', 'grant-role', user, 'blockspeaker'], ['auth', 'enable'],
    ]) await etcdctl(...args);
    // The Secret: a client certificate whose name is no etcd user (the password is what authorizes), the endpoints as
    // Calico's etcd_endpoints spells them.
    const client = pki.client('kube-node-client');
    const secrets = {
      'blockspeaker-etcd': {
        endpoints: `https://${HUB_IP}:2379\n`, 'ca.crt': readFileSync(pki.ca, 'utf8'),
        'tls.crt': readFileSync(client.cert, 'utf8'), 'tls.key': readFileSync(client.key, 'utf8'), password: `${PASSWORD}\n`,
      },
    };
    t.pass(`etcd with TLS, client certificates and auth at ${HUB_IP}:2379 (${Date.now() - t0} ms)`);

    // ---- a node: its pod rendered from the manifest, install-cni, then the daemon
    const nodes: Node[] = [];
    t.teardown(() => {
      for (const n of nodes) if (n.daemon && n.daemon.exitCode === null) n.daemon.kill('SIGKILL');
    });
    const logs = () => nodes.map((n) => `--- ${n.name}\n${(() => {
      try {
        return readFileSync(n.log, 'utf8').split('\n').slice(-12).join('\n');
      } catch {
        return '(no log)';
      }
    })()}`).join('\n');
    const curl = async (ns: Netns, url: string) => {
      const r = await execInNetns(ns, toolPath('curl')!, ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '2', url], { check: false });
      return r.stdout.trim() === '000' ? 'refused' : r.stdout.trim();
    };
    const bring = async (i: number): Promise<Node> => {
      const name = `node-${i}`;
      const nodeIp = `10.77.0.1${i}`;
      const ns = await nodeNs(i);
      const pod = renderPod(m, join(dir, name), { name, ip: nodeIp }, secrets, { '/app': repoRoot });
      const n: Node = { name, ip: nodeIp, ns, pod, log: join(dir, `${name}.log`) };
      nodes.push(n);
      for (const c of pod.initContainers) {
        // An init container runs to completion before the next one, and all of them before the pod's containers.
        const r = spawnSync(ip, ['netns', 'exec', ns.name, ...argvHere(c)], { encoding: 'utf8', env: containerEnv(c), timeout: 60_000 });
        if (r.status !== 0) throw new Error(`${name}: init container ${c.name} failed (${r.status}): ${r.stderr}${r.stdout}`);
      }
      const [main] = pod.containers;
      const [cmd, ...args] = argvHere(main!);
      n.daemon = runInNetns(ns, cmd!, args, { logFile: n.log, env: containerEnv(main!) });
      // The kubelet's readiness probe: GET /readyz on the metrics port at the pod's (the node's) address.
      const probe = (m.pod.containers[0] as Obj).readinessProbe.httpGet;
      const url = `http://${nodeIp}:${probe.port}${probe.path}`;
      for (const until = Date.now() + 45_000; ;) {
        if (n.daemon.exitCode !== null) throw new Error(`${name}: the daemon exited with ${n.daemon.exitCode}\n${logs()}`);
        if ((await curl(ns, url)) === '200') break;
        if (Date.now() > until) throw new Error(`${name}: not ready after 45 s (${url})\n${logs()}`);
        await sleep(300);
      }
      return n;
    };

    /** Pod addresses from the node's CNI plugin, as the bridge plugin asks it (IPAM section of the installed conflist). */
    let pods = 0;
    const cniAdd = async (n: Node): Promise<string> => {
      const conflist = JSON.parse(readFileSync(join(n.pod.host, 'etc/cni/net.d/10-blockspeaker.conflist'), 'utf8')) as Obj;
      const conf = { cniVersion: conflist.cniVersion, name: conflist.name, ...conflist.plugins[0] };
      const id = `pod${++pods}-${n.name}`;
      const r = spawnSync(ip, ['netns', 'exec', n.ns.name, join(n.pod.host, 'opt/cni/bin/blockspeaker-cni')], {
        input: JSON.stringify(conf), encoding: 'utf8', timeout: 20_000,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: `/var/run/netns/${id}`, CNI_IFNAME: 'eth0', CNI_PATH: join(n.pod.host, 'opt/cni/bin') },
      });
      if (r.status !== 0) throw new Error(`${n.name}: CNI ADD ${id} failed (${r.status}): ${r.stdout}${r.stderr}\n${logs()}`);
      return (JSON.parse(r.stdout) as { ips: { address: string }[] }).ips[0]!.address.split('/')[0]!;
    };
    const etcdJson = async (prefix: string): Promise<Map<string, Obj>> => {
      const out = JSON.parse(await etcdctl('get', '--prefix', prefix, '-w', 'json')) as { kvs?: { key: string; value: string }[] };
      return new Map((out.kvs ?? []).map((kv) => [Buffer.from(kv.key, 'base64').toString(), JSON.parse(Buffer.from(kv.value, 'base64').toString()) as Obj]));
    };
    const blocks = async (): Promise<CalicoBlock[]> => [...(await etcdJson('/calico/ipam/v2/assignment/ipv4/block/')).values()] as CalicoBlock[];
    const inBlock = (addr: string, cidr: string) => {
      const [net, len] = cidr.split('/');
      const n = (s: string) => s.split('.').reduce((a, x) => a * 256 + Number(x), 0);
      const size = 2 ** (32 - Number(len));
      return Math.floor(n(addr) / size) === Math.floor(n(net!) / size);
    };
    const owned = (all: CalicoBlock[], node: string) => all.filter((b) => b.affinity === `host:${node}`).map((b) => b.cidr).sort();

    // ---- two nodes on one datastore
    const [n1, n2] = await Promise.all([bring(1), bring(2)]);
    t.pass(`node-1 and node-2 ready (${Date.now() - t0} ms)`);
    const given = new Map<string, string[]>();
    for (const n of [n1!, n2!, n1!, n2!]) given.set(n.name, [...(given.get(n.name) ?? []), await cniAdd(n)]);
    const all = [...given.values()].flat();
    t.equal(new Set(all).size, all.length, `every pod address is distinct (${all.join(', ')})`);
    const b2 = await blocks();
    const [own1, own2] = [owned(b2, 'node-1'), owned(b2, 'node-2')];
    t.ok(own1.length >= 1 && own2.length >= 1, `each node claimed a block in etcd (node-1 ${own1.join(' ')}, node-2 ${own2.join(' ')})`);
    t.same(own1.filter((b) => own2.includes(b)), [], 'no block is claimed by both nodes');
    t.equal(new Set(b2.map((b) => b.cidr)).size, b2.length, 'one record per block');
    for (const [node, addrs] of given) {
      for (const a of addrs) t.ok(owned(b2, node).some((c) => inBlock(a, c)), `${node}'s ${a} is in a block affine to ${node}`);
    }
    const affinities = await etcdJson('/calico/ipam/v2/host/');
    for (const [node, own] of [['node-1', own1], ['node-2', own2]] as const) {
      for (const c of own) {
        t.match(affinities.get(`/calico/ipam/v2/host/${node}/ipv4/block/${c.replace('/', '-')}`), { state: 'confirmed' }, `${node}: the affinity to ${c} is confirmed`);
      }
    }
    // Registered as Calico Nodes, with the address NODE_IP gave and the length of the interface holding it.
    const calicoNodes = await etcdJson('/calico/resources/v3/projectcalico.org/nodes/');
    for (const n of [n1!, n2!]) {
      t.match(calicoNodes.get(`/calico/resources/v3/projectcalico.org/nodes/${n.name}`), { spec: { bgp: { ipv4Address: `${n.ip}/${PREFIX}` } } },
        `${n.name} registered with NODE_IP and eth0's length (${n.ip}/${PREFIX})`);
    }
    t.ok((await etcdJson('/calico/resources/v3/projectcalico.org/ippools/')).size >= 1, "the ConfigMap's pool is an IPPool in etcd");

    // ---- the listeners: the probes and /metrics at the node's address; the rest on its loopback only
    const port = (m.pod.containers[0] as Obj).readinessProbe.httpGet.port as number;
    t.equal(await curl(hub, `http://${n1!.ip}:${port}/metrics`), '200', 'Prometheus reaches /metrics on the node address');
    t.equal(await curl(hub, `http://${n1!.ip}:${port}/healthz`), '200', 'and /healthz');
    t.not(await curl(hub, `http://${n1!.ip}:${port}/routes`), '200', '/routes is not served on the metrics listener');
    t.equal(await curl(hub, `http://${n1!.ip}:9179/routes`), 'refused', 'nor on the status port from another address');
    t.equal(await curl(n1!.ns, 'http://127.0.0.1:9179/routes'), '200', "/routes answers on the node's loopback");

    // ---- a third node, from the same rendered commands, joins
    const n3 = await bring(3);
    const a3 = await cniAdd(n3);
    const b3 = await blocks();
    const own3 = owned(b3, 'node-3');
    t.ok(own3.length >= 1 && own3.some((c) => inBlock(a3, c)), `node-3 joined and got ${a3} from its own block ${own3.join(' ')}`);
    t.same(own3.filter((c) => owned(b3, 'node-1').includes(c) || owned(b3, 'node-2').includes(c)), [], "node-3's blocks are neither node-1's nor node-2's");
    t.same([owned(b3, 'node-1'), owned(b3, 'node-2')], [own1, own2], 'node-1 and node-2 keep their blocks');
    t.notOk([...given.values()].flat().includes(a3), `${a3} is given once`);

    // ---- a rolling update's stop: SIGTERM, a clean exit
    for (const n of nodes) {
      const exited = new Promise<number | null>((r) => n.daemon!.once('exit', (code) => r(code)));
      n.daemon!.kill('SIGTERM');
      t.equal(await Promise.race([exited, sleep(10_000).then(() => 'timeout')]), 0, `${n.name} stopped cleanly on SIGTERM`);
    }
    t.ok(Date.now() - t0 < 170_000, `done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
}
