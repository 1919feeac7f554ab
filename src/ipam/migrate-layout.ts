// Move IPAM from one layout to another (blockspeaker's own keys into Calico's etcd layout, or back): every record
// is read through the source layout and written through the target's, so addresses, handles and affinities keep
// their meaning. Writes only create keys (a target that already holds one of them stops the move before anything is
// written), and the result is read back and compared address by address.
import { formatIP, ipAt, parsePrefix, prefixesOverlap } from '../net/ip.ts';
import type { Op, Store } from '../store/types.ts';
import { IpamStore } from './datastore.ts';
import type { Layout } from './layout.ts';
import { IpamError, type BlockRecord } from './types.ts';

export interface LayoutMigrateResult {
  from: string;
  to: string;
  pools: number;
  blocks: number;
  affinities: number;
  handles: number;
  hosts: number;
  addresses: number;
  verified: true;
}

/** address -> "handle@host" for every allocated address. */
function holders(blocks: BlockRecord[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const b of blocks) {
    const p = parsePrefix(b.cidr);
    b.allocations.forEach((a, o) => {
      if (a !== null) out.set(formatIP(ipAt(p, o)), `${b.attributes[a].handle ?? ''}@${b.attributes[a].host}`);
    });
  }
  return out;
}

export async function migrateLayout(from: { store: Store; layout: Layout }, to: { store: Store; layout: Layout }, opts: { batch?: number } = {}): Promise<LayoutMigrateResult> {
  const src = new IpamStore(from.store, from.layout);
  const dst = new IpamStore(to.store, to.layout);
  const rev0 = await from.store.revision();
  const [config, pools, hosts, blocks, affinities, handles] = await Promise.all([
    src.config(), src.pools(), src.hosts(), src.blocks(), src.affinities(), src.handles(),
  ]);
  const srcBlockKeys = (await from.store.list(src.keys.blocks)).length;
  if (srcBlockKeys !== blocks.length) throw new IpamError('INVALID', `migrate: ${srcBlockKeys - blocks.length} source blocks do not decode; fix them first (see ipam check)`);
  // Nor may an affinity (a node's route) or a handle (how its addresses are released) be left behind unread.
  const [srcAffinityKeys, srcHandleKeys] = await Promise.all([from.store.list(src.keys.allAffinities), from.store.list(src.keys.handles)]);
  if (srcAffinityKeys.length !== affinities.length) throw new IpamError('INVALID', `migrate: ${srcAffinityKeys.length - affinities.length} source affinities do not decode; fix them first`);
  if (srcHandleKeys.length !== handles.length) throw new IpamError('INVALID', `migrate: ${srcHandleKeys.length - handles.length} source handles do not decode; fix them first`);

  const ops: Op[] = [];
  const put = (key: string, value: string) => ops.push({ type: 'put', key, value });
  // Pools: the target may already have the same pool (same name and cidr); any other overlap stops the move.
  const have = await dst.pools();
  let poolsWritten = 0;
  for (const p of pools) {
    const same = have.find((x) => x.name === p.name && x.cidr === p.cidr);
    if (same) continue;
    const clash = have.find((x) => prefixesOverlap(parsePrefix(x.cidr), parsePrefix(p.cidr)) || x.name === p.name);
    if (clash) throw new IpamError('CONFLICT', `migrate: pool ${p.name} (${p.cidr}) clashes with the target's pool ${clash.name} (${clash.cidr})`);
    put(to.layout.keys.pool(p.name), to.layout.encodePool(p));
    poolsWritten++;
  }
  // The IPAM settings: written only where the target has none (a Calico cluster's settings are the cluster's).
  const cfgKv = await to.store.get(to.layout.keys.config);
  if (!cfgKv) put(to.layout.keys.config, to.layout.encodeConfig(config.value, undefined));
  // Hosts: into a layout that reads Calico's Node resources only this program's own registrations; else all.
  const ownHosts = new Set((await from.store.list(src.keys.hosts)).map((kv) => kv.key));
  const moved = hosts.filter((h) => !to.layout.nodes || ownHosts.has(src.keys.host(h.name)));
  for (const h of moved) put(to.layout.keys.host(h.name), to.layout.encodeHost(h));
  for (const { value: b } of blocks) {
    if (b.reserved.length && b.os !== 'windows') {
      throw new IpamError('INVALID', `migrate: block ${b.cidr} reserves ${b.reserved.length} addresses on a Linux host; the target layout cannot say so (only Windows blocks reserve in Calico's)`);
    }
    const { ext: _ext, ...plain } = b;
    put(to.layout.keys.block(b.cidr), to.layout.encodeBlock(plain));
  }
  for (const { value: a } of affinities) put(to.layout.keys.affinity(a.host, a.cidr), to.layout.encodeAffinity(a));
  for (const h of handles) put(to.layout.keys.handle(h.handle), to.layout.encodeHandle(h));

  // Nothing may be there already (config and hosts aside, which are settled above): one existing key stops it all.
  for (const op of ops) {
    if (op.key === to.layout.keys.config) continue;
    const cur = await to.store.get(op.key);
    if (cur && !op.key.startsWith(to.layout.keys.hosts)) throw new IpamError('CONFLICT', `migrate: ${to.store.name} already holds ${op.key}; refusing to write over it`);
  }
  const batch = opts.batch ?? 64;
  for (let i = 0; i < ops.length; i += batch) {
    const part = ops.slice(i, i + batch);
    const guards = part.filter((op) => !op.key.startsWith(to.layout.keys.hosts)).map((op) => ({ key: op.key, modRevision: 0 }));
    const r = await to.store.txn(guards, part);
    if (!r.succeeded) throw new IpamError('CONFLICT', `migrate: ${r.failed?.[0] ?? 'a key'} appeared in ${to.store.name} during the move; ${i} of ${ops.length} writes were made`);
  }
  if ((await from.store.revision()) !== rev0) throw new IpamError('CONFLICT', `migrate: ${from.store.name} changed while it was copied; stop every writer and move again into an empty target`);

  // Verify: the target, read through its layout, holds every address with the same handle and host.
  const want = holders(blocks.map((b) => b.value));
  const got = holders((await dst.blocks()).map((b) => b.value));
  const missing = [...want].filter(([ip, h]) => got.get(ip) !== h);
  if (missing.length) throw new IpamError('CONFLICT', `migrate: verification failed: ${missing.length} addresses differ in the target (first ${missing[0][0]})`);
  return {
    from: `${from.layout.name}:${from.store.name}`,
    to: `${to.layout.name}:${to.store.name}`,
    pools: poolsWritten,
    blocks: blocks.length,
    affinities: affinities.length,
    handles: handles.length,
    hosts: moved.length,
    addresses: want.size,
    verified: true,
  };
}
