// A cluster node's BGP identity, spelled as Calico's Node resource spells it (spec.bgp), and the two places it can
// live in the datastore: our own layout (/blockspeaker/cluster/v1/nodes/<name>) and Calico's v3 Node resource
// (/calico/resources/v3/projectcalico.org/nodes/<name>). A NodeLayout is all the registry needs to know of either,
// so a store in Calico's layout is wired by handing the registry `calicoNodeLayout`.
import { CALICO_NODES } from '../calico/keys.ts';
import { parseAsNumber, readCalicoNode, writeCalicoNode } from '../calico/node.ts';
import { ClusterError, checkNode, type ClusterNode } from '../calico/node-bgp.ts';

export { ClusterError, checkNode, nodeIP, type ClusterNode } from '../calico/node-bgp.ts';

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
// Read and written by src/calico/node.ts (shared with IPAM's hosts); here only the BGP identity is checked.

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
