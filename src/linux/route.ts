// The kernel route model shared by the Linux desired-state builder, the planner and the ip(8) adapter. Pure.
//
// A route is identified in the kernel by (table, destination, metric) — TOS stays 0 and IPv6 source routing is not
// used — so that triple is the key: `ip route replace` on a key overwrites whatever holds it, whatever its type,
// next hop or protocol. The protocol tag is not part of the key; it is how we tell our routes from everyone else's.
import { type IP, type Prefix, formatIP, formatPrefix, ipEquals } from '../net/ip.ts';

/** Default routing table: a dedicated one, so we never share keys with the main table (254) by default. */
export const DEFAULT_TABLE = 200;
/** Default protocol tag (RTPROT value): 0xb5, unassigned in rtnetlink.h and /etc/iproute2/rt_protos. */
export const DEFAULT_PROTOCOL = 181;

/** The kernel's default metric when none is given: 0 for IPv4, 1024 for IPv6 (ip -j always shows the v6 one). */
export const kernelDefaultMetric = (family: 4 | 6): number => (family === 4 ? 0 : 1024);

export interface Owner {
  /** Routing table id, 1..2^32-1 (not 0, not 255 "local"). */
  table: number;
  /** Protocol tag, 1..255; must not be one the kernel or another daemon uses (2 kernel, 3 boot, 12 bird, 186 bgp...). */
  protocol: number;
}

/**
 * One route. `kind`: blackhole (own blocks), via (a next hop), or other (anything else found in the table:
 * unreachable, device routes, multipath, nexthop objects — never desired, replaced or deleted when ours).
 */
export interface KernelRoute {
  dst: Prefix;
  metric: number;
  kind: 'blackhole' | 'via' | 'other';
  /** The next hop (kind via); may be of the other family (IPv4 over an IPv6 next hop, RFC 8950). */
  via?: IP;
  /** Desired: the device to pin (absent = let the kernel resolve it). Actual: the device the kernel reports. */
  dev?: string;
  onlink: boolean;
  table: number;
  protocol: number;
  /** For kind other: a short description for status output. */
  note?: string;
}

export type RouteKey = number | string;

/**
 * The kernel's identity of a route within a table, as a map key. IPv4 with a metric below 2^15 (every real case)
 * packs into one exact number below 2^53: number keys hash without building and flattening a string, which is
 * most of a 100k-route plan's time. Everything else is a string.
 */
export function routeKey(r: { dst: Prefix; metric: number }): RouteKey {
  const d = r.dst;
  if (d.family === 4) {
    return r.metric < 32768 ? (d.w0 * 64 + d.len) * 32768 + r.metric : `${d.w0}/${d.len}/${r.metric}`;
  }
  return `${d.w0}:${d.w1}:${d.w2}:${d.w3}/${d.len}/${r.metric}`;
}

/** routeKey for people: "10.0.0.0/26 metric 0". */
export const routeKeyText = (r: { dst: Prefix; metric: number }): string => `${formatPrefix(r.dst)} metric ${r.metric}`;

export const isOurs = (r: KernelRoute, o: Owner): boolean => r.table === o.table && r.protocol === o.protocol;

/**
 * Whether the actual route already is the desired one. A desired route without a device accepts whatever device
 * the kernel resolved; a blackhole's device (IPv6 reports "lo") is meaningless.
 */
export function routeSatisfies(actual: KernelRoute, desired: KernelRoute): boolean {
  if (actual.kind !== desired.kind || actual.metric !== desired.metric) return false;
  if (desired.kind === 'blackhole') return true;
  if (desired.kind !== 'via') return false;
  if (!actual.via || !desired.via || !ipEquals(actual.via, desired.via)) return false;
  if (desired.dev !== undefined && actual.dev !== desired.dev) return false;
  return actual.onlink === desired.onlink;
}

// ---- ip(8) batch lines --------------------------------------------------------------------------------------

// Interface names end up in `ip -batch` lines, which ip splits on blanks and where '#' starts a comment and quotes
// group words: refuse anything that could change the line's meaning (IFNAMSIZ is 16 including the NUL).
const DEV_RE = /^[A-Za-z0-9_.:@+-]{1,15}$/;
export const validDevName = (s: string): boolean => DEV_RE.test(s) && s !== '.' && s !== '..';

function viaText(dst: Prefix, via: IP): string {
  if (via.family === dst.family) return `via ${formatIP(via)}`;
  return `via ${via.family === 4 ? 'inet' : 'inet6'} ${formatIP(via)}`;
}

/** The `ip -batch` line (without the leading "ip") that installs `r` with add or replace. */
export function routeSetLine(verb: 'add' | 'replace', r: KernelRoute): string {
  const parts = ['route', verb];
  if (r.kind === 'blackhole') parts.push('blackhole', formatPrefix(r.dst));
  else if (r.kind === 'via' && r.via) {
    parts.push(formatPrefix(r.dst), viaText(r.dst, r.via));
    if (r.dev !== undefined) parts.push('dev', r.dev);
    if (r.onlink) parts.push('onlink');
  } else throw new Error(`cannot install route ${routeKeyText(r)} of kind ${r.kind}`);
  parts.push('table', String(r.table), 'proto', String(r.protocol), 'metric', String(r.metric));
  return parts.join(' ');
}

/**
 * The line that deletes our route at r's key. The proto selector makes the kernel refuse (ESRCH) to delete a route
 * with another protocol at the same key, so a delete can never take someone else's route.
 */
export function routeDelLine(r: KernelRoute): string {
  return `route del ${formatPrefix(r.dst)} table ${r.table} proto ${r.protocol} metric ${r.metric}`;
}

/** Human text of a route, as ip(8) would print it (for status and error reports). */
export function describeRoute(r: KernelRoute): string {
  let s = r.kind === 'blackhole' ? `blackhole ${formatPrefix(r.dst)}` : formatPrefix(r.dst);
  if (r.kind === 'via' && r.via) s += ` ${viaText(r.dst, r.via)}`;
  if (r.kind === 'other' && r.note) s += ` (${r.note})`;
  if (r.dev !== undefined && r.kind !== 'blackhole') s += ` dev ${r.dev}`;
  if (r.onlink) s += ' onlink';
  return `${s} table ${r.table} proto ${r.protocol} metric ${r.metric}`;
}
