// The HNS object model, spelled exactly as HNS's own JSON (what `Get-HnsNetwork` / `Get-HnsEndpoint` return and
// what HcnCreateNetwork / HcnModifyNetwork accept), plus the management vNIC's routes as `Get-NetRoute` shows them.
//
// Ownership. HNS has no free-form tag on subnets, ip-subnets or network policies, so ownership is by address space:
// the *owned ranges* are the configured pools plus `ownedPrefixes` (e.g. the cluster CIDR).
//  - network: found by name; its other settings and policies (NetAdapterName, ProviderAddress, VxlanPort, ...) are
//    never touched;
//  - Subnet: ours when its IpAddressPrefix lies inside an owned range; its IpSubnets are then ours too;
//  - RemoteSubnetRoute policy: ours when its DestinationPrefix lies inside an owned range;
//  - HostRoute policy: it has no settings to tell whose it is, so it is added when missing (overlay) and never
//    removed;
//  - management vNIC host route: ours when it is on our InterfaceAlias, carries our RouteMetric (the marker we set
//    with New-NetRoute, default 271), has a real next hop (not on-link 0.0.0.0 / ::, which the stack creates for
//    the host's own addresses even inside a pool) and its DestinationPrefix lies inside an owned range.
// Everything else is foreign and no operation ever names it.
import { HcnError, isNotFound } from '../platform/hresult.ts';
import {
  AddressError, type Family, IP, Prefix, formatPrefix, parseIP, parseIPWithLen, parsePrefix, prefixContainsPrefix, prefixOf,
} from '../net/ip.ts';

// ---- HNS JSON ------------------------------------------------------------------------------------------------

export interface HnsRoute {
  NextHop: string;
  DestinationPrefix: string;
  Metric?: number;
}

export interface HnsPolicy {
  Type: string;
  Settings?: Record<string, unknown>;
}

/** IpSubnet Flags (HNS): None = 0, EnableBroadcast = 1, ReserveNetworkAddress = 2. */
export const IpSubnetFlags = { None: 0, EnableBroadcast: 1, ReserveNetworkAddress: 2 } as const;

export interface HnsIpSubnet {
  ID?: string;
  IpAddressPrefix: string;
  Flags?: number;
  Policies?: unknown[];
  [extra: string]: unknown;
}

export interface HnsSubnet {
  ID?: string;
  IpAddressPrefix: string;
  Routes?: HnsRoute[];
  Policies?: HnsPolicy[];
  IpSubnets?: HnsIpSubnet[];
  [extra: string]: unknown;
}

export interface HnsIpam {
  Type?: string;
  Subnets?: HnsSubnet[];
}

export interface HnsNetwork {
  ID?: string;
  Name: string;
  /** L2Bridge, L2Tunnel, Overlay, NAT, Transparent, ICS, Private. */
  Type: string;
  Ipams?: HnsIpam[];
  Policies?: HnsPolicy[];
  Flags?: number;
  SchemaVersion?: { Major: number; Minor: number };
  [extra: string]: unknown;
}

export interface HnsIpConfiguration {
  IpAddress: string;
  PrefixLength?: number;
}

export interface HnsEndpoint {
  ID: string;
  Name?: string;
  /** V2: the network's ID. (V1 calls it VirtualNetwork.) */
  HostComputeNetwork?: string;
  VirtualNetwork?: string;
  IpConfigurations?: HnsIpConfiguration[];
  /** V1 shape. */
  IPAddress?: string;
  [extra: string]: unknown;
}

/** A route on the management vNIC, as `Get-NetRoute | Select DestinationPrefix,NextHop,InterfaceAlias,RouteMetric`. */
export interface NetRoute {
  DestinationPrefix: string;
  NextHop: string;
  InterfaceAlias: string;
  RouteMetric?: number;
}

/** Everything the planner reads: HNS networks and endpoints, and the management vNIC routes. */
export interface HnsSnapshot {
  Networks: HnsNetwork[];
  Endpoints: HnsEndpoint[];
  HostRoutes: NetRoute[];
}

export const emptySnapshot = (): HnsSnapshot => ({ Networks: [], Endpoints: [], HostRoutes: [] });

// ---- operations ----------------------------------------------------------------------------------------------

export type HnsOpKind =
  | 'create-network'
  | 'add-subnet'
  | 'add-ip-subnet'
  | 'remove-ip-subnet'
  | 'remove-subnet'
  | 'add-policy'
  | 'remove-policy'
  | 'add-host-route'
  | 'remove-host-route'
  | 'create-endpoint'
  | 'remove-endpoint';

/** An HcnModifyNetwork request (ModifyNetworkSettingRequest). */
export interface ModifyNetworkRequest {
  ResourceType: 'Subnet' | 'IPSubnet' | 'Policy';
  RequestType: 'Add' | 'Remove';
  Settings:
    | { Subnets: HnsSubnet[] }
    | { SubnetId?: string; IpSubnets: HnsIpSubnet[] }
    | { Policies: HnsPolicy[] };
}

export interface HnsOp {
  op: HnsOpKind;
  /**
   * The network the op applies to, by name (HNS ops only). The executor resolves the ID at apply time, since a
   * network created earlier in the same plan has no ID yet.
   */
  network?: string;
  /**
   * ip-subnet ops: the parent Subnet's prefix. Settings.SubnetId is filled when the planner knows it; for a Subnet
   * added earlier in the same plan the executor finds the ID by this prefix.
   */
  subnet?: string;
  /**
   * create-network: the HcnCreateNetwork JSON; host routes: a NetRoute; endpoints: the HcnCreateEndpoint JSON (the
   * network is filled in at apply time) or, to remove, the endpoint as read; the rest: an HcnModifyNetwork request.
   */
  body: HnsNetwork | ModifyNetworkRequest | NetRoute | HnsEndpoint;
}

// ---- HCN errors ----------------------------------------------------------------------------------------------

// The codes and the error class live under the native bindings that throw them (src/platform/hresult.ts).
export { HCN, HcnError, hresultText, isNotFound } from '../platform/hresult.ts';


/**
 * An HRESULT from text: hex ("0x803B0008", "803b0008") or decimal as PowerShell and HNS.V2.psm1 print it, signed
 * ("-2143617016") or not ("2151350280"). null when the text is neither.
 */
export function parseHresult(text: string): number | null {
  const t = text.trim();
  let v: number;
  if (/^0x[0-9a-f]{1,8}$/i.test(t)) v = parseInt(t.slice(2), 16);
  else if (/^-?\d{1,10}$/.test(t)) v = Number(t);
  else if (/^[0-9a-f]{8}$/i.test(t)) v = parseInt(t, 16);
  else return null;
  if (!Number.isSafeInteger(v) || v < -0x80000000 || v > 0xffffffff) return null;
  return v >>> 0;
}

/** The first HRESULT of the error class (high bit set) in free text, hex or decimal. */
export function findHresult(text: string): number | null {
  const hex = /0x8[0-9A-Fa-f]{7}\b/.exec(text);
  if (hex) return parseHresult(hex[0]);
  for (const m of text.matchAll(/(?<![\w.])-?\d{10}(?![\w.])/g)) {
    const v = parseHresult(m[0]);
    if (v !== null && v >= 0x80000000) return v;
  }
  return null;
}


// ---- prefixes and addresses from JSON ------------------------------------------------------------------------

export interface ParsedPrefix {
  /** Canonical text ("10.0.0.0/26", RFC 5952 for IPv6). */
  key: string;
  prefix: Prefix;
}

/**
 * Parse a prefix read from HNS JSON or config, leniently (host bits are masked off) and fast for IPv4: plans read
 * tens of thousands of them. Returns null for text that is not a prefix.
 */
export function readPrefix(text: unknown): ParsedPrefix | null {
  if (typeof text !== 'string') return null;
  const v4 = fastV4(text, true);
  if (v4 >= 0) {
    const len = fastLen;
    const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
    const w0 = (v4 & mask) >>> 0;
    const key = w0 === v4 ? text : `${w0 >>> 24}.${(w0 >>> 16) & 255}.${(w0 >>> 8) & 255}.${w0 & 255}/${len}`;
    return { key, prefix: new Prefix(4, w0, 0, 0, 0, len) };
  }
  if (v4 === -2) return null;
  try {
    const { ip, len } = parseIPWithLen(text.trim());
    const p = prefixOf(ip, len);
    return { key: formatPrefix(p), prefix: p };
  } catch {
    return null;
  }
}

/** Parse an address from JSON: canonical text, or null. */
export function readIP(text: unknown): { key: string; ip: IP } | null {
  if (typeof text !== 'string') return null;
  const v4 = fastV4(text, false);
  if (v4 >= 0) return { key: text, ip: new IP(4, v4) };
  if (v4 === -2) return null;
  try {
    const ip = parseIP(text);
    return { key: ip.toString(), ip };
  } catch {
    return null;
  }
}

let fastLen = 0;
/**
 * Dotted-quad IPv4 (with "/len" when withLen): the address as uint32, -1 when the text is not plain IPv4 in
 * canonical form (the slow path decides), -2 when it is certainly invalid. Sets fastLen.
 */
function fastV4(s: string, withLen: boolean): number {
  const n = s.length;
  let i = 0;
  let v = 0;
  for (let part = 0; part < 4; part++) {
    let x = 0;
    const start = i;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      x = x * 10 + (c - 48);
      i++;
    }
    const digits = i - start;
    if (digits === 0 || digits > 3) return -1;
    if (digits > 1 && s.charCodeAt(start) === 48) return -1; // leading zero: not canonical, let the slow path judge
    if (x > 255) return -2;
    v = v * 256 + x;
    if (part < 3) {
      if (i >= n || s.charCodeAt(i) !== 46) return -1;
      i++;
    }
  }
  if (!withLen) return i === n ? v : -1;
  if (i >= n || s.charCodeAt(i) !== 47) return -1;
  i++;
  let len = 0;
  const start = i;
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    len = len * 10 + (c - 48);
    i++;
  }
  if (i === start || i - start > 2 || (i - start > 1 && s.charCodeAt(start) === 48)) return -1;
  if (len > 32) return -2;
  fastLen = len;
  return v;
}

/** Strict prefix parse for config and flags (host bits refused); the error names `what`. */
export function configPrefix(text: unknown, what: string): ParsedPrefix {
  if (typeof text !== 'string') throw new AddressError(`${what}: expected a prefix, got ${JSON.stringify(text)}`);
  try {
    const p = parsePrefix(text.trim());
    return { key: formatPrefix(p), prefix: p };
  } catch (e) {
    throw new AddressError(`${what}: ${(e as Error).message}`);
  }
}

export function configIP(text: unknown, what: string): IP {
  if (typeof text !== 'string') throw new AddressError(`${what}: expected an address, got ${JSON.stringify(text)}`);
  try {
    return parseIP(text.trim());
  } catch (e) {
    throw new AddressError(`${what}: ${(e as Error).message}`);
  }
}

export const defaultRoute = (family: Family): string => (family === 4 ? '0.0.0.0/0' : '::/0');
export const isOnLinkNextHop = (text: string): boolean => {
  const a = readIP(text);
  return a !== null && a.ip.w0 === 0 && a.ip.w1 === 0 && a.ip.w2 === 0 && a.ip.w3 === 0;
};

/** MACs compare without case or separator differences; HNS writes them as 01-23-45-67-89-AB. */
export function normalizeMac(text: unknown): string | null {
  if (typeof text !== 'string') return null;
  const hex = text.replace(/[-:.]/g, '').toUpperCase();
  if (!/^[0-9A-F]{12}$/.test(hex)) return null;
  return hex.match(/../g)!.join('-');
}

export function insideAny(p: Prefix, ranges: readonly Prefix[]): boolean {
  for (let i = 0; i < ranges.length; i++) if (prefixContainsPrefix(ranges[i], p)) return true;
  return false;
}

// ---- reading snapshots ---------------------------------------------------------------------------------------

/** PowerShell's ConvertTo-Json writes a one-element array as the element itself, and an empty one as null. */
export function asArray<T>(v: T | T[] | null | undefined): T[] {
  if (v === null || v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

/** The subnets of a network, over all its Ipams. */
export function subnetsOf(net: HnsNetwork): HnsSubnet[] {
  const out: HnsSubnet[] = [];
  for (const ipam of asArray(net.Ipams)) for (const s of asArray(ipam?.Subnets)) if (s) out.push(s);
  return out;
}

/**
 * Read HNS JSON into a snapshot. Accepts what the tools print: one network (Get-HnsNetwork for one), an array of
 * networks, or the composite {Networks, Endpoints, HostRoutes} the PowerShell executor reads back and
 * `hns plan --emit-actual` writes. Arrays flattened by ConvertTo-Json are restored.
 */
export function parseSnapshot(json: unknown): HnsSnapshot {
  const fail = (why: string): never => {
    throw new AddressError(`not HNS JSON: ${why}`);
  };
  if (json === null || json === undefined) return emptySnapshot();
  let snap: HnsSnapshot;
  if (Array.isArray(json)) snap = { Networks: json as HnsNetwork[], Endpoints: [], HostRoutes: [] };
  else if (typeof json === 'object' && ('Networks' in json || 'Endpoints' in json || 'HostRoutes' in json)) {
    const o = json as Record<string, unknown>;
    snap = {
      Networks: asArray(o.Networks as HnsNetwork[]),
      Endpoints: asArray(o.Endpoints as HnsEndpoint[]),
      HostRoutes: asArray(o.HostRoutes as NetRoute[]),
    };
  } else if (typeof json === 'object' && 'Name' in json) snap = { Networks: [json as HnsNetwork], Endpoints: [], HostRoutes: [] };
  else return fail('expected a network (with Name and Type), an array of networks, or {Networks, Endpoints, HostRoutes}');
  snap.Networks.forEach((n, i) => {
    if (!n || typeof n !== 'object' || typeof n.Name !== 'string' || typeof n.Type !== 'string') {
      fail(`network ${i} needs string Name and Type`);
    }
    n.Ipams = asArray(n.Ipams);
    n.Policies = asArray(n.Policies);
    for (const ipam of n.Ipams) {
      ipam.Subnets = asArray(ipam.Subnets);
      for (const s of ipam.Subnets) {
        s.Routes = asArray(s.Routes);
        s.Policies = asArray(s.Policies);
        s.IpSubnets = asArray(s.IpSubnets);
      }
    }
  });
  for (const e of snap.Endpoints) if (e) e.IpConfigurations = asArray(e.IpConfigurations);
  snap.HostRoutes.forEach((r, i) => {
    if (!r || typeof r.DestinationPrefix !== 'string' || typeof r.InterfaceAlias !== 'string') {
      fail(`host route ${i} needs DestinationPrefix and InterfaceAlias`);
    }
  });
  return snap;
}

export const sameId = (a: string | undefined, b: string | undefined): boolean =>
  a !== undefined && b !== undefined && a.replace(/[{}]/g, '').toLowerCase() === b.replace(/[{}]/g, '').toLowerCase();

/** The addresses an endpoint holds on a network. */
export function endpointAddresses(e: HnsEndpoint): IP[] {
  const out: IP[] = [];
  for (const c of asArray(e.IpConfigurations)) {
    const a = readIP(c?.IpAddress);
    if (a) out.push(a.ip);
  }
  const v1 = readIP(e.IPAddress);
  if (v1) out.push(v1.ip);
  return out;
}

export const endpointNetwork = (e: HnsEndpoint): string | undefined => e.HostComputeNetwork ?? e.VirtualNetwork;

// ---- executors -----------------------------------------------------------------------------------------------

export interface ApplyResult {
  /** Ops done (a remove whose object was already gone counts as done). */
  applied: number;
  /** The first failure; with `failures`, all of them. */
  error?: Error;
  failedOp?: HnsOp;
  failures?: { op: HnsOp; error: Error }[];
}

/**
 * Policies and host routes stand alone: one that fails (an unreachable next hop, a policy HNS refuses) must not hold
 * back the others. Network, Subnet and ip-subnet ops do not (an ip-subnet needs its Subnet; an add may need the
 * remove before it), so the first of those to fail ends the run.
 */
export const independentOp = (op: HnsOp): boolean => op.op.endsWith('-policy') || op.op.endsWith('-host-route') || op.op.endsWith('-endpoint');

/** Where plans run: Windows HNS through PowerShell, or the in-memory fake. */
export interface HnsExecutor {
  /** The actual state. Throws on failure: a failed read is never "nothing exists". */
  read(): Promise<HnsSnapshot>;
  /** Apply ops in order, stopping at the first failure. */
  apply(ops: readonly HnsOp[]): Promise<ApplyResult>;
}

type BatchResult = { applied: number; error?: Error };

/**
 * The apply rules, once for both executors: run ops in batches (each batch stops at its first failure). NOT_FOUND on
 * a remove counts as done: the object is absent, which is what the remove wanted. A failed independent op
 * (independentOp) is recorded and skipped; any other failure ends the run. Yields the batches to run.
 */
function* applyRules(ops: readonly HnsOp[]): Generator<readonly HnsOp[], ApplyResult, BatchResult> {
  let next = 0;
  let applied = 0;
  const failures: { op: HnsOp; error: Error }[] = [];
  while (next < ops.length) {
    const r = yield next === 0 ? ops : ops.slice(next);
    next += r.applied;
    applied += r.applied;
    if (!r.error) break;
    const failed = ops[next];
    if (!failed) break;
    next++;
    if (failed.op.startsWith('remove-') && isNotFound(r.error)) {
      applied++;
      continue;
    }
    failures.push({ op: failed, error: r.error });
    if (!independentOp(failed)) break;
  }
  return failures.length ? { applied, error: failures[0].error, failedOp: failures[0].op, failures } : { applied };
}

export async function applySequential(ops: readonly HnsOp[], runBatch: (ops: readonly HnsOp[]) => Promise<BatchResult>): Promise<ApplyResult> {
  const g = applyRules(ops);
  let s = g.next();
  while (!s.done) s = g.next(await runBatch(s.value));
  return s.value;
}

export function applySequentialSync(ops: readonly HnsOp[], runBatch: (ops: readonly HnsOp[]) => BatchResult): ApplyResult {
  const g = applyRules(ops);
  let s = g.next();
  while (!s.done) s = g.next(runBatch(s.value));
  return s.value;
}

/**
 * Judges prefixes read from HNS JSON against the owned ranges, without allocating for the common case (canonical
 * IPv4 text): plans read tens of thousands of policies and routes and send a handful.
 */
export class OwnedPrefixReader {
  private readonly v4: { w0: number; mask: number; len: number }[] = [];
  constructor(private readonly owned: readonly Prefix[]) {
    for (const p of owned) if (p.family === 4) this.v4.push({ w0: p.w0, mask: p.len === 0 ? 0 : (0xffffffff << (32 - p.len)) >>> 0, len: p.len });
  }

  /** The canonical key of `text` when it is a prefix inside an owned range; null otherwise. */
  ownedKey(text: unknown): string | null {
    if (typeof text !== 'string') return null;
    const v = fastV4(text, true);
    if (v >= 0) {
      const len = fastLen;
      const hostMask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
      const w0 = (v & hostMask) >>> 0;
      let inside = false;
      for (const r of this.v4) {
        if (len >= r.len && ((w0 & r.mask) >>> 0) === r.w0) {
          inside = true;
          break;
        }
      }
      if (!inside) return null;
      return w0 === v ? text : `${w0 >>> 24}.${(w0 >>> 16) & 255}.${(w0 >>> 8) & 255}.${w0 & 255}/${len}`;
    }
    if (v === -2) return null;
    const p = readPrefix(text);
    return p && insideAny(p.prefix, this.owned) ? p.key : null;
  }
}

/** Two address texts name the same address (fast when they are spelled alike). */
export function sameAddress(a: unknown, b: string): boolean {
  if (a === b) return true;
  const x = readIP(a);
  return x !== null && x.key === (readIP(b)?.key ?? b);
}
