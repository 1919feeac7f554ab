// Config checks for the peer hardening options (bgp.peers[].maxPrefixes, password, ttlSecurity): kept apart from
// config.ts so that file only lists the fields. The speaker (src/bgp/maxprefix.ts, src/bgp/peer-security.ts)
// fills in the defaults and reads the password.
import { posix, win32 } from 'node:path';
import type { SecretSource } from '../store/etcd-auth.ts';
import type { Checker, Path } from './check.ts';
import type { MaxPrefixesConfig, PeerConfig } from './types.ts';

export const HARDENING_PEER_FIELDS = ['maxPrefixes', 'password', 'ttlSecurity'] as const;

const MAX_COUNT = 0xffffffff; // RFC 4486 4: the limit travels as 4 octets

/** maxPrefixes: N (each family) or { ipv4?, ipv6?, warningPercent?, restart? } with at least one family. */
export function maxPrefixes(c: Checker, path: Path, v: unknown): MaxPrefixesConfig | undefined {
  if (typeof v === 'number') return c.int(path, v, 1, MAX_COUNT);
  const o = c.object(path, v, ['ipv4', 'ipv6', 'warningPercent', 'restart']);
  if (!o) return undefined;
  if (o.ipv4 === undefined && o.ipv6 === undefined) return c.fail(path, 'give a limit for ipv4 and/or ipv6 (or one number for each family)');
  const out: Exclude<MaxPrefixesConfig, number> = {};
  let ok = true;
  const field = (k: 'ipv4' | 'ipv6' | 'warningPercent' | 'restart', min: number, max: number) => {
    if (o[k] === undefined) return;
    const n = c.int([...path, k], o[k], min, max);
    if (n === undefined) ok = false;
    else out[k] = n;
  };
  field('ipv4', 1, MAX_COUNT);
  field('ipv6', 1, MAX_COUNT);
  field('warningPercent', 1, 100);
  field('restart', 0, 86400);
  return ok ? out : undefined;
}

/** A secret by reference: { file: PATH } or { env: VARIABLE }, never the secret itself in the config. */
export function secretSource(c: Checker, path: Path, x: unknown): SecretSource | undefined {
  if (typeof x === 'string') return c.fail(path, 'must not be written in the config: use { file: PATH } or { env: VARIABLE }');
  const p = c.object(path, x, ['file', 'env']);
  if (!p) return undefined;
  if ((p.file === undefined) === (p.env === undefined)) return c.bad(path, 'exactly one of { file: PATH } or { env: VARIABLE }', x);
  if (p.file !== undefined) {
    const f = c.string([...path, 'file'], p.file);
    return f === undefined ? undefined : { file: f };
  }
  const e = c.string([...path, 'env'], p.env);
  return e === undefined ? undefined : { env: e };
}

/** A TCP-MD5 password by reference: an absolute file or an environment variable name (errors name the field). */
export function passwordSource(c: Checker, path: Path, x: unknown): SecretSource | undefined {
  const src = secretSource(c, path, x);
  if (src && 'file' in src && !posix.isAbsolute(src.file) && !win32.isAbsolute(src.file)) {
    // Relative to what? The daemon's working directory is not the config's.
    return c.bad([...path, 'file'], 'an absolute path', src.file);
  }
  if (src && 'env' in src && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(src.env)) return c.bad([...path, 'env'], 'an environment variable name', src.env);
  return src;
}

/** bgp.nodeMeshPassword: TCP-MD5 on every node-to-node mesh session (Calico BGPConfiguration nodeMeshPassword). */
export const MESH_BGP_FIELDS = ['nodeMeshPassword', 'nodeMeshMaxPrefixes'] as const;

export function meshPasswordField(c: Checker, o: Record<string, unknown>): { nodeMeshPassword?: SecretSource; nodeMeshMaxPrefixes?: MaxPrefixesConfig } {
  const out: { nodeMeshPassword?: SecretSource; nodeMeshMaxPrefixes?: MaxPrefixesConfig } = {};
  if (o.nodeMeshPassword !== undefined && o.nodeMeshPassword !== null) {
    const src = passwordSource(c, ['bgp', 'nodeMeshPassword'], o.nodeMeshPassword);
    if (src) out.nodeMeshPassword = src;
  }
  // The max-prefix of every session to another node (the mesh, and BGPPeers with a peerSelector), which Calico's
  // BGPPeer cannot say: a node that leaks a full table into the mesh is cut off, not taken in.
  if (o.nodeMeshMaxPrefixes !== undefined && o.nodeMeshMaxPrefixes !== null) {
    const mp = maxPrefixes(c, ['bgp', 'nodeMeshMaxPrefixes'], o.nodeMeshMaxPrefixes);
    if (mp) out.nodeMeshMaxPrefixes = mp;
  }
  return out;
}

/**
 * peers[].password (TCP-MD5, RFC 2385) and peers[].ttlSecurity (GTSM hops, RFC 5082, 1..255) onto `out`.
 * Returns false when either is wrong (each error names its field).
 */
export function peerSecurityFields(c: Checker, path: Path, o: Record<string, unknown>, out: PeerConfig): boolean {
  let ok = true;
  if (o.password !== undefined) {
    const src = passwordSource(c, [...path, 'password'], o.password);
    if (src) out.password = src;
    else ok = false;
  }
  if (o.ttlSecurity !== undefined) {
    const hops = c.int([...path, 'ttlSecurity'], o.ttlSecurity, 1, 255);
    if (hops === undefined) ok = false;
    else out.ttlSecurity = hops;
  }
  return ok;
}
