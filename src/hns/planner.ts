// The HNS planner: (actual HNS JSON, desired state) -> the ordered operations that make actual equal desired. Pure.
//
// Rules (docs/design/dataplanes.md gives the reasons):
//  - an object that already matches is never sent again: re-programming resets TCP sessions;
//  - only owned objects are removed or replaced (ownership: see model.ts);
//  - stale removes come before adds (a remote block that moved = remove the old policy or route, then add the new;
//    a block replaced by an overlapping one = remove, then add), and a Subnet is added before ip-subnets go into it
//    (a new Subnet carries its first ip-subnets itself);
//  - an ip-subnet (or Subnet) that an endpoint still uses is not removed: it is reported as blocked, as is an add
//    that would overlap something that stays; the next pass tries again;
//  - the order is deterministic: by op group, then by prefix.
import { type IP, type Prefix, comparePrefix, prefixContainsIP, prefixOf, prefixesOverlap } from '../net/ip.ts';
import type { DesiredPolicy, DesiredState, DesiredSubnet } from './desired.ts';
import { isHostEndpointName, subnetSig } from './desired.ts';
import {
  type HnsEndpoint,
  type HnsIpSubnet,
  type HnsNetwork,
  type HnsOp,
  type HnsOpKind,
  type HnsPolicy,
  type HnsSnapshot,
  type HnsSubnet,
  type ModifyNetworkRequest,
  type NetRoute,
  type ParsedPrefix,
  OwnedPrefixReader,
  asArray,
  endpointAddresses,
  endpointNetwork,
  insideAny,
  isOnLinkNextHop,
  normalizeMac,
  readIP,
  readPrefix,
  sameAddress,
  sameId,
  subnetsOf,
} from './model.ts';

export interface BlockedOp {
  op: HnsOpKind;
  /** The object's prefix (or the network's name). */
  object: string;
  reason: string;
}

export interface HnsPlan {
  ops: HnsOp[];
  blocked: BlockedOp[];
}

const ORDER: HnsOpKind[] = [
  'create-network',
  'remove-endpoint',
  'remove-policy',
  'remove-host-route',
  'remove-ip-subnet',
  'remove-subnet',
  'add-subnet',
  'add-ip-subnet',
  'create-endpoint',
  'add-policy',
  'add-host-route',
];

interface Pending {
  op: HnsOp;
  prefix: Prefix | null;
  tie: string;
}

/** Find our network: by name, preferring one of the wanted type when names repeat. */
export function findNetwork(networks: readonly HnsNetwork[], name: string, type: string): HnsNetwork | undefined {
  let found: HnsNetwork | undefined;
  for (const n of networks) {
    if (n?.Name !== name) continue;
    if (sameType(n.Type, type)) return n;
    found ??= n;
  }
  return found;
}

const sameType = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

export function planHns(actual: HnsSnapshot, desired: DesiredState): HnsPlan {
  const groups = new Map<HnsOpKind, Pending[]>(ORDER.map((k) => [k, []]));
  const blocked: BlockedOp[] = [];
  const push = (op: HnsOp, prefix: Prefix | null, tie = '') => groups.get(op.op)!.push({ op, prefix, tie });

  planHostRoutes(actual.HostRoutes, desired, push, blocked);

  const name = desired.networkName;
  const net = findNetwork(actual.Networks, name, desired.networkType);
  if (!net) {
    if (desired.subnets.length > 0) {
      push({ op: 'create-network', network: name, body: createNetworkBody(desired) }, null);
      planPolicies(undefined, desired, push);
      planEndpoints(undefined, actual.Endpoints, desired, push);
    } else if (desired.remoteSubnetRoutes.length > 0) {
      blocked.push({ op: 'create-network', object: name, reason: 'no local block yet to create the network with' });
    }
  } else if (!sameType(net.Type, desired.networkType)) {
    blocked.push({
      op: 'create-network',
      object: name,
      reason: `network "${name}" exists as ${net.Type} but mode ${desired.mode} needs ${desired.networkType}; remove it by hand`,
    });
  } else {
    planSubnets(net, actual.Endpoints, desired, push, blocked);
    planPolicies(net, desired, push);
    planEndpoints(net, actual.Endpoints, desired, push);
  }

  const ops: HnsOp[] = [];
  for (const kind of ORDER) {
    const list = groups.get(kind)!;
    list.sort(byPrefix);
    for (const p of list) ops.push(p.op);
  }
  blocked.sort((a, b) => ORDER.indexOf(a.op) - ORDER.indexOf(b.op) || (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
  return { ops, blocked };
}

function byPrefix(a: Pending, b: Pending): number {
  if (a.prefix && b.prefix) {
    const c = comparePrefix(a.prefix, b.prefix);
    if (c !== 0) return c;
  } else if (a.prefix !== b.prefix) return a.prefix ? 1 : -1;
  return a.tie < b.tie ? -1 : a.tie > b.tie ? 1 : 0;
}

// ---- bodies --------------------------------------------------------------------------------------------------

function subnetJson(d: DesiredSubnet): HnsSubnet {
  return {
    IpAddressPrefix: d.key,
    Routes: d.routes.map((r) => ({ ...r })),
    Policies: d.policies.map((p) => ({ Type: p.Type, Settings: { ...p.Settings } })),
    IpSubnets: d.ipSubnets.map((i) => ({ IpAddressPrefix: i.key, Flags: i.flags })),
  };
}

export function createNetworkBody(desired: DesiredState): HnsNetwork {
  const policies: HnsPolicy[] = [];
  if (desired.adapter) policies.push({ Type: 'NetAdapterName', Settings: { NetworkAdapterName: desired.adapter } });
  if (desired.providerAddress && desired.mode === 'overlay') {
    policies.push({ Type: 'ProviderAddress', Settings: { ProviderAddress: desired.providerAddress } });
  }
  return {
    Name: desired.networkName,
    Type: desired.networkType,
    Ipams: [{ Type: 'Static', Subnets: desired.subnets.map(subnetJson) }],
    Policies: policies,
    SchemaVersion: { Major: 2, Minor: 2 },
  };
}

const modify = (
  ResourceType: ModifyNetworkRequest['ResourceType'],
  RequestType: ModifyNetworkRequest['RequestType'],
  Settings: ModifyNetworkRequest['Settings'],
): ModifyNetworkRequest => ({ ResourceType, RequestType, Settings });

// ---- subnets and ip-subnets ----------------------------------------------------------------------------------

interface ActualIpSubnet extends ParsedPrefix {
  raw: HnsIpSubnet;
  flags: number;
}

interface ActualSubnet extends ParsedPrefix {
  raw: HnsSubnet;
  sig: string;
  ips: ActualIpSubnet[];
}

function readIpSubnets(s: HnsSubnet): ActualIpSubnet[] {
  const out: ActualIpSubnet[] = [];
  for (const raw of asArray(s.IpSubnets)) {
    const p = readPrefix(raw?.IpAddressPrefix);
    if (p) out.push({ ...p, raw, flags: Number(raw.Flags ?? 0) });
  }
  return out;
}

/** Addresses of the endpoints on `net` (an endpoint naming no network, or a network without ID, counts: safe side). */
function endpointIPsOn(net: HnsNetwork, endpoints: readonly HnsEndpoint[]) {
  const ips = [];
  for (const e of endpoints) {
    if (!e) continue;
    const on = endpointNetwork(e);
    if (on !== undefined && net.ID !== undefined && !sameId(on, net.ID)) continue;
    ips.push(...endpointAddresses(e));
  }
  return ips;
}

function planSubnets(
  net: HnsNetwork,
  endpoints: readonly HnsEndpoint[],
  desired: DesiredState,
  push: (op: HnsOp, prefix: Prefix | null, tie?: string) => void,
  blocked: BlockedOp[],
): void {
  const name = desired.networkName;
  let epIPs: ReturnType<typeof endpointIPsOn> | undefined;
  const users = (p: Prefix): number => {
    epIPs ??= endpointIPsOn(net, endpoints);
    let n = 0;
    for (const ip of epIPs) if (prefixContainsIP(p, ip)) n++;
    return n;
  };

  const wanted = new Map<string, DesiredSubnet>();
  for (const d of desired.subnets) wanted.set(d.key, d);

  // Subnets that stay on the network whatever we do (foreign ones, blocked removals): new ones must not overlap them.
  const staying: ParsedPrefix[] = [];
  const kept = new Map<string, ActualSubnet>();
  for (const raw of subnetsOf(net)) {
    const p = readPrefix(raw.IpAddressPrefix);
    if (!p || !insideAny(p.prefix, desired.owned)) {
      if (p) staying.push(p);
      continue;
    }
    const s: ActualSubnet = { ...p, raw, sig: subnetSig(asArray(raw.Routes), asArray(raw.Policies)), ips: readIpSubnets(raw) };
    const d = wanted.get(p.key);
    if (d && sameSubnet(s.sig, d.sig) && !kept.has(p.key)) {
      kept.set(p.key, s);
      continue;
    }
    // Stale (or changed routes/policies: HNS cannot modify a Subnet in place). Everything in it goes with it.
    const inUse = users(s.prefix);
    if (inUse === 0) {
      push({ op: 'remove-subnet', network: name, body: modify('Subnet', 'Remove', { Subnets: [idOnly(raw)] }) }, s.prefix);
      continue;
    }
    blocked.push({ op: 'remove-subnet', object: s.key, reason: `${inUse} endpoint(s) still use it` });
    staying.push(s);
    // Take out what no endpoint uses, to get as close as we can.
    for (const ip of s.ips) {
      if (users(ip.prefix) > 0) continue;
      push(removeIpSubnetOp(name, s, ip), ip.prefix);
    }
  }

  for (const d of desired.subnets) {
    const s = kept.get(d.key);
    if (!s) {
      const clash = staying.find((x) => prefixesOverlap(x.prefix, d.prefix));
      if (clash) {
        blocked.push({ op: 'add-subnet', object: d.key, reason: `overlaps ${clash.key}, which stays on the network` });
        continue;
      }
      push({ op: 'add-subnet', network: name, body: modify('Subnet', 'Add', { Subnets: [subnetJson(d)] }) }, d.prefix);
      continue;
    }
    // A kept Subnet: diff its ip-subnets.
    const want = new Map(d.ipSubnets.map((i) => [i.key, i]));
    const have = new Set<string>();
    const remaining: ParsedPrefix[] = [];
    for (const ip of s.ips) {
      const w = want.get(ip.key);
      if (w && w.flags === ip.flags && !have.has(ip.key)) {
        have.add(ip.key);
        continue;
      }
      const inUse = users(ip.prefix);
      if (inUse > 0) {
        blocked.push({ op: 'remove-ip-subnet', object: ip.key, reason: `${inUse} endpoint(s) still use it` });
        remaining.push(ip);
        continue;
      }
      push(removeIpSubnetOp(name, s, ip), ip.prefix);
    }
    for (const w of d.ipSubnets) {
      if (have.has(w.key)) continue;
      const clash = remaining.find((x) => prefixesOverlap(x.prefix, w.prefix));
      if (clash) {
        blocked.push({ op: 'add-ip-subnet', object: w.key, reason: `overlaps ${clash.key}, which endpoints still use` });
        continue;
      }
      const Settings: { SubnetId?: string; IpSubnets: HnsIpSubnet[] } = { IpSubnets: [{ IpAddressPrefix: w.key, Flags: w.flags }] };
      if (s.raw.ID !== undefined) Settings.SubnetId = s.raw.ID;
      push({ op: 'add-ip-subnet', network: name, subnet: s.key, body: modify('IPSubnet', 'Add', { ...Settings }) }, w.prefix);
    }
  }
}

/**
 * Subnet signatures ("routes;policies") match. A Subnet listed without any VSID/VLAN policy is judged on its routes
 * alone: should a Get-HnsNetwork leave subnet policies out, a strict match would replace the Subnet every pass.
 */
function sameSubnet(actual: string, desired: string): boolean {
  return actual === desired || (actual.endsWith(';') && desired.startsWith(actual));
}

const idOnly = (o: { ID?: string; IpAddressPrefix: string }) =>
  o.ID !== undefined ? { ID: o.ID, IpAddressPrefix: o.IpAddressPrefix } : { IpAddressPrefix: o.IpAddressPrefix };

function removeIpSubnetOp(network: string, s: ActualSubnet, ip: ActualIpSubnet): HnsOp {
  const Settings: { SubnetId?: string; IpSubnets: HnsIpSubnet[] } = { IpSubnets: [idOnly(ip.raw)] };
  if (s.raw.ID !== undefined) Settings.SubnetId = s.raw.ID;
  return { op: 'remove-ip-subnet', network, subnet: s.key, body: modify('IPSubnet', 'Remove', { ...Settings }) };
}

// ---- network policies ----------------------------------------------------------------------------------------

/** Canonical signature of a RemoteSubnetRoute's settings (prefix|IsolationId|ProviderAddress|MAC). */
export function rsrSig(settings: Record<string, unknown> | undefined, key: string): string {
  const s = settings ?? {};
  const pa = readIP(s.ProviderAddress);
  return `${key}|${Number(s.IsolationId)}|${pa ? pa.key : String(s.ProviderAddress)}|${normalizeMac(s.DistributedRouterMacAddress) ?? String(s.DistributedRouterMacAddress)}`;
}

function sameRsr(s: Record<string, unknown>, d: DesiredPolicy): boolean {
  const w = d.settings;
  if (Number(s.IsolationId) !== w.IsolationId || !sameAddress(s.ProviderAddress, w.ProviderAddress)) return false;
  const mac = s.DistributedRouterMacAddress;
  return mac === w.DistributedRouterMacAddress || normalizeMac(mac) === w.DistributedRouterMacAddress;
}

function planPolicies(
  net: HnsNetwork | undefined,
  desired: DesiredState,
  push: (op: HnsOp, prefix: Prefix | null, tie?: string) => void,
): void {
  const name = desired.networkName;
  const policy = (RequestType: 'Add' | 'Remove', p: HnsPolicy): HnsOp => ({
    op: RequestType === 'Add' ? 'add-policy' : 'remove-policy',
    network: name,
    body: modify('Policy', RequestType, { Policies: [p] }),
  });
  const want = desired.remoteSubnetRoutes;
  const index = new Map<string, number>();
  for (let i = 0; i < want.length; i++) index.set(want[i].key, i);
  const kept = new Uint8Array(want.length);
  const reader = new OwnedPrefixReader(desired.owned);

  // One pass over the actual policies; nothing is allocated for the ones that match.
  let hasHostRoute = false;
  for (const raw of net ? asArray(net.Policies) : []) {
    if (!raw) continue;
    if (raw.Type === 'HostRoute') hasHostRoute = true;
    if (raw.Type !== 'RemoteSubnetRoute') continue;
    const settings = raw.Settings ?? {};
    const key = reader.ownedKey(settings.DestinationPrefix);
    if (key === null) continue; // foreign (or unreadable): never ours to remove
    const i = index.get(key);
    if (i !== undefined && kept[i] === 0 && sameRsr(settings, want[i])) {
      kept[i] = 1;
      continue;
    }
    push(policy('Remove', raw), readPrefix(key)!.prefix, rsrSig(settings, key));
  }

  if (desired.hostRoutePolicy && !hasHostRoute) push(policy('Add', { Type: 'HostRoute', Settings: {} }), null);
  for (let i = 0; i < want.length; i++) {
    if (kept[i] === 0) push(policy('Add', { Type: 'RemoteSubnetRoute', Settings: { ...want[i].settings } }), want[i].prefix, want[i].sig);
  }
}

// ---- endpoints ------------------------------------------------------------------------------------------------

/** The HcnCreateEndpoint JSON of a host endpoint (the network's ID is filled in at apply time). */
export function hostEndpointBody(e: { name: string; ip: string; prefixLen: number }): HnsEndpoint {
  return { ID: '', Name: e.name, IpConfigurations: [{ IpAddress: e.ip, PrefixLength: e.prefixLen }], SchemaVersion: { Major: 2, Minor: 2 } };
}

/**
 * Host endpoints: kept when one of that name holds the address, else (re)created; our host endpoints that are no
 * longer wanted are removed. Leaked endpoints (desired.heldIPs given): an endpoint on our network whose address is
 * inside an owned range, is held by no IPAM handle and is no host endpoint's, belongs to a pod that is gone.
 */
function planEndpoints(
  net: HnsNetwork | undefined,
  endpoints: readonly HnsEndpoint[],
  desired: DesiredState,
  push: (op: HnsOp, prefix: Prefix | null, tie?: string) => void,
): void {
  const name = desired.networkName;
  const want = new Map(desired.hostEndpoints.map((e) => [e.name, e]));
  const hostIPs = new Set(desired.hostEndpoints.map((e) => e.ip));
  const kept = new Set<string>();
  if (net) {
    for (const e of endpoints) {
      if (!e || !onNetwork(e, net)) continue;
      const ips = endpointAddresses(e);
      const first = ips[0];
      if (isHostEndpointName(name, e.Name)) {
        const w = want.get(e.Name!);
        if (w && !kept.has(w.name) && ips.length === 1 && first.toString() === w.ip) {
          kept.add(w.name);
          continue;
        }
        push({ op: 'remove-endpoint', network: name, body: endpointRef(e) }, null, `${e.Name}|${e.ID}`);
        continue;
      }
      if (!desired.heldIPs || ips.length === 0) continue;
      const owned = ips.filter((ip) => insideAny(prefixOfIP(ip), desired.owned));
      if (owned.length === 0 || owned.some((ip) => desired.heldIPs!.has(ip.toString()) || hostIPs.has(ip.toString()))) continue;
      push({ op: 'remove-endpoint', network: name, body: endpointRef(e) }, prefixOfIP(owned[0]), String(e.ID));
    }
  }
  for (const w of desired.hostEndpoints) {
    if (kept.has(w.name)) continue;
    push({ op: 'create-endpoint', network: name, subnet: w.subnet, body: hostEndpointBody(w) }, null, w.name);
  }
}

const onNetwork = (e: HnsEndpoint, net: HnsNetwork): boolean => {
  const on = endpointNetwork(e);
  return on !== undefined && net.ID !== undefined && sameId(on, net.ID);
};

const endpointRef = (e: HnsEndpoint): HnsEndpoint => ({ ID: e.ID, Name: e.Name, IpConfigurations: asArray(e.IpConfigurations) });

const prefixOfIP = (ip: IP): Prefix => prefixOf(ip, ip.family === 4 ? 32 : 128);

// ---- management vNIC host routes -----------------------------------------------------------------------------

/** Whether a route on the management vNIC is ours (see model.ts), with its parsed prefix. */
export function ownedHostRoute(r: NetRoute, desired: DesiredState): ParsedPrefix | null {
  if (!r || r.InterfaceAlias !== desired.interfaceAlias || Number(r.RouteMetric) !== desired.routeMetric) return null;
  if (typeof r.NextHop !== 'string' || isOnLinkNextHop(r.NextHop)) return null;
  const p = readPrefix(r.DestinationPrefix);
  return p && insideAny(p.prefix, desired.owned) ? p : null;
}

function planHostRoutes(
  routes: readonly NetRoute[],
  desired: DesiredState,
  push: (op: HnsOp, prefix: Prefix | null, tie?: string) => void,
  blocked: BlockedOp[],
): void {
  const alias = desired.interfaceAlias;
  if (alias === undefined) return;
  const metric = desired.routeMetric;
  const want = desired.hostRoutes;
  const index = new Map<string, number>();
  for (let i = 0; i < want.length; i++) index.set(want[i].key, i);
  const kept = new Uint8Array(want.length);
  const reader = new OwnedPrefixReader(desired.owned);

  for (const raw of routes) {
    if (!raw || raw.InterfaceAlias !== alias || Number(raw.RouteMetric) !== metric) continue;
    const key = reader.ownedKey(raw.DestinationPrefix);
    if (key === null) continue;
    const i = index.get(key);
    if (i !== undefined && kept[i] === 0 && sameAddress(raw.NextHop, want[i].route.NextHop)) {
      kept[i] = 1;
      continue;
    }
    if (typeof raw.NextHop !== 'string' || isOnLinkNextHop(raw.NextHop)) continue; // the stack's own, not ours
    push(
      { op: 'remove-host-route', body: { DestinationPrefix: raw.DestinationPrefix, NextHop: raw.NextHop, InterfaceAlias: raw.InterfaceAlias } },
      readPrefix(key)!.prefix,
      readIP(raw.NextHop)?.key ?? raw.NextHop,
    );
  }

  let foreign: Set<string> | undefined;
  for (let i = 0; i < want.length; i++) {
    if (kept[i] === 1) continue;
    const d = want[i];
    if (!foreign) {
      // Routes we do not own but New-NetRoute would collide with (same prefix, next hop and interface).
      foreign = new Set();
      for (const r of routes) {
        if (r?.InterfaceAlias !== alias || ownedHostRoute(r, desired)) continue;
        const p = readPrefix(r.DestinationPrefix);
        if (p) foreign.add(`${p.key}|${readIP(r.NextHop)?.key ?? r.NextHop}`);
      }
    }
    if (foreign.has(`${d.key}|${d.route.NextHop}`)) {
      blocked.push({ op: 'add-host-route', object: d.key, reason: `a route via ${d.route.NextHop} on ${alias} exists that is not ours (other metric)` });
      continue;
    }
    push({ op: 'add-host-route', body: { ...d.route } }, d.prefix, d.route.NextHop);
  }
}

// ---- observation (tests, status) -----------------------------------------------------------------------------

/** The owned part of a state, as sorted canonical strings: equal views = nothing to do. */
export interface OwnedView {
  network: string | null;
  subnets: string[];
  ipSubnets: string[];
  policies: string[];
  hostRoutePolicy: boolean;
  hostRoutes: string[];
  /** Our host endpoints, "name|address". */
  hostEndpoints: string[];
}

export function observe(actual: HnsSnapshot, desired: DesiredState): OwnedView {
  const view: OwnedView = { network: null, subnets: [], ipSubnets: [], policies: [], hostRoutePolicy: false, hostRoutes: [], hostEndpoints: [] };
  const net = findNetwork(actual.Networks, desired.networkName, desired.networkType);
  if (net) {
    view.network = `${net.Name}|${net.Type}`;
    for (const e of actual.Endpoints) {
      if (e && onNetwork(e, net) && isHostEndpointName(desired.networkName, e.Name)) {
        view.hostEndpoints.push(`${e.Name}|${endpointAddresses(e).map(String).join(',')}`);
      }
    }
    for (const raw of subnetsOf(net)) {
      const p = readPrefix(raw.IpAddressPrefix);
      if (!p || !insideAny(p.prefix, desired.owned)) continue;
      view.subnets.push(`${p.key}|${subnetSig(asArray(raw.Routes), asArray(raw.Policies))}`);
      for (const ip of readIpSubnets(raw)) view.ipSubnets.push(`${p.key}>${ip.key}|${ip.flags}`);
    }
    for (const raw of asArray(net.Policies)) {
      if (raw?.Type === 'HostRoute') view.hostRoutePolicy = true;
      if (raw?.Type !== 'RemoteSubnetRoute') continue;
      const p = readPrefix(raw.Settings?.DestinationPrefix);
      if (p && insideAny(p.prefix, desired.owned)) view.policies.push(rsrSig(raw.Settings, p.key));
    }
  }
  if (desired.interfaceAlias !== undefined) {
    for (const r of actual.HostRoutes) {
      const p = ownedHostRoute(r, desired);
      if (p) view.hostRoutes.push(`${p.key}|${readIP(r.NextHop)?.key ?? r.NextHop}`);
    }
  }
  for (const k of ['subnets', 'ipSubnets', 'policies', 'hostRoutes', 'hostEndpoints'] as const) view[k].sort();
  return view;
}

/**
 * What observe() returns once the desired state is reached. `networkExists`: the network was there already (it is
 * never deleted, so it stays even when no local block is left).
 */
export function desiredView(desired: DesiredState, networkExists = false): OwnedView {
  const hasNet = desired.subnets.length > 0 || networkExists;
  const view: OwnedView = {
    network: hasNet ? `${desired.networkName}|${desired.networkType}` : null,
    subnets: desired.subnets.map((s) => `${s.key}|${s.sig}`),
    ipSubnets: desired.subnets.flatMap((s) => s.ipSubnets.map((i) => `${s.key}>${i.key}|${i.flags}`)),
    policies: hasNet ? desired.remoteSubnetRoutes.map((p) => p.sig) : [],
    hostRoutePolicy: hasNet && desired.hostRoutePolicy,
    hostRoutes: desired.hostRoutes.map((h) => `${h.key}|${h.route.NextHop}`),
    hostEndpoints: desired.hostEndpoints.map((e) => `${e.name}|${e.ip}`),
  };
  for (const k of ['subnets', 'ipSubnets', 'policies', 'hostRoutes', 'hostEndpoints'] as const) view[k].sort();
  return view;
}
