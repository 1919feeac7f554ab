// Assignment: automatic (the host's own blocks, then a new claim, then borrowing) and of one given address. Requests
// for one host are batched into one pass, one transaction. Its own file as the allocation order, apart from the
// claims (claim.ts) it makes and the releases (release.ts) that undo it.
import { formatIP, ipAt, parseIP, prefixContainsIP, prefixContainsPrefix, prefixOf, type Family } from '../net/ip.ts';
import { Batcher } from './batcher.ts';
import { affineHost, allocate, allocateOrdinal, ordinalOf } from './block.ts';
import { pfx } from './cidr-cache.ts';
import type { AffinityRef, BlockClaims, Ctx } from './claim.ts';
import { Pass, type IpamStore } from './datastore.ts';
import { parseSelector } from '../calico/selector.ts';
import { validateAutoAssignArgs } from './validate.ts';
import {
  IpamError,
  unreadable,
  type AllocationAttr,
  type AssignedIP,
  type AssignResult,
  type AutoAssignArgs,
  type BlockRecord,
  type Pool,
} from './types.ts';

/** Automatic and given-address assignment for the hosts' requests. */
export class Assigner {
  /** Per host, the affine block that last had room: tried first, so a full block is not re-read for every pod. */
  private readonly roomHint = new Map<string, string>();
  /** Block -> the revision at which it was read with no free address. */
  private readonly fullAt = new Map<string, number>();
  private readonly batcher: Batcher<AutoAssignArgs, AssignResult>;

  constructor(
    private readonly ds: IpamStore,
    private readonly claims: BlockClaims,
    private readonly maxRetries: number,
  ) {
    this.batcher = new Batcher((host, items) => this.assignBatch(host, items));
  }

  /** Assign `num4` IPv4 and `num6` IPv6 addresses to a host (see ipam.ts's file comment for the order). */
  autoAssign(args: AutoAssignArgs): Promise<AssignResult> {
    try {
      validateAutoAssignArgs(args);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.batcher.submit(args.host, args);
  }

  private async assignBatch(hostName: string, items: AutoAssignArgs[]): Promise<(AssignResult | Error)[]> {
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const ctx = await this.claims.context(hostName).catch((e) => e as Error);
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
    const affine = await this.claims.affineSet(pass, ctx);
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
          const claimed = await this.claims.claimNewBlock(pass, ctx, pools, affine, reasons);
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

  /** Assign one given address to a host. Claims its block if nobody has; borrows only where allowed. */
  async assignIP(args: { host: string; ip: string; handle?: string; attrs?: Record<string, string> }): Promise<AssignedIP> {
    const ip = parseIP(args.ip);
    for (let attempt = 0; attempt < this.maxRetries; attempt++) {
      const ctx = await this.claims.context(args.host);
      const pool = ctx.pools.find((p) => prefixContainsIP(pfx(p.cidr), ip));
      if (!pool) throw new IpamError('NO_POOL', `${args.ip} is not in any pool`);
      const cidr = prefixOf(ip, pool.blockSize);
      const pass = new Pass(this.ds);
      await this.requireReadableHandle(pass, args.handle);
      let block = await pass.block(cidr.toString());
      const problem = pass.blockProblem(cidr.toString());
      if (problem !== undefined) throw unreadable(`${args.ip}: its block ${this.ds.keys.block(cidr.toString())}`, problem);
      if (!block) {
        const affine = await this.claims.affineSet(pass, ctx);
        const limit = ctx.config.maxBlocksPerHost;
        if (limit > 0 && affine.count >= limit) throw new IpamError('IN_USE', `host ${ctx.host.name} has reached its limit of ${limit} blocks`);
        const needsHostReservation = await this.claims.needsHostReservation(affine, pool, ctx.host.os);
        block = await this.claims.claim(pass, ctx, affine, pool, cidr, needsHostReservation);
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
}
