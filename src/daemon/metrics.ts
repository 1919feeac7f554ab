// The daemon's Prometheus metrics. prom-client is loaded, and the registry built, on the first scrape: a daemon
// nobody scrapes never pays its ~11 MB. Values are read from the parts at scrape time (collect), so nothing has to
// keep counters in step.
import type { PeerStatus } from '../bgp/peer.ts';
import type { Registry } from 'prom-client';
import { registerBgpHardeningMetrics } from './bgp-metrics.ts';
import { registerBfdMetrics } from './bfd-metrics.ts';

export interface MetricsSource {
  peers(): PeerStatus[];
  ribSize(): number;
  poolUsage(): Promise<Array<{ name: string; blocks: number; allocated: number; free: number; reserved: number }>>;
  announced(): number;
  dataplaneErrors(): number;
  /** ms since the epoch, null: never. */
  dataplaneLastSuccess(): number | null;
  ready(): boolean;
  /** HNS dataplane counters (0 without it). */
  hns(): { leakedRemoved: number; orphansReleased: number; forwardingSet: number; subnetWaits?: number; subnetWaitTimeouts?: number };
  /** This node's affine blocks with their address counts. */
  blockUsage(): Promise<Array<{ cidr: string; pool: string; allocated: number; free: number; reserved: number }>>;
  /** Labels of blockspeaker_node_info. */
  nodeInfo(): { node: string; os: string; asn: string; router_id: string; version: string };
}

const STATE_NUMBER: Record<string, number> = { Idle: 1, Connect: 2, Active: 3, OpenSent: 4, OpenConfirm: 5, Established: 6 };

/** The registry with every blockspeaker metric. */
export async function buildMetrics(src: MetricsSource): Promise<Registry> {
  const prom = await import('prom-client');
  const { Counter, Gauge, Registry } = prom;
  const reg = new Registry();
  const peers = () => src.peers();
    // Values are read from the parts at scrape time (collect), so nothing has to keep counters in step.
    new Gauge({ name: 'blockspeaker_bgp_peer_state', help: 'BGP FSM state per peer: 1 Idle, 2 Connect, 3 Active, 4 OpenSent, 5 OpenConfirm, 6 Established',
      labelNames: ['peer', 'asn'], registers: [reg],
      collect() {
        this.reset();
        for (const p of peers()) this.set({ peer: p.address, asn: String(p.asn) }, STATE_NUMBER[p.state] ?? 0);
      } });
    new Gauge({ name: 'blockspeaker_bgp_peer_up', help: '1 when the session is Established', labelNames: ['peer'], registers: [reg],
      collect() {
        this.reset();
        for (const p of peers()) this.set({ peer: p.address }, p.state === 'Established' ? 1 : 0);
      } });
    new Gauge({ name: 'blockspeaker_bgp_prefixes', help: 'Prefixes per peer: received (Adj-RIB-In), accepted (after import policy), sent (Adj-RIB-Out)',
      labelNames: ['peer', 'kind'], registers: [reg],
      collect() {
        this.reset();
        for (const p of peers()) {
          for (const k of ['received', 'accepted', 'sent'] as const) this.set({ peer: p.address, kind: k }, p.prefixes[k]);
        }
      } });
    new Counter({ name: 'blockspeaker_bgp_updates_total', help: 'UPDATE messages per peer and direction (this process)',
      labelNames: ['peer', 'direction'], registers: [reg],
      collect() {
        this.reset();
        for (const p of peers()) {
          this.inc({ peer: p.address, direction: 'in' }, p.messages.updatesReceived);
          this.inc({ peer: p.address, direction: 'out' }, p.messages.updatesSent);
        }
      } });
    registerBgpHardeningMetrics(prom, reg, peers);
    registerBfdMetrics(prom, reg, peers);
    new Gauge({ name: 'blockspeaker_rib_routes', help: 'Routes in the Loc-RIB', registers: [reg],
      collect() {
        this.set(src.ribSize());
      } });
    new Gauge({ name: 'blockspeaker_ipam_addresses', help: 'IPAM addresses per pool in existing blocks, by state (allocated, free, reserved)',
      labelNames: ['pool', 'state'], registers: [reg],
      async collect() {
        this.reset();
        for (const p of await src.poolUsage()) {
          for (const k of ['allocated', 'free', 'reserved'] as const) this.set({ pool: p.name, state: k }, p[k]);
        }
      } });
    new Gauge({ name: 'blockspeaker_ipam_blocks', help: 'IPAM blocks per pool', labelNames: ['pool'], registers: [reg],
      async collect() {
        this.reset();
        for (const p of await src.poolUsage()) this.set({ pool: p.name }, p.blocks);
      } });
    new Gauge({ name: 'blockspeaker_ipam_block_addresses', help: "Addresses in this node's affine blocks, by block and state (allocated, free, reserved)",
      labelNames: ['block', 'pool', 'state'], registers: [reg],
      async collect() {
        this.reset();
        for (const b of await src.blockUsage()) {
          for (const k of ['allocated', 'free', 'reserved'] as const) this.set({ block: b.cidr, pool: b.pool, state: k }, b[k]);
        }
      } });
    // Always 1; its labels let dashboards name a scrape target by node (`* on(instance) group_left(node)`).
    new Gauge({ name: 'blockspeaker_node_info', help: 'This node: name, OS, ASN, router ID and version as labels (value 1)',
      labelNames: ['node', 'os', 'asn', 'router_id', 'version'], registers: [reg],
      collect() {
        this.reset();
        this.set(src.nodeInfo(), 1);
      } });
    new Gauge({ name: 'blockspeaker_announced_prefixes', help: 'Prefixes this node announces from IPAM (blocks and borrowed host routes)', registers: [reg],
      collect() {
        this.set(src.announced());
      } });
    new Counter({ name: 'blockspeaker_dataplane_errors_total', help: 'Failed route programming runs', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.dataplaneErrors());
      } });
    new Counter({ name: 'blockspeaker_hns_leaked_endpoints_removed_total', help: 'HNS endpoints removed because no IPAM handle held their address', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.hns().leakedRemoved);
      } });
    new Counter({ name: 'blockspeaker_hns_orphan_handles_released_total', help: 'IPAM handles released because their HNS endpoint stayed gone past the grace period', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.hns().orphansReleased);
      } });
    new Counter({ name: 'blockspeaker_hns_forwarding_enabled_total', help: 'Times IP forwarding was found off on the management or host endpoint vNIC and switched on', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.hns().forwardingSet);
      } });
    new Counter({ name: 'blockspeaker_hns_cni_subnet_waits_total', help: 'CNI ADDs that waited for their fresh block\'s ip-subnet to be programmed in HNS', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.hns().subnetWaits ?? 0);
      } });
    new Counter({ name: 'blockspeaker_hns_cni_subnet_wait_timeouts_total', help: 'CNI ADDs that gave up waiting for their ip-subnet (failed with code 11, to be retried)', registers: [reg],
      collect() {
        this.reset();
        this.inc(src.hns().subnetWaitTimeouts ?? 0);
      } });
    new Gauge({ name: 'blockspeaker_dataplane_last_success_timestamp_seconds', help: 'When route programming last succeeded (0: never)', registers: [reg],
      collect() {
        this.set((src.dataplaneLastSuccess() ?? 0) / 1000);
      } });
    new Gauge({ name: 'blockspeaker_ready', help: '1 when the store is open, the speaker started and the first reconcile done', registers: [reg],
      collect() {
        this.set(src.ready() ? 1 : 0);
      } });
  return reg;
}

/**
 * The source with what several metrics read (peers, pool and block usage, HNS counters) read once per scrape: a
 * dozen per-peer metrics would otherwise build every peer's status a dozen times (with 100 peers, most of a
 * scrape's work; BENCHMARKS.md "Runtime flags and the status endpoint"). clear() ends a scrape.
 */
export function perScrape(src: MetricsSource): MetricsSource & { clear(): void } {
  const memo = new Map<string, unknown>();
  const once = <K extends 'peers' | 'poolUsage' | 'blockUsage' | 'hns'>(k: K): MetricsSource[K] =>
    (() => {
      if (!memo.has(k)) memo.set(k, (src[k] as () => unknown)());
      return memo.get(k);
    }) as MetricsSource[K];
  return { ...src, peers: once('peers'), poolUsage: once('poolUsage'), blockUsage: once('blockUsage'), hns: once('hns'), clear: () => memo.clear() };
}

/** A /metrics handler that builds the registry on its first call. */
export function lazyMetrics(source: () => MetricsSource): () => Promise<{ body: string; contentType: string }> {
  let reg: Promise<Registry> | undefined;
  let src: ReturnType<typeof perScrape> | undefined;
  return async () => {
    const r = await (reg ??= buildMetrics((src = perScrape(source()))));
    try {
      return { body: await r.metrics(), contentType: r.contentType.split(';')[0] };
    } finally {
      src!.clear(); // the next scrape reads afresh (one running alongside shares this reading)
    }
  };
}
