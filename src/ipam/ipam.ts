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
//   time. Other writers may still use the phases; claim.ts finishes their pending claims (loadAffine).
//
//   The parts: assign.ts (the order above, and assignIP), claim.ts (block claims and affinities), release.ts,
//   batcher.ts (the per-host batching), views.ts (read-only summaries). This class holds the pools, the settings
//   and the hosts, and is the one entry point.
import { prefixContainsPrefix, prefixesOverlap, type Prefix } from '../net/ip.ts';
import type { Store } from '../store/types.ts';
import { Assigner } from './assign.ts';
import { blockCounts } from './block.ts';
import { pfx } from './cidr-cache.ts';
import { BlockClaims } from './claim.ts';
import { IpamStore } from './datastore.ts';
import type { Layout } from './layout.ts';
import { Releaser } from './release.ts';
import { validateConfig, validateHost, validatePool } from './validate.ts';
import { blockInfos, hostRoutes } from './views.ts';
import {
  IpamError,
  type AssignedIP,
  type AssignResult,
  type AutoAssignArgs,
  type BlockInfo,
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

export class Ipam {
  readonly ds: IpamStore;
  private readonly maxRetries: number;
  private readonly claims: BlockClaims;
  private readonly assigner: Assigner;
  private readonly releaser: Releaser;

  constructor(readonly store: Store, opts: IpamOptions = {}) {
    this.ds = new IpamStore(store, opts.layout, { warn: opts.warn ?? ((m) => process.emitWarning(m, 'IpamWarning')), resolved: opts.resolved });
    const now = opts.now ?? Date.now;
    this.maxRetries = opts.maxRetries ?? 32;
    this.claims = new BlockClaims(this.ds, store, now, this.maxRetries, opts.claim ?? 'atomic');
    this.assigner = new Assigner(this.ds, this.claims, this.maxRetries);
    this.releaser = new Releaser(this.ds, now, this.maxRetries);
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

  // ---- assignment (assign.ts) -----------------------------------------------------------------------------------

  /** Assign `num4` IPv4 and `num6` IPv6 addresses to a host (see the file comment for the order). */
  autoAssign(args: AutoAssignArgs): Promise<AssignResult> {
    return this.assigner.autoAssign(args);
  }

  /** Assign one given address to a host. Claims its block if nobody has; borrows only where allowed. */
  assignIP(args: { host: string; ip: string; handle?: string; attrs?: Record<string, string> }): Promise<AssignedIP> {
    return this.assigner.assignIP(args);
  }

  // ---- release (release.ts) -------------------------------------------------------------------------------------

  /** Release addresses. Addresses that were not allocated are returned as such (not an error). */
  releaseIPs(ips: string[]): Promise<ReleaseResult> {
    return this.releaser.releaseIPs(ips);
  }

  /** Release every address held by a handle; returns them (empty when the handle holds none). Idempotent. */
  releaseByHandle(handle: string): Promise<string[]> {
    return this.releaser.releaseByHandle(handle);
  }

  // ---- affinities (claim.ts) ------------------------------------------------------------------------------------

  /** Claim every block of `cidr` for a host (`ipam claim`); blocks someone else has are listed as failed. */
  claimAffinity(cidrText: string, hostName: string): Promise<{ claimed: string[]; failed: string[] }> {
    return this.claims.claimAffinity(cidrText, hostName);
  }

  /** Give up a host's affinity to every block of `cidr` (empty blocks are deleted). */
  releaseAffinity(cidrText: string, hostName: string, opts: { requireEmpty?: boolean } = {}): Promise<{ released: string[] }> {
    return this.claims.releaseAffinity(cidrText, hostName, opts);
  }

  // ---- views (views.ts) -----------------------------------------------------------------------------------------

  blocks(host?: string): Promise<BlockInfo[]> {
    return blockInfos(this.ds, host);
  }

  /** What the host announces: its confirmed affine blocks, plus host routes for addresses it holds elsewhere. */
  routes(host: string): Promise<RouteView> {
    return hostRoutes(this.ds, host);
  }
}
