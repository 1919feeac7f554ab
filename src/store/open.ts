// Opens the Store named by a config/CLI string: a directory (embedded, durable) or etcd://host:port[,host:port].
import type { EtcdStoreOptions } from './etcd.ts';
import { openFileStore, type FileStoreOptions } from './file.ts';
import { StoreError, type Store } from './types.ts';

export interface EtcdLocation {
  endpoints: string[];
  /** Key prefix from a path after the endpoints (etcd://h:p/tenant-a -> "/tenant-a"); "" when none. */
  keyPrefix: string;
}

/** Parse etcd://HOST:PORT[,HOST:PORT...][/KEY-PREFIX]. IPv6 hosts in brackets: etcd://[::1]:2379. */
export function parseEtcdUrl(spec: string): EtcdLocation {
  const m = /^etcd:\/\/([^/]*)(\/.*)?$/.exec(spec);
  if (!m || m[1] === '') throw new StoreError(`store ${spec}: expected etcd://host:port[,host:port...]`);
  const endpoints = m[1].split(',').map((e) => e.trim());
  for (const ep of endpoints) {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(ep);
    if (!hp || Number(hp[2]) < 1 || Number(hp[2]) > 65535) throw new StoreError(`store ${spec}: endpoint "${ep}" is not host:port`);
  }
  const keyPrefix = m[2] && m[2] !== '/' ? m[2].replace(/\/+$/, '') : '';
  return { endpoints, keyPrefix };
}

export async function openStore(spec: string, etcdOptions: EtcdStoreOptions = {}, fileOptions: FileStoreOptions = {}): Promise<Store> {
  if (typeof spec !== 'string' || spec.trim() === '') throw new StoreError('store: empty location (give a directory or etcd://host:port)');
  if (spec.startsWith('etcds://')) throw new StoreError(`store ${spec}: TLS to etcd (etcds://) is not supported yet; use etcd:// on a trusted network`);
  if (spec.startsWith('etcd://')) {
    const loc = parseEtcdUrl(spec);
    // Loaded on demand: the etcd client (gRPC, protobuf) adds ~26 MB to a process that uses the embedded store.
    const { openEtcdStore } = await import('./etcd.ts');
    return openEtcdStore(loc.endpoints, { ...etcdOptions, keyPrefix: etcdOptions.keyPrefix ?? loc.keyPrefix });
  }
  return openFileStore(spec, fileOptions);
}
