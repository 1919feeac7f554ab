// IPAM's reads and writes through a layout (layout.ts: where the records live and how they are written), and a
// "pass", the working set of one allocation batch.
import type { KeyValue, Op, Store } from '../store/types.ts';
import { blockspeakerLayout, type Layout, type LayoutKeys } from './layout.ts';
import { IpamError, type AffinityRecord, type BlockRecord, type HandleRecord, type Host, type IpamConfig, type Pool } from './types.ts';

export { keys } from './layout.ts';

export interface Versioned<T> {
  value: T;
  /** The key's modRevision when read; 0 = did not exist. */
  rev: number;
}

/** A record read by key: absent (no kv), decoded (value), or present but refused by the layout (problem). */
export interface Read<T> {
  kv?: KeyValue;
  value?: T;
  /** Why the layout refused the record (without the key); set only when kv is. */
  problem?: string;
}

/** A record present in the store that the layout refuses. */
export interface BadRecord {
  key: string;
  problem: string;
}

/** Where IpamStore reports records it skips, and records that are fine again. */
export interface IpamStoreReports {
  /** A record is skipped: once per key and revision. `key` is the store key. */
  warn?: (msg: string, key: string) => void;
  /** A key warned about decodes again, or is gone. */
  resolved?: (key: string) => void;
}

/** Records warned about and remembered (key -> revision); pruned as they are fixed or deleted, and never above this. */
const WARNED_LIMIT = 100_000;

/**
 * Typed reads over the Store. A record the layout cannot decode is skipped with a warning naming its key (once per
 * revision): reads and views treat it as absent, and writers never write over it (Pass below; the allocator refuses
 * what would need it, as libcalico-go does for a block it cannot read, and moves on to other blocks).
 */
export class IpamStore {
  readonly keys: LayoutKeys;
  /** The pools last read: a layout that does not store a block's pool finds it among them. */
  private poolCache: Pool[] | undefined;
  /** Key -> modRevision already warned about, so one corrupt record is reported once per change. */
  private readonly warned = new Map<string, number>();
  private readonly reports: IpamStoreReports;
  /** The last settings that decoded: used, with a warning, while the stored ones do not. */
  private lastGoodConfig: IpamConfig | undefined;

  constructor(
    readonly store: Store,
    readonly layout: Layout = blockspeakerLayout,
    reports: IpamStoreReports | ((msg: string, key?: string) => void) = (m) => process.emitWarning(m, 'IpamWarning'),
  ) {
    this.keys = layout.keys;
    this.reports = typeof reports === 'function' ? { warn: reports } : reports;
  }

  /** Decode one record, or say why not (and warn, once per key and revision). */
  private decode<T>(kv: KeyValue, what: string, fn: (kv: KeyValue) => T, clears = true): Read<T> {
    try {
      const value = fn(kv);
      if (clears) this.resolve(kv.key);
      return { kv, value };
    } catch (e) {
      const problem = problemText(kv.key, e);
      if (this.warned.get(kv.key) !== kv.modRevision) {
        this.warned.delete(kv.key);
        this.warned.set(kv.key, kv.modRevision);
        if (this.warned.size > WARNED_LIMIT) this.warned.delete(this.warned.keys().next().value!);
        this.reports.warn?.(`skipping ${what} ${kv.key}: ${problem} (treated as absent, and nothing is written over it until it is fixed or deleted)`, kv.key);
      }
      return { kv, problem };
    }
  }

  /** A key warned about decodes again or is gone. */
  private resolve(key: string): void {
    if (this.warned.delete(key)) this.reports.resolved?.(key);
  }

  private async read<T>(key: string, what: string, fn: (kv: KeyValue) => T): Promise<Read<T>> {
    const kv = await this.store.get(key);
    if (!kv) {
      this.resolve(key);
      return {};
    }
    return this.decode(kv, what, fn);
  }

  private decodeAll<T>(kvs: KeyValue[], what: string, fn: (kv: KeyValue) => T, prefix: string, bad?: BadRecord[]): Versioned<T>[] {
    const out: Versioned<T>[] = [];
    for (const kv of kvs) {
      const r = this.decode(kv, what, fn);
      if (r.problem !== undefined) bad?.push({ key: kv.key, problem: r.problem });
      else out.push({ value: r.value!, rev: kv.modRevision });
    }
    // Records warned about under this prefix that the list no longer holds were deleted.
    if (this.warned.size) {
      const listed = new Set(kvs.map((kv) => kv.key));
      for (const key of [...this.warned.keys()]) if (key.startsWith(prefix) && !listed.has(key)) this.resolve(key);
    }
    return out;
  }

  /**
   * The settings. Stored ones that do not decode: the last good ones this process read, with a warning; none yet
   * (a fresh process): refused, as libcalico-go refuses to allocate without its IPAM config.
   */
  async config(): Promise<Versioned<IpamConfig>> {
    const kv = await this.store.get(this.keys.config);
    if (!kv) {
      this.resolve(this.keys.config);
      return { value: (this.lastGoodConfig = this.layout.decodeConfig(undefined)), rev: 0 };
    }
    const r = this.decode(kv, 'config', (x) => this.layout.decodeConfig(x));
    if (r.value) return { value: (this.lastGoodConfig = r.value), rev: kv.modRevision };
    if (this.lastGoodConfig) return { value: this.lastGoodConfig, rev: kv.modRevision };
    throw new IpamError('CORRUPT', `IPAM settings ${kv.key} cannot be read: ${r.problem}; set them again (ipam config ...)`);
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
    const pools = this.decodeAll(kvs, 'pool', (kv) => this.layout.decodePool(kv), this.keys.pools)
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
    const own = await this.read(this.keys.host(name), 'host', (x) => this.layout.decodeHost(x));
    if (own.kv || !this.layout.nodes) return own.value;
    return (await this.read(this.layout.nodes.key(name), 'node', (x) => this.layout.decodeHost(x))).value;
  }

  async hosts(): Promise<Host[]> {
    const own = this.decodeAll(await this.store.list(this.keys.hosts), 'host', (kv) => this.layout.decodeHost(kv), this.keys.hosts).map((v) => v.value);
    if (!this.layout.nodes) return own;
    const names = new Set(own.map((h) => h.name));
    const nodes = this.decodeAll(await this.store.list(this.layout.nodes.prefix), 'node', (kv) => this.layout.decodeHost(kv), this.layout.nodes.prefix).map((v) => v.value);
    return [...own, ...nodes.filter((h) => !names.has(h.name))];
  }

  /** A block's current revision without reading the block (0 = absent). */
  async blockRevision(cidr: string): Promise<number> {
    return (await this.store.get(this.keys.block(cidr)))?.modRevision ?? 0;
  }

  /** A block as read: absent, decoded, or present and refused (then nothing may be written over it). */
  async readBlock(cidr: string): Promise<Read<BlockRecord>> {
    const pools = await this.knownPools();
    return this.read(this.keys.block(cidr), 'block', (x) => this.layout.decodeBlock(x, pools));
  }

  /** A block, or undefined when it is absent or cannot be trusted (then nothing may be written over it). */
  async block(cidr: string): Promise<Versioned<BlockRecord> | undefined> {
    const r = await this.readBlock(cidr);
    return r.value ? { value: r.value, rev: r.kv!.modRevision } : undefined;
  }

  /** Decode a block this process has just written (its value and the revision it was written at). */
  written(cidr: string, value: string, rev: number): BlockRecord | undefined {
    const key = this.keys.block(cidr);
    return this.decode({ key, value, createRevision: rev, modRevision: rev }, 'block', (kv) => this.layout.decodeBlock(kv, this.poolCache ?? []), false).value;
  }

  async blocks(): Promise<Versioned<BlockRecord>[]> {
    return (await this.listBlocks()).blocks;
  }

  /** Every block that decodes, and the keys of those that do not. */
  async listBlocks(): Promise<{ blocks: Versioned<BlockRecord>[]; bad: BadRecord[] }> {
    const kvs = await this.store.list(this.keys.blocks);
    const pools = await this.knownPools();
    const bad: BadRecord[] = [];
    const blocks = this.decodeAll(kvs, 'block', (kv) => this.layout.decodeBlock(kv, pools), this.keys.blocks, bad);
    return { blocks, bad };
  }

  /** The cidrs of every block key, without reading the blocks (what a claim needs to find a free slot). */
  async blockCidrs(): Promise<string[]> {
    const out: string[] = [];
    for (const kv of await this.store.list(this.keys.blocks)) {
      const cidr = this.decode(kv, 'block key', (x) => this.layout.blockCidrOfKey(x.key), false).value;
      if (cidr !== undefined) out.push(cidr);
    }
    return out;
  }

  async affinities(host?: string): Promise<Versioned<AffinityRecord>[]> {
    const prefix = host === undefined ? this.keys.allAffinities : this.keys.affinities(host);
    return this.decodeAll(await this.store.list(prefix), 'affinity', (kv) => this.layout.decodeAffinity(kv), prefix);
  }

  async affinity(host: string, cidr: string): Promise<Versioned<AffinityRecord> | undefined> {
    const r = await this.read(this.keys.affinity(host, cidr), 'affinity', (x) => this.layout.decodeAffinity(x));
    return r.value ? { value: r.value, rev: r.kv!.modRevision } : undefined;
  }

  /** A handle as read: absent, decoded, or present and refused. */
  readHandle(handle: string): Promise<Read<HandleRecord>> {
    return this.read(this.keys.handle(handle), 'handle', (x) => this.layout.decodeHandle(x));
  }

  async handle(handle: string): Promise<Versioned<HandleRecord> | undefined> {
    const r = await this.readHandle(handle);
    return r.value ? { value: r.value, rev: r.kv!.modRevision } : undefined;
  }

  async handles(): Promise<HandleRecord[]> {
    return (await this.listHandles()).handles;
  }

  /** Every handle that decodes, and the keys of those that do not. */
  async listHandles(): Promise<{ handles: HandleRecord[]; bad: BadRecord[] }> {
    const bad: BadRecord[] = [];
    const handles = this.decodeAll(await this.store.list(this.keys.handles), 'handle', (kv) => this.layout.decodeHandle(kv), this.keys.handles, bad).map((v) => v.value);
    return { handles, bad };
  }
}

/** A decoder's message without the key it may start with (the warning names the key once), cut to a sane length. */
function problemText(key: string, e: unknown): string {
  let m = e instanceof Error ? e.message : String(e);
  if (m.startsWith(`${key}: `)) m = m.slice(key.length + 2);
  return m.length > 300 ? `${m.slice(0, 297)}...` : m;
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
  /** The record is in the store but the layout refuses it: value is undefined and nothing may be written there. */
  problem?: string;
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

  /**
   * Load (once per pass) and return a block, or undefined if it does not exist or cannot be trusted (blockProblem
   * says which). An untrusted block keeps revision 0 in the pass, so even a write that slipped through would fail
   * its compare against the key that is there.
   */
  async block(cidr: string): Promise<BlockRecord | undefined> {
    let slot = this.blockSlots.get(cidr);
    if (!slot) {
      const r = await this.ds.readBlock(cidr);
      slot = { value: r.value, rev: r.value ? r.kv!.modRevision : 0, dirty: false, problem: r.problem };
      this.blockSlots.set(cidr, slot);
    }
    return slot.value;
  }

  /** Why a block read in this pass cannot be used: it is in the store and the layout refuses it (else undefined). */
  blockProblem(cidr: string): string | undefined {
    return this.blockSlots.get(cidr)?.problem;
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
      const r = await this.ds.readHandle(handle);
      slot = { value: r.value, rev: r.value ? r.kv!.modRevision : 0, dirty: false, problem: r.problem };
      this.handleSlots.set(handle, slot);
    }
    return slot.value;
  }

  /** Why a handle read in this pass cannot be used: it is in the store and the layout refuses it (else undefined). */
  async handleProblem(handle: string): Promise<string | undefined> {
    await this.handle(handle);
    return this.handleSlots.get(handle)!.problem;
  }

  /**
   * Add `delta` addresses in `cidr` to a handle's count (creating or deleting the handle record as needed). A handle
   * that cannot be trusted is never counted over as if it were absent: callers check handleProblem before they
   * allocate or release anything for it, so reaching this with one is a bug, and the pass is abandoned.
   */
  async adjustHandle(handle: string, cidr: string, delta: number): Promise<void> {
    await this.handle(handle);
    const slot = this.handleSlots.get(handle)!;
    if (slot.problem !== undefined) throw new Error(`internal: handle ${handle} cannot be read (${slot.problem}) and was about to be written over`);
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
    for (const [name, slots] of [['block', this.blockSlots], ['handle', this.handleSlots]] as const) {
      for (const [id, s] of slots) {
        if (s.dirty && s.problem !== undefined) throw new Error(`internal: ${name} ${id} cannot be read (${s.problem}) and was about to be written over`);
      }
    }
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
