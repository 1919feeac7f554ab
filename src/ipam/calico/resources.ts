// The few Calico v3 resources IPAM needs, as the etcdv3 backend keeps them:
//   /calico/resources/v3/projectcalico.org/ippools/<name>   IPPool (spec.cidr, blockSize, nodeSelector, ...)
//   /calico/resources/v3/projectcalico.org/nodes/<name>     Node (IPAM needs only the name and labels: the OS is
//                                                           the kubernetes.io/os label)
// The full Node and BGP kinds belong to the cluster layer; this reads only what the allocator uses.
import { familyOfText } from '../../net/ip.ts';
import { validatePool } from '../ipam.ts';
import { IpamError, type Host, type Pool, type PoolSpec } from '../types.ts';
import { parseJson, type JsonObject, type JsonValue } from './json.ts';
import { CalicoDecodeError } from './model.ts';
import { CALICO_NODES, CALICO_V3_ROOT, decodeCalicoNode } from '../../calico/v3.ts';

export const V3 = CALICO_V3_ROOT;
export const resourceKeys = {
  ippools: `${V3}ippools/`,
  ippool: (name: string) => `${V3}ippools/${name}`,
  nodes: CALICO_NODES,
  node: (name: string) => `${V3}nodes/${name}`,
  ipamConfiguration: `${V3}ipamconfigurations/default`,
};

function parse(key: string, text: string): JsonObject {
  let v: JsonValue;
  try {
    v = parseJson(text);
  } catch (e) {
    throw new CalicoDecodeError(`${key}: not JSON: ${(e as Error).message}`);
  }
  if (!(v instanceof Map)) throw new CalicoDecodeError(`${key}: expected a JSON object`);
  return v;
}

function sub(key: string, o: JsonObject, name: string): JsonObject {
  const v = o.get(name);
  if (v === undefined || v === null) return new Map();
  if (!(v instanceof Map)) throw new CalicoDecodeError(`${key}: ${name} must be an object`);
  return v;
}

function plain(key: string, field: string, v: JsonValue | undefined): unknown {
  if (v === undefined || v === null) return undefined;
  if (v instanceof Map) throw new CalicoDecodeError(`${key}: ${field} must not be an object`);
  if (Array.isArray(v)) return v.map((x, i) => plain(key, `${field}[${i}]`, x));
  if (typeof v === 'object') return Number(v.text);
  return v;
}

/** An IPPool resource as our Pool. Calico reserves addresses only in Windows IPv4 blocks: IPv6 pools reserve none. */
export function decodeIPPool(key: string, text: string): Pool {
  const o = parse(key, text);
  const kind = o.get('kind');
  if (kind !== undefined && kind !== 'IPPool') throw new CalicoDecodeError(`${key}: kind is ${JSON.stringify(kind)}, not IPPool`);
  const name = sub(key, o, 'metadata').get('name') ?? key.slice(resourceKeys.ippools.length);
  const spec = sub(key, o, 'spec');
  const field = (f: string) => plain(key, `spec.${f}`, spec.get(f));
  const cidr = field('cidr');
  if (typeof cidr !== 'string') throw new CalicoDecodeError(`${key}: spec.cidr must be a string`);
  const ps: PoolSpec = { name: String(name), cidr };
  for (const f of ['blockSize', 'nodeSelector', 'disabled', 'natOutgoing', 'disableBGPExport', 'allowedUses'] as const) {
    const v = field(f);
    if (v !== undefined && v !== '') (ps as unknown as Record<string, unknown>)[f] = v;
  }
  ps.reservation = familyOfText(cidr.split('/')[0]) === 4 ? { kind: 'auto' } : { kind: 'none' };
  try {
    return validatePool(ps);
  } catch (e) {
    throw new CalicoDecodeError(`${key}: ${(e as Error).message}`);
  }
}

export function encodeIPPool(p: Pool, now: () => number): string {
  const v4 = familyOfText(p.cidr.split('/')[0]) === 4;
  if (p.reservation.kind !== 'auto' && !(p.reservation.kind === 'none' && !v4)) {
    throw new IpamError('INVALID', `pool ${p.name}: the calico layout cannot keep a ${p.reservation.kind} reservation (Calico reserves only Windows IPv4 blocks' 0, 1, 2 and last)`);
  }
  const spec: [string, unknown][] = [
    ['cidr', p.cidr],
    ['vxlanMode', 'Never'],
    ['ipipMode', 'Never'],
    ['natOutgoing', p.natOutgoing || undefined],
    ['disabled', p.disabled || undefined],
    ['disableBGPExport', p.disableBGPExport || undefined],
    ['blockSize', p.blockSize],
    ['nodeSelector', p.nodeSelector],
    ['allowedUses', p.allowedUses],
  ];
  const specJson = `{${spec.filter(([, v]) => v !== undefined).map(([k, v]) => `"${k}":${JSON.stringify(v)}`).join(',')}}`;
  const created = new Date(Math.floor(now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
  return `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":${JSON.stringify(p.name)},"creationTimestamp":"${created}"},"spec":${specJson}}`;
}

/** A Calico Node as an IPAM host: its name, labels, and OS from the kubernetes.io/os label (src/calico/v3.ts reads it). */
export function decodeNode(key: string, text: string): Host {
  try {
    const n = decodeCalicoNode(key, text);
    return { name: n.name, os: n.os, labels: n.labels };
  } catch (e) {
    throw new CalicoDecodeError((e as Error).message);
  }
}
