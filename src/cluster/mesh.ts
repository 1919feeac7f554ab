// The node-to-node mesh as peer configs: a pure function of our node, the registered nodes and the mesh settings.
// It mirrors what Calico's confd renders for calico-node's BIRD, so both kinds of node agree on who connects:
// one iBGP session per other node and family, on that node's BGP address; `passive` toward a node whose address
// sorts higher as a string (BIRD there is passive toward us when ours sorts higher, so we must open it); route
// reflectors (a routeReflectorClusterID) are left out, and a route reflector itself is in no mesh at all.
import type { MaxPrefixesConfig, PeerConfig, PeerGracefulRestart, SelectorPeerConfig } from '../config/types.ts';
import type { SecretSource } from '../store/etcd-auth.ts';
import { parseSelector } from '../calico/selector.ts';
import { nodeIP, type ClusterNode } from './node.ts';

export interface MeshSettings {
  /** The cluster's AS for nodes without their own asNumber (BGPConfiguration asNumber, else 64512). */
  defaultAsn: number;
  /** The BGP port other nodes listen on (BGPConfiguration listenPort, else 179). */
  port: number;
  holdTime: number;
  gracefulRestart: PeerGracefulRestart | false;
  /** TCP-MD5 on every mesh session (bgp.nodeMeshPassword); peer-selector sessions use their BGPPeer's own. */
  password?: SecretSource;
  /** Max-prefix of every session to another node, mesh and peer-selector alike (bgp.nodeMeshMaxPrefixes). */
  maxPrefixes?: MaxPrefixesConfig;
}

/** A peer config plus the source address of our connections (the speaker's `localAddress`). */
export type ClusterPeerConfig = PeerConfig & { localAddress?: string };

/** The mesh peers of `self` among `nodes` (self may or may not be among them). Sorted by address. */
export function meshPeers(self: ClusterNode, nodes: Iterable<ClusterNode>, s: MeshSettings): ClusterPeerConfig[] {
  if (self.routeReflectorClusterID) return [];
  const out: ClusterPeerConfig[] = [];
  for (const n of nodes) {
    if (n.name === self.name || n.routeReflectorClusterID) continue;
    for (const [field, family] of [['ipv4Address', 'ipv4'], ['ipv6Address', 'ipv6']] as const) {
      const mine = nodeIP(self[field]);
      const theirs = nodeIP(n[field]);
      if (mine === undefined || theirs === undefined || theirs === mine) continue;
      out.push({
        address: theirs,
        asn: n.asNumber ?? s.defaultAsn,
        port: s.port,
        families: [family],
        holdTime: s.holdTime,
        // Calico compares the address texts (Go string comparison: bytes, as JS does for ASCII).
        passive: theirs > mine,
        gracefulRestart: s.gracefulRestart,
        // From our own BGP address, as confd's "source address": the other side knows us by it.
        localAddress: mine,
        ...(s.password ? { password: s.password } : {}),
        ...(s.maxPrefixes ? { maxPrefixes: s.maxPrefixes } : {}),
      });
    }
  }
  return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/**
 * Peers from Calico BGPPeers with a peerSelector, both ways as confd renders them: a node the peering is for
 * (node / nodeSelector) peers with every node peerSelector matches, and a node peerSelector matches peers with
 * every node the peering is for. As a route reflector (a cluster ID), a peer outside our cluster is our client.
 */
export function selectorPeers(self: ClusterNode, nodes: Iterable<ClusterNode>, sps: readonly SelectorPeerConfig[], s: MeshSettings): ClusterPeerConfig[] {
  const all = [...nodes].filter((n) => n.name !== self.name);
  const out: ClusterPeerConfig[] = [];
  for (const sp of sps) {
    const peerSel = parseSelector(sp.peerSelector);
    const nodeSel = sp.nodeSelector === undefined ? () => true : parseSelector(sp.nodeSelector);
    const isFor = (n: ClusterNode) => (sp.node === undefined || sp.node === n.name) && nodeSel(n.labels);
    const targets = new Map<string, { n: ClusterNode; forward: boolean }>();
    if (isFor(self)) for (const n of all) if (peerSel(n.labels)) targets.set(n.name, { n, forward: true });
    if (peerSel(self.labels)) for (const n of all) if (isFor(n) && !targets.has(n.name)) targets.set(n.name, { n, forward: false });
    for (const { n, forward } of targets.values()) {
      for (const [field, family] of [['ipv4Address', 'ipv4'], ['ipv6Address', 'ipv6']] as const) {
        const mine = nodeIP(self[field]);
        const theirs = nodeIP(n[field]);
        if (mine === undefined || theirs === undefined || theirs === mine) continue;
        const p: ClusterPeerConfig = {
          address: theirs,
          asn: (forward ? sp.asn : undefined) ?? n.asNumber ?? s.defaultAsn,
          port: s.port,
          families: [family],
          holdTime: sp.holdTime,
          passive: theirs > mine,
          gracefulRestart: sp.gracefulRestart,
          localAddress: mine,
        };
        if (sp.import) p.import = sp.import;
        if (sp.export) p.export = sp.export;
        if (sp.nextHopSelf) p.nextHopSelf = true;
        if (sp.password) p.password = sp.password;
        if (sp.ttlSecurity !== undefined) p.ttlSecurity = sp.ttlSecurity;
        if (sp.allowAsIn) p.allowAsIn = sp.allowAsIn;
        if (sp.policy) p.policy = sp.policy;
        if (s.maxPrefixes) p.maxPrefixes = s.maxPrefixes;
        if (forward && sp.localAsn !== undefined) p.localAsn = sp.localAsn;
        if (self.routeReflectorClusterID && n.routeReflectorClusterID !== self.routeReflectorClusterID) p.routeReflectorClient = true;
        out.push(p);
      }
    }
  }
  return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/**
 * Configured peers plus cluster peers; a configured peer wins over a cluster peer with the same address (the
 * user said how to talk to it). Returns the merged list and the cluster peers that were shadowed.
 */
export function mergePeers(configured: readonly PeerConfig[], cluster: readonly PeerConfig[]): { peers: PeerConfig[]; shadowed: PeerConfig[] } {
  const have = new Set(configured.map((p) => p.address));
  const shadowed = cluster.filter((p) => have.has(p.address));
  const seen = new Set<string>();
  const extra: PeerConfig[] = [];
  for (const p of cluster) {
    if (have.has(p.address) || seen.has(p.address)) continue;
    seen.add(p.address);
    extra.push(p);
  }
  return { peers: [...configured, ...extra], shadowed };
}
