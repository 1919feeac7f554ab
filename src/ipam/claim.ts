// Claiming blocks for a host, and its affinities: the host's affine blocks as one pass sees them, the atomic claim
// (part of the pass's transaction) and the two-phase one, claims a crash left pending, and the `ipam claim` and
// release-affinity commands. Its own file because automatic assignment, assignIP and those commands all claim.
import {
  comparePrefix,
  maxLen,
  parsePrefix,
  prefixContainsPrefix,
  subnetAt,
  subnetCount,
  type Prefix,
} from '../net/ip.ts';
import type { Store } from '../store/types.ts';
import { affineHost, blockCounts, isEmpty, newBlock, reservedOrdinals } from './block.ts';
import { pfx } from './cidr-cache.ts';
import { Pass, type IpamStore } from './datastore.ts';
import { IpamError, unreadable, type BlockRecord, type Host, type IpamConfig, type Pool } from './types.ts';

/** 32-bit FNV-1 of a host name: where that host starts looking for a free block, so hosts spread out. */
export function fnv1(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h = Math.imul(h, 0x01000193) >>> 0;
    h = (h ^ byte) >>> 0;
  }
  return h;
}

/** One attempt's view of the settings, the pools and the host, and its clock. */
export interface Ctx {
  config: IpamConfig;
  pools: Pool[];
  host: Host;
  now: number;
  cooldownMs: number;
}

/** One of the host's affinity records, as read in a pass. */
export interface AffinityRef {
  cidr: string;
  prefix: Prefix;
  state: 'pending' | 'confirmed' | 'pendingDeletion';
  rev: number;
}

/** A host's affinities in one pass, with the blocks behind them loaded on first use. */
export class AffineSet {
  private readonly loaded = new Map<string, Promise<BlockRecord | undefined>>();
  constructor(
    readonly refs: AffinityRef[],
    private readonly load: (ref: AffinityRef) => Promise<BlockRecord | undefined>,
    /** Every affinity record of the host as read, pendingDeletion ones too. */
    private readonly states: Map<string, AffinityRef> = new Map(),
  ) {}

  /** The host's affinity record for a block, as read in this pass. */
  stateOf(cidr: string): AffinityRef | undefined {
    return this.states.get(cidr);
  }

  /** How many blocks the host holds (for the per-host block limit). */
  get count(): number {
    return this.refs.length;
  }

  block(ref: AffinityRef): Promise<BlockRecord | undefined> {
    let p = this.loaded.get(ref.cidr);
    if (!p) this.loaded.set(ref.cidr, (p = this.load(ref)));
    return p;
  }

  /** A block just claimed in this pass. */
  add(block: BlockRecord): void {
    const ref: AffinityRef = { cidr: block.cidr, prefix: pfx(block.cidr), state: 'confirmed', rev: 0 };
    this.refs.push(ref);
    this.loaded.set(block.cidr, Promise.resolve(block));
  }
}

/** Block claims and affinities over the store, for the allocator's parts and the claim commands. */
export class BlockClaims {
  /** The host's affinities, read once per pass (claims in the pass add to it). */
  private readonly affineCache = new WeakMap<Pass, AffineSet>();

  constructor(
    private readonly ds: IpamStore,
    private readonly store: Store,
    private readonly now: () => number,
    private readonly maxRetries: number,
    private readonly claimMode: 'atomic' | 'two-phase',
  ) {}

  private async requireHost(name: string): Promise<Host> {
    const h = await this.ds.host(name);
    if (!h) throw new IpamError('UNKNOWN_HOST', `host "${name}" is not known: register it first (ipam host set --name ${name} --os linux|windows)`);
    return h;
  }

  /** What one attempt of a request works with: the settings, the pools and the (registered) host. */
  async context(hostName: string): Promise<Ctx> {
    const [config, pools, host] = await Promise.all([this.ds.config(), this.ds.pools(), this.requireHost(hostName)]);
    this.ds.layout.checkHost?.(host, config.value);
    return { config: config.value, pools, host, now: this.now(), cooldownMs: config.value.ipCooldownSeconds * 1000 };
  }

  /** The host's affinities, read once per pass; blocks behind them are loaded only when needed. */
  async affineSet(pass: Pass, ctx: Ctx): Promise<AffineSet> {
    let set = this.affineCache.get(pass);
    if (!set) {
      const all = (await this.ds.affinities(ctx.host.name)).map((a) => ({ cidr: a.value.cidr, prefix: pfx(a.value.cidr), state: a.value.state, rev: a.rev }));
      const refs = all.filter((a) => a.state !== 'pendingDeletion').sort((a, b) => comparePrefix(a.prefix, b.prefix));
      set = new AffineSet(refs, (ref) => this.loadAffine(pass, ctx, ref), new Map(all.map((a) => [a.cidr, a])));
      this.affineCache.set(pass, set);
    }
    return set;
  }

  /** The block behind an affinity, if usable; finishes claims left pending by a crash and drops dangling ones. */
  private async loadAffine(pass: Pass, ctx: Ctx, ref: AffinityRef): Promise<BlockRecord | undefined> {
    const { cidr, state } = ref;
    const block = await pass.block(cidr);
    // A block there that cannot be read: skipped, and its affinity (pending or not) left alone, as libcalico-go's
    // findOrClaimBlock moves on to the next affine block when it cannot get one.
    if (pass.blockProblem(cidr) !== undefined) return undefined;
    if (block && affineHost(block) === ctx.host.name) {
      if (state === 'pending') await this.confirmAffinity(ctx.host.name, cidr, ref.rev);
      return block;
    }
    if (state === 'pending') {
      const pool = ctx.pools.find((p) => prefixContainsPrefix(pfx(p.cidr), ref.prefix));
      if (!block && (await this.ds.blockRevision(cidr)) === 0) {
        // Phase 1 happened but not phase 2 (a crash, or another process of this host is mid-claim): finish it.
        if (pool && this.claimMode === 'atomic') return this.atomicClaim(pass, ctx, pool, ref.prefix, false, ref.rev);
        return (pool && (await this.createAndConfirm(pass, ctx, pool, ref.prefix, ref.rev, false))) || undefined;
      }
      // The claim lost: the block is another host's (or cannot be read). Let go of it, as its claimer would have.
      const key = this.ds.keys.affinity(ctx.host.name, cidr);
      await this.store.txn([{ key, modRevision: ref.rev }], [{ type: 'delete', key }]);
      return undefined;
    }
    if (state === 'confirmed' && (block || (await this.ds.blockRevision(cidr)) === 0)) {
      // The block is gone or belongs to someone else (an interrupted release): this affinity is stale. (A block
      // that exists but does not decode is left alone, and so is its affinity.)
      const key = this.ds.keys.affinity(ctx.host.name, cidr);
      await this.store.txn([{ key, modRevision: ref.rev }], [{ type: 'delete', key }]);
    }
    return undefined;
  }

  private async confirmAffinity(host: string, cidr: string, rev: number): Promise<void> {
    const key = this.ds.keys.affinity(host, cidr);
    const value = this.ds.layout.encodeAffinity({ host, cidr, state: 'confirmed' });
    const r = await this.store.txn([{ key, modRevision: rev }], [{ type: 'put', key, value }]);
    if (!r.succeeded) {
      // Someone else confirmed it, or removed the pending record while we owned the block: make sure it exists.
      const cur = await this.ds.affinity(host, cidr);
      if (!cur) await this.store.txn([{ key, modRevision: 0 }], [{ type: 'put', key, value }]);
    }
  }

  /**
   * A perHost pool reserves addresses in the first block a host holds in it, and only there; so does an auto pool
   * for a Windows host (the HNS gateway and host endpoint live in that first block). A Windows host's first perBlock
   * block is marked too (same reservations): the HNS gateway must not move when a lower block is claimed later.
   */
  async needsHostReservation(affine: AffineSet, pool: Pool, os: Host['os']): Promise<boolean> {
    const k = pool.reservation.kind;
    if (k !== 'perHost' && !(os === 'windows' && (k === 'auto' || k === 'perBlock'))) return false;
    if (os === 'windows' && k === 'auto' && this.ds.layout.windowsHostInEveryBlock) return true;
    const prefix = pfx(pool.cidr);
    for (const ref of affine.refs) {
      if (!prefixContainsPrefix(prefix, ref.prefix)) continue;
      if ((await affine.block(ref))?.hostReservation) return false;
    }
    return true;
  }

  /** Whether the pool's reservation leaves room in a block for this host. */
  private usableBlock(pool: Pool, host: Host, hostReservation: boolean): boolean {
    const prefix = pfx(pool.cidr);
    const probe = subnetAt(prefix, pool.blockSize, 0);
    const reserved = reservedOrdinals({ cidr: probe, pool, poolPrefix: prefix, host: host.name, os: host.os, hostReservation });
    return reserved.length < 2 ** (maxLen(prefix.family) - pool.blockSize);
  }

  /** Claim one free block for the host from the first pool that has one (two-phase). */
  async claimNewBlock(pass: Pass, ctx: Ctx, pools: Pool[], affine: AffineSet, reasons: string[]): Promise<BlockRecord | undefined> {
    const existing = new Set(await this.ds.blockCidrs());
    for (const cidr of pass.createdBlocks()) existing.add(cidr);
    for (const pool of pools) {
      const prefix = pfx(pool.cidr);
      const needsHostReservation = await this.needsHostReservation(affine, pool, ctx.host.os);
      if (pool.reservation.kind === 'auto' && ctx.host.os === 'windows' && !this.usableBlock(pool, ctx.host, true)) {
        reasons.push(`pool ${pool.name}: /${pool.blockSize} blocks are too small for the Windows 4-address reservation (use a micropool reservation policy)`);
        continue;
      }
      const total = Math.min(subnetCount(prefix, pool.blockSize), 2 ** 52);
      const seed = fnv1(ctx.host.name);
      const start = total > 0xffffffff ? seed : seed % total;
      // Walk from the host's seed. Every step either skips a known block or tries a claim, and a failed claim adds
      // a known block, so a pool that is not full yields a block within (known blocks + 1) tries.
      for (let k = 0; k < total; k++) {
        const cidr = subnetAt(prefix, pool.blockSize, (start + k) % total);
        const text = cidr.toString();
        if (existing.has(text)) continue;
        const block = await this.claim(pass, ctx, affine, pool, cidr, needsHostReservation);
        if (block) return block;
        existing.add(text);
      }
      reasons.push(`pool ${pool.name} (${pool.cidr}) has no free blocks`);
    }
    return undefined;
  }

  /** Claim a block that is not in the store (as read in this pass) for the host; undefined: it cannot be had. */
  async claim(pass: Pass, ctx: Ctx, affine: AffineSet, pool: Pool, cidr: Prefix, hostReservation: boolean): Promise<BlockRecord | undefined> {
    if (this.claimMode === 'two-phase') return this.twoPhaseClaim(pass, ctx, pool, cidr, hostReservation);
    // An affinity of ours without its block: a pending claim is taken over (as the two-phase path does); one
    // confirmed or being released is someone's unfinished business, so the block is skipped.
    const aff = affine.stateOf(cidr.toString());
    if (aff && aff.state !== 'pending') return undefined;
    return this.atomicClaim(pass, ctx, pool, cidr, hostReservation, aff?.rev ?? 0);
  }

  /**
   * The claim as part of the pass's transaction: the block is created at commit, with what the pass allocates
   * from it, if its key is still absent; with it the affinity becomes confirmed, if its modRevision is still
   * `affRev` (0: absent; else our pending claim). The pass works on the block as a bare create would have written
   * it, so the layout's own state (Calico's sequence numbers) ends exactly as after a create and an update.
   */
  private atomicClaim(pass: Pass, ctx: Ctx, pool: Pool, cidr: Prefix, hostReservation: boolean, affRev: number): BlockRecord {
    const host = ctx.host.name;
    const text = cidr.toString();
    const created = newBlock({ cidr, pool, poolPrefix: pfx(pool.cidr), host, os: ctx.host.os, hostReservation });
    const value = this.ds.layout.encodeBlock(created);
    const block = this.ds.written(text, value, 0) ?? created;
    const affinity = this.ds.layout.encodeAffinity({ host, cidr: text, state: 'confirmed' });
    pass.createBlock(block, value, { key: this.ds.keys.affinity(host, text), value: affinity, rev: affRev });
    return block;
  }

  /** Phase 1: pending affinity. Phase 2: create the block (compare-and-swap on absence). Phase 3: confirm. */
  private async twoPhaseClaim(pass: Pass, ctx: Ctx, pool: Pool, cidr: Prefix, hostReservation: boolean): Promise<BlockRecord | undefined> {
    const host = ctx.host.name;
    const text = cidr.toString();
    const affKey = this.ds.keys.affinity(host, text);
    const pending = this.ds.layout.encodeAffinity({ host, cidr: text, state: 'pending' });
    let r = await this.store.txn([{ key: affKey, modRevision: 0 }], [{ type: 'put', key: affKey, value: pending }]);
    let affRev = r.revision;
    if (!r.succeeded) {
      const cur = await this.ds.affinity(host, text);
      if (!cur || cur.value.state !== 'pending') return undefined;
      affRev = cur.rev;
    }
    return this.createAndConfirm(pass, ctx, pool, cidr, affRev, hostReservation);
  }

  private async createAndConfirm(pass: Pass, ctx: Ctx, pool: Pool, cidr: Prefix, affRev: number, hostReservation: boolean): Promise<BlockRecord | undefined> {
    const host = ctx.host.name;
    const text = cidr.toString();
    const created = newBlock({ cidr, pool, poolPrefix: pfx(pool.cidr), host, os: ctx.host.os, hostReservation });
    const value = this.ds.layout.encodeBlock(created);
    const r = await this.store.txn([{ key: this.ds.keys.block(text), modRevision: 0 }], [{ type: 'put', key: this.ds.keys.block(text), value }]);
    if (r.succeeded) {
      // Work on the block as written, so the layout's own state (Calico's sequence numbers) carries on from it.
      const block = this.ds.written(text, value, r.revision) ?? created;
      pass.adoptBlock(block, r.revision);
      await this.confirmAffinity(host, text, affRev);
      return block;
    }
    // Someone created it first. If it is ours (another process of this host), use it; else let go of the claim.
    const cur = await this.ds.block(text);
    if (cur && affineHost(cur.value) === host) {
      pass.adoptBlock(cur.value, cur.rev);
      await this.confirmAffinity(host, text, affRev);
      return cur.value;
    }
    await this.store.txn([{ key: this.ds.keys.affinity(host, text), modRevision: affRev }], [{ type: 'delete', key: this.ds.keys.affinity(host, text) }]);
    if (cur) pass.adoptBlock(cur.value, cur.rev);
    return undefined;
  }

  // ---- affinities ---------------------------------------------------------------------------------------------

  /**
   * Claim every block of `cidr` for a host (`ipam claim`). Blocks that exist already (someone else's) are listed as
   * failed. The free ones are claimed as assign claims them: in one transaction (block absent and our affinity
   * absent or pending, then block and confirmed affinity written), so a crash leaves all of them claimed or none
   * (more than MAX_TXN_OPS writes: one transaction per claim, Pass.commitClaims); when another writer gets a block
   * first the pass is read again and that block fails.
   */
  async claimAffinity(cidrText: string, hostName: string): Promise<{ claimed: string[]; failed: string[] }> {
    const cidr = parsePrefix(cidrText);
    const ctx = await this.context(hostName);
    const pool = ctx.pools.find((p) => prefixContainsPrefix(pfx(p.cidr), cidr));
    if (!pool) throw new IpamError('NO_POOL', `${cidrText} is not inside any pool`);
    if (cidr.len > pool.blockSize) throw new IpamError('INVALID', `${cidrText} is smaller than pool ${pool.name}'s /${pool.blockSize} blocks`);
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const out = { claimed: [] as string[], failed: [] as string[] };
      const pass = new Pass(this.ds);
      const affine = await this.affineSet(pass, ctx);
      for (let i = 0; i < subnetCount(cidr, pool.blockSize); i++) {
        const b = subnetAt(cidr, pool.blockSize, i);
        const existing = await pass.block(b.toString());
        if (existing) {
          (affineHost(existing) === hostName ? out.claimed : out.failed).push(b.toString());
          continue;
        }
        if (pass.blockProblem(b.toString()) !== undefined) {
          // There, but unreadable (a warning names it): not ours to claim, nor to write over.
          out.failed.push(b.toString());
          continue;
        }
        const limit = ctx.config.maxBlocksPerHost;
        if (limit > 0 && affine.count >= limit) {
          out.failed.push(b.toString());
          continue;
        }
        const got = await this.claim(pass, ctx, affine, pool, b, await this.needsHostReservation(affine, pool, ctx.host.os));
        if (got) affine.add(got);
        (got ? out.claimed : out.failed).push(b.toString());
      }
      if (await pass.commit()) return out;
    }
    throw new IpamError('CONTENTION', `blocks of ${cidrText} kept changing underneath ${this.maxRetries} attempts; try again`);
  }

  /**
   * Give up a host's affinity to every block of `cidr`. An empty block is deleted; a block still holding addresses
   * stays (non-affine, deleted when it empties) unless `requireEmpty`, which refuses instead.
   */
  async releaseAffinity(cidrText: string, hostName: string, opts: { requireEmpty?: boolean } = {}): Promise<{ released: string[] }> {
    const cidr = parsePrefix(cidrText);
    const affs = (await this.ds.affinities(hostName)).filter((a) => prefixContainsPrefix(cidr, pfx(a.value.cidr)));
    if (affs.length === 0) throw new IpamError('NOT_FOUND', `host ${hostName} has no affinity inside ${cidrText}`);
    const released: string[] = [];
    for (const first of affs) {
      const blockCidr = first.value.cidr;
      const affKey = this.ds.keys.affinity(hostName, blockCidr);
      let done = false;
      for (let attempt = 0; attempt < this.maxRetries && !done; attempt++) {
        const aff = await this.ds.affinity(hostName, blockCidr);
        if (!aff) {
          done = true;
          break;
        }
        const read = await this.ds.readBlock(blockCidr);
        // libcalico-go's ReleaseAffinity returns the error of a block it cannot read; so does this.
        if (read.problem !== undefined) throw unreadable(`release of ${hostName}'s affinity to ${blockCidr}: the block ${read.kv!.key}`, read.problem);
        const b = read.value && { value: read.value, rev: read.kv!.modRevision };
        const affCmp = { key: affKey, modRevision: aff.rev };
        if (!b || affineHost(b.value) !== hostName) {
          done = (await this.store.txn([affCmp], [{ type: 'delete', key: affKey }])).succeeded;
          continue;
        }
        const blockCmp = { key: this.ds.keys.block(blockCidr), modRevision: b.rev };
        if (isEmpty(b.value)) {
          done = (await this.store.txn([affCmp, blockCmp], [{ type: 'delete', key: affKey }, { type: 'delete', key: this.ds.keys.block(blockCidr) }])).succeeded;
        } else if (opts.requireEmpty) {
          throw new IpamError('IN_USE', `block ${blockCidr} still has ${blockCounts(b.value).allocated} allocated addresses`);
        } else {
          const next: BlockRecord = { ...b.value, affinity: null };
          done = (await this.store.txn([affCmp, blockCmp], [{ type: 'delete', key: affKey }, { type: 'put', key: this.ds.keys.block(blockCidr), value: this.ds.layout.encodeBlock(next) }])).succeeded;
        }
      }
      if (!done) throw new IpamError('CONTENTION', `block ${blockCidr} kept changing; try again`);
      released.push(blockCidr);
    }
    return { released };
  }
}
