// IPAM's reads and writes through a layout (layout.ts: where the records live and how they are written), and a
// "pass", the working set of one allocation batch.
import type { KeyValue, Op, Store } from '../store/types.ts';
import { blockspeakerLayout, type Layout, type LayoutKeys } from './layout.ts';
import type { AffinityRecord, BlockRecord, HandleRecord, Host, IpamConfig, Pool } from './types.ts';

export { keys } from './layout.ts';

export interface Versioned<T> {
  value: T;
  /** The key's modRevision when read; 0 = did not exist. */
  rev: number;
}

/** Typed reads over the Store. A record the layout cannot decode is skipped with a warning naming its key. */
export class IpamStore {
  readonly keys: LayoutKeys;
  /** The pools last read: a layout that does not store a block's pool finds it among them. */
  private poolCache: Pool[] | undefined;
  /** Key -> modRevision already warned about, so one corrupt record is reported once per change. */
  private readonly warned = new Map<string, number>();

  constructor(
    readonly store: Store,
    readonly layout: Layout = blockspeakerLayout,
    private readonly warn: (msg: string) => void = (m) => process.emitWarning(m, 'IpamWarning'),
  ) {
    this.keys = layout.keys;
  }

  /** Decode one record; undefined (and a warning, once per revision) when the layout refuses it. */
  private decode<T>(kv: KeyValue, what: string, fn: (kv: KeyValue) => T): T | undefined {
    try {
      return fn(kv);
    } catch (e) {
      if (this.warned.get(kv.key) !== kv.modRevision) {
        this.warned.set(kv.key, kv.modRevision);
        this.warn(`skipping ${what} ${kv.key}: ${(e as Error).message} (left as it is; see ipam check)`);
      }
      return undefined;
    }
  }

  private decodeAll<T>(kvs: KeyValue[], what: string, fn: (kv: KeyValue) => T): Versioned<T>[] {
    const out: Versioned<T>[] = [];
    for (const kv of kvs) {
      const value = this.decode(kv, what, fn);
      if (value !== undefined) out.push({ value, rev: kv.modRevision });
    }
    return out;
  }

  async config(): Promise<Versioned<IpamConfig>> {
    const kv = await this.store.get(this.keys.config);
    return { value: this.layout.decodeConfig(kv), rev: kv?.modRevision ?? 0 };
  }

  /**
   * Pools a watch keeps current (the daemon on Calico's layout, src/daemon/calico-watch.ts): pools() answers from
   * them without reading the store on every allocation. undefined: read the store as usual.
   */
  setWatchedPools(pools: Pool[] | undefined): void {
    this.watchedPools = pools ? [...pools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) : undefined;
    if (this.watchedPools) this.poolCache = this.watchedPools;
  }

  private watchedPools: Pool[] | undefined;

  async pools(): Promise<Pool[]> {
    if (this.watchedPools) return this.watchedPools;
    const kvs = await this.store.list(this.keys.pools);
    const pools = this.decodeAll(kvs, 'pool', (kv) => this.layout.decodePool(kv))
      .map((v) => v.value)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.poolCache = pools;
    return pools;
  }

  private async knownPools(): Promise<Pool[]> {
    return this.poolCache ?? (await this.pools());
  }

  async poolSetRevision(): Promise<number> {
    return (await this.store.get(this.keys.poolSet))?.modRevision ?? 0;
  }

  async host(name: string): Promise<Host | undefined> {
    let kv = await this.store.get(this.keys.host(name));
    if (!kv && this.layout.nodes) kv = await this.store.get(this.layout.nodes.key(name));
    return kv ? this.decode(kv, 'host', (x) => this.layout.decodeHost(x)) : undefined;
  }

  async hosts(): Promise<Host[]> {
    const own = this.decodeAll(await this.store.list(this.keys.hosts), 'host', (kv) => this.layout.decodeHost(kv)).map((v) => v.value);
    if (!this.layout.nodes) return own;
    const names = new Set(own.map((h) => h.name));
    const nodes = this.decodeAll(await this.store.list(this.layout.nodes.prefix), 'node', (kv) => this.layout.decodeHost(kv)).map((v) => v.value);
    return [...own, ...nodes.filter((h) => !names.has(h.name))];
  }

  /** A block's current revision without reading the block (0 = absent). */
  async blockRevision(cidr: string): Promise<number> {
    return (await this.store.get(this.keys.block(cidr)))?.modRevision ?? 0;
  }

  /** A block, or undefined when it is absent or cannot be trusted (then nothing may be written over it). */
  async block(cidr: string): Promise<Versioned<BlockRecord> | undefined> {
    const kv = await this.store.get(this.keys.block(cidr));
    if (!kv) return undefined;
    const pools = await this.knownPools();
    const value = this.decode(kv, 'block', (x) => this.layout.decodeBlock(x, pools));
    return value ? { value, rev: kv.modRevision } : undefined;
  }

  /** Decode a block this process has just written (its value and the revision it was written at). */
  written(cidr: string, value: string, rev: number): BlockRecord | undefined {
    const key = this.keys.block(cidr);
    return this.decode({ key, value, createRevision: rev, modRevision: rev }, 'block', (kv) => this.layout.decodeBlock(kv, this.poolCache ?? []));
  }

  async blocks(): Promise<Versioned<BlockRecord>[]> {
    const kvs = await this.store.list(this.keys.blocks);
    const pools = await this.knownPools();
    return this.decodeAll(kvs, 'block', (kv) => this.layout.decodeBlock(kv, pools));
  }

  /** The cidrs of every block key, without reading the blocks (what a claim needs to find a free slot). */
  async blockCidrs(): Promise<string[]> {
    const out: string[] = [];
    for (const kv of await this.store.list(this.keys.blocks)) {
      const cidr = this.decode(kv, 'block key', (x) => this.layout.blockCidrOfKey(x.key));
      if (cidr !== undefined) out.push(cidr);
    }
    return out;
  }

  async affinities(host?: string): Promise<Versioned<AffinityRecord>[]> {
    const kvs = await this.store.list(host === undefined ? this.keys.allAffinities : this.keys.affinities(host));
    return this.decodeAll(kvs, 'affinity', (kv) => this.layout.decodeAffinity(kv));
  }

  async affinity(host: string, cidr: string): Promise<Versioned<AffinityRecord> | undefined> {
    const kv = await this.store.get(this.keys.affinity(host, cidr));
    const value = kv && this.decode(kv, 'affinity', (x) => this.layout.decodeAffinity(x));
    return kv && value ? { value, rev: kv.modRevision } : undefined;
  }

  async handle(handle: string): Promise<Versioned<HandleRecord> | undefined> {
    const kv = await this.store.get(this.keys.handle(handle));
    const value = kv && this.decode(kv, 'handle', (x) => this.layout.decodeHandle(x));
    return kv && value ? { value, rev: kv.modRevision } : undefined;
  }

  async handles(): Promise<HandleRecord[]> {
    return this.decodeAll(await this.store.list(this.keys.handles), 'handle', (kv) => this.layout.decodeHandle(kv)).map((v) => v.value);
  }
}

interface Slot<T> {
  value: T | undefined;
  rev: number;
  dirty: boolean;
  /** A block this pass creates (claims): its value as first created, for a commit that must be split. */
  created?: string;
  /** ... and the key of the affinity written with it. */
  affinityKey?: string;
  /** Changed after it was read or created (markBlock): a created block that was not is written as created. */
  changed?: boolean;
}

/** An affinity this pass writes: guarded by `rev` (0 = must be absent). */
interface AffinityWrite {
  value: string;
  rev: number;
}

/** etcd's default --max-txn-ops: compares and ops per transaction. A pass bigger than this commits in two steps. */
export const MAX_TXN_OPS = 128;

/**
 * The working set of one batch: blocks and handles read once, changed in memory, then written back in a single
 * transaction that compares the revision of everything it writes. If anything changed underneath, the commit
 * fails as a whole and the caller runs the batch again from fresh reads; nothing is half-applied.
 */
export class Pass {
  private readonly blockSlots = new Map<string, Slot<BlockRecord>>();
  private readonly handleSlots = new Map<string, Slot<HandleRecord>>();
  private readonly affinityWrites = new Map<string, AffinityWrite>();
  private allBlocksLoaded = false;

  constructor(readonly ds: IpamStore) {}

  /** Load (once per pass) and return a block, or undefined if it does not exist. */
  async block(cidr: string): Promise<BlockRecord | undefined> {
    let slot = this.blockSlots.get(cidr);
    if (!slot) {
      const v = await this.ds.block(cidr);
      slot = { value: v?.value, rev: v?.rev ?? 0, dirty: false };
      this.blockSlots.set(cidr, slot);
    }
    return slot.value;
  }

  /** The revision a block was read at in this pass (0 = absent or not read). */
  revOf(cidr: string): number {
    return this.blockSlots.get(cidr)?.rev ?? 0;
  }

  /** Whether the block was changed in this pass. */
  isDirty(cidr: string): boolean {
    return this.blockSlots.get(cidr)?.dirty ?? false;
  }

  /** Put a block read elsewhere (e.g. just created by a claim) into the pass at its revision. */
  adoptBlock(block: BlockRecord, rev: number): void {
    this.blockSlots.set(block.cidr, { value: block, rev, dirty: false });
  }

  /** Every block in the store (loaded once per pass; blocks already in the pass keep their working copy). */
  async allBlocks(): Promise<BlockRecord[]> {
    if (!this.allBlocksLoaded) {
      for (const v of await this.ds.blocks()) {
        if (!this.blockSlots.has(v.value.cidr)) this.blockSlots.set(v.value.cidr, { value: v.value, rev: v.rev, dirty: false });
      }
      this.allBlocksLoaded = true;
    }
    const out: BlockRecord[] = [];
    for (const s of this.blockSlots.values()) if (s.value) out.push(s.value);
    return out;
  }

  /**
   * Claim a block in this pass: it is created, with whatever the pass allocates from it, when the pass commits,
   * and only if its key is still absent then. `created` is its value as a bare create would write it.
   */
  createBlock(block: BlockRecord, created: string, affinity: { key: string; value: string; rev: number }): void {
    this.blockSlots.set(block.cidr, { value: block, rev: 0, dirty: true, created, affinityKey: affinity.key });
    this.putAffinity(affinity.key, affinity.value, affinity.rev);
  }

  /** The blocks this pass creates. */
  createdBlocks(): string[] {
    return [...this.blockSlots].filter(([, s]) => s.created !== undefined).map(([cidr]) => cidr);
  }

  /** Write an affinity when the pass commits, if its modRevision is still `rev` then (0 = absent). */
  putAffinity(key: string, value: string, rev: number): void {
    this.affinityWrites.set(key, { value, rev });
  }

  markBlock(block: BlockRecord): void {
    const slot = this.blockSlots.get(block.cidr);
    if (!slot) throw new Error(`block ${block.cidr} is not part of this pass`);
    slot.dirty = true;
    slot.changed = true;
  }

  /** Delete a block when the pass commits. */
  dropBlock(cidr: string): void {
    const slot = this.blockSlots.get(cidr);
    if (!slot) throw new Error(`block ${cidr} is not part of this pass`);
    slot.value = undefined;
    slot.dirty = true;
  }

  async handle(handle: string): Promise<HandleRecord | undefined> {
    let slot = this.handleSlots.get(handle);
    if (!slot) {
      const v = await this.ds.handle(handle);
      slot = { value: v?.value, rev: v?.rev ?? 0, dirty: false };
      this.handleSlots.set(handle, slot);
    }
    return slot.value;
  }

  /** Add `delta` addresses in `cidr` to a handle's count (creating or deleting the handle record as needed). */
  async adjustHandle(handle: string, cidr: string, delta: number): Promise<void> {
    await this.handle(handle);
    const slot = this.handleSlots.get(handle)!;
    const rec: HandleRecord = slot.value ? { handle, blocks: { ...slot.value.blocks } } : { handle, blocks: {} };
    const n = (rec.blocks[cidr] ?? 0) + delta;
    if (n > 0) rec.blocks[cidr] = n;
    else delete rec.blocks[cidr];
    slot.value = Object.keys(rec.blocks).length ? rec : undefined;
    slot.dirty = true;
  }

  get dirty(): boolean {
    for (const s of this.blockSlots.values()) if (s.dirty) return true;
    for (const s of this.handleSlots.values()) if (s.dirty) return true;
    return this.affinityWrites.size > 0;
  }

  /**
   * Write every changed block, handle and affinity in one transaction (a claimed block is created there with its
   * first allocations and its confirmed affinity). Returns false when something changed underneath.
   */
  async commit(): Promise<boolean> {
    if (this.writeCount() > MAX_TXN_OPS && !(await this.commitClaims())) return false;
    const compares: { key: string; modRevision: number }[] = [];
    const ops: Op[] = [];
    for (const [key, a] of this.affinityWrites) {
      compares.push({ key, modRevision: a.rev });
      ops.push({ type: 'put', key, value: a.value });
    }
    for (const [cidr, s] of this.blockSlots) {
      if (!s.dirty) continue;
      const key = this.ds.keys.block(cidr);
      compares.push({ key, modRevision: s.rev });
      // A claimed block nothing was taken from is written as a bare create would write it (re-encoding it would
      // count an update: Calico's sequenceNumber one higher than the two-phase claim leaves).
      const value = s.created !== undefined && !s.changed ? s.created : s.value && this.ds.layout.encodeBlock(s.value);
      ops.push(value ? { type: 'put', key, value } : { type: 'delete', key });
    }
    for (const [handle, s] of this.handleSlots) {
      if (!s.dirty) continue;
      const key = this.ds.keys.handle(handle);
      compares.push({ key, modRevision: s.rev });
      ops.push(s.value ? { type: 'put', key, value: this.ds.layout.encodeHandle(s.value) } : { type: 'delete', key });
    }
    if (ops.length === 0) return true;
    return (await this.ds.store.txn(compares, ops)).succeeded;
  }

  private writeCount(): number {
    let n = this.affinityWrites.size;
    for (const s of this.blockSlots.values()) if (s.dirty) n++;
    for (const s of this.handleSlots.values()) if (s.dirty) n++;
    return n;
  }

  /**
   * A pass too big for one transaction (many claims in one batch): each claim first goes alone, the block as bare
   * created with its confirmed affinity, and the rest follows as an update of those blocks, as the two-phase
   * claim would leave it. A crash in between leaves claimed, empty blocks, which the host uses next time.
   */
  private async commitClaims(): Promise<boolean> {
    for (const [cidr, s] of this.blockSlots) {
      if (s.created === undefined) continue;
      const key = this.ds.keys.block(cidr);
      const compares = [{ key, modRevision: 0 }];
      const ops: Op[] = [{ type: 'put', key, value: s.created }];
      const aff = s.affinityKey === undefined ? undefined : this.affinityWrites.get(s.affinityKey);
      if (aff) {
        compares.push({ key: s.affinityKey!, modRevision: aff.rev });
        ops.push({ type: 'put', key: s.affinityKey!, value: aff.value });
      }
      const r = await this.ds.store.txn(compares, ops);
      if (!r.succeeded) return false;
      s.rev = r.revision;
      s.created = undefined;
      s.dirty = s.changed === true; // a bare claim is done; one with allocations follows as an update
      if (aff) this.affinityWrites.delete(s.affinityKey!);
    }
    return true;
  }
}
