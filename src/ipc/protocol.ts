// The control socket's messages: what the CLI and the CNI plugin ask the daemon, and what it answers.
//
// Transport: net-ipc's framing over a Unix socket (a named pipe on Windows): "IPC", then frames of
// varint(length) + JSON {t: type, d: data, n?: nonce}. Every request's data is a Request and every response's data a
// Response. Its only runtime import is src/platform/paths.ts (no imports of its own), so the CNI plugin loads it for
// nothing.

import { defaultPaths, socketEndpoint } from '../platform/paths.ts';

/**
 * Handles of the node's own addresses (the HNS gateway, parked pool edges) start with this; a container ID from CNI
 * input never may, so no pod's DEL can release one.
 */
export const RESERVED_HANDLE_PREFIX = 'blockspeaker-';
export const isReservedContainerId = (id: string): boolean => id.toLowerCase().startsWith(RESERVED_HANDLE_PREFIX);

/** Default socket path (the config's ipc.path): /run/blockspeaker.sock, or the pipe \\.\pipe\blockspeaker on Windows. */
export const DEFAULT_SOCKET = defaultPaths().ipcPath;

// Where a path really lives on each OS (a pipe name on Windows): src/platform/paths.ts.
export { socketEndpoint };

export interface Request {
  /** Method name, e.g. "ipam.assign". */
  m: string;
  /** Parameters (an object; {} when there are none). */
  p?: unknown;
}

export type Response = { ok: true; r: unknown } | { ok: false; error: { code: string; message: string } };

// ---- IPAM methods -------------------------------------------------------------------------------------------------

export type Family = 4 | 6;

/** How the CNI plugin wants addresses presented to the pod (docs/reference/windows-cni.md for Windows). */
export interface Addressing {
  /**
   * pool: the pod's address carries its pool's prefix length and the gateway is on-link (works with the bridge
   * plugin's isGateway, also for addresses borrowed from other hosts' blocks).
   * host: /32 or /128 with a link-scoped route to the gateway (needs a main plugin that applies route scope, CNI 1.1).
   */
  prefix?: 'pool' | 'host';
  /** auto: the node's gateway address in the pod's pool; none: no gateway; or explicit addresses (one per family). */
  gateway?: 'auto' | 'none' | string[];
  /** Route the pod's pool through the gateway (two halves, more specific than the on-link pool). Default true. */
  poolRoutes?: boolean;
  /** Extra routes; a route without gw goes through the gateway of its family. */
  routes?: { dst: string; gw?: string }[];
}

export interface AssignParams {
  /** The handle is `${containerId}.${ifname}`; or give `handle` directly. */
  containerId?: string;
  ifname?: string;
  handle?: string;
  /** Default 1 when neither is given. */
  num4?: number;
  num6?: number;
  pools?: string[];
  attrs?: Record<string, string>;
  /** Present for CNI callers: the reply then carries `cni` (addresses, gateways and routes for the pod). */
  addressing?: Addressing;
}

export interface HeldAddress {
  ip: string;
  family: Family;
  pool: string;
  poolCidr: string;
  block: string;
  /** Prefix length of the block. */
  prefixLen: number;
  /** The block is affine to another host (or none): the address was borrowed. */
  borrowed: boolean;
}

export interface CniIP {
  family: Family;
  /** Address with the prefix length the pod gets, e.g. "10.244.3.5/16". */
  address: string;
  gateway?: string;
}

export interface CniRoute {
  dst: string;
  gw?: string;
  /** Route scope (CNI 1.1); 253 = link. Dropped for older result versions. */
  scope?: number;
}

export interface AssignReply {
  handle: string;
  /** True when the handle already held every requested address (a retried CNI ADD). */
  existing: boolean;
  ips: HeldAddress[];
  cni?: { ips: CniIP[]; routes: CniRoute[] };
}

export interface ReleaseParams {
  handle?: string;
  handles?: string[];
}

export interface ReleaseReply {
  released: string[];
}

export interface CheckParams {
  handle: string;
  /** Addresses expected to be held, with or without "/len". */
  ips: string[];
}

export interface CheckReply {
  ok: boolean;
  held: string[];
  /** Expected but not held by the handle. */
  missing: string[];
  /** Held by the handle but not expected. */
  extra: string[];
}

export interface HandleInfo {
  handle: string;
  ips: string[];
  attrs: Record<string, string>;
}

export interface HandlesParams {
  /** Only handles whose attributes include all of these. */
  attrs?: Record<string, string>;
}

export interface GatewayParams {
  /** Pool name or cidr; default: the first pool of the family the node may use. */
  pool?: string;
  family?: Family;
}

export interface AvailableParams {
  pools?: string[];
}

export interface Availability {
  /** Free addresses in this node's own blocks. */
  free: number;
  /** A new block can be claimed. */
  canClaim: boolean;
  /** Free addresses this node may borrow from other hosts' blocks. */
  borrowable: number;
  /** Candidate pools of this family for the node. */
  pools: string[];
}

export interface AvailableReply {
  host: string;
  v4: Availability;
  v6: Availability;
}

export interface StatusReply {
  pid: number;
  uptimeSeconds: number;
  methods: string[];
  /** Set by the daemon when existing pods may have limited connectivity (CNI STATUS code 51). */
  limitedConnectivity?: boolean;
  reason?: string;
  [key: string]: unknown;
}

// ---- main CNI plugin methods (Windows: the daemon does the HCN work, src/daemon/cni-windows.ts) ---------------

/** One entry of the runtime's portMappings capability (CNI conventions), passed through from runtimeConfig. */
export interface CniPortMapping {
  hostPort: number;
  containerPort: number;
  /** tcp (default), udp or sctp. */
  protocol?: string;
  hostIP?: string;
}

/** The network config's `dns` (CNI result/config shape). */
export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** What the runtime puts in runtimeConfig for the capabilities the conflist declares. */
export interface CniRuntimeConfig {
  portMappings?: CniPortMapping[];
  /** The dns capability: {servers, searches, options}. */
  dns?: { servers?: string[]; searches?: string[]; options?: string[] };
}

/** The attachment a main-plugin call is about: CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS and the config's name. */
export interface CniAttachmentParams {
  containerId: string;
  ifname: string;
  /** The pod's HCN namespace GUID (CNI_NETNS on Windows). Required for add and check. */
  netns?: string;
  /** The network config's name: the node's HNS network name. */
  network: string;
}

export interface CniAddParams extends CniAttachmentParams {
  netns: string;
  cniVersion?: string;
  /** Pod identity from CNI_ARGS (k8s.namespace, k8s.pod), kept on the IPAM allocation. */
  attrs?: Record<string, string>;
  runtimeConfig?: CniRuntimeConfig;
  /** The config's dns; runtimeConfig.dns wins per field, the daemon's default fills what neither gives. */
  dns?: CniDns;
  /** Addresses per family (0 or 1); default: 1 for each family this node has a usable pool of. */
  num4?: number;
  num6?: number;
  /** Restrict the pools (names or CIDRs). */
  pools?: string[];
}

export interface CniAddReply {
  endpoint: { id: string; name: string };
  /** The endpoint existed already with these addresses (a retried ADD). */
  existing: boolean;
  /** The one interface: name = CNI_IFNAME, mac = the endpoint's MAC, sandbox = the namespace GUID. */
  interface: { name: string; mac?: string; sandbox: string };
  /** Addresses with the Subnet's prefix length and the family's gateway (interface 0). */
  ips: CniIP[];
  /** Default routes per family via the gateway. */
  routes: CniRoute[];
  dns: CniDns;
}

export type CniDelParams = CniAttachmentParams;

export interface CniDelReply {
  /** Endpoints deleted (by ID). */
  removed: string[];
  released: string[];
}

export interface CniCheckParams extends CniAttachmentParams {
  netns: string;
  /** prevResult's addresses (with or without /len); compared with the endpoint's. */
  ips?: string[];
}

export interface CniCheckReply {
  ok: true;
  endpoint: string;
}

export interface CniGcParams {
  network: string;
  validAttachments: { containerID: string; ifname: string }[];
}

export interface CniGcReply {
  /** Names of the endpoints deleted. */
  endpointsRemoved: string[];
  /** IPAM handles released. */
  handlesReleased: string[];
}

/** Typed methods; anything else goes through IpcClient.request(name, params). */
export interface IpcMethods {
  'ipam.assign': { params: AssignParams; result: AssignReply };
  'ipam.release': { params: ReleaseParams; result: ReleaseReply };
  'ipam.check': { params: CheckParams; result: CheckReply };
  'ipam.handles': { params: HandlesParams; result: { handles: HandleInfo[] } };
  'ipam.gateway': { params: GatewayParams; result: HeldAddress };
  'ipam.available': { params: AvailableParams; result: AvailableReply };
  status: { params: Record<string, never>; result: StatusReply };
  'cni.add': { params: CniAddParams; result: CniAddReply };
  'cni.del': { params: CniDelParams; result: CniDelReply };
  'cni.check': { params: CniCheckParams; result: CniCheckReply };
  'cni.gc': { params: CniGcParams; result: CniGcReply };
}
