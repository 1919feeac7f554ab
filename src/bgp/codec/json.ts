// A JSON view of decoded messages (for `blockspeaker bgp decode` and logs): prefixes and addresses as strings,
// attributes by their RFC names. Not for the hot path.
import { formatIP, IP } from '../../net/ip.ts';
import { formatAsPath, type PathAttrs } from '../../rib/attrs.ts';
import type { PrefixList } from '../../rib/prefixlist.ts';
import { decodeMessage, type DecodeResult } from './decode.ts';
import type { DecodeOptions } from './decode-state.ts';
import { errorCodeName, errorSubcodeName, shutdownMessage } from './errors.ts';
import { Framer } from './framer.ts';
import { endOfRib, type Capability, type Message, type UpdateMessage } from './messages.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json | undefined };

const AFI_NAMES: Record<number, string> = { 1: 'ipv4', 2: 'ipv6' };
const SAFI_NAMES: Record<number, string> = { 1: 'unicast', 2: 'multicast' };
const ORIGIN_NAMES = ['IGP', 'EGP', 'INCOMPLETE'];

export const afiName = (afi: number): string => AFI_NAMES[afi] ?? `afi-${afi}`;
export const safiName = (safi: number): string => SAFI_NAMES[safi] ?? `safi-${safi}`;
const family = (afi: number, safi: number) => `${afiName(afi)}/${safiName(safi)}`;

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
const ipv4 = (n: number): string => formatIP(new IP(4, n));

function prefixes(l: PrefixList): string[] {
  const out: string[] = new Array(l.count);
  for (let i = 0; i < l.count; i++) out[i] = l.format(i);
  return out;
}

/** RFC 4360 / 5668 forms for the common transitive types (route target, route origin), else hex. */
function extCommunity(hi: number, lo: number): string {
  const type = hi >>> 24;
  const sub = (hi >>> 16) & 0xff;
  const name = sub === 2 ? 'rt' : sub === 3 ? 'ro' : null;
  if (name !== null) {
    if (type === 0x00) return `${name}:${hi & 0xffff}:${lo >>> 0}`;
    if (type === 0x01) return `${name}:${ipv4((((hi & 0xffff) << 16) | (lo >>> 16)) >>> 0)}:${lo & 0xffff}`;
    if (type === 0x02) return `${name}:${(((hi & 0xffff) << 16) | (lo >>> 16)) >>> 0}:${lo & 0xffff}`;
  }
  return `0x${(hi >>> 0).toString(16).padStart(8, '0')}${(lo >>> 0).toString(16).padStart(8, '0')}`;
}

export function describeAttrs(a: PathAttrs, withNextHop: boolean): { [k: string]: Json | undefined } {
  const o: { [k: string]: Json | undefined } = {
    ORIGIN: ORIGIN_NAMES[a.origin],
    AS_PATH: formatAsPath(a.asPath),
  };
  if (withNextHop && a.nextHop) o.NEXT_HOP = formatIP(a.nextHop);
  if (a.med !== undefined) o.MULTI_EXIT_DISC = a.med;
  if (a.localPref !== undefined) o.LOCAL_PREF = a.localPref;
  if (a.atomicAggregate) o.ATOMIC_AGGREGATE = true;
  if (a.aggregator) o.AGGREGATOR = { asn: a.aggregator.asn, address: formatIP(a.aggregator.address) };
  if (a.communities.length) o.COMMUNITIES = a.communities.map((c) => `${c >>> 16}:${c & 0xffff}`);
  if (a.originatorId !== undefined) o.ORIGINATOR_ID = ipv4(a.originatorId);
  if (a.clusterList.length) o.CLUSTER_LIST = a.clusterList.map(ipv4);
  if (a.extCommunities.length) o.EXTENDED_COMMUNITIES = a.extCommunities.map(([hi, lo]) => extCommunity(hi, lo));
  if (a.largeCommunities.length) o.LARGE_COMMUNITY = a.largeCommunities.map((l) => l.join(':'));
  if (a.unknown.length) {
    o.unknown = a.unknown.map((u) => ({ type: u.type, flags: `0x${u.flags.toString(16)}`, value: hex(u.value) }));
  }
  return o;
}

function describeCap(c: Capability): Json {
  switch (c.kind) {
    case 'multiprotocol': return { capability: 'multiprotocol', family: family(c.afi, c.safi) };
    case 'route-refresh': return { capability: 'route-refresh' };
    case 'extended-message': return { capability: 'extended-message' };
    case 'four-octet-as': return { capability: 'four-octet-as', asn: c.asn };
    case 'graceful-restart':
      return {
        capability: 'graceful-restart',
        restarting: c.restarting,
        notification: c.notification,
        restartTime: c.restartTime,
        families: c.families.map((f) => ({ family: family(f.afi, f.safi), forwarding: f.forwarding })),
      };
    default: return { capability: 'unknown', code: c.code, value: hex(c.value) };
  }
}

function describeUpdate(u: UpdateMessage, withdrawOnly = false): { [k: string]: Json | undefined } {
  const o: { [k: string]: Json | undefined } = { type: 'UPDATE' };
  const eor = endOfRib(u);
  if (eor) o.endOfRib = family(eor.afi, eor.safi);
  if (u.withdrawn.count) o.withdrawn = prefixes(u.withdrawn);
  if (u.attrs && !withdrawOnly) o.attributes = describeAttrs(u.attrs, u.mpReach === null || u.nlri.count > 0);
  if (u.mpReach) {
    const m = u.mpReach;
    o.MP_REACH_NLRI = {
      family: family(m.afi, m.safi),
      nextHop: m.nextHop ? formatIP(m.nextHop) : undefined,
      nextHopLinkLocal: m.nextHopLinkLocal ? formatIP(m.nextHopLinkLocal) : undefined,
      nlri: prefixes(m.nlri),
      raw: m.raw ? hex(m.raw) : undefined,
    };
  }
  if (u.mpUnreach) {
    const m = u.mpUnreach;
    o.MP_UNREACH_NLRI = { family: family(m.afi, m.safi), withdrawn: prefixes(m.withdrawn), raw: m.raw ? hex(m.raw) : undefined };
  }
  if (u.nlri.count) o.nlri = prefixes(u.nlri);
  return o;
}

/** A decoded message as plain JSON. */
export function describeMessage(m: Message): Json {
  switch (m.type) {
    case 'open':
      return {
        type: 'OPEN',
        version: m.version,
        myAs: m.myAs,
        holdTime: m.holdTime,
        bgpId: ipv4(m.bgpId),
        capabilities: m.capabilities.map(describeCap),
      };
    case 'update': return describeUpdate(m);
    case 'notification':
      return {
        type: 'NOTIFICATION',
        code: m.code,
        subcode: m.subcode,
        error: `${errorCodeName(m.code)} / ${errorSubcodeName(m.code, m.subcode)}`,
        data: hex(m.data),
        shutdownMessage: shutdownMessage(m),
      };
    case 'keepalive': return { type: 'KEEPALIVE' };
    case 'route-refresh': return { type: 'ROUTE-REFRESH', family: family(m.afi, m.safi), subtype: m.subtype };
  }
}

/** A decode result as plain JSON: the message, or the action with its reasons. */
export function describeResult(r: DecodeResult): Json {
  switch (r.action) {
    case 'ok': return { action: 'ok', message: describeMessage(r.message) };
    case 'notification':
      return {
        action: 'notification',
        code: r.code,
        subcode: r.subcode,
        error: `${errorCodeName(r.code)} / ${errorSubcodeName(r.code, r.subcode)}`,
        data: hex(r.data),
        reason: r.reason,
      };
    default:
      return {
        action: r.action,
        message: describeUpdate(r.message, r.action === 'treat-as-withdraw'),
        problems: r.problems.map((p) => ({
          attribute: p.attrType,
          action: p.action,
          reason: p.reason,
          error: p.code === undefined ? undefined : `${errorCodeName(p.code)} / ${errorSubcodeName(p.code, p.subcode!)}`,
        })),
      };
  }
}

/** Octets from hex text: whitespace, ':' and '0x' prefixes are ignored. Throws on anything else. */
export function parseHex(text: string): Buffer {
  const clean = text.replace(/0x/gi, '').replace(/[\s:]/g, '');
  if (!/^[0-9a-fA-F]*$/.test(clean) || clean.length % 2 !== 0) throw new Error('not a hex string');
  return Buffer.from(clean, 'hex');
}

/** Frame and decode every message in `bytes` and describe each; stops at a header error (described too). */
export function describeStream(bytes: Uint8Array, opts: DecodeOptions = {}): Json[] {
  const out: Json[] = [];
  const framer = new Framer(opts);
  const err = framer.push(bytes, (m) => out.push(describeResult(decodeMessage(m, opts))));
  if (err) out.push(describeResult(err));
  else if (framer.buffered > 0) out.push({ action: 'truncated', octets: framer.buffered });
  return out;
}
