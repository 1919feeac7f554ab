// Throw-away certificates for the TLS tests, made with openssl (Debian openssl) in a temp dir: a CA, a server
// certificate for 127.0.0.1/localhost, client certificates by common name (etcd maps a client certificate's CN to a
// user when auth is on), and a second, unrelated CA to play the wrong one. ECDSA P-256: quick to generate.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  /** A client certificate (and key) with the given common name, signed by the CA. */
  client(cn: string): { cert: string; key: string };
  /** A CA that signed nothing here. */
  otherCa: string;
  destroy(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'bs-pki-'));
  const p = (f: string) => join(dir, f);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ca = (name: string) => ssl('req', '-x509', ...EC, '-keyout', p(`${name}.key`), '-out', p(`${name}.pem`), '-days', '2', '-subj', `/CN=bs-test-${name}`);
  const sign = (name: string, cn: string, ext: string) => {
    writeFileSync(p(`${name}.ext`), ext);
    ssl('req', ...EC, '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', p(`${name}.csr`), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p(`${name}.pem`), '-days', '2', '-extfile', p(`${name}.ext`));
    return { cert: p(`${name}.pem`), key: p(`${name}.key`) };
  };
  ca('ca');
  ca('other-ca');
  const server = sign('server', 'etcd-server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  const clients = new Map<string, { cert: string; key: string }>();
  return {
    dir,
    ca: p('ca.pem'),
    serverCert: server.cert,
    serverKey: server.key,
    otherCa: p('other-ca.pem'),
    client(cn: string) {
      let c = clients.get(cn);
      if (!c) clients.set(cn, (c = sign(`client-${cn}`, cn, 'extendedKeyUsage=clientAuth\n')));
      return c;
    },
    destroy: () => rmSync(dir, { recursive: true, force: true }),
  };
}
