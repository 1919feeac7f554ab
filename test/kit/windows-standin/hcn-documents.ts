// HCN's JSON documents as the stand-in checks them: the fields each object takes, the network types, and helpers
// that read settings (IDs, prefixes, addresses, subnets, policies) and refuse what HCN refuses.
import { HCN } from '../../../src/hns/model.ts';
import { type IP, type Prefix, formatPrefix, parseIP, parsePrefix } from '../../../src/net/ip.ts';
import { refuse } from './wire.ts';

export type Doc = Record<string, unknown>;

/** Top-level fields HCN accepts (hcsshim's HostComputeNetwork, HostComputeEndpoint, HostComputeNamespace). */
export const FIELDS = {
  Network: ['ID', 'Name', 'Type', 'Policies', 'MacPool', 'Dns', 'Ipams', 'Flags', 'Health', 'SchemaVersion'],
  Endpoint: [
    'ID', 'Name', 'HostComputeNetwork', 'HostComputeNamespace', 'Policies', 'IpConfigurations', 'Dns', 'Routes', 'MacAddress',
    'Flags', 'Health', 'SchemaVersion',
  ],
  Namespace: ['ID', 'IsDefault', 'NamespaceId', 'Type', 'Resources', 'SchemaVersion'],
  Modify: ['ResourceType', 'RequestType', 'Settings'],
} as const;

export const NETWORK_TYPES = ['NAT', 'ICS', 'Transparent', 'L2Bridge', 'L2Tunnel', 'Overlay', 'Private', 'Internal', 'Mirrored'];
export const MULTI_SUBNET_TYPES = new Set(['l2bridge', 'l2tunnel', 'overlay']);
export const NAMESPACE_TYPES = ['Host', 'HostDefault', 'Guest', 'GuestDefault'];
export const SCHEMA = { Major: 2, Minor: 0 };
export const ZERO_GUID = '00000000-0000-0000-0000-000000000000';
const GUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export const clone = <T>(v: T): T => structuredClone(v);
export const isObj = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A GUID as HCN prints it: lower case, no braces; null when the text is not a GUID. */
export function normId(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = v.trim().replace(/^\{(.*)\}$/, '$1').toLowerCase();
  return GUID_RE.test(s) ? s : null;
}

export function parseDoc(text: unknown, what: string): Doc {
  if (typeof text !== 'string') return refuse(HCN.INVALID_JSON, `${what}: no document`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return refuse(HCN.INVALID_JSON, `${what}: invalid JSON (${(e as Error).message})`);
  }
  if (!isObj(v)) return refuse(HCN.INVALID_JSON, `${what}: not a JSON object`);
  return v;
}

export function onlyFields(doc: Doc, allowed: readonly string[], what: string): void {
  for (const k of Object.keys(doc)) if (!allowed.includes(k)) refuse(HCN.INVALID_JSON, `${what}: unknown field "${k}"`);
}

export function list(doc: Doc, key: string, what: string): unknown[] {
  const v = doc[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return refuse(HCN.INVALID_JSON, `${what}: ${key} must be an array`);
  return v;
}

export function hcnPrefix(text: unknown, what: string): Prefix {
  try {
    return parsePrefix(String(text));
  } catch (e) {
    return refuse(HCN.INVALID_PREFIX, `${what}: ${typeof text === 'string' ? (e as Error).message : 'missing prefix'}`);
  }
}

export function hcnIP(text: unknown, code: number, what: string): IP {
  try {
    return parseIP(String(text));
  } catch {
    return refuse(code, `${what}: invalid address ${JSON.stringify(text)}`);
  }
}

/** Subnets of a network document, over all its Ipams (validated as arrays of objects). */
export function subnetsOf(doc: Doc): Doc[] {
  const out: Doc[] = [];
  for (const ipam of list(doc, 'Ipams', 'network')) {
    if (!isObj(ipam)) refuse(HCN.INVALID_JSON, 'network: an Ipams entry is not an object');
    for (const s of list(ipam as Doc, 'Subnets', 'Ipam')) {
      if (!isObj(s)) refuse(HCN.INVALID_JSON, 'network: a Subnets entry is not an object');
      out.push(s as Doc);
    }
  }
  return out;
}

export function ipSubnetsOf(subnet: Doc): Doc[] {
  return list(subnet, 'IpSubnets', 'Subnet').map((x) => (isObj(x) ? x : refuse(HCN.INVALID_JSON, 'Subnet: an IpSubnets entry is not an object')));
}

/** Values equal for an enumerate filter: GUIDs without regard to case or braces, the rest as JSON. */
export function sameValue(a: unknown, b: unknown): boolean {
  const x = normId(a);
  if (x !== null && x === normId(b)) return true;
  return JSON.stringify(a) === JSON.stringify(b);
}

export function samePolicy(a: Doc, b: Doc): boolean {
  if (a.Type !== b.Type) return false;
  if (a.Type === 'RemoteSubnetRoute') {
    const p = (x: Doc) => (isObj(x.Settings) ? String(x.Settings.DestinationPrefix) : '');
    try {
      return formatPrefix(parsePrefix(p(a))) === formatPrefix(parsePrefix(p(b)));
    } catch {
      return p(a) === p(b);
    }
  }
  return JSON.stringify(a.Settings ?? {}) === JSON.stringify(b.Settings ?? {});
}

export const prefixKey = (text: unknown): string | null => {
  try {
    return formatPrefix(parsePrefix(String(text)));
  } catch {
    return null;
  }
};
