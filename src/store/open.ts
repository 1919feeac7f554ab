// Opens the Store named by a config/CLI string: a directory (embedded, durable), etcd://host:port[,host:port] (plain
// TCP) or etcds://host:port[,...] (TLS).
import { isEtcdUrl, loadEtcdCredentials, type EtcdSecurity } from './etcd-auth.ts';

export { isEtcdUrl };
import type { EtcdStoreOptions } from './etcd.ts';
import { openFileStore, type FileStoreOptions } from './file.ts';
import { StoreError, type Store } from './types.ts';

export interface EtcdLocation {
  endpoints: string[];
  /** Key prefix from a path after the endpoints (etcd://h:p/tenant-a -> "/tenant-a"); "" when none. */
  keyPrefix: string;
  /** etcds:// */
  tls: boolean;
}

/** Parse etcd[s]://HOST:PORT[,HOST:PORT...][/KEY-PREFIX]. IPv6 hosts in brackets: etcd://[::1]:2379. */
export function parseEtcdUrl(spec: string): EtcdLocation {
  const m = /^etcd(s?):\/\/([^/]*)(\/.*)?$/.exec(spec);
  if (!m || m[2] === '') throw new StoreError(`store ${spec}: expected etcd://host:port[,host:port...] or etcds://...`);
  const endpoints = m[2].split(',').map((e) => e.trim());
  for (const ep of endpoints) {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(ep);
    if (!hp || Number(hp[2]) < 1 || Number(hp[2]) > 65535) throw new StoreError(`store ${spec}: endpoint "${ep}" is not host:port`);
  }
  const keyPrefix = m[3] && m[3] !== '/' ? m[3].replace(/\/+$/, '') : '';
  return { endpoints, keyPrefix, tls: m[1] === 's' };
}

export interface OpenStoreOptions extends EtcdStoreOptions {
  /** TLS files and user/password for etcd (config ipam.etcd, CLI --etcd-*); refused for a directory. */
  security?: EtcdSecurity;
}

export async function openStore(spec: string, opts: OpenStoreOptions = {}, fileOptions: FileStoreOptions = {}): Promise<Store> {
  if (typeof spec !== 'string' || spec.trim() === '') throw new StoreError('store: empty location (give a directory or etcd://host:port)');
  const { security, ...etcdOptions } = opts;
  if (isEtcdUrl(spec)) {
    const loc = parseEtcdUrl(spec);
    const credentials = loadEtcdCredentials(spec, loc.tls, security);
    // Loaded on demand: the etcd client (gRPC, protobuf) adds ~26 MB to a process that uses the embedded store.
    const { openEtcdStore } = await import('./etcd.ts');
    return openEtcdStore(loc.endpoints, { ...etcdOptions, keyPrefix: etcdOptions.keyPrefix ?? loc.keyPrefix, tls: loc.tls, credentials });
  }
  if (security && Object.values(security).some((v) => v !== undefined)) {
    throw new StoreError(`store ${spec}: etcd TLS/auth settings given, but the store is a directory (use etcd:// or etcds://)`);
  }
  return openFileStore(spec, fileOptions);
}
