// Communities on export (RFC 1997 standard, RFC 8092 large), the way Calico's BGPConfiguration
// prefixAdvertisements work: every advertisement whose CIDR contains the route (equal or longer, BIRD's
// `net ~ cidr`) adds its communities, cumulatively, to every route sent to every peer. Pure: no I/O.
import { type Prefix, parsePrefix, prefixContainsPrefix } from '../net/ip.ts';
import { withAttrs, type LargeCommunity, type PathAttrs } from '../rib/attrs.ts';

/** One prefix advertisement with literal community values ("aa:nn" or "aa:nn:mm"). */
export interface PrefixAdvertisement {
  cidr: string;
  communities: string[];
}

export type Community = { kind: 'standard'; value: number } | { kind: 'large'; value: LargeCommunity };

const U16 = 0xffff;
const U32 = 0xffffffff;

/**
 * "aa:nn" (two 16-bit numbers, RFC 1997) or "aa:nn:mm" (three 32-bit numbers, RFC 8092), as Calico writes
 * them; anything else throws an error saying which form was expected.
 */
export function parseCommunity(text: string): Community {
  const parts = text.split(':');
  if (parts.every((p) => /^\d+$/.test(p))) {
    const n = parts.map(Number);
    if (n.length === 2) {
      if (n[0] > U16 || n[1] > U16) throw new Error(`standard community ${JSON.stringify(text)}: both numbers must be 0..65535`);
      return { kind: 'standard', value: ((n[0] << 16) | n[1]) >>> 0 };
    }
    if (n.length === 3) {
      if (n.some((x) => x > U32)) throw new Error(`large community ${JSON.stringify(text)}: every number must be 0..4294967295`);
      return { kind: 'large', value: [n[0], n[1], n[2]] };
    }
  }
  throw new Error(`${JSON.stringify(text)} is not a community: expected aa:nn (standard) or aa:nn:mm (large)`);
}

export function isCommunityText(text: string): boolean {
  return /^\d+:\d+(:\d+)?$/.test(text);
}

export function formatCommunity(c: Community): string {
  return c.kind === 'standard' ? `${c.value >>> 16}:${c.value & U16}` : c.value.join(':');
}

/** The attributes with communities added (kept sorted and unique by makeAttrs/withAttrs). */
export function addCommunities(a: PathAttrs, add: readonly Community[]): PathAttrs {
  if (add.length === 0) return a;
  const std = add.filter((c) => c.kind === 'standard').map((c) => c.value as number);
  const large = add.filter((c) => c.kind === 'large').map((c) => c.value as LargeCommunity);
  const changes: { communities?: number[]; largeCommunities?: LargeCommunity[] } = {};
  if (std.length) changes.communities = [...a.communities, ...std];
  if (large.length) changes.largeCommunities = [...a.largeCommunities, ...large];
  return withAttrs(a, changes);
}

interface Compiled {
  prefix: Prefix;
  add: Community[];
}

/**
 * The communities prefix advertisements put on exported routes. Results are cached per (attributes, set of
 * matching advertisements), so routes that shared attributes before still share one object after (UPDATEs keep
 * packing many prefixes).
 */
export class CommunityTagger {
  private readonly list: Compiled[];
  private cache = new Map<string, WeakMap<PathAttrs, PathAttrs>>();

  constructor(ads: readonly PrefixAdvertisement[] = []) {
    this.list = ads.map((a) => ({ prefix: parsePrefix(a.cidr), add: a.communities.map(parseCommunity) }))
      .filter((c) => c.add.length > 0);
  }

  get empty(): boolean {
    return this.list.length === 0;
  }

  /** Indexes of the advertisements whose CIDR holds `prefix`, as a cache key ('' = none). */
  private key(prefix: Prefix): string {
    let k = '';
    for (let i = 0; i < this.list.length; i++) {
      const c = this.list[i].prefix;
      if (c.family === prefix.family && prefixContainsPrefix(c, prefix)) k += k ? `,${i}` : `${i}`;
    }
    return k;
  }

  /** `a` (the attributes going to a peer for `prefix`) with the matching advertisements' communities added. */
  tag(prefix: Prefix, a: PathAttrs): PathAttrs {
    if (this.list.length === 0) return a;
    const k = this.key(prefix);
    if (k === '') return a;
    let m = this.cache.get(k);
    if (!m) this.cache.set(k, (m = new WeakMap()));
    let out = m.get(a);
    if (!out) {
      out = addCommunities(a, k.split(',').flatMap((i) => this.list[Number(i)].add));
      m.set(a, out);
    }
    return out;
  }
}

/** Two advertisement lists say the same (order matters: it is the order communities are applied in). */
export function sameAdvertisements(a: readonly PrefixAdvertisement[] | undefined, b: readonly PrefixAdvertisement[] | undefined): boolean {
  return JSON.stringify(a ?? []) === JSON.stringify(b ?? []);
}
