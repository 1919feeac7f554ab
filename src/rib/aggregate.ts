// What a host announces: its affine blocks as aggregates plus the host routes for IPs it holds elsewhere.
//
// Pure functions over Prefix values. A host route inside one of the host's own blocks is never announced (the
// block's aggregate already draws that traffic here), and summarisation only ever joins two sibling prefixes
// that are both owned, so an announcement never covers address space the host does not hold.
import { IP, Prefix, comparePrefix, compareIP, hostPrefix, prefixContainsPrefix, prefixEquals, prefixOf } from '../net/ip.ts';

export interface AnnounceInput {
  /** The host's affine blocks. Overlapping or duplicate entries are tolerated (the covering one wins). */
  blocks: readonly Prefix[];
  /** IPs (or host prefixes) the host holds in blocks affine to other hosts. */
  borrowed?: readonly (IP | Prefix)[];
  /** Other host routes of this host, e.g. ones inside its own blocks; announced only when outside them. */
  hostRoutes?: readonly (IP | Prefix)[];
  /** Merge sibling blocks into their parent, repeatedly. Default false. */
  summarise?: boolean;
}

/** The prefixes to announce, sorted (comparePrefix) and unique. */
export function announcements(input: AnnounceInput): Prefix[] {
  const own = withoutCovered(input.blocks);
  const aggregates = input.summarise ? mergeSiblings(own) : own;
  const extra: Prefix[] = [];
  for (const x of [...(input.borrowed ?? []), ...(input.hostRoutes ?? [])]) {
    const p = x instanceof Prefix ? x : hostPrefix(x);
    if (!coveredBySorted(own, p)) extra.push(p);
  }
  // A borrowed route may itself sit inside another borrowed prefix; both are announced as given, deduplicated.
  return uniqueSorted([...aggregates, ...extra]);
}

/**
 * Shortest set of prefixes covering exactly the union of the input: covered prefixes dropped, then sibling pairs
 * (e.g. 10.0.0.0/26 + 10.0.0.64/26) replaced by their parent (10.0.0.0/25) until none are left. Families are
 * never mixed. Output sorted by comparePrefix.
 */
export function summarise(prefixes: readonly Prefix[]): Prefix[] {
  return mergeSiblings(withoutCovered(prefixes));
}

export interface AnnouncementDiff {
  add: Prefix[];
  withdraw: Prefix[];
}

/** Prefixes to announce and to withdraw to go from `prev` to `next`; both sorted (comparePrefix). */
export function diffAnnouncements(prev: readonly Prefix[], next: readonly Prefix[]): AnnouncementDiff {
  const a = uniqueSorted(prev);
  const b = uniqueSorted(next);
  const add: Prefix[] = [];
  const withdraw: Prefix[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const c = i >= a.length ? 1 : j >= b.length ? -1 : comparePrefix(a[i], b[j]);
    if (c < 0) withdraw.push(a[i++]);
    else if (c > 0) add.push(b[j++]);
    else { i++; j++; }
  }
  return { add, withdraw };
}

// ---- internals ----------------------------------------------------------------------------------------------

function uniqueSorted(ps: readonly Prefix[]): Prefix[] {
  const s = [...ps].sort(comparePrefix);
  return s.filter((p, i) => i === 0 || !prefixEquals(p, s[i - 1]));
}

/** Sorted, with every prefix inside another one removed; the result is pairwise disjoint. */
function withoutCovered(ps: readonly Prefix[]): Prefix[] {
  const out: Prefix[] = [];
  // Sorted by address then length, a prefix can only be covered by the last one kept: prefixes are either nested
  // or disjoint, and anything kept after a covering prefix would itself lie inside it.
  for (const p of uniqueSorted(ps)) {
    const last = out[out.length - 1];
    if (last && prefixContainsPrefix(last, p)) continue;
    out.push(p);
  }
  return out;
}

/** Merge sibling pairs of a sorted disjoint list, bottom-up, with a stack (each merge may enable the next). */
function mergeSiblings(sortedDisjoint: readonly Prefix[]): Prefix[] {
  const stack: Prefix[] = [];
  for (let p of sortedDisjoint) {
    for (;;) {
      const top = stack[stack.length - 1];
      if (!top || !areSiblings(top, p)) break;
      stack.pop();
      p = prefixOf(p.ip, p.len - 1);
    }
    stack.push(p);
  }
  return stack;
}

/** Two different prefixes of the same length with the same parent: together they are exactly the parent. */
function areSiblings(a: Prefix, b: Prefix): boolean {
  if (a.family !== b.family || a.len !== b.len || a.len === 0 || prefixEquals(a, b)) return false;
  return prefixEquals(prefixOf(a.ip, a.len - 1), prefixOf(b.ip, b.len - 1));
}

/** Whether `p` lies inside one of the sorted disjoint prefixes `own` (binary search on start address). */
function coveredBySorted(own: readonly Prefix[], p: Prefix): boolean {
  // The only candidate is the last prefix starting at or before p's start.
  let lo = 0;
  let hi = own.length - 1;
  let cand = -1;
  const ip = p.ip;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (compareIP(own[mid].ip, ip) <= 0) {
      cand = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return cand >= 0 && prefixContainsPrefix(own[cand], p);
}
