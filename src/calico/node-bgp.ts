// A cluster node's BGP identity as Calico's Node resource spells it (spec.bgp, plus the name and labels), and the
// one validator for it: the config file's node.bgp section and every node record read from a store go through
// checkNode. Where such records live is src/cluster/node.ts's business.
import { formatIP, parseIP } from '../net/ip.ts';

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
