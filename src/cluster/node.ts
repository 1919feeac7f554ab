// A cluster node's BGP identity, spelled as Calico's Node resource spells it (spec.bgp), and the two places it can
// live in the datastore: our own layout (/blockspeaker/cluster/v1/nodes/<name>) and Calico's v3 Node resource
// (/calico/resources/v3/projectcalico.org/nodes/<name>). A NodeLayout is all the registry needs to know of either,
// so a store in Calico's layout is wired by handing the registry `calicoNodeLayout`.
import { formatIP, parseIP } from '../net/ip.ts';
import { CALICO_NODES, parseAsNumber, readCalicoNode, writeCalicoNode } from '../calico/v3.ts';

export interface ClusterNode {
  name: string;
  /** Labels, including kubernetes.io/os (Calico's Node has no OS field). */
  labels: Record<string, string>;
  /** The node's BGP address with its subnet length, e.g. "10.0.0.5/24" (Calico: spec.bgp.ipv4Address). */
  ipv4Address?: string;
  ipv6Address?: string;
  /** Absent: the cluster's default AS (BGPConfiguration asNumber, else 64512). */
  asNumber?: number;
  /** Set on route reflectors: their cluster ID (an IPv4 dotted quad). Such nodes are not in the mesh. */
  routeReflectorClusterID?: string;
}

export class ClusterError extends Error {
  override name = 'ClusterError';
}

/** Where nodes live in a store and how they are spelled there. */
export interface NodeLayout {
  /** Every node key starts with this. */
  readonly prefix: string;
  key(name: string): string;
  /** `previous`: the value now in the store, whose fields we do not own are kept. */
  encode(node: ClusterNode, previous?: string): string;
  /** null: the key is not a node (e.g. a sub-key). Throws ClusterError on a malformed node. */
  decode(key: string, value: string): ClusterNode | null;
}

/** The address part of "A.B.C.D/LEN" (or of a bare address). */
export function nodeIP(cidr: string | undefined): string | undefined {
  return cidr === undefined ? undefined : cidr.split('/')[0];
}

/** Validate and canonicalise a node (the address keeps its host bits: it is an interface address, not a prefix). */
export function checkNode(n: ClusterNode, where: string): ClusterNode {
  const bad = (field: string, msg: string): never => {
    throw new ClusterError(`${where}: ${field}: ${msg}`);
  };
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(n.name ?? '')) bad('name', `a DNS name, got ${JSON.stringify(n.name)}`);
  const addr = (field: 'ipv4Address' | 'ipv6Address', family: 4 | 6): string | undefined => {
    const v = n[field];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') return bad(`bgp.${field}`, `an IPv${family} address with its length (A/LEN), got ${JSON.stringify(v)}`);
    const [ip, len] = v.includes('/') ? v.split('/') : [v, String(family === 4 ? 32 : 128)];
    try {
      const a = parseIP(ip);
      if (a.family !== family) throw new Error(`not IPv${family}`);
      if (!/^\d+$/.test(len) || Number(len) > (family === 4 ? 32 : 128)) throw new Error(`bad length ${len}`);
      return `${formatIP(a)}/${Number(len)}`;
    } catch (e) {
      return bad(`bgp.${field}`, `an IPv${family} address with its length (A/LEN), got ${JSON.stringify(v)} (${(e as Error).message})`);
    }
  };
  const out: ClusterNode = { name: n.name, labels: {} };
  for (const [k, v] of Object.entries(n.labels ?? {})) {
    if (typeof v !== 'string') bad(`labels.${k}`, `a string, got ${JSON.stringify(v)}`);
    out.labels[k] = v;
  }
  const v4 = addr('ipv4Address', 4);
  const v6 = addr('ipv6Address', 6);
  if (v4) out.ipv4Address = v4;
  if (v6) out.ipv6Address = v6;
  if (n.asNumber !== undefined) {
    if (!Number.isInteger(n.asNumber) || n.asNumber < 1 || n.asNumber > 4294967295) bad('bgp.asNumber', `1..4294967295, got ${JSON.stringify(n.asNumber)}`);
    out.asNumber = n.asNumber;
  }
  if (n.routeReflectorClusterID !== undefined && n.routeReflectorClusterID !== '') {
    let ok = false;
    try {
      ok = parseIP(n.routeReflectorClusterID).family === 4;
    } catch { /* reported below */ }
    if (!ok) bad('bgp.routeReflectorClusterID', `an IPv4 dotted quad, got ${JSON.stringify(n.routeReflectorClusterID)}`);
    out.routeReflectorClusterID = formatIP(parseIP(n.routeReflectorClusterID));
  }
  return out;
}

function parseJson(key: string, value: string): unknown {
  try {
    return JSON.parse(value);
  } catch (e) {
    throw new ClusterError(`${key}: not JSON: ${(e as Error).message}`);
  }
}

// ---- our layout ------------------------------------------------------------------------------------------------

const OUR_ROOT = '/blockspeaker/cluster/v1/nodes/';

export const ourNodeLayout: NodeLayout = {
  prefix: OUR_ROOT,
  key: (name) => `${OUR_ROOT}${encodeURIComponent(name)}`,
  encode: (n) => JSON.stringify(n),
  decode(key, value) {
    const name = decodeURIComponent(key.slice(OUR_ROOT.length));
    if (name === '' || name.includes('/')) return null;
    return checkNode({ ...(parseJson(key, value) as ClusterNode), name }, key);
  },
};

// ---- Calico's Node resource -----------------------------------------------------------------------------------
// Read and written by src/calico/v3.ts (shared with IPAM's hosts); here only the BGP identity is checked.

export { parseAsNumber };

/** The Node resource as calico-node writes it, over `existing`: fields other writers put there are kept. */
export function toCalicoNode(n: ClusterNode, existing?: Record<string, unknown>): Record<string, unknown> {
  return writeCalicoNode({ name: n.name, labels: n.labels, bgp: { asNumber: n.asNumber, ipv4Address: n.ipv4Address, ipv6Address: n.ipv6Address,
    routeReflectorClusterID: n.routeReflectorClusterID } }, existing);
}

export function fromCalicoNode(obj: unknown, where: string, keyName?: string): ClusterNode {
  let c;
  try {
    c = readCalicoNode(obj, where, keyName);
  } catch (e) {
    throw new ClusterError((e as Error).message);
  }
  const n: ClusterNode = { name: c.name, labels: c.labels };
  if (c.bgp.ipv4Address) n.ipv4Address = c.bgp.ipv4Address;
  if (c.bgp.ipv6Address) n.ipv6Address = c.bgp.ipv6Address;
  if (c.bgp.asNumber !== undefined) {
    const as = parseAsNumber(c.bgp.asNumber);
    if (as === undefined) throw new ClusterError(`${where}: spec.bgp.asNumber: 1..4294967295 or HI.LO, got ${JSON.stringify(c.bgp.asNumber)}`);
    n.asNumber = as;
  }
  if (c.bgp.routeReflectorClusterID) n.routeReflectorClusterID = c.bgp.routeReflectorClusterID;
  return checkNode(n, where);
}

export const calicoNodeLayout: NodeLayout = {
  prefix: CALICO_NODES,
  key: (name) => `${CALICO_NODES}${name}`,
  encode(n, previous) {
    let prev: Record<string, unknown> | undefined;
    try {
      prev = previous === undefined ? undefined : (JSON.parse(previous) as Record<string, unknown>);
    } catch {
      prev = undefined; // a malformed resource is replaced
    }
    return JSON.stringify(toCalicoNode(n, prev));
  },
  decode(key, value) {
    const name = key.slice(CALICO_NODES.length);
    if (name === '' || name.includes('/')) return null;
    return fromCalicoNode(parseJson(key, value), key, name);
  },
};
