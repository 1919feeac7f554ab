// The daemon's side of Calico's v3 resources in etcd (ipam.layout: calico): list and watch
// /calico/resources/v3/projectcalico.org/{bgppeers,bgpconfigurations,bgpfilters,ippools,ipamconfigurations}/ and
// /calico/ipam/v2/config, decode each resource with the manifest importer (src/config/calico-etcd.ts), and hand
// the daemon a config merged the way a manifest file is merged: node.yaml wins, and every disagreement is a warning
// that says which value is used. IPPools go straight to IPAM's pool cache, so allocations do not re-read them.
import { CALICO_V3_ROOT, calicoKeys } from '../calico/keys.ts';
import { CalicoResourceSet, watchedKey, type NodeView, type ResourceState } from '../config/calico-etcd.ts';
import type { Config } from '../config/types.ts';
import { decodeIPPool } from '../ipam/calico/resources.ts';
import { ipamConfigStatus, type IpamConfigStatus } from '../ipam/calico/ipamconfig.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { Pool } from '../ipam/types.ts';
import type { Store, WatchEvent, Watcher } from '../store/types.ts';
import { applyCalicoImport } from './calico-merge.ts';

export interface CalicoWatchDeps {
  store: Store;
  ipam: Ipam;
  node: () => NodeView;
  /** The merged config changed: apply it (calls are serialised here). */
  apply: () => Promise<void>;
  warn: (msg: string) => void;
  info: (msg: string, fields?: Record<string, unknown>) => void;
}

/** What /status and /calico show. */
export interface CalicoWatchStatus {
  /** The store revision the watch has seen up to. */
  revision: number;
  resources: { applied: number; stale: number; refused: number; unused: number };
  /** Which IPAM settings are in force: /calico/ipam/v2/config, and the IPAMConfiguration resource if it differs. */
  ipamConfig: { inForce: string; resource: string | null; differs: string[]; warning: string | null } | null;
}

export class CalicoWatch {
  readonly set: CalicoResourceSet;
  private revision = 0;
  private watchers: Watcher[] = [];
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  /** Per ippools key: the last pool that decoded (a bad new version keeps it). */
  private readonly pools = new Map<string, { rev: number; pool: Pool }>();
  private ipamCfg: IpamConfigStatus | null = null;
  /** Precedence warnings already given (each merge repeats them). */
  private readonly said = new Set<string>();

  constructor(private readonly deps: CalicoWatchDeps) {
    this.set = new CalicoResourceSet(deps.node());
  }

  /** List everything, then watch from the revision listed at; the first apply is the caller's (before BGP starts). */
  async start(): Promise<void> {
    await this.load();
    await this.refreshIpamConfig();
  }

  /** The file config with etcd's resources merged into it (node.yaml wins; a warning names each disagreement). */
  merge(base: Config): Config {
    this.set.setNode({ ...this.deps.node() });
    const { imp, warnings } = this.set.result();
    for (const w of warnings) this.deps.warn(w);
    if (!base.bgp && !imp.peers.length && imp.asn === undefined) return base;
    const bgp = base.bgp ? { ...base.bgp, peers: [...base.bgp.peers], announce: [...base.bgp.announce] } : null;
    let node = base.node;
    // Pools and IPAM settings are not merged here: pools are IPAM's own (the watch feeds them), and IPAM on etcd
    // reads its settings from /calico/ipam/v2/config, never from the IPAMConfiguration resource (as Calico's).
    const sink = { ...(base.ipam ?? { pools: [] }), pools: [] } as unknown as NonNullable<Config['ipam']>;
    const warn = (m: string) => {
      if (this.said.has(m)) return;
      this.said.add(m);
      this.deps.warn(m);
    };
    applyCalicoImport({ ...imp, warnings: [] }, 'etcd', { pools: [], ipam: sink, getNode: () => node, node: (n) => (node = n), bgp }, warn);
    // Our own AS is node.yaml's (the warning above says so), but mesh nodes without one run the cluster's, as in Calico.
    if (bgp && imp.asn !== undefined) bgp.clusterAsn = imp.asn;
    if (!bgp && (imp.peers.length || imp.asn !== undefined)) warn('etcd: BGPPeers/BGPConfiguration ignored: the config has no bgp section (it needs at least a routerId)');
    return { ...base, node, bgp };
  }

  status(): CalicoWatchStatus {
    const resources = { applied: 0, stale: 0, refused: 0, unused: 0 };
    for (const s of this.set.states()) resources[s.state]++;
    const c = this.ipamCfg;
    return {
      revision: this.revision,
      resources,
      ipamConfig: c ? { inForce: c.inForce, resource: c.resource?.key ?? null, differs: c.resource?.differs ?? [], warning: c.warning ?? null } : null,
    };
  }

  /** /calico: the summary, every resource with its state, and the IPAM settings in force. */
  detail(): CalicoWatchStatus & { keys: ResourceState[]; ipamSettings: IpamConfigStatus | null; pools: string[] } {
    return { ...this.status(), keys: this.set.states(), ipamSettings: this.ipamCfg, pools: [...this.pools.values()].map((p) => p.pool.name).sort() };
  }

  close(): void {
    this.closed = true;
    for (const w of this.watchers) w.close();
    this.watchers = [];
  }

  /** Wait until every change seen so far is applied (tests, stop). */
  settled(): Promise<void> {
    return this.chain;
  }

  private async load(): Promise<void> {
    for (const w of this.watchers) w.close();
    this.watchers = [];
    const rev = await this.deps.store.revision();
    const seen = new Set<string>();
    for (const kv of await this.deps.store.list(CALICO_V3_ROOT)) {
      if (!watchedKey(kv.key)) continue;
      seen.add(kv.key);
      for (const w of this.set.put(kv.key, kv.value, kv.modRevision)) this.deps.warn(w);
    }
    // A relist after a lost watch: what is gone now was deleted meanwhile.
    for (const s of this.set.states()) if (!seen.has(s.key)) this.set.delete(s.key);
    this.revision = Math.max(this.revision, rev);
    this.syncPools();
    const onError = (e: Error) => {
      if (this.closed) return;
      this.deps.warn(`etcd Calico resources: watch lost (${e.message}); listing again`);
      this.enqueue(async () => {
        await this.load();
        await this.refreshIpamConfig();
      });
    };
    this.watchers.push(this.deps.store.watch(CALICO_V3_ROOT, rev, (evs) => this.onEvents(evs), onError));
    this.watchers.push(this.deps.store.watch(calicoKeys.config, rev, (evs) => this.onConfigEvents(evs), onError));
  }

  private onEvents(evs: WatchEvent[]): void {
    let changed = false;
    let ipamCfg = false;
    for (const ev of evs) {
      const rk = watchedKey(ev.key);
      if (!rk) continue;
      changed = true;
      if (rk.plural === 'ipamconfigurations') ipamCfg = true;
      if (ev.type === 'delete') {
        this.set.delete(ev.key);
        this.deps.info(`etcd: ${rk.kind} ${rk.name} deleted`, { key: ev.key });
      } else {
        const ws = this.set.put(ev.key, ev.value ?? '', ev.revision);
        for (const w of ws) this.deps.warn(w);
        this.deps.info(`etcd: ${rk.kind} ${rk.name} ${ws.length && this.set.states().find((s) => s.key === ev.key)?.state !== 'applied' ? 'refused' : 'changed'}`, { key: ev.key, rev: ev.revision });
      }
      this.revision = Math.max(this.revision, ev.revision);
    }
    if (!changed) return;
    this.enqueue(async () => {
      this.syncPools();
      if (ipamCfg) await this.refreshIpamConfig();
      await this.deps.apply();
    });
  }

  private onConfigEvents(evs: WatchEvent[]): void {
    for (const ev of evs) this.revision = Math.max(this.revision, ev.revision);
    this.enqueue(() => this.refreshIpamConfig());
  }

  private enqueue(fn: () => Promise<void>): void {
    this.chain = this.chain.then(async () => {
      if (this.closed) return;
      await fn();
    }).catch((e) => this.deps.warn(`etcd Calico resources: applying a change failed: ${(e as Error).message}`));
  }

  private async refreshIpamConfig(): Promise<void> {
    try {
      this.ipamCfg = await ipamConfigStatus(this.deps.store, this.deps.ipam.ds.layout);
    } catch (e) {
      this.deps.warn(`etcd: cannot read the IPAM settings: ${(e as Error).message}`);
    }
  }

  /**
   * IPAM's pools = the IPPools the importer accepts, each decoded by the layout's own decoder; a version either
   * refuses keeps the last good pool of that key.
   */
  private syncPools(): void {
    const now = new Map<string, { rev: number; pool: Pool }>();
    for (const { key, value, rev } of this.set.values('ippools')) {
      const had = this.pools.get(key);
      if (had && had.rev === rev) {
        now.set(key, had);
        continue;
      }
      try {
        now.set(key, { rev, pool: decodeIPPool(key, value) });
      } catch (e) {
        this.deps.warn(`${(e as Error).message}; ${had ? `keeping the version of revision ${had.rev}` : 'not applied'}`);
        if (had) now.set(key, had);
      }
    }
    this.pools.clear();
    for (const [k, v] of now) this.pools.set(k, v);
    this.deps.ipam.ds.setWatchedPools([...now.values()].map((p) => p.pool));
  }
}
