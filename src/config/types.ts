// The config file's shape after validation: user-facing names as in docs/configuration.md, every default
// filled in, addresses and prefixes in canonical text form. Extend these, never rename a field.

import type { EtcdSecurity, SecretSource } from '../store/etcd-auth.ts';
import type { PolicyRule } from '../bgp/route-policy.ts';
import type { AddressFamily } from '../bgp/session.ts';
import type { PeerGracefulRestart } from '../bgp/speaker-config.ts';
import type { PrefixRule as SpeakerPrefixRule } from '../bgp/prefix-filter.ts';

// The BGP speaker's own name for a family (its config uses the same words).
export type { AddressFamily } from '../bgp/session.ts';
// The speaker's graceful-restart setting (its config uses the same shape).
export type { PeerGracefulRestart } from '../bgp/speaker-config.ts';
export type NodeOS = 'linux' | 'windows';

export interface Config {
  node: NodeConfig;
  /** null when the file has no bgp section (no speaker runs). */
  bgp: BgpConfig | null;
  /** null when the file has no ipam section. */
  ipam: IpamConfig | null;
  dataplane: DataplaneConfig;
  /** false: no status endpoint. */
  status: StatusConfig | false;
  /** false: no control socket. */
  ipc: IpcConfig | false;
}

export interface NodeConfig {
  /** Default: the host name. */
  name: string;
  os: NodeOS;
  labels: Record<string, string>;
  /** The node's BGP identity as registered in the cluster (Calico's Node spec.bgp); absent parts are autodetected. */
  bgp?: NodeBgpConfig;
}

export interface NodeBgpConfig {
  /** "A.B.C.D/LEN". Absent: the address of the interface holding the default route. */
  ipv4Address?: string;
  ipv6Address?: string;
  /** Absent: bgp.asn. */
  asNumber?: number;
  /** Makes this node a route reflector with this cluster ID (IPv4 dotted quad). */
  routeReflectorClusterID?: string;
}

export interface ListenAddress {
  address: string;
  port: number;
}

/** A prefix-list rule as the speaker takes it, with the action the validator always fills in. */
export type PrefixRule = SpeakerPrefixRule & { action: 'accept' | 'reject' };

export interface PeerConfig {
  address: string;
  asn: number;
  /** The peer's TCP port (where we connect to). Default 179. */
  port: number;
  /** Address families negotiated with this peer (MP-BGP). Default: the family of `address`. */
  families: AddressFamily[];
  /** Proposed hold time in seconds; 0 = no keepalives. Default 90. */
  holdTime: number;
  /**
   * RFC 9687 SendHoldTime, seconds (0 = off; else more than holdTime). Absent: the RFC's default, the larger of 480
   * and twice the negotiated hold time.
   */
  sendHoldTime?: number;
  /** Never connect, only accept the peer's connection. */
  passive: boolean;
  /** false: no graceful restart with this peer. Default: bgp.gracefulRestart (false when that is off). */
  gracefulRestart: PeerGracefulRestart | false;
  /** Prefix lists, first match wins, no match = reject. Absent = accept everything. */
  import?: PrefixRule[];
  /** Absent = export everything. */
  export?: PrefixRule[];
  /** Max-prefix limit, one number for each family or per family; absent = none (src/bgp/maxprefix.ts). */
  maxPrefixes?: MaxPrefixesConfig;
  /** Source address of our connections (Calico BGPPeer sourceAddress: UseNodeIP; the mesh). Absent: the OS's. */
  localAddress?: string;
  /** Toward an iBGP peer, next hop self on routes learned from eBGP too (Calico nextHopMode: Self). */
  nextHopSelf?: boolean;
  /** We are a route reflector (bgp.clusterId) and this peer is our client. */
  routeReflectorClient?: boolean;
  /** TCP-MD5 (RFC 2385) password by reference (Calico BGPPeer password.secretKeyRef maps to a file). */
  password?: SecretSource;
  /** GTSM (RFC 5082): the peer is at most this many hops away, 1..255 (Calico BGPPeer ttlSecurity). */
  ttlSecurity?: number;
  /** BFD (RFC 5880/5881) with this peer; absent = none (src/bfd/). */
  bfd?: BfdConfig;
  /** allowas-in: accept routes with our AS in the AS_PATH up to this many times (Calico numAllowedLocalASNumbers). */
  allowAsIn?: number;
  /** Our AS toward this peer when not bgp.asn (Calico BGPPeer localASNumber). */
  localAsn?: number;
  /** Route policy from Calico BGPFilter rules a prefix list cannot express (src/bgp/route-policy.ts). */
  policy?: { import?: PolicyRule[]; export?: PolicyRule[] };
}

/** peers[].bfd after validation: intervals in ms (src/config/bfd.ts has the defaults). */
export interface BfdConfig {
  minRx: number;
  minTx: number;
  multiplier: number;
}

/** peers[].maxPrefixes as written: restart in seconds (0 = only on reconfiguration), warningPercent 1..100. */
export type MaxPrefixesConfig = number | { ipv4?: number; ipv6?: number; warningPercent?: number; restart?: number };

export interface BgpConfig {
  asn: number;
  routerId: string;
  /** false (or port 0 in the file): never accept connections, only connect out. */
  listen: ListenAddress | false;
  /** Our restart time as a restarting speaker / helper; false turns graceful restart off. Default 120 s. */
  gracefulRestart: PeerGracefulRestart | false;
  peers: PeerConfig[];
  /** Static routes announced as local routes. */
  announce: string[];
  /** Calico's node-to-node mesh. Absent: on when ipam.store is shared (etcd), off for the embedded store. */
  nodeToNodeMeshEnabled?: boolean;
  /** TCP-MD5 password of every mesh session (Calico BGPConfiguration nodeMeshPassword), by reference. */
  nodeMeshPassword?: SecretSource;
  /** Max-prefix of every session to another node (the mesh, peerSelector peerings): peers[].maxPrefixes' form. */
  nodeMeshMaxPrefixes?: MaxPrefixesConfig;
  /** From Calico BGPPeers with a peerSelector: peer with the registered nodes the selector matches. */
  selectorPeers?: SelectorPeerConfig[];
  /** Route reflector cluster ID: set by the daemon from node.bgp.routeReflectorClusterID. */
  clusterId?: string;
  /** Service IP ranges (Calico BGPConfiguration); also in `announce`, so every node announces them. */
  serviceIPs?: ServiceIPs;
  /**
   * The cluster's AS (BGPConfiguration default asNumber, from Calico's etcd): the AS of mesh nodes whose Node sets
   * none, as calico-node reads it. Unset: bgp.asn.
   */
  clusterAsn?: number;
  /** Named community values (Calico BGPConfiguration communities), for reference by prefixAdvertisements. */
  communities?: { name: string; value: string }[];
  /** Communities added to exported routes inside each CIDR, values resolved ("aa:nn" or "aa:nn:mm"). */
  prefixAdvertisements?: { cidr: string; communities: string[] }[];
}

export interface ServiceIPs {
  clusterIPs: string[];
  externalIPs: string[];
  loadBalancerIPs: string[];
}

export interface SelectorPeerConfig {
  name: string;
  peerSelector: string;
  /** Which nodes this peering is for (Calico BGPPeer node / nodeSelector); absent: every node. */
  node?: string;
  nodeSelector?: string;
  /** The peer nodes' AS when set; else each node's own (or the cluster default). */
  asn?: number;
  port: number;
  holdTime: number;
  gracefulRestart: PeerGracefulRestart | false;
  import?: PrefixRule[];
  export?: PrefixRule[];
  nextHopSelf?: boolean;
  /** TCP-MD5 and GTSM for every peer this selector makes (Calico BGPPeer password / ttlSecurity). */
  password?: SecretSource;
  ttlSecurity?: number;
  allowAsIn?: number;
  localAsn?: number;
  policy?: { import?: PolicyRule[]; export?: PolicyRule[] };
}

export type ReservationConfig =
  | { kind: 'auto' }
  | { kind: 'perBlock'; start: number; end: number }
  | { kind: 'perHost'; count: number }
  | { kind: 'perPool'; count: number }
  | { kind: 'none' };

export interface PoolConfig {
  name: string;
  cidr: string;
  /** Default 26 (IPv4) / 122 (IPv6). */
  blockSize: number;
  nodeSelector: string;
  disabled: boolean;
  allowedUses: ('Workload' | 'Tunnel')[];
  natOutgoing: boolean;
  disableBGPExport: boolean;
  reservation: ReservationConfig;
}

export interface IpamConfig {
  /** A directory (embedded file store) or etcd://host:port[,host:port...]. */
  store: string;
  strictAffinity: boolean;
  maxBlocksPerHost: number;
  autoAllocateBlocks: boolean;
  ipCooldownSeconds: number;
  pools: PoolConfig[];
  /** Calico v3 manifest files (IPPool, BGPPeer, BGPConfiguration, IPAMConfiguration) merged in by the daemon. */
  calico: string[];
  /** TLS files and user/password for an etcd store (absent: none). */
  etcd?: EtcdSecurity;
  /** blockspeaker (own keys) or calico (Calico's IPAM v2 keys and JSON in etcd, shared with calico-node). */
  layout: 'blockspeaker' | 'calico';
}

export type DataplaneConfig =
  | { kind: 'none' }
  | {
    kind: 'linux'; table: number; protocol: number;
    /**
     * Pods sit on this bridge, which holds the pool's subnet (the bridge CNI plugin with pool addressing): own
     * blocks are not blackholed (that would shadow the bridge) and addresses this node borrowed get a /32 onto it.
     */
    bridge?: string;
  }
  | HnsDataplaneConfig;

/** dataplane kind hns (src/config/hns.ts validates it; docs/reference/hns.md documents every field). */
export interface HnsDataplaneConfig {
  kind: 'hns';
  /** The HNS network's Name. Default "blockspeaker". */
  network?: string;
  mode: 'l2bridge' | 'l2tunnel' | 'overlay';
  /** Overlay: the VXLAN VNI (VSID), 4096..65535. Required for overlay. */
  vni?: number;
  /** The physical adapter the network is bound to (NetAdapterName policy at creation). */
  adapter?: string;
  /** Management vNIC for l2bridge/l2tunnel host routes. Default "vEthernet (<adapter>)". */
  interfaceAlias?: string;
  /** Overlay: this node's distributed router MAC, published beside its block affinities. Required for overlay. */
  drMac?: string;
  /** Overlay: this node's provider address (ProviderAddress policy; routes via it are ours). */
  providerAddress?: string;
  /** Extra owned ranges (e.g. the cluster CIDR) beside the pools. */
  ownedPrefixes?: string[];
  /** One block per host, the block is the network's subnet (kube-proxy's and Calico's classic layout). */
  singleNetwork?: boolean;
  /** RouteMetric of our management vNIC routes. Default 271. */
  routeMetric?: number;
  /** Seconds an IPAM handle may hold an address with no HNS endpoint before it is released. Default 600; 0: never. */
  endpointGraceSeconds?: number;
  /** Write the containerd CNI network config list at start (src/config/hns-cni.ts). */
  cni?: HnsCniConfig;
}

/** dataplane.cni (kind hns): where and what conflist the daemon writes at start. */
export interface HnsCniConfig {
  confDir: string;
  /** Default 10-blockspeaker.conflist. */
  fileName: string;
  /** The main plugin: blockspeaker (default; the daemon makes the endpoints), or win-bridge/win-overlay/sdnbridge with blockspeaker-cni as IPAM. */
  flavor: 'blockspeaker' | 'win-bridge' | 'win-overlay' | 'sdnbridge';
  serviceCidr: string;
  nodeSubnet: string;
  nodeIP?: string;
  dnsServers?: string[];
  dnsSearch?: string[];
}

export interface StatusConfig {
  /** Everything the endpoint serves. Default 127.0.0.1:9179; port 0 picks a free port (the daemon logs the one it got). */
  listen: ListenAddress;
  /** A second listener serving only /metrics, /healthz and /readyz (scrapers, kubelet probes). Absent: none. */
  metricsListen?: ListenAddress;
}

export interface IpcConfig {
  path: string;
}
