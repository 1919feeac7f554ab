// The node daemon's wiring: config -> store -> IPAM -> speaker (RIB) -> announcer -> dataplane -> IPC and status.
//
//   IPAM store watch --> IpamAnnouncer --> speaker.announce/withdraw (RIB source "local") --> BGP export
//   speaker.rib change feed --> remote routes --+
//   announced local blocks ---------------------+--> Linux / HNS reconciler
//
// src/cli/run.ts owns the process (arguments, signals, run marker); this class owns the parts and their order.
import type { Logger as Pino } from 'pino';
import { Speaker } from '../bgp/speaker.ts';
import type { Logger } from '../bgp/speaker-config.ts';
import { mergeCalico } from './calico-merge.ts';
import { formatListen, loadConfig, type Config, type ListenAddress } from '../config/config.ts';
import type { FakeHns } from '../hns/fake.ts';
import type { HnsExecutor } from '../hns/model.ts';
import type { HcnExecutor as HcnExecutorType } from '../hns/hcn-executor.ts';
import type { WindowsNetworkingApis } from '../platform/windows-net-api.ts';
import type { HnsDataplane } from './hns.ts';
import { Ipam } from '../ipam/ipam.ts';
import type { BlockInfo } from '../ipam/types.ts';
import { ipamHandlers } from '../ipc/ipam.ts';
import { checkIpcPath, startIpcServer, type IpcServer } from '../ipc/server.ts';
import { DEFAULT_SOCKET } from '../ipc/protocol.ts';
import type { LinuxDataplane } from './linux.ts';
import { formatPrefix, type Prefix } from '../net/ip.ts';
import type { Rib } from '../rib/rib.ts';
import { HttpError, StatusServer, type Listener } from '../status/http.ts';
import { hostPlatform, type Platform } from '../platform/platform.ts';
import { addStatusPage } from '../status/ui/serve.ts';
import { openStore } from '../store/open.ts';
import { blockspeakerLayout } from '../ipam/layout.ts';
import type { NodeCleanup } from '../ipam/calico/node-cleanup.ts';
import type { Store } from '../store/types.ts';
import { IpamAnnouncer } from './announcer.ts';
import { countedRequests, release as releaseOptimizer } from './tiering.ts';
import { cniInvoke, type CniInvokeParams } from './cni-invoke.ts';
import { lazyMetrics, type MetricsSource } from './metrics.ts';
import { overview, type Overview, type PoolUsage } from './overview.ts';
import { ensurePools, keepRestartSettings, listenOf, moveListeners } from './reload.ts';
import { bestRoutes, blockUsage, ipamConfigStatus, peersWithRoles, poolUsage } from './views.ts';
import { WarningLog } from './warnings.ts';
import { ClusterPeers } from './cluster.ts';
import { bfdPeers, newBfdManager } from './bfd.ts';
import { calicoNodeLayout } from '../cluster/node.ts';
import { CalicoWatch } from './calico-watch.ts';
import { PasswordWatch } from './password-watch.ts';
import { bgpPasswordFiles } from '../config/secret-files.ts';

export interface DaemonOptions {
  /** The config file (re-read on reload). */
  file: string;
  /** The config already loaded from `file`. */
  config: Config;
  log: Pino;
  version: string;
  /** Graceful-restart restarting speaker (R bit). */
  restarted?: boolean;
  /** HNS dataplane with the in-memory fake: this one (tests put pods' endpoints in it, as win-bridge would). */
  fakeHns?: FakeHns;
  /** HNS dataplane: use the in-memory fake even on Windows. */
  dryRun?: boolean;
  /** HNS: how long a CNI ADD waits for its ip-subnet (tests; default 8 s). */
  hnsSubnetWaitMs?: number;
  startedAt?: number;
  /** OS differences (default: this machine's). */
  platform?: Platform;
  /** The process's stop and reload, offered over the control socket as daemon.stop / daemon.reload. */
  controls?: DaemonControls;
}

/** What `blockspeaker daemon stop [--withdraw]` and `daemon reload` reach (src/cli/run.ts owns the process). */
export interface DaemonControls {
  /** withdraw: the node goes away (Cease to every peer); else a graceful-restart stop that keeps peers' routes. */
  stop(withdraw: boolean): void;
  reload(): Promise<void>;
}

/** The speaker's Logger on top of pino (pino takes the fields first). */
export function speakerLogger(log: Pino): Logger {
  return {
    debug: (msg, f) => log.debug(f ?? {}, msg),
    info: (msg, f) => log.info(f ?? {}, msg),
    warn: (msg, f) => log.warn(f ?? {}, msg),
    error: (msg, f) => log.error(f ?? {}, msg),
  };
}

export class Daemon {
  cfg: Config;
  speaker: Speaker | null = null;
  /** Rotated BGP password files: keys replaced on running sessions (src/daemon/password-watch.ts). */
  private readonly passwordWatch = new PasswordWatch(() => void this.refreshPasswords());
  store: Store | null = null;
  ipam: Ipam | null = null;
  /** Calico layout: releases deleted Nodes' affinities, and their addresses after a grace period. */
  private nodeCleanup: NodeCleanup | undefined;
  /** Calico layout: BGPPeer/BGPConfiguration/BGPFilter/IPPool/IPAMConfiguration watched in etcd. */
  private calicoWatch: CalicoWatch | null = null;
  /** The config file (with its manifests) before etcd's resources are merged into it. */
  private fileCfg: Config;
  announcer: IpamAnnouncer | null = null;
  /** Node registry and mesh peers (whenever there is a store). */
  cluster: ClusterPeers | null = null;
  readonly status: StatusServer;
  /** Prometheus metrics, built on the first scrape: prom-client costs ~11 MB RSS in a daemon nobody scrapes. */
  private readonly metrics = lazyMetrics(() => this.metricsSource());
  /**
   * Problems that do not stop the daemon (a pool that differs from the store's, Calico fields we ignore, store
   * records IPAM skips): one entry per key with a count, bounded (src/daemon/warnings.ts), logged as they come.
   */
  readonly warnings = new WarningLog({ log: (msg, fields) => this.log.warn(fields, msg) });
  private ipc: IpcServer | null = null;
  private readonly log: Pino;
  private readonly startedAt: number;
  private readonly peerStates = new Map<string, string>();
  /** What the announcer announces now: the dataplane's "local" prefixes. */
  private localPrefixes: readonly Prefix[] = [];
  private dataplaneChanged: () => void = () => undefined;
  /** (Re)subscribe the dataplane to a speaker's RIB; a reload may add or remove the speaker. */
  private follow: (rib: Rib | null) => void = () => undefined;
  private linux: LinuxDataplane | null = null;
  private hns: HnsDataplane | null = null;
  /** Windows (not --dry-run): HCN, the host attach and IP Helper, for the HNS executor and the CNI handlers. */
  private windowsApis: WindowsNetworkingApis | null = null;
  /** BFD sessions of the peers that ask for them (src/daemon/bfd.ts); sockets only when there are some. */
  private bfdManager: ReturnType<typeof newBfdManager> | null = null;
  private get bfd() { return (this.bfdManager ??= newBfdManager(this.log)); }
  private dataplaneErrors = 0;
  private dataplaneLastSuccess: number | null = null;
  private readonly readiness = { store: false, speaker: false, dataplane: false };
  private stopped = false;

  constructor(private readonly opts: DaemonOptions) {
    this.log = opts.log;
    this.startedAt = opts.startedAt ?? Date.now();
    this.cfg = mergeCalico(opts.config, opts.file, (m) => this.warn(m));
    this.fileCfg = this.cfg;
    this.status = new StatusServer({
      version: opts.version,
      startedAt: this.startedAt,
      node: () => this.cfg.node,
      bgp: () => (this.cfg.bgp ? { asn: this.cfg.bgp.asn, routerId: this.cfg.bgp.routerId } : null),
      peers: () => this.speaker?.peers() ?? [],
      peerCounts: () => this.speaker?.peerCounts() ?? { configured: 0, established: 0 },
      rib: () => this.speaker?.rib ?? null,
      services: () => this.cfg.bgp?.serviceIPs ?? null,
      control: () => (this.ipc ? { endpoint: this.ipc.endpoint, access: this.ipc.access } : null),
      calico: () => this.calicoWatch?.status() ?? null,
    });
    this.status.route('/calico', () => ({ body: this.calicoWatch?.detail() ?? null }));
    this.status.route('/ipam/pools', async () => ({ body: await this.poolUsage() }));
    this.status.route('/ipam/blocks', async (url) => ({ body: await this.blockUsage(url.searchParams.get('host') ?? undefined) }));
    this.status.route('/ipam/config', async () => ({ body: this.ipam ? await ipamConfigStatus(this.ipam) : null }));
    this.status.route('/dataplane', () => ({ body: this.dataplaneStatus() }));
    this.status.route('/readyz', () => {
      const r = this.ready();
      return { status: r.ready ? 200 : 503, body: r };
    });
    this.status.route('/metrics', async () => this.metrics());
    this.status.route('/warnings', () => ({ body: this.warnings.view() }));
    this.status.route('/overview', async () => ({ body: await this.overview() }));
    addStatusPage(this.status);
    this.status.route('/cluster', () => ({ body: this.cluster?.status() ?? null }));
  }

  /** `key`: the store key the warning is about (one entry per key); without one, the text is the key. */
  private warn(msg: string, key?: string): void {
    this.warnings.add(msg, key);
  }

  // ---- lifecycle ------------------------------------------------------------------------------------------------

  async start(): Promise<void> {
    let cfg = this.cfg;
    // A control path that is taken (a live daemon, a pipe name another process owns) fails the start before
    // anything is written to the store or said to a peer.
    if (cfg.ipc) await checkIpcPath(cfg.ipc.path, this.opts.platform);
    if (cfg.ipam) await this.startIpam();
    if (cfg.ipam?.layout === 'calico') cfg = await this.startCalicoWatch();
    this.readiness.store = true;
    if (cfg.bgp) {
      await this.bfd.configure(bfdPeers(cfg));
      this.speaker = this.newSpeaker(cfg.bgp, !!this.opts.restarted);
      await this.speaker.start();
      this.log.info({ asn: cfg.bgp.asn, routerId: cfg.bgp.routerId, listen: this.speaker.listening(), peers: cfg.bgp.peers.length,
        announce: cfg.bgp.announce.length }, 'bgp started');
    } else this.log.warn('no bgp section: the speaker does not run');
    if (this.store) await this.startCluster();
    if (cfg.bgp) this.passwordWatch.set(bgpPasswordFiles(cfg));
    this.readiness.speaker = true;
    if (this.ipam) {
      this.announcer = new IpamAnnouncer(this.ipam, cfg.node.name, {
        announce: (p) => this.speaker?.announce(p),
        withdraw: (p) => this.speaker?.withdraw(p) ?? false,
      }, {
        onChange: (d) => {
          this.localPrefixes = this.announcer!.announced;
          this.log.info({ add: d.add.map(formatPrefix), withdraw: d.withdraw.map(formatPrefix) }, 'announcements changed');
          this.dataplaneChanged();
        },
        onError: (e) => this.log.error({ err: e.message }, 'announcer: cannot read the IPAM route view'),
      });
      await this.announcer.start();
      this.localPrefixes = this.announcer.announced;
    }
    await this.startDataplane();
    if (cfg.ipc) await this.startIpc(cfg.ipc.path);
    if (cfg.status) await this.startStatus(cfg);
  }

  private async startIpam(): Promise<void> {
    const ic = this.cfg.ipam!;
    this.store = await openStore(ic.store, { security: ic.etcd }, {
      platform: this.opts.platform,
      onAccess: (r) => (r.enforced ? this.log.info({ store: ic.store }, r.what) : this.log.warn({ store: ic.store }, r.what)),
    });
    this.log.info({ store: ic.store }, 'store open');
    // Calico's layout (its key/JSON model, start-up checks, node cleanup) is imported only when configured, so a
    // daemon on blockspeaker's own layout never loads it.
    const calico = ic.layout === 'calico';
    const layout = (ic.layout ?? 'blockspeaker') === 'blockspeaker' ? blockspeakerLayout : (await import('../ipam/layouts.ts')).layoutByName(ic.layout);
    // Records IPAM skips are warned per store key, and the warning goes when the record is fixed or deleted.
    const ipam = new Ipam(this.store, { layout, warn: (m, key) => this.warn(m, key), resolved: (key) => this.warnings.clear(key) });
    await ipam.setHost({ name: this.cfg.node.name, os: this.cfg.node.os, labels: this.cfg.node.labels });
    if (calico) await (await import('../ipam/calico/start.ts')).startCalicoLayout(ipam, this.cfg.node, ic);
    else {
      await ipam.setConfig({
        strictAffinity: ic.strictAffinity, maxBlocksPerHost: ic.maxBlocksPerHost, autoAllocateBlocks: ic.autoAllocateBlocks,
        ipCooldownSeconds: ic.ipCooldownSeconds,
      });
    }
    await ensurePools(ipam, ic.pools, this.log, (m) => this.warn(m));
    this.ipam = ipam;
    if (calico) {
      const [{ NODE_GONE_GRACE_MS, NodeCleanup }, { resourceKeys }] = await Promise.all([import('../ipam/calico/node-cleanup.ts'), import('../calico/keys.ts')]);
      this.nodeCleanup = new NodeCleanup(ipam, { graceMs: NODE_GONE_GRACE_MS, log: (m) => this.log.info(m) });
      this.nodeCleanup.start(resourceKeys.nodes, 60_000);
    }
  }

  /** Calico's resources in etcd: read before BGP starts, so the first peers include them; then watched. */
  private async startCalicoWatch(): Promise<Config> {
    const node = () => ({ name: this.cfg.node.name, labels: this.cfg.node.labels, ipv4: this.cfg.node.bgp?.ipv4Address, ipv6: this.cfg.node.bgp?.ipv6Address });
    const w = new CalicoWatch({
      store: this.store!, ipam: this.ipam!, node,
      apply: async () => {
        const next = w.merge(this.fileCfg);
        if (this.speaker && next.bgp) {
          if (this.cluster) await this.cluster.reconfigure(next);
          else await this.speaker.reconfigure(next.bgp);
          this.passwordWatch.set(bgpPasswordFiles(next)); // a BGPPeer or BGPConfiguration may name another Secret
        }
        this.cfg = next;
      },
      warn: (m) => this.warn(m),
      info: (m, f) => this.log.info(f ?? {}, m),
    });
    await w.start();
    this.calicoWatch = w;
    this.cfg = w.merge(this.fileCfg);
    return this.cfg;
  }

  private async startCluster(): Promise<void> {
    const cluster = new ClusterPeers({
      store: this.store!,
      // Calico's layout: nodes are Calico's own Node resources, shared with calico-node.
      layout: this.cfg.ipam?.layout === 'calico' ? calicoNodeLayout : undefined,
      applyPeers: async (bgp) => {
        if (this.speaker) await this.speaker.reconfigure(bgp);
      },
      warn: (m) => this.warn(m),
      info: (m, f) => this.log.info(f ?? {}, m),
    });
    await cluster.start(this.cfg);
    this.cluster = cluster;
  }

  private newSpeaker(bgp: NonNullable<Config['bgp']>, restarted: boolean): Speaker {
    const clusterId = this.cfg.node.bgp?.routeReflectorClusterID;
    const s = new Speaker(clusterId ? { ...bgp, clusterId } : bgp, { logger: speakerLogger(this.log.child({ component: 'bgp' })), restarted, bfd: this.bfd });
    s.on('state', (address, state) => {
      if (this.peerStates.get(address) === state) return;
      this.peerStates.set(address, state);
      if (state === 'Established') releaseOptimizer(); // UPDATEs to decode: the optimiser's work (tiering.ts)
      // Not logged here: the session logs each transition (debug), 'session established' (info), and the speaker
      // 'down (reason)' (info); a line per state here too doubled the log (100 peers: 500 info lines to bring up).
    });
    // A fresh speaker (bgp section added by a reload) gets what IPAM announces.
    for (const p of this.announcer?.announced ?? []) s.announce(p);
    return s;
  }

  private async startStatus(c: Config): Promise<void> {
    await this.startListener('status', listenOf(c, 'status'));
    await this.startListener('metrics', listenOf(c, 'metrics'));
  }

  /** Open one of the status server's listeners at l (nothing when undefined). */
  private async startListener(which: Listener, l: ListenAddress | undefined): Promise<void> {
    if (!l) return;
    if (which === 'status') {
      const a = await this.status.listen(l.address, l.port);
      this.log.info({ address: a.address, port: a.port }, `status endpoint on http://${formatListen(a)}/status`);
    } else {
      const a = await this.status.listenMetrics(l.address, l.port);
      this.log.info({ address: a.address, port: a.port }, `metrics endpoint on http://${formatListen(a)}/metrics (also /healthz, /readyz)`);
    }
  }

  private async startIpc(path: string): Promise<void> {
    const ipam = this.ipam ? ipamHandlers(this.ipam, this.cfg.node.name, {
        log: (msg, f) => this.log.info(f ?? {}, msg),
        // HNS: the CNI result's gateway is the one HNS holds (docs/reference/hns.md, "HNS addressing").
        ...(this.cfg.dataplane.kind === 'hns' ? { dataplaneGateway: (pool, family) => this.hns ? this.hns.gateway(pool, family) : Promise.resolve(null) } : {}),
        // HNS: a CNI result only once HNS holds the address's ip-subnet (a fresh block's is added by the next pass).
        ...(this.cfg.dataplane.kind === 'hns' ? { dataplaneReady: (ips) => this.hns ? this.hns.awaitProgrammed(ips) : Promise.resolve() } : {}),
      }) : null;
    const handlers = {
      ...(ipam ?? {}),
      // Windows with HCN: blockspeaker as the node's main CNI plugin (cni.add/del/check/gc; docs/reference/windows-dataplane.md).
      ...(ipam && this.windowsApis && this.hns ? await this.hns.windowsCni(ipam, this.windowsApis) : {}),
      'show.peers': () => this.speaker?.peers() ?? [],
      'show.routes': (p: { prefix?: string; lpm?: string }) => this.routes(p),
      'show.ipam': async () => ({ host: this.cfg.node.name, pools: await this.poolUsage(), blocks: await this.blockUsage(), announced: this.localPrefixes.map(formatPrefix) }),
      'show.status': () => ({ node: this.cfg.node.name, asn: this.cfg.bgp?.asn ?? null, routerId: this.cfg.bgp?.routerId ?? null,
        pid: process.pid, uptime: Math.floor((Date.now() - this.startedAt) / 1000), ready: this.ready() }),
      ...(this.opts.controls ? controlHandlers(this.opts.controls) : {}),
      'show.overview': () => this.overview(),
      'cni.invoke': (p: CniInvokeParams) => cniInvoke(p), // bin/blockspeaker-cni-shim
    };
    this.ipc = await startIpcServer({
      path,
      handlers: countedRequests(handlers), // IPAM work ends the optimiser's hold too (tiering.ts)
      platform: this.opts.platform,
      onError: (err, method) => this.log.warn({ err: (err as Error)?.message ?? String(err), method }, 'ipc request failed'),
    });
    this.log.info({ path, access: this.ipc.access }, 'control socket listening');
  }

  // ---- dataplane ------------------------------------------------------------------------------------------------

  // The linux and hns programmers are imported only when configured: a daemon runs one of them (or none), and the
  // others' modules would only add to its memory.
  private async startDataplane(): Promise<void> {
    const dp = this.cfg.dataplane;
    const rib = this.speaker?.rib ?? null;
    if (dp.kind === 'none') {
      this.readiness.dataplane = true;
      return;
    }
    if (dp.kind === 'linux') {
      const { LinuxDataplane } = await import('./linux.ts');
      const linux = new LinuxDataplane({
        dp,
        localPrefixes: () => this.localPrefixes,
        onRun: (r) => {
          if (r.ok) {
            this.readiness.dataplane = true;
            this.dataplaneLastSuccess = r.at;
            if (r.planned.add + r.planned.replace + r.planned.delete > 0) this.log.info({ planned: r.planned, ops: r.ops }, 'routes programmed');
          } else {
            this.dataplaneErrors++;
            this.log.error({ err: r.error, failed: r.failed }, 'route programming failed');
          }
        },
      });
      this.linux = linux;
      this.dataplaneChanged = () => linux.changed();
      this.follow = (r) => linux.follow(r);
      this.follow(rib);
      linux.start();
      return;
    }
    // hns: the real HNS only on Windows, through computenetwork.dll and IP Helper (src/platform loads them from
    // System32); elsewhere (and with --dry-run) the in-memory fake, to see the plans.
    const [{ FakeExecutor, FakeHns }, { HNS_DEFAULT_NETWORK }, { HcnExecutor }, { HnsDataplane, fakeFromSeed }, { vtepLayoutFor }] = await Promise.all([
      import('../hns/fake.ts'), import('../hns/limits.ts'), import('../hns/hcn-executor.ts'), import('./hns.ts'), import('../cluster/vtep.ts'),
    ]);
    const network = dp.network ?? HNS_DEFAULT_NETWORK;
    let executor: HnsExecutor;
    let fake: FakeHns | null = null;
    let windows: { executor: HcnExecutorType; apis: WindowsNetworkingApis } | undefined;
    const platform = this.opts.platform ?? hostPlatform();
    if (platform.id === 'win32' && !this.opts.dryRun) {
      const apis = await platform.networking();
      const hcn = new HcnExecutor({ ...apis, network, interfaceAlias: () => this.hns?.resolveManagementInterface() });
      windows = { executor: hcn, apis };
      this.windowsApis = apis;
      executor = hcn;
    } else {
      fake = this.opts.fakeHns ?? fakeFromSeed(platform.env.BLOCKSPEAKER_HNS_FAKE_SEED, this.log);
      executor = new FakeExecutor(fake);
      this.log.warn('dataplane hns: using the in-memory fake HNS (not Windows, or --dry-run); nothing is programmed');
    }
    const hns = new HnsDataplane({
      dp, host: this.cfg.node.name, ipam: this.ipam, executor, fake, log: this.log, windows: windows?.executor,
      // Overlay: nodes publish their PA and DR MAC in the IPAM store, in its layout (Calico's Node resource there).
      vtep: this.ipam ? { store: this.ipam.store, layout: vtepLayoutFor(this.cfg.ipam?.layout) } : undefined,
      platform, // dataplane.cni: the conflist goes through its atomic replace
      ipcPath: this.cfg.ipc && this.cfg.ipc.path !== DEFAULT_SOCKET ? this.cfg.ipc.path : undefined,
      subnetWaitMs: this.opts.hnsSubnetWaitMs,
      onPass: (r) => {
        if (r.ok) {
          this.readiness.dataplane = true;
          this.dataplaneLastSuccess = r.at;
        } else {
          this.dataplaneErrors++;
          this.log.error({ failed: r.failed, blocked: r.blocked.length, error: this.hns?.reconciler.status().lastError }, 'hns programming failed');
        }
      },
    });
    this.hns = hns;
    this.dataplaneChanged = () => hns.notify();
    this.follow = (r) => hns.follow(r);
    this.follow(rib);
    hns.start();
  }

  private dataplaneStatus(): unknown {
    const dp = this.cfg.dataplane;
    const common = { kind: dp.kind, errors: this.dataplaneErrors, lastSuccess: this.dataplaneLastSuccess ? new Date(this.dataplaneLastSuccess).toISOString() : null };
    if (this.linux) return { ...common, ...this.linux.status() };
    if (this.hns) return { ...common, localPrefixes: this.localPrefixes.map(formatPrefix), ...this.hns.status() };
    return common;
  }

  // ---- views ----------------------------------------------------------------------------------------------------

  /** The status page's and `blockspeaker top`'s snapshot (src/daemon/overview.ts). */
  overview(): Promise<Overview> {
    return overview({
      version: this.opts.version, startedAt: this.startedAt, now: Date.now, node: () => this.cfg.node,
      bgp: () => (this.cfg.bgp ? { asn: this.cfg.bgp.asn, routerId: this.cfg.bgp.routerId } : null),
      ready: () => this.ready(), routes: () => this.speaker?.rib.size ?? 0,
      peers: () => peersWithRoles(this.speaker?.peers() ?? [], this.cluster?.peerAddresses() ?? new Set<string>()),
      pools: () => (this.ipam ? this.poolUsage() : null), blocks: () => (this.ipam ? this.blockUsage() : null),
      announced: () => this.localPrefixes, dataplane: () => this.dataplaneStatus(), warnings: () => this.warnings.view(),
    });
  }

  ready(): { ready: boolean; store: boolean; speaker: boolean; dataplane: boolean } {
    const r = this.readiness;
    return { ready: r.store && r.speaker && r.dataplane && !this.stopped, ...r };
  }

  private needIpam(): Ipam {
    if (!this.ipam) throw new HttpError(404, 'no ipam section in the config');
    return this.ipam;
  }

  async blockUsage(host?: string): Promise<(BlockInfo & { utilisation: number })[]> {
    return blockUsage(this.needIpam(), host);
  }

  async poolUsage(): Promise<PoolUsage[]> {
    return poolUsage(this.needIpam());
  }

  /** Best routes for `show route`: all, one prefix, or the longest match for an address. */
  routes(q: { prefix?: string; lpm?: string }): unknown[] {
    return bestRoutes(this.speaker?.rib ?? null, q);
  }

  // ---- metrics --------------------------------------------------------------------------------------------------

  /** What the metrics read at scrape time (src/daemon/metrics.ts). */
  private metricsSource(): MetricsSource {
    return {
      peers: () => this.speaker?.peers() ?? [],
      ribSize: () => this.speaker?.rib.size ?? 0,
      poolUsage: async () => (this.ipam ? this.poolUsage() : []),
      announced: () => this.localPrefixes.length,
      dataplaneErrors: () => this.dataplaneErrors,
      dataplaneLastSuccess: () => this.dataplaneLastSuccess,
      ready: () => this.ready().ready,
      hns: () => ({ leakedRemoved: this.hns?.leakedRemoved ?? 0, orphansReleased: this.hns?.orphansReleased ?? 0, forwardingSet: this.hns?.forwardingSet ?? 0,
        subnetWaits: this.hns?.subnetWaits.waited ?? 0, subnetWaitTimeouts: this.hns?.subnetWaits.timeouts ?? 0 }),
      blockUsage: async () => (this.ipam ? this.blockUsage(this.cfg.node.name) : []),
      nodeInfo: () => {
        const b = this.cfg.bgp;
        return { node: this.cfg.node.name, os: this.cfg.node.os, asn: b ? String(b.asn) : '', router_id: b?.routerId ?? '', version: this.opts.version };
      },
    };
  }

  // ---- reload and stop ------------------------------------------------------------------------------------------

  /** Re-read the config file. Throws ConfigError (nothing changed) when it is invalid. */
  async reload(): Promise<void> {
    if (this.stopped) return;
    const cfg = this.cfg;
    let next = keepRestartSettings(mergeCalico(loadConfig(this.opts.file), this.opts.file, (m) => this.warn(m)), cfg, this.log);
    this.fileCfg = next;
    if (this.calicoWatch) next = this.calicoWatch.merge(next);
    try {
      if (this.ipam && next.ipam) {
        const ic = next.ipam;
        await this.ipam.setConfig({ strictAffinity: ic.strictAffinity, maxBlocksPerHost: ic.maxBlocksPerHost,
          autoAllocateBlocks: ic.autoAllocateBlocks, ipCooldownSeconds: ic.ipCooldownSeconds });
        await ensurePools(this.ipam, ic.pools, this.log, (m) => this.warn(m));
        await this.ipam.setHost({ name: next.node.name, os: next.node.os, labels: next.node.labels });
      }
      await this.bfd.configure(bfdPeers(next));
      if (this.speaker && next.bgp && this.cluster) await this.cluster.reconfigure(next);
      else if (this.speaker && next.bgp) await this.speaker.reconfigure(next.bgp);
      else if (this.speaker && !next.bgp) {
        await this.speaker.stop({ graceful: true });
        this.speaker = null;
        this.peerStates.clear();
        this.follow(null);
      } else if (!this.speaker && next.bgp) {
        this.speaker = this.newSpeaker(next.bgp, false);
        await this.speaker.start();
        this.follow(this.speaker.rib);
      }
      // A listener that cannot move keeps serving where it was, and the status section stays as it runs.
      const movedAll = await moveListeners(this.status, cfg, next, (w, l) => this.startListener(w, l), this.log);
      if (!movedAll) next = { ...next, status: cfg.status };
      this.cfg = next;
      this.passwordWatch.set(this.speaker ? bgpPasswordFiles(next) : []);
      this.log.info({ config: this.opts.file }, 'config reloaded');
    } catch (e) {
      this.cfg = next;
      this.log.error({ err: (e as Error).message }, 'reload partly applied');
    }
  }

  /** A BGP password file changed: every peer's password is read again, changed keys replaced (Speaker.refreshPasswords). */
  private async refreshPasswords(): Promise<void> {
    if (this.stopped || !this.speaker) return;
    this.log.info({ files: this.passwordWatch.watched }, 'a BGP password file changed: reading the passwords again');
    try {
      await this.speaker.refreshPasswords();
    } catch (e) {
      this.log.error({ err: (e as Error).message }, 'BGP passwords: re-reading failed');
    }
  }

  /** Stop everything, in reverse order; the store is closed last (the file store flushes on close). */
  /**
   * Stop everything. `restart: true` (SIGTERM) is a graceful-restart stop: the BGP sessions are closed without a
   * NOTIFICATION, so peers that negotiated graceful restart keep our routes (stale) until we are back and send
   * End-of-RIB; the dataplane routes stay installed, so forwarding goes on meanwhile. `restart: false` (SIGINT, or
   * a node going away) sends Cease to every peer, which drop our routes at once.
   */
  async stop(opts: { restart?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const step = async (what: string, fn: () => unknown) => {
      try {
        await fn();
        this.log.debug(`${what} stopped`);
      } catch (e) {
        this.log.error({ err: (e as Error).message }, `error while stopping ${what}`);
      }
    };
    await Promise.all([
      step('status endpoint', () => this.status.close()),
      step('control socket', () => this.ipc?.close()),
    ]);
    this.announcer?.stop();
    this.passwordWatch.close();
    this.calicoWatch?.close();
    await step('node cleanup', () => this.nodeCleanup?.stop());
    this.cluster?.close();
    this.linux?.unfollow();
    await step('dataplane', async () => {
      await this.linux?.reconciler.stop();
      this.hns?.stop();
    });
    // Installed routes stay: pods keep forwarding while we are down (and peers keep ours under graceful restart).
    await step('speaker', () => this.speaker?.stop({ graceful: !opts.restart }));
    // AdminDown to every BFD peer, also on a restart: RFC 5882 3.2, so they keep graceful-restart state.
    await step('bfd', () => this.bfdManager?.close());
    await step('store', () => this.store?.close());
  }
}

/** daemon.stop {withdraw?} and daemon.reload: answered before the stop begins, so the caller gets its reply. */
function controlHandlers(c: DaemonControls) {
  return {
    'daemon.stop': (p: { withdraw?: unknown }) => {
      const withdraw = p?.withdraw === true;
      setImmediate(() => c.stop(withdraw));
      return { stopping: true, withdraw };
    },
    'daemon.reload': async () => {
      await c.reload();
      return { reloaded: true };
    },
  };
}
