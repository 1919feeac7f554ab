// Calico v3 manifests (projectcalico.org/v3) as blockspeaker pools, peers, node identity and settings, so an
// existing Calico user can bring the IPPool / BGPPeer / BGPConfiguration / BGPFilter / IPAMConfiguration / Node
// objects they already have. Nothing is lost silently: every spec field is honoured, warned (with the reason) or
// refused, per src/calico/fields.ts; an unknown kind or field (a typo such as natOutgoin) is refused. Any
// error refuses the whole file: each one names the file, document, object, field and line.
import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import { parseAsNumber } from '../calico/node.ts';
import { maxLen, parseIP, parsePrefix, formatPrefix } from '../net/ip.ts';
import { parseSelector } from '../calico/selector.ts';
import { suggest } from './check.ts';
import { CALICO_FIELDS } from '../calico/fields.ts';
import { calicoPeerSecurity } from './calico-peer-security.ts';
import type { SecretSource } from '../store/etcd-auth.ts';
import { resolveCommunities } from './communities.ts';
import { MAX_ALLOW_AS_IN } from './peer-as.ts';
import { checkRuleExtras, needsPolicy, policyRules } from './calico-filter.ts';
import type { NodeBgpConfig, PeerConfig, PoolConfig, PrefixRule, SelectorPeerConfig } from './types.ts';

/** A BGPPeer with a peerSelector: peers with the registered nodes it matches (resolved by the cluster). */
export type SelectorPeer = SelectorPeerConfig;

export interface CalicoImport {
  pools: PoolConfig[];
  peers: PeerConfig[];
  selectorPeers: SelectorPeer[];
  /** From the default BGPConfiguration (a node.<name> one overrides). */
  asn?: number;
  listenPort?: number;
  nodeToNodeMeshEnabled?: boolean;
  /** BGPConfiguration nodeMeshPassword.secretKeyRef as the mounted Secret file (src/config/calico-peer-security.ts). */
  nodeMeshPassword?: SecretSource;
  ipam: { strictAffinity?: boolean; maxBlocksPerHost?: number; autoAllocateBlocks?: boolean; ipCooldownSeconds?: number };
  /** BGPConfiguration serviceClusterIPs / serviceExternalIPs / serviceLoadBalancerIPs (canonical CIDRs). */
  serviceIPs?: { clusterIPs: string[]; externalIPs: string[]; loadBalancerIPs: string[] };
  /** BGPConfiguration prefixAdvertisements with community names resolved through its communities. */
  prefixAdvertisements?: { cidr: string; communities: string[] }[];
  /** From a Node manifest with this node's name. */
  node?: { labels: Record<string, string>; bgp: NodeBgpConfig };
  warnings: string[];
}

export class CalicoImportError extends Error {
  override name = 'ConfigError';
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const KINDS = ['IPPool', 'BGPPeer', 'BGPConfiguration', 'BGPFilter', 'IPAMConfiguration', 'Node'];
const TOP = ['apiVersion', 'kind', 'metadata', 'spec', 'status'];

interface Ctx {
  at: string;
  fail(field: string, msg: string): void;
  warn(field: string, msg: string): void;
}

/**
 * Read one or more Calico v3 documents (a YAML stream, or a List / `items` array). Only objects that apply to
 * `nodeName` are kept: a BGPPeer with `spec.node` for another node is skipped; `nodeSelector` on a BGPPeer is
 * evaluated against `nodeLabels`. `nodeIPs` (node.bgp's addresses) are the source of sourceAddress: UseNodeIP.
 */
export function importCalico(text: string, source: string, nodeName: string, nodeLabels: Record<string, string> = {},
  nodeIPs: { ipv4?: string; ipv6?: string } = {}): CalicoImport {
  const out: CalicoImport = { pools: [], peers: [], selectorPeers: [], ipam: {}, warnings: [] };
  const errors: string[] = [];
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines });
  const objects: { obj: Obj; where: string; line: (path: (string | number)[]) => string }[] = [];
  (Array.isArray(docs) ? docs : [docs]).forEach((doc: Document.Parsed, i) => {
    if (doc.errors.length) {
      const e = doc.errors[0];
      errors.push(`${source}: document ${i + 1}: ${e.message.split('\n')[0]}`);
      return;
    }
    const v = doc.toJS() as unknown;
    if (v === null || v === undefined) return;
    if (!isObj(v)) {
      errors.push(`${source}: document ${i + 1}: not a Kubernetes object`);
      return;
    }
    const list = Array.isArray(v.items);
    const items = list ? (v.items as unknown[]) : [v];
    const lineOf = (base: (string | number)[]) => (path: (string | number)[]): string => {
      // The deepest node on the path that exists: the field, or the object holding it.
      for (let n = base.length + path.length; n >= 0; n--) {
        const node = doc.getIn([...base, ...path].slice(0, n), true) as { range?: [number, number] } | undefined;
        if (node && typeof node === 'object' && node.range) return ` (line ${lines.linePos(node.range[0]).line})`;
      }
      return '';
    };
    items.forEach((item, j) => {
      const where = `${source}: document ${i + 1}${list ? ` item ${j + 1}` : ''}`;
      if (!isObj(item)) errors.push(`${where}: not a Kubernetes object`);
      else objects.push({ obj: item, where, line: lineOf(list ? ['items', j] : []) });
    });
  });

  const filters = new Map<string, Obj>();
  const peersWithFilters: { peer: PeerConfig | SelectorPeer; names: string[]; ctx: Ctx }[] = [];
  let nodeConfigSeen = false;
  for (const { obj, where, line } of objects) {
    const kind = typeof obj.kind === 'string' ? obj.kind : '';
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    const name = typeof meta.name === 'string' ? meta.name : '';
    const spec = isObj(obj.spec) ? obj.spec : {};
    const at = `${where} (${kind || 'no kind'} ${name || 'unnamed'})`;
    const ctx: Ctx = {
      at,
      fail: (field, msg) => errors.push(`${at}: spec.${field}: ${msg}${line(['spec', ...field.split(/[.[\]]+/).filter(Boolean).map((s) => (/^\d+$/.test(s) ? Number(s) : s))])}`),
      warn: (field, msg) => out.warnings.push(`${at}: spec.${field}: ${msg}`),
    };
    if (!KINDS.includes(kind)) {
      errors.push(`${at}: kind ${JSON.stringify(kind)} is not one blockspeaker reads (${KINDS.join(', ')})${line(['kind'])}`);
      continue;
    }
    for (const k of Object.keys(obj)) {
      if (!TOP.includes(k)) errors.push(`${at}: ${k}: unknown field${hintFor(k, TOP)}${line([k])}`);
    }
    if (typeof obj.apiVersion === 'string' && !obj.apiVersion.startsWith('projectcalico.org/') && !obj.apiVersion.startsWith('crd.projectcalico.org/')) {
      out.warnings.push(`${at}: apiVersion ${obj.apiVersion} is not projectcalico.org; read anyway`);
    }
    if (!checkFields(kind, spec, '', ctx)) continue;
    switch (kind) {
      case 'IPPool':
        importPool(spec, name, ctx, out);
        break;
      case 'BGPPeer':
        importPeer(spec, name, ctx, out, nodeName, nodeLabels, nodeIPs, peersWithFilters);
        break;
      case 'BGPFilter':
        if (!name) errors.push(`${at}: metadata.name is required (peers name filters)`);
        else if (checkFilter(spec, ctx)) filters.set(name, spec);
        break;
      case 'BGPConfiguration': {
        if (name && name !== 'default' && name !== `node.${nodeName}`) {
          if (!name.startsWith('node.')) out.warnings.push(`${at}: not "default" or "node.${nodeName}", ignored`);
          break;
        }
        // A node.<name> configuration overrides the default one whatever the order.
        const specific = name === `node.${nodeName}`;
        if (!specific && nodeConfigSeen) break;
        if (specific) nodeConfigSeen = true;
        if (spec.asNumber !== undefined) {
          const asn = parseAsNumber(spec.asNumber);
          if (asn === undefined) ctx.fail('asNumber', `must be 1..4294967295, got ${JSON.stringify(spec.asNumber)}`);
          else out.asn = asn;
        }
        if (spec.listenPort !== undefined) {
          if (!Number.isInteger(spec.listenPort) || (spec.listenPort as number) < 1 || (spec.listenPort as number) > 65535) ctx.fail('listenPort', `must be 1..65535, got ${JSON.stringify(spec.listenPort)}`);
          else out.listenPort = spec.listenPort as number;
        }
        for (const [field, key] of [['serviceClusterIPs', 'clusterIPs'], ['serviceExternalIPs', 'externalIPs'], ['serviceLoadBalancerIPs', 'loadBalancerIPs']] as const) {
          const v = spec[field];
          if (v === undefined || v === null) continue;
          if (!Array.isArray(v)) {
            ctx.fail(field, `must be a list of { cidr }, got ${JSON.stringify(v)}`);
            continue;
          }
          out.serviceIPs ??= { clusterIPs: [], externalIPs: [], loadBalancerIPs: [] };
          v.forEach((b, i) => {
            try {
              if (!isObj(b) || Object.keys(b).some((k) => k !== 'cidr')) throw new Error(`must be { cidr }, got ${JSON.stringify(b)}`);
              out.serviceIPs![key].push(formatPrefix(parsePrefix(String(b.cidr))));
            } catch (e) {
              ctx.fail(`${field}[${i}]`, (e as Error).message);
            }
          });
        }
        if (spec.communities !== undefined || spec.prefixAdvertisements !== undefined) {
          const r = resolveCommunities(spec.communities, spec.prefixAdvertisements);
          for (const i of r.issues) ctx.fail(i.path.map((x, n) => (typeof x === 'number' ? `[${x}]` : n ? `.${x}` : x)).join(''), i.message);
          out.prefixAdvertisements = r.ads;
        }
        if (spec.nodeToNodeMeshEnabled !== undefined) {
          if (typeof spec.nodeToNodeMeshEnabled !== 'boolean') ctx.fail('nodeToNodeMeshEnabled', `must be true or false, got ${JSON.stringify(spec.nodeToNodeMeshEnabled)}`);
          else out.nodeToNodeMeshEnabled = spec.nodeToNodeMeshEnabled;
        }
        if (spec.nodeMeshPassword !== undefined && spec.nodeMeshPassword !== null) {
          // the same shape and Secret mapping as BGPPeer.password
          const sec = calicoPeerSecurity({ password: spec.nodeMeshPassword });
          if ('field' in sec) ctx.fail(sec.field.replace(/^password/, 'nodeMeshPassword'), sec.message);
          else out.nodeMeshPassword = sec.password;
        }
        break;
      }
      case 'IPAMConfiguration':
        for (const [k, v] of Object.entries(spec)) {
          if (k === 'strictAffinity' || k === 'autoAllocateBlocks') {
            if (typeof v !== 'boolean') ctx.fail(k, `must be true or false, got ${JSON.stringify(v)}`);
            else out.ipam[k] = v;
          } else if (k === 'maxBlocksPerHost' || k === 'ipCooldownSeconds') {
            if (!Number.isInteger(v) || (v as number) < 0) ctx.fail(k, `must be a whole number >= 0, got ${JSON.stringify(v)}`);
            else out.ipam[k] = v as number;
          }
        }
        break;
      case 'Node':
        importNode(spec, meta, name, ctx, out, nodeName);
        break;
    }
  }
  // Filters are resolved once every document is read (a peer may come before the filter it names).
  for (const { peer, names, ctx } of peersWithFilters) {
    const imp: PrefixRule[] = [];
    const exp: PrefixRule[] = [];
    const lists = ['importV4', 'importV6', 'exportV4', 'exportV6'] as const;
    const found = names.map((n) => filters.get(n)).filter((f): f is Obj => f !== undefined);
    if (found.some((f) => lists.some((l) => Array.isArray(f[l]) && (f[l] as Obj[]).some(needsPolicy)))) {
      // Rules a prefix list cannot express: every filter of this peer becomes its route policy, in order.
      peer.policy = {
        import: found.flatMap((f) => [...policyRules(f.importV4, 4), ...policyRules(f.importV6, 6)]),
        export: found.flatMap((f) => [...policyRules(f.exportV4, 4), ...policyRules(f.exportV6, 6)]),
      };
    }
    for (const [i, n] of names.entries()) {
      const f = filters.get(n);
      if (!f) {
        ctx.fail(`filters[${i}]`, `no BGPFilter named ${JSON.stringify(n)} in this file`);
        continue;
      }
      if (peer.policy) continue;
      imp.push(...filterRules(f.importV4, 4), ...filterRules(f.importV6, 6));
      exp.push(...filterRules(f.exportV4, 4), ...filterRules(f.exportV6, 6));
    }
    // Calico: a route no rule matches gets the default treatment (accepted); our lists reject on no match.
    const rest: PrefixRule[] = [{ prefix: '0.0.0.0/0', le: 32, action: 'accept' }, { prefix: '::/0', le: 128, action: 'accept' }];
    if (imp.length) peer.import = [...imp, ...rest];
    if (exp.length) peer.export = [...exp, ...rest];
  }
  if (errors.length) throw new CalicoImportError(errors.join('\n'));
  return out;
}

function hintFor(k: string, known: readonly string[]): string {
  const s = suggest(k, known);
  return s ? ` (did you mean ${s}?)` : ` (known: ${known.join(', ')})`;
}

/** Unknown fields refused, warned ones reported; false when an unknown field was found. */
function checkFields(table: string, spec: Obj, prefix: string, ctx: Ctx): boolean {
  const rules = CALICO_FIELDS[table];
  let ok = true;
  for (const [k, v] of Object.entries(spec)) {
    const r = rules[k];
    if (!r) {
      ctx.fail(`${prefix}${k}`, `unknown field${hintFor(k, Object.keys(rules))}`);
      ok = false;
    } else if (r.treatment === 'refused') {
      ctx.fail(`${prefix}${k}`, r.note);
      ok = false;
    } else if (r.treatment === 'warned' && v !== null && !(r.quietWhen ?? []).some((q) => JSON.stringify(q) === JSON.stringify(v))) {
      ctx.warn(`${prefix}${k}`, `${JSON.stringify(v)} ignored: ${r.note}`);
    }
  }
  return ok;
}

function checkFilter(spec: Obj, ctx: Ctx): boolean {
  let ok = true;
  for (const list of ['exportV4', 'importV4', 'exportV6', 'importV6'] as const) {
    const v = spec[list];
    if (v === undefined) continue;
    if (!Array.isArray(v)) {
      ctx.fail(list, `must be a list of rules, got ${JSON.stringify(v)}`);
      ok = false;
      continue;
    }
    const family = list.endsWith('V4') ? 4 : 6;
    v.forEach((rule, i) => {
      const f = `${list}[${i}]`;
      if (!isObj(rule)) {
        ctx.fail(f, 'must be a rule { cidr, matchOperator, action, ... }');
        ok = false;
        return;
      }
      if (!checkFields('BGPFilterRule', rule, `${f}.`, ctx)) ok = false;
      if (rule.action !== 'Accept' && rule.action !== 'Reject') {
        ctx.fail(`${f}.action`, `must be Accept or Reject, got ${JSON.stringify(rule.action)}`);
        ok = false;
      }
      if (rule.cidr !== undefined) {
        try {
          const p = parsePrefix(String(rule.cidr));
          if (p.family !== family) throw new Error(`not IPv${family}`);
        } catch (e) {
          ctx.fail(`${f}.cidr`, `an IPv${family} prefix, got ${JSON.stringify(rule.cidr)} (${(e as Error).message})`);
          ok = false;
        }
      }
      const op = rule.matchOperator ?? (rule.cidr === undefined ? undefined : 'In');
      if (rule.cidr !== undefined && !['Equal', 'In', 'NotEqual', 'NotIn'].includes(op as string)) {
        ctx.fail(`${f}.matchOperator`, `must be Equal, In, NotEqual or NotIn, got ${JSON.stringify(op)}`);
        ok = false;
      }
      if (!checkRuleExtras(rule, (field, msg) => ctx.fail(`${f}.${field}`, msg))) ok = false;
      const pl = rule.prefixLength;
      if (pl !== undefined) {
        const max = family === 4 ? 32 : 128;
        const bad = !isObj(pl) || Object.keys(pl).some((k) => k !== 'min' && k !== 'max') ||
          [pl.min, pl.max].some((x) => x !== undefined && (!Number.isInteger(x) || (x as number) < 0 || (x as number) > max));
        if (bad) {
          ctx.fail(`${f}.prefixLength`, `must be { min, max } within 0..${max}, got ${JSON.stringify(pl)}`);
          ok = false;
        }
      }
    });
  }
  return ok;
}

/** One BGPFilter rule list as prefix rules (checked by checkFilter). */
function filterRules(v: unknown, family: 4 | 6): PrefixRule[] {
  if (!Array.isArray(v)) return [];
  return (v as Obj[]).map((r) => {
    const p = r.cidr === undefined ? undefined : parsePrefix(String(r.cidr));
    const pl = (r.prefixLength ?? {}) as { min?: number; max?: number };
    const action = r.action === 'Accept' ? 'accept' as const : 'reject' as const;
    if (!p) {
      // No cidr: every prefix of the list's family.
      return { prefix: family === 6 ? '::/0' : '0.0.0.0/0', le: family === 6 ? 128 : 32, action };
    }
    const prefix = formatPrefix(p);
    if ((r.matchOperator ?? 'In') === 'Equal') return { prefix, action };
    const ge = Math.max(p.len, pl.min ?? p.len);
    const le = Math.max(ge, pl.max ?? maxLen(p.family));
    return ge === p.len && le === maxLen(p.family) ? { prefix, le, action } : { prefix, ge, le, action };
  });
}

function importPool(spec: Obj, name: string, ctx: Ctx, out: CalicoImport): void {
  if (!name) return ctx.fail('name', 'metadata.name is required');
  let cidr: string;
  try {
    cidr = parsePrefix(String(spec.cidr ?? '')).toString();
  } catch (e) {
    return ctx.fail('cidr', (e as Error).message);
  }
  const v4 = !cidr.includes(':');
  const blockSize = spec.blockSize === undefined ? (v4 ? 26 : 122) : spec.blockSize;
  if (!Number.isInteger(blockSize)) return ctx.fail('blockSize', `must be a whole number, got ${JSON.stringify(spec.blockSize)}`);
  let nodeSelector = spec.nodeSelector === undefined ? 'all()' : String(spec.nodeSelector);
  try {
    parseSelector(nodeSelector);
  } catch (e) {
    return ctx.fail('nodeSelector', (e as Error).message);
  }
  if (spec.assignmentMode !== undefined && spec.assignmentMode !== 'Automatic' && spec.assignmentMode !== 'Manual') {
    return ctx.fail('assignmentMode', `must be Automatic or Manual, got ${JSON.stringify(spec.assignmentMode)}`);
  }
  // Manual: never chosen automatically; requested pools bypass node selectors, so only requests by name use it.
  if (spec.assignmentMode === 'Manual') nodeSelector = '!all()';
  const uses = spec.allowedUses === undefined ? ['Workload', 'Tunnel'] : spec.allowedUses;
  if (!Array.isArray(uses) || uses.some((u) => u !== 'Workload' && u !== 'Tunnel')) {
    return ctx.fail('allowedUses', `must be a list of Workload, Tunnel; got ${JSON.stringify(spec.allowedUses)}`);
  }
  for (const f of ['natOutgoing', 'disabled', 'disableBGPExport'] as const) {
    if (spec[f] !== undefined && typeof spec[f] !== 'boolean') return ctx.fail(f, `must be true or false, got ${JSON.stringify(spec[f])}`);
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
  ctx: Ctx,
  out: CalicoImport,
  nodeName: string,
  nodeLabels: Record<string, string>,
  nodeIPs: { ipv4?: string; ipv6?: string },
  withFilters: { peer: PeerConfig | SelectorPeer; names: string[]; ctx: Ctx }[],
): void {
  // Selectors are checked even when the peering is another node's, so a bad one is never accepted silently.
  for (const f of ['nodeSelector', 'peerSelector'] as const) {
    if (spec[f] === undefined) continue;
    try {
      parseSelector(String(spec[f]));
    } catch (e) {
      return ctx.fail(f, (e as Error).message);
    }
  }
  // A selector peering is kept whichever node it is for: the cluster also peers in reverse (a route reflector
  // matched by peerSelector peers with the nodes nodeSelector matches).
  const forUs = (typeof spec.node !== 'string' || spec.node === nodeName) &&
    (typeof spec.nodeSelector !== 'string' || parseSelector(spec.nodeSelector)(nodeLabels));
  if (!forUs && spec.peerSelector === undefined) return;
  // Session settings shared by address peers and selector peers.
  let holdTime = 90;
  if (spec.keepaliveTime !== undefined) {
    const k = typeof spec.keepaliveTime === 'string' ? durationSeconds(spec.keepaliveTime) : undefined;
    if (k === undefined || k < 1 || k > 21845) return ctx.fail('keepaliveTime', `must be a duration of 1s..21845s, got ${JSON.stringify(spec.keepaliveTime)}`);
    holdTime = 3 * k;
  }
  let restart: PeerConfig['gracefulRestart'] = { restartTime: 120 };
  if (spec.maxRestartTime !== undefined) {
    const secs = typeof spec.maxRestartTime === 'string' ? durationSeconds(spec.maxRestartTime) : undefined;
    if (secs === undefined || secs < 1 || secs > 4095) return ctx.fail('maxRestartTime', `must be a duration of 1s..4095s, got ${JSON.stringify(spec.maxRestartTime)}`);
    restart = { restartTime: secs };
  }
  const mode = spec.nextHopMode ?? (spec.keepOriginalNextHop === true ? 'Keep' : 'Auto');
  if (mode !== 'Auto' && mode !== 'Self' && mode !== 'Keep') return ctx.fail('nextHopMode', `must be Auto, Self or Keep, got ${JSON.stringify(mode)}`);
  if (spec.keepOriginalNextHop !== undefined && typeof spec.keepOriginalNextHop !== 'boolean') return ctx.fail('keepOriginalNextHop', `must be true or false, got ${JSON.stringify(spec.keepOriginalNextHop)}`);
  if (spec.sourceAddress !== undefined && spec.sourceAddress !== 'UseNodeIP' && spec.sourceAddress !== 'None') {
    return ctx.fail('sourceAddress', `must be UseNodeIP or None, got ${JSON.stringify(spec.sourceAddress)}`);
  }
  let filterNames: string[] = [];
  if (spec.filters !== undefined) {
    if (!Array.isArray(spec.filters) || spec.filters.some((f) => typeof f !== 'string')) return ctx.fail('filters', `must be a list of BGPFilter names, got ${JSON.stringify(spec.filters)}`);
    filterNames = spec.filters as string[];
  }
  let localAs: number | undefined;
  if (spec.localASNumber !== undefined) {
    localAs = parseAsNumber(spec.localASNumber);
    if (localAs === undefined) return ctx.fail('localASNumber', `must be 1..4294967295, got ${JSON.stringify(spec.localASNumber)}`);
  }
  const security = calicoPeerSecurity(spec);
  if ('field' in security) return ctx.fail(security.field, security.message);
  let allowAsIn = 0;
  if (spec.numAllowedLocalASNumbers !== undefined && spec.numAllowedLocalASNumbers !== null) {
    const n = spec.numAllowedLocalASNumbers;
    if (!Number.isInteger(n) || (n as number) < 0 || (n as number) > MAX_ALLOW_AS_IN) return ctx.fail('numAllowedLocalASNumbers', `must be 0..${MAX_ALLOW_AS_IN}, got ${JSON.stringify(n)}`);
    allowAsIn = n as number;
  }
  const asOpts = (x: { allowAsIn?: number; localAsn?: number }) => {
    if (allowAsIn > 0) x.allowAsIn = allowAsIn;
    if (localAs !== undefined) x.localAsn = localAs;
  };
  if (spec.peerSelector !== undefined) {
    if (spec.peerIP !== undefined) return ctx.fail('peerSelector', 'give peerIP or peerSelector, not both');
    const sp: SelectorPeer = { name, peerSelector: String(spec.peerSelector), port: 179, holdTime, gracefulRestart: restart };
    if (typeof spec.node === 'string') sp.node = spec.node;
    if (typeof spec.nodeSelector === 'string') sp.nodeSelector = spec.nodeSelector;
    if (spec.asNumber !== undefined) {
      const a = parseAsNumber(spec.asNumber);
      if (a === undefined) return ctx.fail('asNumber', `must be 1..4294967295, got ${JSON.stringify(spec.asNumber)}`);
      sp.asn = a;
    }
    if (mode === 'Self') sp.nextHopSelf = true;
    Object.assign(sp, security);
    asOpts(sp);
    out.selectorPeers.push(sp);
    if (filterNames.length) withFilters.push({ peer: sp, names: filterNames, ctx });
    return;
  }
  if (spec.peerIP === undefined) return ctx.fail('peerIP', 'is required (or peerSelector)');
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
    return ctx.fail('peerIP', (e as Error).message);
  }
  if (port < 1 || port > 65535) return ctx.fail('peerIP', `port ${port} out of range 1..65535`);
  const asn = parseAsNumber(spec.asNumber);
  if (asn === undefined) return ctx.fail('asNumber', `must be 1..4294967295, got ${JSON.stringify(spec.asNumber)}`);
  const peer: PeerConfig = {
    address,
    asn,
    port,
    families: [address.includes(':') ? 'ipv6' : 'ipv4'],
    holdTime,
    passive: false,
    gracefulRestart: restart,
  };
  if (mode === 'Self') peer.nextHopSelf = true;
  Object.assign(peer, security);
  asOpts(peer);
  if (spec.sourceAddress !== 'None') {
    const mine = address.includes(':') ? nodeIPs.ipv6 : nodeIPs.ipv4;
    if (mine) peer.localAddress = mine.split('/')[0];
  }
  out.peers.push(peer);
  if (filterNames.length) withFilters.push({ peer, names: filterNames, ctx });
}

function importNode(spec: Obj, meta: Obj, name: string, ctx: Ctx, out: CalicoImport, nodeName: string): void {
  const bgp = spec.bgp;
  if (bgp !== undefined && !isObj(bgp)) return ctx.fail('bgp', `must be a mapping, got ${JSON.stringify(bgp)}`);
  if (bgp && !checkFields('NodeBGP', bgp, 'bgp.', ctx)) return;
  if (name !== nodeName) return; // another node's: it registers itself
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(isObj(meta.labels) ? meta.labels : {})) {
    if (typeof v !== 'string') return ctx.fail(`metadata.labels.${k}`, `must be a string, got ${JSON.stringify(v)}`);
    labels[k] = v;
  }
  const nb: NodeBgpConfig = {};
  if (bgp) {
    for (const f of ['ipv4Address', 'ipv6Address', 'routeReflectorClusterID'] as const) {
      if (bgp[f] !== undefined) nb[f] = String(bgp[f]);
    }
    if (bgp.asNumber !== undefined) {
      const a = parseAsNumber(bgp.asNumber);
      if (a === undefined) return ctx.fail('bgp.asNumber', `must be 1..4294967295, got ${JSON.stringify(bgp.asNumber)}`);
      nb.asNumber = a;
    }
  }
  out.node = { labels, bgp: nb };
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
