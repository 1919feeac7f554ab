// The node registry: our node's registration (a plain write, as calico-node's: no lease, no TTL, so a node that
// restarts slowly is never dropped from everyone's mesh), explicit removal, and a watch of every node.
import type { Store, Watcher } from '../store/types.ts';
import { ClusterError, checkNode, nodeIP, ourNodeLayout, type ClusterNode, type NodeLayout } from './node.ts';

export interface RegistryOptions {
  layout?: NodeLayout;
  /** A node that does not decode is skipped and reported here (one bad node must not stop the mesh). */
  onBadNode?: (key: string, err: Error) => void;
}

/** Another node already holds one of `n`'s BGP addresses: the error names both nodes and the address. */
export function addressClash(n: ClusterNode, others: Iterable<ClusterNode>): string | undefined {
  for (const o of others) {
    if (o.name === n.name) continue;
    for (const f of ['ipv4Address', 'ipv6Address'] as const) {
      const a = nodeIP(n[f]);
      if (a !== undefined && a === nodeIP(o[f])) {
        return `node ${n.name}: bgp.${f} ${a} is already node ${o.name}'s`;
      }
    }
  }
  return undefined;
}

export class NodeRegistry {
  readonly layout: NodeLayout;
  private nodes = new Map<string, ClusterNode>();
  private watcher: Watcher | null = null;
  private readonly listeners = new Set<(nodes: ReadonlyMap<string, ClusterNode>) => void>();

  constructor(private readonly store: Store, private readonly opts: RegistryOptions = {}) {
    this.layout = opts.layout ?? ourNodeLayout;
  }

  /** Every node in the store now (bad ones reported and skipped). */
  async list(): Promise<Map<string, ClusterNode>> {
    const out = new Map<string, ClusterNode>();
    for (const kv of await this.store.list(this.layout.prefix)) {
      const n = this.decode(kv.key, kv.value);
      if (n) out.set(n.name, n);
    }
    return out;
  }

  /**
   * Write our node. Refused (ClusterError, nothing written) when another node holds one of its addresses. The
   * check and the write are one transaction guarded by the other nodes' revisions, so two nodes registering the
   * same address at once cannot both win.
   */
  async register(node: ClusterNode): Promise<ClusterNode> {
    const n = checkNode(node, `node ${node.name}`);
    for (let attempt = 0; attempt < 10; attempt++) {
      const kvs = await this.store.list(this.layout.prefix);
      const others: ClusterNode[] = [];
      for (const kv of kvs) {
        const o = this.decode(kv.key, kv.value);
        if (o) others.push(o);
      }
      const clash = addressClash(n, others);
      if (clash) throw new ClusterError(clash);
      const key = this.layout.key(n.name);
      const mine = kvs.find((kv) => kv.key === key);
      // Guard every node key we looked at, plus ours (absent or as we read it).
      const compares = kvs.map((kv) => ({ key: kv.key, modRevision: kv.modRevision }));
      if (!mine) compares.push({ key, modRevision: 0 });
      const r = await this.store.txn(compares, [{ type: 'put', key, value: this.layout.encode(n, mine?.value) }]);
      if (r.succeeded) return n;
    }
    throw new ClusterError(`node ${n.name}: registration kept racing with other nodes' writes; try again`);
  }

  /** Remove a node (`blockspeaker node delete NAME`). True if it was there. */
  async remove(name: string): Promise<boolean> {
    return this.store.delete(this.layout.key(name));
  }

  /** Watch the set of nodes: `fn` gets the full set now and after every change. */
  async watch(fn: (nodes: ReadonlyMap<string, ClusterNode>) => void): Promise<void> {
    this.listeners.add(fn);
    if (this.watcher) {
      fn(this.nodes);
      return;
    }
    const rev = await this.store.revision();
    this.nodes = await this.list();
    this.watcher = this.store.watch(this.layout.prefix, rev, (events) => {
      let changed = false;
      for (const ev of events) {
        if (ev.type === 'delete') {
          for (const [name] of this.nodes) {
            if (this.layout.key(name) === ev.key) changed = this.nodes.delete(name) || changed;
          }
          continue;
        }
        const n = this.decode(ev.key, ev.value ?? '');
        if (!n) continue;
        if (JSON.stringify(this.nodes.get(n.name)) !== JSON.stringify(n)) {
          this.nodes.set(n.name, n);
          changed = true;
        }
      }
      if (changed) for (const l of this.listeners) l(this.nodes);
    }, (err) => this.opts.onBadNode?.(this.layout.prefix, err));
    fn(this.nodes);
  }

  get current(): ReadonlyMap<string, ClusterNode> {
    return this.nodes;
  }

  close(): void {
    this.watcher?.close();
    this.watcher = null;
    this.listeners.clear();
  }

  private decode(key: string, value: string): ClusterNode | null {
    try {
      return this.layout.decode(key, value);
    } catch (e) {
      this.opts.onBadNode?.(key, e as Error);
      return null;
    }
  }
}
