// Config loading and validation: YAML or JSON text -> a typed Config with defaults, or a ConfigError that lists
// every problem, each naming its field path, the bad value and the source line.
import { readFileSync } from 'node:fs';
import { isMap, isSeq, LineCounter, parseDocument, stringify, type Node as YamlNode } from 'yaml';
import { formatIP, formatPrefix, IP, maxLen, parseIP, parsePrefix, type Family } from '../net/ip.ts';
import { hostPlatform, type Platform } from '../platform/platform.ts';
import { posix, win32 } from 'node:path';
import { checkEtcdSecurity, isEtcdUrl, type EtcdSecurity, type SecretSource } from '../store/etcd-auth.ts';
import { Checker, isPlainObject, show, type ConfigIssue, type Path } from './check.ts';
import { HARDENING_PEER_FIELDS, MESH_BGP_FIELDS, maxPrefixes, meshPasswordField, peerSecurityFields, secretSource } from './peer-hardening.ts';
import { bfdField } from './bfd.ts';
import { COMMUNITY_BGP_FIELDS, bgpCommunities } from './communities.ts';
import { AS_PEER_FIELDS, peerAsOptions } from './peer-as.ts';
import { nodeBgpSection } from './node-bgp.ts';
import { checkHnsAgainst, HNS_FIELDS, hnsDataplane } from './hns.ts';
import { isStoreRef, nodeAddressFromEnv, placeholderAdvice, routerIdFromEnv, sandboxConfigPaths, storeFromFile } from './pod-env.ts';
import type {
  AddressFamily, BgpConfig, Config, DataplaneConfig, IpamConfig, IpcConfig, ListenAddress, NodeConfig, PeerConfig,
  PeerGracefulRestart, PoolConfig, PrefixRule, ReservationConfig, StatusConfig,
} from './types.ts';

export type * from './types.ts';
export type { ConfigIssue } from './check.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly source: string, readonly issues: ConfigIssue[]) {
    super(issues.map((i) => `${i.path}: ${i.message}${i.line ? ` (${source}:${i.line})` : ''}`).join('\n'));
  }
}

export const DEFAULT_BGP_PORT = 179;
export const DEFAULT_HOLD_TIME = 90;
export const DEFAULT_BGP_LISTEN: ListenAddress = { address: '::', port: DEFAULT_BGP_PORT };
export const DEFAULT_RESTART_TIME = 120;
export const DEFAULT_STATUS_LISTEN: ListenAddress = { address: '127.0.0.1', port: 9179 };
export const DEFAULT_IPC_PATH = hostPlatform().paths.ipcPath;
export const DEFAULT_STORE = hostPlatform().paths.store;
const FAMILIES: readonly AddressFamily[] = ['ipv4', 'ipv6'];
const familyName = (f: Family): AddressFamily => (f === 4 ? 'ipv4' : 'ipv6');

/** Read and validate a config file (YAML, or JSON, which YAML 1.2 reads too). Throws ConfigError. */
export function loadConfig(path: string, platform?: Platform): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : code === 'EISDIR' ? 'is a directory' : (e as Error).message;
    throw new ConfigError(path, [{ path: '(file)', message: `cannot read ${path}: ${why}${code ? ` (${code})` : ''}` }]);
  }
  return parseConfig(text, path, platform);
}

/** Validate config text. sourceName is used in messages only. Throws ConfigError listing every problem. */
export function parseConfig(text: string, sourceName = 'config', platform?: Platform): Config {
  const lines = new LineCounter();
  // uniqueKeys (the default) makes a repeated key an error instead of silently keeping the last one.
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, version: '1.2' });
  if (doc.errors.length) {
    throw new ConfigError(sourceName, doc.errors.map((e) => ({
      path: '(syntax)',
      message: e.message.split('\n')[0],
      line: e.linePos?.[0].line,
    })));
  }
  const locate = (path: Path): number | undefined => {
    // The deepest node that exists on the path: the field itself, or its parent when the field is missing.
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true) as YamlNode | undefined;
      if (node && typeof node === 'object' && 'range' in node && node.range) return lines.linePos(node.range[0]).line;
    }
    return undefined;
  };
  const c = new Checker(locate);
  const root = doc.contents === null ? {} : (doc.toJS({ maxAliasCount: 100 }) as unknown);
  if (!(isMap(doc.contents) || doc.contents === null)) {
    throw new ConfigError(sourceName, [{ path: '(top level)', message: `must be a mapping, got ${isSeq(doc.contents) ? 'a list' : show(root)}` }]);
  }
  const cfg = validateConfig(c, root, platform);
  if (c.issues.length) throw new ConfigError(sourceName, c.issues);
  return cfg!;
}

/** Validate an already-parsed value (e.g. from JSON.parse). Throws ConfigError. */
export function configFromValue(value: unknown, sourceName = 'config', platform?: Platform): Config {
  const c = new Checker();
  const cfg = validateConfig(c, value, platform);
  if (c.issues.length) throw new ConfigError(sourceName, c.issues);
  return cfg!;
}

/** The config in file form (user-facing names, defaults spelled out); parseConfig of the result gives it back. */
export function formatConfig(cfg: Config, format: 'yaml' | 'json' = 'yaml'): string {
  const plain = JSON.parse(JSON.stringify(cfg)) as unknown;
  return format === 'json' ? JSON.stringify(plain, null, 2) + '\n' : stringify(plain, { lineWidth: 0 });
}

// ---------------------------------------------------------------------------------------------------------------

function validateConfig(c: Checker, v: unknown, platform: Platform = hostPlatform()): Config | undefined {
  const o = c.object([], v ?? {}, ['node', 'bgp', 'ipam', 'dataplane', 'status', 'ipc']);
  if (!o) return undefined;
  const node = nodeSection(c, o.node, platform);
  const cfg: Config = {
    node,
    bgp: o.bgp === undefined || o.bgp === null ? null : bgpSection(c, o.bgp, platform) ?? null,
    ipam: o.ipam === undefined || o.ipam === null ? null : ipamSection(c, o.ipam, platform) ?? null,
    dataplane: dataplaneSection(c, o.dataplane) ?? { kind: 'none' },
    status: statusSection(c, o.status) ?? false,
    ipc: ipcSection(c, o.ipc) ?? false,
  };
  checkHnsAgainst(c, cfg);
  // What the node's pod gives (./pod-env.ts): its address from NODE_IP, and its files in a Windows HostProcess container.
  nodeAddressFromEnv(c, cfg, platform.env);
  sandboxConfigPaths(cfg, platform);
  return cfg;
}

function nodeSection(c: Checker, v: unknown, platform: Platform): NodeConfig {
  // Unset: NODENAME, else NODE_NAME, else the lower-cased host name, as Kubernetes and Calico name the node.
  const def: NodeConfig = { name: platform.defaultNodeName(), os: platform.nodeOs, labels: {} };
  if (v === undefined || v === null) return def;
  const o = c.object(['node'], v, ['name', 'os', 'labels', 'bgp']);
  if (!o) return def;
  const name = c.opt(o.name, def.name, (x) => {
    const s = c.string(['node', 'name'], x);
    // A Kubernetes node name: a DNS subdomain (RFC 1123), which is also what affinities are keyed by.
    if (s !== undefined && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(s)) {
      const advice = placeholderAdvice(s);
      if (advice) return c.fail(['node', 'name'], advice);
      return c.bad(['node', 'name'], 'a DNS name (lower-case letters, digits, "-" and ".")', s);
    }
    return s;
  }) ?? def.name;
  const os = c.opt(o.os, def.os, (x) => c.oneOf(['node', 'os'], x, ['linux', 'windows'] as const)) ?? def.os;
  const labels: Record<string, string> = {};
  if (o.labels !== undefined && o.labels !== null) {
    if (!isPlainObject(o.labels)) c.bad(['node', 'labels'], 'a mapping of label names to strings', o.labels);
    else {
      for (const [k, x] of Object.entries(o.labels)) {
        // YAML turns `zone: 1` or `gpu: true` into non-strings; labels are strings, so say so rather than coerce.
        if (typeof x !== 'string') c.bad(['node', 'labels', k], 'a string (quote it)', x);
        else labels[k] = x;
      }
    }
  }
  const bgp = o.bgp === undefined || o.bgp === null ? undefined : nodeBgpSection(c, ['node', 'bgp'], o.bgp);
  return bgp ? { name, os, labels, bgp } : { name, os, labels };
}

// ---- bgp -------------------------------------------------------------------------------------------------------

function asn(c: Checker, path: Path, v: unknown): number | undefined {
  return c.int(path, v, 1, 4294967295);
}

function ipAddress(c: Checker, path: Path, v: unknown, family?: Family): string | undefined {
  if (typeof v !== 'string') return c.bad(path, family === 4 ? 'an IPv4 address' : 'an IP address', v);
  try {
    const ip = parseIP(v);
    if (family && ip.family !== family) return c.bad(path, `an IPv${family} address`, v);
    return formatIP(ip);
  } catch {
    return c.bad(path, family === 4 ? 'an IPv4 address' : 'an IP address', v);
  }
}

function prefix(c: Checker, path: Path, v: unknown): string | undefined {
  if (typeof v !== 'string') return c.bad(path, 'a prefix like 10.0.0.0/24 or fd00::/64', v);
  try {
    return formatPrefix(parsePrefix(v));
  } catch (e) {
    // parsePrefix's message says what is wrong (host bits set, length out of range, bad address).
    return c.fail(path, `${(e as Error).message.replace(/^invalid prefix "[^"]*": ?/, '')}, got ${show(v)}`);
  }
}

/**
 * "address:port", "[v6]:port", or { address, port }. port 0 means "do not listen" for BGP (returns false) and "any
 * free port" for the status endpoint (kept as 0). With def null both parts must be given (status.metricsListen:
 * a listener others reach should not get its address from a default).
 */
function listen(c: Checker, path: Path, v: unknown, def: ListenAddress | null): ListenAddress | undefined {
  const forms = def ? '"address:port" or "[ipv6]:port" or { address, port }' : '"address:port" or "[ipv6]:port" or { address, port }, both given';
  if (typeof v === 'string') {
    const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(v.trim()) ?? /^([^:]*)$/.exec(v.trim());
    if (!m) return c.bad(path, forms, v);
    const addrText = m[1] ?? m[2] ?? '';
    if (!def && (addrText === '' || m[3] === undefined)) return c.bad(path, forms, v);
    const address = addrText === '' ? def!.address : ipAddress(c, path, addrText);
    const port = m[3] === undefined ? def!.port : c.int(path, Number(m[3]), 0, 65535);
    return address === undefined || port === undefined ? undefined : { address, port };
  }
  const o = c.object(path, v, ['address', 'port'], def ? [] : ['address', 'port']);
  if (!o) return undefined;
  const address = c.opt(o.address, def?.address, (x) => ipAddress(c, [...path, 'address'], x));
  const port = c.opt(o.port, def?.port, (x) => c.int([...path, 'port'], x, 0, 65535));
  return address === undefined || port === undefined ? undefined : { address, port };
}

function restart(c: Checker, path: Path, v: unknown, def: PeerGracefulRestart | false): PeerGracefulRestart | false | undefined {
  if (v === true) return def || { restartTime: DEFAULT_RESTART_TIME };
  if (v === false) return false;
  if (!isPlainObject(v)) return c.bad(path, 'true, false or { restartTime }', v);
  const o = c.object(path, v, ['restartTime']);
  if (!o) return undefined;
  // 12 bits on the wire (RFC 4724 3); 0 would mean "do not wait at all".
  const t = c.opt(o.restartTime, def ? def.restartTime : DEFAULT_RESTART_TIME, (x) => c.int([...path, 'restartTime'], x, 1, 4095));
  return t === undefined ? undefined : { restartTime: t };
}

function prefixRule(c: Checker, path: Path, v: unknown): PrefixRule | undefined {
  if (typeof v === 'string') v = { prefix: v }; // shorthand: a bare prefix is an exact match
  const o = c.object(path, v, ['prefix', 'ge', 'le', 'action'], ['prefix']);
  if (!o || o.prefix === undefined || o.prefix === null) return undefined;
  const p = prefix(c, [...path, 'prefix'], o.prefix);
  const max = p ? maxLen(parsePrefix(p).family) : 128;
  const ge = c.opt(o.ge, undefined, (x) => c.int([...path, 'ge'], x, 0, max));
  const le = c.opt(o.le, undefined, (x) => c.int([...path, 'le'], x, 0, max));
  const action = c.opt(o.action, 'accept' as const, (x) => c.oneOf([...path, 'action'], x, ['accept', 'reject'] as const));
  if (p === undefined) return undefined;
  const len = parsePrefix(p).len;
  // len <= ge <= le <= max: anything else matches nothing, which is always a mistake.
  let ok = action !== undefined && (o.ge === undefined || ge !== undefined) && (o.le === undefined || le !== undefined);
  if (ge !== undefined && ge < len) ok = !!c.fail([...path, 'ge'], `must be at least the prefix length ${len}, got ${ge}`);
  else if (le !== undefined && le < (ge ?? len)) {
    ok = !!c.fail([...path, 'le'], `must be at least ${ge !== undefined ? `ge (${ge})` : `the prefix length ${len}`}, got ${le}`);
  }
  if (!ok) return undefined;
  const r = { prefix: p } as PrefixRule; // keys in file order: prefix, ge, le, action
  if (ge !== undefined) r.ge = ge;
  if (le !== undefined) r.le = le;
  r.action = action!;
  return r;
}

const PEER_FIELDS = ['address', 'asn', 'port', 'families', 'holdTime', 'sendHoldTime', 'passive', 'gracefulRestart', 'import', 'export', ...HARDENING_PEER_FIELDS, 'bfd', ...AS_PEER_FIELDS] as const;

function peer(c: Checker, path: Path, v: unknown, globalGr: PeerGracefulRestart | false): PeerConfig | undefined {
  const o = c.object(path, v, PEER_FIELDS, ['address', 'asn']);
  if (!o) return undefined;
  const address = o.address == null ? undefined : ipAddress(c, [...path, 'address'], o.address);
  const peerAs = o.asn == null ? undefined : asn(c, [...path, 'asn'], o.asn);
  const port = c.opt(o.port, DEFAULT_BGP_PORT, (x) => c.int([...path, 'port'], x, 1, 65535));
  const defFamilies: AddressFamily[] = address ? [familyName(parseIP(address).family)] : ['ipv4'];
  const families = c.opt(o.families, defFamilies, (x) => {
    if (!Array.isArray(x) || x.length === 0) return c.bad([...path, 'families'], 'a non-empty list of ipv4, ipv6', x);
    const fs = c.list([...path, 'families'], x, (p, f) => c.oneOf(p, f, FAMILIES));
    if (fs.length !== x.length) return undefined;
    if (new Set(fs).size !== fs.length) return c.bad([...path, 'families'], 'a list without repeats', x);
    return FAMILIES.filter((f) => fs.includes(f)); // canonical order
  });
  const holdTime = c.opt(o.holdTime, DEFAULT_HOLD_TIME, (x) => {
    // RFC 4271 4.2: zero, or at least three seconds.
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 65535 || (x > 0 && x < 3)) {
      return c.bad([...path, 'holdTime'], '0 or 3..65535', x);
    }
    return x;
  });
  // RFC 9687: absent = the RFC's default (from the negotiated hold time), so only a value given is kept.
  const sendHoldTime = c.opt(o.sendHoldTime, undefined as number | undefined, (x) => sendHold(c, [...path, 'sendHoldTime'], x, holdTime));
  const passive = c.opt(o.passive, false, (x) => c.bool([...path, 'passive'], x));
  const gracefulRestart = c.opt(o.gracefulRestart, globalGr, (x) => restart(c, [...path, 'gracefulRestart'], x, globalGr));
  const rules = (k: 'import' | 'export') =>
    o[k] === undefined ? undefined : c.list([...path, k], o[k], (p, x) => prefixRule(c, p, x));
  const imp = rules('import');
  const exp = rules('export');
  if (address === undefined || peerAs === undefined || port === undefined || families === undefined ||
      holdTime === undefined || passive === undefined || gracefulRestart === undefined) return undefined;
  if (o.sendHoldTime !== undefined && sendHoldTime === undefined) return undefined;
  const p: PeerConfig = { address, asn: peerAs, port, families, holdTime, passive, gracefulRestart };
  if (sendHoldTime !== undefined) p.sendHoldTime = sendHoldTime;
  if (imp) p.import = imp;
  if (exp) p.export = exp;
  if (o.maxPrefixes !== undefined) {
    const mp = maxPrefixes(c, [...path, 'maxPrefixes'], o.maxPrefixes);
    if (mp === undefined) return undefined;
    p.maxPrefixes = mp;
  }
  if (!peerSecurityFields(c, path, o, p)) return undefined;
  if (o.bfd !== undefined) {
    const bfd = bfdField(c, [...path, 'bfd'], o.bfd);
    if (bfd === undefined) return undefined;
    if (bfd) p.bfd = bfd;
  }
  const asOpts = peerAsOptions(c, path, o);
  if (asOpts === undefined) return undefined;
  Object.assign(p, asOpts);
  return p;
}

/** The largest timer setTimeout keeps (2^31 - 1 ms), in whole seconds. */
const MAX_SEND_HOLD_TIME = 2147483;

/** peers[].sendHoldTime (RFC 9687 4): 0 (off), or seconds more than the hold time; meaningless with hold time 0. */
function sendHold(c: Checker, path: Path, x: unknown, holdTime: number | undefined): number | undefined {
  if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > MAX_SEND_HOLD_TIME) return c.bad(path, `0 (off) or seconds up to ${MAX_SEND_HOLD_TIME}`, x);
  if (x === 0 || holdTime === undefined) return x;
  if (holdTime === 0) return c.fail(path, `has no effect with holdTime 0 (no Send Hold Timer without a hold time, RFC 9687); leave it out, got ${x}`);
  if (x <= holdTime) return c.fail(path, `must be more than holdTime (${holdTime}) (RFC 9687 4), or 0 (off), got ${x}`);
  return x;
}

const BGP_FIELDS = ['asn', 'routerId', 'listen', 'gracefulRestart', 'peers', 'announce', 'nodeToNodeMeshEnabled', ...COMMUNITY_BGP_FIELDS, ...MESH_BGP_FIELDS] as const;

function bgpSection(c: Checker, v: unknown, platform: Platform): BgpConfig | undefined {
  const o = c.object(['bgp'], v, BGP_FIELDS, ['asn']);
  if (!o) return undefined;
  const localAs = o.asn == null ? undefined : asn(c, ['bgp', 'asn'], o.asn);
  // Absent: the node's IPv4 address from NODE_IP (./pod-env.ts), so one config serves every node.
  const advice = placeholderAdvice(o.routerId);
  const routerId = advice ? c.fail(['bgp', 'routerId'], advice)
    : o.routerId == null ? routerIdFromEnv(c, platform.env) : ipAddress(c, ['bgp', 'routerId'], o.routerId, 4);
  if (routerId === '0.0.0.0') c.fail(['bgp', 'routerId'], 'must not be 0.0.0.0'); // RFC 6286: non-zero
  // "::" is dual-stack (IPv4-mapped too), so IPv6 peers can connect as well as IPv4 ones.
  const lst = c.opt(o.listen, { ...DEFAULT_BGP_LISTEN } as ListenAddress | false, (x) =>
    x === false ? false : listen(c, ['bgp', 'listen'], x, DEFAULT_BGP_LISTEN));
  const gr = c.opt(o.gracefulRestart, { restartTime: DEFAULT_RESTART_TIME } as PeerGracefulRestart | false, (x) =>
    restart(c, ['bgp', 'gracefulRestart'], x, { restartTime: DEFAULT_RESTART_TIME }));
  const peers = c.list(['bgp', 'peers'], o.peers, (p, x) => peer(c, p, x, gr || false));
  const seen = new Map<string, number>();
  if (Array.isArray(o.peers)) {
    o.peers.forEach((x, i) => {
      if (!isPlainObject(x) || typeof x.address !== 'string') return;
      let key: string;
      try {
        key = formatIP(parseIP(x.address));
      } catch {
        return;
      }
      if (seen.has(key)) c.fail(['bgp', 'peers', i, 'address'], `duplicate peer ${key} (also bgp.peers[${seen.get(key)}])`);
      else seen.set(key, i);
    });
  }
  const announce = c.list(['bgp', 'announce'], o.announce, (p, x) => prefix(c, p, x));
  const mesh = c.opt(o.nodeToNodeMeshEnabled, undefined as boolean | undefined, (x) => c.bool(['bgp', 'nodeToNodeMeshEnabled'], x));
  if (localAs === undefined || routerId === undefined || lst === undefined || gr === undefined) return undefined;
  const out: BgpConfig = {
    asn: localAs,
    routerId,
    listen: lst && lst.port !== 0 ? lst : false,
    gracefulRestart: gr,
    peers,
    announce: [...new Set(announce)],
  };
  if (mesh !== undefined) out.nodeToNodeMeshEnabled = mesh;
  Object.assign(out, bgpCommunities(c, o));
  Object.assign(out, meshPasswordField(c, o));
  return out;
}

// ---- ipam ------------------------------------------------------------------------------------------------------

const POOL_FIELDS = ['name', 'cidr', 'blockSize', 'nodeSelector', 'disabled', 'allowedUses', 'natOutgoing', 'disableBGPExport', 'reservation'] as const;

function reservation(c: Checker, path: Path, v: unknown): ReservationConfig | undefined {
  if (typeof v === 'string') v = { kind: v };
  const base = c.object(path, v, ['kind', 'start', 'end', 'count'], ['kind']);
  if (!base) return undefined;
  const kind = base.kind == null ? undefined : c.oneOf([...path, 'kind'], base.kind, ['auto', 'perBlock', 'perHost', 'perPool', 'none'] as const);
  if (kind === undefined) return undefined;
  const allowed: Record<string, string[]> = { auto: [], none: [], perBlock: ['start', 'end'], perHost: ['count'], perPool: ['count'] };
  for (const k of ['start', 'end', 'count']) {
    if (base[k] !== undefined && !allowed[kind].includes(k)) c.fail([...path, k], `not used with kind ${kind}`);
  }
  const n = (k: string, def: number) => c.opt(base[k], def, (x) => c.int([...path, k], x, 0, 65536));
  if (kind === 'perBlock') {
    const start = n('start', 0);
    const end = n('end', 0);
    return start === undefined || end === undefined ? undefined : { kind, start, end };
  }
  if (kind === 'perHost' || kind === 'perPool') {
    const count = n('count', 1);
    return count === undefined ? undefined : { kind, count };
  }
  return { kind };
}

function pool(c: Checker, path: Path, v: unknown): PoolConfig | undefined {
  const o = c.object(path, v, POOL_FIELDS, ['name', 'cidr']);
  if (!o) return undefined;
  const name = o.name == null ? undefined : c.string([...path, 'name'], o.name);
  const cidr = o.cidr == null ? undefined : prefix(c, [...path, 'cidr'], o.cidr);
  const fam = cidr ? parsePrefix(cidr).family : 4;
  const [lo, hi] = fam === 4 ? [20, 32] : [116, 128];
  const blockSize = c.opt(o.blockSize, fam === 4 ? 26 : 122, (x) => c.int([...path, 'blockSize'], x, lo, hi));
  if (cidr && blockSize !== undefined && blockSize < parsePrefix(cidr).len) {
    c.fail([...path, 'blockSize'], `must not be shorter than the pool's prefix length ${parsePrefix(cidr).len}, got ${blockSize}`);
  }
  const nodeSelector = c.opt(o.nodeSelector, 'all()', (x) => c.string([...path, 'nodeSelector'], x));
  const flag = (k: string) => c.opt(o[k], false, (x) => c.bool([...path, k], x));
  const disabled = flag('disabled');
  const natOutgoing = flag('natOutgoing');
  const disableBGPExport = flag('disableBGPExport');
  const allowedUses = c.opt(o.allowedUses, ['Workload', 'Tunnel'] as ('Workload' | 'Tunnel')[], (x) =>
    c.list([...path, 'allowedUses'], x, (p, u) => c.oneOf(p, u, ['Workload', 'Tunnel'] as const)));
  const res = c.opt(o.reservation, { kind: 'auto' } as ReservationConfig, (x) => reservation(c, [...path, 'reservation'], x));
  if (name === undefined || cidr === undefined || blockSize === undefined || nodeSelector === undefined ||
      disabled === undefined || natOutgoing === undefined || disableBGPExport === undefined ||
      allowedUses === undefined || res === undefined) return undefined;
  return { name, cidr, blockSize, nodeSelector, disabled, allowedUses, natOutgoing, disableBGPExport, reservation: res };
}

function ipamSection(c: Checker, v: unknown, platform: Platform): IpamConfig | undefined {
  const P = ['ipam'];
  const o = c.object(P, v, ['store', 'strictAffinity', 'maxBlocksPerHost', 'autoAllocateBlocks', 'ipCooldownSeconds', 'pools', 'calico', 'etcd', 'layout']);
  if (!o) return undefined;
  const store = c.opt(o.store, DEFAULT_STORE, (x) => {
    // { file: PATH }: the store (the etcd endpoints) is that file's content, e.g. a mounted Secret's (./pod-env.ts).
    const s = isStoreRef(x) ? storeFromFile(c, [...P, 'store'], x, platform) : c.string([...P, 'store'], x);
    const m = s === undefined ? null : /^etcds?:\/\/(.*)$/.exec(s);
    if (m) {
      const eps = m[1].split(',');
      if (eps.some((e) => !/^[^\s:/,]+:\d{1,5}$/.test(e) && !/^\[[0-9a-fA-F:.]+\]:\d{1,5}$/.test(e))) {
        return c.bad([...P, 'store'], 'a directory or etcd://host:port[,host:port...] (etcds:// for TLS)', s);
      }
    }
    return s;
  });
  const etcd = o.etcd === undefined || o.etcd === null ? undefined : etcdSecurity(c, [...P, 'etcd'], o.etcd, store);
  const strictAffinity = c.opt(o.strictAffinity, false, (x) => c.bool([...P, 'strictAffinity'], x));
  const autoAllocateBlocks = c.opt(o.autoAllocateBlocks, true, (x) => c.bool([...P, 'autoAllocateBlocks'], x));
  const maxBlocksPerHost = c.opt(o.maxBlocksPerHost, 0, (x) => c.int([...P, 'maxBlocksPerHost'], x, 0, 1_000_000));
  const ipCooldownSeconds = c.opt(o.ipCooldownSeconds, 0, (x) => c.int([...P, 'ipCooldownSeconds'], x, 0, 86_400));
  const pools = c.list([...P, 'pools'], o.pools, (p, x) => pool(c, p, x));
  // Paths only: the files are read (and their objects checked) by the daemon, which reports them by file and document.
  const calico = c.opt(o.calico, [] as string[], (x) => c.list([...P, 'calico'], x, (p, f) => c.string(p, f)));
  const names = new Map<string, number>();
  if (Array.isArray(o.pools)) {
    o.pools.forEach((x, i) => {
      if (!isPlainObject(x) || typeof x.name !== 'string') return;
      if (names.has(x.name)) c.fail([...P, 'pools', i, 'name'], `duplicate pool name ${show(x.name)} (also ipam.pools[${names.get(x.name)}])`);
      else names.set(x.name, i);
    });
  }
  const layout = c.opt(o.layout, 'blockspeaker' as const, (x) => c.oneOf([...P, 'layout'], x, ['blockspeaker', 'calico'] as const));
  if (layout === 'calico' && store !== undefined && !isEtcdUrl(store)) {
    c.fail([...P, 'layout'], `calico shares Calico's etcd with calico-node, so ipam.store must be etcd://host:port, got ${show(store)}`);
  }
  if (store === undefined || strictAffinity === undefined || autoAllocateBlocks === undefined ||
      maxBlocksPerHost === undefined || ipCooldownSeconds === undefined || calico === undefined || layout === undefined) return undefined;
  if (o.etcd !== undefined && o.etcd !== null && etcd === undefined) return undefined;
  const out: IpamConfig = { store, strictAffinity, maxBlocksPerHost, autoAllocateBlocks, ipCooldownSeconds, pools, calico, layout };
  if (etcd) out.etcd = etcd;
  return out;
}

/** ipam.etcd: TLS files and user/password for an etcd store; secrets only by reference (a file or a variable). */
function etcdSecurity(c: Checker, path: Path, v: unknown, store: string | undefined): EtcdSecurity | undefined {
  const o = c.object(path, v, ['ca', 'cert', 'key', 'username', 'password', 'allowInsecure']);
  if (!o) return undefined;
  if (store !== undefined && !isEtcdUrl(store)) {
    c.fail(path, `only for an etcd store (ipam.store etcd://... or etcds://...), but ipam.store is the directory ${show(store)}`);
    return undefined;
  }
  const file = (k: 'ca' | 'cert' | 'key') => c.opt(o[k], undefined, (x) => {
    const f = c.string([...path, k], x);
    // Relative to what? The daemon's working directory is not the config's: ask for an absolute path.
    return f !== undefined && !posix.isAbsolute(f) && !win32.isAbsolute(f) ? c.bad([...path, k], 'an absolute path to a PEM file', f) : f;
  });
  const ca = file('ca');
  const cert = file('cert');
  const key = file('key');
  const username = c.opt(o.username, undefined, (x) => c.string([...path, 'username'], x));
  const password = c.opt(o.password, undefined, (x): SecretSource | undefined => secretSource(c, [...path, 'password'], x));
  const allowInsecure = c.opt(o.allowInsecure, undefined, (x) => c.bool([...path, 'allowInsecure'], x));
  const out: EtcdSecurity = {};
  if (allowInsecure !== undefined) out.allowInsecure = allowInsecure;
  if (ca !== undefined) out.ca = ca;
  if (cert !== undefined) out.cert = cert;
  if (key !== undefined) out.key = key;
  if (username !== undefined) out.username = username;
  if (password !== undefined) out.password = password;
  if ((o.ca !== undefined && ca === undefined) || (o.cert !== undefined && cert === undefined) ||
      (o.key !== undefined && key === undefined) || (o.username !== undefined && username === undefined) ||
      (o.password !== undefined && password === undefined) || (o.allowInsecure !== undefined && allowInsecure === undefined)) return undefined;
  // A store already reported as bad (or a store file that cannot be read) is not also a TLS mismatch.
  const problems = checkEtcdSecurity(out, store === undefined || store.startsWith('etcds://'));
  for (const pr of problems) c.fail([...path, pr.field], pr.message);
  if (problems.length) return undefined;
  return out;
}

// ---- dataplane, status, ipc ------------------------------------------------------------------------------------

function dataplaneSection(c: Checker, v: unknown): DataplaneConfig | undefined {
  if (v === undefined || v === null) return { kind: 'none' };
  const P = ['dataplane'];
  if (!isPlainObject(v)) return c.bad(P, 'a mapping with kind: none | linux | hns', v);
  const kind = c.opt(v.kind, 'none' as const, (x) => c.oneOf([...P, 'kind'], x, ['none', 'linux', 'hns'] as const));
  if (kind === undefined) {
    c.object(P, v, [...new Set(['kind', 'table', 'protocol', 'bridge', ...HNS_FIELDS])]);
    return undefined;
  }
  if (kind === 'none') {
    c.object(P, v, ['kind']);
    return { kind };
  }
  if (kind === 'linux') {
    const o = c.object(P, v, ['kind', 'table', 'protocol', 'bridge'])!;
    const table = c.opt(o.table, 254, (x) => c.int([...P, 'table'], x, 1, 4294967295));
    // Our own route protocol number, so the programmer can tell its routes from everyone else's.
    const protocol = c.opt(o.protocol, 201, (x) => c.int([...P, 'protocol'], x, 1, 255));
    const bridge = c.opt(o.bridge, undefined, (x) => {
      const b = c.string([...P, 'bridge'], x);
      return b !== undefined && !/^[^\s/:]{1,15}$/.test(b) ? c.bad([...P, 'bridge'], 'an interface name (1..15 characters, no spaces, "/" or ":")', b) : b;
    });
    if (table === undefined || protocol === undefined || (o.bridge !== undefined && bridge === undefined)) return undefined;
    return bridge === undefined ? { kind, table, protocol } : { kind, table, protocol, bridge };
  }
  return hnsDataplane(c, P, c.object(P, v, HNS_FIELDS)!);
}

function statusSection(c: Checker, v: unknown): StatusConfig | false | undefined {
  if (v === false) return false;
  if (v === undefined || v === null) return { listen: { ...DEFAULT_STATUS_LISTEN } };
  const o = c.object(['status'], v, ['listen', 'metricsListen']);
  if (!o) return undefined;
  const l = c.opt(o.listen, { ...DEFAULT_STATUS_LISTEN }, (x) => listen(c, ['status', 'listen'], x, DEFAULT_STATUS_LISTEN));
  const m = c.opt(o.metricsListen, undefined, (x) => listen(c, ['status', 'metricsListen'], x, null));
  if (l && m && listensOverlap(l, m)) {
    // Caught here rather than as EADDRINUSE when the daemon starts (or, on a reload, a listener that cannot move).
    c.fail(['status', 'metricsListen'], `${formatListen(m)} overlaps status.listen ${formatListen(l)} (the same port on the same or a covering address); give it its own port`);
    return undefined;
  }
  if (l === undefined || (o.metricsListen !== undefined && m === undefined)) return undefined;
  return m ? { listen: l, metricsListen: m } : { listen: l };
}

export const formatListen = (l: ListenAddress): string => `${l.address.includes(':') ? `[${l.address}]` : l.address}:${l.port}`;

/**
 * Two TCP listeners that cannot both bind: the same non-zero port, and addresses one socket would take from the
 * other. "::" is a dual-stack socket in Node (ipv6Only off), so it takes the IPv4 port too; a v4-mapped IPv6
 * address is its IPv4 address.
 */
export function listensOverlap(a: ListenAddress, b: ListenAddress): boolean {
  if (a.port !== b.port || a.port === 0) return false;
  const unmapped = (text: string) => {
    const ip = parseIP(text);
    return ip.family === 6 && ip.w0 === 0 && ip.w1 === 0 && ip.w2 === 0xffff ? new IP(4, ip.w3) : ip;
  };
  const x = formatIP(unmapped(a.address));
  const y = formatIP(unmapped(b.address));
  const v4 = (s: string) => !s.includes(':');
  if (x === y || x === '::' || y === '::') return true;
  return (x === '0.0.0.0' && v4(y)) || (y === '0.0.0.0' && v4(x));
}

function ipcSection(c: Checker, v: unknown): IpcConfig | false | undefined {
  if (v === false) return false;
  if (v === undefined || v === null) return { path: DEFAULT_IPC_PATH };
  const o = c.object(['ipc'], v, ['path']);
  if (!o) return undefined;
  const path = c.opt(o.path, DEFAULT_IPC_PATH, (x) => c.string(['ipc', 'path'], x));
  return path === undefined ? undefined : { path };
}
