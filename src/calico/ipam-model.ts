// Calico's IPAM v2 records in etcd v3: keys and JSON exactly as libcalico-go's lib/backend/model writes them
// (block.go, block_affinity.go, ipam_handle.go, ipam_config.go). Pure: text in, typed record out, and back.
//
//   /calico/ipam/v2/assignment/ipv4/block/10.0.0.0-26          AllocationBlock
//   /calico/ipam/v2/host/<node>/ipv4/block/10.0.0.0-26         BlockAffinity {"state":...,"deleted":false}
//   /calico/ipam/v2/handle/<id>                                IPAMHandle {"block":{"10.0.0.0/26":1},"deleted":false}
//   /calico/ipam/v2/config                                     IPAMConfig (snake_case and camelCase, omitempty)
//
// Field order on write is Go's struct order; Go maps are written with sorted keys. Fields we do not know are kept
// (in the order read) after the known ones, so a newer calico-node's fields survive our rewrite.
import { parsePrefix, type Prefix } from '../net/ip.ts';
import { goMapOrder, JsonNumber, JsonSyntaxError, parseJson, stringifyJson, type JsonObject, type JsonValue } from './ipam-json.ts';

export const WINDOWS_RESERVED_HANDLE = 'windows-reserved-ipam-handle';
export const WINDOWS_RESERVED_NOTE = 'windows host rsvd';

/** A Calico key or value that does not decode; the message names the key and the field. */
export class CalicoDecodeError extends Error {
  override name = 'CalicoDecodeError';
}

const U64_MAX = (1n << 64n) - 1n;

// ---- keys: what a key names (keys.ts builds them) -----------------------------------------------------------

const BLOCK_KEY = /^\/calico\/ipam\/v2\/assignment\/ipv([46])\/block\/([^/]+)$/;
const AFFINITY_KEY = /^\/calico\/ipam\/v2\/host\/([^/]+)\/ipv([46])\/block\/([^/]+)$/;
const HANDLE_KEY = /^\/calico\/ipam\/v2\/handle\/([^/]+)$/;

function cidrOfKeyPart(key: string, part: string, fam: string): Prefix {
  const text = part.replace('-', '/');
  let p: Prefix;
  try {
    p = parsePrefix(text);
  } catch (e) {
    throw new CalicoDecodeError(`${key}: the key's CIDR ${JSON.stringify(text)} does not parse: ${(e as Error).message}`);
  }
  if (String(p.family) !== fam) throw new CalicoDecodeError(`${key}: CIDR ${text} is not IPv${fam}`);
  return p;
}

/** The block CIDR a block key names ("10.0.0.0/26"). */
export function blockCidrOfKey(key: string): string {
  const m = BLOCK_KEY.exec(key);
  if (!m) throw new CalicoDecodeError(`${key}: not a Calico block key (/calico/ipam/v2/assignment/ipv4|6/block/<addr>-<len>)`);
  return cidrOfKeyPart(key, m[2], m[1]).toString();
}

export function affinityOfKey(key: string): { host: string; cidr: string } {
  const m = AFFINITY_KEY.exec(key);
  if (!m) throw new CalicoDecodeError(`${key}: not a Calico host affinity key (/calico/ipam/v2/host/<node>/ipv4|6/block/<addr>-<len>)`);
  return { host: m[1], cidr: cidrOfKeyPart(key, m[3], m[2]).toString() };
}

export function handleOfKey(key: string): string {
  const m = HANDLE_KEY.exec(key);
  if (!m) throw new CalicoDecodeError(`${key}: not a Calico handle key (/calico/ipam/v2/handle/<id>)`);
  return m[1];
}

// ---- field helpers ------------------------------------------------------------------------------------------

function parseObject(key: string, text: string): JsonObject {
  let v: JsonValue;
  try {
    v = parseJson(text);
  } catch (e) {
    if (e instanceof JsonSyntaxError) throw new CalicoDecodeError(`${key}: not JSON: ${e.message}`);
    throw e;
  }
  if (!(v instanceof Map)) throw new CalicoDecodeError(`${key}: expected a JSON object`);
  return v;
}

class Fields {
  private readonly seen = new Set<string>();
  constructor(
    readonly key: string,
    readonly where: string,
    readonly obj: JsonObject,
  ) {}
  private bad(name: string, want: string): never {
    throw new CalicoDecodeError(`${this.key}: ${this.where}${name} must be ${want}`);
  }
  has(name: string): boolean {
    return this.obj.has(name);
  }
  raw(name: string): JsonValue | undefined {
    this.seen.add(name);
    return this.obj.get(name);
  }
  str(name: string, opt: true): string | undefined;
  str(name: string): string;
  str(name: string, opt?: boolean): string | undefined {
    const v = this.raw(name);
    if (v === undefined && opt) return undefined;
    if (typeof v !== 'string') return this.bad(name, 'a string');
    return v;
  }
  /** A string or null; absent reads as null (Go *string). */
  nullableStr(name: string): string | null {
    const v = this.raw(name);
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') return this.bad(name, 'a string or null');
    return v;
  }
  bool(name: string): boolean {
    const v = this.raw(name);
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') return this.bad(name, 'true or false');
    return v;
  }
  int(name: string, v: JsonValue | undefined = this.raw(name), what = name): number {
    if (v === undefined || v === null) return 0;
    if (!(v instanceof JsonNumber) || !/^-?\d{1,15}$/.test(v.text)) return this.bad(what, 'a whole number');
    return Number(v.text);
  }
  u64(name: string, v: JsonValue | undefined = this.raw(name), what = name): bigint {
    if (v === undefined || v === null) return 0n;
    if (!(v instanceof JsonNumber) || !/^\d{1,20}$/.test(v.text) || BigInt(v.text) > U64_MAX) return this.bad(what, 'an unsigned 64-bit whole number');
    return BigInt(v.text);
  }
  array(name: string): JsonValue[] {
    const v = this.raw(name);
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) return this.bad(name, 'a list');
    return v;
  }
  /** A JSON object (Go map or struct); absent or null reads as null. */
  object(name: string): JsonObject | null {
    const v = this.raw(name);
    if (v === undefined || v === null) return null;
    if (!(v instanceof Map)) return this.bad(name, 'an object');
    return v;
  }
  stringMap(name: string): Map<string, string> | null {
    const o = this.object(name);
    if (!o) return null;
    const out = new Map<string, string>();
    for (const [k, v] of o) {
      if (typeof v !== 'string') this.bad(`${name}.${k}`, 'a string');
      out.set(k, v as string);
    }
    return out;
  }
  /** Every field not read so far, in the order read. */
  unknown(): [string, JsonValue][] {
    return [...this.obj].filter(([k]) => !this.seen.has(k));
  }
}

// Go's time.Time (metav1.Time) as JSON: RFC 3339 in UTC, whole seconds.
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

export function goTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function obj(entries: [string, JsonValue | undefined][]): JsonObject {
  const m: JsonObject = new Map();
  for (const [k, v] of entries) if (v !== undefined) m.set(k, v);
  return m;
}

const num = (n: number | bigint): JsonNumber => new JsonNumber(String(n));

function stringMapJson(m: Map<string, string>): JsonObject {
  return new Map(goMapOrder(m));
}

// ---- blocks -------------------------------------------------------------------------------------------------

/** One entry of a block's `attributes`. */
export interface CalicoAttribute {
  /** handle_id; null when omitted. */
  handleId: string | null;
  /** secondary (ActiveOwnerAttrs); null when omitted. */
  secondary: Map<string, string> | null;
  alternateOwnerAttrs: Map<string, string> | null;
  /** releasedAt (RFC 3339): the address is cooling down; null when omitted. */
  releasedAt: string | null;
  unknown: [string, JsonValue][];
}

export interface CalicoBlock {
  cidr: string;
  /** "host:<node>", "virtual:<name>", or null. */
  affinity: string | null;
  /** affinity_claim_time (RFC 3339), null when omitted. */
  affinityClaimTime: string | null;
  allocations: (number | null)[];
  unallocated: number[];
  attributes: CalicoAttribute[];
  sequenceNumber: bigint;
  /** Ordinal (as text) -> block sequence number when it was allocated; null is Go's nil map. */
  sequenceNumberForAllocation: Map<string, bigint> | null;
  deleted: boolean;
  unknown: [string, JsonValue][];
}

function decodeAttribute(key: string, i: number, v: JsonValue): CalicoAttribute {
  if (!(v instanceof Map)) throw new CalicoDecodeError(`${key}: attributes[${i}] must be an object`);
  const f = new Fields(key, `attributes[${i}].`, v);
  const handleId = f.nullableStr('handle_id');
  const secondary = f.stringMap('secondary');
  const alternateOwnerAttrs = f.stringMap('alternateOwnerAttrs');
  const releasedAt = f.nullableStr('releasedAt');
  if (releasedAt !== null && !RFC3339.test(releasedAt)) throw new CalicoDecodeError(`${key}: attributes[${i}].releasedAt must be an RFC 3339 time`);
  return { handleId, secondary, alternateOwnerAttrs, releasedAt, unknown: f.unknown() };
}

/** Decode a block; checks types and ranges (not whether allocations and unallocated agree: see blockProblems). */
export function decodeBlock(key: string, text: string): CalicoBlock {
  const cidrOfKey = blockCidrOfKey(key);
  const f = new Fields(key, '', parseObject(key, text));
  const cidr = f.str('cidr');
  let p: Prefix;
  try {
    p = parsePrefix(cidr);
  } catch (e) {
    throw new CalicoDecodeError(`${key}: cidr: ${(e as Error).message}`);
  }
  if (p.toString() !== cidrOfKey) throw new CalicoDecodeError(`${key}: cidr ${cidr} does not match the key's ${cidrOfKey}`);
  const affinity = f.nullableStr('affinity');
  const affinityClaimTime = f.nullableStr('affinity_claim_time');
  if (affinityClaimTime !== null && !RFC3339.test(affinityClaimTime)) throw new CalicoDecodeError(`${key}: affinity_claim_time must be an RFC 3339 time`);
  const size = 2 ** ((p.family === 4 ? 32 : 128) - p.len);
  const rawAllocs = f.array('allocations');
  const rawUnalloc = f.array('unallocated');
  const attributes = f.array('attributes').map((a, i) => decodeAttribute(key, i, a));
  if (rawAllocs.length !== size) throw new CalicoDecodeError(`${key}: allocations has ${rawAllocs.length} entries, a /${p.len} block has ${size}`);
  const allocations = rawAllocs.map((v, o) => {
    if (v === null) return null;
    const n = f.int('allocations', v, `allocations[${o}]`);
    if (n < 0 || n >= attributes.length) throw new CalicoDecodeError(`${key}: allocations[${o}] = ${n} is not an index into attributes (${attributes.length})`);
    return n;
  });
  const unallocated = rawUnalloc.map((v, i) => {
    const n = f.int('unallocated', v, `unallocated[${i}]`);
    if (n < 0 || n >= size) throw new CalicoDecodeError(`${key}: unallocated[${i}] = ${n} is outside the block (0..${size - 1})`);
    return n;
  });
  const sequenceNumber = f.u64('sequenceNumber');
  const sfa = f.object('sequenceNumberForAllocation');
  let sequenceNumberForAllocation: Map<string, bigint> | null = null;
  if (sfa) {
    sequenceNumberForAllocation = new Map();
    for (const [k, v] of sfa) {
      if (!/^\d+$/.test(k)) throw new CalicoDecodeError(`${key}: sequenceNumberForAllocation key ${JSON.stringify(k)} is not an ordinal`);
      sequenceNumberForAllocation.set(k, f.u64('sequenceNumberForAllocation', v, `sequenceNumberForAllocation.${k}`));
    }
  }
  const deleted = f.bool('deleted');
  return { cidr: p.toString(), affinity, affinityClaimTime, allocations, unallocated, attributes, sequenceNumber, sequenceNumberForAllocation, deleted, unknown: f.unknown() };
}

function encodeAttribute(a: CalicoAttribute): JsonObject {
  return obj([
    ['handle_id', a.handleId ?? undefined],
    ['secondary', a.secondary && a.secondary.size ? stringMapJson(a.secondary) : undefined],
    ['alternateOwnerAttrs', a.alternateOwnerAttrs && a.alternateOwnerAttrs.size ? stringMapJson(a.alternateOwnerAttrs) : undefined],
    ['releasedAt', a.releasedAt ?? undefined],
    ...a.unknown,
  ]);
}

/** An attribute's JSON text (equal texts are the same attribute to Calico's findOrAddAttribute). */
export function attributeJson(a: CalicoAttribute): string {
  return stringifyJson(encodeAttribute(a));
}

export function encodeBlock(b: CalicoBlock): string {
  const sfa = b.sequenceNumberForAllocation;
  return stringifyJson(
    obj([
      ['cidr', b.cidr],
      ['affinity', b.affinity],
      ['affinity_claim_time', b.affinityClaimTime ?? undefined],
      ['allocations', b.allocations.map((a) => (a === null ? null : num(a)))],
      ['unallocated', b.unallocated.map(num)],
      ['attributes', b.attributes.map(encodeAttribute)],
      ['sequenceNumber', num(b.sequenceNumber)],
      ['sequenceNumberForAllocation', sfa ? new Map(goMapOrder(sfa).map(([k, v]) => [k, num(v)] as [string, JsonValue])) : null],
      ['deleted', b.deleted],
      ...b.unknown,
    ]),
  );
}

export function isWindowsReserved(a: CalicoAttribute): boolean {
  return a.handleId !== null && a.handleId.toLowerCase() === WINDOWS_RESERVED_HANDLE;
}

/** Calico's reservation attribute for a Windows block (ordinals 0, 1, 2 and the last point at it). */
export function windowsReservedAttribute(): CalicoAttribute {
  return { handleId: WINDOWS_RESERVED_HANDLE, secondary: new Map([['note', WINDOWS_RESERVED_NOTE]]), alternateOwnerAttrs: null, releasedAt: null, unknown: [] };
}

/** Where a decoded block's lists disagree (each one a sentence); empty when consistent. */
export function blockProblems(b: CalicoBlock): string[] {
  const out: string[] = [];
  const seen = new Set<number>();
  for (const o of b.unallocated) {
    if (seen.has(o)) out.push(`ordinal ${o} is listed twice in unallocated`);
    seen.add(o);
    if (b.allocations[o] !== null) out.push(`ordinal ${o} is both allocated and in unallocated`);
  }
  b.allocations.forEach((a, o) => {
    if (a === null && !seen.has(o)) out.push(`ordinal ${o} is neither allocated nor in unallocated`);
  });
  return out;
}

// ---- affinities ---------------------------------------------------------------------------------------------

export type CalicoAffinityState = 'pending' | 'confirmed' | 'pendingDeletion';

export interface CalicoAffinity {
  host: string;
  cidr: string;
  state: CalicoAffinityState;
  deleted: boolean;
}

export function decodeAffinity(key: string, text: string): CalicoAffinity {
  const { host, cidr } = affinityOfKey(key);
  // Old Calico stored affinities with no value; it reads them as {} (state "", i.e. confirmed in use).
  const f = new Fields(key, '', parseObject(key, text === '' ? '{}' : text));
  const state = f.str('state', true) ?? '';
  if (state !== '' && state !== 'pending' && state !== 'confirmed' && state !== 'pendingDeletion') {
    throw new CalicoDecodeError(`${key}: state must be pending, confirmed or pendingDeletion, got ${JSON.stringify(state)}`);
  }
  return { host, cidr, state: state === '' ? 'confirmed' : state, deleted: f.bool('deleted') };
}

export function encodeAffinity(state: CalicoAffinityState): string {
  return `{"state":${JSON.stringify(state)},"deleted":false}`;
}

// ---- handles ------------------------------------------------------------------------------------------------

export interface CalicoHandle {
  id: string;
  /** Block CIDR (with "/") -> addresses held there. */
  block: Map<string, number>;
  deleted: boolean;
}

export function decodeHandle(key: string, text: string): CalicoHandle {
  const id = handleOfKey(key);
  const f = new Fields(key, '', parseObject(key, text));
  const block = new Map<string, number>();
  for (const [cidr, v] of f.object('block') ?? []) block.set(cidr, f.int('block', v, `block[${JSON.stringify(cidr)}]`));
  return { id, block, deleted: f.bool('deleted') };
}

export function encodeHandle(block: Map<string, number> | Record<string, number>): string {
  const entries = block instanceof Map ? [...block] : Object.entries(block);
  return stringifyJson(obj([['block', new Map(goMapOrder(entries).map(([k, v]) => [k, num(v)] as [string, JsonValue]))], ['deleted', false]]));
}

// ---- IPAM config --------------------------------------------------------------------------------------------

export interface CalicoIpamConfig {
  strictAffinity: boolean;
  autoAllocateBlocks: boolean;
  maxBlocksPerHost: number;
  kubeVirtVMAddressPersistence: string | null;
  ipCooldownSeconds: number;
  unknown: [string, JsonValue][];
}

/** An existing config without auto_allocate_blocks means false (omitempty); no config key at all is Calico's default. */
export function decodeIpamConfig(key: string, text: string): CalicoIpamConfig {
  const f = new Fields(key, '', parseObject(key, text));
  const c = {
    strictAffinity: f.bool('strict_affinity'),
    autoAllocateBlocks: f.bool('auto_allocate_blocks'),
    maxBlocksPerHost: f.int('maxBlocksPerHost'),
    kubeVirtVMAddressPersistence: f.nullableStr('kubeVirtVMAddressPersistence'),
    ipCooldownSeconds: f.int('ipCooldownSeconds'),
  };
  if (c.maxBlocksPerHost < 0) throw new CalicoDecodeError(`${key}: maxBlocksPerHost must be >= 0`);
  if (c.ipCooldownSeconds < 0) throw new CalicoDecodeError(`${key}: ipCooldownSeconds must be >= 0`);
  return { ...c, unknown: f.unknown() };
}

export function encodeIpamConfig(c: CalicoIpamConfig): string {
  return stringifyJson(
    obj([
      ['strict_affinity', c.strictAffinity || undefined],
      ['auto_allocate_blocks', c.autoAllocateBlocks || undefined],
      ['maxBlocksPerHost', c.maxBlocksPerHost ? num(c.maxBlocksPerHost) : undefined],
      ['kubeVirtVMAddressPersistence', c.kubeVirtVMAddressPersistence ?? undefined],
      ['ipCooldownSeconds', c.ipCooldownSeconds ? num(c.ipCooldownSeconds) : undefined],
      ...c.unknown,
    ]),
  );
}
