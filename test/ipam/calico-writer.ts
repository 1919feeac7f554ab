// A second writer that follows libcalico-go's IPAM algorithm (lib/ipam/ipam.go, ipam_block_reader_writer.go) on
// Calico's keys, one etcd operation at a time as calico-node does, to contend with blockspeaker in tests:
//   assign: own affine blocks -> claim (pending affinity, create block, confirm) -> borrow (only without
//           strict_affinity); per block: raise the handle's count first, then update the block on its revision
//           (sequenceNumber + 1), and lower the handle again if the block update conflicts.
//   release by handle: update each block on its revision (delete it when empty and not affine), then lower the
//           handle's count.
import type { KeyValue, Store } from '../../src/store/types.ts';
import { parsePrefix, prefixContainsPrefix, subnetAt, subnetCount, ipAt, formatIP } from '../../src/net/ip.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import {
  attributeJson,
  decodeAffinity,
  decodeBlock,
  decodeHandle,
  decodeIpamConfig,
  encodeAffinity,
  encodeBlock,
  encodeHandle,
  goTime,
  isWindowsReserved,
  type CalicoAttribute,
  type CalicoBlock,
} from '../../src/calico/ipam-model.ts';

export class CalicoWriter {
  /** Conflicts met (compare-and-swap failures), to show the test really contended. */
  conflicts = 0;
  constructor(
    readonly store: Store,
    readonly host: string,
    readonly pool: string,
    readonly blockSize: number,
  ) {}

  private async strict(): Promise<boolean> {
    const kv = await this.store.get(calicoKeys.config);
    return kv ? decodeIpamConfig(kv.key, kv.value).strictAffinity : false;
  }

  private async blocks(): Promise<{ kv: KeyValue; b: CalicoBlock }[]> {
    return (await this.store.list(calicoKeys.blocks)).map((kv) => ({ kv, b: decodeBlock(kv.key, kv.value) }));
  }

  private async cas(key: string, rev: number, value: string | null): Promise<boolean> {
    const r = await this.store.txn([{ key, modRevision: rev }], [value === null ? { type: 'delete', key } : { type: 'put', key, value }]);
    if (!r.succeeded) this.conflicts++;
    return r.succeeded;
  }

  private async adjustHandle(handle: string, cidr: string, delta: number): Promise<void> {
    const key = calicoKeys.handle(handle);
    for (;;) {
      const kv = await this.store.get(key);
      const block = kv ? decodeHandle(key, kv.value).block : new Map<string, number>();
      const n = (block.get(cidr) ?? 0) + delta;
      if (n > 0) block.set(cidr, n);
      else block.delete(cidr);
      if (await this.cas(key, kv?.modRevision ?? 0, block.size ? encodeHandle(block) : null)) return;
    }
  }

  /** Take up to n ordinals from the block (Calico's allocationBlock.autoAssign), then handle first, block second. */
  private async assignFrom(kv: KeyValue, b: CalicoBlock, n: number, handle: string): Promise<string[] | undefined> {
    const take = b.unallocated.slice(0, n);
    if (take.length === 0) return [];
    const attr: CalicoAttribute = { handleId: handle, secondary: new Map([['node', this.host]]), alternateOwnerAttrs: null, releasedAt: null, unknown: [] };
    let idx = b.attributes.findIndex((a) => attributeJson(a) === attributeJson(attr));
    if (idx < 0) idx = b.attributes.push(attr) - 1;
    b.sequenceNumberForAllocation ??= new Map();
    for (const o of take) {
      b.allocations[o] = idx;
      b.sequenceNumberForAllocation.set(String(o), b.sequenceNumber);
    }
    b.unallocated = b.unallocated.slice(take.length);
    await this.adjustHandle(handle, b.cidr, take.length);
    b.sequenceNumber += 1n;
    if (await this.cas(kv.key, kv.modRevision, encodeBlock(b))) {
      const p = parsePrefix(b.cidr);
      return take.map((o) => formatIP(ipAt(p, o)));
    }
    await this.adjustHandle(handle, b.cidr, -take.length);
    return undefined; // conflict: the caller re-reads
  }

  private async claim(): Promise<boolean> {
    const pool = parsePrefix(this.pool);
    const existing = new Set((await this.blocks()).map((x) => x.b.cidr));
    for (let i = 0; i < subnetCount(pool, this.blockSize); i++) {
      const cidr = subnetAt(pool, this.blockSize, i).toString();
      if (existing.has(cidr)) continue;
      const affKey = calicoKeys.affinity(this.host, cidr);
      const made = await this.store.txn([{ key: affKey, modRevision: 0 }], [{ type: 'put', key: affKey, value: encodeAffinity('pending') }]);
      if (!made.succeeded) continue;
      const size = 2 ** (32 - this.blockSize);
      const now = Date.now();
      const block: CalicoBlock = {
        cidr, affinity: `host:${this.host}`, affinityClaimTime: goTime(now), allocations: new Array(size).fill(null),
        unallocated: Array.from({ length: size }, (_, o) => o), attributes: [], sequenceNumber: BigInt(now) * 1_000_000n,
        sequenceNumberForAllocation: new Map(), deleted: false, unknown: [],
      };
      const bk = calicoKeys.block(cidr);
      if ((await this.store.txn([{ key: bk, modRevision: 0 }], [{ type: 'put', key: bk, value: encodeBlock(block) }])).succeeded) {
        await this.store.txn([{ key: affKey, modRevision: made.revision }], [{ type: 'put', key: affKey, value: encodeAffinity('confirmed') }]);
        return true;
      }
      this.conflicts++;
      await this.store.txn([{ key: affKey, modRevision: made.revision }], [{ type: 'delete', key: affKey }]);
    }
    return false;
  }

  /** Assign up to n addresses to `handle`; returns them (fewer when the pool is exhausted for this host). */
  async assign(n: number, handle: string): Promise<string[]> {
    const out: string[] = [];
    const strict = await this.strict();
    for (let round = 0; out.length < n && round < 200; round++) {
      const all = await this.blocks();
      const mine = [];
      for (const kv of await this.store.list(calicoKeys.hostAffinities(this.host))) {
        const a = decodeAffinity(kv.key, kv.value);
        const x = all.find((y) => y.b.cidr === a.cidr && y.b.affinity === `host:${this.host}`);
        if (a.state === 'confirmed' && x) mine.push(x);
      }
      const withRoom = mine.find((x) => x.b.unallocated.length > 0);
      if (withRoom) {
        out.push(...((await this.assignFrom(withRoom.kv, withRoom.b, n - out.length, handle)) ?? []));
        continue;
      }
      if (await this.claim()) continue;
      if (strict) break;
      const pool = parsePrefix(this.pool);
      const other = all.find((x) => x.b.unallocated.length > 0 && prefixContainsPrefix(pool, parsePrefix(x.b.cidr)));
      if (!other) break;
      out.push(...((await this.assignFrom(other.kv, other.b, n - out.length, handle)) ?? []));
    }
    return out;
  }

  /** Release every address of a handle (Calico's ReleaseByHandle). Returns how many. */
  async releaseByHandle(handle: string): Promise<number> {
    const hkv = await this.store.get(calicoKeys.handle(handle));
    if (!hkv) return 0;
    let released = 0;
    for (const cidr of decodeHandle(hkv.key, hkv.value).block.keys()) {
      for (;;) {
        const kv = await this.store.get(calicoKeys.block(cidr));
        if (!kv) break;
        const b = decodeBlock(kv.key, kv.value);
        let n = 0;
        b.allocations.forEach((a, o) => {
          if (a !== null && b.attributes[a].handleId === handle) {
            b.allocations[o] = null;
            b.unallocated.push(o);
            b.sequenceNumberForAllocation?.delete(String(o));
            n++;
          }
        });
        // drop attributes nothing points at any more (Calico's garbageCollect)
        const used = [...new Set(b.allocations.filter((a): a is number => a !== null))].sort((x, y) => x - y);
        const remap = new Map(used.map((a, i) => [a, i]));
        b.attributes = used.map((a) => b.attributes[a]);
        b.allocations = b.allocations.map((a) => (a === null ? null : remap.get(a)!));
        const empty = b.attributes.every((a) => isWindowsReserved(a)) || b.allocations.every((a) => a === null);
        b.sequenceNumber += 1n;
        const ok = b.affinity === null && empty ? await this.cas(kv.key, kv.modRevision, null) : await this.cas(kv.key, kv.modRevision, encodeBlock(b));
        if (!ok) continue;
        if (n) await this.adjustHandle(handle, cidr, -n);
        released += n;
        break;
      }
    }
    return released;
  }
}
