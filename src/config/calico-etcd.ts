// Calico v3 resources as calico-node keeps them in etcd (/calico/resources/v3/projectcalico.org/<plural>/<name>),
// read with the very importer that reads manifest files (src/config/calico.ts), so a resource in etcd and the same
// resource in a manifest mean the same thing. Pure: the daemon feeds it keys and values (src/daemon/calico-watch.ts).
//
// A resource that does not decode, or that the importer refuses, is reported once per revision with its key and
// field; its last good version stays in force (a fresh key that never decoded is simply absent). A BGPPeer naming
// a BGPFilter that does not exist (any more) is left out, with a warning, rather than applied unfiltered.
import { CALICO_V3_ROOT } from '../calico/keys.ts';
import { importCalico, type CalicoImport } from './calico.ts';

/** The kinds the daemon watches, by the plural etcd keys them under. Nodes belong to the cluster registry. */
export const WATCHED_KINDS: Readonly<Record<string, string>> = {
  bgppeers: 'BGPPeer',
  bgpconfigurations: 'BGPConfiguration',
  bgpfilters: 'BGPFilter',
  ippools: 'IPPool',
  ipamconfigurations: 'IPAMConfiguration',
};

/** Filters and settings first: a peer's validation needs them. */
const ORDER = ['bgpfilters', 'bgpconfigurations', 'ipamconfigurations', 'ippools', 'bgppeers'];

export interface ResourceKey {
  plural: string;
  kind: string;
  name: string;
}

/** The watched kind a key holds, or undefined for any other key (nodes, other plurals, deeper paths). */
export function watchedKey(key: string): ResourceKey | undefined {
  if (!key.startsWith(CALICO_V3_ROOT)) return undefined;
  const rest = key.slice(CALICO_V3_ROOT.length);
  const slash = rest.indexOf('/');
  if (slash <= 0) return undefined;
  const plural = rest.slice(0, slash);
  const name = rest.slice(slash + 1);
  const kind = WATCHED_KINDS[plural];
  if (!kind || !name || name.includes('/')) return undefined;
  return { plural, kind, name };
}

export interface NodeView {
  name: string;
  labels: Record<string, string>;
  ipv4?: string;
  ipv6?: string;
}

interface Good {
  key: string;
  rk: ResourceKey;
  /** The object as JSON text (metadata.name filled from the key when absent). */
  text: string;
  /** The raw value, for decoders that want it (the IPAM layout's IPPool decoder). */
  value: string;
  rev: number;
}

export interface ResourceState {
  key: string;
  kind: string;
  name: string;
  /** applied: the current value is in force; stale: it is refused and an older good one is in force; refused: none is. */
  state: 'applied' | 'stale' | 'refused' | 'unused';
  modRevision: number;
  error?: string;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The importer's message for one document, with the key as its source and without the document number. */
function tidy(key: string, msg: string): string {
  return msg.split('\n').map((l) => l.replace(`${key}: document 1 `, `${key} `).replace(/ \(line 1\)$/, '')).join('; ');
}

export class CalicoResourceSet {
  private readonly good = new Map<string, Good>();
  /** Key -> the refused value, its revision and why. */
  private readonly bad = new Map<string, { value: string; rev: number; error: string }>();
  /** Peers left out of the last result, and why. */
  private unused = new Map<string, string>();

  constructor(private node: NodeView) {}

  /** A reload may change the node's labels or addresses (peer selection depends on them). */
  setNode(node: NodeView): void {
    this.node = node;
  }

  /**
   * A put. Returns warnings: the refusal (naming the key and field; the last good version is kept) or the fields
   * the importer accepts without effect. Keys of other kinds are ignored.
   */
  put(key: string, value: string, rev: number): string[] {
    const rk = watchedKey(key);
    if (!rk) return [];
    const out = this.take(key, rk, value, rev);
    // A filter or setting that arrives may make a refused peer good.
    if (rk.plural === 'bgpfilters' || rk.plural === 'bgpconfigurations') out.push(...this.retryPeers());
    return out;
  }

  /** A delete: the resource goes, whatever state it was in. */
  delete(key: string): boolean {
    this.bad.delete(key);
    const had = this.good.delete(key);
    const rk = watchedKey(key);
    if (rk && (rk.plural === 'bgpfilters' || rk.plural === 'bgpconfigurations')) this.retryPeers();
    return had;
  }

  private take(key: string, rk: ResourceKey, value: string, rev: number): string[] {
    const res = this.decode(key, rk, value);
    if ('error' in res) {
      this.bad.set(key, { value, rev, error: res.error });
      const kept = this.good.get(key);
      return [`${res.error}; ${kept ? `keeping the version of revision ${kept.rev}` : 'not applied'}`];
    }
    this.bad.delete(key);
    this.good.set(key, { key, rk, text: res.text, value, rev });
    return res.warnings;
  }

  private retryPeers(): string[] {
    const out: string[] = [];
    for (const [key, b] of [...this.bad]) {
      const rk = watchedKey(key)!;
      if (rk.plural !== 'bgppeers') continue;
      if (!('error' in this.decode(key, rk, b.value))) out.push(...this.take(key, rk, b.value, b.rev));
    }
    return out;
  }

  /** Good resources' raw values of one plural (e.g. ippools for the IPAM pool cache), by key. */
  values(plural: string): { key: string; value: string; rev: number }[] {
    return [...this.good.values()].filter((g) => g.rk.plural === plural).sort((a, b) => (a.key < b.key ? -1 : 1))
      .map((g) => ({ key: g.key, value: g.value, rev: g.rev }));
  }

  /**
   * Everything in force as one import (the same shape a manifest file gives), plus warnings for peers that had to
   * be left out because what they need (a BGPFilter, the AS) is gone or changed since they were accepted.
   */
  result(): { imp: CalicoImport; warnings: string[] } {
    const warnings: string[] = [];
    const all = this.sorted();
    const context = all.filter((g) => g.rk.plural === 'bgpfilters' || g.rk.plural === 'bgpconfigurations');
    const unused = new Map<string, string>();
    const use = all.filter((g) => {
      if (g.rk.plural !== 'bgppeers') return true;
      const err = this.check(g.key, [g.text, ...context.map((c) => c.text)]).error;
      if (err) {
        unused.set(g.key, err);
        if (this.unused.get(g.key) !== err) warnings.push(`${err}; peer left out until that is fixed`);
      }
      return !err;
    });
    this.unused = unused;
    const text = use.map((g) => g.text).join('\n---\n');
    try {
      return { imp: importCalico(text, 'etcd', this.node.name, this.node.labels, this.nodeIPs()), warnings };
    } catch (e) {
      // Each part passed on its own; the set as a whole should too. Say so rather than apply half of it.
      warnings.push(`etcd Calico resources: refused as a whole: ${(e as Error).message}`);
      return { imp: { pools: [], peers: [], selectorPeers: [], ipam: {}, warnings: [] }, warnings };
    }
  }

  /** Every watched key we hold or refused, with its state (for /calico). */
  states(): ResourceState[] {
    const keys = new Set([...this.good.keys(), ...this.bad.keys()]);
    return [...keys].sort().map((key) => {
      const rk = watchedKey(key)!;
      const g = this.good.get(key);
      const b = this.bad.get(key);
      if (b) return { key, kind: rk.kind, name: rk.name, state: g ? 'stale' : 'refused', modRevision: b.rev, error: b.error };
      const u = this.unused.get(key);
      if (u) return { key, kind: rk.kind, name: rk.name, state: 'unused', modRevision: g!.rev, error: u };
      return { key, kind: rk.kind, name: rk.name, state: 'applied', modRevision: g!.rev };
    });
  }

  private nodeIPs(): { ipv4?: string; ipv6?: string } {
    return { ipv4: this.node.ipv4, ipv6: this.node.ipv6 };
  }

  private sorted(): Good[] {
    return [...this.good.values()].sort((a, b) => ORDER.indexOf(a.rk.plural) - ORDER.indexOf(b.rk.plural) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** The JSON text the importer reads (and its warnings), or the reason the value is refused. */
  private decode(key: string, rk: ResourceKey, value: string): { text: string; warnings: string[] } | { error: string } {
    let obj: unknown;
    try {
      obj = JSON.parse(value);
    } catch (e) {
      return { error: `${key}: not JSON: ${(e as Error).message}` };
    }
    if (!isObj(obj)) return { error: `${key}: not a ${rk.kind} object` };
    if (obj.kind !== undefined && obj.kind !== rk.kind) return { error: `${key}: kind: ${JSON.stringify(obj.kind)} under ${rk.plural}/ (expected ${rk.kind})` };
    const meta = isObj(obj.metadata) ? obj.metadata : {};
    if (meta.name !== undefined && meta.name !== rk.name) return { error: `${key}: metadata.name: ${JSON.stringify(meta.name)} differs from the key's name ${JSON.stringify(rk.name)}` };
    const text = JSON.stringify({ ...obj, kind: rk.kind, metadata: { ...meta, name: rk.name } });
    // A peer is checked with the filters and settings it needs: a filter that arrives later makes it good then.
    const context = rk.plural === 'bgppeers'
      ? [...this.good.values()].filter((g) => g.rk.plural === 'bgpfilters' || g.rk.plural === 'bgpconfigurations').map((g) => g.text)
      : [];
    const r = this.check(key, [text, ...context]);
    return r.error !== undefined ? { error: r.error } : { text, warnings: r.warnings };
  }

  /** The importer's verdict on the first document (the others are context, already good). */
  private check(key: string, docs: string[]): { error?: string; warnings: string[] } {
    try {
      const imp = importCalico(docs.join('\n---\n'), key, this.node.name, this.node.labels, this.nodeIPs());
      return { warnings: imp.warnings.filter((w) => w.startsWith(`${key}: document 1 `)).map((w) => tidy(key, w)) };
    } catch (e) {
      return { error: tidy(key, (e as Error).message), warnings: [] };
    }
  }
}
