// IPAM data model: pools, hosts, config, the records kept in the store, and the public request/result shapes.
import type { Family } from '../net/ip.ts';

export type OS = 'linux' | 'windows';
export type Use = 'Workload' | 'Tunnel';

/**
 * Which addresses of a pool are never handed out.
 * - auto: Calico's rule. Blocks created for a Windows host reserve 3 at the start (network, HNS gateway, host
 *   endpoint) and 1 at the end (broadcast); Linux blocks reserve nothing.
 * - perBlock: every block reserves `start` addresses at its start and `end` at its end, whatever the host OS.
 * - perHost (micropools): the first `count` addresses of the first block each host claims in the pool.
 * - perPool (micropools): the first `count` addresses of the pool.
 * - none (micropools): nothing is reserved, no broadcast address.
 */
export type ReservationPolicy =
  | { kind: 'auto' }
  | { kind: 'perBlock'; start: number; end: number }
  | { kind: 'perHost'; count: number }
  | { kind: 'perPool'; count: number }
  | { kind: 'none' };

export interface Pool {
  name: string;
  cidr: string;
  blockSize: number;
  /** Calico selector (full grammar, see src/calico/selector.ts). */
  nodeSelector: string;
  disabled: boolean;
  allowedUses: Use[];
  /** Recorded on each allocation when it is made (later changes to the pool do not rewrite old allocations). */
  natOutgoing: boolean;
  disableBGPExport: boolean;
  reservation: ReservationPolicy;
}

export type PoolSpec = Partial<Pool> & { name: string; cidr: string };

export interface Host {
  name: string;
  os: OS;
  labels: Record<string, string>;
}

export interface IpamConfig {
  /** When true, hosts only use addresses from their own affine blocks (no borrowing). */
  strictAffinity: boolean;
  /** Most blocks one host may hold affinity to; 0 = no limit. Reaching it stops claiming and does not borrow. */
  maxBlocksPerHost: number;
  /** When false, hosts never claim new blocks on their own (only explicit claims). */
  autoAllocateBlocks: boolean;
  /** A released address is not handed out again before this many seconds. */
  ipCooldownSeconds: number;
}

export const defaultConfig: IpamConfig = {
  strictAffinity: false,
  maxBlocksPerHost: 0,
  autoAllocateBlocks: true,
  ipCooldownSeconds: 0,
};

/** One allocation's owner and metadata, shared by all ordinals that have the same. */
export interface AllocationAttr {
  handle: string | null;
  host: string;
  natOutgoing: boolean;
  attrs?: Record<string, string>;
  /** Layout-private fields kept across a rewrite (Calico: fields of an attribute we do not model), as JSON text. */
  ext?: string;
}

/** A block as stored. Ordinals are offsets from the block's first address. */
export interface BlockRecord {
  cidr: string;
  pool: string;
  /** "host:<name>" while the block is affine to a host, else null. */
  affinity: string | null;
  /** OS of the host the block was created for. */
  os: OS;
  /** Windows-owned blocks are never borrowed from, whatever the global setting. */
  borrowable: boolean;
  /** Per ordinal: index into attributes, or null when not allocated. */
  allocations: (number | null)[];
  /** Free ordinals, a FIFO: allocation takes from the head, release appends to the tail. */
  unallocated: number[];
  /** Ordinals never handed out (network, gateway, host endpoint, broadcast, micropool reservations). */
  reserved: number[];
  attributes: AllocationAttr[];
  /** Ordinal -> release time (ms since epoch), kept while the address cools down. */
  released: Record<string, number>;
  /** Set on the block that carries a perHost reservation for its host. */
  hostReservation?: boolean;
  /** Layout-private state kept across a read-modify-write (Calico: the block as read, with its sequence numbers). */
  ext?: unknown;
}

export type AffinityState = 'pending' | 'confirmed' | 'pendingDeletion';

export interface AffinityRecord {
  host: string;
  cidr: string;
  state: AffinityState;
}

export interface HandleRecord {
  handle: string;
  /** Block cidr -> number of addresses this handle holds in it. */
  blocks: Record<string, number>;
}

// ---- requests and results ---------------------------------------------------------------------------------------

export interface AutoAssignArgs {
  host: string;
  num4?: number;
  num6?: number;
  handle?: string;
  attrs?: Record<string, string>;
  /** Restrict to these pools (by name or cidr). Requested pools bypass node selectors. */
  pools?: string[];
  use?: Use;
  /** Overrides the configured maxBlocksPerHost for this request. */
  maxBlocks?: number;
}

export interface AssignedIP {
  /** The address, e.g. "10.0.0.5". */
  ip: string;
  family: Family;
  /** Prefix length of the block it came from (what the CLI prints as "10.0.0.5/26"). */
  prefixLen: number;
  pool: string;
  block: string;
}

export interface AssignResult {
  ipv4: AssignedIP[];
  ipv6: AssignedIP[];
  /** Why fewer addresses than asked were assigned; empty when all were. */
  messages: string[];
}

export interface ReleaseResult {
  released: string[];
  /** Addresses that were not allocated (free, reserved, or outside every block). */
  notAllocated: string[];
}

export interface BlockInfo {
  cidr: string;
  pool: string;
  affinity: string | null;
  os: OS;
  borrowable: boolean;
  size: number;
  allocated: number;
  free: number;
  reserved: number;
}

export interface RouteView {
  /** The host's confirmed affine blocks. */
  aggregates: string[];
  /** Host routes (/32, /128) for every address the host holds in blocks affine to others. */
  hosts: string[];
}

export type IpamErrorCode =
  | 'INVALID'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'NO_POOL'
  | 'NO_POOL_FOR_USE'
  | 'POOL_DISABLED'
  | 'UNKNOWN_HOST'
  | 'IN_USE'
  | 'NOT_BORROWABLE'
  | 'CONTENTION'
  /** A record the request needs is in the store but cannot be trusted (it is skipped and never written over). */
  | 'CORRUPT'
  /** The dataplane has not programmed what the address needs yet (HNS: its block's ip-subnet); retry. */
  | 'NOT_READY';

/** IPAM refused a request; the message says exactly why. */
export class IpamError extends Error {
  override name = 'IpamError';
  constructor(
    readonly code: IpamErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A request refused because a record it needs is in the store but cannot be trusted. */
export function unreadable(what: string, problem: string): IpamError {
  return new IpamError('CORRUPT', `${what} cannot be read (${problem}); it is left as it is until it is fixed or deleted`);
}
