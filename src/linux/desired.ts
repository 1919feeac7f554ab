// What the kernel should hold for this node, from IPAM's local view and the RIB's best routes. Pure.
//
//  - Own affine blocks become blackhole routes: traffic to an unallocated address in our block is dropped here
//    instead of following a covering route back out (a loop); pods' own /32 device routes are more specific.
//    A host-sized block (/32, /128 micropool) is not blackholed: it is the pod's address itself.
//  - Remote blocks and other hosts' borrowed /32s (/128s) from the RIB become `via NEXTHOP` routes, with a device
//    when configured or required (an IPv6 link-local next hop), and `onlink` when asked for.
//  - On the same prefix our own block wins over a remote announcement (reported as skipped).
import { type IP, type Prefix, ipEquals, maxLen, parsePrefix, prefixContainsIP } from '../net/ip.ts';
import type { RouteView } from '../ipam/types.ts';
import type { Path } from '../rib/bestpath.ts';
import type { RibChange, RibRoute } from '../rib/rib.ts';
import {
  DEFAULT_PROTOCOL, DEFAULT_TABLE, type KernelRoute, type Owner, kernelDefaultMetric, validDevName,
} from './route.ts';

export interface LinuxRouteConfig {
  /** Routing table id (default 200). Traffic only uses it with an `ip rule ... lookup 200`; 254 is main. */
  table?: number;
  /** Protocol tag marking our routes (default 181). Must not be shared with any other program. */
  protocol?: number;
  /** Route metric (default: the kernel's, 0 for IPv4 and 1024 for IPv6). Part of the route's key. */
  metric?: number;
  /** Device for every next hop that does not name its own (absent = the kernel resolves it). */
  dev?: string;
  /** Install next hops with `onlink` (gateway not on a connected subnet); needs a device. */
  onlink?: boolean;
  /** This node's addresses: a route whose next hop is one of them is skipped (the kernel refuses it anyway). */
  nodeAddresses?: readonly IP[];
}

export interface ResolvedLinuxConfig extends Owner {
  metric: number | undefined;
  dev: string | undefined;
  onlink: boolean;
  nodeAddresses: readonly IP[];
}

export class LinuxConfigError extends Error {
  override name = 'LinuxConfigError';
}

const isUint32 = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 0xffffffff;

/** Defaults applied and checked; throws LinuxConfigError naming the bad field. */
export function resolveLinuxConfig(c: LinuxRouteConfig = {}): ResolvedLinuxConfig {
  const table = c.table ?? DEFAULT_TABLE;
  // 0 is "unspecified" and 255 the kernel's local table: routes there would shadow addresses on this host.
  if (!isUint32(table) || table === 0 || table === 255) {
    throw new LinuxConfigError(`dataplane.table ${table}: must be 1..4294967295 and not 255 (local)`);
  }
  const protocol = c.protocol ?? DEFAULT_PROTOCOL;
  // 0..4 are unspec, redirect, kernel, boot (what a bare `ip route add` uses) and static: claiming one of them would
  // make us delete routes an administrator or the kernel added.
  if (!Number.isInteger(protocol) || protocol < 5 || protocol > 255) {
    throw new LinuxConfigError(`dataplane.protocol ${protocol}: must be 5..255 (0..4 belong to the kernel and admins)`);
  }
  if (c.metric !== undefined && !isUint32(c.metric)) {
    throw new LinuxConfigError(`dataplane.metric ${c.metric}: must be 0..4294967295`);
  }
  if (c.dev !== undefined && !validDevName(c.dev)) {
    throw new LinuxConfigError(`dataplane.dev ${JSON.stringify(c.dev)}: not an interface name`);
  }
  if (c.onlink && c.dev === undefined) {
    throw new LinuxConfigError('dataplane.onlink needs dataplane.dev (the kernel requires a device for onlink)');
  }
  return {
    table, protocol, metric: c.metric, dev: c.dev, onlink: c.onlink ?? false, nodeAddresses: c.nodeAddresses ?? [],
  };
}

/** A route learned from the RIB: a remote block or another host's borrowed address. */
export interface RemoteRoute {
  prefix: Prefix;
  nextHop: IP;
  /** Overrides the configured device for this route. */
  dev?: string;
  onlink?: boolean;
}

export interface DesiredInput {
  /** This host's affine blocks (IPAM RouteView.aggregates). */
  localBlocks: Iterable<Prefix>;
  /** Best routes with a next hop from the RIB. */
  remote: Iterable<RemoteRoute>;
}

export interface SkippedRoute {
  prefix: Prefix;
  nextHop?: IP;
  reason: string;
}

export interface DesiredRoutes {
  routes: KernelRoute[];
  /** Inputs that produce no route, with why (for status; none of these is retried as an error). */
  skipped: SkippedRoute[];
}

const pkey = (p: Prefix): string => `${p.family}:${p.w0}:${p.w1}:${p.w2}:${p.w3}/${p.len}`;

const LINK_LOCAL6: Prefix = parsePrefix('fe80::/10');

/** The desired routes in table/protocol of `cfg` (resolved or not). */
export function desiredRoutes(input: DesiredInput, config: LinuxRouteConfig): DesiredRoutes {
  const cfg = resolveLinuxConfig(config); // cheap, and a resolved config resolves to itself
  const m4 = cfg.metric ?? kernelDefaultMetric(4);
  const m6 = cfg.metric ?? kernelDefaultMetric(6);
  const out = new Map<string, KernelRoute>();
  const own = new Set<string>();
  const skipped: SkippedRoute[] = [];

  for (const b of input.localBlocks) {
    const k = pkey(b);
    own.add(k);
    if (b.len === maxLen(b.family) || out.has(k)) continue;
    out.set(k, {
      dst: b, metric: b.family === 4 ? m4 : m6, kind: 'blackhole', onlink: false, table: cfg.table, protocol: cfg.protocol,
    });
  }

  for (const r of input.remote) {
    const k = pkey(r.prefix);
    const dev = r.dev ?? cfg.dev;
    const onlink = r.onlink ?? cfg.onlink;
    // No per-route closure here: tsx wraps every closure it creates in __name, which shows at 100k routes.
    const reason = own.has(k) ? 'this host owns the block' : remoteProblem(r, dev, onlink, cfg.nodeAddresses);
    if (reason !== null) {
      skipped.push({ prefix: r.prefix, nextHop: r.nextHop, reason });
      continue;
    }
    const route: KernelRoute = {
      dst: r.prefix, metric: r.prefix.family === 4 ? m4 : m6, kind: 'via', via: r.nextHop, onlink, table: cfg.table,
      protocol: cfg.protocol,
    };
    if (dev !== undefined) route.dev = dev;
    out.set(k, route);
  }
  return { routes: [...out.values()], skipped };
}

/** Why the kernel would refuse a remote route (or we must not install it), or null. */
function remoteProblem(r: RemoteRoute, dev: string | undefined, onlink: boolean, self: readonly IP[]): string | null {
  if (r.prefix.family === 6 && r.nextHop.family === 4) {
    return 'an IPv6 route cannot use an IPv4 next hop (the kernel refuses RTA_VIA for IPv6)';
  }
  for (const a of self) if (ipEquals(a, r.nextHop)) return 'the next hop is this node';
  if (dev !== undefined && !validDevName(dev)) return `bad device name ${JSON.stringify(dev)}`;
  if (dev === undefined && r.nextHop.family === 6 && prefixContainsIP(LINK_LOCAL6, r.nextHop)) {
    return 'a link-local next hop needs a device (set dataplane.dev)';
  }
  if (onlink && dev === undefined) return 'onlink needs a device';
  return null;
}

/** The local blocks of an IPAM route view. Borrowed addresses held here need no route from us (CNI adds them). */
export function localBlocksFromView(view: RouteView): Prefix[] {
  return view.aggregates.map((s) => parsePrefix(s));
}

/** The remote route a RIB best path stands for; null for locally originated paths (no next hop). */
export function remoteFromPath(prefix: Prefix, best: Path | undefined): RemoteRoute | null {
  const nh = best?.attrs.nextHop;
  return nh ? { prefix, nextHop: nh } : null;
}

/**
 * The remote routes of the RIB, kept current from its change feed. `version` grows on every effective change so a
 * reconcile loop can tell input changes from drift.
 */
export class RemoteRoutes {
  private readonly map = new Map<string, RemoteRoute>();
  version = 0;

  get size(): number {
    return this.map.size;
  }

  values(): IterableIterator<RemoteRoute> {
    return this.map.values();
  }

  /** Replace the content with a RIB snapshot (e.g. rib.entries() right after subscribing). */
  load(routes: Iterable<Pick<RibRoute, 'prefix' | 'best'>>): void {
    this.map.clear();
    for (const r of routes) {
      const rr = remoteFromPath(r.prefix, r.best);
      if (rr) this.map.set(pkey(r.prefix), rr);
    }
    this.version++;
  }

  /** Apply one change-feed batch; true when the set of remote routes changed. */
  apply(batch: Iterable<RibChange>): boolean {
    let changed = false;
    for (const ch of batch) {
      const k = pkey(ch.prefix);
      const rr = ch.type === 'withdraw' ? null : remoteFromPath(ch.prefix, ch.best);
      const old = this.map.get(k);
      if (rr) {
        if (old && ipEquals(old.nextHop, rr.nextHop)) continue;
        this.map.set(k, rr);
        changed = true;
      } else if (old) {
        this.map.delete(k);
        changed = true;
      }
    }
    if (changed) this.version++;
    return changed;
  }
}

/** The part of a Rib the follower needs (so tests can use a real Rib or a stub). */
export interface RibFeed {
  subscribe(fn: (batch: Iterable<RibChange>) => void): () => void;
  entries(): Iterable<RibRoute>;
}

/**
 * Keep `remote` in step with a RIB: subscribe, load the snapshot, then apply each batch and call onChange when the
 * remote routes actually changed. Returns the unsubscribe function.
 */
export function followRib(rib: RibFeed, remote: RemoteRoutes, onChange: () => void): () => void {
  const unsubscribe = rib.subscribe((batch) => {
    if (remote.apply(batch)) onChange();
  });
  remote.load(rib.entries());
  onChange();
  return unsubscribe;
}
