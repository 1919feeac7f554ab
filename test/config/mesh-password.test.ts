// bgp.nodeMeshPassword: validated in node.yaml like a peer's password (by reference only, errors name the field),
// Calico's BGPConfiguration nodeMeshPassword.secretKeyRef mapped to the mounted Secret file, node.yaml's winning a
// disagreement, and every mesh peer carrying it while peer-selector peers keep their BGPPeer's own.
import t from 'tap';
import { meshPeers, selectorPeers, type MeshSettings } from '../../src/cluster/mesh.ts';
import type { ClusterNode } from '../../src/cluster/node.ts';
import { importCalico } from '../../src/config/calico.ts';
import { CALICO_SECRETS_DIR } from '../../src/config/calico-peer-security.ts';
import { formatConfig, parseConfig } from '../../src/config/config.ts';
import type { BgpConfig } from '../../src/config/types.ts';
import { applyCalicoImport } from '../../src/daemon/calico-merge.ts';

const cfg = (extra: string) => `bgp: { asn: 64512, routerId: 10.0.0.1, ${extra} }\n`;

t.test('node.yaml: bgp.nodeMeshPassword { file } / { env }, printed back; absent: none', async (t) => {
  const c = parseConfig(cfg('nodeMeshPassword: { file: /etc/blockspeaker/secrets/mesh/pw }'));
  t.same(c.bgp!.nodeMeshPassword, { file: '/etc/blockspeaker/secrets/mesh/pw' });
  t.same(parseConfig(formatConfig(c)).bgp!.nodeMeshPassword, c.bgp!.nodeMeshPassword, 'formatConfig round-trips it');
  t.same(parseConfig(cfg('nodeMeshPassword: { env: MESH_PW }')).bgp!.nodeMeshPassword, { env: 'MESH_PW' });
  t.equal(parseConfig(cfg('announce: []')).bgp!.nodeMeshPassword, undefined);
});

t.test('node.yaml: bad values are named by field; a password in clear is refused and not repeated', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [cfg('nodeMeshPassword: hunter2'), /bgp\.nodeMeshPassword: must not be written in the config/],
    [cfg('nodeMeshPassword: { file: pw }'), /bgp\.nodeMeshPassword\.file: must be an absolute path, got "pw"/],
    [cfg('nodeMeshPassword: { env: "A-B" }'), /bgp\.nodeMeshPassword\.env: must be an environment variable name/],
    [cfg('nodeMeshPassword: { file: /a, env: B }'), /bgp\.nodeMeshPassword: must be exactly one of/],
  ];
  for (const [text, re] of cases) {
    const e = t.throws(() => parseConfig(text, 'node.yaml'), { name: 'ConfigError', message: re }, text) as Error;
    t.notMatch(e.message, /hunter2/);
  }
});

const bgpConf = (spec: string) => `apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: { name: default }\nspec:\n${spec}`;

t.test('Calico: nodeMeshPassword.secretKeyRef becomes the mounted Secret file, without a warning', async (t) => {
  const r = importCalico(bgpConf('  nodeMeshPassword: { secretKeyRef: { name: bgp-mesh, key: password } }\n'), 'c.yaml', 'n');
  t.same(r.nodeMeshPassword, { file: `${CALICO_SECRETS_DIR}/bgp-mesh/password` });
  t.same(r.warnings.filter((w) => /nodeMeshPassword/.test(w)), [], 'honoured: no warning');
  const bad: Array<[string, RegExp]> = [
    ['  nodeMeshPassword: hunter2\n', /spec\.nodeMeshPassword: must be \{ secretKeyRef: \{ name, key \} \}/],
    ['  nodeMeshPassword: { secretKeyRef: { name: "../x", key: k } }\n', /spec\.nodeMeshPassword\.secretKeyRef\.name: must be a Secret name/],
    ['  nodeMeshPassword: { secretKeyRef: { name: s, key: "a/b" } }\n', /spec\.nodeMeshPassword\.secretKeyRef\.key: must be a key of the Secret/],
  ];
  for (const [spec, re] of bad) {
    const e = t.throws(() => importCalico(bgpConf(spec), 'b.yaml', 'n')) as Error;
    t.match(e.message, re, spec);
  }
});

t.test("merge: the imported password fills in; node.yaml's wins a disagreement, with a warning", async (t) => {
  const imp = importCalico(bgpConf('  nodeMeshPassword: { secretKeyRef: { name: m, key: k } }\n'), 'c.yaml', 'n');
  const target = (bgp: BgpConfig) => ({ pools: [], ipam: {} as never, getNode: () => ({ name: 'n', os: 'linux' as const, labels: {} }), node() {}, bgp });
  const base = parseConfig(cfg('announce: []')).bgp!;
  const warns: string[] = [];
  applyCalicoImport(imp, 'c.yaml', target(base), (w) => warns.push(w));
  t.same(base.nodeMeshPassword, { file: `${CALICO_SECRETS_DIR}/m/k` });
  t.same(warns, []);
  const own = parseConfig(cfg('nodeMeshPassword: { env: MESH }')).bgp!;
  applyCalicoImport(imp, 'c.yaml', target(own), (w) => warns.push(w));
  t.same(own.nodeMeshPassword, { env: 'MESH' });
  t.match(warns, [/c\.yaml: BGPConfiguration nodeMeshPassword differs from bgp\.nodeMeshPassword; the config's is used/]);
  t.notMatch(warns.join(), /MESH|\/m\/k/, 'the warning names neither source');
});

t.test('every mesh peer carries the mesh password; peer-selector peers keep their own', async (t) => {
  const S: MeshSettings = { defaultAsn: 64512, port: 179, holdTime: 90, gracefulRestart: false, password: { file: '/s/mesh' } };
  const me: ClusterNode = { name: 'a', labels: {}, ipv4Address: '10.0.0.1/24', ipv6Address: 'fd00::1/64' };
  const others: ClusterNode[] = [
    { name: 'b', labels: {}, ipv4Address: '10.0.0.2/24', ipv6Address: 'fd00::2/64' },
    { name: 'c', labels: { rr: 'true' }, ipv4Address: '10.0.0.3/24' },
  ];
  const mesh = meshPeers(me, [me, ...others], S);
  t.same(mesh.map((p) => [p.address, p.password]), [['10.0.0.2', { file: '/s/mesh' }], ['10.0.0.3', { file: '/s/mesh' }], ['fd00::2', { file: '/s/mesh' }]]);
  const noPw = meshPeers(me, [me, ...others], { ...S, password: undefined });
  t.ok(noPw.every((p) => !('password' in p)), 'without one, no password field at all');
  const sel = selectorPeers(me, [me, ...others], [{ name: 'rr', peerSelector: "rr == 'true'", password: { file: '/s/rr' } } as never], S);
  t.same(sel.map((p) => [p.address, p.password]), [['10.0.0.3', { file: '/s/rr' }]]);
});

t.test('node.yaml: bgp.nodeMeshMaxPrefixes in peers[].maxPrefixes\' form, printed back; bad values named by field', async (t) => {
  const c = parseConfig(cfg('nodeMeshMaxPrefixes: 10000'));
  t.equal(c.bgp!.nodeMeshMaxPrefixes, 10000);
  t.same(parseConfig(formatConfig(c)).bgp!.nodeMeshMaxPrefixes, 10000, 'formatConfig round-trips it');
  t.same(parseConfig(cfg('nodeMeshMaxPrefixes: { ipv4: 500, restart: 30 }')).bgp!.nodeMeshMaxPrefixes, { ipv4: 500, restart: 30 });
  t.equal(parseConfig(cfg('announce: []')).bgp!.nodeMeshMaxPrefixes, undefined);
  t.throws(() => parseConfig(cfg('nodeMeshMaxPrefixes: 0')), /bgp\.nodeMeshMaxPrefixes/);
  t.throws(() => parseConfig(cfg('nodeMeshMaxPrefixes: { warningPercent: 50 }')), /bgp\.nodeMeshMaxPrefixes: give a limit for ipv4 and\/or ipv6/);
});
