// The path attributes of an UPDATE, one by one (RFC 4271 4.3, RFC 4760 MP_REACH/MP_UNREACH, RFC 6793 AS4_PATH),
// each problem classified as RFC 7606 says. Its own file: the per-attribute half of the UPDATE decoder (decode.ts
// walks the message and calls decodeAttr for every attribute of every UPDATE).
import { IP } from '../../net/ip.ts';
import { normaliseAsPath, SegmentType, type AsPath, type AsPathSegment, type ExtCommunity, type LargeCommunity, type Origin } from '../../rib/attrs.ts';
import { ErrorCode, UpdateSubcode } from './errors.ts';
import { Afi, AttrFlag, AttrType, ATTR_FLAGS, ATTR_NAMES, Safi, type MpReach, type MpUnreach } from './messages.ts';
import { hashBytes } from './aspaths.ts';
import { readPrefixes4, readPrefixes6 } from './nlri.ts';
import { R4, R6, U4, U6, newList, updateError, type DecodeScratch, type UpdateParse } from './decode-state.ts';
import { copy, ipv6At, u16, u32 } from './wire.ts';

const O = AttrFlag.OPTIONAL;
const T = AttrFlag.TRANSITIVE;

// Expected Optional/Transitive bits per recognised attribute, -1 for the others.
const EXPECTED_FLAGS = new Int16Array(256).fill(-1);
for (const [type, f] of Object.entries(ATTR_FLAGS)) EXPECTED_FLAGS[Number(type)] = f;

// Attributes whose errors are handled by attribute discard rather than treat-as-withdraw (RFC 7606 3 f, 7.6, 7.7 for
// ATOMIC_AGGREGATE and AGGREGATOR, RFC 6793 6 for AS4_PATH and AS4_AGGREGATOR).
const DISCARD_ON_ERROR = new Uint8Array(256); // by type code: a table, read for every attribute
for (const t of [AttrType.ATOMIC_AGGREGATE, AttrType.AGGREGATOR, AttrType.AS4_PATH, AttrType.AS4_AGGREGATOR]) DISCARD_ON_ERROR[t] = 1;

const isConfed = (t: number) => t === SegmentType.AS_CONFED_SEQUENCE || t === SegmentType.AS_CONFED_SET;

/**
 * Parse AS_PATH / AS4_PATH segments (RFC 4271 4.3, RFC 6793). Returns an error reason for a malformed path as
 * defined by RFC 7606 7.2 (unknown segment type, overrun, lone trailing octet, empty segment) or AS 0 (RFC 7607).
 */
function parseAsPath(buf: Uint8Array, p: number, end: number, asnSize: 2 | 4, out: AsPathSegment[]): string | null {
  while (p < end) {
    if (end - p < 2) return 'a lone octet after the last segment';
    const type = buf[p];
    const n = buf[p + 1];
    if (type < 1 || type > 4) return `unknown segment type ${type}`;
    if (n === 0) return 'empty segment';
    const q = p + 2;
    if (q + n * asnSize > end) return 'segment overruns the attribute';
    const asns: number[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const a = asnSize === 4 ? u32(buf, q + 4 * i) : u16(buf, q + 2 * i);
      if (a === 0) return 'AS 0 in the path';
      asns[i] = a;
    }
    out.push({ type: type as SegmentType, asns });
    p = q + n * asnSize;
  }
  return null;
}

/** Number of ASNs in a path for RFC 6793 4.2.3: an AS_SET counts 1, confederation segments 0. */
function countAsns(path: AsPath): number {
  let n = 0;
  for (const s of path) n += s.type === SegmentType.AS_SEQUENCE ? s.asns.length : s.type === SegmentType.AS_SET ? 1 : 0;
  return n;
}

/**
 * RFC 6793 4.2.3: the AS path a 2-octet-AS session really meant. When AS_PATH holds fewer ASNs than AS4_PATH,
 * AS4_PATH is ignored; else the leading (AS_PATH count - AS4_PATH count) ASNs of AS_PATH, kept in their
 * segments, are prepended to AS4_PATH. AS4_PATH never carries confederation segments, so the leading ones of
 * AS_PATH are kept; any others (RFC 5065 puts them only at the front) are dropped.
 */
export function reconstructAsPath(asPath: AsPath, as4Path: AsPath): AsPath {
  const n = countAsns(asPath);
  const m = countAsns(as4Path);
  if (n < m) return asPath;
  let take = n - m;
  const out: AsPathSegment[] = [];
  let i = 0;
  while (i < asPath.length && isConfed(asPath[i].type)) out.push(asPath[i++]);
  for (; i < asPath.length && take > 0; i++) {
    const seg = asPath[i];
    if (isConfed(seg.type)) continue;
    if (seg.type === SegmentType.AS_SET) {
      out.push(seg);
      take -= 1;
    } else {
      const k = Math.min(take, seg.asns.length);
      out.push({ type: seg.type, asns: seg.asns.slice(0, k) });
      take -= k;
    }
  }
  return [...out, ...as4Path];
}

// A NEXT_HOP that can never be a host's address (RFC 4271 6.3 "syntactically incorrect"): 0.0.0.0, multicast,
// limited broadcast.
function badNextHop4(w: number): boolean {
  return w === 0 || w >>> 28 === 0xe || w === 0xffffffff;
}

/** The IPv4 address at b[p], sharing the scratch's last one when equal (IP objects are immutable). */
function ipv4Shared(b: Uint8Array, p: number, scratch: DecodeScratch | undefined): IP {
  const w = u32(b, p);
  if (scratch === undefined) return new IP(4, w);
  const last = scratch.nh4;
  if (last !== null && last.w0 === w) return last;
  return (scratch.nh4 = new IP(4, w));
}

function ipv6Shared(b: Uint8Array, p: number, scratch: DecodeScratch | undefined, linkLocal: boolean): IP {
  if (scratch === undefined) return ipv6At(b, p);
  const last = linkLocal ? scratch.ll6 : scratch.nh6;
  if (last !== null && last.w0 === u32(b, p) && last.w1 === u32(b, p + 4) && last.w2 === u32(b, p + 8) && last.w3 === u32(b, p + 12)) {
    return last;
  }
  const ip = ipv6At(b, p);
  if (linkLocal) scratch.ll6 = ip;
  else scratch.nh6 = ip;
  return ip;
}

// No closures in here: this runs for every attribute of every UPDATE.
export function decodeAttr(st: UpdateParse, flags: number, type: number, vs: number, ve: number): void {
  const buf = st.buf;
  const opts = st.opts;
  const alen = ve - vs;
  const expected = EXPECTED_FLAGS[type];
  const isMp = type === AttrType.MP_REACH_NLRI || type === AttrType.MP_UNREACH_NLRI;
  if (!isMp) st.otherAttrs++;

  if (expected < 0) {
    // Unrecognised attribute (RFC 4271 5, 6.3).
    if ((flags & O) === 0) {
      throw updateError(UpdateSubcode.UNRECOGNIZED_WELL_KNOWN, `unrecognised well-known attribute ${type}`, st.attrData());
    }
    if ((flags & T) !== 0) {
      // Passed on with the Partial bit set; the extended length bit is the encoder's business.
      (st.init.unknown ??= []).push({ flags: (flags & 0xe0) | AttrFlag.PARTIAL, type, value: buf.subarray(vs, ve) }); // makeAttrs copies
    }
    return; // optional non-transitive: quietly ignored
  }
  const action: 'discard' | 'withdraw' = DISCARD_ON_ERROR[type] === 1 ? 'discard' : 'withdraw';
  if ((flags & (O | T)) !== expected) {
    // RFC 7606 3 c: conflicting Optional/Transitive bits make the attribute malformed (treat-as-withdraw, or
    // discard for the attributes whose malformation is discarded). MP attributes are still parsed, so their
    // prefixes can be withdrawn.
    st.problem(type, action, `${ATTR_NAMES[type]} has flags 0x${flags.toString(16)}`, ErrorCode.UPDATE, UpdateSubcode.ATTRIBUTE_FLAGS, st.attrData());
    if (!isMp) return;
  }
  // Number literals (each checked against its AttrType name by the compiler): V8 then switches by a jump table that
  // needs no type feedback. With `case AttrType.X` every label was a property load, and the first UPDATE to reach
  // a label past the ones seen so far (MP_REACH_NLRI, after the classic attributes) made V8 recompile this function.
  switch (type) {
    case 1 satisfies typeof AttrType.ORIGIN: // RFC 7606 7.1
      if (alen !== 1) return st.lengthError(type, action, `length ${alen}`);
      if (buf[vs] > 2) {
        return st.problem(type, 'withdraw', `undefined ORIGIN ${buf[vs]}`, ErrorCode.UPDATE, UpdateSubcode.INVALID_ORIGIN, st.attrData());
      }
      st.init.origin = buf[vs] as Origin;
      st.hasOrigin = true;
      return;
    case 2 satisfies typeof AttrType.AS_PATH: { // RFC 7606 7.2
      const four = opts.fourOctetAs !== false;
      const cache = four ? opts.scratch?.asPaths : undefined;
      if (cache !== undefined) {
        const h = hashBytes(buf, vs, ve);
        let k = cache.find(buf, vs, ve, h);
        if (k < 0) {
          const segs: AsPathSegment[] = [];
          const err = parseAsPath(buf, vs, ve, 4, segs);
          if (err) return st.problem(type, 'withdraw', `malformed AS_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
          k = cache.add(buf, vs, ve, h, normaliseAsPath(segs, true));
        }
        if (opts.external && cache.confed(k)) return confedFromExternal(st);
        st.asPath = cache.path(k);
        st.asPathFacts = cache.factsOf(k);
        return;
      }
      const segs: AsPathSegment[] = [];
      const err = parseAsPath(buf, vs, ve, four ? 4 : 2, segs);
      if (err) return st.problem(type, 'withdraw', `malformed AS_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
      if (opts.external && hasConfed(segs)) return confedFromExternal(st);
      // A 2-octet session's path may still be rebuilt from AS4_PATH: normalised after that.
      st.asPath = four ? normaliseAsPath(segs, true) : segs;
      return;
    }
    case 3 satisfies typeof AttrType.NEXT_HOP: // RFC 7606 7.3
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.nextHop = ipv4Shared(buf, vs, opts.scratch);
      st.nextHopInvalid = badNextHop4(st.nextHop.w0);
      return;
    case 4 satisfies typeof AttrType.MULTI_EXIT_DISC: // RFC 7606 7.4
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.med = u32(buf, vs);
      return;
    case 5 satisfies typeof AttrType.LOCAL_PREF: // RFC 7606 7.5
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.localPref = u32(buf, vs);
      return;
    case 6 satisfies typeof AttrType.ATOMIC_AGGREGATE: // RFC 7606 7.6
      if (alen !== 0) return st.lengthError(type, action, `length ${alen}`);
      st.init.atomicAggregate = true;
      return;
    case 7 satisfies typeof AttrType.AGGREGATOR: { // RFC 7606 7.7
      const four = opts.fourOctetAs !== false;
      if (alen !== (four ? 8 : 6)) return st.lengthError(type, action, `length ${alen} in a ${four ? '4' : '2'}-octet AS session`);
      const asn = four ? u32(buf, vs) : u16(buf, vs);
      if (asn === 0) return st.problem(type, 'discard', 'AGGREGATOR AS 0'); // RFC 7607 2
      st.aggregator = { asn, address: new IP(4, u32(buf, vs + (four ? 4 : 2))) };
      return;
    }
    case 8 satisfies typeof AttrType.COMMUNITIES: { // RFC 7606 7.8
      if (alen === 0 || alen % 4 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 4`);
      const cs: number[] = alen === 4 && opts.scratch !== undefined ? opts.scratch.oneCommunity : new Array(alen / 4);
      for (let i = 0; i < cs.length; i++) cs[i] = u32(buf, vs + 4 * i);
      st.init.communities = cs;
      return;
    }
    case 9 satisfies typeof AttrType.ORIGINATOR_ID: // RFC 7606 7.9
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen !== 4) return st.lengthError(type, action, `length ${alen}`);
      st.init.originatorId = u32(buf, vs);
      return;
    case 10 satisfies typeof AttrType.CLUSTER_LIST: { // RFC 7606 7.10
      if (opts.external) return st.problem(type, 'discard', `${ATTR_NAMES[type]} from an external peer`);
      if (alen === 0 || alen % 4 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 4`);
      const ids: number[] = new Array(alen / 4);
      for (let i = 0; i < ids.length; i++) ids[i] = u32(buf, vs + 4 * i);
      st.init.clusterList = ids;
      return;
    }
    case 14 satisfies typeof AttrType.MP_REACH_NLRI:
      st.mpReach = decodeMpReach(st, vs, ve);
      return;
    case 15 satisfies typeof AttrType.MP_UNREACH_NLRI:
      st.mpUnreach = decodeMpUnreach(st, vs, ve);
      return;
    case 16 satisfies typeof AttrType.EXTENDED_COMMUNITIES: { // RFC 7606 7.14
      if (alen === 0 || alen % 8 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 8`);
      const xs: ExtCommunity[] = new Array(alen / 8);
      for (let i = 0; i < xs.length; i++) xs[i] = [u32(buf, vs + 8 * i), u32(buf, vs + 8 * i + 4)];
      st.init.extCommunities = xs;
      return;
    }
    case 32 satisfies typeof AttrType.LARGE_COMMUNITY: { // RFC 8092 6
      if (alen === 0 || alen % 12 !== 0) return st.lengthError(type, action, `length ${alen} is not a non-zero multiple of 12`);
      const ls: LargeCommunity[] = new Array(alen / 12);
      for (let i = 0; i < ls.length; i++) {
        const b = vs + 12 * i;
        ls[i] = [u32(buf, b), u32(buf, b + 4), u32(buf, b + 8)];
      }
      st.init.largeCommunities = ls;
      return;
    }
    case 17 satisfies typeof AttrType.AS4_PATH: { // RFC 6793 6: malformed AS4_PATH is attribute discard
      if (opts.fourOctetAs !== false) return st.problem(type, 'discard', 'AS4_PATH from a 4-octet AS speaker'); // RFC 6793 4.1
      const segs: AsPathSegment[] = [];
      const err = parseAsPath(buf, vs, ve, 4, segs);
      if (err) return st.problem(type, 'discard', `malformed AS4_PATH: ${err}`, ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      if (hasConfed(segs)) {
        return st.problem(type, 'discard', 'AS4_PATH carries confederation segments', ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      }
      st.as4Path = segs;
      return;
    }
    case 18 satisfies typeof AttrType.AS4_AGGREGATOR: { // RFC 6793 6
      if (opts.fourOctetAs !== false) return st.problem(type, 'discard', 'AS4_AGGREGATOR from a 4-octet AS speaker');
      if (alen !== 8) return st.problem(type, 'discard', `AS4_AGGREGATOR length ${alen}`, ErrorCode.UPDATE, UpdateSubcode.OPTIONAL_ATTRIBUTE, st.attrData());
      const asn = u32(buf, vs);
      if (asn === 0) return st.problem(type, 'discard', 'AS4_AGGREGATOR AS 0'); // RFC 7607 2
      st.as4Aggregator = { asn, address: new IP(4, u32(buf, vs + 4)) };
      return;
    }
  }
}

/**
 * RFC 5065 5 and RFC 7606 7.2: AS_CONFED_SEQUENCE/AS_CONFED_SET in an AS_PATH from a peer outside the
 * confederation make the AS_PATH malformed: treat-as-withdraw.
 */
function confedFromExternal(st: UpdateParse): void {
  st.problem(AttrType.AS_PATH, 'withdraw', 'AS_PATH from an external peer carries confederation segments', ErrorCode.UPDATE, UpdateSubcode.MALFORMED_AS_PATH);
}

function hasConfed(segs: readonly AsPathSegment[]): boolean {
  for (const g of segs) if (isConfed(g.type)) return true;
  return false;
}

function decodeMpReach(st: UpdateParse, vs: number, ve: number): MpReach {
  const { buf, opts } = st;
  if (ve - vs < 5) throw st.mpError('MP_REACH_NLRI too short');
  const afi = u16(buf, vs);
  const safi = buf[vs + 2];
  const nhl = buf[vs + 3];
  const nh = vs + 4;
  const ns = nh + nhl + 1; // after the reserved octet
  if (ns > ve) throw st.mpError(`MP_REACH_NLRI next hop length ${nhl} overruns the attribute`);
  const v4 = afi === Afi.IPV4 && safi === Safi.UNICAST;
  const v6 = afi === Afi.IPV6 && safi === Safi.UNICAST;
  if (!v4 && !v6) {
    return { afi, safi, nextHop: null, nextHopLinkLocal: null, nlri: newList(opts, R4, 4, 0), raw: copy(buf, vs + 3, ve) };
  }
  let nextHop: IP;
  let linkLocal: IP | null = null;
  if (nhl === 4 && v4) nextHop = ipv4Shared(buf, nh, opts.scratch);
  // IPv6 global (+ link-local) next hop (RFC 2545 3); for IPv4 NLRI this is RFC 8950.
  else if (nhl === 16 || nhl === 32) {
    nextHop = ipv6Shared(buf, nh, opts.scratch, false);
    // The same object every time, so records' rare attributes can be one shared object too (attrs.ts).
    if (nhl === 32) linkLocal = ipv6Shared(buf, nh + 16, opts.scratch, true);
  } else {
    throw st.mpError(`MP_REACH_NLRI next hop length ${nhl} for AFI ${afi}`);
  }
  const nlri = v4 ? newList(opts, R4, 4, ve - ns) : newList(opts, R6, 6, ve - ns);
  const ok = v4 ? readPrefixes4(buf, ns, ve, nlri) : readPrefixes6(buf, ns, ve, nlri);
  if (!ok) throw st.mpError('malformed NLRI in MP_REACH_NLRI');
  return { afi, safi, nextHop, nextHopLinkLocal: linkLocal, nlri };
}

function decodeMpUnreach(st: UpdateParse, vs: number, ve: number): MpUnreach {
  const { buf, opts } = st;
  if (ve - vs < 3) throw st.mpError('MP_UNREACH_NLRI too short');
  const afi = u16(buf, vs);
  const safi = buf[vs + 2];
  const v4 = afi === Afi.IPV4 && safi === Safi.UNICAST;
  const v6 = afi === Afi.IPV6 && safi === Safi.UNICAST;
  if (!v4 && !v6) return { afi, safi, withdrawn: newList(opts, U4, 4, 0), raw: copy(buf, vs + 3, ve) };
  const list = v4 ? newList(opts, U4, 4, ve - vs - 3) : newList(opts, U6, 6, ve - vs - 3);
  const ok = v4 ? readPrefixes4(buf, vs + 3, ve, list) : readPrefixes6(buf, vs + 3, ve, list);
  if (!ok) throw st.mpError('malformed withdrawn routes in MP_UNREACH_NLRI');
  return { afi, safi, withdrawn: list };
}
