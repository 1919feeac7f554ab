// A cluster lab for the tests in this folder: one L2 segment (a bridge in namespace "sw", etcd on 10.77.0.254),
// one namespace per node on 10.77.0.<i+1>/24, BIRD configured as confd renders calico-node, blockspeaker daemons
// running the sources under test. Everything is pid-unique and torn down with the test.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNetns, execInNetns, runInNetns, type Netns } from '../kit/interop/netns.ts';
import { waitFor } from '../kit/interop/wait-for.ts';

const BIN = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;
export const ETCD = 'etcd://10.77.0.254:2379';
// Children (the daemons, and the CLI run through execInNetns, which inherits this environment) run the sources
// under test, never a stale dist/.
process.env.BLOCKSPEAKER_FROM_SOURCE = '1';
const ETCD_URL = 'http://10.77.0.254:2379';

type T = { teardown(fn: () => unknown): unknown };

export interface LabNode {
  name: string;
  ip: string;
  ns: Netns;
}

export interface Daemon extends LabNode {
  sock: string;
  child: ChildProcess;
  log: string;
}

function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'NODE_OPTIONS' || /^_?TAP/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, BLOCKSPEAKER_FROM_SOURCE: '1' };
}

export class Lab {
  private constructor(readonly dir: string, readonly sw: Netns, readonly nodes: LabNode[]) {}

  static async start(t: T, tag: string, names: string[]): Promise<Lab> {
    const pid = process.pid;
    const dir = mkdtempSync(join(tmpdir(), `bs-interop-${pid}-${tag}-`));
    t.teardown(() => {
      if (process.env.KEEP_INTEROP !== '1') rmSync(dir, { recursive: true, force: true });
    });
    const sw = await createNetns(`bs-${tag}sw-${pid}`);
    t.teardown(() => sw.destroy());
    await sw.exec('/bin/sh', ['-c', 'ip link add br0 type bridge && ip link set br0 up && ip addr add 10.77.0.254/24 dev br0']);
    const nodes: LabNode[] = [];
    for (const [i, name] of names.entries()) {
      const ns = await createNetns(`bs-${tag}${i}-${pid}`);
      t.teardown(() => ns.destroy());
      const ip = `10.77.0.${i + 1}`;
      const vx = `v${tag}${i}x${pid}`.slice(0, 15);
      await execInNetns(sw, '/usr/sbin/ip', ['link', 'add', vx, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns.name]);
      await sw.exec('/usr/sbin/ip', ['link', 'set', vx, 'master', 'br0', 'up']);
      await ns.exec('/bin/sh', ['-c', `ip addr add ${ip}/24 dev eth0 && ip link set eth0 up`]);
      nodes.push({ name, ip, ns });
    }
    const lab = new Lab(dir, sw, nodes);
    mkdirSync(join(dir, 'etcd'));
    const etcd = runInNetns(sw, 'etcd', ['--name', 'lab', '--data-dir', join(dir, 'etcd'), '--listen-client-urls', ETCD_URL,
      '--advertise-client-urls', ETCD_URL, '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls',
      'http://127.0.0.1:2380', '--initial-cluster', 'lab=http://127.0.0.1:2380'], { logFile: join(dir, 'etcd.log') });
    t.teardown(() => void etcd.kill('SIGKILL'));
    await waitFor(async () => (await lab.etcdctl('endpoint', 'health')).code === 0, { what: 'etcd healthy', timeoutMs: 30_000 });
    return lab;
  }

  node(name: string): LabNode {
    return this.nodes.find((n) => n.name === name)!;
  }

  etcdctl(...args: string[]) {
    return execInNetns(this.sw, 'etcdctl', ['--endpoints', ETCD_URL, ...args], { check: false });
  }

  /** `blockspeaker ARGS...` run inside the segment's namespace (it reaches etcd). */
  cli(...args: string[]) {
    return execInNetns(this.sw, process.execPath, [BIN, ...args], { check: false });
  }

  /** BIRD in `n`'s namespace: calico-node's template (bird2 syntax) plus `protocols`. Returns birdc. */
  bird(t: T, n: LabNode, protocols: string[], extra: string[] = []): (...args: string[]) => Promise<string> {
    const ctl = join(this.dir, `bird-${n.name}.ctl`);
    const conf = join(this.dir, `bird-${n.name}.conf`);
    writeFileSync(conf, [
      `log "${join(this.dir, `bird-${n.name}.log`)}" all;`,
      `router id ${n.ip};`,
      'protocol device { scan time 1; }',
      'protocol direct { ipv4; interface "eth0"; }',
      ...extra,
      'template bgp bgp_template {',
      '  description "Connection to BGP peer";',
      '  local as 64512;',
      '  ipv4 { gateway recursive; add paths on; import all; export all; };',
      '  graceful restart;',
      '  connect delay time 2;',
      '  connect retry time 2;',
      '  error wait time 1, 5;',
      '}',
      ...protocols,
      '',
    ].join('\n'));
    const bird = runInNetns(n.ns, '/usr/sbin/bird', ['-f', '-c', conf, '-s', ctl, '-P', join(this.dir, `bird-${n.name}.pid`)],
      { logFile: join(this.dir, `bird-${n.name}.out`) });
    t.teardown(() => void bird.kill('SIGKILL'));
    return async (...args: string[]) => (await execInNetns(n.ns, '/usr/sbin/birdc', ['-s', ctl, ...args], { check: false })).stdout;
  }

  /** A blockspeaker daemon on `n` with this config (the ipc path is filled in). */
  daemon(t: T, n: LabNode, yaml: (sock: string) => string, files: Record<string, string> = {}): Daemon {
    const sock = join(this.dir, `${n.name}.sock`);
    const file = join(this.dir, `${n.name}.yaml`);
    const runDir = join(this.dir, `${n.name}-run`);
    mkdirSync(runDir);
    // Secret files (passwords): the daemon refuses one others may read (mode & 077).
    for (const [name, text] of Object.entries(files)) writeFileSync(join(this.dir, name), text, { mode: 0o600 });
    writeFileSync(file, yaml(sock));
    const log = join(this.dir, `${n.name}.log`);
    const child = runInNetns(n.ns, process.execPath, [BIN, 'run', '-c', file, '--run-dir', runDir], { logFile: log, env: childEnv() });
    t.teardown(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    return { ...n, sock, child, log };
  }

  logs(ds: Daemon[]): string {
    return ds.map((d) => `--- ${d.name}\n${readFileSync(d.log, 'utf8').split('\n').slice(-12).join('\n')}`).join('\n');
  }
}

/** GET the daemon's status endpoint (127.0.0.1:9179 inside its namespace); null when it does not answer JSON. */
export async function status(ns: Netns, path: string): Promise<any> {
  const r = await execInNetns(ns, '/usr/bin/curl', ['-s', `http://127.0.0.1:9179${path}`], { check: false });
  try {
    return JSON.parse(r.stdout);
  } catch {
    return null;
  }
}

/** node.yaml of a mesh node on the lab's etcd with no configured peers; `bgpExtra`: more `bgp:` lines (indented). */
export function meshNodeYaml(n: LabNode, pool: string, bgpExtra = ''): (sock: string) => string {
  return (sock) => `node:
  name: ${n.name}
  os: linux
  bgp: { ipv4Address: ${n.ip}/24 }
bgp:
  asn: 64512
  routerId: ${n.ip}
${bgpExtra}ipam:
  store: ${ETCD}
  pools: [{ name: pods, cidr: ${pool}, blockSize: 28 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:9179" }
ipc: { path: ${sock} }
`;
}

/** A calico-node style mesh/peer protocol toward `peer` from `self`. */
export function birdPeer(name: string, self: LabNode, peer: LabNode, extra: string[] = []): string {
  return [
    `protocol bgp ${name} from bgp_template {`,
    `  neighbor ${peer.ip} as 64512;`,
    `  source address ${self.ip};`,
    '  ttl security off;',
    '  multihop;',
    // confd: "Make mesh unidirectional to avoid race conditions": passive toward a peer whose address sorts higher.
    ...(peer.ip > self.ip ? ['  passive on;'] : []),
    '  graceful restart time 120;',
    ...extra,
    '}',
  ].join('\n');
}

export const block28 = (ip: string) => {
  const p = ip.split('.').map(Number);
  return `${p[0]}.${p[1]}.${p[2]}.${p[3]! & ~15}/28`;
};
