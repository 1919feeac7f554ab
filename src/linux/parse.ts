// Parsing `ip -N -j route show table T` output into KernelRoutes. Pure.
//
// Shapes seen from iproute2 6.1 (with -N, types, protocols and scopes are numbers):
//   {"type":"6","dst":"10.0.0.0/26","protocol":"181","flags":[]}                        blackhole
//   {"dst":"10.5.5.5","gateway":"192.0.2.9","dev":"d0","protocol":"186","flags":[]}       host route: no "/32"
//   {"dst":"default","gateway":"192.0.2.9",...}                                           0.0.0.0/0 or ::/0
//   {"dst":"10.0.4.0/24","via":{"family":"inet6","host":"2001:db8::9"},"dev":"d0",...}    RFC 8950 next hop
//   {"dst":"fd00:1::/64","gateway":"2001:db8::9","dev":"d0","metric":1024,"flags":["onlink"],"pref":"medium"}
// "metric" is omitted for IPv4 metric 0; "table" is omitted when the listing was filtered by table.
import { type Family, IP, Prefix, hostPrefix, parseIP, parsePrefix, wordMask } from '../net/ip.ts';
import { type KernelRoute, kernelDefaultMetric } from './route.ts';

interface IpJsonRoute {
  type?: string;
  dst?: string;
  gateway?: string;
  via?: { family?: string; host?: string };
  dev?: string;
  protocol?: string | number;
  metric?: number;
  flags?: string[];
  nexthops?: unknown[];
  nhid?: number;
  table?: string | number;
}

// Names ip prints without -N (kept so output captured without it still parses); anything else unknown is foreign.
const PROTO_NAMES: Record<string, number> = {
  unspec: 0, redirect: 1, kernel: 2, boot: 3, static: 4, gated: 8, ra: 9, mrt: 10, zebra: 11, bird: 12,
  dnrouted: 13, xorp: 14, ntk: 15, dhcp: 16, keepalived: 18, babel: 42, openr: 99, bgp: 186, isis: 187, ospf: 188,
  rip: 189, eigrp: 192,
};
const TYPE_NAMES: Record<string, string> = {
  '1': 'unicast', '2': 'local', '3': 'broadcast', '4': 'anycast', '5': 'multicast', '6': 'blackhole',
  '7': 'unreachable', '8': 'prohibit', '9': 'throw', '10': 'nat',
};

function protocolNumber(p: string | number | undefined): number {
  if (p === undefined) return 0;
  if (typeof p === 'number') return p;
  if (/^\d+$/.test(p)) return Number(p);
  return PROTO_NAMES[p] ?? -1;
}

// A full table read is ~100k entries: plain dotted quads skip ipaddr.js (most of the parse time); anything else,
// and anything odd, takes the general path, which also produces the error messages.
const QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/;

function fastV4(s: string): { w: number; len: number } | null {
  const m = QUAD.exec(s);
  if (!m) return null;
  const a = +m[1], b = +m[2], c = +m[3], d = +m[4];
  const len = m[5] === undefined ? 32 : +m[5];
  if (a > 255 || b > 255 || c > 255 || d > 255 || len > 32) return null;
  const w = ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
  if (((w & wordMask(len, 0)) >>> 0) !== w) return null;
  return { w, len };
}

function parseDst(dst: string | undefined, family: Family): Prefix {
  if (dst === undefined || dst === 'default') return parsePrefix(family === 4 ? '0.0.0.0/0' : '::/0');
  const f = family === 4 ? fastV4(dst) : null;
  if (f) return new Prefix(4, f.w, 0, 0, 0, f.len);
  return dst.includes('/') ? parsePrefix(dst) : hostPrefix(parseIP(dst));
}

/** Next hops repeat (a few peers for the whole table): parse each text once per listing. */
function gatewayParser(): (s: string) => IP {
  const cache = new Map<string, IP>();
  return (s) => {
    let a = cache.get(s);
    if (!a) cache.set(s, (a = parseIP(s)));
    return a;
  };
}

export interface ParsedRoutes {
  routes: KernelRoute[];
  /** Entries that could not be understood (kept out of the result; they are never ours to touch blindly). */
  unparsed: { entry: unknown; error: string }[];
}

/** Parse one `ip -j route show table T` listing of one family. */
export function parseIpRouteJson(text: string, family: Family, table: number): ParsedRoutes {
  const trimmed = text.trim();
  const data: unknown = trimmed === '' ? [] : JSON.parse(trimmed);
  if (!Array.isArray(data)) throw new Error('ip -j route show: expected a JSON array');
  const routes: KernelRoute[] = [];
  const unparsed: ParsedRoutes['unparsed'] = [];
  const gw = gatewayParser();
  for (const e of data as IpJsonRoute[]) {
    try {
      routes.push(parseEntry(e, family, table, gw));
    } catch (err) {
      unparsed.push({ entry: e, error: (err as Error).message });
    }
  }
  return { routes, unparsed };
}

function parseEntry(e: IpJsonRoute, family: Family, table: number, gw: (s: string) => IP): KernelRoute {
  const dst = parseDst(e.dst, family);
  if (dst.family !== family) throw new Error(`destination ${e.dst} is not IPv${family}`);
  const type = e.type === undefined ? 'unicast' : (TYPE_NAMES[e.type] ?? e.type);
  const r: KernelRoute = {
    dst,
    metric: typeof e.metric === 'number' ? e.metric : kernelDefaultMetric(family),
    kind: 'other',
    onlink: Array.isArray(e.flags) && e.flags.includes('onlink'),
    table: e.table === undefined || !/^\d+$/.test(String(e.table)) ? table : Number(e.table),
    protocol: protocolNumber(e.protocol),
  };
  if (e.dev !== undefined) r.dev = e.dev;
  let via: IP | undefined;
  if (e.gateway !== undefined) via = gw(e.gateway);
  else if (e.via?.host !== undefined) via = gw(e.via.host);
  if (type === 'blackhole') r.kind = 'blackhole';
  else if (type !== 'unicast') r.note = type;
  else if (e.nexthops !== undefined) r.note = 'multipath';
  else if (e.nhid !== undefined) r.note = `nhid ${e.nhid}`;
  else if (via) {
    r.kind = 'via';
    r.via = via;
  } else r.note = 'device route';
  return r;
}
