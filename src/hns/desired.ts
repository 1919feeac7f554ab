// Desired HNS state: what this node's network should hold, from config, the local IPAM view and the RIB.
//
//  - one HNS network (L2Bridge, L2Tunnel or Overlay: the only types with several subnets per network);
//  - a Subnet per pool that has at least one local block, holding the shared gateway route (0.0.0.0/0 -> gateway);
//    overlay subnets also carry the VSID policy (IsolationId = VNI);
//  - an IpSubnet per local block, Flags from the pool's reservation policy: normal blocks EnableBroadcast |
//    ReserveNetworkAddress (3), micropools (none / perHost / perPool reservations) and /31, /32 blocks 0;
//  - overlay: a RemoteSubnetRoute policy per remote block (ProviderAddress = the route's next hop, IsolationId =
//    VNI, DistributedRouterMacAddress = the DR MAC) and one HostRoute policy;
//  - l2bridge / l2tunnel: a route per remote block on the management vNIC, via the route's next hop.
// Single-network mode (kube-proxy wants one subnet per node): the one local block is the Subnet and its IpSubnet.
//
// Subnets come and go with their pool's first and last local block: pool and block sizes need not be known before
// the first allocation, and a Subnet is never sent to HNS without ip-subnets (HNS fills an empty one with a
// whole-subnet ip-subnet, which would then overlap the blocks).
import { type Family, type IP, type Prefix, comparePrefix, formatIP, ipAt, prefixContainsIP, prefixSize, prefixesOverlap } from '../net/ip.ts';
import type { ReservationPolicy } from '../ipam/types.ts';
import type { RibChange } from '../rib/rib.ts';
import {
  type HnsPolicy,
  type HnsRoute,
  type NetRoute,
  type ParsedPrefix,
  IpSubnetFlags,
  configIP,
  configPrefix,
  defaultRoute,
  insideAny,
  normalizeMac,
  readIP,
  readPrefix,
} from './model.ts';
import {
  HNS_DEFAULT_ROUTE_METRIC, HNS_MODES, HNS_ROUTE_METRIC_MAX, HNS_ROUTE_METRIC_MIN, HNS_VNI_MAX, HNS_VNI_MIN,
} from './limits.ts';

export type HnsMode = 'l2bridge' | 'l2tunnel' | 'overlay';
export const networkTypeOf: Record<HnsMode, string> = { l2bridge: 'L2Bridge', l2tunnel: 'L2Tunnel', overlay: 'Overlay' };

export interface HnsPoolConfig {
  cidr: string;
  /**
   * The gateway every block of the pool shares on this node (HNS answers for it on the host): from hnsAddressing.
   * Needed once the pool has a local block.
   */
  gateway?: string;
  /** The host endpoint's address (hnsAddressing); with it the programmer creates and keeps `<network>_ep`. */
  hostEndpoint?: string;
  name?: string;
  /** The pool's reservation policy (IPAM's); decides the ip-subnets' Flags. Default auto. */
  reservation?: ReservationPolicy;
}

export interface HnsConfig {
  mode: HnsMode;
  /** The HNS network's Name. */
  network: string;
  /** The physical adapter the network is bound to (NetAdapterName policy at creation). */
  adapter?: string;
  /** Alias of the management vNIC for l2bridge/l2tunnel host routes; default "vEthernet (<adapter>)". */
  managementInterface?: string;
  pools: HnsPoolConfig[];
  /** Extra owned ranges (e.g. the cluster CIDR): remote routes outside the pools are programmed only inside these. */
  ownedPrefixes?: string[];
  /** Overlay: VXLAN VNI, 4096..65535 (RemoteSubnetRoute's IsolationId is a uint16 in HCN). */
  vni?: number;
  /** Overlay: the distributed router MAC every RemoteSubnetRoute carries. */
  drMac?: string;
  /** This node's provider address: a ProviderAddress policy at creation; routes via it are our own, skipped. */
  providerAddress?: string;
  /** One block per host, the block is the network's subnet (for kube-proxy). */
  singleNetwork?: boolean;
  /** RouteMetric of our management vNIC routes: the marker that tells ours from others'. Default 271. */
  routeMetric?: number;
}

export interface LocalBlock {
  cidr: string;
  /** The pool's reservation policy, when it differs from the pool config's (IPAM knows best). */
  reservation?: ReservationPolicy;
}

export interface RemoteRoute {
  prefix: string | Prefix;
  nextHop: string | IP | null;
  /** Overlay: the remote node's own DR MAC (published in the datastore); absent: the configured drMac. */
  drMac?: string;
}

export interface DesiredInputs {
  config: HnsConfig;
  localBlocks: readonly (string | LocalBlock)[];
  remoteRoutes: Iterable<RemoteRoute>;
  /**
   * The addresses IPAM handles hold on this node (canonical text). With it, endpoints on our network whose address
   * is inside a pool but held by no handle (leaked: the pod is gone) are removed. Without it, none are.
   */
  heldIPs?: ReadonlySet<string>;
}

export interface DesiredHostEndpoint {
  name: string;
  ip: string;
  prefixLen: number;
  /** The Subnet it sits in. */
  subnet: string;
}

export interface DesiredIpSubnet extends ParsedPrefix {
  flags: number;
}

export interface DesiredSubnet extends ParsedPrefix {
  routes: HnsRoute[];
  policies: HnsPolicy[];
  /** Canonical signature of routes and policies: equal signatures = the same Subnet. */
  sig: string;
  ipSubnets: DesiredIpSubnet[];
}

export interface RemoteSubnetRouteSettings {
  DestinationPrefix: string;
  IsolationId: number;
  ProviderAddress: string;
  DistributedRouterMacAddress: string;
}

export interface DesiredPolicy extends ParsedPrefix {
  settings: RemoteSubnetRouteSettings;
  /** prefix|IsolationId|ProviderAddress|MAC, canonical. */
  sig: string;
}

export interface DesiredHostRoute extends ParsedPrefix {
  route: NetRoute;
}

export interface DesiredState {
  mode: HnsMode;
  networkType: string;
  networkName: string;
  adapter?: string;
  providerAddress?: string;
  vni?: number;
  /** Sorted by prefix. */
  subnets: DesiredSubnet[];
  /** Overlay only; sorted by prefix. */
  remoteSubnetRoutes: DesiredPolicy[];
  hostRoutePolicy: boolean;
  /** l2bridge / l2tunnel only; sorted by prefix. */
  hostRoutes: DesiredHostRoute[];
  interfaceAlias?: string;
  routeMetric: number;
  owned: Prefix[];
  /** Remote routes left out, and why (outside the owned ranges, inside a local block, via ourselves, ...). */
  ignored: { prefix: string; reason: string }[];
  /** The host endpoints (one per Subnet), sorted by name. */
  hostEndpoints: DesiredHostEndpoint[];
  /** See DesiredInputs.heldIPs. */
  heldIPs?: ReadonlySet<string>;
}

/** Config or input the desired state cannot be built from; the message names the field or value. */
export class HnsConfigError extends Error {
  override name = 'ConfigError';
}

export const DEFAULT_ROUTE_METRIC = HNS_DEFAULT_ROUTE_METRIC;

/** The host endpoint's name: Calico's `<network>_ep` in single-network mode, `<network>_ep_<pool>` per pool else. */
export const hostEndpointName = (network: string, pool: string, singleNetwork: boolean): string =>
  singleNetwork ? `${network}_ep` : `${network}_ep_${pool}`;

/** Whether an endpoint name is one of our host endpoints' on `network`. */
export const isHostEndpointName = (network: string, name: unknown): boolean =>
  typeof name === 'string' && (name === `${network}_ep` || name.startsWith(`${network}_ep_`));

/** Flags for a block's ip-subnet under its pool's reservation policy. */
export function ipSubnetFlags(block: Prefix, reservation: ReservationPolicy | undefined): number {
  const hostBits = (block.family === 4 ? 32 : 128) - block.len;
  if (hostBits < 2) return IpSubnetFlags.None; // /31, /32: no network or broadcast address to speak of
  const r = reservation ?? { kind: 'auto' };
  const reserves = r.kind === 'auto' || (r.kind === 'perBlock' && (r.start > 0 || r.end > 0));
  return reserves ? IpSubnetFlags.EnableBroadcast | IpSubnetFlags.ReserveNetworkAddress : IpSubnetFlags.None;
}

function validateConfig(c: HnsConfig): void {
  if (!c || typeof c !== 'object') throw new HnsConfigError('hns config: expected an object');
  if (!(HNS_MODES as readonly string[]).includes(c.mode)) {
    throw new HnsConfigError(`mode: must be l2bridge, l2tunnel or overlay, got ${JSON.stringify(c.mode)}`);
  }
  if (typeof c.network !== 'string' || c.network.trim() === '') throw new HnsConfigError('network: a network name is required');
  if (!Array.isArray(c.pools)) throw new HnsConfigError('pools: expected a list of {cidr, gateway}');
  if (c.mode === 'overlay') {
    if (c.vni === undefined) throw new HnsConfigError(`vni: overlay mode needs a VNI (${HNS_VNI_MIN}..${HNS_VNI_MAX})`);
    if (!Number.isInteger(c.vni) || c.vni < HNS_VNI_MIN || c.vni > HNS_VNI_MAX) {
      throw new HnsConfigError(`vni: must be a whole number ${HNS_VNI_MIN}..${HNS_VNI_MAX} (Windows overlay VSIDs start at 4096; HCN's IsolationId is 16-bit), got ${c.vni}`);
    }
    if (c.drMac === undefined) throw new HnsConfigError('drMac: overlay mode needs the distributed router MAC');
    if (normalizeMac(c.drMac) === null) throw new HnsConfigError(`drMac: not a MAC address: ${JSON.stringify(c.drMac)}`);
  }
  if (c.routeMetric !== undefined && (!Number.isInteger(c.routeMetric) || c.routeMetric < HNS_ROUTE_METRIC_MIN || c.routeMetric > HNS_ROUTE_METRIC_MAX)) {
    throw new HnsConfigError(`routeMetric: must be a whole number ${HNS_ROUTE_METRIC_MIN}..${HNS_ROUTE_METRIC_MAX}, got ${c.routeMetric}`);
  }
}

interface PoolInfo extends ParsedPrefix {
  gateway?: IP;
  hostEndpoint?: IP;
  name: string;
  reservation?: ReservationPolicy;
  index: number;
}

/** Build the desired state. Throws HnsConfigError / AddressError naming the bad field or value. */
export function buildDesired(input: DesiredInputs): DesiredState {
  const c = input.config;
  validateConfig(c);
  const pools: PoolInfo[] = c.pools.map((p, i) => {
    const what = `pools[${i}]`;
    const cidr = configPrefix(p?.cidr, `${what}.cidr`);
    const addr = (field: 'gateway' | 'hostEndpoint'): IP | undefined => {
      if (p?.[field] === undefined) return undefined;
      const ip = configIP(p[field], `${what}.${field}`);
      if (ip.family !== cidr.prefix.family || !prefixContainsIP(cidr.prefix, ip)) {
        throw new HnsConfigError(`${what}.${field}: ${ip} is not inside the pool ${cidr.key}`);
      }
      return ip;
    };
    return { ...cidr, gateway: addr('gateway'), hostEndpoint: addr('hostEndpoint'), name: p.name ?? `pool${i}`, reservation: p.reservation, index: i };
  });
  for (let i = 0; i < pools.length; i++) {
    for (let j = i + 1; j < pools.length; j++) {
      if (prefixesOverlap(pools[i].prefix, pools[j].prefix)) {
        throw new HnsConfigError(`pools: ${pools[i].key} and ${pools[j].key} overlap`);
      }
    }
  }
  const owned = pools.map((p) => p.prefix);
  for (const [i, text] of (c.ownedPrefixes ?? []).entries()) {
    const p = configPrefix(text, `ownedPrefixes[${i}]`);
    if (p.prefix.len < 8 && p.prefix.family === 4) throw new HnsConfigError(`ownedPrefixes[${i}]: ${p.key} is wider than a /8; refusing to claim it`);
    owned.push(p.prefix);
  }

  // Local blocks: each inside a pool, disjoint.
  const blocks: { p: ParsedPrefix; pool: PoolInfo; reservation?: ReservationPolicy }[] = [];
  for (const [i, b] of input.localBlocks.entries()) {
    const text = typeof b === 'string' ? b : b?.cidr;
    const p = configPrefix(text, `local block ${JSON.stringify(text ?? i)}`);
    const pool = pools.find((q) => q.prefix.family === p.prefix.family && prefixContainsIP(q.prefix, p.prefix.ip) && q.prefix.len <= p.prefix.len);
    if (!pool) throw new HnsConfigError(`local block ${p.key}: inside no configured pool`);
    blocks.push({ p, pool, reservation: typeof b === 'string' ? undefined : b.reservation });
  }
  blocks.sort((a, b) => comparePrefix(a.p.prefix, b.p.prefix));
  for (let i = 1; i < blocks.length; i++) {
    if (prefixesOverlap(blocks[i - 1].p.prefix, blocks[i].p.prefix)) {
      throw new HnsConfigError(`local blocks ${blocks[i - 1].p.key} and ${blocks[i].p.key} overlap`);
    }
  }
  if (c.singleNetwork && blocks.length > 1) {
    throw new HnsConfigError(`singleNetwork: one local block per host, got ${blocks.length} (${blocks.map((b) => b.p.key).join(', ')})`);
  }

  const subnetPolicies: HnsPolicy[] = c.mode === 'overlay' ? [{ Type: 'VSID', Settings: { IsolationId: c.vni! } }] : [];
  const subnets: DesiredSubnet[] = [];
  const hostEndpoints: DesiredHostEndpoint[] = [];
  const gatewayOf = (pool: PoolInfo): IP => {
    if (!pool.gateway) throw new HnsConfigError(`pools[${pool.index}].gateway: pool ${pool.key} has a local block but no gateway`);
    return pool.gateway;
  };
  const addHostEndpoint = (pool: PoolInfo, subnet: ParsedPrefix) => {
    if (!pool.hostEndpoint) return;
    if (!prefixContainsIP(subnet.prefix, pool.hostEndpoint)) {
      throw new HnsConfigError(`pools[${pool.index}].hostEndpoint: ${pool.hostEndpoint} is not inside the subnet ${subnet.key}`);
    }
    const name = hostEndpointName(c.network, pool.name, !!c.singleNetwork);
    hostEndpoints.push({ name, ip: formatIP(pool.hostEndpoint), prefixLen: subnet.prefix.len, subnet: subnet.key });
  };
  if (c.singleNetwork) {
    for (const b of blocks) {
      // kube-proxy's layout: the block is the subnet; the gateway is the pool's when inside the block, else .1.
      const gw = b.pool.gateway && prefixContainsIP(b.p.prefix, b.pool.gateway) ? b.pool.gateway : ipAt(b.p.prefix, Math.min(1, prefixSize(b.p.prefix) - 1));
      subnets.push(makeSubnet(b.p, gw, subnetPolicies, [{ ...b.p, flags: ipSubnetFlags(b.p.prefix, b.reservation ?? b.pool.reservation) }]));
      addHostEndpoint(b.pool, b.p);
    }
  } else {
    const byPool = new Map<PoolInfo, DesiredIpSubnet[]>();
    for (const b of blocks) {
      let list = byPool.get(b.pool);
      if (!list) byPool.set(b.pool, (list = []));
      list.push({ ...b.p, flags: ipSubnetFlags(b.p.prefix, b.reservation ?? b.pool.reservation) });
    }
    for (const [pool, ips] of byPool) {
      subnets.push(makeSubnet(pool, gatewayOf(pool), subnetPolicies, ips));
      addHostEndpoint(pool, pool);
    }
  }
  subnets.sort((a, b) => comparePrefix(a.prefix, b.prefix));
  hostEndpoints.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  // Remote routes: only inside owned ranges, never over our own blocks, never via ourselves.
  const ignored: { prefix: string; reason: string }[] = [];
  const ownPa = c.providerAddress !== undefined ? configIP(c.providerAddress, 'providerAddress') : undefined;
  const remotes = new Map<string, { p: ParsedPrefix; nh: IP; mac?: string }>();
  const blockPrefixes = blocks.map((b) => b.p.prefix);
  const ownPaText = ownPa ? formatIP(ownPa) : undefined;
  for (const r of input.remoteRoutes) {
    const p = typeof r.prefix === 'string' ? strictPrefix(r.prefix) : { key: r.prefix.toString(), prefix: r.prefix };
    const nh = r.nextHop === null || r.nextHop === undefined ? null : typeof r.nextHop === 'string' ? strictIP(r.nextHop, p.key) : r.nextHop;
    // No closure per route here: tsx wraps every function expression, and this loop runs for every RIB route.
    let reason: string | null = null;
    if (!nh) reason = 'no next hop';
    else if (!insideAny(p.prefix, owned)) reason = 'outside the pools and owned prefixes';
    else if (overlapsSorted(blockPrefixes, p.prefix)) reason = 'overlaps a local block';
    else if (ownPaText !== undefined && ownPaText === formatIP(nh)) reason = 'via this node';
    else if (r.drMac !== undefined && normalizeMac(r.drMac) === null) reason = `DR MAC ${JSON.stringify(r.drMac)} is not a MAC address`;
    else if (c.mode !== 'overlay' && nh.family !== p.prefix.family) reason = `next hop ${nh} is not IPv${p.prefix.family}`;
    else if (nh.w0 === 0 && nh.w1 === 0 && nh.w2 === 0 && nh.w3 === 0) reason = 'unspecified next hop';
    if (reason !== null) ignored.push({ prefix: p.key, reason });
    else remotes.set(p.key, { p, nh: nh!, mac: r.drMac === undefined ? undefined : normalizeMac(r.drMac)! });
  }
  const remoteList = [...remotes.values()].sort((a, b) => comparePrefix(a.p.prefix, b.p.prefix));

  const state: DesiredState = {
    mode: c.mode,
    networkType: networkTypeOf[c.mode],
    networkName: c.network,
    adapter: c.adapter,
    providerAddress: ownPa ? formatIP(ownPa) : undefined,
    vni: c.mode === 'overlay' ? c.vni : undefined,
    subnets,
    remoteSubnetRoutes: [],
    hostRoutePolicy: c.mode === 'overlay',
    hostRoutes: [],
    routeMetric: c.routeMetric ?? DEFAULT_ROUTE_METRIC,
    owned,
    ignored,
    hostEndpoints,
    heldIPs: input.heldIPs,
  };
  if (c.mode === 'overlay') {
    const ownMac = normalizeMac(c.drMac)!;
    for (const { p, nh, mac: theirs } of remoteList) {
      const pa = formatIP(nh);
      const mac = theirs ?? ownMac;
      state.remoteSubnetRoutes.push({
        ...p,
        settings: { DestinationPrefix: p.key, IsolationId: c.vni!, ProviderAddress: pa, DistributedRouterMacAddress: mac },
        sig: `${p.key}|${c.vni}|${pa}|${mac}`,
      });
    }
  } else {
    const alias = c.managementInterface ?? (c.adapter ? `vEthernet (${c.adapter})` : undefined);
    state.interfaceAlias = alias;
    for (const { p, nh } of remoteList) {
      // No management vNIC known yet (none configured, none found from the default route): these routes wait,
      // listed, while the network, subnets and endpoints are still programmed.
      if (!alias) {
        ignored.push({ prefix: p.key, reason: 'no management vNIC known (set adapter or interfaceAlias, or give the host a default route)' });
        continue;
      }
      state.hostRoutes.push({
        ...p,
        route: { DestinationPrefix: p.key, NextHop: formatIP(nh), InterfaceAlias: alias, RouteMetric: state.routeMetric },
      });
    }
  }
  return state;
}

/** A remote route's prefix: the fast reader when the text is already canonical, else the strict parser's verdict. */
function strictPrefix(text: string): ParsedPrefix {
  const p = readPrefix(text);
  return p && p.key === text ? p : configPrefix(text, 'remote route');
}

function strictIP(text: string, prefix: string): IP {
  const a = readIP(text);
  return a && a.key === text ? a.ip : configIP(text, `remote route ${prefix} next hop`);
}

/** Whether `p` overlaps any of `sorted` (disjoint, in comparePrefix order): only the neighbours of its slot can. */
export function overlapsSorted(sorted: readonly Prefix[], p: Prefix): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (comparePrefix(sorted[mid], p) < 0) lo = mid + 1;
    else hi = mid;
  }
  return (lo > 0 && prefixesOverlap(sorted[lo - 1], p)) || (lo < sorted.length && prefixesOverlap(sorted[lo], p));
}

function makeSubnet(p: ParsedPrefix, gateway: IP, policies: HnsPolicy[], ipSubnets: DesiredIpSubnet[]): DesiredSubnet {
  const routes: HnsRoute[] = [{ NextHop: formatIP(gateway), DestinationPrefix: defaultRoute(p.prefix.family as Family) }];
  return { key: p.key, prefix: p.prefix, routes, policies, sig: subnetSig(routes, policies), ipSubnets };
}

/** Canonical text of a Subnet's routes and (VSID/VLAN) policies, for comparing desired with actual. */
export function subnetSig(routes: readonly HnsRoute[], policies: readonly HnsPolicy[]): string {
  const r = routes
    .map((x) => `${readIP(x?.NextHop)?.key ?? String(x?.NextHop)}>${canonicalDest(x?.DestinationPrefix)}`)
    .sort()
    .join(',');
  const p = policies
    .filter((x) => x && (x.Type === 'VSID' || x.Type === 'VLAN'))
    .map((x) => `${x.Type}=${Number((x.Settings as { IsolationId?: unknown } | undefined)?.IsolationId)}`)
    .sort()
    .join(',');
  return `${r};${p}`;
}

function canonicalDest(text: unknown): string {
  // HNS examples write the default route as "0.0.0.0"; it means 0.0.0.0/0.
  if (text === '0.0.0.0') return '0.0.0.0/0';
  if (text === '::') return '::/0';
  if (typeof text !== 'string') return String(text);
  try {
    return configPrefix(text, 'route').key;
  } catch {
    return text;
  }
}

/**
 * Remote routes kept from the RIB's change feed: prefix -> best path's next hop. Routes whose best path is local
 * (our own blocks, static announcements) are not remote.
 */
export class RemoteRouteTable {
  private readonly routes = new Map<string, RemoteRoute>();
  constructor(private readonly localSources: ReadonlySet<string> = new Set(['local', 'static'])) {}

  /** Apply one change batch; true when anything changed. */
  apply(batch: Iterable<RibChange>): boolean {
    let changed = false;
    for (const ch of batch) {
      const key = ch.prefix.toString();
      const best = ch.best;
      if (ch.type === 'withdraw' || !best || this.localSources.has(best.source) || !best.attrs.nextHop) {
        changed = this.routes.delete(key) || changed;
        continue;
      }
      const prev = this.routes.get(key);
      if (prev && prev.nextHop && formatIP(prev.nextHop as IP) === formatIP(best.attrs.nextHop)) continue;
      this.routes.set(key, { prefix: ch.prefix, nextHop: best.attrs.nextHop });
      changed = true;
    }
    return changed;
  }

  get size(): number {
    return this.routes.size;
  }

  values(): IterableIterator<RemoteRoute> {
    return this.routes.values();
  }
}
