// A pod's HCN endpoint, as blockspeaker creates it when it is the node's main CNI plugin (src/daemon/cni-windows.ts):
// the HcnCreateEndpoint settings (HCN V2 schema, hcsshim's HostComputeEndpoint), and the reading back of an
// endpoint's properties for CHECK, DEL and GC. Pure: input in, JSON out, every bad field named.
//
// Naming: an endpoint is named `<containerId>_<ifname>` (endpointName()). HCN keeps names but does not make them
// unique, and an endpoint carries no other tag, so the name is how DEL, CHECK and GC find a pod's endpoint again.
// The IPAM handle of the same attachment is `<containerId>.<ifname>`.
//
// Policies (hcsshim hcn/hcnpolicy.go: EndpointPolicy {Type, Settings}):
//  - OutBoundNAT {Exceptions}: the pod's IPv4 traffic leaving the node is NATed to the node's address, except
//    towards every pool (pod to pod is never NATed), the service CIDR and the cluster/extra ranges. Only when the
//    pool of the pod's IPv4 address has natOutgoing; IPv6 is never NATed (Calico's natOutgoing is IPv4 here too).
//  - SDNRoute {DestinationPrefix, NeedEncap: true}: the service CIDR and the node's own address go through the
//    host's vSwitch, where kube-proxy's load balancers and the host are, instead of out of the physical NIC.
//  - PortMapping {InternalPort, ExternalPort, Protocol, VIP?, Flags?}: hostPort mappings from the runtime
//    (containerd's portMappings capability). Protocol is the IP protocol number; VIP is the host address to bind;
//    Flags 2 (NatFlagsIPv6) marks an IPv6 mapping.
import { type Family, comparePrefix, formatIP, formatPrefix, parseIP, parsePrefix, prefixContainsIP, type IP, type Prefix } from '../net/ip.ts';
import { asArray, normalizeMac, sameId } from './model.ts';

export const HCN_SCHEMA = { Major: 2, Minor: 0 } as const;

/** Endpoint flag RemoteEndpoint (hcsshim EndpointFlagsRemoteEndpoint): an endpoint standing for another host's. */
export const ENDPOINT_FLAG_REMOTE = 1;
/** PortMapping Flags: NatFlagsIPv6 (hcsshim NatFlags). */
export const NAT_FLAG_IPV6 = 2;

/** IP protocol numbers HCN takes in PortMapping.Protocol. */
export const PORT_PROTOCOLS: Readonly<Record<string, number>> = { tcp: 6, udp: 17, sctp: 132 };

/** A bad field in the endpoint's input; the message names it. */
export class EndpointSpecError extends Error {
  override name = 'EndpointSpecError';
}

const bad = (field: string, msg: string): never => {
  throw new EndpointSpecError(`${field}: ${msg}`);
};

export interface EndpointAddress {
  ip: string;
  /** The prefix length of the subnet the pod sits in (the network's Subnet: the pool's). */
  prefixLen: number;
  /** The family's default gateway (HNS's shared gateway of the Subnet); no route for the family without one. */
  gateway?: string;
  family?: Family;
}

export interface EndpointPool {
  cidr: string;
  natOutgoing: boolean;
}

/** One entry of the runtime's portMappings capability (CNI conventions). */
export interface PortMapping {
  hostPort: number;
  containerPort: number;
  protocol?: string;
  hostIP?: string;
}

/** DNS as a network config writes it (CNI's `dns`), plus HCN's own field names. */
export interface DnsSettings {
  servers?: string[];
  search?: string[];
  domain?: string;
  options?: string[];
}

/** The runtime's dns capability (CNI conventions: runtimeConfig.dns). */
export interface RuntimeDns {
  servers?: string[];
  searches?: string[];
  options?: string[];
}

export interface EndpointSpec {
  containerId: string;
  ifname: string;
  /** The HNS network's ID. */
  network: string;
  /** At most one per family: HCN gives the endpoint one IpConfiguration per family. */
  addresses: EndpointAddress[];
  /** The network config's (or the daemon's) DNS. */
  dns?: DnsSettings;
  /** runtimeConfig.dns: each non-empty field wins over `dns`'s. */
  runtimeDns?: RuntimeDns;
  /** Every pool of the cluster: all are NAT exceptions; the pool of the IPv4 address decides NAT at all. */
  pools: EndpointPool[];
  serviceCidr?: string | readonly string[];
  /** More OutBoundNAT exceptions: cluster CIDRs, the node's subnet. */
  exceptions?: readonly string[];
  nodeIP?: string;
  portMappings?: readonly PortMapping[];
  /** "0E-2A": the endpoint's MAC is this prefix and its IPv4 address's four bytes (win-overlay's and Calico's rule). */
  macPrefix?: string;
}

export interface HcnEndpointPolicy {
  Type: 'OutBoundNAT' | 'SDNRoute' | 'PortMapping';
  Settings: Record<string, unknown>;
}

/** The HcnCreateEndpoint settings document (fields as hcsshim's HostComputeEndpoint spells them). */
export interface HcnEndpointRequest {
  SchemaVersion: { Major: number; Minor: number };
  Name: string;
  HostComputeNetwork: string;
  IpConfigurations: { IpAddress: string; PrefixLength: number }[];
  Routes: { NextHop: string; DestinationPrefix: string }[];
  Dns?: { ServerList?: string[]; Search?: string[]; Domain?: string; Options?: string[] };
  Policies: HcnEndpointPolicy[];
  MacAddress?: string;
}

const GUID = /^\{?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}?$/i;
const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

const ZERO_GUID = '00000000-0000-0000-0000-000000000000';

export const isGuid = (text: unknown): text is string => typeof text === 'string' && GUID.test(text);
/** A GUID without braces, lower case: how we compare and send IDs. */
export const bareGuid = (text: string): string => text.replace(/[{}]/g, '').toLowerCase();

/** The endpoint's name for an attachment: `<containerId>_<ifname>`. */
export function endpointName(containerId: string, ifname: string): string {
  return `${containerId}_${ifname}`;
}

/** Whether a name has the `<containerId>_<ifname>` form our endpoints have (GC looks only at those). */
export function isAttachmentName(name: unknown): name is string {
  return typeof name === 'string' && /^[A-Za-z0-9][A-Za-z0-9_.-]*_[^\s/:]{1,15}$/.test(name);
}

export function checkContainerId(v: unknown, field = 'containerId'): string {
  if (typeof v !== 'string' || !CONTAINER_ID.test(v)) bad(field, `must be a letter or digit, then letters, digits, "_", "." or "-", got ${JSON.stringify(v)}`);
  return v as string;
}

export function checkIfname(v: unknown, field = 'ifname'): string {
  if (typeof v !== 'string' || v === '' || v.length > 15 || v === '.' || v === '..' || /[/:\s]/.test(v)) {
    bad(field, `must be an interface name (1 to 15 characters, no "/", ":" or spaces), got ${JSON.stringify(v)}`);
  }
  return v as string;
}

function ipOf(field: string, v: unknown): IP {
  if (typeof v !== 'string') return bad(field, `must be an IP address, got ${JSON.stringify(v)}`);
  try {
    return parseIP(v.trim());
  } catch {
    return bad(field, `"${v}" is not an IP address`);
  }
}

function prefixOf(field: string, v: unknown): Prefix {
  if (typeof v !== 'string') return bad(field, `must be a prefix such as 10.96.0.0/12, got ${JSON.stringify(v)}`);
  try {
    return parsePrefix(v.trim());
  } catch (e) {
    return bad(field, (e as Error).message);
  }
}

function strings(field: string, v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) bad(field, 'must be a list of strings');
  return v as string[];
}

function port(field: string, v: unknown): number {
  if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > 65535) bad(field, `must be a port from 1 to 65535, got ${JSON.stringify(v)}`);
  return v as number;
}

/** The IP protocol number of a port mapping's protocol (tcp when left out, as Kubernetes does). */
export function protocolNumber(v: unknown, field = 'protocol'): number {
  if (v === undefined || v === '') return PORT_PROTOCOLS.tcp!;
  if (typeof v === 'number' && Object.values(PORT_PROTOCOLS).includes(v)) return v;
  if (typeof v === 'string') {
    const n = PORT_PROTOCOLS[v.trim().toLowerCase()];
    if (n !== undefined) return n;
    if (/^\d+$/.test(v.trim()) && Object.values(PORT_PROTOCOLS).includes(Number(v))) return Number(v);
  }
  return bad(field, `unknown protocol ${JSON.stringify(v)} (tcp, udp or sctp)`);
}

/** Check the runtime's portMappings (untrusted JSON); the error names the entry and field. */
export function parsePortMappings(v: unknown, field = 'runtimeConfig.portMappings'): PortMapping[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return bad(field, 'must be a list of {hostPort, containerPort, protocol, hostIP?}');
  return v.map((m, i) => {
    const f = `${field}[${i}]`;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return bad(f, 'must be an object {hostPort, containerPort, protocol, hostIP?}');
    const o = m as Record<string, unknown>;
    const out: PortMapping = { hostPort: port(`${f}.hostPort`, o.hostPort), containerPort: port(`${f}.containerPort`, o.containerPort) };
    protocolNumber(o.protocol, `${f}.protocol`);
    if (o.protocol !== undefined) out.protocol = String(o.protocol);
    if (o.hostIP !== undefined && o.hostIP !== '') out.hostIP = formatIP(ipOf(`${f}.hostIP`, o.hostIP));
    return out;
  });
}

/** Check the runtime's dns (untrusted JSON). */
export function parseRuntimeDns(v: unknown, field = 'runtimeConfig.dns'): RuntimeDns | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) return bad(field, 'must be an object {servers, searches, options}');
  const o = v as Record<string, unknown>;
  const out: RuntimeDns = {};
  const servers = strings(`${field}.servers`, o.servers);
  servers?.forEach((s, i) => ipOf(`${field}.servers[${i}]`, s));
  if (servers) out.servers = servers;
  const searches = strings(`${field}.searches`, o.searches);
  if (searches) out.searches = searches;
  const options = strings(`${field}.options`, o.options);
  if (options) out.options = options;
  return out;
}

/** A network config's `dns` (CNI: nameservers, domain, search, options), checked. */
export function parseConfDns(v: unknown, field = 'dns'): DnsSettings | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) return bad(field, 'must be an object {nameservers, domain, search, options}');
  const o = v as Record<string, unknown>;
  const out: DnsSettings = {};
  const servers = strings(`${field}.nameservers`, o.nameservers);
  servers?.forEach((s, i) => ipOf(`${field}.nameservers[${i}]`, s));
  if (servers) out.servers = servers;
  const search = strings(`${field}.search`, o.search);
  if (search) out.search = search;
  if (o.domain !== undefined) {
    if (typeof o.domain !== 'string') bad(`${field}.domain`, 'must be a string');
    if (o.domain) out.domain = o.domain as string;
  }
  const options = strings(`${field}.options`, o.options);
  if (options) out.options = options;
  return out;
}

/**
 * The pod's DNS: each non-empty field of runtimeConfig.dns wins over the config's (as win-bridge and sdnbridge
 * read them), then the config's, then `fallback` (the daemon's default).
 */
export function effectiveDns(conf: DnsSettings | undefined, runtime: RuntimeDns | undefined, fallback?: DnsSettings): DnsSettings {
  const pick = <T>(...xs: (T[] | undefined)[]): T[] | undefined => xs.find((x) => x !== undefined && x.length > 0);
  const out: DnsSettings = {};
  const servers = pick(runtime?.servers, conf?.servers, fallback?.servers);
  if (servers) out.servers = [...servers];
  const search = pick(runtime?.searches, conf?.search, fallback?.search);
  if (search) out.search = [...search];
  const domain = conf?.domain || fallback?.domain;
  if (domain) out.domain = domain;
  const options = pick(runtime?.options, conf?.options, fallback?.options);
  if (options) out.options = [...options];
  return out;
}

function macFrom(prefix: string, ip: IP): string {
  const v = ip.w0;
  const hex = (b: number) => b.toString(16).toUpperCase().padStart(2, '0');
  return `${prefix.toUpperCase()}-${hex(v >>> 24)}-${hex((v >>> 16) & 255)}-${hex((v >>> 8) & 255)}-${hex(v & 255)}`;
}

const defaultRouteOf = (f: Family): string => (f === 4 ? '0.0.0.0/0' : '::/0');

/** Build the HcnCreateEndpoint settings for a pod. Throws EndpointSpecError naming the first bad field. */
export function buildEndpoint(s: EndpointSpec): HcnEndpointRequest {
  const containerId = checkContainerId(s.containerId);
  const ifname = checkIfname(s.ifname);
  if (!isGuid(s.network)) bad('network', `must be the HNS network's ID (a GUID), got ${JSON.stringify(s.network)}`);
  if (!Array.isArray(s.addresses) || s.addresses.length === 0) bad('addresses', 'at least one address is needed');
  const addrs = s.addresses.map((a, i) => {
    const f = `addresses[${i}]`;
    const ip = ipOf(`${f}.ip`, a?.ip);
    if (a.family !== undefined && a.family !== ip.family) bad(`${f}.family`, `is ${a.family} but ${a.ip} is an IPv${ip.family} address`);
    const max = ip.family === 4 ? 32 : 128;
    if (!Number.isInteger(a.prefixLen) || a.prefixLen < 0 || a.prefixLen > max) bad(`${f}.prefixLen`, `must be 0..${max}, got ${JSON.stringify(a.prefixLen)}`);
    let gw: IP | undefined;
    if (a.gateway !== undefined) {
      gw = ipOf(`${f}.gateway`, a.gateway);
      if (gw.family !== ip.family) bad(`${f}.gateway`, `${a.gateway} is not an IPv${ip.family} address`);
    }
    return { ip, prefixLen: a.prefixLen, gw };
  });
  for (const fam of [4, 6] as const) {
    if (addrs.filter((a) => a.ip.family === fam).length > 1) bad('addresses', `more than one IPv${fam} address: an endpoint holds one per family`);
  }
  const families = new Set(addrs.map((a) => a.ip.family));
  if (!Array.isArray(s.pools)) bad('pools', 'must be a list of {cidr, natOutgoing}');
  const pools = s.pools.map((p, i) => ({ prefix: prefixOf(`pools[${i}].cidr`, p?.cidr), nat: p.natOutgoing === true }));
  const services = (s.serviceCidr === undefined ? [] : typeof s.serviceCidr === 'string' ? [s.serviceCidr] : [...s.serviceCidr])
    .map((c, i) => prefixOf(typeof s.serviceCidr === 'string' ? 'serviceCidr' : `serviceCidr[${i}]`, c));
  const extra = (s.exceptions ?? []).map((c, i) => prefixOf(`exceptions[${i}]`, c));
  const nodeIP = s.nodeIP === undefined ? undefined : ipOf('nodeIP', s.nodeIP);
  const maps = parsePortMappings(s.portMappings, 'portMappings');

  const policies: HcnEndpointPolicy[] = [];
  const v4 = addrs.find((a) => a.ip.family === 4);
  if (v4) {
    // The most specific pool holding the address decides (a pool inside another is the more specific one).
    const own = pools.filter((p) => p.prefix.family === 4 && prefixContainsIP(p.prefix, v4.ip)).sort((a, b) => b.prefix.len - a.prefix.len)[0];
    if (!own) bad('addresses', `${formatIP(v4.ip)} lies in none of the pools, so whether to NAT it is unknown`);
    if (own!.nat) {
      // Pools in address order, so the store's listing order never makes a different endpoint out of the same pools.
      const poolPrefixes = pools.map((p) => p.prefix).sort(comparePrefix);
      const exceptions = [...new Set([...poolPrefixes, ...services, ...extra].filter((p) => p.family === 4).map(formatPrefix))];
      policies.push({ Type: 'OutBoundNAT', Settings: { Exceptions: exceptions } });
    }
  }
  const routed = new Set<string>();
  for (const p of services) {
    const text = formatPrefix(p);
    if (!families.has(p.family) || routed.has(text)) continue;
    routed.add(text);
    policies.push({ Type: 'SDNRoute', Settings: { DestinationPrefix: text, NeedEncap: true } });
  }
  if (nodeIP && families.has(nodeIP.family)) {
    policies.push({ Type: 'SDNRoute', Settings: { DestinationPrefix: `${formatIP(nodeIP)}/${nodeIP.family === 4 ? 32 : 128}`, NeedEncap: true } });
  }
  const seen = new Map<string, number>();
  maps.forEach((m, i) => {
    const proto = protocolNumber(m.protocol, `portMappings[${i}].protocol`);
    const host = m.hostIP === undefined ? undefined : parseIP(m.hostIP);
    const unspecified = host !== undefined && host.w0 === 0 && host.w1 === 0 && host.w2 === 0 && host.w3 === 0;
    const key = `${proto}/${m.hostPort}/${host ? formatIP(host) : '*'}`;
    const prev = seen.get(key);
    if (prev !== undefined) {
      // The same mapping twice is harmless (HCN would refuse the second); two container ports on one host port are not.
      if (maps[prev]!.containerPort === m.containerPort) return;
      bad(`portMappings[${i}]`, `host port ${m.hostPort}/${m.protocol ?? 'tcp'} is already mapped to container port ${maps[prev]!.containerPort} by portMappings[${prev}]`);
    }
    seen.set(key, i);
    const settings: Record<string, unknown> = { InternalPort: m.containerPort, ExternalPort: m.hostPort, Protocol: proto };
    if (host && !unspecified) settings.VIP = formatIP(host);
    if (host?.family === 6) settings.Flags = NAT_FLAG_IPV6;
    policies.push({ Type: 'PortMapping', Settings: settings });
  });

  const dns = effectiveDns(s.dns, s.runtimeDns);
  dns.servers?.forEach((x, i) => ipOf(`dns.servers[${i}]`, x));
  const req: HcnEndpointRequest = {
    SchemaVersion: { ...HCN_SCHEMA },
    Name: endpointName(containerId, ifname),
    HostComputeNetwork: bareGuid(s.network),
    IpConfigurations: addrs.map((a) => ({ IpAddress: formatIP(a.ip), PrefixLength: a.prefixLen })),
    Routes: addrs.filter((a) => a.gw).map((a) => ({ NextHop: formatIP(a.gw!), DestinationPrefix: defaultRouteOf(a.ip.family) })),
    Policies: policies,
  };
  if (dns.servers || dns.search || dns.domain || dns.options) {
    req.Dns = {};
    if (dns.servers) req.Dns.ServerList = dns.servers;
    if (dns.search) req.Dns.Search = dns.search;
    if (dns.domain) req.Dns.Domain = dns.domain;
    if (dns.options) req.Dns.Options = dns.options;
  }
  if (s.macPrefix !== undefined) {
    if (!/^[0-9A-Fa-f]{2}-[0-9A-Fa-f]{2}$/.test(s.macPrefix)) bad('macPrefix', `must be two bytes such as 0E-2A, got ${JSON.stringify(s.macPrefix)}`);
    if (v4) req.MacAddress = macFrom(s.macPrefix, v4.ip);
  }
  return req;
}

// ---- reading endpoints back -----------------------------------------------------------------------------------

export interface ParsedEndpoint {
  id: string;
  name?: string;
  /** The network's ID (bare, lower case). */
  network?: string;
  /** The namespace HCN says the endpoint is in (HostComputeNamespace), when it says so. */
  namespace?: string;
  /** As HCN writes it: 00-15-5D-12-34-56. */
  mac?: string;
  addresses: { ip: string; prefixLen?: number; family: Family }[];
  routes: { destination: string; nextHop: string }[];
  flags: number;
}

/** An endpoint's properties (HcnQueryEndpointProperties, parsed) as the fields the CNI code reads. */
export function parseEndpoint(props: unknown): ParsedEndpoint {
  if (typeof props !== 'object' || props === null) throw new EndpointSpecError('endpoint properties: not an object');
  const p = props as Record<string, unknown>;
  const id = typeof p.ID === 'string' ? p.ID : typeof p.Id === 'string' ? p.Id : undefined;
  if (!id) throw new EndpointSpecError('endpoint properties: no ID');
  const out: ParsedEndpoint = { id: bareGuid(id), addresses: [], routes: [], flags: typeof p.Flags === 'number' ? p.Flags : 0 };
  if (typeof p.Name === 'string' && p.Name) out.name = p.Name;
  if (isGuid(p.HostComputeNetwork)) out.network = bareGuid(p.HostComputeNetwork);
  if (isGuid(p.HostComputeNamespace) && bareGuid(p.HostComputeNamespace) !== ZERO_GUID) out.namespace = bareGuid(p.HostComputeNamespace);
  const mac = normalizeMac(p.MacAddress);
  if (mac) out.mac = mac;
  for (const c of asArray(p.IpConfigurations as unknown[] | undefined)) {
    const cfg = c as { IpAddress?: unknown; PrefixLength?: unknown } | null;
    if (typeof cfg?.IpAddress !== 'string') continue;
    let ip: IP;
    try {
      ip = parseIP(cfg.IpAddress);
    } catch {
      continue;
    }
    const a: ParsedEndpoint['addresses'][number] = { ip: formatIP(ip), family: ip.family };
    if (typeof cfg.PrefixLength === 'number') a.prefixLen = cfg.PrefixLength;
    out.addresses.push(a);
  }
  for (const r of asArray(p.Routes as unknown[] | undefined)) {
    const route = r as { NextHop?: unknown; DestinationPrefix?: unknown } | null;
    if (typeof route?.NextHop === 'string' && typeof route.DestinationPrefix === 'string') out.routes.push({ destination: route.DestinationPrefix, nextHop: route.NextHop });
  }
  return out;
}

/** The endpoint IDs a namespace's properties list (Resources of Type Endpoint). */
export function namespaceEndpoints(props: unknown): string[] {
  const res = asArray((props as { Resources?: unknown[] } | null)?.Resources);
  const out: string[] = [];
  for (const r of res) {
    const x = r as { Type?: unknown; Data?: unknown } | null;
    if (x?.Type !== 'Endpoint') continue;
    // Data is an object in what HCN returns, and a JSON string in hcsshim's raw form: read both.
    let data = x.Data;
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data);
      } catch {
        continue;
      }
    }
    const id = (data as { ID?: unknown; Id?: unknown } | null)?.ID ?? (data as { Id?: unknown } | null)?.Id;
    if (isGuid(id)) out.push(bareGuid(id));
  }
  return out;
}

/** HcnModifyNamespace settings that attach (Add) or detach (Remove) an endpoint (hcsshim AddNamespaceEndpoint). */
export function namespaceEndpointRequest(endpointId: string, request: 'Add' | 'Remove'): string {
  return JSON.stringify({ ResourceType: 'Endpoint', RequestType: request, Settings: { EndpointId: endpointId } });
}

export interface EndpointWant {
  /** The network's ID. */
  network?: string;
  /** Addresses, bare or with "/len". */
  addresses: readonly string[];
  /** The namespace it should be in; checked only when HCN reports HostComputeNamespace (see namespaceEndpoints). */
  namespace?: string;
}

const bare = (text: string): string => {
  const slash = text.indexOf('/');
  try {
    return formatIP(parseIP(slash < 0 ? text : text.slice(0, slash)));
  } catch {
    return text;
  }
};

/** What differs between an endpoint and what CHECK expects, in words; [] when it matches. */
export function endpointMatches(props: ParsedEndpoint | Record<string, unknown>, want: EndpointWant): string[] {
  const ep = 'addresses' in props && Array.isArray(props.addresses) && 'routes' in props ? (props as ParsedEndpoint) : parseEndpoint(props);
  const diffs: string[] = [];
  if (want.network !== undefined && !sameId(ep.network, want.network)) diffs.push(`it is on network ${ep.network ?? '(none)'}, not ${bareGuid(want.network)}`);
  const have = new Set(ep.addresses.map((a) => a.ip));
  const wanted = new Set(want.addresses.map(bare));
  const missing = [...wanted].filter((x) => !have.has(x));
  const extra = [...have].filter((x) => !wanted.has(x));
  if (missing.length) diffs.push(`it lacks ${missing.join(', ')}`);
  if (extra.length) diffs.push(`it also holds ${extra.join(', ')}`);
  if (want.namespace !== undefined && ep.namespace !== undefined && !sameId(ep.namespace, want.namespace)) {
    diffs.push(`it is in namespace ${ep.namespace}, not ${bareGuid(want.namespace)}`);
  }
  return diffs;
}
