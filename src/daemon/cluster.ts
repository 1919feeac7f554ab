// The daemon's side of the cluster: register this node, watch the others, and keep the speaker's peer list equal to
// the configured peers plus the mesh. Configured peers are passed through untouched, so speaker.reconfigure leaves
// their sessions alone when only the mesh changes.
import { isEtcdUrl } from '../store/etcd-auth.ts';
import { detectAddress } from '../cluster/autodetect.ts';
import { meshPeers, mergePeers, selectorPeers } from '../cluster/mesh.ts';
import { ClusterError, checkNode, type ClusterNode, type NodeLayout } from '../cluster/node.ts';
import { NodeRegistry, addressClash } from '../cluster/registry.ts';
import type { BgpConfig, Config, PeerConfig } from '../config/types.ts';
import type { Store } from '../store/types.ts';

export interface ClusterDeps {
  store: Store;
  layout?: NodeLayout;
  /** Apply a full peer list to the speaker (calls are serialised here). */
  applyPeers: (bgp: BgpConfig) => Promise<void>;
  warn: (msg: string) => void;
  info: (msg: string, fields?: Record<string, unknown>) => void;
}

/** Is the mesh on? Explicit setting, else on exactly when the store is shared (etcd). */
export function meshEnabled(cfg: Config): boolean {
  // Calico's default: on whenever the nodes share a datastore (etcd, with or without TLS).
  return cfg.bgp?.nodeToNodeMeshEnabled ?? isEtcdUrl(cfg.ipam?.store ?? '');
}

/**
 * The node as this daemon registers it: node.bgp, the OS as the kubernetes.io/os label, and, when the mesh or a
 * route-reflector role needs an address the file does not give, the default route's interface address. (Several
 * daemons sharing an embedded store on one machine would all detect the same address, so nothing is detected
 * for them unless they mesh.)
 */
export async function ownNode(cfg: Config, warn: (msg: string) => void, detect = detectAddress): Promise<ClusterNode> {
  const nb = cfg.node.bgp ?? {};
  const n: ClusterNode = { name: cfg.node.name, labels: { ...cfg.node.labels, 'kubernetes.io/os': cfg.node.os } };
  const needs = meshEnabled(cfg) || !!nb.routeReflectorClusterID;
  const v4 = nb.ipv4Address ?? (needs ? await detect(4) : undefined);
  const v6 = nb.ipv6Address ?? (needs && !nb.ipv4Address ? await detect(6) : undefined);
  if (v4) n.ipv4Address = v4;
  if (v6) n.ipv6Address = v6;
  if (cfg.bgp) {
    if (nb.asNumber !== undefined && nb.asNumber !== cfg.bgp.asn) {
      warn(`node.bgp.asNumber ${nb.asNumber} differs from bgp.asn ${cfg.bgp.asn}; bgp.asn is used (and registered)`);
    }
    n.asNumber = cfg.bgp.asn;
  } else if (nb.asNumber !== undefined) n.asNumber = nb.asNumber;
  if (nb.routeReflectorClusterID) n.routeReflectorClusterID = nb.routeReflectorClusterID;
  return n;
}

export class ClusterPeers {
  readonly registry: NodeRegistry;
  self: ClusterNode | null = null;
  private bgp: BgpConfig | null = null;
  private mesh = false;
  private peers: PeerConfig[] = [];
  private chain: Promise<void> = Promise.resolve();
  private readonly warnedShadow = new Set<string>();

  constructor(private readonly deps: ClusterDeps) {
    this.registry = new NodeRegistry(deps.store, {
      layout: deps.layout,
      onBadNode: (key, err) => deps.warn(`cluster: node ${key} skipped: ${err.message}`),
    });
  }

  /** Register (refused with both names on an address clash) and start watching. */
  async start(cfg: Config): Promise<void> {
    const own = checkNode(await ownNode(cfg, this.deps.warn), `node ${cfg.node.name}`);
    // Peer with the nodes already registered before our registration is written: a node that is the active side
    // toward us connects as soon as its watch sees us, and would be refused as "not a configured peer" (and then
    // wait out its retry backoff) if our mesh were applied only after the write. Seen in bench/mesh-join.ts.
    const before = await this.registry.list();
    if (!addressClash(own, before.values())) {
      this.self = own;
      this.bgp = cfg.bgp;
      this.mesh = meshEnabled(cfg);
      this.update(before);
      await this.chain;
    }
    this.self = await this.registry.register(own);
    this.deps.info(`cluster: registered node ${this.self.name}`, { node: this.self });
    this.bgp = cfg.bgp;
    this.mesh = meshEnabled(cfg);
    await this.registry.watch(() => this.update());
    await this.chain;
  }

  /** A reload: new configured peers or mesh setting; the mesh part is recomputed. */
  async reconfigure(cfg: Config): Promise<void> {
    this.bgp = cfg.bgp;
    this.mesh = meshEnabled(cfg);
    this.update();
    await this.chain;
  }

  /** The cluster peers now in effect (mesh). */
  get clusterPeers(): readonly PeerConfig[] {
    return this.peers;
  }

  /** Addresses of the peers the cluster made (mesh and peer selectors), as opposed to configured ones. */
  peerAddresses(): Set<string> {
    return new Set(this.peers.map((p) => p.address));
  }

  status(): unknown {
    return {
      self: this.self,
      mesh: this.mesh,
      nodes: [...this.registry.current.values()],
      meshPeers: this.peers.map((p) => ({ address: p.address, asn: p.asn, passive: p.passive, families: p.families })),
    };
  }

  close(): void {
    this.registry.close();
  }

  private update(nodes: ReadonlyMap<string, ClusterNode> = this.registry.current): void {
    const bgp = this.bgp;
    const self = this.self;
    if (!bgp || !self) return;
    const settings = { defaultAsn: bgp.clusterAsn ?? bgp.asn, port: bgp.listen ? bgp.listen.port : 179, holdTime: 90, gracefulRestart: bgp.gracefulRestart, password: bgp.nodeMeshPassword, maxPrefixes: bgp.nodeMeshMaxPrefixes };
    const mesh = keepUnchanged(this.peers, [
      ...(this.mesh ? meshPeers(self, nodes.values(), settings) : []),
      ...selectorPeers(self, nodes.values(), bgp.selectorPeers ?? [], settings),
    ]);
    const { peers, shadowed } = mergePeers(bgp.peers, mesh);
    for (const p of shadowed.filter((x) => !this.warnedShadow.has(x.address))) {
      this.warnedShadow.add(p.address);
      this.deps.warn(`cluster: mesh peer ${p.address} is also a configured peer; the configured one is used`);
    }
    this.peers = mesh;
    const next: BgpConfig = { ...bgp, peers };
    if (self.routeReflectorClusterID) next.clusterId = self.routeReflectorClusterID;
    this.chain = this.chain.then(() => this.deps.applyPeers(next)).catch((e) => this.deps.warn(`cluster: applying peers failed: ${(e as Error).message}`));
  }
}

/**
 * The new cluster peers, each replaced by the previous object when nothing in it changed, and frozen: the speaker
 * recognises a frozen peer config it already runs with and skips it (Speaker.normPeerMemo), so a node joining
 * costs each old node one new peer, not a re-check of the whole mesh.
 */
export function keepUnchanged(prev: readonly PeerConfig[], next: PeerConfig[]): PeerConfig[] {
  const byAddress = new Map<string, PeerConfig>();
  for (const p of prev) byAddress.set(`${p.address}/${p.families?.join(',')}`, p);
  return next.map((p) => {
    const o = byAddress.get(`${p.address}/${p.families?.join(',')}`);
    return o && shallowEqual(o, p) ? o : Object.freeze(p);
  });
}

/** Same keys, and values identical (arrays of primitives compared element by element). */
function shallowEqual(a: object, b: object): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    const x = (a as Record<string, unknown>)[k];
    const y = (b as Record<string, unknown>)[k];
    if (x === y) continue;
    if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length || x.some((v, i) => v !== y[i])) return false;
  }
  return true;
}

export { ClusterError };
