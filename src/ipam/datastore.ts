// IPAM's reads and writes: the key layout in the Store and a "pass", the working set of one allocation batch.
//
// Key layout (all values JSON):
//   /blockspeaker/ipam/v1/config                    IpamConfig
//   /blockspeaker/ipam/v1/pools/<name>              Pool
//   /blockspeaker/ipam/v1/poolset                   bumped on every pool change, so adds are checked for overlap
//                                                   against a pool set that cannot change underneath them
//   /blockspeaker/ipam/v1/hosts/<name>              Host
//   /blockspeaker/ipam/v1/blocks/<addr>-<len>       BlockRecord
//   /blockspeaker/ipam/v1/affinity/<host>/<addr>-<len>  AffinityRecord
//   /blockspeaker/ipam/v1/handles/<handle>          HandleRecord (handle URI-encoded)
import type { Op, Store } from '../store/types.ts';
import type { AffinityRecord, BlockRecord, HandleRecord, Host, IpamConfig, Pool } from './types.ts';
import { defaultConfig } from './types.ts';

const ROOT = '/blockspeaker/ipam/v1/';

export const keys = {
  root: ROOT,
  config: `${ROOT}config`,
  poolSet: `${ROOT}poolset`,
  pools: `${ROOT}pools/`,
  pool: (name: string) => `${ROOT}pools/${name}`,
  hosts: `${ROOT}hosts/`,
  host: (name: string) => `${ROOT}hosts/${encodeURIComponent(name)}`,
  blocks: `${ROOT}blocks/`,
  block: (cidr: string) => `${ROOT}blocks/${cidr.replace('/', '-')}`,
  affinities: (host: string) => `${ROOT}affinity/${encodeURIComponent(host)}/`,
  allAffinities: `${ROOT}affinity/`,
  affinity: (host: string, cidr: string) => `${ROOT}affinity/${encodeURIComponent(host)}/${cidr.replace('/', '-')}`,
  handles: `${ROOT}handles/`,
  handle: (handle: string) => `${ROOT}handles/${encodeURIComponent(handle)}`,
};

export interface Versioned<T> {
  value: T;
  /** The key's modRevision when read; 0 = did not exist. */
  rev: number;
}

/** Typed reads over the Store. */
export class IpamStore {
  constructor(readonly store: Store) {}

  async config(): Promise<Versioned<IpamConfig>> {
    const kv = await this.store.get(keys.config);
    return kv ? { value: { ...defaultConfig, ...JSON.parse(kv.value) }, rev: kv.modRevision } : { value: { ...defaultConfig }, rev: 0 };
  }

  async pools(): Promise<Pool[]> {
    const kvs = await this.store.list(keys.pools);
    return kvs.map((kv) => JSON.parse(kv.value) as Pool).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async poolSetRevision(): Promise<number> {
    return (await this.store.get(keys.poolSet))?.modRevision ?? 0;
  }

  async host(name: string): Promise<Host | undefined> {
    const kv = await this.store.get(keys.host(name));
    return kv ? (JSON.parse(kv.value) as Host) : undefined;
  }

  async hosts(): Promise<Host[]> {
    return (await this.store.list(keys.hosts)).map((kv) => JSON.parse(kv.value) as Host);
  }

  /** A block's current revision without reading the block (0 = absent). */
  async blockRevision(cidr: string): Promise<number> {
    return (await this.store.get(keys.block(cidr)))?.modRevision ?? 0;
  }

  async block(cidr: string): Promise<Versioned<BlockRecord> | undefined> {
    const kv = await this.store.get(keys.block(cidr));
    return kv ? { value: JSON.parse(kv.value) as BlockRecord, rev: kv.modRevision } : undefined;
  }

  async blocks(): Promise<Versioned<BlockRecord>[]> {
    return (await this.store.list(keys.blocks)).map((kv) => ({ value: JSON.parse(kv.value) as BlockRecord, rev: kv.modRevision }));
  }

  /** The cidrs of every block, without reading the blocks (what a claim needs to find a free slot). */
  async blockCidrs(): Promise<string[]> {
    const n = keys.blocks.length;
    return (await this.store.list(keys.blocks)).map((kv) => {
      const name = kv.key.slice(n);
      const dash = name.lastIndexOf('-');
      return `${name.slice(0, dash)}/${name.slice(dash + 1)}`;
    });
  }

  async affinities(host?: string): Promise<Versioned<AffinityRecord>[]> {
    const kvs = await this.store.list(host === undefined ? keys.allAffinities : keys.affinities(host));
    return kvs.map((kv) => ({ value: JSON.parse(kv.value) as AffinityRecord, rev: kv.modRevision }));
  }

  async affinity(host: string, cidr: string): Promise<Versioned<AffinityRecord> | undefined> {
    const kv = await this.store.get(keys.affinity(host, cidr));
    return kv ? { value: JSON.parse(kv.value) as AffinityRecord, rev: kv.modRevision } : undefined;
  }

  async handle(handle: string): Promise<Versioned<HandleRecord> | undefined> {
    const kv = await this.store.get(keys.handle(handle));
    return kv ? { value: JSON.parse(kv.value) as HandleRecord, rev: kv.modRevision } : undefined;
  }

  async handles(): Promise<HandleRecord[]> {
    return (await this.store.list(keys.handles)).map((kv) => JSON.parse(kv.value) as HandleRecord);
  }
}

interface Slot<T> {
  value: T | undefined;
  rev: number;
  dirty: boolean;
}

/**
 * The working set of one batch: blocks and handles read once, changed in memory, then written back in a single
 * transaction that compares the revision of everything it writes. If anything changed underneath, the commit
 * fails as a whole and the caller runs the batch again from fresh reads; nothing is half-applied.
 */
export class Pass {
  private readonly blockSlots = new Map<string, Slot<BlockRecord>>();
  private readonly handleSlots = new Map<string, Slot<HandleRecord>>();
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

  markBlock(block: BlockRecord): void {
    const slot = this.blockSlots.get(block.cidr);
    if (!slot) throw new Error(`block ${block.cidr} is not part of this pass`);
    slot.dirty = true;
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
    return false;
  }

  /** Write every changed block and handle in one transaction. Returns false when something changed underneath. */
  async commit(): Promise<boolean> {
    const compares: { key: string; modRevision: number }[] = [];
    const ops: Op[] = [];
    for (const [cidr, s] of this.blockSlots) {
      if (!s.dirty) continue;
      compares.push({ key: keys.block(cidr), modRevision: s.rev });
      ops.push(s.value ? { type: 'put', key: keys.block(cidr), value: JSON.stringify(s.value) } : { type: 'delete', key: keys.block(cidr) });
    }
    for (const [handle, s] of this.handleSlots) {
      if (!s.dirty) continue;
      compares.push({ key: keys.handle(handle), modRevision: s.rev });
      ops.push(s.value ? { type: 'put', key: keys.handle(handle), value: JSON.stringify(s.value) } : { type: 'delete', key: keys.handle(handle) });
    }
    if (ops.length === 0) return true;
    return (await this.ds.store.txn(compares, ops)).succeeded;
  }
}
