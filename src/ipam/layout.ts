// A datastore layout: where IPAM's records live in the Store and how they are written. The allocator works on
// BlockRecord/AffinityRecord/HandleRecord/IpamConfig/Pool/Host and never sees the keys or JSON; a layout maps
// between the two. Layouts: `blockspeaker` (ours, below) and `calico` (calico/layout.ts: Calico's own IPAM v2
// keys and JSON, so calico-node and blockspeaker can share one etcd).
import { maxLen, parsePrefix, type Prefix } from '../net/ip.ts';
import type { KeyValue } from '../store/types.ts';
import type { AffinityRecord, AffinityState, AllocationAttr, BlockRecord, HandleRecord, Host, IpamConfig, OS, Pool, PoolSpec } from './types.ts';
import { defaultConfig } from './types.ts';
import { validateConfig, validateHost, validatePool } from './validate.ts';

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

// ---- reading our layout back: every record is checked before the allocator sees it ---------------------------
//
// Anyone who can write to the store (etcd, the embedded store's directory) can write anything under these keys, so a
// record is trusted only once it has the shape the allocator relies on. The decoders below throw a RecordError
// naming the key and what is wrong; IpamStore (datastore.ts) then skips that record with one warning: reads and
// views treat it as absent, and writers never write over it (see Pass in datastore.ts). The checks:
// - a value that is JSON of an object, every field the code reads present with its type;
// - the key names the record: a block's and an affinity's CIDR parse and equal the key's, a handle's and a host's
//   name equal the key's (as the key encodes it), a pool's name is its key's;
// - blocks: at most MAX_BLOCK_ADDRESSES addresses (a /20 or /116, the largest blockSize a pool may have), one
//   allocation entry per address, each an index into attributes or null; unallocated and reserved list ordinals
//   inside the block, none twice, and every ordinal is exactly one of allocated, free or reserved (two of them
//   would hand an address out twice; none would lose it); released times are for ordinals of the block;
// - handles: per block CIDR a whole count from 1 to the block's size;
// - pools, hosts and the settings: the same checks as when they are added (validate.ts).
// Fields this version does not know are kept on blocks (a newer version's fields survive our rewrite), except `ext`,
// which is the layouts' in-memory state and never comes from the store.

/** A record of the blockspeaker layout that cannot be trusted; the message starts with its key. */
export class RecordError extends Error {
  override name = 'RecordError';
}

/** The most addresses a block can hold: a pool's blockSize is at least /20 (IPv4) or /116 (IPv6). */
export const MAX_BLOCK_ADDRESSES = 4096;

type Obj = Record<string, unknown>;

/** A value for a message: JSON, cut short (a hostile writer's 1 MB string must not become a 1 MB warning). */
function show(v: unknown): string {
  let text: string;
  try {
    text = v === undefined ? 'nothing' : JSON.stringify(v) ?? String(v);
  } catch {
    text = String(v);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function typeName(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'an object' : typeof v;
}

class Reader {
  constructor(readonly key: string) {}

  fail(msg: string): never {
    throw new RecordError(`${this.key}: ${msg}`);
  }

  object(text: string): Obj {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      this.fail(`not JSON (${show((e as Error).message)})`);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(`expected a JSON object, got ${typeName(v)}`);
    return v as Obj;
  }

  /** An own field (never one inherited from Object.prototype, whatever the JSON names). */
  get(o: Obj, name: string): unknown {
    return Object.hasOwn(o, name) ? o[name] : undefined;
  }

  str(o: Obj, name: string, where = ''): string {
    const v = this.get(o, name);
    if (typeof v !== 'string') this.fail(`${where}${name} must be a string, got ${show(v)}`);
    return v;
  }

  bool(o: Obj, name: string, where = ''): boolean {
    const v = this.get(o, name);
    if (typeof v !== 'boolean') this.fail(`${where}${name} must be true or false, got ${show(v)}`);
    return v;
  }

  list(o: Obj, name: string): unknown[] {
    const v = this.get(o, name);
    if (!Array.isArray(v)) this.fail(`${name} must be a list, got ${show(v)}`);
    return v;
  }

  obj(o: Obj, name: string, where = ''): Obj {
    const v = this.get(o, name);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(`${where}${name} must be an object, got ${show(v)}`);
    return v as Obj;
  }

  /** A CIDR in canonical form (as a key names it), the prefix checked to be a block's size. */
  prefix(text: unknown, what: string): Prefix {
    let p: Prefix;
    try {
      p = parsePrefix(text as string);
    } catch {
      this.fail(`${what} ${show(text)} is not a network prefix`);
    }
    const size = 2 ** (maxLen(p.family) - p.len);
    if (size > MAX_BLOCK_ADDRESSES) this.fail(`${what} ${p} has ${size} addresses; a block has at most ${MAX_BLOCK_ADDRESSES}`);
    return p;
  }

  /** A whole number in [0, end). */
  ordinal(v: unknown, what: string, end: number): number {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= end) this.fail(`${what} = ${show(v)} is not an ordinal of the block (0..${end - 1})`);
    return v;
  }
}

/** "<addr>-<len>" as keys.block writes it -> the canonical CIDR, or a RecordError. */
function cidrOfKeyName(r: Reader, name: string): string {
  const dash = name.lastIndexOf('-');
  if (dash <= 0) r.fail('the key does not end in <address>-<length>');
  const p = r.prefix(`${name.slice(0, dash)}/${name.slice(dash + 1)}`, "the key's CIDR");
  if (p.toString().replace('/', '-') !== name) r.fail(`the key's CIDR is not written as this layout writes it (${p.toString().replace('/', '-')})`);
  return p.toString();
}

/** A name as the key encodes it (encodeURIComponent), or a RecordError. */
function nameOfKeyPart(r: Reader, part: string, what: string): string {
  let name: string;
  try {
    name = decodeURIComponent(part);
  } catch {
    r.fail(`the key's ${what} is not URI-encoded`);
  }
  if (name === '' || encodeURIComponent(name) !== part) r.fail(`the key's ${what} is not written as this layout writes it`);
  return name;
}

/** Block keys already checked -> their CIDR and prefix (blocks are read on every allocation; keys are few). */
const blockKeys = new Map<string, { cidr: string; prefix: Prefix }>();

function blockOfKey(key: string): { cidr: string; prefix: Prefix } {
  let hit = blockKeys.get(key);
  if (!hit) {
    const r: Reader = new Reader(key);
    if (!key.startsWith(keys.blocks)) r.fail(`not a block key (${keys.blocks}<address>-<length>)`);
    const cidr = cidrOfKeyName(r, key.slice(keys.blocks.length));
    if (blockKeys.size >= 100_000) blockKeys.clear();
    blockKeys.set(key, (hit = { cidr, prefix: parsePrefix(cidr) }));
  }
  return hit;
}

function blockCidrOfKey(key: string): string {
  return blockOfKey(key).cidr;
}

const STATES = ['', 'allocated', 'free', 'reserved'];

const BLOCK_FIELDS = new Set(['cidr', 'pool', 'affinity', 'os', 'borrowable', 'allocations', 'unallocated', 'reserved', 'attributes', 'released', 'hostReservation', 'ext']);

function decodeAttr(r: Reader, v: unknown, i: number): AllocationAttr {
  const where = `attributes[${i}].`;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) r.fail(`attributes[${i}] must be an object, got ${show(v)}`);
  const o = v as Obj;
  const handle = r.get(o, 'handle');
  if (handle !== null && typeof handle !== 'string') r.fail(`${where}handle must be a string or null, got ${show(handle)}`);
  // Fields of a newer version ride along; the known ones are the checked values.
  const out: AllocationAttr = { ...o, handle, host: r.str(o, 'host', where), natOutgoing: r.bool(o, 'natOutgoing', where) };
  if (Object.hasOwn(o, 'attrs')) {
    const attrs = r.obj(o, 'attrs', where);
    for (const [k, x] of Object.entries(attrs)) if (typeof x !== 'string') r.fail(`${where}attrs.${show(k)} must be a string, got ${show(x)}`);
    out.attrs = Object.fromEntries(Object.entries(attrs)) as Record<string, string>;
  }
  if (Object.hasOwn(o, 'ext')) out.ext = r.str(o, 'ext', where);
  return out;
}

/** A block of this layout, checked (see the comment above); throws RecordError. */
export function decodeOwnBlock(kv: KeyValue): BlockRecord {
  const { cidr, prefix: p } = blockOfKey(kv.key);
  const r: Reader = new Reader(kv.key);
  const o = r.object(kv.value);
  const rawCidr = r.get(o, 'cidr');
  // As written (the usual case) it is the key's; else it must at least name the same prefix.
  if (rawCidr !== cidr && r.prefix(rawCidr, 'cidr').toString() !== cidr) r.fail(`cidr ${show(rawCidr)} does not match the key's ${cidr}`);
  const size = 2 ** (maxLen(p.family) - p.len);
  const pool = r.str(o, 'pool');
  const affinity = r.get(o, 'affinity');
  if (affinity !== null && typeof affinity !== 'string') r.fail(`affinity must be a string or null, got ${show(affinity)}`);
  const os = r.get(o, 'os');
  if (os !== 'linux' && os !== 'windows') r.fail(`os must be linux or windows, got ${show(os)}`);
  const borrowable = r.bool(o, 'borrowable');
  const attributes = r.list(o, 'attributes').map((a, i) => decodeAttr(r, a, i));
  // The lists JSON.parse made are checked in place and kept (no copies: blocks are read on every allocation).
  const allocations = r.list(o, 'allocations') as (number | null)[];
  if (allocations.length !== size) r.fail(`allocations has ${allocations.length} entries, a /${p.len} block has ${size}`);
  const nAttrs = attributes.length;
  // Per ordinal: 0 none yet, else the index into STATES.
  const state = new Uint8Array(size);
  for (let i = 0; i < size; i++) {
    const a = allocations[i] as unknown;
    if (a === null) continue;
    if (typeof a !== 'number' || !Number.isInteger(a) || a < 0 || a >= nAttrs) r.fail(`allocations[${i}] = ${show(a)} is not an index into attributes (${nAttrs})`);
    state[i] = 1;
  }
  const ordinals = (name: 'unallocated' | 'reserved', mark: number): number[] => {
    const list = r.list(o, name) as number[];
    for (let i = 0; i < list.length; i++) {
      const n = r.ordinal(list[i], `${name}[${i}]`, size);
      if (state[n] !== 0) r.fail(`ordinal ${n} is both ${STATES[state[n]]} and ${STATES[mark]}`);
      state[n] = mark;
    }
    return list;
  };
  const unallocated = ordinals('unallocated', 2);
  const reserved = ordinals('reserved', 3);
  const missing = state.indexOf(0);
  if (missing >= 0) r.fail(`ordinal ${missing} is neither allocated, free nor reserved`);
  // Older records may lack the cooldown map: nothing cools down.
  const released: Record<string, number> = {};
  const rawReleased = Object.hasOwn(o, 'released') ? r.obj(o, 'released') : {};
  const times: [string, number][] = [];
  for (const [k, t] of Object.entries(rawReleased)) {
    if (!/^(0|[1-9]\d{0,3})$/.test(k) || Number(k) >= size) r.fail(`released.${show(k)} is not an ordinal of the block (0..${size - 1})`);
    if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) r.fail(`released.${k} must be a time in ms, got ${show(t)}`);
    times.push([k, t]);
  }
  Object.assign(released, Object.fromEntries(times));
  const out: BlockRecord = {
    cidr,
    pool,
    affinity: affinity as string | null,
    os: os as OS,
    borrowable,
    allocations,
    unallocated,
    reserved,
    attributes,
    released,
  };
  if (Object.hasOwn(o, 'hostReservation')) out.hostReservation = r.bool(o, 'hostReservation');
  // A newer version's fields, kept for the rewrite (encodeBlock writes them back); `ext` is never read from the store.
  const extra = Object.entries(o).filter(([k]) => !BLOCK_FIELDS.has(k));
  return extra.length ? { ...Object.fromEntries(extra), ...out } : out;
}

const AFFINITY_STATES: readonly AffinityState[] = ['pending', 'confirmed', 'pendingDeletion'];

export function decodeOwnAffinity(kv: KeyValue): AffinityRecord {
  const r: Reader = new Reader(kv.key);
  if (!kv.key.startsWith(keys.allAffinities)) r.fail(`not an affinity key (${keys.allAffinities}<host>/<address>-<length>)`);
  const parts = kv.key.slice(keys.allAffinities.length).split('/');
  if (parts.length !== 2) r.fail(`not an affinity key (${keys.allAffinities}<host>/<address>-<length>)`);
  const keyHost = nameOfKeyPart(r, parts[0], 'host');
  const keyCidr = cidrOfKeyName(r, parts[1]);
  const o = r.object(kv.value);
  const host = r.str(o, 'host');
  if (host !== keyHost) r.fail(`host ${show(host)} does not match the key's ${show(keyHost)}`);
  const rawCidr = r.get(o, 'cidr');
  if (r.prefix(rawCidr, 'cidr').toString() !== keyCidr) r.fail(`cidr ${show(rawCidr)} does not match the key's ${keyCidr}`);
  const state = r.get(o, 'state');
  if (!AFFINITY_STATES.includes(state as AffinityState)) r.fail(`state must be one of ${AFFINITY_STATES.join(', ')}, got ${show(state)}`);
  return { host, cidr: keyCidr, state: state as AffinityState };
}

export function decodeOwnHandle(kv: KeyValue): HandleRecord {
  const r: Reader = new Reader(kv.key);
  if (!kv.key.startsWith(keys.handles)) r.fail(`not a handle key (${keys.handles}<handle>)`);
  const keyHandle = nameOfKeyPart(r, kv.key.slice(keys.handles.length), 'handle');
  const o = r.object(kv.value);
  const handle = r.str(o, 'handle');
  if (handle !== keyHandle) r.fail(`handle ${show(handle)} does not match the key's ${show(keyHandle)}`);
  const counts: [string, number][] = [];
  for (const [cidr, n] of Object.entries(r.obj(o, 'blocks'))) {
    const p = r.prefix(cidr, 'blocks: block');
    if (p.toString() !== cidr) r.fail(`blocks: ${show(cidr)} is not written as a block CIDR (${p})`);
    const size = 2 ** (maxLen(p.family) - p.len);
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > size) r.fail(`blocks.${cidr} must count 1..${size} addresses, got ${show(n)}`);
    counts.push([cidr, n]);
  }
  return { handle, blocks: Object.fromEntries(counts) };
}

/** A pool or host record: the checks its add makes (src/ipam/validate.ts), and the name its key says. */
function decodeNamed<T extends { name: string }>(kv: KeyValue, what: 'pool' | 'host', prefix: string, keyOf: (name: string) => string, validate: (o: T) => T): T {
  const r: Reader = new Reader(kv.key);
  if (!kv.key.startsWith(prefix)) r.fail(`not a ${what} key (${prefix}<name>)`);
  const o = r.object(kv.value);
  let v: T;
  try {
    v = validate(o as unknown as T);
  } catch (e) {
    r.fail((e as Error).message.slice(0, 200));
  }
  if (keyOf(v.name) !== kv.key) r.fail(`${what} name ${show(v.name)} does not match the key`);
  return v;
}

export function decodeOwnPool(kv: KeyValue): Pool {
  return decodeNamed<Pool>(kv, 'pool', keys.pools, keys.pool, (o) => validatePool(o as unknown as PoolSpec));
}

export function decodeOwnHost(kv: KeyValue): Host {
  return decodeNamed<Host>(kv, 'host', keys.hosts, keys.host, validateHost);
}

/** The settings: what is stored over the defaults, each field checked. */
export function decodeOwnConfig(kv: KeyValue | undefined): IpamConfig {
  if (!kv) return { ...defaultConfig };
  const r: Reader = new Reader(kv.key);
  const o = r.object(kv.value);
  const c: IpamConfig = { ...defaultConfig };
  for (const k of Object.keys(defaultConfig) as (keyof IpamConfig)[]) if (Object.hasOwn(o, k)) (c as unknown as Obj)[k] = o[k];
  try {
    return validateConfig(c);
  } catch (e) {
    r.fail((e as Error).message.slice(0, 200));
  }
}

export const blockspeakerLayout: Layout = {
  name: 'blockspeaker',
  keys,
  blockCidrOfKey,
  decodeConfig: decodeOwnConfig,
  encodeConfig: (c) => JSON.stringify(c),
  decodePool: decodeOwnPool,
  encodePool: (p) => JSON.stringify(p),
  decodeHost: decodeOwnHost,
  encodeHost: (h) => JSON.stringify(h),
  decodeBlock: (kv) => decodeOwnBlock(kv),
  encodeBlock: ({ ext: _ext, ...b }) => JSON.stringify(b),
  decodeAffinity: decodeOwnAffinity,
  encodeAffinity: (a) => JSON.stringify({ host: a.host, cidr: a.cidr, state: a.state }),
  decodeHandle: decodeOwnHandle,
  encodeHandle: (h) => JSON.stringify({ handle: h.handle, blocks: h.blocks }),
};
