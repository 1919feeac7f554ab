// ipam.etcd in the config file: TLS files and user/password for an etcd store, validated with field paths; the
// password only by reference.
import t from 'tap';
import { ConfigError, formatConfig, parseConfig } from '../../src/config/config.ts';

const base = (store: string, etcd: string) => `node: { name: n1 }\nipam:\n  store: "${store}"\n  etcd: ${etcd}\n`;

function issues(text: string): string {
  try {
    parseConfig(text, 'node.yaml');
    return '';
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.message;
  }
}

t.test('a full ipam.etcd is accepted and printed back without secrets', async (t) => {
  const cfg = parseConfig(base('etcds://10.0.0.5:2379,10.0.0.6:2379',
    '{ ca: /etc/bs/ca.pem, cert: /etc/bs/client.pem, key: /etc/bs/client.key, username: node-a, password: { file: /etc/bs/etcd-password } }'));
  t.same(cfg.ipam!.etcd, { ca: '/etc/bs/ca.pem', cert: '/etc/bs/client.pem', key: '/etc/bs/client.key', username: 'node-a', password: { file: '/etc/bs/etcd-password' } });
  t.same(parseConfig(formatConfig(cfg)).ipam!.etcd, cfg.ipam!.etcd, 'formatConfig round-trips it');
  t.same(parseConfig(base('etcd://10.0.0.5:2379', '{ username: u, password: { env: ETCD_PASSWORD }, allowInsecure: true }')).ipam!.etcd,
    { username: 'u', password: { env: 'ETCD_PASSWORD' }, allowInsecure: true }, 'user/password over plain etcd:// only when allowed');
  t.throws(() => parseConfig(base('etcd://10.0.0.5:2379', '{ username: u, password: { env: ETCD_PASSWORD } }')),
    { message: /ipam\.etcd\.password: would be sent in the clear over etcd:\/\/: use etcds:\/\/host:port \(TLS\), or set allowInsecure: true/ }, 'refused by default');
  t.throws(() => parseConfig(base('etcd://10.0.0.5:2379', '{ username: u, password: { env: P }, allowInsecure: maybe }')), { message: /ipam\.etcd\.allowInsecure/ });
  t.equal(parseConfig('ipam: { store: "etcd://h:1" }\n').ipam!.etcd, undefined, 'absent: no etcd security');
});

t.test('bad ipam.etcd settings are named by field', async (t) => {
  const cases: Array<[string, RegExp]> = [
    [base('etcd://h:1', '{ ca: /ca.pem }'), /ipam\.etcd\.ca: needs a TLS store URL \(etcds:\/\/host:port\)/],
    [base('etcds://h:1', '{ cert: /c.pem }'), /ipam\.etcd\.key: is required with cert/],
    [base('etcds://h:1', '{ username: u }'), /ipam\.etcd\.password: is required with username/],
    [base('etcds://h:1', '{ username: u, password: secret }'), /ipam\.etcd\.password: must not be written in the config: use \{ file: PATH \} or \{ env: VARIABLE \}/],
    [base('etcds://h:1', '{ username: u, password: { file: /p, env: P } }'), /ipam\.etcd\.password: must be exactly one of/],
    [base('etcds://h:1', '{ ca: certs/ca.pem }'), /ipam\.etcd\.ca: must be an absolute path to a PEM file/],
    [base('etcds://h:1', '{ cafile: /ca.pem }'), /ipam\.etcd\.cafile/],
    [base('/var/lib/blockspeaker', '{ username: u, password: { env: P } }'), /ipam\.etcd: only for an etcd store/],
    [base('etcds://nohost', '{}'), /ipam\.store: must be a directory or etcd:\/\/host:port.*etcds:\/\//],
  ];
  for (const [text, re] of cases) t.match(issues(text), re, re.source);
  t.notMatch(issues(base('etcds://h:1', '{ username: u, password: hunter2 }')), /hunter2/, 'an inline password is not echoed back');
});
