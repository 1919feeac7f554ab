// The files a config names that hold secrets, with the field that names each: what the Windows daemon checks for
// others' read access before it starts (src/platform/file-acl.ts). Secrets are never written in the config itself.
import type { Config } from './types.ts';
import type { SecretSource } from '../store/etcd-auth.ts';

export interface SecretFile {
  /** The config field, e.g. "bgp.peers[2].password.file". */
  field: string;
  file: string;
}

export function secretFiles(cfg: Config): SecretFile[] {
  const out: SecretFile[] = [];
  const add = (field: string, src: SecretSource | undefined) => {
    if (src && 'file' in src) out.push({ field: `${field}.file`, file: src.file });
  };
  const etcd = cfg.ipam?.etcd;
  add('ipam.etcd.password', etcd?.password);
  if (etcd?.key) out.push({ field: 'ipam.etcd.key', file: etcd.key });
  cfg.bgp?.peers.forEach((p, i) => add(`bgp.peers[${i}].password`, p.password));
  add('bgp.nodeMeshPassword', cfg.bgp?.nodeMeshPassword);
  cfg.bgp?.selectorPeers?.forEach((p, i) => add(`bgp.selectorPeers[${i}].password`, p.password));
  return out;
}

/** The BGP password files (what the daemon watches for rotation, src/daemon/password-watch.ts). */
export function bgpPasswordFiles(cfg: Config): string[] {
  return [...new Set(secretFiles(cfg).filter((s) => s.field.startsWith('bgp.')).map((s) => s.file))];
}
