// blockspeaker-cni: a CNI plugin (spec 1.1, 1.0, and 0.3.x/0.4.0 configs) that asks the node daemon over its
// control socket. Env and stdin in, a result or a CNI error object out. Two roles, told apart by the config's type:
//  - IPAM plugin (`"ipam": {"type": "blockspeaker-cni"}` under another main plugin): ipam.* methods, addresses only;
//  - main plugin (`"type": "blockspeaker"`, Windows): cni.* methods; the daemon creates the pod's HCN endpoint and
//    attaches it to the pod's namespace (src/daemon/cni-windows.ts), and the result carries the interface.
//
// Startup cost matters (one process per pod), so this file and what it imports use node builtins only: all
// address arithmetic (prefix lengths, gateways, routes) is done by the daemon.
import { isIP } from 'node:net';
import { IpcClient, IpcError } from '../ipc/client.ts';
import {
  DEFAULT_SOCKET, RESERVED_HANDLE_PREFIX, isReservedContainerId, type AssignReply, type Addressing, type AvailableReply, type CheckReply, type CniAddReply, type CniRoute, type StatusReply,
} from '../ipc/protocol.ts';

export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
const LATEST = '1.1.0';

/** Well-known CNI error codes, and this plugin's own (100+). */
export const Codes = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  unknownContainer: 3,
  invalidEnv: 4,
  ioFailure: 5,
  decodeFailure: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  notAvailable: 50,
  limitedConnectivity: 51,
  /** The daemon could not assign the requested addresses (pools exhausted, or none for this node). */
  noAddresses: 100,
  /** CHECK: the daemon does not hold exactly the addresses of prevResult for this attachment. */
  checkMismatch: 101,
  internal: 999,
} as const;

export interface CniInvocation {
  env: Record<string, string | undefined>;
  stdin: string;
}

export interface CniOutcome {
  /** What goes to stdout ('' for success without a result). */
  stdout: string;
  exitCode: number;
}

/** A failure with its CNI code; becomes the error object on stdout. */
export class CniError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details?: string,
  ) {
    super(message);
  }
}

const fail = (code: number, msg: string, details?: string): never => {
  throw new CniError(code, msg, details);
};

type Cmd = 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'GC' | 'STATUS';
const COMMANDS: Cmd[] = ['ADD', 'DEL', 'CHECK', 'VERSION', 'GC', 'STATUS'];

function versionTuple(v: string): number[] {
  return v.split('.').map((x) => Number(x));
}
function versionAtLeast(v: string, min: string): boolean {
  const a = versionTuple(v);
  const b = versionTuple(min);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
}

// ---- environment --------------------------------------------------------------------------------------------------

const REQUIRED_ENV: Record<Cmd, string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  GC: ['CNI_PATH'],
  STATUS: ['CNI_PATH'],
  VERSION: [],
};

function checkEnv(cmd: Cmd, env: CniInvocation['env']): void {
  const missing = REQUIRED_ENV[cmd].filter((k) => !env[k]);
  if (missing.length) fail(Codes.invalidEnv, `required environment variables missing for ${cmd}: ${missing.join(', ')}`);
  const id = env.CNI_CONTAINERID;
  if (REQUIRED_ENV[cmd].includes('CNI_CONTAINERID') && !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(id!)) {
    fail(Codes.invalidEnv, `CNI_CONTAINERID "${id}" is not valid: a letter or digit, then letters, digits, "_", "." or "-"`);
  }
  if (REQUIRED_ENV[cmd].includes('CNI_CONTAINERID') && isReservedContainerId(id!)) {
    fail(Codes.invalidEnv, `CNI_CONTAINERID "${id}" starts with ${RESERVED_HANDLE_PREFIX}, which names the node's own addresses, never a container's`);
  }
  const ifname = env.CNI_IFNAME;
  if (REQUIRED_ENV[cmd].includes('CNI_IFNAME')) {
    if (ifname!.length > 15) fail(Codes.invalidEnv, `CNI_IFNAME "${ifname}" is longer than 15 characters`);
    if (ifname === '.' || ifname === '..' || /[/:\s]/.test(ifname!)) fail(Codes.invalidEnv, `CNI_IFNAME "${ifname}" is not a valid interface name`);
  }
}

/** CNI_ARGS "K=V;K2=V2": the Kubernetes pod identity, kept as allocation attributes. */
function podAttrs(cniArgs: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of (cniArgs ?? '').split(';')) {
    const eq = kv.indexOf('=');
    if (eq <= 0) continue;
    const k = kv.slice(0, eq).trim();
    const v = kv.slice(eq + 1).trim();
    if (k === 'K8S_POD_NAMESPACE') out['k8s.namespace'] = v;
    else if (k === 'K8S_POD_NAME') out['k8s.pod'] = v;
  }
  return out;
}

// ---- network configuration ----------------------------------------------------------------------------------------

interface IpamConf {
  socket: string;
  num4: number;
  num6: number;
  pools?: string[];
  addressing: Addressing;
  dns?: Record<string, unknown>;
  timeoutMs: number;
}

/** Main-plugin mode: what the daemon gets beside the attachment (it derives the rest from its own config). */
interface MainConf {
  /** Per-family overrides (0 or 1); left out, the daemon gives one per family this node has a pool of. */
  num4?: number;
  num6?: number;
  pools?: string[];
  dns?: Record<string, unknown>;
  runtimeConfig?: Record<string, unknown>;
}

interface NetConf {
  cniVersion: string;
  name: string;
  ipam: IpamConf;
  /** Set when the config's type is blockspeaker: the plugin is the main plugin. */
  main?: MainConf;
  raw: Record<string, unknown>;
}

/** The config's `type` that makes this the main plugin (the IPAM type is blockspeaker-cni). */
export const MAIN_TYPE = 'blockspeaker';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** "a.b.c.d/len" or "x::y/len" (syntax only; the daemon does the arithmetic). */
function isCidr(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  const slash = text.indexOf('/');
  if (slash < 0) return false;
  const fam = isIP(text.slice(0, slash));
  const len = text.slice(slash + 1);
  return fam !== 0 && /^\d{1,3}$/.test(len) && Number(len) <= (fam === 4 ? 32 : 128);
}

function decode(stdin: string): Record<string, unknown> {
  if (stdin.trim() === '') fail(Codes.decodeFailure, 'no network configuration on stdin');
  let v: unknown;
  try {
    v = JSON.parse(stdin);
  } catch (e) {
    return fail(Codes.decodeFailure, `network configuration on stdin is not JSON: ${(e as Error).message}`);
  }
  if (!isObject(v)) fail(Codes.decodeFailure, 'network configuration on stdin must be a JSON object');
  return v as Record<string, unknown>;
}

function checkVersion(raw: Record<string, unknown>, cmd: Cmd): string {
  const v = raw.cniVersion;
  if (v !== undefined && typeof v !== 'string') fail(Codes.decodeFailure, 'cniVersion must be a string');
  const version = (v as string | undefined) ?? '0.1.0'; // the spec's reading of a config without cniVersion
  if (!(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
    fail(Codes.incompatibleVersion, `incompatible CNI versions: config is "${version}", plugin supports ${JSON.stringify(SUPPORTED_VERSIONS)}`);
  }
  if (cmd === 'CHECK' && !versionAtLeast(version, '0.4.0')) fail(Codes.incompatibleVersion, `config version ${version} does not allow CHECK (0.4.0 or later)`);
  if ((cmd === 'GC' || cmd === 'STATUS') && !versionAtLeast(version, '1.1.0')) fail(Codes.incompatibleVersion, `config version ${version} does not allow ${cmd} (1.1.0 or later)`);
  return version;
}

/**
 * Main-plugin config: `socket`, `timeoutMs`, `num4`/`num6` (0 or 1), `pools` and `dns` at the top level; an `ipam`
 * section is optional (its socket and timeoutMs are read when the top level has none).
 */
function parseMainConf(raw: Record<string, unknown>, version: string): NetConf {
  const bad = (msg: string): never => fail(Codes.invalidConfig, msg);
  if (raw.ipam !== undefined && !isObject(raw.ipam)) bad('ipam must be an object when given');
  const ipam = (raw.ipam ?? {}) as Record<string, unknown>;
  const socket = raw.socket ?? ipam.socket ?? DEFAULT_SOCKET;
  if (typeof socket !== 'string' || socket === '') bad('socket must be a path');
  const timeout = raw.timeoutMs ?? ipam.timeoutMs;
  if (timeout !== undefined && (!Number.isInteger(timeout) || (timeout as number) < 0 || (timeout as number) > 600_000)) bad('timeoutMs must be a whole number from 0 to 600000');
  const fam = (k: 'num4' | 'num6'): number | undefined => {
    const x = raw[k];
    if (x !== undefined && x !== 0 && x !== 1) bad(`${k} must be 0 or 1 (an endpoint holds one address per family)`);
    return x as number | undefined;
  };
  const num4 = fam('num4');
  const num6 = fam('num6');
  if (num4 === 0 && num6 === 0) bad('num4 and num6 are both 0: nothing to assign');
  let pools: string[] | undefined;
  if (raw.pools !== undefined) {
    if (!Array.isArray(raw.pools) || raw.pools.some((p) => typeof p !== 'string' || p === '')) bad('pools must be a list of pool names or cidrs');
    pools = raw.pools as string[];
  }
  if (raw.dns !== undefined && !isObject(raw.dns)) bad('dns must be an object {nameservers, domain, search, options}');
  if (raw.runtimeConfig !== undefined && !isObject(raw.runtimeConfig)) bad('runtimeConfig must be an object');
  const main: MainConf = {};
  if (num4 !== undefined) main.num4 = num4;
  if (num6 !== undefined) main.num6 = num6;
  if (pools) main.pools = pools;
  if (raw.dns !== undefined) main.dns = raw.dns as Record<string, unknown>;
  if (raw.runtimeConfig !== undefined) main.runtimeConfig = raw.runtimeConfig as Record<string, unknown>;
  return {
    cniVersion: version,
    name: raw.name as string,
    ipam: { socket: socket as string, num4: num4 ?? 0, num6: num6 ?? 0, pools, addressing: {}, timeoutMs: (timeout as number | undefined) ?? 15_000 },
    main,
    raw,
  };
}

function parseConf(raw: Record<string, unknown>, version: string): NetConf {
  const bad = (msg: string): never => fail(Codes.invalidConfig, msg);
  if (typeof raw.name !== 'string' || raw.name === '') bad('network configuration has no "name"');
  if (raw.type === MAIN_TYPE) return parseMainConf(raw, version);
  const ipam = raw.ipam;
  if (!isObject(ipam)) return bad('network configuration has no "ipam" object');
  const socket = ipam.socket ?? DEFAULT_SOCKET;
  if (typeof socket !== 'string' || socket === '') bad('ipam.socket must be a path');
  const int = (k: string, max: number): number | undefined => {
    const x = ipam[k];
    if (x === undefined) return undefined;
    if (!Number.isInteger(x) || (x as number) < 0 || (x as number) > max) bad(`ipam.${k} must be a whole number from 0 to ${max}`);
    return x as number;
  };
  const n4 = int('num4', 16);
  const n6 = int('num6', 16);
  const num4 = n4 ?? (n6 === undefined ? 1 : 0);
  const num6 = n6 ?? 0;
  if (num4 + num6 === 0) bad('ipam.num4 and ipam.num6 are both 0: nothing to assign');
  let pools: string[] | undefined;
  if (ipam.pools !== undefined) {
    if (!Array.isArray(ipam.pools) || ipam.pools.some((p) => typeof p !== 'string' || p === '')) bad('ipam.pools must be a list of pool names or cidrs');
    pools = ipam.pools as string[];
  }
  const addressing: Addressing = {};
  if (ipam.prefix !== undefined) {
    if (ipam.prefix !== 'pool' && ipam.prefix !== 'host') bad(`ipam.prefix must be "pool" or "host", got ${JSON.stringify(ipam.prefix)}`);
    addressing.prefix = ipam.prefix as 'pool' | 'host';
  }
  const gw = ipam.gateway;
  if (gw !== undefined) {
    if (gw === 'auto' || gw === 'none') addressing.gateway = gw;
    else {
      const list = typeof gw === 'string' ? [gw] : gw;
      if (!Array.isArray(list) || list.length === 0 || list.some((g) => typeof g !== 'string' || isIP(g) === 0)) {
        bad('ipam.gateway must be "auto", "none", an address, or a list of addresses (one per family)');
      }
      addressing.gateway = list as string[];
    }
  }
  if (ipam.poolRoutes !== undefined) {
    if (typeof ipam.poolRoutes !== 'boolean') bad('ipam.poolRoutes must be true or false');
    addressing.poolRoutes = ipam.poolRoutes as boolean;
  }
  if (ipam.routes !== undefined) {
    if (!Array.isArray(ipam.routes)) bad('ipam.routes must be a list of {"dst": CIDR, "gw"?: address}');
    addressing.routes = (ipam.routes as unknown[]).map((r, i) => {
      if (!isObject(r) || !isCidr(r.dst)) return bad(`ipam.routes[${i}].dst must be a CIDR such as "0.0.0.0/0"`);
      if (r.gw !== undefined && (typeof r.gw !== 'string' || isIP(r.gw) === 0)) bad(`ipam.routes[${i}].gw must be an address`);
      return r.gw === undefined ? { dst: r.dst as string } : { dst: r.dst as string, gw: r.gw as string };
    });
  }
  if (ipam.dns !== undefined && !isObject(ipam.dns)) bad('ipam.dns must be an object {nameservers, domain, search, options}');
  const timeoutMs = int('timeoutMs', 600_000) ?? 15_000;
  return {
    cniVersion: version,
    name: raw.name as string,
    ipam: { socket: socket as string, num4, num6, pools, addressing, dns: ipam.dns as Record<string, unknown> | undefined, timeoutMs },
    raw,
  };
}

// ---- talking to the daemon ----------------------------------------------------------------------------------------

/** Map a failed daemon call to a CNI error. `unreachable` is the code for "daemon down" (11, or 50 for STATUS). */
function daemonError(e: unknown, what: string, unreachable: number = Codes.tryAgainLater): CniError {
  if (e instanceof CniError) return e;
  if (e instanceof IpcError) {
    switch (e.code) {
      case 'NOT_RUNNING':
      case 'CLOSED':
      case 'TIMEOUT':
        return new CniError(unreachable, `${what}: ${e.message}`);
      case 'PERMISSION':
        return new CniError(unreachable === Codes.tryAgainLater ? Codes.ioFailure : unreachable, `${what}: ${e.message}`);
      case 'PROTOCOL':
        return new CniError(Codes.internal, `${what}: ${e.message}`);
      case 'REMOTE':
        switch (e.remoteCode) {
          case 'INVALID':
          case 'NO_POOL_FOR_USE':
          case 'POOL_DISABLED':
            return new CniError(Codes.invalidConfig, `${what}: ${e.message}`);
          case 'NO_POOL':
          case 'EXHAUSTED':
            return new CniError(Codes.noAddresses, `${what}: ${e.message}`);
          case 'CONTENTION':
          case 'UNKNOWN_HOST':
          case 'NOT_READY':
          case 'NO_NETWORK':
          case 'HCN_UNAVAILABLE':
            return new CniError(Codes.tryAgainLater, `${what}: ${e.message}`);
          case 'CHECK_MISMATCH':
            return new CniError(Codes.checkMismatch, e.message);
          case 'UNKNOWN_NETNS':
            return new CniError(Codes.unknownContainer, `${what}: ${e.message}`);
          case 'UNKNOWN_METHOD':
            // Main mode asked a daemon that has no HNS dataplane (a Linux node, or dataplane kind not hns).
            if (e.message.includes('"cni.')) {
              return new CniError(Codes.invalidConfig, `${what}: the daemon does not serve blockspeaker as the main plugin (type "${MAIN_TYPE}" needs the Windows HNS dataplane): ${e.message}`);
            }
            return new CniError(Codes.internal, `${what}: ${e.message}`, e.remoteCode);
          default:
            return new CniError(Codes.internal, `${what}: ${e.message}`, e.remoteCode);
        }
    }
  }
  return new CniError(Codes.internal, `${what}: ${(e as Error)?.message ?? String(e)}`);
}

// ---- results ------------------------------------------------------------------------------------------------------

function resultFor(conf: NetConf, reply: AssignReply): Record<string, unknown> {
  const v1 = versionAtLeast(conf.cniVersion, '1.0.0');
  const v11 = versionAtLeast(conf.cniVersion, '1.1.0');
  const cni = reply.cni!;
  const ips = cni.ips.map((ip) => {
    const o: Record<string, unknown> = v1 ? {} : { version: String(ip.family) };
    o.address = ip.address;
    if (ip.gateway) o.gateway = ip.gateway;
    return o;
  });
  const routes = cni.routes.map((r: CniRoute) => {
    const o: Record<string, unknown> = { dst: r.dst };
    if (r.gw) o.gw = r.gw;
    if (v11 && r.scope !== undefined) o.scope = r.scope;
    return o;
  });
  const out: Record<string, unknown> = { cniVersion: conf.cniVersion, ips };
  if (routes.length) out.routes = routes;
  out.dns = conf.ipam.dns ?? {};
  return out;
}

/** The addresses of a prevResult, for CHECK. */
function prevResultIPs(conf: NetConf): string[] {
  const prev = conf.raw.prevResult;
  if (prev === undefined) fail(Codes.invalidConfig, 'CHECK needs "prevResult" in the network configuration');
  if (!isObject(prev)) fail(Codes.decodeFailure, 'prevResult must be an object');
  const ips = (prev as Record<string, unknown>).ips;
  if (ips === undefined) return [];
  if (!Array.isArray(ips)) return fail(Codes.decodeFailure, 'prevResult.ips must be a list');
  return ips.map((ip, i) => {
    if (!isObject(ip) || !isCidr(ip.address)) return fail(Codes.decodeFailure, `prevResult.ips[${i}].address must be a CIDR address`);
    return ip.address as string;
  });
}

// ---- commands -----------------------------------------------------------------------------------------------------

function client(conf: NetConf): IpcClient {
  return new IpcClient(conf.ipam.socket, { connectTimeoutMs: 2000, timeoutMs: conf.ipam.timeoutMs });
}

async function add(conf: NetConf, env: CniInvocation['env']): Promise<string> {
  const containerId = env.CNI_CONTAINERID!;
  const ifname = env.CNI_IFNAME!;
  const c = client(conf);
  try {
    const reply = await c.call('ipam.assign', {
      containerId,
      ifname,
      num4: conf.ipam.num4,
      num6: conf.ipam.num6,
      pools: conf.ipam.pools,
      attrs: { 'cni.network': conf.name, 'cni.containerID': containerId, 'cni.ifname': ifname, ...podAttrs(env.CNI_ARGS) },
      addressing: conf.ipam.addressing,
    });
    return JSON.stringify(resultFor(conf, reply));
  } catch (e) {
    throw daemonError(e, 'ADD');
  } finally {
    void c.close();
  }
}

async function del(conf: NetConf, env: CniInvocation['env']): Promise<void> {
  const c = client(conf);
  try {
    // Idempotent: an unknown handle releases nothing and succeeds. A daemon that is down cannot release, so that
    // is an error (try again later) rather than a silent leak.
    await c.call('ipam.release', { handle: `${env.CNI_CONTAINERID}.${env.CNI_IFNAME}` });
  } catch (e) {
    throw daemonError(e, 'DEL');
  } finally {
    void c.close();
  }
}

async function check(conf: NetConf, env: CniInvocation['env']): Promise<void> {
  const want = prevResultIPs(conf);
  const handle = `${env.CNI_CONTAINERID}.${env.CNI_IFNAME}`;
  const c = client(conf);
  let r: CheckReply;
  try {
    r = await c.call('ipam.check', { handle, ips: want });
  } catch (e) {
    throw daemonError(e, 'CHECK');
  } finally {
    void c.close();
  }
  if (!r.ok) {
    const parts = [];
    if (r.missing.length) parts.push(`not held: ${r.missing.join(', ')}`);
    if (r.extra.length) parts.push(`held but not in prevResult: ${r.extra.join(', ')}`);
    fail(Codes.checkMismatch, `CHECK ${handle}: the daemon's allocation differs from prevResult (${parts.join('; ')})`);
  }
}

/** The runtime's valid attachments for GC. */
function validAttachments(conf: NetConf): { containerID: string; ifname: string }[] {
  // libcni sends both names (an early draft used cni.dev/attachments).
  const list = conf.raw['cni.dev/valid-attachments'] ?? conf.raw['cni.dev/attachments'] ?? [];
  if (!Array.isArray(list)) fail(Codes.invalidConfig, 'cni.dev/valid-attachments must be a list of {containerID, ifname}');
  return (list as unknown[]).map((a, i) => {
    if (!isObject(a) || typeof a.containerID !== 'string' || typeof a.ifname !== 'string') {
      return fail(Codes.invalidConfig, `cni.dev/valid-attachments[${i}] must be {containerID, ifname}`);
    }
    return { containerID: a.containerID, ifname: a.ifname };
  });
}

async function gc(conf: NetConf): Promise<void> {
  const valid = new Set(validAttachments(conf).map((a) => `${a.containerID}.${a.ifname}`));
  const c = client(conf);
  try {
    // Only this network's attachments on this node: other networks, the node's gateway and CLI handles stay.
    const { handles } = await c.call('ipam.handles', { attrs: { 'cni.network': conf.name } });
    const stale = handles.map((h) => h.handle).filter((h) => !valid.has(h));
    if (stale.length) await c.call('ipam.release', { handles: stale });
  } catch (e) {
    throw daemonError(e, 'GC');
  } finally {
    void c.close();
  }
}

// ---- main-plugin mode (Windows): the daemon does the HCN work -------------------------------------------------

/** CNI_NETNS on Windows is the pod's HCN namespace GUID (containerd creates the namespace before the ADD). */
function netnsGuid(env: CniInvocation['env']): string {
  const ns = env.CNI_NETNS!;
  if (!/^\{?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}?$/i.test(ns)) {
    fail(Codes.invalidEnv, `CNI_NETNS "${ns}" is not an HCN namespace ID (a GUID): blockspeaker as the main plugin runs on Windows`);
  }
  return ns.replace(/[{}]/g, '').toLowerCase();
}

/** The main plugin's result: one interface (the endpoint), its addresses, default routes and DNS. */
function mainResultFor(conf: NetConf, reply: CniAddReply): Record<string, unknown> {
  const v1 = versionAtLeast(conf.cniVersion, '1.0.0');
  const iface: Record<string, unknown> = { name: reply.interface.name };
  if (reply.interface.mac) iface.mac = reply.interface.mac;
  iface.sandbox = reply.interface.sandbox;
  const ips = reply.ips.map((ip) => {
    const o: Record<string, unknown> = v1 ? {} : { version: String(ip.family) };
    o.interface = 0;
    o.address = ip.address;
    if (ip.gateway) o.gateway = ip.gateway;
    return o;
  });
  const out: Record<string, unknown> = { cniVersion: conf.cniVersion, interfaces: [iface], ips };
  if (reply.routes.length) out.routes = reply.routes.map((r) => (r.gw ? { dst: r.dst, gw: r.gw } : { dst: r.dst }));
  out.dns = reply.dns ?? {};
  return out;
}

async function mainAdd(conf: NetConf, env: CniInvocation['env']): Promise<string> {
  const netns = netnsGuid(env);
  const main = conf.main!;
  const c = client(conf);
  try {
    const reply = await c.call('cni.add', {
      containerId: env.CNI_CONTAINERID!,
      ifname: env.CNI_IFNAME!,
      netns,
      network: conf.name,
      cniVersion: conf.cniVersion,
      attrs: podAttrs(env.CNI_ARGS),
      ...(main.runtimeConfig ? { runtimeConfig: main.runtimeConfig } : {}),
      ...(main.dns ? { dns: main.dns } : {}),
      ...(main.num4 !== undefined ? { num4: main.num4 } : {}),
      ...(main.num6 !== undefined ? { num6: main.num6 } : {}),
      ...(main.pools ? { pools: main.pools } : {}),
    });
    return JSON.stringify(mainResultFor(conf, reply));
  } catch (e) {
    throw daemonError(e, 'ADD');
  } finally {
    void c.close();
  }
}

async function mainDel(conf: NetConf, env: CniInvocation['env']): Promise<void> {
  const c = client(conf);
  try {
    // The namespace may be gone already (or not given): a hint for the daemon, never a reason to fail.
    const ns = env.CNI_NETNS?.replace(/[{}]/g, '');
    await c.call('cni.del', { containerId: env.CNI_CONTAINERID!, ifname: env.CNI_IFNAME!, network: conf.name, ...(ns ? { netns: ns } : {}) });
  } catch (e) {
    throw daemonError(e, 'DEL');
  } finally {
    void c.close();
  }
}

async function mainCheck(conf: NetConf, env: CniInvocation['env']): Promise<void> {
  const ips = prevResultIPs(conf);
  const netns = netnsGuid(env);
  const c = client(conf);
  try {
    await c.call('cni.check', { containerId: env.CNI_CONTAINERID!, ifname: env.CNI_IFNAME!, netns, network: conf.name, ips });
  } catch (e) {
    throw daemonError(e, 'CHECK');
  } finally {
    void c.close();
  }
}

async function mainGc(conf: NetConf): Promise<void> {
  const valid = validAttachments(conf);
  const c = client(conf);
  try {
    await c.call('cni.gc', { network: conf.name, validAttachments: valid });
  } catch (e) {
    throw daemonError(e, 'GC');
  } finally {
    void c.close();
  }
}

async function status(conf: NetConf): Promise<void> {
  const c = client(conf);
  let st: StatusReply;
  let av: AvailableReply;
  try {
    [st, av] = await Promise.all([c.call('status', {}), c.call('ipam.available', { pools: conf.ipam.pools })]);
  } catch (e) {
    throw daemonError(e, 'STATUS', Codes.notAvailable);
  } finally {
    void c.close();
  }
  if (st.limitedConnectivity) fail(Codes.limitedConnectivity, `blockspeaker daemon reports limited connectivity${st.reason ? `: ${st.reason}` : ''}`);
  // Main mode without num4/num6: the daemon gives one address per family this node has a pool of.
  const wantOf = (fam: 'v4' | 'v6', n: number, given: number | undefined): number =>
    conf.main && given === undefined ? (av[fam].pools.length > 0 ? 1 : 0) : n;
  const want4 = wantOf('v4', conf.ipam.num4, conf.main?.num4);
  const want6 = wantOf('v6', conf.ipam.num6, conf.main?.num6);
  if (conf.main && want4 + want6 === 0) fail(Codes.notAvailable, `no addresses to give on ${av.host}: no pool for this node`);
  for (const [fam, want] of [['v4', want4], ['v6', want6]] as const) {
    const a = av[fam];
    if (want > 0 && a.free + a.borrowable < want && !a.canClaim) {
      fail(Codes.notAvailable, `no IP${fam} addresses to give on ${av.host}: ${a.pools.length ? `pools ${a.pools.join(', ')} have no free address for this node` : 'no pool for this node'}`);
    }
  }
}

function versionInfo(stdin: string): string {
  let asked: string | undefined;
  if (stdin.trim() !== '') {
    const v = decode(stdin).cniVersion;
    if (typeof v === 'string') asked = v;
  }
  const cniVersion = asked && (SUPPORTED_VERSIONS as readonly string[]).includes(asked) ? asked : LATEST;
  return JSON.stringify({ cniVersion, supportedVersions: SUPPORTED_VERSIONS });
}

/** Run one CNI invocation. Never throws: failures come back as a CNI error object and a non-zero exit code. */
export async function runCni(inv: CniInvocation): Promise<CniOutcome> {
  let version: string = LATEST;
  try {
    const cmdText = inv.env.CNI_COMMAND;
    if (!cmdText) fail(Codes.invalidEnv, 'CNI_COMMAND is not set (ADD, DEL, CHECK, VERSION, GC or STATUS)');
    const cmd = cmdText as Cmd;
    if (!COMMANDS.includes(cmd)) fail(Codes.invalidEnv, `unknown CNI_COMMAND "${cmdText}" (ADD, DEL, CHECK, VERSION, GC or STATUS)`);
    if (cmd === 'VERSION') return { stdout: versionInfo(inv.stdin), exitCode: 0 };
    checkEnv(cmd, inv.env);
    const raw = decode(inv.stdin);
    version = checkVersion(raw, cmd);
    const conf = parseConf(raw, version);
    const main = conf.main !== undefined;
    switch (cmd) {
      case 'ADD':
        return { stdout: await (main ? mainAdd : add)(conf, inv.env), exitCode: 0 };
      case 'DEL':
        await (main ? mainDel : del)(conf, inv.env);
        break;
      case 'CHECK':
        await (main ? mainCheck : check)(conf, inv.env);
        break;
      case 'GC':
        await (main ? mainGc : gc)(conf);
        break;
      case 'STATUS':
        await status(conf);
        break;
    }
    return { stdout: '', exitCode: 0 };
  } catch (err) {
    const e = err instanceof CniError ? err : new CniError(Codes.internal, (err as Error)?.stack ?? String(err));
    const obj: Record<string, unknown> = { cniVersion: version, code: e.code, msg: e.message };
    if (e.details) obj.details = e.details;
    return { stdout: JSON.stringify(obj), exitCode: 1 };
  }
}
