// Calico's v3 IPPool resource as the etcdv3 datastore keeps it (/calico/resources/v3/projectcalico.org/ippools/<name>):
// its JSON read into plain values and written the way calicoctl leaves it. What the values mean to IPAM (a Pool, its
// checks and reservation) is src/ipam/calico/resources.ts's business.
import { parseJson, type JsonObject, type JsonValue } from './ipam-json.ts';
import { CalicoDecodeError } from './ipam-model.ts';
import { resourceKeys } from './keys.ts';

/** The spec fields IPAM reads besides cidr, in the order they are read. */
export const IPPOOL_FIELDS = ['blockSize', 'nodeSelector', 'disabled', 'natOutgoing', 'disableBGPExport', 'allowedUses'] as const;

/** An IPPool as read: its name (metadata.name, else the key's), spec.cidr, and the other fields set (numbers as numbers). */
export interface IPPoolRead {
  name: string;
  cidr: string;
  fields: Partial<Record<(typeof IPPOOL_FIELDS)[number], unknown>>;
}

/** What is written of a pool. */
export interface IPPoolWrite {
  name: string;
  cidr: string;
  blockSize: number;
  nodeSelector: string;
  disabled: boolean;
  allowedUses: readonly string[];
  natOutgoing: boolean;
  disableBGPExport: boolean;
}

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

/** Read an IPPool key's value. Throws CalicoDecodeError naming the key and field; empty strings read as unset. */
export function readIPPool(key: string, text: string): IPPoolRead {
  const o = parse(key, text);
  const kind = o.get('kind');
  if (kind !== undefined && kind !== 'IPPool') throw new CalicoDecodeError(`${key}: kind is ${JSON.stringify(kind)}, not IPPool`);
  const name = sub(key, o, 'metadata').get('name') ?? key.slice(resourceKeys.ippools.length);
  const spec = sub(key, o, 'spec');
  const field = (f: string) => plain(key, `spec.${f}`, spec.get(f));
  const cidr = field('cidr');
  if (typeof cidr !== 'string') throw new CalicoDecodeError(`${key}: spec.cidr must be a string`);
  const fields: IPPoolRead['fields'] = {};
  for (const f of IPPOOL_FIELDS) {
    const v = field(f);
    if (v !== undefined && v !== '') fields[f] = v;
  }
  return { name: String(name), cidr, fields };
}

/** The IPPool's JSON: no tunnels (blockspeaker routes natively), false flags left out, created at `now()` (ms). */
export function writeIPPool(p: IPPoolWrite, now: () => number): string {
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
