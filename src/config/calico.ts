// Calico v3 manifests (projectcalico.org/v3) as blockspeaker pools, peers and IPAM settings, so an existing Calico
// user can bring the IPPool / BGPPeer / BGPConfiguration / IPAMConfiguration objects they already have.
//
// Fields blockspeaker has no equivalent for (IPIP/VXLAN modes, node-to-node mesh, passwords...) are reported as
// warnings rather than silently dropped; a field with a wrong type is an error naming the document and field.
import { parseAllDocuments } from 'yaml';
import { parseIP, parsePrefix } from '../net/ip.ts';
import { parseSelector } from '../ipam/selector.ts';
import type { PeerConfig, PoolConfig } from './types.ts';

export interface CalicoImport {
  pools: PoolConfig[];
  peers: PeerConfig[];
  /** From the default BGPConfiguration. */
  asn?: number;
  listenPort?: number;
  ipam: { strictAffinity?: boolean; maxBlocksPerHost?: number; autoAllocateBlocks?: boolean };
  warnings: string[];
}

export class CalicoImportError extends Error {
  override name = 'ConfigError';
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Read one or more Calico v3 documents (a YAML stream, or a List / `items` array). Only objects that apply to
 * `nodeName` are kept: a BGPPeer with `spec.node` for another node is skipped; `nodeSelector` on a BGPPeer is
 * evaluated against `nodeLabels`.
 */
export function importCalico(text: string, source: string, nodeName: string, nodeLabels: Record<string, string> = {}): CalicoImport {
  const out: CalicoImport = { pools: [], peers: [], ipam: {}, warnings: [] };
  const errors: string[] = [];
  const docs = parseAllDocuments(text);
  const objects: { obj: Obj; where: string }[] = [];
  docs.forEach((doc, i) => {
    if (doc.errors.length) {
      errors.push(`${source}: document ${i + 1}: ${doc.errors[0].message.split('\n')[0]}`);
      return;
    }
    const v = doc.toJS() as unknown;
    if (v === null || v === undefined) return;
    if (!isObj(v)) {
      errors.push(`${source}: document ${i + 1}: not a Kubernetes object`);
      return;
    }
    const items = Array.isArray(v.items) ? v.items : [v];
    items.forEach((item, j) => objects.push({ obj: item as Obj, where: `${source}: document ${i + 1}${items.length > 1 ? ` item ${j + 1}` : ''}` }));
  });

  for (const { obj, where } of objects) {
    const kind = typeof obj.kind === 'string' ? obj.kind : '';
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    const name = typeof meta.name === 'string' ? meta.name : '';
    const spec = isObj(obj.spec) ? obj.spec : {};
    const at = `${where} (${kind || 'no kind'} ${name || 'unnamed'})`;
    const fail = (field: string, msg: string) => errors.push(`${at}: spec.${field}: ${msg}`);
    if (typeof obj.apiVersion === 'string' && !obj.apiVersion.startsWith('projectcalico.org/') && !obj.apiVersion.startsWith('crd.projectcalico.org/')) {
      out.warnings.push(`${at}: apiVersion ${obj.apiVersion} is not projectcalico.org; read anyway`);
    }
    switch (kind) {
      case 'IPPool':
        importPool(spec, name, fail, out, at);
        break;
      case 'BGPPeer':
        importPeer(spec, name, fail, out, at, nodeName, nodeLabels);
        break;
      case 'BGPConfiguration':
        if (name && name !== 'default' && name !== `node.${nodeName}`) {
          out.warnings.push(`${at}: not "default" or "node.${nodeName}", ignored`);
          break;
        }
        if (spec.asNumber !== undefined) {
          const asn = asNumber(spec.asNumber);
          if (asn === undefined) fail('asNumber', `must be 1..4294967295, got ${JSON.stringify(spec.asNumber)}`);
          else out.asn = asn;
        }
        if (spec.listenPort !== undefined) {
          if (!Number.isInteger(spec.listenPort) || (spec.listenPort as number) < 1 || (spec.listenPort as number) > 65535) fail('listenPort', `must be 1..65535, got ${JSON.stringify(spec.listenPort)}`);
          else out.listenPort = spec.listenPort as number;
        }
        for (const k of Object.keys(spec)) if (!['asNumber', 'listenPort', 'logSeverityScreen'].includes(k)) out.warnings.push(`${at}: spec.${k} has no blockspeaker equivalent, ignored`);
        break;
      case 'IPAMConfiguration':
        for (const [k, v] of Object.entries(spec)) {
          if (k === 'strictAffinity' || k === 'autoAllocateBlocks') {
            if (typeof v !== 'boolean') fail(k, `must be true or false, got ${JSON.stringify(v)}`);
            else out.ipam[k] = v;
          } else if (k === 'maxBlocksPerHost') {
            if (!Number.isInteger(v) || (v as number) < 0) fail(k, `must be a whole number >= 0, got ${JSON.stringify(v)}`);
            else out.ipam.maxBlocksPerHost = v as number;
          } else out.warnings.push(`${at}: spec.${k} has no blockspeaker equivalent, ignored`);
        }
        break;
      default:
        out.warnings.push(`${at}: kind ${JSON.stringify(kind)} is not imported`);
    }
  }
  if (errors.length) throw new CalicoImportError(errors.join('\n'));
  return out;
}

function asNumber(v: unknown): number | undefined {
  // Calico accepts "65001" strings and the asdot "1.10" form.
  if (typeof v === 'string' && /^\d+\.\d+$/.test(v)) {
    const [hi, lo] = v.split('.').map(Number);
    return hi <= 65535 && lo <= 65535 && hi * 65536 + lo > 0 ? hi * 65536 + lo : undefined;
  }
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 4294967295 ? (n as number) : undefined;
}

function importPool(spec: Obj, name: string, fail: (f: string, m: string) => void, out: CalicoImport, at: string): void {
  if (!name) return fail('name', 'metadata.name is required');
  let cidr: string;
  try {
    cidr = parsePrefix(String(spec.cidr ?? '')).toString();
  } catch (e) {
    return fail('cidr', (e as Error).message);
  }
  const v4 = !cidr.includes(':');
  const blockSize = spec.blockSize === undefined ? (v4 ? 26 : 122) : spec.blockSize;
  if (!Number.isInteger(blockSize)) return fail('blockSize', `must be a whole number, got ${JSON.stringify(spec.blockSize)}`);
  const nodeSelector = spec.nodeSelector === undefined ? 'all()' : String(spec.nodeSelector);
  try {
    parseSelector(nodeSelector);
  } catch (e) {
    return fail('nodeSelector', (e as Error).message);
  }
  const uses = spec.allowedUses === undefined ? ['Workload', 'Tunnel'] : spec.allowedUses;
  if (!Array.isArray(uses) || uses.some((u) => u !== 'Workload' && u !== 'Tunnel')) {
    return fail('allowedUses', `must be a list of Workload, Tunnel; got ${JSON.stringify(spec.allowedUses)}`);
  }
  for (const f of ['natOutgoing', 'disabled', 'disableBGPExport'] as const) {
    if (spec[f] !== undefined && typeof spec[f] !== 'boolean') return fail(f, `must be true or false, got ${JSON.stringify(spec[f])}`);
  }
  for (const f of ['ipipMode', 'vxlanMode']) {
    if (spec[f] !== undefined && spec[f] !== 'Never') out.warnings.push(`${at}: spec.${f} ${String(spec[f])} ignored (blockspeaker routes natively over BGP)`);
  }
  out.pools.push({
    name,
    cidr,
    blockSize: blockSize as number,
    nodeSelector,
    disabled: (spec.disabled as boolean) ?? false,
    allowedUses: uses as ('Workload' | 'Tunnel')[],
    natOutgoing: (spec.natOutgoing as boolean) ?? false,
    disableBGPExport: (spec.disableBGPExport as boolean) ?? false,
    reservation: { kind: 'auto' },
  });
}

function importPeer(
  spec: Obj,
  name: string,
  fail: (f: string, m: string) => void,
  out: CalicoImport,
  at: string,
  nodeName: string,
  nodeLabels: Record<string, string>,
): void {
  if (typeof spec.node === 'string' && spec.node !== nodeName) return; // a peering of another node
  if (typeof spec.nodeSelector === 'string') {
    try {
      if (!parseSelector(spec.nodeSelector)(nodeLabels)) return;
    } catch (e) {
      return fail('nodeSelector', (e as Error).message);
    }
  }
  if (spec.peerSelector !== undefined) out.warnings.push(`${at}: spec.peerSelector (peering with other nodes) is not imported`);
  if (spec.peerIP === undefined) return spec.peerSelector === undefined ? fail('peerIP', 'is required') : undefined;
  // "10.0.0.1", "10.0.0.1:1179", "[fd00::1]:1179", "fd00::1"
  const text = String(spec.peerIP);
  let address = text;
  let port = 179;
  const m6 = /^\[(.+)\]:(\d+)$/.exec(text);
  const m4 = /^([\d.]+):(\d+)$/.exec(text);
  if (m6 || m4) {
    address = (m6 ?? m4)![1];
    port = Number((m6 ?? m4)![2]);
  }
  try {
    address = parseIP(address).toString();
  } catch (e) {
    return fail('peerIP', (e as Error).message);
  }
  if (port < 1 || port > 65535) return fail('peerIP', `port ${port} out of range 1..65535`);
  const asn = asNumber(spec.asNumber);
  if (asn === undefined) return fail('asNumber', `must be 1..4294967295, got ${JSON.stringify(spec.asNumber)}`);
  if (spec.password !== undefined) out.warnings.push(`${at}: spec.password (TCP MD5) is not supported, ignored`);
  let restart: PeerConfig['gracefulRestart'] = { restartTime: 120 };
  if (typeof spec.maxRestartTime === 'string') {
    const secs = durationSeconds(spec.maxRestartTime);
    if (secs === undefined || secs < 1 || secs > 4095) return fail('maxRestartTime', `must be a duration of 1s..4095s, got "${spec.maxRestartTime}"`);
    restart = { restartTime: secs };
  }
  out.peers.push({
    address,
    asn,
    port,
    families: [address.includes(':') ? 'ipv6' : 'ipv4'],
    holdTime: 90,
    passive: false,
    gracefulRestart: restart,
  });
  void name;
}

/** Go-style durations as Calico writes them: "120s", "2m", "1m30s". */
function durationSeconds(text: string): number | undefined {
  const re = /(\d+(?:\.\d+)?)(h|m|s)/g;
  let total = 0;
  let consumed = 0;
  for (const m of text.matchAll(re)) {
    total += Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
    consumed += m[0].length;
  }
  return consumed === text.length && consumed > 0 ? Math.round(total) : undefined;
}
