// What `blockspeaker run` takes from the pod (src/config/pod-env.ts, src/platform/sandbox.ts): NODE_NAME and NODE_IP
// fill in what the config leaves out (a value in the config wins), ipam.store { file } reads the etcd endpoints from
// a Secret's file, and in a Windows HostProcess container the config's rooted, drive-less paths are read under
// CONTAINER_SANDBOX_MOUNT_POINT. Through parseConfig with each platform's environment, and through the CLI.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, parseConfig } from '../../src/config/config.ts';
import { etcdUrl, withInterfaceLength } from '../../src/config/pod-env.ts';
import { linuxPlatform, realDeps, windowsPlatform } from '../../src/platform/platform.ts';
import { containerRooted, sandboxPath } from '../../src/platform/sandbox.ts';
import { blockspeakerBin } from '../kit/cli.ts';

const linux = (env: Record<string, string>) => linuxPlatform({ ...realDeps(), env });
const windows = (env: Record<string, string>) => windowsPlatform({ ...realDeps(), env });
const BGP = 'bgp: { asn: 65101 }\n';
const errors = (f: () => unknown): string[] => {
  try {
    f();
  } catch (e) {
    if (e instanceof ConfigError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  return [];
};

t.test('NODE_NAME and NODE_IP fill in the node name, the router ID and the registered address; the config wins', async (t) => {
  const env = { NODE_NAME: 'node-7', NODE_IP: '10.0.0.7' };
  const cfg = parseConfig(BGP, 'x', linux(env));
  t.equal(cfg.node.name, 'node-7', 'node.name from NODE_NAME');
  t.equal(cfg.bgp?.routerId, '10.0.0.7', 'bgp.routerId from NODE_IP');
  t.same(cfg.node.bgp, { ipv4Address: '10.0.0.7/32' }, 'node.bgp.ipv4Address from NODE_IP (no local interface has it: /32)');
  t.equal(parseConfig(BGP, 'x', linux({ NODE_IP: '127.0.0.1' })).node.bgp?.ipv4Address, '127.0.0.1/8', "the length of the interface holding it (lo's /8)");
  t.equal(withInterfaceLength({ address: '10.1.2.3', family: 4 }, { eth0: [{ address: '10.1.2.3', cidr: '10.1.2.3/22', family: 'IPv4', netmask: '255.255.252.0', mac: '', internal: false }] }), '10.1.2.3/22');
  const given = parseConfig('node: { name: n1, bgp: { ipv4Address: 192.0.2.9/24 } }\nbgp: { asn: 65101, routerId: 192.0.2.9 }\n', 'x', linux(env));
  t.same([given.node.name, given.bgp?.routerId, given.node.bgp?.ipv4Address], ['n1', '192.0.2.9', '192.0.2.9/24'], 'a value in the config wins');
  const v6 = parseConfig('bgp: { asn: 65101, routerId: 192.0.2.9 }\n', 'x', linux({ NODE_IP: 'fd00::7' }));
  t.same(v6.node.bgp, { ipv6Address: 'fd00::7/128' }, 'an IPv6 NODE_IP is the IPv6 address');
  t.match(errors(() => parseConfig(BGP, 'x', linux({ NODE_IP: 'fd00::7' }))), [/^bgp\.routerId: required: the environment's NODE_IP fd00::7 is IPv6/], 'and cannot be the router ID');
  t.same(errors(() => parseConfig(BGP, 'x', linux({}))), ['bgp.routerId: required'], 'neither: required, as before');
  t.match(errors(() => parseConfig(BGP, 'x', linux({ NODE_IP: 'nodeip' }))), [/^bgp\.routerId: .*NODE_IP is not an IP address: "nodeip"/, /^node\.bgp\.ipv4Address: .*NODE_IP is not an IP address/], 'a bad NODE_IP is named');
  t.same(parseConfig('node: { os: linux }\n', 'x', linux({ NODE_IP: '10.0.0.7' })).bgp, null, 'no bgp section: nothing to fill in');
});

t.test('placeholders of the old per-node rendering are refused with advice', async (t) => {
  const errs = errors(() => parseConfig('node: { name: __NODE_NAME__ }\nbgp: { asn: 1, routerId: __NODE_IP__ }\n', 'x', linux({ NODE_NAME: 'a', NODE_IP: '10.0.0.1' })));
  t.match(errs, [/^node\.name: __NODE_NAME__ is a placeholder .*leave the field out and set NODE_NAME/, /^bgp\.routerId: __NODE_IP__ is a placeholder .*set NODE_IP/]);
});

t.test('ipam.store { file }: the etcd endpoints from a file (ours or Calico\'s form)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-runenv-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = (text: string) => {
    writeFileSync(join(dir, 'endpoints'), text);
    return parseConfig(`bgp: { asn: 1, routerId: 10.0.0.1 }\nipam: { store: { file: ${join(dir, 'endpoints')} } }\n`, 'x', linux({})).ipam?.store;
  };
  t.equal(store('etcds://10.0.0.5:2379,10.0.0.6:2379\n'), 'etcds://10.0.0.5:2379,10.0.0.6:2379', 'our URL');
  t.equal(store('https://10.0.0.5:2379,https://10.0.0.6:2379'), 'etcds://10.0.0.5:2379,10.0.0.6:2379', "Calico's etcd_endpoints: https is TLS");
  t.equal(store('http://etcd-a:2379\nhttp://etcd-b:2379/\n'), 'etcd://etcd-a:2379,etcd-b:2379', 'http, one a line');
  t.equal(etcdUrl('https://a:1,http://b:2'), undefined, 'TLS for some and not others is not guessed');
  t.equal(etcdUrl('/var/lib/blockspeaker'), undefined, 'a directory is not an endpoints file');
  writeFileSync(join(dir, 'endpoints'), 'https://a:1,http://b:2');
  t.match(errors(() => parseConfig(`ipam: { store: { file: ${join(dir, 'endpoints')} } }\n`, 'x', linux({}))), [/^ipam\.store\.file: .* must hold etcd:\/\/host:port/], 'refused, naming the file');
  t.match(errors(() => parseConfig(`ipam: { store: { file: ${join(dir, 'none')} }, etcd: { ca: /x/ca.pem } }\n`, 'x', linux({}))),
    [/^ipam\.store\.file: cannot read .*none \(ENOENT\): it holds the store/], 'a missing file is named (and nothing else is blamed on it)');
  t.match(errors(() => parseConfig('ipam: { store: { path: /x } }\n', 'x', linux({}))), [/^ipam\.store\.path: unknown field/, /^ipam\.store\.file: required/]);
});

t.test('sandboxPath: a rooted, drive-less path is the HostProcess container\'s', async (t) => {
  const env = { CONTAINER_SANDBOX_MOUNT_POINT: 'C:\\hpc\\' };
  t.equal(sandboxPath('win32', env, '/etc/blockspeaker/config/node.yaml'), 'C:\\hpc\\etc\\blockspeaker\\config\\node.yaml');
  t.equal(sandboxPath('win32', env, '\\etc\\x'), 'C:\\hpc\\etc\\x');
  t.equal(sandboxPath('win32', env, 'C:\\ProgramData\\blockspeaker\\run'), 'C:\\ProgramData\\blockspeaker\\run', 'a drive: the host\'s');
  t.equal(sandboxPath('win32', env, '\\\\.\\pipe\\blockspeaker'), '\\\\.\\pipe\\blockspeaker', 'a pipe name');
  t.equal(sandboxPath('win32', env, '//server/share/x'), '//server/share/x', 'a UNC path');
  t.equal(sandboxPath('win32', env, 'relative\\x'), 'relative\\x', 'a relative path: the working directory decides');
  t.equal(sandboxPath('win32', {}, '/etc/x'), '/etc/x', 'not in a HostProcess container');
  t.equal(sandboxPath('linux', env, '/etc/x'), '/etc/x', 'Linux: never');
  t.ok(containerRooted('/x') && !containerRooted('//x') && !containerRooted('C:\\x'));
  // The config's file paths, on the Windows platform.
  const cfg = parseConfig(`node: { os: windows }
bgp: { asn: 1, routerId: 10.0.0.1, peers: [{ address: 10.0.0.2, asn: 2, password: { file: /etc/bs/peer } }] }
ipam:
  store: etcds://10.0.0.5:2379
  calico: [/etc/bs/calico.yaml, 'C:\\k\\calico.yaml']
  etcd: { ca: /etc/bs/etcd/ca.crt, cert: /etc/bs/etcd/tls.crt, key: /etc/bs/etcd/tls.key, username: u, password: { file: /etc/bs/etcd/password } }
ipc: { path: \\\\.\\pipe\\blockspeaker }
`, 'x', windows(env));
  t.same([cfg.ipam?.etcd?.ca, cfg.ipam?.etcd?.cert, cfg.ipam?.etcd?.key], ['C:\\hpc\\etc\\bs\\etcd\\ca.crt', 'C:\\hpc\\etc\\bs\\etcd\\tls.crt', 'C:\\hpc\\etc\\bs\\etcd\\tls.key'], "etcd's files");
  t.same(cfg.ipam?.etcd?.password, { file: 'C:\\hpc\\etc\\bs\\etcd\\password' }, 'the password file');
  t.same(cfg.bgp?.peers[0]?.password, { file: 'C:\\hpc\\etc\\bs\\peer' }, "a peer's password file");
  t.same(cfg.ipam?.calico, ['C:\\hpc\\etc\\bs\\calico.yaml', 'C:\\k\\calico.yaml'], "Calico manifests (the host's stays)");
  t.equal(cfg.ipam?.store, 'etcds://10.0.0.5:2379', 'a URL is a URL');
  t.equal(cfg.ipc && cfg.ipc.path, '\\\\.\\pipe\\blockspeaker', 'the pipe');
  const plain = parseConfig('node: { os: windows }\nipam: { store: etcds://10.0.0.5:2379, etcd: { ca: /etc/bs/ca.crt } }\n', 'x', windows({}));
  t.equal(plain.ipam?.etcd?.ca, '/etc/bs/ca.crt', 'outside a HostProcess container: as written');
});

t.test('run --check with the pod\'s environment prints the config it would run', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-runenv-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'node.yaml'), 'node: { os: linux }\nbgp: { asn: 65101 }\n');
  const env: NodeJS.ProcessEnv = { ...process.env, BLOCKSPEAKER_FROM_SOURCE: '1', NODE_NAME: 'node-9', NODE_IP: '10.0.0.9', CONTAINER_SANDBOX_MOUNT_POINT: '/nowhere' };
  delete env.NODE_OPTIONS;
  delete env.NODENAME;
  const r = spawnSync(process.execPath, [blockspeakerBin, 'run', '-c', join(dir, 'node.yaml'), '--check'], { env, encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  const cfg = parseYaml(r.stdout) as { node: { name: string; bgp: { ipv4Address: string } }; bgp: { routerId: string } };
  t.same([cfg.node.name, cfg.bgp.routerId, cfg.node.bgp.ipv4Address], ['node-9', '10.0.0.9', '10.0.0.9/32'], 'name, router ID and address from the environment (the mount point means nothing on Linux)');
  const help = spawnSync(process.execPath, [blockspeakerBin, 'run', '--help'], { env, encoding: 'utf8' });
  for (const v of ['NODE_NAME', 'NODE_IP', 'CONTAINER_SANDBOX_MOUNT_POINT', '{ file: PATH }']) t.match(help.stdout, v, `run --help explains ${v}`);
});
