// Release: addresses by value or by handle, batched into one pass (one transaction) for all callers; blocks left
// empty and without an owner are deleted. Its own file as the undoing of assignment (assign.ts).
import { formatIP, ipAt, parseIP, prefixContainsIP, prefixOf, type IP } from '../net/ip.ts';
import { Batcher } from './batcher.ts';
import { collectAttributes, expireCooldowns, isEmpty, ordinalOf, ordinalsOfHandle, release } from './block.ts';
import { pfx } from './cidr-cache.ts';
import { Pass, type IpamStore } from './datastore.ts';
import { IpamError, unreadable, type BlockRecord, type Pool, type ReleaseResult } from './types.ts';

type ReleaseReq = { ips: string[] } | { handle: string };
type ReleaseOut = { released: string[]; notAllocated: string[] };

/** Releases of addresses and handles, for every host. */
export class Releaser {
  private readonly batcher: Batcher<ReleaseReq, ReleaseOut>;

  constructor(
    private readonly ds: IpamStore,
    private readonly now: () => number,
    private readonly maxRetries: number,
  ) {
    this.batcher = new Batcher((_k, items) => this.releaseBatch(items));
  }

  /** Release addresses. Addresses that were not allocated are returned as such (not an error). */
  async releaseIPs(ips: string[]): Promise<ReleaseResult> {
    for (const t of ips) parseIP(t); // bad text fails the whole call before anything changes
    return this.batcher.submit('release', { ips });
  }

  /** Release every address held by a handle; returns them (empty when the handle holds none). Idempotent. */
  async releaseByHandle(handle: string): Promise<string[]> {
    return (await this.batcher.submit('release', { handle })).released;
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
}
