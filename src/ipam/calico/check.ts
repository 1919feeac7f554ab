// `blockspeaker ipam check` for a Calico-layout datastore, reporting what `calicoctl ipam check` reports. It
// reads only; nothing is repaired. Problems are inconsistencies that lose or double-hand addresses; notes are
// states Calico itself produces (a handle counting more addresses than it holds, a claim left pending).
import { formatIP, ipAt, parsePrefix } from '../../net/ip.ts';
import type { KeyValue, Store } from '../../store/types.ts';
import { keys as ownKeys } from '../layout.ts';
import {
  blockProblems,
  decodeAffinity,
  decodeBlock,
  decodeHandle,
  isWindowsReserved,
  WINDOWS_RESERVED_HANDLE,
  type CalicoBlock,
} from '../../calico/ipam-model.ts';
import { calicoKeys, resourceKeys } from '../../calico/keys.ts';

export interface CheckReport {
  blocks: number;
  /** Addresses allocated to workloads (not reservations, not cooling down). */
  allocated: number;
  reservedForWindows: number;
  coolingDown: number;
  handles: number;
  /** Each one names the key or address and what is wrong. Empty = clean. */
  problems: string[];
  notes: string[];
}

function tryDecode<T>(kv: KeyValue, fn: (k: string, v: string) => T, problems: string[]): T | undefined {
  try {
    return fn(kv.key, kv.value);
  } catch (e) {
    problems.push(`${kv.key}: does not decode: ${(e as Error).message}`);
    return undefined;
  }
}

export async function checkCalico(store: Store): Promise<CheckReport> {
  const problems: string[] = [];
  const notes: string[] = [];
  const nodes = new Set<string>();
  for (const kv of await store.list(resourceKeys.nodes)) nodes.add(kv.key.slice(resourceKeys.nodes.length));
  for (const kv of await store.list(ownKeys.hosts)) nodes.add(decodeURIComponent(kv.key.slice(ownKeys.hosts.length)));

  const blocks: CalicoBlock[] = [];
  for (const kv of await store.list(calicoKeys.blocks)) {
    const b = tryDecode(kv, decodeBlock, problems);
    if (!b) continue;
    const bad = blockProblems(b);
    if (bad.length) problems.push(`${kv.key}: allocations and unallocated disagree: ${bad.join('; ')}`);
    blocks.push(b);
  }

  // Who holds each address, by handle, from the blocks.
  const where = new Map<string, string>();
  const heldByHandle = new Map<string, Map<string, number>>();
  let allocated = 0;
  let reservedForWindows = 0;
  let coolingDown = 0;
  for (const b of blocks) {
    const prefix = parsePrefix(b.cidr);
    const owner = b.affinity?.startsWith('host:') ? b.affinity.slice(5) : undefined;
    if (owner !== undefined && !nodes.has(owner)) problems.push(`block ${b.cidr} is affine to node ${owner}, which does not exist`);
    b.allocations.forEach((a, o) => {
      if (a === null) return;
      const ip = formatIP(ipAt(prefix, o));
      const attr = b.attributes[a];
      const other = where.get(ip);
      if (other !== undefined) problems.push(`${ip} is allocated in two blocks: ${other} and ${b.cidr}`);
      where.set(ip, b.cidr);
      if (isWindowsReserved(attr)) {
        reservedForWindows++;
        return;
      }
      if (attr.releasedAt !== null) {
        coolingDown++;
        return;
      }
      allocated++;
      const handle = attr.handleId?.split('\r')[0];
      if (!handle) {
        problems.push(`${ip} (block ${b.cidr}) is allocated with no handle`);
        return;
      }
      const node = attr.secondary?.get('node');
      if (node !== undefined && !nodes.has(node)) problems.push(`${ip} (block ${b.cidr}, handle ${handle}) belongs to node ${node}, which does not exist`);
      const m = heldByHandle.get(handle) ?? new Map<string, number>();
      m.set(b.cidr, (m.get(b.cidr) ?? 0) + 1);
      heldByHandle.set(handle, m);
    });
  }

  // Handles against what the blocks hold.
  const handleKvs = await store.list(calicoKeys.handles);
  const seenHandles = new Set<string>();
  for (const kv of handleKvs) {
    const h = tryDecode(kv, decodeHandle, problems);
    if (!h) continue;
    seenHandles.add(h.id);
    if (h.id.toLowerCase() === WINDOWS_RESERVED_HANDLE) {
      problems.push(`${kv.key}: Calico keeps no handle for Windows reservations; this one reads as a leak`);
      continue;
    }
    const held = heldByHandle.get(h.id);
    if (!held) {
      problems.push(`handle ${h.id} holds no addresses (leaked handle)`);
      continue;
    }
    for (const [cidr, n] of h.block) {
      const real = held.get(cidr) ?? 0;
      if (real === 0) notes.push(`handle ${h.id} counts ${n} in ${cidr}, which holds none of its addresses`);
      else if (n > real) notes.push(`handle ${h.id} counts ${n} in ${cidr}, which holds ${real} (over-counted, as Calico itself can)`);
      else if (n < real) problems.push(`handle ${h.id} counts ${n} in ${cidr}, but the block holds ${real} of its addresses`);
    }
    for (const [cidr, real] of held) if (!h.block.has(cidr)) problems.push(`handle ${h.id} does not count ${cidr}, where it holds ${real} addresses`);
  }
  for (const [handle, held] of heldByHandle) {
    if (seenHandles.has(handle)) continue;
    for (const [cidr, n] of held) problems.push(`${n} address(es) in block ${cidr} have handle ${handle}, which does not exist (leaked addresses)`);
  }

  // Affinities against blocks.
  for (const kv of await store.list(calicoKeys.allHostAffinities)) {
    const a = tryDecode(kv, decodeAffinity, problems);
    if (!a) continue;
    const b = blocks.find((x) => x.cidr === a.cidr);
    if (a.state === 'pending') notes.push(`affinity ${a.host} ${a.cidr} is still pending (a claim in progress or interrupted)`);
    else if (!b) notes.push(`affinity ${a.host} ${a.cidr} has no block`);
    else if (b.affinity !== `host:${a.host}`) problems.push(`affinity ${a.host} ${a.cidr} points at a block affine to ${b.affinity ?? 'nobody'}`);
    if (!nodes.has(a.host)) problems.push(`affinity ${kv.key} is for node ${a.host}, which does not exist`);
  }
  return { blocks: blocks.length, allocated, reservedForWindows, coolingDown, handles: handleKvs.length, problems, notes };
}
