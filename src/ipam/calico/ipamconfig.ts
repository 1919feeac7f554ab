// Which IPAM settings are in force on Calico's etcd layout. Calico's IPAM (etcdv3 datastore) reads
// /calico/ipam/v2/config; `calicoctl apply` of an IPAMConfiguration lands under ipamconfigurations/default, which
// IPAM on etcd does not read. Both are read here so /ipam/config can say which one is in force and whether the
// resource disagrees with it (a common surprise).
import type { Store } from '../../store/types.ts';
import type { IpamConfig } from '../types.ts';
import { parseJson, JsonNumber, type JsonObject } from '../../calico/ipam-json.ts';
import { calicoKeys, resourceKeys } from '../../calico/keys.ts';
import type { Layout } from '../layout.ts';

export interface IpamConfigStatus {
  layout: string;
  /** The key whose settings IPAM uses. */
  inForce: string;
  config: IpamConfig;
  /** The applied IPAMConfiguration resource, when there is one. */
  resource?: { key: string; strictAffinity?: boolean; maxBlocksPerHost?: number; autoAllocateBlocks?: boolean; differs: string[] };
  /** A sentence when the resource's settings are not the ones in force. */
  warning?: string;
}

export async function ipamConfigStatus(store: Store, layout: Layout): Promise<IpamConfigStatus> {
  const kv = await store.get(layout.keys.config);
  const config = layout.decodeConfig(kv);
  const out: IpamConfigStatus = { layout: layout.name, inForce: layout.keys.config, config };
  if (layout.name !== 'calico') return out;
  const res = await store.get(resourceKeys.ipamConfiguration);
  if (!res) return out;
  let spec: JsonObject = new Map();
  try {
    const v = parseJson(res.value);
    const s = v instanceof Map ? v.get('spec') : undefined;
    if (s instanceof Map) spec = s;
  } catch {
    out.warning = `${res.key} is not JSON; ignored (IPAM on etcd reads ${calicoKeys.config})`;
    return out;
  }
  const bool = (k: string) => (typeof spec.get(k) === 'boolean' ? (spec.get(k) as boolean) : undefined);
  const n = spec.get('maxBlocksPerHost');
  const r = { key: res.key, strictAffinity: bool('strictAffinity'), maxBlocksPerHost: n instanceof JsonNumber ? Number(n.text) : undefined, autoAllocateBlocks: bool('autoAllocateBlocks') };
  const differs = (['strictAffinity', 'maxBlocksPerHost', 'autoAllocateBlocks'] as const).filter((k) => r[k] !== undefined && r[k] !== config[k]);
  out.resource = { ...r, differs };
  if (differs.length) out.warning = `IPAMConfiguration default sets ${differs.join(', ')} differently from ${calicoKeys.config}; Calico's IPAM on etcd (and blockspeaker) use ${calicoKeys.config}`;
  return out;
}
