// IPAM orchestration: Calico's allocation order over blocks kept in a Store.
//
//   autoAssign: (1) the host's own affine blocks -> (2) claim a new block (host-seeded start, sequential walk)
//   -> (3) borrow single addresses from other hosts' blocks, only where allowed. Every block write is a
//   compare-and-swap, retried a bounded number of times. Concurrent requests for one host in this process are
//   served together in one pass (one transaction), so a busy node pays one durable write for many pods.
//
//   A claim is part of that one transaction: "block key absent" and "our affinity absent (or our own pending
//   claim)" are its compares, the block (with its first allocations) and the confirmed affinity its writes. That
//   guards exactly what Calico's two-phase claim (pending affinity, create block, confirm) guards, one durable
//   write instead of four; libcalico-go needs the phases only because its datastore interface writes one key at a
//   time. Other writers may still use the phases, and their pending claims are finished here (loadAffine).
import {
  comparePrefix,
  formatIP,
  hostPrefix,
  ipAt,
  maxLen,
  parseIP,
  parsePrefix,
  prefixContainsIP,
  prefixContainsPrefix,
  prefixesOverlap,
  prefixOf,
  subnetAt,
  subnetCount,
  type Family,
  type IP,
  type Prefix,
} from '../net/ip.ts';
import type { Store } from '../store/types.ts';
import {
  affineHost,
  allocate,
  allocateOrdinal,
  blockCounts,
  collectAttributes,
  expireCooldowns,
  isEmpty,
  newBlock,
  ordinalOf,
  ordinalsOfHandle,
  release,
  reservedOrdinals,
} from './block.ts';
import { IpamStore, Pass } from './datastore.ts';
import type { Layout } from './layout.ts';
import { parseSelector } from '../calico/selector.ts';
import { validateConfig, validateHost, validatePool } from './validate.ts';
import {
  IpamError,
  type AllocationAttr,
  type AssignedIP,
  type AssignResult,
  type AutoAssignArgs,
  type BlockInfo,
  type BlockRecord,
  type Host,
  type IpamConfig,
  type Pool,
  type PoolSpec,
  type ReleaseResult,
  type RouteView,
} from './types.ts';

export interface IpamOptions {
  /** Clock in ms (cooldowns). */
  now?: () => number;
  /** Attempts for a batch whose compare-and-swap keeps failing. */
  maxRetries?: number;
  /** Where and how the records are kept (default: blockspeaker's own layout). */
  layout?: Layout;
  /**
   * 'atomic' (default): a block claim is part of the pass's one transaction. 'two-phase': pending affinity,
   * create, confirm, each its own write, as earlier versions and libcalico-go do (the tests' reference).
   */
  claim?: 'atomic' | 'two-phase';
  /**
   * Told about records that are skipped because they do not decode, once per key and revision (default:
   * process.emitWarning). `key` is the record's store key.
   */
  warn?: (msg: string, key: string) => void;
  /** Told when a key warned about decodes again or is gone. */
  resolved?: (key: string) => void;
}

// Pool and block cidrs are parsed over and over on the hot path; they are few, so keep them parsed.
const parsed = new Map<string, Prefix>();
function pfx(cidr: string): Prefix {
  let p = parsed.get(cidr);
  if (!p) {
    if (parsed.size > 100_000) parsed.clear();
    parsed.set(cidr, (p = parsePrefix(cidr)));
  }
  return p;
}

/** A request refused because a record it needs is in the store but cannot be trusted. */
function unreadable(what: string, problem: string): IpamError {
  return new IpamError('CORRUPT', `${what} cannot be read (${problem}); it is left as it is until it is fixed or deleted`);
}

/** 32-bit FNV-1 of a host name: where that host starts looking for a free block, so hosts spread out. */
export function fnv1(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h = Math.imul(h, 0x01000193) >>> 0;
    h = (h ^ byte) >>> 0;
  }
  return h;
}

// Validation lives in validate.ts (the layout's decoders use it too); exported here as before.
export { validateConfig, validateHost, validatePool };

// ---- per-host batching ----------------------------------------------------------------------------------------

type Waiter<A, R> = { args: A; resolve: (r: R) => void; reject: (e: unknown) => void };

/** Runs queued requests for one key together; the next batch starts when the previous one is done. */
class Batcher<A, R> {
  static readonly maxItems = 64;
  private readonly queues = new Map<string, Waiter<A, R>[]>();
  private readonly running = new Set<string>();
  constructor(private readonly run: (key: string, items: A[]) => Promise<(R | Error)[]>) {}

  submit(key: string, args: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let q = this.queues.get(key);
      if (!q) this.queues.set(key, (q = []));
      q.push({ args, resolve, reject });
      if (!this.running.has(key)) {
        // Start on the next microtask, so callers woken by the previous batch's results join this one.
        this.running.add(key);
        queueMicrotask(() => void this.drain(key));
      }
    });
  }

  private async drain(key: string): Promise<void> {
    try {
      for (;;) {
        const pending = this.queues.get(key);
        if (!pending || pending.length === 0) break;
        // A batch is one transaction: keep it well inside etcd's 128 operations per transaction (a handle record
        // per request plus the blocks they touch).
        const q = pending.splice(0, Batcher.maxItems);
        if (pending.length === 0) this.queues.delete(key);
        try {
          const results = await this.run(key, q.map((w) => w.args));
          q.forEach((w, i) => (results[i] instanceof Error ? w.reject(results[i]) : w.resolve(results[i] as R)));
        } catch (e) {
          for (const w of q) w.reject(e);
        }
      }
    } finally {
      this.running.delete(key);
    }
  }
}

// ---- the allocator ----------------------------------------------------------------------------------------------

interface Ctx {
  config: IpamConfig;
  pools: Pool[];
  host: Host;
  now: number;
  cooldownMs: number;
}

interface AffinityRef {
  cidr: string;
  prefix: Prefix;
  state: 'pending' | 'confirmed' | 'pendingDeletion';
  rev: number;
}

/** A host's affinities in one pass, with the blocks behind them loaded on first use. */
class AffineSet {
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

type ReleaseReq = { ips: string[] } | { handle: string };
type ReleaseOut = { released: string[]; notAllocated: string[] };

export class Ipam {
  readonly ds: IpamStore;
  private readonly now: () => number;
  private readonly maxRetries: number;
  private readonly assignBatcher: Batcher<AutoAssignArgs, AssignResult>;
  private readonly releaseBatcher: Batcher<ReleaseReq, ReleaseOut>;
  private readonly claimMode: 'atomic' | 'two-phase';
  /** The host's affinities, read once per pass (claims in the pass add to it). */
  private readonly affineCache = new WeakMap<Pass, AffineSet>();
  /** Per host, the affine block that last had room: tried first, so a full block is not re-read for every pod. */
  private readonly roomHint = new Map<string, string>();
  /** Block -> the revision at which it was read with no free address. */
  private readonly fullAt = new Map<string, number>();

  constructor(readonly store: Store, opts: IpamOptions = {}) {
    this.ds = new IpamStore(store, opts.layout, { warn: opts.warn ?? ((m) => process.emitWarning(m, 'IpamWarning')), resolved: opts.resolved });
    this.now = opts.now ?? Date.now;
    this.maxRetries = opts.maxRetries ?? 32;
    this.claimMode = opts.claim ?? 'atomic';
    this.assignBatcher = new Batcher((host, items) => this.assignBatch(host, items));
    this.releaseBatcher = new Batcher((_k, items) => this.releaseBatch(items));
  }

  // ---- configuration ------------------------------------------------------------------------------------------

  async getConfig(): Promise<IpamConfig> {
    return (await this.ds.config()).value;
  }

  async setConfig(patch: Partial<IpamConfig>): Promise<IpamConfig> {
    for (let i = 0; i < this.maxRetries; i++) {
      const key = this.ds.keys.config;
      const kv = await this.store.get(key);
      // Settings that do not decode are replaced (nothing is allocated from them): over the last good ones this
      // process read, else the defaults.
      let base: IpamConfig;
      try {
        base = this.ds.layout.decodeConfig(kv);
      } catch {
        base = await this.ds.config().then((c) => c.value, () => this.ds.layout.decodeConfig(undefined));
      }
      const next = validateConfig({ ...base, ...patch });
      const value = this.ds.layout.encodeConfig(next, kv);
      const r = await this.store.txn([{ key, modRevision: kv?.modRevision ?? 0 }], [{ type: 'put', key, value }]);
      if (r.succeeded) return next;
    }
    throw new IpamError('CONTENTION', 'config changed concurrently too many times; try again');
  }

  async listPools(): Promise<Pool[]> {
    return this.ds.pools();
  }

  /** Add a pool. Refused if the name exists or the cidr overlaps another pool. */
  async addPool(spec: PoolSpec): Promise<Pool> {
    const pool = validatePool(spec);
    const prefix = pfx(pool.cidr);
    for (let i = 0; i < this.maxRetries; i++) {
      const setRev = await this.ds.poolSetRevision();
      const pools = await this.ds.pools();
      if (pools.some((p) => p.name === pool.name)) throw new IpamError('CONFLICT', `pool ${pool.name} already exists`);
      const clash = pools.find((p) => prefixesOverlap(pfx(p.cidr), prefix));
      if (clash) throw new IpamError('CONFLICT', `pool ${pool.name} (${pool.cidr}) overlaps pool ${clash.name} (${clash.cidr})`);
      const cur = await this.store.get(this.ds.keys.pool(pool.name));
      if (cur) {
        let readable = true;
        try {
          this.ds.layout.decodePool(cur);
        } catch {
          readable = false;
        }
        if (readable) throw new IpamError('CONFLICT', `pool ${pool.name} already exists`);
        throw new IpamError('CORRUPT', `pool ${pool.name}: ${cur.key} exists but cannot be read; delete it first (ipam pool delete)`);
      }
      const r = await this.store.txn(
        [{ key: this.ds.keys.poolSet, modRevision: setRev }, { key: this.ds.keys.pool(pool.name), modRevision: 0 }],
        [{ type: 'put', key: this.ds.keys.pool(pool.name), value: this.ds.layout.encodePool(pool) }, { type: 'put', key: this.ds.keys.poolSet, value: pool.name }],
      );
      if (r.succeeded) return pool;
    }
    throw new IpamError('CONTENTION', 'pools changed concurrently too many times; try again');
  }

  /** Delete a pool, its empty blocks and their affinities. Refused while any address in it is allocated. */
  async deletePool(name: string): Promise<void> {
    for (let i = 0; i < this.maxRetries; i++) {
      const kv = await this.store.get(this.ds.keys.pool(name));
      if (!kv) throw new IpamError('NOT_FOUND', `pool ${name} does not exist`);
      const listed = await this.ds.listBlocks();
      // A block in the pool that cannot be read may hold addresses: the pool stays until it is fixed or deleted.
      let poolCidr: Prefix | undefined;
      try {
        poolCidr = pfx(this.ds.layout.decodePool(kv).cidr);
      } catch {
        // The pool record itself cannot be read (it is skipped everywhere): it may still be deleted.
      }
      const unread = poolCidr && listed.bad.find((x) => {
        try {
          return prefixContainsPrefix(poolCidr, pfx(this.ds.layout.blockCidrOfKey(x.key)));
        } catch {
          return false;
        }
      });
      if (unread) throw new IpamError('CORRUPT', `pool ${name}: block ${unread.key} cannot be read (${unread.problem}); fix or delete it first`);
      const blocks = listed.blocks.filter((b) => b.value.pool === name);
      const used = blocks.reduce((n, b) => n + blockCounts(b.value).allocated, 0);
      if (used > 0) throw new IpamError('IN_USE', `pool ${name} still has ${used} allocated addresses; release them first (or disable the pool)`);
      const affs = (await this.ds.affinities()).filter((a) => blocks.some((b) => b.value.cidr === a.value.cidr));
      const setRev = await this.ds.poolSetRevision();
      const r = await this.store.txn(
        [
          { key: kv.key, modRevision: kv.modRevision },
          { key: this.ds.keys.poolSet, modRevision: setRev },
          ...blocks.map((b) => ({ key: this.ds.keys.block(b.value.cidr), modRevision: b.rev })),
          ...affs.map((a) => ({ key: this.ds.keys.affinity(a.value.host, a.value.cidr), modRevision: a.rev })),
        ],
        [
          { type: 'delete', key: kv.key },
          { type: 'put', key: this.ds.keys.poolSet, value: `-${name}` },
          ...blocks.map((b) => ({ type: 'delete' as const, key: this.ds.keys.block(b.value.cidr) })),
          ...affs.map((a) => ({ type: 'delete' as const, key: this.ds.keys.affinity(a.value.host, a.value.cidr) })),
        ],
      );
      if (r.succeeded) return;
    }
    throw new IpamError('CONTENTION', `pool ${name} changed concurrently too many times; try again`);
  }

  async setHost(host: Host): Promise<Host> {
    const h = validateHost(host);
    await this.store.put(this.ds.keys.host(h.name), this.ds.layout.encodeHost(h));
    return h;
  }

  async getHost(name: string): Promise<Host | undefined> {
    return this.ds.host(name);
  }

  private async requireHost(name: string): Promise<Host> {
    const h = await this.ds.host(name);
    if (!h) throw new IpamError('UNKNOWN_HOST', `host "${name}" is not known: register it first (ipam host set --name ${name} --os linux|windows)`);
    return h;
  }

  private async context(hostName: string): Promise<Ctx> {
    const [config, pools, host] = await Promise.all([this.ds.config(), this.ds.pools(), this.requireHost(hostName)]);
    this.ds.layout.checkHost?.(host, config.value);
    return { config: config.value, pools, host, now: this.now(), cooldownMs: config.value.ipCooldownSeconds * 1000 };
  }

  // ---- automatic assignment -----------------------------------------------------------------------------------

  /** Assign `num4` IPv4 and `num6` IPv6 addresses to a host (see the file comment for the order). */
  autoAssign(args: AutoAssignArgs): Promise<AssignResult> {
    for (const [f, n] of [['num4', args.num4], ['num6', args.num6], ['maxBlocks', args.maxBlocks]] as const) {
      if (n !== undefined && (!Number.isInteger(n) || n < 0)) {
        return Promise.reject(new IpamError('INVALID', `${f} must be a whole number >= 0, got ${n}`));
      }
    }
    if (args.use !== undefined && args.use !== 'Workload' && args.use !== 'Tunnel') {
      return Promise.reject(new IpamError('INVALID', `use must be Workload or Tunnel, got ${JSON.stringify(args.use)}`));
    }
    return this.assignBatcher.submit(args.host, args);
  }

  private async assignBatch(hostName: string, items: AutoAssignArgs[]): Promise<(AssignResult | Error)[]> {
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const ctx = await this.context(hostName).catch((e) => e as Error);
      if (ctx instanceof Error) return items.map(() => ctx);
      const pass = new Pass(this.ds);
      const results: (AssignResult | Error)[] = [];
      for (const item of items) {
        try {
          results.push(await this.assignOne(pass, ctx, item));
        } catch (e) {
          if (!(e instanceof IpamError)) throw e;
          results.push(e);
        }
      }
      if (await pass.commit()) return results;
    }
    const err = new IpamError('CONTENTION', `host ${hostName}: blocks kept changing underneath ${this.maxRetries} attempts; try again`);
    return items.map(() => err);
  }

  /** Candidate pools for a request, in name order; errors say why there are none. */
  private candidatePools(ctx: Ctx, family: Family, item: AutoAssignArgs): Pool[] {
    const use = item.use ?? 'Workload';
    const ofFamily = ctx.pools.filter((p) => pfx(p.cidr).family === family);
    if (item.pools && item.pools.length) {
      const chosen: Pool[] = [];
      for (const want of item.pools) {
        const p = ctx.pools.find((x) => x.name === want || x.cidr === want);
        if (!p) throw new IpamError('NO_POOL', `pool ${want} does not exist`);
        if (p.disabled) throw new IpamError('POOL_DISABLED', `pool ${p.name} (${p.cidr}) is disabled`);
        if (pfx(p.cidr).family !== family) continue;
        if (!p.allowedUses.includes(use)) throw new IpamError('NO_POOL_FOR_USE', `pool ${p.name} does not allow use ${use}`);
        chosen.push(p);
      }
      if (chosen.length === 0) throw new IpamError('NO_POOL', `none of the requested pools (${item.pools.join(', ')}) is IPv${family}`);
      return chosen.sort((a, b) => (a.name < b.name ? -1 : 1));
    }
    if (ofFamily.length === 0) throw new IpamError('NO_POOL', `no IPv${family} pool is configured`);
    const enabled = ofFamily.filter((p) => !p.disabled);
    if (enabled.length === 0) throw new IpamError('POOL_DISABLED', `every IPv${family} pool is disabled`);
    const selected = enabled.filter((p) => parseSelector(p.nodeSelector)(ctx.host.labels));
    if (selected.length === 0) throw new IpamError('NO_POOL', `no IPv${family} pool's node selector matches host ${ctx.host.name}`);
    const usable = selected.filter((p) => p.allowedUses.includes(use));
    if (usable.length === 0) throw new IpamError('NO_POOL_FOR_USE', `no IPv${family} pool for host ${ctx.host.name} allows use ${use}`);
    return usable;
  }

  private async assignOne(pass: Pass, ctx: Ctx, item: AutoAssignArgs): Promise<AssignResult> {
    const result: AssignResult = { ipv4: [], ipv6: [], messages: [] };
    await this.requireReadableHandle(pass, item.handle);
    const families: [Family, number][] = [[4, item.num4 ?? 0], [6, item.num6 ?? 0]];
    // Validate both families before allocating anything, so a bad request changes nothing.
    const poolsByFamily = new Map<Family, Pool[]>();
    for (const [family, n] of families) if (n > 0) poolsByFamily.set(family, this.candidatePools(ctx, family, item));
    for (const [family, n] of families) {
      if (n <= 0) continue;
      const out = family === 4 ? result.ipv4 : result.ipv6;
      await this.assignFamily(pass, ctx, item, family, n, poolsByFamily.get(family)!, out, result.messages);
    }
    return result;
  }

  /** A request with a handle the layout refuses fails before anything is allocated (its count is never rewritten). */
  private async requireReadableHandle(pass: Pass, handle: string | undefined): Promise<void> {
    if (!handle) return;
    const problem = await pass.handleProblem(handle);
    if (problem !== undefined) throw unreadable(`handle ${handle}: ${this.ds.keys.handle(handle)}`, problem);
  }

  private attrFor(ctx: Ctx, item: AutoAssignArgs, pool: Pool): AllocationAttr {
    const a: AllocationAttr = { handle: item.handle ?? null, host: ctx.host.name, natOutgoing: pool.natOutgoing };
    if (item.attrs && Object.keys(item.attrs).length) a.attrs = item.attrs;
    return a;
  }

  private async takeFrom(pass: Pass, ctx: Ctx, item: AutoAssignArgs, pool: Pool, block: BlockRecord, n: number, out: AssignedIP[]): Promise<number> {
    const ords = allocate(block, n, this.attrFor(ctx, item, pool), ctx.now, ctx.cooldownMs);
    if (ords.length === 0) return 0;
    pass.markBlock(block);
    const prefix = pfx(block.cidr);
    for (const o of ords) {
      out.push({ ip: formatIP(ipAt(prefix, o)), family: prefix.family, prefixLen: prefix.len, pool: pool.name, block: block.cidr });
    }
    if (item.handle) await pass.adjustHandle(item.handle, block.cidr, ords.length);
    return ords.length;
  }

  private async assignFamily(
    pass: Pass,
    ctx: Ctx,
    item: AutoAssignArgs,
    family: Family,
    want: number,
    pools: Pool[],
    out: AssignedIP[],
    messages: string[],
  ): Promise<void> {
    const host = ctx.host;
    const poolOf = (b: BlockRecord): Pool | undefined => pools.find((p) => p.name === b.pool);
    let left = want;
    const reasons: string[] = [];

    // (1) The host's own blocks in these pools: the one that last had room first, then pool and address order.
    // Blocks are loaded lazily, so a host with many full blocks does not read them all for every pod.
    const affine = await this.affineSet(pass, ctx);
    const poolIndex = (ref: AffinityRef) => pools.findIndex((p) => prefixContainsPrefix(pfx(p.cidr), ref.prefix));
    const hint = this.roomHint.get(host.name);
    const own = affine.refs
      .filter((r) => poolIndex(r) >= 0)
      .sort((a, b) => Number(b.cidr === hint) - Number(a.cidr === hint) || poolIndex(a) - poolIndex(b));
    for (const ref of own) {
      if (left === 0) break;
      // A block seen full at its current revision is still full: skip it without reading it.
      if (this.fullAt.get(ref.cidr) === (await this.ds.blockRevision(ref.cidr))) continue;
      const b = await affine.block(ref);
      const pool = b && poolOf(b);
      if (!pool) continue;
      left -= await this.takeFrom(pass, ctx, item, pool, b, left, out);
      if (b.unallocated.length) this.roomHint.set(host.name, b.cidr);
      else if (!pass.isDirty(b.cidr)) this.fullAt.set(b.cidr, pass.revOf(b.cidr));
    }

    // (2) Claim new blocks.
    let blockLimitHit = false;
    if (left > 0) {
      const limit = item.maxBlocks ?? ctx.config.maxBlocksPerHost;
      if (!ctx.config.autoAllocateBlocks) reasons.push('automatic block allocation is off');
      else {
        while (left > 0) {
          if (limit > 0 && affine.count >= limit) {
            blockLimitHit = true;
            reasons.push(`host ${host.name} has reached its limit of ${limit} blocks`);
            break;
          }
          const claimed = await this.claimNewBlock(pass, ctx, pools, affine, reasons);
          if (!claimed) break;
          affine.add(claimed);
          left -= await this.takeFrom(pass, ctx, item, poolOf(claimed)!, claimed, left, out);
          if (claimed.unallocated.length) this.roomHint.set(host.name, claimed.cidr);
        }
      }
    }

    // (3) Borrow single addresses from other hosts' blocks, where allowed. The block limit does not fall back here.
    if (left > 0 && !blockLimitHit) {
      if (host.os === 'windows') reasons.push('Windows hosts never borrow addresses from other hosts\' blocks');
      else if (ctx.config.strictAffinity) reasons.push('strict affinity is on, so no addresses are borrowed');
      else {
        const all = await pass.allBlocks();
        const candidates = all
          .filter((b) => poolOf(b) && b.borrowable && affineHost(b) !== host.name)
          .sort((a, b) => pools.indexOf(poolOf(a)!) - pools.indexOf(poolOf(b)!) || (a.cidr < b.cidr ? -1 : 1));
        for (const b of candidates) {
          if (left === 0) break;
          left -= await this.takeFrom(pass, ctx, item, poolOf(b)!, b, left, out);
        }
        if (left > 0) reasons.push(`the IPv${family} pools are exhausted (${pools.map((p) => p.cidr).join(', ')})`);
      }
    }

    if (left > 0) {
      messages.push(`assigned ${want - left} of ${want} requested IPv${family} addresses: ${reasons.join('; ') || 'no free addresses'}`);
    }
  }

  /** The host's affinities, read once per pass; blocks behind them are loaded only when needed. */
  private async affineSet(pass: Pass, ctx: Ctx): Promise<AffineSet> {
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
  private async needsHostReservation(affine: AffineSet, pool: Pool, os: Host['os']): Promise<boolean> {
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
  private async claimNewBlock(pass: Pass, ctx: Ctx, pools: Pool[], affine: AffineSet, reasons: string[]): Promise<BlockRecord | undefined> {
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
  private async claim(pass: Pass, ctx: Ctx, affine: AffineSet, pool: Pool, cidr: Prefix, hostReservation: boolean): Promise<BlockRecord | undefined> {
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

  // ---- specific addresses -----------------------------------------------------------------------------------

  /** Assign one given address to a host. Claims its block if nobody has; borrows only where allowed. */
  async assignIP(args: { host: string; ip: string; handle?: string; attrs?: Record<string, string> }): Promise<AssignedIP> {
    const ip = parseIP(args.ip);
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const ctx = await this.context(args.host);
      const pool = ctx.pools.find((p) => prefixContainsIP(pfx(p.cidr), ip));
      if (!pool) throw new IpamError('NO_POOL', `${args.ip} is not in any pool`);
      const cidr = prefixOf(ip, pool.blockSize);
      const pass = new Pass(this.ds);
      await this.requireReadableHandle(pass, args.handle);
      let block = await pass.block(cidr.toString());
      const problem = pass.blockProblem(cidr.toString());
      if (problem !== undefined) throw unreadable(`${args.ip}: its block ${this.ds.keys.block(cidr.toString())}`, problem);
      if (!block) {
        const affine = await this.affineSet(pass, ctx);
        const limit = ctx.config.maxBlocksPerHost;
        if (limit > 0 && affine.count >= limit) throw new IpamError('IN_USE', `host ${ctx.host.name} has reached its limit of ${limit} blocks`);
        const needsHostReservation = await this.needsHostReservation(affine, pool, ctx.host.os);
        block = await this.claim(pass, ctx, affine, pool, cidr, needsHostReservation);
        if (!block) continue; // lost a race for the block; look again
      }
      const owner = affineHost(block);
      if (owner !== ctx.host.name) {
        if (!block.borrowable) throw new IpamError('NOT_BORROWABLE', `${args.ip} is in block ${block.cidr} of Windows host ${owner ?? '(none)'}, which is never borrowed from`);
        if (ctx.host.os === 'windows') throw new IpamError('NOT_BORROWABLE', `Windows host ${ctx.host.name} cannot borrow ${args.ip} from block ${block.cidr}`);
        if (ctx.config.strictAffinity) throw new IpamError('NOT_BORROWABLE', `strict affinity is on and block ${block.cidr} belongs to ${owner ?? 'no host'}`);
      }
      const ordinal = ordinalOf(block, ip);
      if (block.reserved.includes(ordinal)) throw new IpamError('IN_USE', `${args.ip} is reserved in block ${block.cidr}`);
      const attr: AllocationAttr = { handle: args.handle ?? null, host: ctx.host.name, natOutgoing: pool.natOutgoing };
      if (args.attrs && Object.keys(args.attrs).length) attr.attrs = args.attrs;
      if (!allocateOrdinal(block, ordinal, attr)) {
        const idx = block.allocations[ordinal];
        const holder = idx === null ? 'cooling down' : `held by handle ${block.attributes[idx].handle ?? '(none)'}`;
        throw new IpamError('IN_USE', `${args.ip} is already allocated (${holder})`);
      }
      pass.markBlock(block);
      if (args.handle) await pass.adjustHandle(args.handle, block.cidr, 1);
      if (await pass.commit()) return { ip: formatIP(ip), family: ip.family, prefixLen: pool.blockSize, pool: pool.name, block: block.cidr };
    }
    throw new IpamError('CONTENTION', `block of ${args.ip} kept changing underneath ${this.maxRetries} attempts; try again`);
  }

  // ---- release ------------------------------------------------------------------------------------------------

  /** Release addresses. Addresses that were not allocated are returned as such (not an error). */
  async releaseIPs(ips: string[]): Promise<ReleaseResult> {
    for (const t of ips) parseIP(t); // bad text fails the whole call before anything changes
    return this.releaseBatcher.submit('release', { ips });
  }

  /** Release every address held by a handle; returns them (empty when the handle holds none). Idempotent. */
  async releaseByHandle(handle: string): Promise<string[]> {
    return (await this.releaseBatcher.submit('release', { handle })).released;
  }

  /**
   * Release batch. A request that needs a record the layout refuses (its handle, a block the handle counts, the
   * block of an address) fails on its own and changes nothing, as libcalico-go's ReleaseIPs/ReleaseByHandle return
   * the error of a block they cannot read; the other requests of the batch go on.
   */
  private async releaseBatch(items: ReleaseReq[]): Promise<(ReleaseOut | Error)[]> {
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const [config, pools] = await Promise.all([this.ds.config(), this.ds.pools()]);
      const now = this.now();
      const cooldownMs = config.value.ipCooldownSeconds * 1000;
      const pass = new Pass(this.ds);
      const touched = new Map<string, BlockRecord>();
      const results: (ReleaseOut | Error)[] = [];
      const releaseIn = async (block: BlockRecord, ordinal: number, out: ReleaseOut, text: string): Promise<void> => {
        const attr = release(block, ordinal, now, cooldownMs);
        if (!attr) {
          out.notAllocated.push(text);
          return;
        }
        out.released.push(text);
        touched.set(block.cidr, block);
        pass.markBlock(block);
        if (attr.handle) await pass.adjustHandle(attr.handle, block.cidr, -1);
      };
      for (const item of items) {
        const out: ReleaseOut = { released: [], notAllocated: [] };
        if ('handle' in item) {
          const handleProblem = await pass.handleProblem(item.handle);
          if (handleProblem !== undefined) {
            results.push(unreadable(`release of handle ${item.handle}: ${this.ds.keys.handle(item.handle)}`, handleProblem));
            continue;
          }
          const rec = await pass.handle(item.handle);
          const blocks: BlockRecord[] = [];
          let refused: Error | undefined;
          for (const cidr of Object.keys(rec?.blocks ?? {})) {
            const block = await pass.block(cidr);
            const problem = pass.blockProblem(cidr);
            if (problem !== undefined) refused ??= unreadable(`release of handle ${item.handle}: its block ${this.ds.keys.block(cidr)}`, problem);
            if (block) blocks.push(block);
          }
          if (refused) {
            results.push(refused);
            continue;
          }
          results.push(out);
          for (const block of blocks) {
            const prefix = pfx(block.cidr);
            for (const o of ordinalsOfHandle(block, item.handle)) await releaseIn(block, o, out, formatIP(ipAt(prefix, o)));
          }
          continue;
        }
        const found: [IP, BlockRecord | undefined][] = [];
        let refused: Error | undefined;
        for (const text of item.ips) {
          const ip = parseIP(text);
          const block = await this.blockOf(pass, pools, ip);
          if (typeof block === 'string') refused ??= unreadable(`release of ${formatIP(ip)}: its block`, block);
          else found.push([ip, block]);
        }
        if (refused) {
          results.push(refused);
          continue;
        }
        results.push(out);
        for (const [ip, block] of found) {
          if (!block) out.notAllocated.push(formatIP(ip));
          else await releaseIn(block, ordinalOf(block, ip), out, formatIP(ip));
        }
      }
      for (const block of touched.values()) {
        collectAttributes(block);
        if (cooldownMs > 0) expireCooldowns(block, now, cooldownMs);
        // An empty block nobody is affine to is deleted; an empty affine block stays with its host.
        if (block.affinity === null && isEmpty(block)) pass.dropBlock(block.cidr);
      }
      if (await pass.commit()) return results;
    }
    const err = new IpamError('CONTENTION', `release: blocks kept changing underneath ${this.maxRetries} attempts; try again`);
    return items.map(() => err);
  }

  /** The block holding an address; a string (key: problem) when that block is in the store but cannot be read. */
  private async blockOf(pass: Pass, pools: Pool[], ip: IP): Promise<BlockRecord | string | undefined> {
    const pool = pools.find((p) => prefixContainsIP(pfx(p.cidr), ip));
    if (pool) {
      const cidr = prefixOf(ip, pool.blockSize).toString();
      const b = await pass.block(cidr);
      if (b) return b;
      const problem = pass.blockProblem(cidr);
      if (problem !== undefined) return `${this.ds.keys.block(cidr)}: ${problem}`;
    }
    // The pool may be gone or resized: fall back to a scan.
    return (await pass.allBlocks()).find((b) => prefixContainsIP(pfx(b.cidr), ip));
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

  // ---- views ----------------------------------------------------------------------------------------------------

  async blocks(host?: string): Promise<BlockInfo[]> {
    const all = await this.ds.blocks();
    return all
      .map((v) => v.value)
      .filter((b) => host === undefined || affineHost(b) === host)
      .map((b) => {
        const c = blockCounts(b);
        return { cidr: b.cidr, pool: b.pool, affinity: affineHost(b), os: b.os, borrowable: b.borrowable, ...c };
      });
  }

  /** What the host announces: its confirmed affine blocks, plus host routes for addresses it holds elsewhere. */
  async routes(host: string): Promise<RouteView> {
    const pools = await this.ds.pools();
    const exported = (cidr: Prefix): boolean => {
      const p = pools.find((x) => prefixContainsPrefix(pfx(x.cidr), cidr));
      return !p || !p.disableBGPExport;
    };
    const aggregates = (await this.ds.affinities(host))
      .filter((a) => a.value.state === 'confirmed' && exported(pfx(a.value.cidr)))
      .map((a) => pfx(a.value.cidr));
    const hosts: Prefix[] = [];
    for (const { value: b } of await this.ds.blocks()) {
      if (affineHost(b) === host) continue;
      const prefix = pfx(b.cidr);
      if (!exported(prefix)) continue;
      b.allocations.forEach((idx, o) => {
        if (idx !== null && b.attributes[idx].host === host) hosts.push(hostPrefix(ipAt(prefix, o)));
      });
    }
    const sortText = (ps: Prefix[]) => ps.sort(comparePrefix).map(String);
    return { aggregates: sortText(aggregates), hosts: sortText(hosts) };
  }
}

