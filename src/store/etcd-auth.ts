// How a client proves itself to a secured etcd: TLS (a CA to check the server, a client certificate and key for
// etcd's --client-cert-auth) and etcd's own user/password auth. The config and the CLI name files (and, for the
// password, a file or an environment variable); this module reads them once at open. The password never goes into
// a store name, a log line or an error message.
import { readFileSync } from 'node:fs';
import { StoreError } from './types.ts';

/** Whether a store location names etcd (etcd:// or etcds://) rather than a directory. */
export const isEtcdUrl = (spec: string): boolean => /^etcds?:\/\//.test(spec);

/** Where a secret comes from: a file (its content, trailing newline dropped) or an environment variable. */
export type SecretSource = { file: string } | { env: string };

/** The user-facing settings (config `ipam.etcd`, CLI `--etcd-*`): file names, never secrets inline. */
export interface EtcdSecurity {
  /** PEM file with the CA certificate(s) that signed etcd's server certificates (etcds:// only; default: system CAs). */
  ca?: string;
  /** PEM client certificate and its key, for etcd's --client-cert-auth (etcds:// only; both or neither). */
  cert?: string;
  key?: string;
  /** etcd user (etcd's auth enabled); needs password. */
  username?: string;
  password?: SecretSource;
  /** Send the user and password over plain etcd:// anyway (a lab, a loopback etcd). Default: refused. */
  allowInsecure?: boolean;
}

/** What the etcd client is given: file contents and the password itself. */
export interface EtcdCredentials {
  /** Present for etcds:// (TLS); each part undefined when not configured. */
  tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  auth?: { username: string; password: string };
}

/** Problems with the settings themselves, as "field: message" pairs (empty when fine). Reads nothing. */
export function checkEtcdSecurity(s: EtcdSecurity, tls: boolean): Array<{ field: keyof EtcdSecurity; message: string }> {
  const out: Array<{ field: keyof EtcdSecurity; message: string }> = [];
  for (const f of ['ca', 'cert', 'key'] as const) {
    if (s[f] !== undefined && !tls) out.push({ field: f, message: 'needs a TLS store URL (etcds://host:port); etcd:// is plain TCP' });
  }
  if ((s.cert === undefined) !== (s.key === undefined)) {
    out.push({ field: s.cert === undefined ? 'cert' : 'key', message: `is required with ${s.cert === undefined ? 'key' : 'cert'} (a client certificate and its key go together)` });
  }
  // etcd's authentication sends the password in the clear unless the connection is TLS.
  if (s.password !== undefined && !tls && !s.allowInsecure) {
    out.push({ field: 'password', message: 'would be sent in the clear over etcd://: use etcds://host:port (TLS), or set allowInsecure: true for a lab' });
  }
  if ((s.username === undefined) !== (s.password === undefined)) {
    out.push({ field: s.username === undefined ? 'username' : 'password', message: `is required with ${s.username === undefined ? 'password' : 'username'}` });
  }
  return out;
}

function readPart(url: string, what: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new StoreError(`store ${url}: ${what}: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** The secret's value. Errors name the file or variable, never the value. */
export function readSecret(url: string, what: string, src: SecretSource, env: NodeJS.ProcessEnv = process.env): string {
  if ('file' in src) return readPart(url, what, src.file).toString('utf8').replace(/\r?\n$/, '');
  const v = env[src.env];
  if (v === undefined || v === '') throw new StoreError(`store ${url}: ${what}: environment variable ${src.env} is not set`);
  return v;
}

/** Read the files and the secret the settings name. Throws a StoreError naming the URL and the setting. */
export function loadEtcdCredentials(url: string, tls: boolean, s: EtcdSecurity = {}, env: NodeJS.ProcessEnv = process.env): EtcdCredentials {
  const bad = checkEtcdSecurity(s, tls);
  if (bad.length) throw new StoreError(`store ${url}: ${bad.map((b) => `etcd ${b.field} ${b.message}`).join('; ')}`);
  const out: EtcdCredentials = {};
  if (tls) {
    out.tls = {
      ca: s.ca === undefined ? undefined : readPart(url, 'etcd ca', s.ca),
      cert: s.cert === undefined ? undefined : readPart(url, 'etcd cert', s.cert),
      key: s.key === undefined ? undefined : readPart(url, 'etcd key', s.key),
    };
  }
  if (s.username !== undefined && s.password !== undefined) {
    out.auth = { username: s.username, password: readSecret(url, 'etcd password', s.password, env) };
  }
  return out;
}
