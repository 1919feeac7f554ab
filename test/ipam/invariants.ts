// Consistency checks over IPAM's store records, shared by the model, concurrency and crash tests.
import type { Ipam } from '../../src/ipam/ipam.ts';
import { affineHost, blockCounts } from '../../src/ipam/block.ts';
import { ipAt, parsePrefix } from '../../src/net/ip.ts';

/**
 * Check the store's IPAM records against each other and, when given, against a model of who holds what.
 * Throws an Error naming the first inconsistency. `allowPending`: a crash may leave a pending affinity behind
 * (the next allocation of that host finishes or drops it), so crash tests allow them.
 */
export async function checkInvariants(
  ipam: Ipam,
  model: Map<string, { host: string; handle: string }> | undefined,
  hostsOs: Map<string, string>,
  opts: { allowPending?: boolean } = {},
): Promise<Map<string, { host: string; handle: string | null }>> {
  const blocks = await ipam.ds.blocks();
  const seen = new Map<string, { host: string; handle: string | null }>();
  const handleCounts = new Map<string, Map<string, number>>();
  for (const { value: b } of blocks) {
    const c = blockCounts(b);
    if (c.allocated + c.free + c.reserved !== c.size) throw new Error(`block ${b.cidr}: ${JSON.stringify(c)} does not add up`);
    const free = new Set(b.unallocated);
    const reserved = new Set(b.reserved);
    if (free.size !== b.unallocated.length) throw new Error(`block ${b.cidr}: an ordinal is free twice`);
    const prefix = parsePrefix(b.cidr);
    b.allocations.forEach((idx, o) => {
      const states = Number(idx !== null) + Number(free.has(o)) + Number(reserved.has(o));
      if (states !== 1) throw new Error(`block ${b.cidr} ordinal ${o} is in ${states} states`);
      if (idx === null) return;
      const ip = ipAt(prefix, o).toString();
      const attr = b.attributes[idx];
      if (seen.has(ip)) throw new Error(`${ip} held twice`);
      seen.set(ip, { host: attr.host, handle: attr.handle });
      if (b.os === 'windows' && hostsOs.get(attr.host) !== 'windows') throw new Error(`Windows block ${b.cidr} holds ${ip} of Linux host ${attr.host}`);
      if (attr.handle) {
        const m = handleCounts.get(attr.handle) ?? new Map<string, number>();
        m.set(b.cidr, (m.get(b.cidr) ?? 0) + 1);
        handleCounts.set(attr.handle, m);
      }
    });
    if (b.os === 'windows' && b.borrowable) throw new Error(`Windows block ${b.cidr} is borrowable`);
    const owner = affineHost(b);
    if (owner) {
      const aff = await ipam.ds.affinity(owner, b.cidr);
      if (!aff || (aff.value.state !== 'confirmed' && !(opts.allowPending && aff.value.state === 'pending'))) {
        throw new Error(`block ${b.cidr} affine to ${owner} without a confirmed affinity (${aff ? aff.value.state : 'none'})`);
      }
    } else if (c.allocated === 0) throw new Error(`empty non-affine block ${b.cidr} was not deleted`);
  }
  // The store agrees with the model exactly.
  if (model && seen.size !== model.size) throw new Error(`store holds ${seen.size} addresses, model ${model.size}`);
  for (const [ip, m] of model ?? []) {
    const s = seen.get(ip);
    if (!s || s.host !== m.host || (s.handle ?? '') !== m.handle) throw new Error(`${ip}: store ${JSON.stringify(s)} vs model ${JSON.stringify(m)}`);
  }
  // Handle records count exactly what blocks hold.
  const handles = await ipam.ds.handles();
  if (handles.length !== handleCounts.size) throw new Error(`${handles.length} handle records, ${handleCounts.size} handles in blocks`);
  for (const h of handles) {
    const m = handleCounts.get(h.handle);
    for (const [cidr, n] of Object.entries(h.blocks)) if (m?.get(cidr) !== n) throw new Error(`handle ${h.handle} says ${n} in ${cidr}, blocks say ${m?.get(cidr)}`);
  }
  // Confirmed affinities point at blocks affine to their host.
  for (const a of await ipam.ds.affinities()) {
    if (a.value.state !== 'confirmed' && opts.allowPending && a.value.state === 'pending') continue;
    if (a.value.state !== 'confirmed') throw new Error(`affinity ${a.value.host}/${a.value.cidr} left ${a.value.state}`);
    const b = blocks.find((x) => x.value.cidr === a.value.cidr);
    if (!b || affineHost(b.value) !== a.value.host) throw new Error(`affinity ${a.value.host}/${a.value.cidr} has no matching block`);
  }
  return seen;
}
