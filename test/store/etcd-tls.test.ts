// The etcd store against a real etcd serving TLS with client-certificate auth, and with etcd's user/password auth
// on, using certificates made by openssl for this run. A wrong CA, a missing client certificate and a wrong
// password each fail at open with an error that names the endpoint and the cause; the password appears nowhere.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStore } from '../../src/store/open.ts';
import { StoreError } from '../../src/store/types.ts';
import { runCli } from '../kit/cli.ts';
import { toolsGate } from '../kit/tools.ts';
import { makePki, type TestPki } from './certs.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';

const FAST = { connectTimeoutMs: 3000, retryForMs: 3000 };
const PASSWORD = 'pa55-w0rd-not-in-logs';

async function openError(p: Promise<unknown>): Promise<string> {
  try {
    const s = (await p) as { close(): Promise<void> };
    await s.close();
    return '(opened)';
  } catch (e) {
    return e instanceof StoreError ? e.message : `not a StoreError: ${String(e)}`;
  }
}

if (etcdGate(t) && toolsGate(t, ['openssl', 'etcdctl'])) {
  let pki: TestPki;
  t.before(() => {
    pki = makePki();
  });
  t.teardown(() => pki?.destroy());

  t.test('etcds:// with a CA and a client certificate against etcd --client-cert-auth', async (t) => {
    const root = pki.client('root');
    const etcd = await EtcdCluster.start(t, {
      tls: { ca: pki.ca, cert: pki.serverCert, key: pki.serverKey, clientCertAuth: true, clientCert: root.cert, clientKey: root.key },
    });
    const url = etcd.url;
    t.match(url, /^etcds:\/\//);
    const ep = etcd.endpoints[0];

    const client = pki.client('blockspeaker');
    const store = await openStore(url, { ...FAST, security: { ca: pki.ca, cert: client.cert, key: client.key } });
    t.match(store.name, /^etcds:\/\//, 'the store says it speaks TLS');
    await store.put('/blockspeaker/x', 'over TLS');
    t.equal((await store.get('/blockspeaker/x'))?.value, 'over TLS', 'a write and a read over TLS');
    await store.close();

    const wrongCa = await openError(openStore(url, { ...FAST, security: { ca: pki.otherCa, cert: client.cert, key: client.key } }));
    t.match(wrongCa, ep, `wrong CA: the error names the endpoint (${wrongCa})`);
    t.match(wrongCa, /TLS .* failed: etcd's server certificate is not signed by the CA we trust/, 'wrong CA: the error says the certificate is the cause');

    const noCert = await openError(openStore(url, { ...FAST, security: { ca: pki.ca } }));
    t.match(noCert, ep, `no client certificate: the error names the endpoint (${noCert})`);
    t.match(noCert, /etcd refused our client certificate, or we sent none/, 'no client certificate: refused, and the error says why');

    const plain = await openError(openStore(url.replace('etcds://', 'etcd://'), FAST));
    t.match(plain, ep, `plain etcd:// to a TLS etcd: the error names the endpoint (${plain})`);

    t.match(await openError(openStore(url, { ...FAST, security: { ca: '/nonexistent/ca.pem' } })), /etcd ca: cannot read \/nonexistent\/ca\.pem: ENOENT/,
      'a CA file that cannot be read is named');
    t.match(await openError(openStore(url.replace('etcds://', 'etcd://'), { ...FAST, security: { ca: pki.ca } })), /etcd ca needs a TLS store URL/,
      'a CA with a plain etcd:// URL is refused');
  });

  t.test('username and password (from a file or the environment) against etcd with auth enabled', async (t) => {
    const root = pki.client('root');
    const etcd = await EtcdCluster.start(t, {
      tls: { ca: pki.ca, cert: pki.serverCert, key: pki.serverKey, clientCertAuth: true, clientCert: root.cert, clientKey: root.key },
    });
    const ep = etcd.endpoints[0];
    // Set up users with etcdctl as root (the client certificate's CN), then turn auth on.
    const ctl = (...args: string[]) => {
      const r = spawnSync('etcdctl', ['--endpoints', `https://${ep}`, '--cacert', pki.ca, '--cert', root.cert, '--key', root.key, ...args], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`etcdctl ${args.join(' ')}: ${r.stderr}`);
    };
    ctl('user', 'add', 'root', '--no-password');
    ctl('role', 'add', 'root');
    ctl('user', 'grant-role', 'root', 'root');
    ctl('user', 'add', `bs:${PASSWORD}`);
    ctl('role', 'add', 'bs-rw');
    // As docs/reference/store.md (etcd TLS) asks: write under /blockspeaker/, read everywhere (history scans after a lost answer).
    ctl('role', 'grant-permission', 'bs-rw', '--prefix=true', 'readwrite', '/blockspeaker/');
    ctl('role', 'grant-permission', 'bs-rw', '--from-key', 'read', '');
    ctl('user', 'grant-role', 'bs', 'bs-rw');
    ctl('auth', 'enable');

    const client = pki.client('nobody'); // a CN without an etcd user: only the password can authorize
    const tls = { ca: pki.ca, cert: client.cert, key: client.key };
    const pwFile = join(pki.dir, 'etcd-password');
    writeFileSync(pwFile, `${PASSWORD}\n`, { mode: 0o600 });
    const lines: string[] = [];
    const byFile = await openStore(etcd.url, { ...FAST, log: (l) => lines.push(l), security: { ...tls, username: 'bs', password: { file: pwFile } } });
    await byFile.put('/blockspeaker/auth', 'yes');
    t.equal((await byFile.get('/blockspeaker/auth'))?.value, 'yes', 'password from a file: read and write');
    t.notMatch(byFile.name, PASSWORD, 'the store name does not carry the password');
    await byFile.close();

    process.env.BS_TEST_ETCD_PW = PASSWORD;
    t.teardown(() => void delete process.env.BS_TEST_ETCD_PW);
    const byEnv = await openStore(etcd.url, { ...FAST, security: { ...tls, username: 'bs', password: { env: 'BS_TEST_ETCD_PW' } } });
    t.equal((await byEnv.get('/blockspeaker/auth'))?.value, 'yes', 'password from the environment: read');
    await byEnv.close();

    process.env.BS_TEST_ETCD_PW = 'wrong';
    const wrong = await openError(openStore(etcd.url, { ...FAST, security: { ...tls, username: 'bs', password: { env: 'BS_TEST_ETCD_PW' } } }));
    t.match(wrong, ep, `wrong password: the error names the endpoint (${wrong})`);
    t.match(wrong, /authentication failed|invalid user ID or password/i, 'wrong password: the error says so');
    t.notMatch(wrong, 'wrong', 'the wrong password is not in the message');

    // The CLI, as a user runs it: TLS files and user by flag, the password from a variable.
    process.env.BS_TEST_ETCD_PW = PASSWORD;
    process.env.BLOCKSPEAKER_FROM_SOURCE = '1';
    const cli = await runCli(['ipam', '--store', etcd.url, '--etcd-ca', pki.ca, '--etcd-cert', client.cert, '--etcd-key', client.key,
      '--etcd-user', 'bs', '--etcd-password-env', 'BS_TEST_ETCD_PW', 'pool', 'add', '--name', 'p', '--cidr', '10.9.0.0/16']);
    t.equal(cli.code, 0, `blockspeaker ipam over etcds:// with a user: ${cli.stderr}`);
    const listed = await runCli(['ipam', '--store', etcd.url, '--etcd-ca', pki.ca, '--etcd-cert', client.cert, '--etcd-key', client.key,
      '--etcd-user', 'bs', '--etcd-password-file', pwFile, 'pool', 'list']);
    t.match(listed.stdout, /"10\.9\.0\.0\/16"/, 'the pool is listed (password from a file)');
    const bad = await runCli(['ipam', '--store', etcd.url, '--etcd-ca', pki.otherCa, '--etcd-cert', client.cert, '--etcd-key', client.key, 'pool', 'list']);
    t.equal(bad.code, 1, 'a wrong CA: exit 1');
    t.match(bad.stderr, new RegExp(`${ep}.*server certificate is not signed by the CA we trust`), `a wrong CA: one line naming endpoint and cause (${bad.stderr.trim()})`);
    process.env.BS_TEST_ETCD_PW = 'wrong';

    const unset = await openError(openStore(etcd.url, { ...FAST, security: { ...tls, username: 'bs', password: { env: 'BS_TEST_UNSET_VARIABLE' } } }));
    t.match(unset, /environment variable BS_TEST_UNSET_VARIABLE is not set/, 'an unset password variable is named');
    t.notOk(lines.some((l) => l.includes(PASSWORD)), 'no log line carries the password');
  });
}
