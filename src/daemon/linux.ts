// The daemon's Linux dataplane: the routes learned over BGP and the prefixes this node announces -> the kernel's
// routes in the configured table, programmed by the reconciler (src/linux). Its own file as the HNS dataplane has
// hns.ts; the daemon imports it only when the dataplane kind is linux.
import type { DataplaneConfig } from '../config/types.ts';
import { desiredRoutes, followRib, RemoteRoutes } from '../linux/desired.ts';
import { IpRouteProgrammer } from '../linux/programmer.ts';
import { LinuxReconciler, type RunRecord } from '../linux/reconcile.ts';
import { formatPrefix, maxLen, parseIP, type IP, type Prefix } from '../net/ip.ts';
import type { Rib } from '../rib/rib.ts';

export interface LinuxDataplaneOptions {
  dp: Extract<DataplaneConfig, { kind: 'linux' }>;
  /** What the announcer announces now: the dataplane's "local" prefixes. */
  localPrefixes: () => readonly Prefix[];
  /** Every reconciler run's record (readiness, error counts, logging). */
  onRun: (r: RunRecord) => void;
}

export class LinuxDataplane {
  readonly remote = new RemoteRoutes();
  readonly reconciler: LinuxReconciler;
  private unfollowRib: (() => void) | null = null;

  constructor(private readonly o: LinuxDataplaneOptions) {
    const owner = { table: o.dp.table, protocol: o.dp.protocol };
    this.reconciler = new LinuxReconciler({
      programmer: new IpRouteProgrammer(owner),
      desired: () => this.desired(owner, o.dp.bridge),
      onRun: o.onRun,
    });
  }

  /** (Re)subscribe to a speaker's RIB; null (a reload removed the speaker): no remote routes. */
  follow(r: Rib | null): void {
    this.unfollow();
    if (r) this.unfollowRib = followRib(r, this.remote, () => this.reconciler.changed());
    else {
      this.remote.load([]);
      this.reconciler.changed();
    }
  }

  unfollow(): void {
    this.unfollowRib?.();
    this.unfollowRib = null;
  }

  /** The announced prefixes changed. */
  changed(): void {
    this.reconciler.changed();
  }

  start(): void {
    this.reconciler.start();
  }

  /** /dataplane's linux part: the table, the routes learned and announced, and the reconciler's runs. */
  status(): Record<string, unknown> {
    const dp = this.o.dp;
    const s = this.reconciler.status();
    return { table: dp.table, protocol: dp.protocol, bridge: dp.bridge ?? null, remoteRoutes: this.remote.size,
      localPrefixes: this.o.localPrefixes().map(formatPrefix), runs: s.runs, failures: s.failures, consecutiveFailures: s.consecutiveFailures,
      lastRun: s.lastRun ?? null, lastPlan: s.lastPlan ?? null, lastError: s.lastError ?? null, drift: { repairs: s.driftRepairs, last: s.lastDrift ?? null } };
  }

  /**
   * Own blocks are blackholed (an unused address must not follow a covering route out) unless pods sit on a bridge
   * that holds the pool's subnet: then the bridge delivers them, and addresses this node borrowed from other
   * hosts' blocks (host-length prefixes of what it announces) get a route onto the bridge, since the other host's
   * block, learned over BGP, is more specific than the bridge's subnet.
   */
  private desired(owner: { table: number; protocol: number }, bridge: string | undefined) {
    const remote = this.remote;
    const localPrefixes = this.o.localPrefixes();
    if (!bridge) return desiredRoutes({ localBlocks: localPrefixes, remote: remote.values() }, owner);
    const own = localPrefixes.filter((p) => p.len === maxLen(p.family));
    const onBridge = own.map((p) => ({ prefix: p, nextHop: prefixIP(p), dev: bridge, onlink: true }));
    const ownKeys = new Set(own.map(formatPrefix));
    const others = [...remote.values()].filter((r) => !ownKeys.has(formatPrefix(r.prefix)));
    return desiredRoutes({ localBlocks: [], remote: [...others, ...onBridge] }, owner);
  }
}

/** The address of a host-length prefix. */
function prefixIP(p: Prefix): IP {
  return parseIP(formatPrefix(p).split('/')[0]);
}
