// Calico's v3 Node resource as the etcdv3 datastore keeps it (/calico/resources/v3/projectcalico.org/nodes/<name>):
// the one reader and writer of its JSON. IPAM (a node's name, labels and OS), the cluster registry (its BGP
// identity) and the overlay's VTEP records (its VXLAN MAC) all start from what this module reads, so none of them
// disagrees on what a Node says. It sits on the ground floor beside net/: it knows Calico's shapes, nothing of IPAM
// or BGP.
//
// Facts (libcalico-go api/pkg/apis/projectcalico/v3 Node, NodeBGPSpec): the OS is only the kubernetes.io/os label;
// spec.bgp holds asNumber (a number, or asdot "HI.LO" as text), ipv4Address/ipv6Address (an address with its
// length), ipv4IPIPTunnelAddr and routeReflectorClusterID; other writers (calico-node, kube-controllers) add uid,
// creationTimestamp, VXLAN/WireGuard addresses, orchRefs and status. Calico for Windows keeps the node's VXLAN MAC
// in spec.vxlanTunnelMACAddr.
import { CALICO_NODES } from './keys.ts';

export class CalicoNodeError extends Error {
  override name = 'CalicoNodeError';
}

/** The spec.bgp fields blockspeaker owns when it writes its own Node; every other field is kept as it was. */
export const OWNED_BGP_FIELDS = ['asNumber', 'ipv4Address', 'ipv6Address', 'routeReflectorClusterID'] as const;

export interface CalicoNode {
  name: string;
  labels: Record<string, string>;
  /** From the kubernetes.io/os label (Calico's Node has no OS field); linux when absent. */
  os: 'linux' | 'windows';
  /** spec.bgp as written, each field unchecked beyond its JSON type: the cluster layer validates what it uses. */
  bgp: { ipv4Address?: string; ipv6Address?: string; asNumber?: unknown; routeReflectorClusterID?: string };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Calico's ASNumber accepts a number, a decimal string, or asdot "HI.LO". undefined when it is none of those. */
export function parseAsNumber(v: unknown): number | undefined {
  if (typeof v === 'string' && /^\d+\.\d+$/.test(v)) {
    const [hi, lo] = v.split('.').map(Number);
    return hi <= 65535 && lo <= 65535 && hi * 65536 + lo > 0 ? hi * 65536 + lo : undefined;
  }
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 4294967295 ? (n as number) : undefined;
}

/** A Node resource (parsed JSON). `where` names it in errors (its key); `keyName` the name its key gives, if any. */
export function readCalicoNode(obj: unknown, where: string, keyName?: string): CalicoNode {
  const bad = (field: string, msg: string): never => {
    throw new CalicoNodeError(`${where}: ${field}: ${msg}`);
  };
  if (!isObj(obj)) return bad('(value)', 'not a JSON object');
  if (obj.kind !== undefined && obj.kind !== 'Node') bad('kind', `${JSON.stringify(obj.kind)}, expected Node`);
  if (obj.metadata !== undefined && obj.metadata !== null && !isObj(obj.metadata)) bad('metadata', 'must be an object');
  const meta = (obj.metadata ?? {}) as Obj;
  const name = meta.name ?? keyName;
  if (typeof name !== 'string') return bad('metadata.name', `a string, got ${JSON.stringify(name)}`);
  if (keyName !== undefined && name !== keyName) bad('metadata.name', `${JSON.stringify(name)} differs from the key`);
  if (meta.labels !== undefined && meta.labels !== null && !isObj(meta.labels)) bad('metadata.labels', 'must be an object');
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries((meta.labels ?? {}) as Obj).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (typeof v !== 'string') bad(`metadata.labels.${k}`, `a string, got ${JSON.stringify(v)}`);
    labels[k] = v as string;
  }
  const spec = obj.spec ?? {};
  if (!isObj(spec)) return bad('spec', 'must be an object');
  const b = spec.bgp ?? {};
  if (!isObj(b)) return bad('spec.bgp', 'must be an object');
  const bgp: CalicoNode['bgp'] = {};
  for (const f of ['ipv4Address', 'ipv6Address', 'routeReflectorClusterID'] as const) {
    const v = b[f];
    if (v === undefined || v === null || v === '') continue;
    if (typeof v !== 'string') bad(`spec.bgp.${f}`, `a string, got ${JSON.stringify(v)}`);
    bgp[f] = v as string;
  }
  if (b.asNumber !== undefined && b.asNumber !== null) bgp.asNumber = b.asNumber;
  return { name, labels, os: labels['kubernetes.io/os'] === 'windows' ? 'windows' : 'linux', bgp };
}

/** Parse and read a Node key's value. */
export function decodeCalicoNode(key: string, text: string): CalicoNode {
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new CalicoNodeError(`${key}: not JSON: ${(e as Error).message}`);
  }
  const name = key.startsWith(CALICO_NODES) ? key.slice(CALICO_NODES.length) : undefined;
  return readCalicoNode(obj, key, name);
}

/**
 * Our own Node, written over `existing` (the resource now in the store, if any): every field another writer put
 * there is kept (top level, metadata, spec, and spec.bgp fields we do not own such as ipv4IPIPTunnelAddr); the
 * labels and the owned spec.bgp fields are ours, an owned field we leave unset is removed.
 */
export function writeCalicoNode(n: { name: string; labels: Record<string, string>; bgp: Partial<Record<(typeof OWNED_BGP_FIELDS)[number], string | number>> },
  existing?: Obj): Obj {
  const prevMeta = isObj(existing?.metadata) ? existing.metadata : {};
  const prevSpec = isObj(existing?.spec) ? existing.spec : {};
  const bgp: Obj = isObj(prevSpec.bgp) ? { ...prevSpec.bgp } : {};
  for (const f of OWNED_BGP_FIELDS) {
    if (n.bgp[f] !== undefined && n.bgp[f] !== '') bgp[f] = n.bgp[f];
    else delete bgp[f];
  }
  return {
    ...(existing ?? {}),
    kind: 'Node',
    apiVersion: 'projectcalico.org/v3',
    metadata: { ...prevMeta, name: n.name, labels: { ...n.labels } },
    spec: { ...prevSpec, bgp },
  };
}

/**
 * What the overlay reads of a Node (parsed JSON), as written and unchecked: spec.bgp.ipv4Address (felix's Windows
 * VXLAN manager uses it as the provider address) and spec.vxlanTunnelMACAddr. Any JSON value reads; absent: undefined.
 */
export function readCalicoNodeVxlan(obj: unknown): { ipv4Address: unknown; vxlanTunnelMACAddr: unknown } {
  const spec = ((obj as Record<string, any>)?.spec ?? {}) as Record<string, any>;
  return { ipv4Address: spec.bgp?.ipv4Address, vxlanTunnelMACAddr: spec.vxlanTunnelMACAddr };
}

/** `existing` (the Node now in the store, {} for none) with spec.vxlanTunnelMACAddr set: every other field is kept. */
export function writeCalicoNodeVxlanMac(mac: string, existing: Record<string, any>): Obj {
  const metadata = { ...(existing.metadata ?? {}) };
  const spec = { ...(existing.spec ?? {}), vxlanTunnelMACAddr: mac };
  return { kind: 'Node', apiVersion: 'projectcalico.org/v3', ...existing, metadata, spec };
}
