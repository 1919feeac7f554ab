// Block logic: pure functions over a BlockRecord (no store, no clock of its own).
// A block is a small CIDR cut from a pool; its addresses are numbered by ordinal (offset from the first address).
import {
  formatIP,
  ipAt,
  offsetOf,
  parsePrefix,
  prefixContainsIP,
  prefixSize,
  type IP,
  type Prefix,
} from '../net/ip.ts';
import type { AllocationAttr, BlockRecord, OS, Pool } from './types.ts';

export interface NewBlockArgs {
  cidr: Prefix;
  pool: Pool;
  poolPrefix: Prefix;
  host: string;
  os: OS;
  /** True when this block carries the host's perHost reservation in its pool. */
  hostReservation: boolean;
}

/** The ordinals a new block reserves under its pool's policy, for a block created for a host of `os`. */
export function reservedOrdinals(args: NewBlockArgs): number[] {
  const size = prefixSize(args.cidr);
  const policy = args.pool.reservation;
  const range = (start: number, end: number): number[] => {
    const out: number[] = [];
    for (let i = 0; i < Math.min(start, size); i++) out.push(i);
    for (let i = Math.max(size - end, start); i < size; i++) out.push(i);
    return out;
  };
  switch (policy.kind) {
    case 'auto':
      // Windows (docs/reference/hns.md, "HNS addressing"): every block is an HNS ip-subnet with ReserveNetworkAddress and
      // EnableBroadcast, so HNS itself owns its network (.0) and broadcast (last) addresses. The host's first block in
      // the pool also holds the gateway all the pool's blocks share on this node (.1) and the host endpoint (.2).
      if (args.os !== 'windows') return [];
      return args.hostReservation ? range(3, 1) : range(1, 1);
    case 'perBlock':
      return range(policy.start, policy.end);
    case 'perHost':
      return args.hostReservation ? range(policy.count, 0) : [];
    case 'perPool': {
      const out: number[] = [];
      for (let i = 0; i < policy.count; i++) {
        const ip = ipAt(args.poolPrefix, i);
        if (prefixContainsIP(args.cidr, ip)) out.push(offsetOf(args.cidr, ip));
      }
      return out;
    }
    case 'none':
      return [];
  }
}

/** A fresh block affine to `host`, its free list in address order minus reservations. */
export function newBlock(args: NewBlockArgs): BlockRecord {
  const size = prefixSize(args.cidr);
  const reserved = reservedOrdinals(args);
  const isReserved = new Set(reserved);
  const unallocated: number[] = [];
  for (let i = 0; i < size; i++) if (!isReserved.has(i)) unallocated.push(i);
  const block: BlockRecord = {
    cidr: args.cidr.toString(),
    pool: args.pool.name,
    affinity: `host:${args.host}`,
    os: args.os,
    borrowable: args.os !== 'windows',
    allocations: new Array<number | null>(size).fill(null),
    unallocated,
    reserved,
    attributes: [],
    released: {},
  };
  if (args.hostReservation) block.hostReservation = true;
  return block;
}

export function blockSize(block: BlockRecord): number {
  return block.allocations.length;
}

export function affineHost(block: BlockRecord): string | null {
  return block.affinity && block.affinity.startsWith('host:') ? block.affinity.slice(5) : null;
}

export interface BlockCounts {
  size: number;
  allocated: number;
  free: number;
  reserved: number;
}

export function blockCounts(block: BlockRecord): BlockCounts {
  let allocated = 0;
  for (const a of block.allocations) if (a !== null) allocated++;
  return { size: block.allocations.length, allocated, free: block.unallocated.length, reserved: block.reserved.length };
}

export function isEmpty(block: BlockRecord): boolean {
  return block.allocations.every((a) => a === null);
}

/** Free ordinals that can be handed out now (cooled down). */
export function availableCount(block: BlockRecord, now: number, cooldownMs: number): number {
  if (cooldownMs <= 0) return block.unallocated.length;
  let n = 0;
  for (const o of block.unallocated) if (!coolingDown(block, o, now, cooldownMs)) n++;
  return n;
}

function coolingDown(block: BlockRecord, ordinal: number, now: number, cooldownMs: number): boolean {
  const at = block.released[ordinal];
  return at !== undefined && now - at < cooldownMs;
}

function attrIndex(block: BlockRecord, attr: AllocationAttr): number {
  const key = JSON.stringify(attr);
  const i = block.attributes.findIndex((a) => JSON.stringify(a) === key);
  if (i >= 0) return i;
  block.attributes.push(attr);
  return block.attributes.length - 1;
}

/**
 * Take up to `n` free ordinals from the head of the FIFO (skipping addresses still cooling down) and record them
 * as allocated to `attr`. Mutates the block; returns the ordinals taken.
 */
export function allocate(block: BlockRecord, n: number, attr: AllocationAttr, now: number, cooldownMs: number): number[] {
  if (n <= 0) return [];
  const taken: number[] = [];
  const keep: number[] = [];
  for (const o of block.unallocated) {
    if (taken.length < n && !coolingDown(block, o, now, cooldownMs)) taken.push(o);
    else keep.push(o);
  }
  if (taken.length === 0) return taken;
  const idx = attrIndex(block, attr);
  for (const o of taken) {
    block.allocations[o] = idx;
    delete block.released[o];
  }
  block.unallocated = keep;
  return taken;
}

/** Allocate one specific ordinal. Returns false if it is not free (allocated or reserved). */
export function allocateOrdinal(block: BlockRecord, ordinal: number, attr: AllocationAttr): boolean {
  const at = block.unallocated.indexOf(ordinal);
  if (at < 0) return false;
  block.unallocated.splice(at, 1);
  block.allocations[ordinal] = attrIndex(block, attr);
  delete block.released[ordinal];
  return true;
}

/**
 * Release one ordinal: it goes to the tail of the free FIFO. Returns the attribute it was allocated with, or
 * undefined if it was not allocated. Call `collectAttributes` after a batch of releases.
 */
export function release(block: BlockRecord, ordinal: number, now: number, cooldownMs: number): AllocationAttr | undefined {
  const idx = block.allocations[ordinal];
  if (idx === null || idx === undefined) return undefined;
  block.allocations[ordinal] = null;
  block.unallocated.push(ordinal);
  if (cooldownMs > 0) block.released[ordinal] = now;
  return block.attributes[idx];
}

/** Forget release times that no longer matter. */
export function expireCooldowns(block: BlockRecord, now: number, cooldownMs: number): void {
  for (const [o, at] of Object.entries(block.released)) if (now - at >= cooldownMs) delete block.released[o];
}

/** Drop attributes no allocation refers to any more, renumbering the rest. */
export function collectAttributes(block: BlockRecord): void {
  const used = new Map<number, number>();
  const kept: AllocationAttr[] = [];
  for (let o = 0; o < block.allocations.length; o++) {
    const idx = block.allocations[o];
    if (idx === null) continue;
    let n = used.get(idx);
    if (n === undefined) {
      n = kept.length;
      kept.push(block.attributes[idx]);
      used.set(idx, n);
    }
    block.allocations[o] = n;
  }
  block.attributes = kept;
}

/** Ordinals held by a handle. */
export function ordinalsOfHandle(block: BlockRecord, handle: string): number[] {
  const out: number[] = [];
  for (let o = 0; o < block.allocations.length; o++) {
    const idx = block.allocations[o];
    if (idx !== null && block.attributes[idx].handle === handle) out.push(o);
  }
  return out;
}

export function ordinalOf(block: BlockRecord, ip: IP): number {
  return offsetOf(parsePrefix(block.cidr), ip);
}

export function addressOf(blockPrefix: Prefix, ordinal: number): string {
  return formatIP(ipAt(blockPrefix, ordinal));
}
