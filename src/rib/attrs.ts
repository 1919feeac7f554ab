// BGP path attributes as immutable records (the interner that hash-conses them is interner.ts).
//
// A full table has ~1.3M routes but only ~350k distinct attribute sets, so every route refers to one shared,
// interned set by its id; the interner holds a set as a row and makes its one record when it is read. Records are
// normalised on construction (set-like lists sorted and de-duplicated, adjacent AS_SEQUENCE segments joined) so
// that equal meaning gives equal content and therefore one instance.
import { IP, ipEquals } from '../net/ip.ts';

// ---- types --------------------------------------------------------------------------------------------------

/** ORIGIN (RFC 4271 5.1.1); lower is preferred. */
export const Origin = { IGP: 0, EGP: 1, INCOMPLETE: 2 } as const;
export type Origin = (typeof Origin)[keyof typeof Origin];

/** AS_PATH segment types: RFC 4271 4.3 (SET, SEQUENCE) and RFC 5065 (confederation segments). */
export const SegmentType = { AS_SET: 1, AS_SEQUENCE: 2, AS_CONFED_SEQUENCE: 3, AS_CONFED_SET: 4 } as const;
export type SegmentType = (typeof SegmentType)[keyof typeof SegmentType];

export interface AsPathSegment {
  readonly type: SegmentType;
  /** 4-octet ASNs (RFC 6793); two-octet peers are translated by the codec. */
  readonly asns: readonly number[];
}
export type AsPath = readonly AsPathSegment[];

/** AGGREGATOR: the AS and (IPv4) router that formed the aggregate. */
export interface Aggregator {
  readonly asn: number;
  readonly address: IP;
}

/** An extended community (RFC 4360): its 8 octets as two uint32 halves, most significant first. */
export type ExtCommunity = readonly [hi: number, lo: number];
/** A large community (RFC 8092): global administrator, local data 1, local data 2. */
export type LargeCommunity = readonly [global: number, local1: number, local2: number];

/** An optional transitive attribute we do not understand, kept as raw bytes to pass on (RFC 4271 5). */
export interface RawAttr {
  readonly flags: number;
  readonly type: number;
  /** The value octets. Shared by every route using the record: never mutate. */
  readonly value: Uint8Array;
}

/** An immutable, normalised set of path attributes. Create with makeAttrs, share with AttrInterner.intern. */
export interface PathAttrs {
  readonly origin: Origin;
  readonly asPath: AsPath;
  /** NEXT_HOP or the MP_REACH global next hop; null for locally originated routes (meaning "this host"). */
  readonly nextHop: IP | null;
  /** The IPv6 link-local next hop that MP_REACH may carry next to the global one (RFC 2545 3). */
  readonly nextHopLinkLocal: IP | null;
  readonly med: number | undefined;
  readonly localPref: number | undefined;
  readonly atomicAggregate: boolean;
  readonly aggregator: Aggregator | undefined;
  /** RFC 1997 communities, sorted and unique. */
  readonly communities: readonly number[];
  readonly extCommunities: readonly ExtCommunity[];
  readonly largeCommunities: readonly LargeCommunity[];
  /** ORIGINATOR_ID (RFC 4456), a router ID as uint32. */
  readonly originatorId: number | undefined;
  /** CLUSTER_LIST (RFC 4456) in received order. */
  readonly clusterList: readonly number[];
  /** Unknown optional transitive attributes, sorted by type code. */
  readonly unknown: readonly RawAttr[];
  /** Content hash (computed once; equal content gives equal hash). */
  readonly hash: number;
  /** asPathLength(asPath), computed once: best-path selection needs it on every update. */
  readonly asPathLen: number;
  /** neighbourAs(asPath), computed once, for the MED step. */
  readonly neighbourAsn: number;
}

/** What makeAttrs accepts: every field optional (ORIGIN defaults to IGP, AS_PATH to empty, next hop to none). */
export interface AttrsInit {
  origin?: Origin;
  asPath?: AsPath;
  nextHop?: IP | null;
  nextHopLinkLocal?: IP | null;
  med?: number;
  localPref?: number;
  atomicAggregate?: boolean;
  aggregator?: Aggregator;
  communities?: readonly number[];
  extCommunities?: readonly ExtCommunity[];
  largeCommunities?: readonly LargeCommunity[];
  originatorId?: number;
  clusterList?: readonly number[];
  unknown?: readonly RawAttr[];
}

/** Attribute values that cannot be represented (out-of-range numbers, duplicate unknown types). */
export class AttrError extends Error {
  override name = 'AttrError';
}

// ---- construction -------------------------------------------------------------------------------------------

const isU32 = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffffffff;

function u32(n: number, what: string): number {
  if (!isU32(n)) throw new AttrError(`${what} must be an unsigned 32-bit integer, got ${n}`);
  return n;
}

function cmpTuple(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

// Most attribute sets have no extended/large communities, cluster list or unknown attributes: they all share this
// one frozen empty list instead of holding an array object each (a full table has ~350k distinct sets).
const EMPTY: readonly never[] = Object.freeze([]);

function sortedUnique(xs: readonly number[], what: string): readonly number[] {
  if (xs.length === 0) return EMPTY;
  const out = xs.map((x) => u32(x, what)).sort((a, b) => a - b);
  return Object.freeze(out.filter((x, i) => i === 0 || x !== out[i - 1]));
}

function sortedUniqueTuples<T extends readonly number[]>(xs: readonly T[], width: number, what: string): readonly T[] {
  if (xs.length === 0) return EMPTY;
  const out = xs.map((t) => {
    if (t.length !== width) throw new AttrError(`${what} must have ${width} parts, got ${t.length}`);
    return Object.freeze(t.map((x) => u32(x, what))) as unknown as T;
  });
  out.sort(cmpTuple);
  return Object.freeze(out.filter((t, i) => i === 0 || cmpTuple(t, out[i - 1]) !== 0));
}

/**
 * The normal form of an AS_PATH: empty segments dropped, sets sorted and de-duplicated, adjacent sequences of the
 * same type joined; frozen. A path already in normal form can be given to adoptAttrs as it is (the codec caches
 * normalised paths by their wire bytes, so a full table's ~350k attribute sets share a few thousand paths).
 */
export function normaliseAsPath(path: AsPath, trusted = false): AsPath {
  const out: AsPathSegment[] = [];
  for (const seg of path) {
    if (seg.type < 1 || seg.type > 4 || !Number.isInteger(seg.type)) {
      throw new AttrError(`unknown AS_PATH segment type ${seg.type}`);
    }
    if (seg.asns.length === 0) continue; // an empty segment says nothing
    let asns = trusted ? (seg.asns as number[]) : seg.asns.map((a) => u32(a, 'ASN'));
    const isSet = seg.type === SegmentType.AS_SET || seg.type === SegmentType.AS_CONFED_SET;
    if (isSet) {
      // Order inside a set carries no meaning.
      asns.sort((a, b) => a - b);
      asns = asns.filter((a, i) => i === 0 || a !== asns[i - 1]);
    }
    const last = out[out.length - 1];
    if (!isSet && last && last.type === seg.type) {
      // Sequences longer than 255 ASNs arrive split over several segments; joined they mean the same path.
      out[out.length - 1] = { type: seg.type, asns: [...last.asns, ...asns] };
    } else {
      out.push(trusted && asns === seg.asns ? seg : { type: seg.type, asns });
    }
  }
  if (out.length === 0) return EMPTY;
  for (const seg of out) {
    Object.freeze(seg.asns);
    Object.freeze(seg);
  }
  return Object.freeze(out);
}

function copyIP(ip: IP | null | undefined, what: string): IP | null {
  if (ip == null) return null;
  if (!(ip instanceof IP)) throw new AttrError(`${what} must be an IP`);
  return ip;
}

// Sorted and unique already (the usual case on the wire): adopt the caller's array as it is.
function isSortedUnique(xs: readonly number[]): boolean {
  for (let i = 1; i < xs.length; i++) if (xs[i] <= xs[i - 1]) return false;
  return true;
}

/**
 * The record class: instances are what makeAttrs builds, so `instanceof` tells a normalised, hashed record from a
 * caller's AttrsInit without a side table. Every instance has the same fields in the same order (one hidden class).
 * Exported for the interner (interner.ts), which makes records from its rows; everyone else uses makeAttrs.
 */
export class AttrRecord implements PathAttrs {
  constructor(
    readonly hash: number,
    readonly origin: Origin,
    readonly asPath: AsPath,
    readonly nextHop: IP | null,
    readonly med: number | undefined,
    readonly localPref: number | undefined,
    /**
     * COMMUNITIES: a lone community (the common case) as a number (int32, so it stays unboxed), else the sorted list:
     * one object less per record for the collector to copy and mark in a table load.
     */
    readonly comm: number | readonly number[],
    /** The attributes most routes do not carry, in one object shared by all records that have none of them. */
    readonly rareAttrs: RareAttrs,
    /** Shared by every record with this path (one pointer here instead of three numbers). */
    readonly facts: AsPathFacts,
  ) {}

  get communities(): readonly number[] {
    const c = this.comm;
    return typeof c === 'number' ? Object.freeze([c >>> 0]) : c;
  }
  get nextHopLinkLocal(): IP | null {
    return this.rareAttrs.nextHopLinkLocal;
  }
  get atomicAggregate(): boolean {
    return this.rareAttrs.atomicAggregate;
  }
  get aggregator(): Aggregator | undefined {
    return this.rareAttrs.aggregator;
  }
  get extCommunities(): readonly ExtCommunity[] {
    return this.rareAttrs.extCommunities;
  }
  get largeCommunities(): readonly LargeCommunity[] {
    return this.rareAttrs.largeCommunities;
  }
  get originatorId(): number | undefined {
    return this.rareAttrs.originatorId;
  }
  get clusterList(): readonly number[] {
    return this.rareAttrs.clusterList;
  }
  get unknown(): readonly RawAttr[] {
    return this.rareAttrs.unknown;
  }
  get asPathLen(): number {
    return this.facts.len;
  }
  get neighbourAsn(): number {
    return this.facts.neighbour;
  }
}

export interface RareAttrs {
  readonly nextHopLinkLocal: IP | null;
  readonly atomicAggregate: boolean;
  readonly aggregator: Aggregator | undefined;
  readonly extCommunities: readonly ExtCommunity[];
  readonly largeCommunities: readonly LargeCommunity[];
  readonly originatorId: number | undefined;
  readonly clusterList: readonly number[];
  readonly unknown: readonly RawAttr[];
}

const NO_RARE: RareAttrs = Object.freeze({
  nextHopLinkLocal: null, atomicAggregate: false, aggregator: undefined, extCommunities: EMPTY, largeCommunities: EMPTY,
  originatorId: undefined, clusterList: EMPTY, unknown: EMPTY,
});

// The rare attributes of records whose only rare attribute is an IPv6 link-local next hop: every IPv6 route from a
// peer on the link (BIRD and FRR send one), so one object per link-local address in a row, not one per record. The
// interner then finds a held set's rare attributes identical by pointer, and hashes them once (rareHash).
let linkLocalIp: IP | null = null;
let linkLocalRare: RareAttrs = NO_RARE;

function linkLocalOnly(ip: IP): RareAttrs {
  if (linkLocalIp !== ip && (linkLocalIp === null || !ipEquals(linkLocalIp, ip))) {
    linkLocalRare = Object.freeze({
      nextHopLinkLocal: ip, atomicAggregate: false, aggregator: undefined, extCommunities: EMPTY, largeCommunities: EMPTY,
      originatorId: undefined, clusterList: EMPTY, unknown: EMPTY,
    });
    linkLocalIp = ip;
  }
  return linkLocalRare;
}

/**
 * Whether `asn` occurs anywhere in the AS_PATH (loop detection, RFC 4271 9.1.2). Records made here answer most
 * "no" from their path's ASN bloom without loading the path itself (a cache miss per record in a table load).
 */
export function pathHasAsn(a: PathAttrs, asn: number): boolean {
  if (a instanceof AttrRecord && (a.facts.bloom & (1 << (asn & 31))) === 0) return false;
  const path = a.asPath;
  for (let i = 0; i < path.length; i++) if (path[i].asns.includes(asn)) return true;
  return false;
}

/** What best-path selection and hashing need of an AS path, computed once per path (the codec caches them). */
export interface AsPathFacts {
  /** asPathLength */
  readonly len: number;
  /** neighbourAs */
  readonly neighbour: number;
  /** A content hash of the (normalised) path. */
  readonly hash: number;
  /** Bit (asn & 31) set for every ASN in the path: a clear bit proves an ASN absent. */
  readonly bloom: number;
}

export function asPathFacts(path: AsPath): AsPathFacts {
  let h = mix(0x3c6ef372, path.length);
  for (let i = 0; i < path.length; i++) h = mixList(mix(h, path[i].type), path[i].asns);
  let bloom = 0;
  for (let i = 0; i < path.length; i++) for (const asn of path[i].asns) bloom |= 1 << (asn & 31);
  return { len: asPathLength(path), neighbour: neighbourAs(path), hash: h, bloom };
}

/**
 * `path` with `asn` prepended (an eBGP export), normalised and frozen, with its facts. Memoised per source path
 * (paths are shared frozen objects: the decoder's cache, interned records): a route exported to a hundred eBGP
 * peers is normalised once, not once per peer. Only the last ASN is remembered (a speaker has one local AS).
 */
const prepended = new WeakMap<AsPath, { asn: number; path: AsPath }>();
/** Facts of paths this module normalised itself (prependAs): build trusts them as they are. */
const knownFacts = new WeakMap<AsPath, AsPathFacts>();

export function prependAs(path: AsPath, asn: number): AsPath {
  const hit = prepended.get(path);
  if (hit !== undefined && hit.asn === asn) return hit.path;
  const out = normaliseAsPath([asSequence(u32(asn, 'ASN')), ...path]);
  knownFacts.set(out, asPathFacts(out));
  prepended.set(path, { asn, path: out });
  return out;
}

/** Build a normalised, frozen attribute record (not interned). */
export function makeAttrs(init: AttrsInit = {}): PathAttrs {
  return build(init, false);
}

/**
 * makeAttrs for the codec, which hands over what it just decoded: the arrays in `init` are fresh and become the
 * record's (they may be sorted in place and are frozen), every number is already an unsigned 32-bit value read off
 * the wire, and `asPath` is already normalised (normaliseAsPath). Saves a copy of every list per attribute set.
 */
export function adoptAttrs(init: AttrsInit, facts?: AsPathFacts): PathAttrs {
  return build(init, true, facts);
}

/**
 * `from`: the record init was copied from (withAttrs): fields still identical to its own are already normalised
 * and frozen, so they are taken as they are.
 */
function build(init: AttrsInit, adopt: boolean, facts?: AsPathFacts, from?: AttrRecord): PathAttrs {
  const origin = init.origin ?? Origin.IGP;
  if (origin !== 0 && origin !== 1 && origin !== 2) throw new AttrError(`bad ORIGIN ${origin}`);
  const unknown = init.unknown === undefined || init.unknown.length === 0 ? EMPTY
    : from !== undefined && init.unknown === from.rareAttrs.unknown ? init.unknown : init.unknown
    .map((r): RawAttr => {
      if (!Number.isInteger(r.type) || r.type < 0 || r.type > 255) throw new AttrError(`bad attribute type ${r.type}`);
      if (!Number.isInteger(r.flags) || r.flags < 0 || r.flags > 255) throw new AttrError(`bad attribute flags ${r.flags}`);
      return Object.freeze({ flags: r.flags, type: r.type, value: new Uint8Array(r.value) });
    })
    .sort((a, b) => a.type - b.type);
  for (let i = 1; i < unknown.length; i++) {
    if (unknown[i].type === unknown[i - 1].type) throw new AttrError(`attribute type ${unknown[i].type} given twice`);
  }
  const agg = init.aggregator;
  const cs = init.communities;
  const communities = cs === undefined || cs.length === 0 ? EMPTY
    : cs.length === 1 && adopt ? cs
    : adopt && isSortedUnique(cs) ? Object.freeze(cs) : from !== undefined && cs === from.comm ? cs : sortedUnique(cs, 'community');
  let asPath: AsPath;
  if (adopt) asPath = init.asPath ?? EMPTY;
  else if (from !== undefined && init.asPath === from.asPath) {
    asPath = from.asPath;
    facts = from.facts;
  } else if (init.asPath !== undefined && (facts = knownFacts.get(init.asPath)) !== undefined) asPath = init.asPath;
  else asPath = normaliseAsPath(init.asPath ?? EMPTY);
  // Lists still identical to `from`'s are taken as they are (no closures here: build runs once per attribute set).
  const rare = from?.rareAttrs;
  const ext = init.extCommunities;
  const large = init.largeCommunities;
  const clusters = init.clusterList;
  const nextHop = copyIP(init.nextHop, 'next hop');
  const nextHopLinkLocal = copyIP(init.nextHopLinkLocal, 'link-local next hop');
  const med = init.med === undefined ? undefined : u32(init.med, 'MED');
  const localPref = init.localPref === undefined ? undefined : u32(init.localPref, 'LOCAL_PREF');
  const atomicAggregate = init.atomicAggregate === true;
  const aggregator = agg === undefined
    ? undefined
    : Object.freeze({ asn: u32(agg.asn, 'AGGREGATOR ASN'), address: copyIP(agg.address, 'AGGREGATOR address')! });
  const extCommunities = ext !== undefined && ext === rare?.extCommunities ? ext : sortedUniqueTuples(ext ?? EMPTY, 2, 'extended community');
  const largeCommunities = large !== undefined && large === rare?.largeCommunities ? large : sortedUniqueTuples(large ?? EMPTY, 3, 'large community');
  const originatorId = init.originatorId === undefined ? undefined : u32(init.originatorId, 'ORIGINATOR_ID');
  const clusterList = clusters !== undefined && clusters === rare?.clusterList ? clusters
    : clusters?.length ? Object.freeze(clusters.map((c) => u32(c, 'CLUSTER_ID'))) : EMPTY;
  const unknownList = unknown.length ? Object.freeze(unknown) : EMPTY;
  const rareAttrs = !atomicAggregate && aggregator === undefined && extCommunities.length === 0 &&
      largeCommunities.length === 0 && originatorId === undefined && clusterList.length === 0 && unknownList.length === 0
    ? (nextHopLinkLocal === null ? NO_RARE : linkLocalOnly(nextHopLinkLocal))
    : Object.freeze({ nextHopLinkLocal, atomicAggregate, aggregator, extCommunities, largeCommunities, originatorId, clusterList, unknown: unknownList });
  const comm = communities.length === 1 ? communities[0] | 0 : communities;
  const f = facts ?? asPathFacts(asPath);
  const hash = hashAttrs(origin, f, nextHop, med, localPref, comm, rareAttrs);
  const rec = new AttrRecord(hash, origin, asPath, nextHop, med, localPref, comm, rareAttrs, f);
  // A decoded record (adopt) is frozen only if it becomes a held set's record (AttrInterner.keep): the RIB keeps a
  // row, not the record, and freezing was half the cost of building one.
  return adopt ? rec : Object.freeze(rec);
}

/** A copy of `a` with some fields replaced (for import/export policy). Not interned. */
export function withAttrs(a: PathAttrs, changes: AttrsInit): PathAttrs {
  const rest: AttrsInit = {
    origin: a.origin, asPath: a.asPath, nextHop: a.nextHop, nextHopLinkLocal: a.nextHopLinkLocal, med: a.med,
    localPref: a.localPref, atomicAggregate: a.atomicAggregate, aggregator: a.aggregator, communities: a.communities,
    extCommunities: a.extCommunities, largeCommunities: a.largeCommunities, originatorId: a.originatorId,
    clusterList: a.clusterList, unknown: a.unknown,
  };
  // A key given as undefined clears that attribute (e.g. { med: undefined } strips MED).
  const init = { ...rest, ...changes };
  return a instanceof AttrRecord ? build(init, false, undefined, a) : makeAttrs(init);
}

/** One AS_SEQUENCE segment (test and config convenience). */
export function asSequence(...asns: number[]): AsPathSegment {
  return { type: SegmentType.AS_SEQUENCE, asns };
}

/** One AS_SET segment. */
export function asSet(...asns: number[]): AsPathSegment {
  return { type: SegmentType.AS_SET, asns };
}

// ---- hashing and equality -----------------------------------------------------------------------------------

// Multiply-xorshift mixing over 32-bit words (murmur3-style finaliser per step): cheap and spreads small ints.
function mix(h: number, v: number): number {
  let k = Math.imul(v | 0, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function mixIP(h: number, ip: IP | null): number {
  if (ip === null) return mix(h, 0x7fffffff);
  // An IPv4 address's other words are always 0: mixing them in told no two sets apart (a fifth of hashAttrs).
  if (ip.family === 4) return mix(mix(h, 4), ip.w0);
  return mix(mix(mix(mix(mix(h, 6), ip.w0), ip.w1), ip.w2), ip.w3);
}

function mixList(h: number, xs: readonly number[]): number {
  h = mix(h, xs.length);
  for (let i = 0; i < xs.length; i++) h = mix(h, xs[i]);
  return h;
}

function hashAttrs(
  origin: Origin, facts: AsPathFacts, nextHop: IP | null, med: number | undefined, localPref: number | undefined,
  c: number | readonly number[], rare: RareAttrs,
): number {
  let h = mix(0x9747b28c, origin);
  h = mix(h, facts.hash);
  h = mixIP(h, nextHop);
  // Absent and present-with-a-value must hash differently; -1 cannot be a uint32 value.
  h = mix(h, med ?? -1);
  h = mix(h, localPref ?? -1);
  // (As mixList over the list: its length, then each value.)
  h = typeof c === 'number' ? mix(mix(h, 1), c) : mixList(h, c);
  // Records without any rare attribute all share NO_RARE (see AttrRecord), so one constant stands for them all.
  h = mix(h, rare === NO_RARE ? 0x5bd1e995 : rareHash(rare));
  // Final avalanche so that bucket keys use all bits.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  // Signed: a small integer stays unboxed in the record (an unsigned value >= 2^31 would be a heap number).
  return h | 0;
}

// The last rare attributes hashed: records sharing one object (linkLocalOnly) in a row hash it once.
let hashedRare: RareAttrs = NO_RARE;
let hashedRareValue = 0;

function rareHash(a: RareAttrs): number {
  if (a !== hashedRare) {
    hashedRareValue = hashRare(0x1b873593, a);
    hashedRare = a;
  }
  return hashedRareValue;
}

function hashRare(h: number, a: RareAttrs): number {
  h = mixIP(h, a.nextHopLinkLocal);
  h = mix(h, a.atomicAggregate ? 1 : 0);
  h = a.aggregator ? mixIP(mix(h, a.aggregator.asn), a.aggregator.address) : mix(h, -1);
  const ext = a.extCommunities;
  h = mix(h, ext.length);
  for (let i = 0; i < ext.length; i++) h = mix(mix(h, ext[i][0]), ext[i][1]);
  const large = a.largeCommunities;
  h = mix(h, large.length);
  for (let i = 0; i < large.length; i++) h = mix(mix(mix(h, large[i][0]), large[i][1]), large[i][2]);
  h = mix(h, a.originatorId ?? -1);
  h = mixList(h, a.clusterList);
  const unknown = a.unknown;
  h = mix(h, unknown.length);
  for (let i = 0; i < unknown.length; i++) {
    const u = unknown[i];
    h = mix(mix(mix(h, u.type), u.flags), u.value.length);
    for (let j = 0; j < u.value.length; j++) h = mix(h, u.value[j]);
  }
  return h;
}

function listEq(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function ipEq(a: IP | null, b: IP | null): boolean {
  return a === b || (a !== null && b !== null && ipEquals(a, b));
}

export function pathEq(a: AsPath, b: AsPath): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].type !== b[i].type || !listEq(a[i].asns, b[i].asns)) return false;
  return true;
}

export function commEq(x: number | readonly number[], y: number | readonly number[]): boolean {
  if (typeof x === 'number' || typeof y === 'number') return x === y; // one community is always a number
  return listEq(x, y);
}

export function rareEq(a: RareAttrs, b: RareAttrs): boolean {
  if (a === b) return true;
  if (a === NO_RARE || b === NO_RARE) return false; // records without rare attributes all share NO_RARE
  if (
    a.atomicAggregate !== b.atomicAggregate || a.originatorId !== b.originatorId || !ipEq(a.nextHopLinkLocal, b.nextHopLinkLocal) ||
    !listEq(a.clusterList, b.clusterList) || a.extCommunities.length !== b.extCommunities.length ||
    a.largeCommunities.length !== b.largeCommunities.length || a.unknown.length !== b.unknown.length
  ) {
    return false;
  }
  if (a.aggregator !== b.aggregator) {
    if (!a.aggregator || !b.aggregator) return false;
    if (a.aggregator.asn !== b.aggregator.asn || !ipEquals(a.aggregator.address, b.aggregator.address)) return false;
  }
  for (let i = 0; i < a.extCommunities.length; i++) if (!listEq(a.extCommunities[i], b.extCommunities[i])) return false;
  for (let i = 0; i < a.largeCommunities.length; i++) if (!listEq(a.largeCommunities[i], b.largeCommunities[i])) return false;
  for (let i = 0; i < a.unknown.length; i++) {
    const x = a.unknown[i];
    const y = b.unknown[i];
    if (x.type !== y.type || x.flags !== y.flags || x.value.length !== y.value.length) return false;
    for (let j = 0; j < x.value.length; j++) if (x.value[j] !== y.value[j]) return false;
  }
  return true;
}

/** Content equality of two normalised records. */
export function attrsEqual(a: PathAttrs, b: PathAttrs): boolean {
  if (a === b) return true;
  if (a.hash !== b.hash || a.origin !== b.origin || a.med !== b.med || a.localPref !== b.localPref || !ipEq(a.nextHop, b.nextHop)) {
    return false;
  }
  if (a instanceof AttrRecord && b instanceof AttrRecord) {
    return commEq(a.comm, b.comm) && pathEq(a.asPath, b.asPath) && rareEq(a.rareAttrs, b.rareAttrs);
  }
  // (A PathAttrs has every field of RareAttrs.)
  return listEq(a.communities, b.communities) && pathEq(a.asPath, b.asPath) && rareEq(a, b);
}

// ---- helpers ------------------------------------------------------------------------------------------------

/** AS_PATH length for route selection (RFC 4271 9.1.2.2 a): an AS_SET counts 1, confederation segments 0 (RFC 5065). */
export function asPathLength(path: AsPath): number {
  // Indexed loops here and in hashing: these run for every attribute set built, and for-of over the frozen
  // arrays measured several times slower in the ingest path.
  let n = 0;
  for (let i = 0; i < path.length; i++) {
    const seg = path[i];
    if (seg.type === SegmentType.AS_SEQUENCE) n += seg.asns.length;
    else if (seg.type === SegmentType.AS_SET) n += 1;
  }
  return n;
}

/**
 * The neighbour AS used to group paths for MED comparison: the first ASN of the first AS_SEQUENCE (so leading
 * confederation segments are skipped). 0 when there is none, i.e. the route originated inside our own AS;
 * ASN 0 is reserved (RFC 7607) so it cannot clash with a real neighbour.
 */
export function neighbourAs(path: AsPath): number {
  for (let i = 0; i < path.length; i++) if (path[i].type === SegmentType.AS_SEQUENCE) return path[i].asns[0];
  return 0;
}

/** The origin AS: the last ASN of the last segment when that is a sequence, else undefined (aggregated). */
export function originAs(path: AsPath): number | undefined {
  const last = path[path.length - 1];
  if (!last || last.type !== SegmentType.AS_SEQUENCE) return undefined;
  return last.asns[last.asns.length - 1];
}

/** AS_PATH in the usual text form: "65001 65002 {64512 64513} (65010)"; confed sets as "[...]". */
export function formatAsPath(path: AsPath): string {
  return path
    .map((seg) => {
      const s = seg.asns.join(' ');
      switch (seg.type) {
        case SegmentType.AS_SET: return `{${s}}`;
        case SegmentType.AS_CONFED_SEQUENCE: return `(${s})`;
        case SegmentType.AS_CONFED_SET: return `[${s}]`;
        default: return s;
      }
    })
    .join(' ');
}
