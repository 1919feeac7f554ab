// The daemon's HNS dataplane: config (dataplane kind hns) and IPAM (pools from the store, this node's blocks, the
// handles' addresses) -> the desired HNS state, reconciled through an executor (HCN and IP Helper on Windows, the
// fake elsewhere). Also the CNI gateway (addressing.ts, so the CNI result and HNS agree) and endpoint reconciliation:
// leaked endpoints are removed by the planner; addresses whose pod endpoint is gone are released after a grace
// period here. Counters and lists for /dataplane and the metrics, and the main-plugin CNI handlers (cni-windows.ts)
// built from this dataplane's settings.
import type { HnsDataplaneConfig } from '../config/types.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { Family } from '../net/ip.ts';
import type { Rib } from '../rib/rib.ts';
import { type DesiredState, type HnsConfig, type RemoteRoute, RemoteRouteTable, buildDesired, isHostEndpointName } from '../hns/desired.ts';
import { FakeHns } from '../hns/fake.ts';
import { readFileSync } from 'node:fs';
import { readIpamView, type IpamView } from '../hns/ipam-view.ts';
import { HNS_DEFAULT_NETWORK } from '../hns/limits.ts';
import { type HnsExecutor, type HnsSnapshot, endpointAddresses, subnetsOf } from '../hns/model.ts';
import { HnsReconciler, type PassRecord } from '../hns/reconcile.ts';
import type { HcnExecutor } from '../hns/hcn-executor.ts';
import { type OverlayMissing, mergeOverlay, overlayRoutes } from '../hns/overlay.ts';
import { type VtepLayout, checkFacts, listVteps, publishVtep } from '../cluster/vtep.ts';
import type { Store, Watcher } from '../store/types.ts';
import type { Platform } from '../platform/platform.ts';
import type { WindowsNetworkingApis } from '../platform/windows-net-api.ts';
import type { IpcHandler } from '../ipc/server.ts';
import { IpamError, type Pool } from '../ipam/types.ts';
import { type IP, type Prefix, parseIP, prefixContainsIP } from '../net/ip.ts';
import { type ConflistStatus, writeConflist } from './conflist.ts';

export interface HnsDataplaneOptions {
  dp: HnsDataplaneConfig;
  host: string;
  ipam: Ipam | null;
  executor: HnsExecutor;
  fake: FakeHns | null;
  log: { info(o: object, m: string): void; warn(o: object, m: string): void; error(o: object, m: string): void };
  now?: () => number;
  onPass?: (r: PassRecord) => void;
  /**
   * Windows: the HCN executor, for what only a real host has: the management vNIC found from the default route when
   * the config names none, and IP forwarding on the management and host endpoint vNICs.
   */
  windows?: HcnExecutor;
  /** Reconciler timing (tests). */
  intervalMs?: number;
  /** Overlay: where nodes publish their provider address and DR MAC (the IPAM store, in its layout). */
  vtep?: { store: Store; layout: VtepLayout };
  /** The control socket's path when not the default: the conflist names it so the plugin finds the daemon. */
  ipcPath?: string;
  /** With dp.cni: the platform whose atomic replace writes the conflist. */
  platform?: Platform;
  /** How long a CNI ADD waits for its block's ip-subnet to be programmed. Default 8 s (under the plugin's 15 s). */
  subnetWaitMs?: number;
}

/** CNI ADDs that waited for their block's ip-subnet: how many, how long in all, and how many gave up. */
export interface SubnetWaitStats {
  /** ADDs whose ip-subnets were programmed already. */
  ready: number;
  /** ADDs that had to wait for a pass (a freshly claimed block). */
  waited: number;
  timeouts: number;
  waitedMs: number;
}

const DEFAULT_SUBNET_WAIT_MS = 8_000;

/** Handles of the node's own (gateway, parked edge addresses): never a pod's, never released here. */
const OWN_HANDLE = /^blockspeaker-/;
const DEFAULT_GRACE_SECONDS = 600;
const LIST_MAX = 50;

export class HnsDataplane {
  readonly network: string;
  readonly reconciler: HnsReconciler;
  readonly remote = new RemoteRouteTable();
  /** Endpoints removed because no IPAM handle held their address (the pod is gone). */
  leakedRemoved = 0;
  /** IPAM handles released because their endpoint stayed gone longer than the grace period. */
  orphansReleased = 0;
  private lastLeaked: { name: string; ip: string; id: string; at: string }[] = [];
  private lastReleased: { handle: string; ips: string[]; at: string }[] = [];
  /** handle -> when its addresses were first seen with no endpoint. */
  private readonly missingSince = new Map<string, number>();
  private lastActual: HnsSnapshot | null = null;
  /** The management vNIC found from the default route (no alias configured). */
  private foundInterface: string | undefined;
  /** Times forwarding was found off and switched on; the last check. */
  forwardingSet = 0;
  private forwarding: { interfaces: string[]; families: number[]; error: string | null } | null = null;
  private lastView: IpamView | null = null;
  private unfollow: (() => void) | null = null;
  private readonly now: () => number;
  /** Overlay: what this node published, other nodes' blocks left unrouted, and the store watches. */
  private overlay: { published: string | null; problem: string | null; missing: OverlayMissing[]; remoteNodes: number } =
    { published: null, problem: null, missing: [], remoteNodes: 0 };
  private watchers: Watcher[] = [];
  /** The ip-subnets HNS holds as of the last successful pass (what a waiting CNI ADD needs). */
  private programmed: Prefix[] = [];
  private passDesired: DesiredState | null = null;
  private readonly subnetWaiters = new Set<{ ips: IP[]; done: (ok: boolean) => void }>();
  readonly subnetWaits: SubnetWaitStats = { ready: 0, waited: 0, timeouts: 0, waitedMs: 0 };
  /** dataplane.cni: the last conflist write, and the pools it was made from. */
  private conflist: ConflistStatus | null = null;
  private conflistPools: string | null = null;

  constructor(private readonly o: HnsDataplaneOptions) {
    this.network = o.dp.network ?? HNS_DEFAULT_NETWORK;
    this.now = o.now ?? Date.now;
    this.reconciler = new HnsReconciler({
      executor: o.executor,
      desired: (actual) => this.desired(actual),
      intervalMs: o.intervalMs,
      onPass: (r) => {
        if (r.ok) {
          // Everything desired is applied: its ip-subnets now exist (until the next pass says otherwise).
          this.programmed = (this.passDesired?.subnets ?? []).flatMap((s) => s.ipSubnets.map((x) => x.prefix));
          this.wakeSubnetWaiters();
          void this.ensureForwarding();
          for (const e of r.removedEndpoints) {
            if (isHostEndpointName(this.network, e.name)) continue;
            this.leakedRemoved++;
            this.lastLeaked = [...this.lastLeaked, { ...e, at: new Date(r.at).toISOString() }].slice(-LIST_MAX);
            o.log.warn({ endpoint: e }, 'hns: removed a leaked endpoint (no IPAM handle holds its address)');
          }
        }
        o.onPass?.(r);
      },
    });
  }

  start(): void {
    this.reconciler.start();
    if (this.o.dp.mode === 'overlay' && this.o.vtep) void this.startOverlay(this.o.vtep);
  }

  /**
   * Overlay: publish this node's facts (once; a restart publishes again, a write only when they changed) and re-plan
   * whenever a block or another node's facts change in the store.
   */
  private async startOverlay(v: { store: Store; layout: VtepLayout }): Promise<void> {
    const dp = this.o.dp;
    try {
      const facts = checkFacts(dp.providerAddress, dp.drMac);
      const r = await publishVtep(v.store, v.layout, this.o.host, facts);
      this.overlay.published = `${facts.providerAddress} ${facts.drMac} (${v.layout.key(this.o.host)})`;
      if (r.warning) {
        this.overlay.problem = r.warning;
        this.o.log.warn({}, r.warning);
      }
      this.o.log.info({ ...facts, written: r.written }, 'hns overlay: provider address and DR MAC published');
    } catch (e) {
      this.overlay.problem = `this node's overlay facts are not published, so other nodes cannot reach its pods: ${(e as Error).message}`;
      this.o.log.warn({}, this.overlay.problem);
    }
    try {
      const rev = await v.store.revision();
      const poke = () => this.reconciler.notify();
      const prefixes = new Set([v.layout.prefix, this.o.ipam?.ds.keys.blocks].filter((x): x is string => !!x));
      for (const p of prefixes) this.watchers.push(v.store.watch(p, rev, poke, (err) => this.o.log.warn({ err: err.message }, 'hns overlay: store watch stopped; the periodic pass still re-plans')));
    } catch (e) {
      this.o.log.warn({ err: (e as Error).message }, 'hns overlay: cannot watch the store; the periodic pass still re-plans');
    }
    this.reconciler.notify();
  }

  stop(): void {
    for (const w of [...this.subnetWaiters]) w.done(false); // the daemon is going: the ADD fails now, to be retried
    for (const w of this.watchers) w.close();
    this.watchers = [];
    this.unfollow?.();
    this.unfollow = null;
    this.reconciler.stop();
  }

  /** The management vNIC's alias: configured, or found from the host's default route (Windows); overlay has none. */
  managementInterface(): string | undefined {
    if (this.o.dp.mode === 'overlay') return undefined;
    return this.o.dp.interfaceAlias ?? (this.o.dp.adapter ? `vEthernet (${this.o.dp.adapter})` : this.foundInterface);
  }

  /**
   * The management vNIC for the executor's read (so a restart sees the routes it made before): Windows with no alias
   * configured asks IP Helper which interface holds the default route, each pass until found.
   */
  async resolveManagementInterface(): Promise<string | undefined> {
    await this.findInterface();
    return this.managementInterface();
  }

  private async findInterface(): Promise<void> {
    const w = this.o.windows;
    if (!w || this.managementInterface() !== undefined || this.o.dp.mode === 'overlay') return;
    try {
      this.foundInterface = await w.defaultRouteInterface();
      if (this.foundInterface) this.o.log.info({ interface: this.foundInterface }, 'hns: management vNIC found from the default route');
    } catch (e) {
      this.o.log.warn({ err: (e as Error).message }, 'hns: cannot read the host route table to find the management vNIC');
    }
  }

  /**
   * After a good pass: forwarding on for every pool family on the management vNIC and each host endpoint's vNIC
   * ("vEthernet (<endpoint name>)"), as Calico and flannel set it. Failures are reported, and tried next pass.
   */
  private async ensureForwarding(): Promise<void> {
    const w = this.o.windows;
    const d = this.passDesired;
    if (!w || !d) return;
    const aliases = [this.managementInterface(), ...d.hostEndpoints.map((e) => `vEthernet (${e.name})`)].filter((x): x is string => !!x);
    const families = [...new Set(d.subnets.map((s) => s.prefix.family))];
    try {
      const changed = await w.ensureForwarding(aliases, families);
      this.forwardingSet += changed.length;
      this.forwarding = { interfaces: aliases, families, error: null };
      if (changed.length) this.o.log.info({ changed }, 'hns: IP forwarding switched on');
    } catch (e) {
      this.forwarding = { interfaces: aliases, families, error: (e as Error).message };
      this.o.log.warn({ err: (e as Error).message }, 'hns: cannot switch IP forwarding on');
    }
  }

  notify(): void {
    this.reconciler.notify();
  }

  /** (Re)subscribe to a RIB's remote routes. */
  follow(r: Rib | null): void {
    this.unfollow?.();
    this.unfollow = null;
    this.remote.apply([...this.remote.values()].map((x) => ({ type: 'withdraw' as const, prefix: x.prefix as never })));
    if (r) {
      this.unfollow = r.subscribe((batch) => {
        if (this.remote.apply(batch)) this.reconciler.notify();
      });
      this.remote.apply([...r.entries()].map((e) => ({ type: 'add' as const, prefix: e.prefix, best: e.best })));
    }
    this.reconciler.notify();
  }

  /** The CNI result's gateway for `gateway: auto` (ipc dataplaneGateway): the addressing model's, fresh from IPAM. */
  async gateway(pool: string, _family: Family): Promise<{ gateway: string; prefixLen: number } | null> {
    if (!this.o.ipam) return null;
    const v = await readIpamView(this.o.ipam, this.o.host, !!this.o.dp.singleNetwork, this.gatewaysInForce(this.lastActual));
    const a = v.pools.find((x) => x.pool === pool);
    return a ? { gateway: a.gateway, prefixLen: a.prefixLen } : null;
  }

  private hnsConfig(view: IpamView | null): HnsConfig {
    const dp = this.o.dp;
    const byPool = new Map((view?.pools ?? []).map((a) => [a.pool, a]));
    return {
      mode: dp.mode,
      network: this.network,
      adapter: dp.adapter,
      managementInterface: this.managementInterface(),
      vni: dp.vni,
      drMac: dp.drMac,
      providerAddress: dp.providerAddress,
      ownedPrefixes: dp.ownedPrefixes,
      singleNetwork: dp.singleNetwork,
      routeMetric: dp.routeMetric,
      // Every pool the store knows, in the config or not: all are owned address space.
      pools: (view?.storePools ?? []).map((p) => {
        const a = byPool.get(p.name);
        return { cidr: p.cidr, name: p.name, reservation: p.reservation, gateway: a?.gateway, hostEndpoint: a?.hostEndpoint };
      }),
    };
  }

  /** The default-route next hops of our network's Subnets in HNS: the gateways pods already use. */
  private gatewaysInForce(actual: HnsSnapshot | null): Set<string> {
    const out = new Set<string>();
    const net = actual?.Networks.find((n) => n.Name === this.network);
    if (!net) return out;
    for (const s of subnetsOf(net)) for (const r of s.Routes ?? []) if (r.NextHop && /^(0\.0\.0\.0|::)\/0$/.test(r.DestinationPrefix ?? '')) out.add(r.NextHop);
    return out;
  }

  /** Called by the reconciler after each read. */
  private async desired(actual: HnsSnapshot): Promise<DesiredState> {
    this.lastActual = actual;
    const view = this.o.ipam ? await readIpamView(this.o.ipam, this.o.host, !!this.o.dp.singleNetwork, this.gatewaysInForce(actual)) : null;
    this.lastView = view;
    if (view) this.syncConflist(view.storePools);
    let held = view?.held;
    if (view) held = await this.releaseOrphans(view, actual);
    // Blocks of pools the model cannot serve (view.problems) are left out: listed at /dataplane, never thrown on.
    const localBlocks = (view?.pools ?? []).flatMap((a) => a.blocks);
    return this.passDesired = buildDesired({ config: this.hnsConfig(view), localBlocks, remoteRoutes: await this.remoteRoutes(view), heldIPs: held });
  }

  /**
   * dataplane.cni: (re)write the conflist at the first pass and whenever the pools change (a pool added with
   * calicoctl belongs in the NAT exception list); the file itself is replaced only when its text differs.
   */
  private syncConflist(pools: readonly Pool[]): void {
    const cni = this.o.dp.cni;
    if (!cni || !this.o.platform) return;
    const sig = JSON.stringify(pools.map((p) => [p.cidr, p.natOutgoing, p.disabled, p.allowedUses]).sort());
    if (sig === this.conflistPools && this.conflist?.outcome !== 'failed') return;
    this.conflistPools = sig;
    this.conflist = writeConflist(this.o.platform, cni, this.network, pools, this.now(), { socket: this.o.ipcPath });
    if (this.conflist.outcome === 'failed') this.o.log.error({ path: this.conflist.path, err: this.conflist.error }, 'cni: cannot write the network config list');
    else this.o.log.info({ path: this.conflist.path, outcome: this.conflist.outcome }, 'cni: network config list in place');
  }

  /**
   * A CNI ADD's wait (ipc dataplaneReady): resolves once every address lies in an ip-subnet a successful pass has
   * programmed; a pass is asked for at once (a fresh block's claim also asks). Bounded: after subnetWaitMs it
   * rejects with NOT_READY, the ADD fails with CNI code 11 (try again later) and the runtime retries it.
   */
  async awaitProgrammed(texts: readonly string[]): Promise<void> {
    const ips = texts.map((x) => parseIP(x));
    if (this.programmedAll(ips)) {
      this.subnetWaits.ready++;
      return;
    }
    const started = this.now();
    const limit = this.o.subnetWaitMs ?? DEFAULT_SUBNET_WAIT_MS;
    this.reconciler.notify();
    let timer: NodeJS.Timeout | undefined;
    let waiter: { ips: IP[]; done: (ok: boolean) => void } | undefined;
    try {
      const ok = await new Promise<boolean>((resolve) => {
        waiter = { ips, done: resolve };
        this.subnetWaiters.add(waiter);
        timer = setTimeout(() => resolve(false), limit);
      });
      this.subnetWaits.waitedMs += Math.max(0, this.now() - started);
      if (!ok) {
        this.subnetWaits.timeouts++;
        throw new IpamError('NOT_READY', `HNS has not programmed the ip-subnet of ${texts.join(', ')} within ${limit} ms (see /dataplane: lastError); try the ADD again`);
      }
      this.subnetWaits.waited++;
    } finally {
      clearTimeout(timer);
      if (waiter) this.subnetWaiters.delete(waiter);
    }
  }

  private programmedAll(ips: readonly IP[]): boolean {
    return ips.every((ip) => this.programmed.some((p) => p.family === ip.family && prefixContainsIP(p, ip)));
  }

  private wakeSubnetWaiters(): void {
    for (const w of [...this.subnetWaiters]) if (this.programmedAll(w.ips)) w.done(true);
  }

  /** The conflist write, for status and tests. */
  conflistStatus(): ConflistStatus | null {
    return this.conflist;
  }

  /** l2bridge/l2tunnel: the RIB's routes. Overlay: other nodes' blocks via their published facts, then the RIB's. */
  private async remoteRoutes(view: IpamView | null): Promise<Iterable<RemoteRoute>> {
    if (this.o.dp.mode !== 'overlay' || !this.o.vtep || !view) return this.remote.values();
    const facts = await listVteps(this.o.vtep.store, this.o.vtep.layout);
    const store = overlayRoutes(view.remoteBlocks, facts, this.o.host);
    const before = JSON.stringify(this.overlay.missing);
    this.overlay.missing = store.missing;
    this.overlay.remoteNodes = new Set(view.remoteBlocks.map((b) => b.host)).size;
    if (store.missing.length > 0 && JSON.stringify(store.missing) !== before) {
      this.o.log.warn({ missing: store.missing }, 'hns overlay: nodes with blocks but no published provider address / DR MAC get no route');
    }
    return mergeOverlay(store, view.remoteBlocks, this.o.host, this.remote.values());
  }

  /**
   * Pods' handles whose addresses no endpoint has held for the grace period: their pod is gone without a CNI DEL.
   * Released; returns the held set without them. Only once our network exists (no network, no pods to judge by).
   */
  private async releaseOrphans(view: IpamView, actual: HnsSnapshot): Promise<Set<string>> {
    const graceMs = (this.o.dp.endpointGraceSeconds ?? DEFAULT_GRACE_SECONDS) * 1000;
    const held = new Set(view.held);
    if (graceMs === 0 || !actual.Networks.some((n) => n.Name === this.network)) {
      this.missingSince.clear();
      return held;
    }
    const present = new Set<string>();
    for (const e of actual.Endpoints) for (const ip of endpointAddresses(e)) present.add(ip.toString());
    const now = this.now();
    for (const key of [...this.missingSince.keys()]) if (!view.handles.has(key)) this.missingSince.delete(key);
    for (const [handle, ips] of view.handles) {
      if (OWN_HANDLE.test(handle) || ips.some((ip) => present.has(ip))) {
        this.missingSince.delete(handle);
        continue;
      }
      const since = this.missingSince.get(handle);
      if (since === undefined) {
        this.missingSince.set(handle, now);
        continue;
      }
      if (now - since < graceMs) continue;
      const released = await this.o.ipam!.releaseByHandle(handle);
      this.missingSince.delete(handle);
      this.orphansReleased++;
      this.lastReleased = [...this.lastReleased, { handle, ips: released, at: new Date(now).toISOString() }].slice(-LIST_MAX);
      this.o.log.warn({ handle, ips: released }, 'hns: released addresses whose endpoint is gone');
      for (const ip of released) held.delete(ip);
    }
    return held;
  }

  /** The main-plugin CNI handlers over HCN, with this dataplane's network, pools and dataplane.cni settings. */
  async windowsCni(ipam: Record<string, IpcHandler>, apis: WindowsNetworkingApis): Promise<Record<string, IpcHandler>> {
    const dp = this.o.dp;
    if (!this.o.ipam) return {};
    const { windowsCniHandlers, networkByName, ipamPools } = await import('./cni-windows.ts');
    const cni = dp.cni;
    return windowsCniHandlers({
      hcn: apis.hcn,
      ipam,
      network: networkByName(apis.hcn, this.network),
      pools: ipamPools(this.o.ipam, this.o.host),
      serviceCidr: cni?.serviceCidr,
      exceptions: [...(cni?.nodeSubnet ? [cni.nodeSubnet] : []), ...(dp.ownedPrefixes ?? [])],
      nodeIP: cni?.nodeIP,
      // Windows has dual stack on l2bridge and l2tunnel, not on overlay.
      ipv6: dp.mode !== 'overlay',
      dns: { servers: cni?.dnsServers, search: cni?.dnsSearch },
      log: this.o.log,
    });
  }

  /** /dataplane's hns part: HNS's own JSON as read, the addressing, and the endpoint reconciliation. */
  status(): Record<string, unknown> {
    const s = this.reconciler.status();
    return {
      fake: this.o.fake !== null,
      network: this.network,
      mode: this.o.dp.mode,
      remoteRoutes: this.remote.size,
      passes: s.passes, consecutiveFailures: s.consecutiveFailures, lastPlan: s.lastPlan, lastError: s.lastError,
      drift: { events: s.driftEvents, last: s.drift },
      managementInterface: this.managementInterface() ?? null,
      ...(this.o.windows ? { forwarding: { ...this.forwarding, switchedOn: this.forwardingSet } } : {}),
      addressing: this.lastView?.pools ?? [],
      addressingProblems: this.lastView?.problems ?? [],
      ...(this.o.dp.cni ? { cni: this.conflist } : {}),
      // CNI ADDs and their block's ip-subnet (docs/reference/hns.md, "CNI ADD waits for its ip-subnet").
      subnetWaits: { ...this.subnetWaits, waiting: this.subnetWaiters.size },
      ...(this.o.dp.mode === 'overlay' ? {
        overlay: {
          published: this.overlay.published,
          problem: this.overlay.problem,
          remoteNodes: this.overlay.remoteNodes,
          // Warnings: these nodes' blocks have no RemoteSubnetRoute until they publish their facts.
          unrouted: this.overlay.missing,
        },
      } : {}),
      endpoints: {
        leakedRemoved: this.leakedRemoved,
        lastLeaked: this.lastLeaked,
        orphansReleased: this.orphansReleased,
        lastReleased: this.lastReleased,
        awaitingRelease: [...this.missingSince].map(([handle, since]) => ({ handle, since: new Date(since).toISOString() })),
      },
      // The fake answers at once; the real HNS as last read (at the start of the last pass).
      hns: this.o.fake ? this.o.fake.snapshot() : this.lastActual,
    };
  }
}

/**
 * The in-memory HNS for --dry-run and non-Windows runs. Tests only: BLOCKSPEAKER_HNS_FAKE_SEED names a file of HNS
 * JSON ({Networks, Endpoints, HostRoutes}, the `hns plan --emit-actual` form) the fake starts from, so a test can
 * hand a packaged executable a leaked endpoint to remove. A seed that cannot be read is an error: a test asked.
 */
export function fakeFromSeed(seed: string | undefined, log: { warn(o: object, m: string): void }): FakeHns {
  if (!seed) return new FakeHns();
  let text: string;
  try {
    text = readFileSync(seed, 'utf8');
  } catch (e) {
    throw new Error(`BLOCKSPEAKER_HNS_FAKE_SEED: cannot read ${seed}: ${(e as Error).message}`);
  }
  log.warn({ seed }, 'dataplane hns: the in-memory fake starts from a seed file (BLOCKSPEAKER_HNS_FAKE_SEED: tests only)');
  return FakeHns.fromSnapshot(JSON.parse(text.replace(/^\uFEFF/, '')));
}
