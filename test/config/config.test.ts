// Config validation: a whole-node example parses with defaults filled in; every kind of bad input is reported with
// its field path and bad value (all of them, not just the first); YAML and JSON round-trip through formatConfig.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, formatConfig, loadConfig, parseConfig, type Config } from '../../src/config/config.ts';
import { suggest } from '../../src/config/check.ts';

const NODE_EXAMPLE = `
node: { name: node-a, os: linux, labels: { rack: r1 } }      # os: linux | windows
bgp:
  asn: 65010
  routerId: 10.201.0.2
  listen: { address: 0.0.0.0, port: 179 }                   # port 0 or listen: false = never accept
  gracefulRestart: { restartTime: 120 }
  peers:
    - { address: 10.201.0.1, asn: 65001, families: [ipv4], holdTime: 90 }
    - { address: "fd00:201::1", asn: 65001, families: [ipv6], passive: false,
        import: [{ prefix: "::/0", le: 128 }], export: [{ prefix: "fd00:10::/48", le: 64 }] }
  announce: [10.10.0.0/26, "fd00:10::/64"]                 # static routes, for use as a plain announcer
ipam:
  store: /var/lib/blockspeaker                              # or etcd://10.0.0.5:2379,10.0.0.6:2379
  strictAffinity: true
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }                                   # none | linux | hns (with their options)
status: { listen: 127.0.0.1:9179 }
ipc: { path: /run/blockspeaker.sock }
`;

/** The ConfigError's issues for a text, as "path: message" lines (fails the test when it parses). */
function errorsOf(t: Test, text: string): string[] {
  try {
    parseConfig(text, 'test.yaml');
  } catch (e) {
    t.type(e, ConfigError);
    return (e as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  t.fail(`expected a ConfigError for:\n${text}`);
  return [];
}

const bgp = (peers: string, extra = '') => `bgp:\n  asn: 65000\n  routerId: 10.0.0.1\n${extra}  peers:\n${peers}`;

t.test('a whole-node example parses, with defaults filled in', async (t) => {
  const c = parseConfig(NODE_EXAMPLE, 'design.yaml');
  t.same(c.node, { name: 'node-a', os: 'linux', labels: { rack: 'r1' } });
  t.match(c.bgp, {
    asn: 65010, routerId: '10.201.0.2', listen: { address: '0.0.0.0', port: 179 }, gracefulRestart: { restartTime: 120 },
    announce: ['10.10.0.0/26', 'fd00:10::/64'],
  });
  t.same(c.bgp!.peers[0], {
    address: '10.201.0.1', asn: 65001, port: 179, families: ['ipv4'], holdTime: 90, passive: false,
    gracefulRestart: { restartTime: 120 },
  });
  t.same(c.bgp!.peers[1].import, [{ prefix: '::/0', le: 128, action: 'accept' }]);
  t.same(c.bgp!.peers[1].export, [{ prefix: 'fd00:10::/48', le: 64, action: 'accept' }]);
  t.match(c.ipam, { store: '/var/lib/blockspeaker', strictAffinity: true, pools: [{ name: 'pods-v4', cidr: '10.244.0.0/16', blockSize: 26, nodeSelector: 'all()', reservation: { kind: 'auto' } }] });
  t.same(c.dataplane, { kind: 'none' });
  t.same(c.status, { listen: { address: '127.0.0.1', port: 9179 } });
  t.same(c.ipc, { path: '/run/blockspeaker.sock' });
});

t.test('defaults for a minimal file', async (t) => {
  const c = parseConfig('bgp: { asn: 4200000001, routerId: 192.0.2.1, peers: [{ address: "2001:db8::1", asn: 65001 }] }\n');
  t.equal(c.bgp!.asn, 4200000001, '4-octet ASN');
  t.same(c.bgp!.listen, { address: '::', port: 179 }, 'dual-stack by default');
  t.same(c.bgp!.gracefulRestart, { restartTime: 120 });
  t.same(c.bgp!.peers[0].families, ['ipv6'], 'families default to the address family');
  t.same(c.bgp!.announce, []);
  t.equal(c.ipam, null);
  t.same(c.status, { listen: { address: '127.0.0.1', port: 9179 } }, 'status on loopback by default');
  t.ok(c.node.name.length > 0, 'node name defaults to the host name');
  const empty = parseConfig('', 'empty.yaml');
  t.equal(empty.bgp, null);
  t.same(empty.dataplane, { kind: 'none' });
});

t.test('forms that normalise', async (t) => {
  const c = parseConfig(`
bgp:
  asn: 65000
  routerId: 10.0.0.1
  listen: false
  gracefulRestart: false
  peers:
    - { address: "2001:DB8:0:0::1", asn: 65001, families: [ipv6, ipv4], gracefulRestart: true, import: [10.0.0.0/8] }
    - { address: 10.0.0.2, asn: 65001, gracefulRestart: { restartTime: 30 }, export: [{ prefix: 10.0.0.0/8, ge: 24, action: reject }] }
  announce: [10.1.0.0/24, 10.1.0.0/24]
status: { listen: "[::1]:9999" }
ipc: false
`);
  t.equal(c.bgp!.listen, false);
  t.equal(c.bgp!.gracefulRestart, false);
  t.equal(c.bgp!.peers[0].address, '2001:db8::1', 'canonical address');
  t.same(c.bgp!.peers[0].families, ['ipv4', 'ipv6'], 'canonical family order');
  t.same(c.bgp!.peers[0].gracefulRestart, { restartTime: 120 }, 'true = on with the default restart time');
  t.same(c.bgp!.peers[0].import, [{ prefix: '10.0.0.0/8', action: 'accept' }], 'a bare prefix is an exact rule');
  t.same(c.bgp!.peers[1].gracefulRestart, { restartTime: 30 });
  t.same(c.bgp!.peers[1].export, [{ prefix: '10.0.0.0/8', ge: 24, action: 'reject' }]);
  t.same(c.bgp!.announce, ['10.1.0.0/24'], 'duplicates dropped');
  t.same(c.status, { listen: { address: '::1', port: 9999 } });
  t.equal(c.ipc, false);
  t.equal(parseConfig('bgp: { asn: 1, routerId: 1.1.1.1, listen: { port: 0 } }').bgp!.listen, false, 'port 0 = never accept');
  t.same(parseConfig('bgp: { asn: 1, routerId: 1.1.1.1, listen: "127.0.0.2:1179" }').bgp!.listen, { address: '127.0.0.2', port: 1179 });
  t.equal(parseConfig('status: false').status, false);
});

t.test('every kind of bad bgp input names its field and value', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['asn 0', 'bgp: { asn: 0, routerId: 10.0.0.1 }', /^bgp\.asn: must be 1\.\.4294967295, got 0$/],
    ['asn too big', 'bgp: { asn: 4294967296, routerId: 10.0.0.1 }', /^bgp\.asn: must be 1\.\.4294967295, got 4294967296$/],
    ['asn as a string', 'bgp: { asn: "65000", routerId: 10.0.0.1 }', /^bgp\.asn: must be 1\.\.4294967295, got "65000"$/],
    ['asn fraction', 'bgp: { asn: 1.5, routerId: 10.0.0.1 }', /^bgp\.asn: must be 1\.\.4294967295, got 1\.5$/],
    ['asn missing', 'bgp: { routerId: 10.0.0.1 }', /^bgp\.asn: required$/],
    ['routerId IPv6', 'bgp: { asn: 1, routerId: "fd00::1" }', /^bgp\.routerId: must be an IPv4 address, got "fd00::1"$/],
    ['routerId junk', 'bgp: { asn: 1, routerId: 10.0.0 }', /^bgp\.routerId: must be an IPv4 address, got "10\.0\.0"$/],
    ['routerId zero', 'bgp: { asn: 1, routerId: 0.0.0.0 }', /^bgp\.routerId: must not be 0\.0\.0\.0$/],
    ['listen port', 'bgp: { asn: 1, routerId: 1.1.1.1, listen: { port: 70000 } }', /^bgp\.listen\.port: must be 0\.\.65535, got 70000$/],
    ['listen address', 'bgp: { asn: 1, routerId: 1.1.1.1, listen: { address: localhost } }', /^bgp\.listen\.address: must be an IP address, got "localhost"$/],
    ['listen true', 'bgp: { asn: 1, routerId: 1.1.1.1, listen: true }', /^bgp\.listen: must be a mapping, got true$/],
    ['restartTime 0', 'bgp: { asn: 1, routerId: 1.1.1.1, gracefulRestart: { restartTime: 0 } }', /^bgp\.gracefulRestart\.restartTime: must be 1\.\.4095, got 0$/],
    ['restartTime 4096', 'bgp: { asn: 1, routerId: 1.1.1.1, gracefulRestart: { restartTime: 4096 } }', /^bgp\.gracefulRestart\.restartTime: must be 1\.\.4095, got 4096$/],
    ['gracefulRestart junk', 'bgp: { asn: 1, routerId: 1.1.1.1, gracefulRestart: yes please }', /^bgp\.gracefulRestart: must be true, false or \{ restartTime \}, got "yes please"$/],
    ['peers not a list', 'bgp: { asn: 1, routerId: 1.1.1.1, peers: { address: 1.2.3.4 } }', /^bgp\.peers: must be a list, got \{"address":"1\.2\.3\.4"\}$/],
    ['peer address', bgp('    - { address: 10.0.0.256, asn: 1 }\n'), /^bgp\.peers\[0\]\.address: must be an IP address, got "10\.0\.0\.256"$/],
    ['peer address missing', bgp('    - { asn: 1 }\n'), /^bgp\.peers\[0\]\.address: required$/],
    ['peer asn 0', bgp('    - { address: 10.0.0.2, asn: 0 }\n'), /^bgp\.peers\[0\]\.asn: must be 1\.\.4294967295, got 0$/],
    ['peer port 0', bgp('    - { address: 10.0.0.2, asn: 1, port: 0 }\n'), /^bgp\.peers\[0\]\.port: must be 1\.\.65535, got 0$/],
    ['families unknown', bgp('    - { address: 10.0.0.2, asn: 1, families: [ipv4, l2vpn] }\n'), /^bgp\.peers\[0\]\.families\[1\]: must be one of ipv4, ipv6, got "l2vpn"$/],
    ['families empty', bgp('    - { address: 10.0.0.2, asn: 1, families: [] }\n'), /^bgp\.peers\[0\]\.families: must be a non-empty list of ipv4, ipv6, got \[\]$/],
    ['families repeated', bgp('    - { address: 10.0.0.2, asn: 1, families: [ipv4, ipv4] }\n'), /^bgp\.peers\[0\]\.families: must be a list without repeats/],
    ['holdTime 1', bgp('    - { address: 10.0.0.2, asn: 1, holdTime: 1 }\n'), /^bgp\.peers\[0\]\.holdTime: must be 0 or 3\.\.65535, got 1$/],
    ['holdTime 65536', bgp('    - { address: 10.0.0.2, asn: 1, holdTime: 65536 }\n'), /^bgp\.peers\[0\]\.holdTime: must be 0 or 3\.\.65535, got 65536$/],
    ['passive string', bgp('    - { address: 10.0.0.2, asn: 1, passive: "no" }\n'), /^bgp\.peers\[0\]\.passive: must be true or false, got "no"$/],
    ['peer restartTime', bgp('    - { address: 10.0.0.2, asn: 1, gracefulRestart: { restartTime: 9999 } }\n'), /^bgp\.peers\[0\]\.gracefulRestart\.restartTime: must be 1\.\.4095, got 9999$/],
    ['duplicate peer', bgp('    - { address: "fd00::1", asn: 1 }\n    - { address: "FD00:0::1", asn: 2 }\n'), /^bgp\.peers\[1\]\.address: duplicate peer fd00::1 \(also bgp\.peers\[0\]\)$/],
    ['rule prefix host bits', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: 10.0.0.1/8 }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.prefix: host bits set \(the network is 10\.0\.0\.0\/8\), got "10\.0\.0\.1\/8"$/],
    ['rule prefix missing', bgp('    - { address: 10.0.0.2, asn: 1, export: [{ le: 24 }] }\n'), /^bgp\.peers\[0\]\.export\[0\]\.prefix: required$/],
    ['rule ge < len', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: 10.0.0.0/16, ge: 8 }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.ge: must be at least the prefix length 16, got 8$/],
    ['rule le < ge', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: 10.0.0.0/16, ge: 24, le: 20 }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.le: must be at least ge \(24\), got 20$/],
    ['rule le < len', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: 10.0.0.0/16, le: 8 }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.le: must be at least the prefix length 16, got 8$/],
    ['rule le > max', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: "fd00::/8", le: 129 }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.le: must be 0\.\.128, got 129$/],
    ['rule action', bgp('    - { address: 10.0.0.2, asn: 1, import: [{ prefix: 10.0.0.0/8, action: deny }] }\n'), /^bgp\.peers\[0\]\.import\[0\]\.action: must be one of accept, reject, got "deny"$/],
    ['announce bad length', 'bgp: { asn: 1, routerId: 1.1.1.1, announce: [10.0.0.0/33] }', /^bgp\.announce\[0\]: length 33 out of range 0\.\.32, got "10\.0\.0\.0\/33"$/],
    ['announce no length', 'bgp: { asn: 1, routerId: 1.1.1.1, announce: [10.0.0.0] }', /^bgp\.announce\[0\]: missing "\/length", got "10\.0\.0\.0"$/],
    ['announce number', 'bgp: { asn: 1, routerId: 1.1.1.1, announce: [42] }', /^bgp\.announce\[0\]: must be a prefix like 10\.0\.0\.0\/24 or fd00::\/64, got 42$/],
  ];
  for (const [name, text, want] of cases) {
    const errs = errorsOf(t, text);
    t.equal(errs.length, 1, `${name}: one error (${errs.join(' | ')})`);
    t.match(errs[0], want, name);
  }
});

t.test('unknown fields are reported with a did-you-mean', async (t) => {
  const errs = errorsOf(t, `
bgp:
  asn: 65000
  routerid: 10.0.0.1
  peers:
    - { address: 10.0.0.2, asn: 1 }
    - { address: 10.0.0.3, asn: 1, holdtime: 90, famillies: [ipv4], color: red }
  anounce: []
ipam: { strictAfinity: true, pools: [{ name: a, cidr: 10.0.0.0/16, blocksize: 26 }] }
dataplane: { kind: linux, tabel: 100 }
statu: {}
`);
  t.same(errs.sort(), [
    'bgp.anounce: unknown field (did you mean announce?)',
    'bgp.peers[1].color: unknown field (known: address, asn, port, families, holdTime, sendHoldTime, passive, gracefulRestart, import, export, maxPrefixes, password, ttlSecurity, bfd, allowAsIn, localAsn)',
    'bgp.peers[1].famillies: unknown field (did you mean families?)',
    'bgp.peers[1].holdtime: unknown field (did you mean holdTime?)',
    'bgp.routerId: required',
    'bgp.routerid: unknown field (did you mean routerId?)',
    'dataplane.tabel: unknown field (did you mean table?)',
    'ipam.pools[0].blocksize: unknown field (did you mean blockSize?)',
    'ipam.strictAfinity: unknown field (did you mean strictAffinity?)',
    'statu: unknown field (did you mean status?)',
  ].sort());
  t.equal(suggest('zzzzzz', ['asn', 'routerId']), undefined, 'no wild guesses');
});

t.test('errors from all sections are collected, with source lines', async (t) => {
  let err: ConfigError | undefined;
  try {
    parseConfig(`node: { name: Node_A, os: mac, labels: { zone: 1 } }
bgp:
  asn: 0
  routerId: 10.0.0.1
  peers:
    - address: 10.0.0.2
      asn: 70000000000
ipam:
  store: "etcd://10.0.0.5"
  maxBlocksPerHost: -1
  pools:
    - { name: a, cidr: 10.0.0.0/16, blockSize: 8 }
    - { name: a, cidr: "fd00::/48", blockSize: 64, allowedUses: [Workload, Pods], reservation: { kind: perHost, start: 1 } }
    - { name: b, cidr: 10.1.0.0/24, blockSize: 20 }
dataplane: { kind: hns, mode: l3, vni: 10 }
status: { listen: "nope:x" }
ipc: { path: "" }
`, 'node.yaml');
  } catch (e) {
    err = e as ConfigError;
  }
  t.ok(err, 'throws');
  const byPath = new Map(err!.issues.map((i) => [i.path, i]));
  const want: [string, RegExp, number][] = [
    ['node.name', /DNS name.*got "Node_A"/, 1],
    ['node.os', /one of linux, windows, got "mac"/, 1],
    ['node.labels.zone', /a string \(quote it\), got 1/, 1],
    ['bgp.asn', /1\.\.4294967295, got 0/, 3],
    ['bgp.peers[0].asn', /got 70000000000/, 7],
    ['ipam.store', /etcd:\/\/host:port.*got "etcd:\/\/10\.0\.0\.5"/, 9],
    ['ipam.maxBlocksPerHost', /got -1/, 10],
    ['ipam.pools[0].blockSize', /20\.\.32, got 8/, 12],
    ['ipam.pools[1].name', /duplicate pool name "a"/, 13],
    ['ipam.pools[1].blockSize', /116\.\.128, got 64/, 13],
    ['ipam.pools[1].allowedUses[1]', /Workload, Tunnel, got "Pods"/, 13],
    ['ipam.pools[1].reservation.start', /not used with kind perHost/, 13],
    ['ipam.pools[2].blockSize', /not be shorter than the pool's prefix length 24, got 20/, 14],
    ['dataplane.mode', /l2bridge, l2tunnel, overlay, got "l3"/, 15],
    ['dataplane.vni', /4096\.\.65535, got 10/, 15],
    ['status.listen', /got "nope:x"/, 16],
    ['ipc.path', /non-empty string, got ""/, 17],
  ];
  for (const [path, msg, line] of want) {
    const i = byPath.get(path);
    t.ok(i, `${path} reported`);
    if (!i) continue;
    t.match(i.message, msg, path);
    t.equal(i.line, line, `${path} on line ${line}`);
  }
  t.equal(err!.issues.length, want.length, `exactly these errors:\n${err!.message}`);
  t.match(err!.message.split('\n')[3], /^bgp\.asn: must be 1\.\.4294967295, got 0 \(node\.yaml:3\)$/, 'message: path, problem, value, file:line');
  t.match(String(err), /^ConfigError: node\.name: /);
});

t.test('syntax errors, duplicate keys and wrong top-level shapes', async (t) => {
  t.match(errorsOf(t, 'bgp: { asn: 1\n'), [/^\(syntax\): /]);
  t.match(errorsOf(t, 'bgp:\n  asn: 1\n  asn: 2\n'), [/^\(syntax\): .*unique/i]);
  t.match(errorsOf(t, '- a\n- b\n'), [/^\(top level\): must be a mapping, got a list$/]);
  t.match(errorsOf(t, '{"bgp": {"asn": 1, "routerId": "1.1.1.1",}'), [/^\(syntax\)/]);
  t.match(errorsOf(t, 'bgp: 7'), [/^bgp: must be a mapping, got 7$/]);
  t.match(errorsOf(t, 'node: { labels: [a] }'), [/^node\.labels: must be a mapping of label names to strings, got \["a"\]$/]);
});

t.test('good files round-trip through YAML and JSON, and load from disk', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const configs: Config[] = [
    parseConfig(NODE_EXAMPLE),
    parseConfig(`
node: { name: win-1, os: windows }
bgp:
  asn: 4200000001
  routerId: 192.0.2.1
  listen: false
  gracefulRestart: false
  peers: [{ address: "2001:db8::1", asn: 4200000002, port: 1179, families: [ipv4, ipv6], holdTime: 0, passive: true,
            import: [{ prefix: "2001:db8::/32", ge: 48, le: 64, action: reject }, "::/0"], export: [] }]
ipam:
  store: "etcd://10.0.0.5:2379,[fd00::5]:2379"
  pools:
    - { name: micro, cidr: 10.9.0.0/24, blockSize: 30, reservation: { kind: perBlock, start: 3, end: 1 }, natOutgoing: true }
    - { name: v6, cidr: "fd00:9::/112", reservation: none, allowedUses: [Tunnel], disabled: true, nodeSelector: 'os == "linux"' }
dataplane: { kind: hns, network: Calico, mode: overlay, vni: 4096, drMac: 00-15-5D-AA-BB-01, providerAddress: 192.0.2.1, adapter: Ethernet, ownedPrefixes: [10.8.0.0/14], routeMetric: 300, endpointGraceSeconds: 60 }
status: false
ipc: false
`),
    parseConfig('dataplane: { kind: linux, table: 100 }\nstatus: { listen: "[::]:0" }\n'),
  ];
  for (const [i, c] of configs.entries()) {
    const yaml = formatConfig(c, 'yaml');
    const json = formatConfig(c, 'json');
    t.same(parseConfig(yaml, 'rt.yaml'), c, `config ${i}: YAML round-trip`);
    t.same(parseConfig(json, 'rt.json'), c, `config ${i}: JSON round-trip`);
    t.same(JSON.parse(json), JSON.parse(JSON.stringify(c)), `config ${i}: JSON is the plain config`);
    writeFileSync(join(dir, `c${i}.json`), json);
    writeFileSync(join(dir, `c${i}.yaml`), yaml);
    t.same(loadConfig(join(dir, `c${i}.json`)), c, `config ${i}: loadConfig JSON`);
    t.same(loadConfig(join(dir, `c${i}.yaml`)), c, `config ${i}: loadConfig YAML`);
  }
  // JSON as people write it: tabs, nested arrays.
  const c = parseConfig('{\n\t"bgp": {\n\t\t"asn": 65000,\n\t\t"routerId": "10.0.0.1",\n\t\t"peers": [{"address": "10.0.0.2", "asn": 65001, "holdtime": 30}]\n\t}\n}'.replace('holdtime', 'holdTime'), 'x.json');
  t.equal(c.bgp!.peers[0].holdTime, 30, 'tab-indented JSON');
  t.throws(() => loadConfig(join(dir, 'missing.yaml')), { name: 'ConfigError', message: /^\(file\): cannot read .*missing\.yaml: no such file \(ENOENT\)/ });
});
