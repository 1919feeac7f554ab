// Opens the Store named by a config/CLI string: a directory (embedded, durable) or etcd://host:port[,host:port].
import { openFileStore } from './file.ts';
import { StoreError, type Store } from './types.ts';

export async function openStore(spec: string): Promise<Store> {
  if (typeof spec !== 'string' || spec.trim() === '') throw new StoreError('store: empty location (give a directory or etcd://host:port)');
  if (spec.startsWith('etcd://')) {
    throw new StoreError(`store ${spec}: the etcd store is not built yet; use a directory for the embedded store`);
  }
  return openFileStore(spec);
}
