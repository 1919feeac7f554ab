// The calico layout: IPAM records kept exactly as libcalico-go keeps them in etcd v3 (src/calico/ipam-model.ts),
// mapped to the records the allocator works on, so calico-node and blockspeaker allocate from the same blocks.
//
// Mapping (Calico -> ours):
// - ordinals allocated to the "windows-reserved-ipam-handle" attribute -> `reserved` (and os windows, not
//   borrowable); written back as that one attribute, first, as Calico's newBlock does.
// - ordinals allocated to a cooldown attribute ({"releasedAt": t}) -> free at the tail with `released[o] = t`;
//   written back as cooldown attributes while they still cool down in our model.
// - attribute handle_id -> handle, secondary.node -> host, the rest of secondary -> attrs; fields we do not model
//   (alternateOwnerAttrs, newer fields) ride along in `ext`.
// - the block as read rides along in BlockRecord.ext: every write raises sequenceNumber by one, a new allocation
//   records the sequence number it was made at (sequenceNumberForAllocation), a freed one drops it, and unknown
//   fields are written back as they were.
// There is no non-borrowable field in Calico's block: Windows hosts are kept apart by the global strict_affinity,
// which checkHost requires for a Windows host.
import { parsePrefix, prefixContainsPrefix } from '../../net/ip.ts';
import type { KeyValue } from '../../store/types.ts';
import type { Layout, LayoutKeys } from '../layout.ts';
import { keys as ownKeys } from '../layout.ts';
import { IpamError, type AllocationAttr, type BlockRecord, type Host, type IpamConfig } from '../types.ts';
import { goMapOrder, parseJson, stringifyJson, type JsonObject, type JsonValue } from '../../calico/ipam-json.ts';
import {
  attributeJson,
  blockCidrOfKey,
  blockProblems,
  CalicoDecodeError,
  decodeAffinity,
  decodeBlock,
  decodeHandle,
  decodeIpamConfig,
  encodeAffinity,
  encodeBlock,
  encodeHandle,
  encodeIpamConfig,
  goTime,
  isWindowsReserved,
  windowsReservedAttribute,
  type CalicoAttribute,
  type CalicoBlock,
  type CalicoIpamConfig,
} from '../../calico/ipam-model.ts';
import { CALICO_IPAM, calicoKeys, resourceKeys } from '../../calico/keys.ts';
import { decodeIPPool, decodeNode, encodeIPPool } from './resources.ts';

export interface CalicoLayoutOptions {
  /** Wall clock in ms (new blocks' sequence numbers and claim times, cooldown times). */
  now?: () => number;
}

/** What a Calico block carried that our BlockRecord does not model. */
interface BlockExt {
  calico: CalicoBlock;
}

/** Calico's default when /calico/ipam/v2/config does not exist (libcalico-go GetIPAMConfig). */
const CALICO_DEFAULT: CalicoIpamConfig = {
  strictAffinity: false,
  autoAllocateBlocks: true,
  maxBlocksPerHost: 0,
  kubeVirtVMAddressPersistence: null,
  ipCooldownSeconds: 0,
  unknown: [],
};

function checkHandle(id: string): string {
  if (id === '' || id.includes('/')) throw new IpamError('INVALID', `handle ${JSON.stringify(id)} cannot be a Calico handle key (empty or contains "/")`);
  return id;
}

function attrToOurs(a: CalicoAttribute): AllocationAttr {
  const attrs: Record<string, string> = {};
  for (const [k, v] of a.secondary ?? []) if (k !== 'node') attrs[k] = v;
  const out: AllocationAttr = { handle: a.handleId, host: a.secondary?.get('node') ?? '', natOutgoing: false };
  if (Object.keys(attrs).length) out.attrs = attrs;
  const extra: JsonObject = new Map(a.unknown);
  if (a.alternateOwnerAttrs) extra.set('alternateOwnerAttrs', new Map(a.alternateOwnerAttrs));
  if (extra.size) out.ext = stringifyJson(extra);
  return out;
}

function attrToCalico(a: AllocationAttr): CalicoAttribute {
  const secondary = new Map<string, string>(Object.entries(a.attrs ?? {}));
  if (a.host !== '') secondary.set('node', a.host);
  const out: CalicoAttribute = {
    handleId: a.handle,
    secondary: secondary.size ? new Map(goMapOrder(secondary)) : null,
    alternateOwnerAttrs: null,
    releasedAt: null,
    unknown: [],
  };
  if (a.ext) {
    for (const [k, v] of parseJson(a.ext) as JsonObject) {
      if (k === 'alternateOwnerAttrs' && v instanceof Map) out.alternateOwnerAttrs = new Map([...v].map(([x, y]) => [x, String(y)]));
      else out.unknown.push([k, v as JsonValue]);
    }
  }
  return out;
}

/** Calico block -> our BlockRecord. Throws when its lists disagree: such a block is never written over. */
export function blockToOurs(key: string, cb: CalicoBlock, poolOf: (cidr: string) => string): BlockRecord {
  const problems = blockProblems(cb);
  if (problems.length) throw new CalicoDecodeError(`${key}: allocations and unallocated disagree: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? ` (+${problems.length - 3} more)` : ''}`);
  const attributes: AllocationAttr[] = [];
  const index = new Map<number, number>();
  const reserved: number[] = [];
  const cooling: number[] = [];
  const released: Record<string, number> = {};
  const allocations = cb.allocations.map((a, o) => {
    if (a === null) return null;
    const attr = cb.attributes[a];
    if (isWindowsReserved(attr)) {
      reserved.push(o);
      return null;
    }
    if (attr.releasedAt !== null) {
      cooling.push(o);
      released[o] = Date.parse(attr.releasedAt);
      return null;
    }
    let i = index.get(a);
    if (i === undefined) {
      i = attributes.push(attrToOurs(attr)) - 1;
      index.set(a, i);
    }
    return i;
  });
  const windows = reserved.length > 0;
  return {
    cidr: cb.cidr,
    pool: poolOf(cb.cidr),
    affinity: cb.affinity,
    os: windows ? 'windows' : 'linux',
    borrowable: !windows,
    allocations,
    unallocated: [...cb.unallocated, ...cooling],
    reserved,
    attributes,
    released,
    ext: { calico: cb } satisfies BlockExt,
  };
}

/** Our BlockRecord -> the Calico block to write (a new block when it carries no Calico block as read). */
export function blockToCalico(b: BlockRecord, nowMs: number): CalicoBlock {
  const prev = (b.ext as BlockExt | undefined)?.calico;
  const attributes: CalicoAttribute[] = [];
  const byText = new Map<string, number>();
  const add = (a: CalicoAttribute): number => {
    const text = attributeJson(a);
    let i = byText.get(text);
    if (i === undefined) {
      i = attributes.push(a) - 1;
      byText.set(text, i);
    }
    return i;
  };
  const allocations: (number | null)[] = new Array<number | null>(b.allocations.length).fill(null);
  if (b.reserved.length) {
    const w = add(windowsReservedAttribute());
    for (const o of b.reserved) allocations[o] = w;
  }
  const ours = b.attributes.map((a) => attrToCalico(a));
  b.allocations.forEach((a, o) => {
    if (a !== null) allocations[o] = add(ours[a]);
  });
  const free: number[] = [];
  for (const o of b.unallocated) {
    const at = b.released[o];
    if (at !== undefined && allocations[o] === null) allocations[o] = add({ handleId: null, secondary: null, alternateOwnerAttrs: null, releasedAt: goTime(at), unknown: [] });
    else free.push(o);
  }
  // Sequence numbers: a create starts at the time in ns; an update raises the number read by one, and each new
  // allocation records the number the block had when it was made (as libcalico-go does).
  const seqBefore = prev ? prev.sequenceNumber : BigInt(Math.floor(nowMs)) * 1_000_000n;
  const sequenceNumber = prev ? (prev.sequenceNumber + 1n) & ((1n << 64n) - 1n) : seqBefore;
  const sfa = new Map(prev?.sequenceNumberForAllocation ?? []);
  const prevText = (o: number): string | undefined => {
    const a = prev?.allocations[o];
    return a === null || a === undefined ? undefined : attributeJson(prev!.attributes[a]);
  };
  allocations.forEach((a, o) => {
    const k = String(o);
    if (a === null) sfa.delete(k);
    else if (prevText(o) !== attributeJson(attributes[a]) && !b.reserved.includes(o)) sfa.set(k, seqBefore);
  });
  return {
    cidr: b.cidr,
    affinity: b.affinity,
    affinityClaimTime: prev ? prev.affinityClaimTime : b.affinity ? goTime(nowMs) : null,
    allocations,
    unallocated: free,
    attributes,
    sequenceNumber,
    sequenceNumberForAllocation: prev && prev.sequenceNumberForAllocation === null && sfa.size === 0 ? null : sfa,
    deleted: prev?.deleted ?? false,
    unknown: prev?.unknown ?? [],
  };
}

function configToOurs(c: CalicoIpamConfig): IpamConfig {
  return { strictAffinity: c.strictAffinity, autoAllocateBlocks: c.autoAllocateBlocks, maxBlocksPerHost: c.maxBlocksPerHost, ipCooldownSeconds: c.ipCooldownSeconds };
}

export const calicoLayoutKeys: LayoutKeys = {
  root: '/calico/',
  config: calicoKeys.config,
  // Calico has no such key; ours lives outside /calico so calico-node never sees it.
  poolSet: ownKeys.poolSet,
  pools: resourceKeys.ippools,
  pool: resourceKeys.ippool,
  // IPAM host registrations of this program stay in its own keys; Calico Node resources are read as hosts too.
  hosts: ownKeys.hosts,
  host: ownKeys.host,
  blocks: calicoKeys.blocks,
  block: calicoKeys.block,
  allAffinities: calicoKeys.allHostAffinities,
  affinities: calicoKeys.hostAffinities,
  affinity: calicoKeys.affinity,
  handles: calicoKeys.handles,
  handle: (id) => calicoKeys.handle(checkHandle(id)),
};

export function calicoLayout(opts: CalicoLayoutOptions = {}): Layout {
  const now = opts.now ?? Date.now;
  return {
    name: 'calico',
    keys: calicoLayoutKeys,
    nodes: { prefix: resourceKeys.nodes, key: resourceKeys.node },
    windowsHostInEveryBlock: true,
    blockCidrOfKey,
    decodeConfig: (kv) => configToOurs(kv ? decodeIpamConfig(kv.key, kv.value) : CALICO_DEFAULT),
    encodeConfig(c, prev) {
      const base = prev ? decodeIpamConfig(prev.key, prev.value) : CALICO_DEFAULT;
      if (!Number.isInteger(c.ipCooldownSeconds)) throw new IpamError('INVALID', 'ipCooldownSeconds must be a whole number of seconds in the calico layout');
      return encodeIpamConfig({ ...base, ...c });
    },
    decodePool: (kv) => decodeIPPool(kv.key, kv.value),
    encodePool: (p) => encodeIPPool(p, now),
    decodeHost: (kv: KeyValue): Host => (kv.key.startsWith(resourceKeys.nodes) ? decodeNode(kv.key, kv.value) : (JSON.parse(kv.value) as Host)),
    encodeHost: (h) => JSON.stringify(h),
    decodeBlock(kv, pools) {
      const poolOf = (cidr: string): string => {
        const p = parsePrefix(cidr);
        return pools.find((x) => prefixContainsPrefix(parsePrefix(x.cidr), p))?.name ?? '';
      };
      return blockToOurs(kv.key, decodeBlock(kv.key, kv.value), poolOf);
    },
    encodeBlock: (b) => encodeBlock(blockToCalico(b, now())),
    decodeAffinity: (kv) => {
      const a = decodeAffinity(kv.key, kv.value);
      return { host: a.host, cidr: a.cidr, state: a.state };
    },
    encodeAffinity: (a) => encodeAffinity(a.state),
    decodeHandle: (kv) => {
      const h = decodeHandle(kv.key, kv.value);
      return { handle: h.id, blocks: Object.fromEntries(h.block) };
    },
    encodeHandle: (h) => encodeHandle(h.blocks),
    checkHost(host, config) {
      if (host.os === 'windows' && !config.strictAffinity) {
        throw new IpamError(
          'INVALID',
          `Windows host ${host.name} in the calico layout needs strict_affinity: true in ${CALICO_IPAM}config ` +
            '(calicoctl ipam configure --strictaffinity=true): Calico keeps Windows blocks from being borrowed only through it',
        );
      }
    },
  };
}
