// What a node's pod gives the config, so one ConfigMap serves every node with no per-node rendering:
//
// - NODE_NAME (or NODENAME; the downward API's spec.nodeName): node.name when the config has none (platform.ts).
// - NODE_IP (the downward API's status.hostIP): when the config leaves them out, bgp.routerId (an IPv4 NODE_IP) and
//   the node's address as registered in the cluster, node.bgp.ipv4Address or ipv6Address by NODE_IP's family, with
//   the prefix length of the interface that holds it (Calico's "kubernetes-internal-ip" autodetection), else /32
//   (/128). A value in the config always wins.
// - ipam.store { file: PATH }: the store is what the file holds, e.g. the etcd endpoints from a mounted Secret.
// - CONTAINER_SANDBOX_MOUNT_POINT (a Windows HostProcess container): the config's file paths that are rooted without
//   a drive are the container's (src/platform/sandbox.ts), so a ConfigMap can name Secret files by their mountPath.
//
// Placeholders (__NODE_NAME__, __NODE_IP__) are not substituted: leave the field out instead; a config that still
// has one is refused with that advice.
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { formatIP, parseIP } from '../net/ip.ts';
import type { Platform } from '../platform/platform.ts';
import { sandboxPath } from '../platform/sandbox.ts';
import { isPlainObject, show, type Checker, type Path } from './check.ts';
import type { Config } from './types.ts';

export const NODE_IP_ENV = 'NODE_IP';

export interface NodeIp {
  address: string;
  family: 4 | 6;
}

/** NODE_IP as an address; undefined when unset; an issue (naming the variable) when it is not an address. */
export function nodeIpFromEnv(c: Checker, path: Path, env: Record<string, string | undefined>): NodeIp | undefined {
  const raw = env[NODE_IP_ENV]?.trim();
  if (!raw) return undefined;
  try {
    const ip = parseIP(raw);
    return { address: formatIP(ip), family: ip.family };
  } catch {
    return c.fail(path, `not in the config, and the environment's ${NODE_IP_ENV} is not an IP address: ${show(raw)}`);
  }
}

/** "ADDR/LEN" with the length of the local interface holding the address; /32 (/128) when none does. */
export function withInterfaceLength(ip: NodeIp, interfaces = networkInterfaces()): string {
  for (const addrs of Object.values(interfaces)) {
    for (const a of addrs ?? []) {
      if (!a.cidr) continue;
      try {
        if (formatIP(parseIP(a.address)) === ip.address) return `${ip.address}/${a.cidr.split('/')[1]}`;
      } catch { /* an interface address node cannot parse: not ours */ }
    }
  }
  return `${ip.address}/${ip.family === 4 ? 32 : 128}`;
}

/** The advice for a placeholder left in a field the environment fills; undefined for any other value. */
export function placeholderAdvice(v: unknown): string | undefined {
  if (typeof v !== 'string' || !/^__NODE_(NAME|IP)__$/.test(v)) return undefined;
  const name = v === '__NODE_NAME__' ? 'NODE_NAME' : NODE_IP_ENV;
  return `${v} is a placeholder that nothing fills in any more: leave the field out and set ${name} in the environment (the DaemonSets do)`;
}

/**
 * bgp.routerId when the config gives none: an IPv4 NODE_IP. Reports why there is none otherwise (NODE_IP unset,
 * not an address, or IPv6).
 */
export function routerIdFromEnv(c: Checker, env: Record<string, string | undefined>): string | undefined {
  const path = ['bgp', 'routerId'];
  if (!env[NODE_IP_ENV]?.trim()) return c.fail(path, 'required'); // run --help says NODE_IP fills it
  const ip = nodeIpFromEnv(c, path, env);
  if (ip && ip.family !== 4) {
    return c.fail(path, `required: the environment's ${NODE_IP_ENV} ${ip.address} is IPv6, and a router ID is an IPv4 address; set one`);
  }
  return ip?.address;
}

/** node.bgp.ipv4Address / ipv6Address from NODE_IP when the config has none of that family (after validation). */
export function nodeAddressFromEnv(c: Checker, cfg: Config, env: Record<string, string | undefined>): void {
  if (!env[NODE_IP_ENV]?.trim()) return;
  const field = parseFamily(env[NODE_IP_ENV]!) === 6 ? 'ipv6Address' : 'ipv4Address';
  if (cfg.node.bgp?.[field] !== undefined) return;
  const ip = nodeIpFromEnv(c, ['node', 'bgp', field], env);
  if (ip) cfg.node.bgp = { ...cfg.node.bgp, [field]: withInterfaceLength(ip) };
}

function parseFamily(s: string): 4 | 6 | undefined {
  try {
    return parseIP(s.trim()).family;
  } catch {
    return undefined;
  }
}

/**
 * ipam.store: { file: PATH }: the store is the file's content (trimmed): an etcd:// or etcds:// URL, or Calico's
 * etcd_endpoints form (http(s)://host:port,...; https means etcds://). Meant for the endpoints in a Secret.
 */
export function storeFromFile(c: Checker, path: Path, v: Record<string, unknown>, platform: Platform): string | undefined {
  const o = c.object(path, v, ['file'], ['file']);
  if (!o || typeof o.file !== 'string') return o && o.file != null ? c.bad([...path, 'file'], 'a path', o.file) : undefined;
  const file = sandboxPath(platform.id, platform.env, o.file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return c.fail([...path, 'file'], `cannot read ${file}${code ? ` (${code})` : ''}: it holds the store (the etcd endpoints)`);
  }
  const url = etcdUrl(text);
  if (!url) {
    return c.fail([...path, 'file'], `${file} must hold etcd://host:port[,...] (etcds:// for TLS) or https://host:port[,https://...], got ${show(text.length > 80 ? `${text.slice(0, 77)}...` : text)}`);
  }
  return url;
}

/** Our etcd URL for `text`: itself when it is one, else Calico's comma-separated http(s):// endpoints; undefined if neither. */
export function etcdUrl(text: string): string | undefined {
  if (/^etcds?:\/\/\S+$/.test(text)) return text;
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (!parts.length) return undefined;
  const schemes = new Set<string>();
  const hosts: string[] = [];
  for (const p of parts) {
    const m = /^(https?):\/\/([^/\s]+?)\/?$/.exec(p);
    if (!m) return undefined;
    schemes.add(m[1]);
    hosts.push(m[2]);
  }
  if (schemes.size !== 1) return undefined; // some TLS, some not: say so rather than guess
  return `${schemes.has('https') ? 'etcds' : 'etcd'}://${hosts.join(',')}`;
}

/** Is the value an ipam.store given by reference ({ file })? */
export const isStoreRef = (v: unknown): v is Record<string, unknown> => isPlainObject(v);

/**
 * In a Windows HostProcess container, every file path of the config that is rooted without a drive is moved under
 * the sandbox mount point (after validation). Elsewhere the config is untouched.
 */
export function sandboxConfigPaths(cfg: Config, platform: Platform): void {
  const p = (x: string) => sandboxPath(platform.id, platform.env, x);
  const src = <T>(s: T): T => (s && typeof s === 'object' && 'file' in s && typeof s.file === 'string' ? { ...s, file: p(s.file) } : s);
  const ipam = cfg.ipam;
  if (ipam) {
    if (!/^etcds?:\/\//.test(ipam.store)) ipam.store = p(ipam.store);
    ipam.calico = ipam.calico.map(p);
    const e = ipam.etcd;
    if (e) {
      if (e.ca) e.ca = p(e.ca);
      if (e.cert) e.cert = p(e.cert);
      if (e.key) e.key = p(e.key);
      if (e.password) e.password = src(e.password);
    }
  }
  const bgp = cfg.bgp;
  if (bgp) {
    for (const peer of bgp.peers) if (peer.password) peer.password = src(peer.password);
    if (bgp.nodeMeshPassword) bgp.nodeMeshPassword = src(bgp.nodeMeshPassword);
    for (const peer of bgp.selectorPeers ?? []) if (peer.password) peer.password = src(peer.password);
  }
}
