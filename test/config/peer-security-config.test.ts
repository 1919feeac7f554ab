// peers[].password and peers[].ttlSecurity in node.yaml (validated, errors name the field, the password only by
// reference), and Calico's BGPPeer password.secretKeyRef / ttlSecurity mapped onto them, selector peers included.
import t from 'tap';
import { selectorPeers, type MeshSettings } from '../../src/cluster/mesh.ts';
import type { ClusterNode } from '../../src/cluster/node.ts';
import { importCalico } from '../../src/config/calico.ts';
import { CALICO_SECRETS_DIR } from '../../src/config/calico-peer-security.ts';
import { formatConfig, parseConfig } from '../../src/config/config.ts';

const cfg = (extra: string) => `bgp: { asn: 65001, routerId: 10.0.0.1, peers: [ { address: 10.0.0.2, asn: 65002, ${extra} } ] }\n`;


t.test('password { file } / { env } and ttlSecurity are accepted and printed back', async (t) => {
  const c = parseConfig(cfg('password: { file: /etc/blockspeaker/tor1.pw }, ttlSecurity: 1'));
  t.match(c.bgp!.peers[0], { password: { file: '/etc/blockspeaker/tor1.pw' }, ttlSecurity: 1 });
  t.same(parseConfig(formatConfig(c)).bgp!.peers[0], c.bgp!.peers[0], 'formatConfig round-trips them');
  t.same(parseConfig(cfg('password: { env: TOR1_PASSWORD }')).bgp!.peers[0].password, { env: 'TOR1_PASSWORD' });
  t.equal(parseConfig(cfg('holdTime: 90')).bgp!.peers[0].password, undefined, 'absent: none');
  t.equal(parseConfig(cfg('ttlSecurity: 255')).bgp!.peers[0].ttlSecurity, 255);
});

t.test('bad values are named by field; a password in clear is refused', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [cfg('password: hunter2'), /bgp\.peers\[0\]\.password: must not be written in the config: use \{ file: PATH \} or \{ env: VARIABLE \}/],
    [cfg('password: { file: /a, env: B }'), /bgp\.peers\[0\]\.password: must be exactly one of/],
    [cfg('password: {}'), /bgp\.peers\[0\]\.password: must be exactly one of/],
    [cfg('password: { file: relative/pw }'), /bgp\.peers\[0\]\.password\.file: must be an absolute path, got "relative\/pw"/],
    [cfg('password: { env: "1BAD-NAME" }'), /bgp\.peers\[0\]\.password\.env: must be an environment variable name/],
    [cfg('password: { fiel: /a }'), /bgp\.peers\[0\]\.password\.fiel: unknown field/],
    [cfg('ttlSecurity: 0'), /bgp\.peers\[0\]\.ttlSecurity: must be 1\.\.255, got 0/],
    [cfg('ttlSecurity: 256'), /bgp\.peers\[0\]\.ttlSecurity: must be 1\.\.255, got 256/],
    [cfg('ttlSecurity: "1"'), /bgp\.peers\[0\]\.ttlSecurity: must be 1\.\.255, got "1"/],
  ];
  for (const [text, re] of cases) t.throws(() => parseConfig(text, 'node.yaml'), { name: 'ConfigError', message: re }, text);
  const e = t.throws(() => parseConfig(cfg('password: hunter2'))) as Error;
  t.notMatch(e.message, /hunter2/, 'the error does not repeat the password');
});

const doc = (spec: string, name = 'tor') => `apiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: { name: ${name} }\nspec:\n${spec}`;

t.test('Calico BGPPeer: password.secretKeyRef becomes the mounted Secret file, ttlSecurity the hops (0 = off)', async (t) => {
  const r = importCalico([
    doc('  peerIP: 10.0.0.1\n  asNumber: 65001\n  password: { secretKeyRef: { name: bgp-secrets, key: rr-password } }\n  ttlSecurity: 1\n'),
    doc('  peerIP: 10.0.0.2\n  asNumber: 65001\n  ttlSecurity: 0\n', 'tor2'),
    doc("  nodeSelector: all()\n  peerSelector: route-reflector == 'true'\n  password: { secretKeyRef: { name: rr, key: pw } }\n  ttlSecurity: 2\n", 'rr'),
  ].join('---\n'), 'p.yaml', 'n');
  t.match(r.peers[0], { address: '10.0.0.1', password: { file: `${CALICO_SECRETS_DIR}/bgp-secrets/rr-password` }, ttlSecurity: 1 });
  t.equal(r.peers[1].ttlSecurity, undefined);
  t.equal(r.peers[1].password, undefined);
  t.same(r.warnings.filter((w) => /password|ttlSecurity/.test(w)), [], 'honoured: no warning');
  t.match(r.selectorPeers[0], { password: { file: `${CALICO_SECRETS_DIR}/rr/pw` }, ttlSecurity: 2 });
  // The peers the selector makes carry them.
  const S: MeshSettings = { defaultAsn: 64512, port: 179, holdTime: 90, gracefulRestart: false };
  const rr: ClusterNode = { name: 'rr', labels: { 'route-reflector': 'true' }, ipv4Address: '10.0.0.9/24', routeReflectorClusterID: '244.0.0.1' };
  const me: ClusterNode = { name: 'n', labels: {}, ipv4Address: '10.0.0.1/24' };
  t.match(selectorPeers(me, [me, rr], r.selectorPeers, S), [{ address: '10.0.0.9', password: { file: `${CALICO_SECRETS_DIR}/rr/pw` }, ttlSecurity: 2 }]);
});

t.test('Calico BGPPeer: bad password / ttlSecurity refuse the file, naming the field', async (t) => {
  const bad: Array<[string, RegExp]> = [
    ['  password: hunter2\n', /spec\.password: must be \{ secretKeyRef: \{ name, key \} \}/],
    ['  password: { secretKeyRef: { name: "../etc", key: k } }\n', /spec\.password\.secretKeyRef\.name: must be a Secret name, got "\.\.\/etc"/],
    ['  password: { secretKeyRef: { name: s, key: "a/b" } }\n', /spec\.password\.secretKeyRef\.key: must be a key of the Secret/],
    ['  ttlSecurity: 300\n', /spec\.ttlSecurity: must be 0\.\.255 hops, got 300/],
  ];
  for (const [extra, re] of bad) {
    const e = t.throws(() => importCalico(doc(`  peerIP: 10.0.0.1\n  asNumber: 65001\n${extra}`), 'b.yaml', 'n')) as Error;
    t.match(e.message, re, extra);
  }
});
