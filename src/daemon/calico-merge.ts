// How one imported Calico file lands in the config: the file's own settings win, and every disagreement is a
// warning that says which value is used.
import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { importCalico, type CalicoImport } from '../config/calico.ts';
import { ConfigError, type Config } from '../config/config.ts';
import type { BgpConfig, IpamConfig, NodeConfig, PoolConfig } from '../config/types.ts';

export interface MergeTarget {
  pools: PoolConfig[];
  ipam: IpamConfig;
  getNode(): NodeConfig;
  node(n: NodeConfig): void;
  /** null: no bgp section. */
  bgp: BgpConfig | null;
}

export function applyCalicoImport(imp: CalicoImport, path: string, to: MergeTarget, warn: (msg: string) => void): void {
  for (const w of imp.warnings) warn(`${path}: ${w}`);
  for (const p of imp.pools) {
    if (to.pools.some((x) => x.name === p.name)) warn(`${path}: pool ${p.name} is also in the config file; the config's wins`);
    else to.pools.push(p);
  }
  const ipam = to.ipam;
  if (imp.ipam.strictAffinity !== undefined) ipam.strictAffinity = imp.ipam.strictAffinity;
  if (imp.ipam.maxBlocksPerHost !== undefined) ipam.maxBlocksPerHost = imp.ipam.maxBlocksPerHost;
  if (imp.ipam.autoAllocateBlocks !== undefined) ipam.autoAllocateBlocks = imp.ipam.autoAllocateBlocks;
  if (imp.ipam.ipCooldownSeconds !== undefined) ipam.ipCooldownSeconds = imp.ipam.ipCooldownSeconds;
  if (imp.node) {
    // The file's node section wins field by field; the Node manifest fills what it leaves out.
    const n = to.getNode();
    const bgp = { ...imp.node.bgp, ...(n.bgp ?? {}) };
    for (const k of Object.keys(imp.node.bgp) as (keyof typeof bgp)[]) {
      if (n.bgp?.[k] !== undefined && n.bgp[k] !== imp.node.bgp[k]) warn(`${path}: Node ${n.name} spec.bgp.${k} ${imp.node.bgp[k]} differs from node.bgp.${k} ${n.bgp[k]}; node.bgp's is used`);
    }
    to.node({ ...n, labels: { ...imp.node.labels, ...n.labels }, bgp });
  }
  const bgp = to.bgp;
  if (!bgp) return;
  if (imp.asn !== undefined && imp.asn !== bgp.asn) warn(`${path}: BGPConfiguration asNumber ${imp.asn} differs from bgp.asn ${bgp.asn}; bgp.asn is used`);
  if (imp.listenPort !== undefined) {
    if (bgp.listen && bgp.listen.port !== 179 && bgp.listen.port !== imp.listenPort) {
      warn(`${path}: BGPConfiguration listenPort ${imp.listenPort} differs from bgp.listen port ${bgp.listen.port}; bgp.listen's is used`);
    } else if (bgp.listen) bgp.listen = { ...bgp.listen, port: imp.listenPort };
    else warn(`${path}: BGPConfiguration listenPort ${imp.listenPort} ignored: bgp.listen is off`);
  }
  if (imp.nodeToNodeMeshEnabled !== undefined) {
    if (bgp.nodeToNodeMeshEnabled !== undefined && bgp.nodeToNodeMeshEnabled !== imp.nodeToNodeMeshEnabled) {
      warn(`${path}: BGPConfiguration nodeToNodeMeshEnabled ${imp.nodeToNodeMeshEnabled} differs from bgp.nodeToNodeMeshEnabled ${bgp.nodeToNodeMeshEnabled}; the config's is used`);
    } else bgp.nodeToNodeMeshEnabled = imp.nodeToNodeMeshEnabled;
  }
  if (imp.nodeMeshPassword) {
    if (bgp.nodeMeshPassword && JSON.stringify(bgp.nodeMeshPassword) !== JSON.stringify(imp.nodeMeshPassword)) {
      warn(`${path}: BGPConfiguration nodeMeshPassword differs from bgp.nodeMeshPassword; the config's is used`);
    } else bgp.nodeMeshPassword = imp.nodeMeshPassword;
  }
  for (const p of imp.peers) {
    if (bgp.peers.some((x) => x.address === p.address)) warn(`${path}: peer ${p.address} is also in the config file; the config's wins`);
    else bgp.peers.push(p);
  }
  if (imp.serviceIPs) {
    // Calico announces these from every node; a reload without them withdraws them (the speaker diffs announce).
    bgp.serviceIPs = imp.serviceIPs;
    const all = [...imp.serviceIPs.clusterIPs, ...imp.serviceIPs.externalIPs, ...imp.serviceIPs.loadBalancerIPs];
    bgp.announce = [...new Set([...bgp.announce, ...all])];
  }
  if (imp.prefixAdvertisements) {
    if (bgp.prefixAdvertisements?.length) warn(`${path}: BGPConfiguration prefixAdvertisements ignored: bgp.prefixAdvertisements in the config is used`);
    else bgp.prefixAdvertisements = imp.prefixAdvertisements;
  }
  if (imp.selectorPeers.length) bgp.selectorPeers = [...(bgp.selectorPeers ?? []), ...imp.selectorPeers];
}

/** Calico manifests named by ipam.calico, merged into the config (the config's own settings win, with a warning). */
export function mergeCalico(cfg: Config, file: string, warn: (msg: string) => void): Config {
  const paths = cfg.ipam?.calico ?? [];
  if (!cfg.ipam || paths.length === 0) return cfg;
  const pools = [...cfg.ipam.pools];
  const ipam = { ...cfg.ipam, pools };
  let bgp = cfg.bgp ? { ...cfg.bgp, peers: [...cfg.bgp.peers] } : null;
  let node = cfg.node;
  for (const rel of paths) {
    const path = resolvePath(dirname(file), rel);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new ConfigError(file, [{ path: 'ipam.calico', message: `cannot read ${path}: ${(e as Error).message}` }]);
    }
    const nodeIPs = { ipv4: node.bgp?.ipv4Address, ipv6: node.bgp?.ipv6Address };
    const imp = importCalico(text, path, node.name, node.labels, nodeIPs);
    applyCalicoImport(imp, path, { pools, ipam, node: (n) => (node = n), getNode: () => node, bgp }, warn);
    if (!bgp && (imp.peers.length || imp.asn !== undefined || imp.selectorPeers.length)) {
      warn(`${path}: BGP peers/ASN ignored: the config has no bgp section (it needs at least a routerId)`);
    }
  }
  bgp = bgp ?? null;
  return { ...cfg, node, ipam, bgp };
}
