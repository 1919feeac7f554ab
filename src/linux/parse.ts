// Parsing `ip -N -j route show table T` output into KernelRoutes. Pure.
//
// Shapes seen from iproute2 6.1 (with -N, types, protocols and scopes are numbers):
//   {"type":"6","dst":"10.0.0.0/26","protocol":"181","flags":[]}                        blackhole
//   {"dst":"10.5.5.5","gateway":"192.0.2.9","dev":"d0","protocol":"186","flags":[]}       host route: no "/32"
//   {"dst":"default","gateway":"192.0.2.9",...}                                           0.0.0.0/0 or ::/0
//   {"dst":"10.0.4.0/24","via":{"family":"inet6","host":"2001:db8::9"},"dev":"d0",...}    RFC 8950 next hop
//   {"dst":"fd00:1::/64","gateway":"2001:db8::9","dev":"d0","metric":1024,"flags":["onlink"],"pref":"medium"}
// "metric" is omitted for IPv4 metric 0; "table" is omitted when the listing was filtered by table.
import { type Family, type IP, type Prefix, hostPrefix, parseIP, parsePrefix } from '../net/ip.ts';
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

function parseDst(dst: string | undefined, family: Family): Prefix {
  if (dst === undefined || dst === 'default') return parsePrefix(family === 4 ? '0.0.0.0/0' : '::/0');
  return dst.includes('/') ? parsePrefix(dst) : hostPrefix(parseIP(dst));
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
  for (const e of data as IpJsonRoute[]) {
    try {
      routes.push(parseEntry(e, family, table));
    } catch (err) {
      unparsed.push({ entry: e, error: (err as Error).message });
    }
  }
  return { routes, unparsed };
}

function parseEntry(e: IpJsonRoute, family: Family, table: number): KernelRoute {
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
  if (e.gateway !== undefined) via = parseIP(e.gateway);
  else if (e.via?.host !== undefined) via = parseIP(e.via.host);
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
