// A datastore layout: where IPAM's records live in the Store and how they are written. The allocator works on
// BlockRecord/AffinityRecord/HandleRecord/IpamConfig/Pool/Host and never sees the keys or JSON; a layout maps
// between the two. Layouts: `blockspeaker` (ours, below) and `calico` (calico/layout.ts: Calico's own IPAM v2
// keys and JSON, so calico-node and blockspeaker can share one etcd).
import type { KeyValue } from '../store/types.ts';
import type { AffinityRecord, BlockRecord, HandleRecord, Host, IpamConfig, Pool } from './types.ts';
import { defaultConfig } from './types.ts';

export type LayoutName = 'blockspeaker' | 'calico';
export const LAYOUT_NAMES: readonly LayoutName[] = ['blockspeaker', 'calico'];

export interface LayoutKeys {
  /** Every key IPAM reads lives under this prefix (what a watcher of IPAM changes watches). */
  root: string;
  config: string;
  /** Bumped on every pool change, so pool adds are checked for overlap against a set that cannot change. */
  poolSet: string;
  pools: string;
  pool: (name: string) => string;
  hosts: string;
  host: (name: string) => string;
  blocks: string;
  block: (cidr: string) => string;
  allAffinities: string;
  affinities: (host: string) => string;
  affinity: (host: string, cidr: string) => string;
  handles: string;
  handle: (handle: string) => string;
}

export interface Layout {
  readonly name: LayoutName;
  readonly keys: LayoutKeys;
  /**
   * Every Windows block reserves what a host's first block does (Calico: 0, 1, 2 and last in each, as calico-node's
   * Windows IPAM makes them; its blocks have no field to say which one is first).
   */
  readonly windowsHostInEveryBlock?: boolean;
  /** Where else a host may be registered (Calico: its Node resources), read when keys.host(name) is absent. */
  readonly nodes?: { prefix: string; key: (name: string) => string };
  /** The block CIDR a key under keys.blocks names. */
  blockCidrOfKey(key: string): string;
  /** No config key yet: the layout's defaults. */
  decodeConfig(kv: KeyValue | undefined): IpamConfig;
  /** `prev` is the value read, so fields this program does not know are kept. */
  encodeConfig(c: IpamConfig, prev: KeyValue | undefined): string;
  decodePool(kv: KeyValue): Pool;
  encodePool(p: Pool): string;
  decodeHost(kv: KeyValue): Host;
  encodeHost(h: Host): string;
  /** `pools` lets a layout that does not store a block's pool find it. Throws on a record it cannot trust. */
  decodeBlock(kv: KeyValue, pools: readonly Pool[]): BlockRecord;
  encodeBlock(b: BlockRecord): string;
  decodeAffinity(kv: KeyValue): AffinityRecord;
  encodeAffinity(a: AffinityRecord): string;
  decodeHandle(kv: KeyValue): HandleRecord;
  encodeHandle(h: HandleRecord): string;
  /** A layout's rule for a host on every request (Calico: a Windows host needs strict_affinity). Throws IpamError. */
  checkHost?(host: Host, config: IpamConfig): void;
}

const ROOT = '/blockspeaker/ipam/v1/';

// Our own layout (all values plain JSON of the types in types.ts):
//   /blockspeaker/ipam/v1/config                    IpamConfig
//   /blockspeaker/ipam/v1/pools/<name>              Pool
//   /blockspeaker/ipam/v1/poolset                   see LayoutKeys.poolSet
//   /blockspeaker/ipam/v1/hosts/<name>              Host
//   /blockspeaker/ipam/v1/blocks/<addr>-<len>       BlockRecord
//   /blockspeaker/ipam/v1/affinity/<host>/<addr>-<len>  AffinityRecord
//   /blockspeaker/ipam/v1/handles/<handle>          HandleRecord (handle URI-encoded)
export const keys = {
  root: ROOT,
  config: `${ROOT}config`,
  poolSet: `${ROOT}poolset`,
  pools: `${ROOT}pools/`,
  pool: (name: string) => `${ROOT}pools/${name}`,
  hosts: `${ROOT}hosts/`,
  host: (name: string) => `${ROOT}hosts/${encodeURIComponent(name)}`,
  blocks: `${ROOT}blocks/`,
  block: (cidr: string) => `${ROOT}blocks/${cidr.replace('/', '-')}`,
  affinities: (host: string) => `${ROOT}affinity/${encodeURIComponent(host)}/`,
  allAffinities: `${ROOT}affinity/`,
  affinity: (host: string, cidr: string) => `${ROOT}affinity/${encodeURIComponent(host)}/${cidr.replace('/', '-')}`,
  handles: `${ROOT}handles/`,
  handle: (handle: string) => `${ROOT}handles/${encodeURIComponent(handle)}`,
} satisfies LayoutKeys;

const json = <T>(kv: KeyValue): T => JSON.parse(kv.value) as T;

export const blockspeakerLayout: Layout = {
  name: 'blockspeaker',
  keys,
  blockCidrOfKey(key) {
    const name = key.slice(keys.blocks.length);
    const dash = name.lastIndexOf('-');
    return `${name.slice(0, dash)}/${name.slice(dash + 1)}`;
  },
  decodeConfig: (kv) => (kv ? { ...defaultConfig, ...json<Partial<IpamConfig>>(kv) } : { ...defaultConfig }),
  encodeConfig: (c) => JSON.stringify(c),
  decodePool: (kv) => json<Pool>(kv),
  encodePool: (p) => JSON.stringify(p),
  decodeHost: (kv) => json<Host>(kv),
  encodeHost: (h) => JSON.stringify(h),
  decodeBlock: (kv) => json<BlockRecord>(kv),
  encodeBlock: ({ ext: _ext, ...b }) => JSON.stringify(b),
  decodeAffinity: (kv) => json<AffinityRecord>(kv),
  encodeAffinity: (a) => JSON.stringify({ host: a.host, cidr: a.cidr, state: a.state }),
  decodeHandle: (kv) => json<HandleRecord>(kv),
  encodeHandle: (h) => JSON.stringify(h),
};
