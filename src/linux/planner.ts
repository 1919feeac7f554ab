// Actual routes + desired routes -> the fewest route operations. Pure.
//
// Rules, each because of how the kernel treats a route's key (table, destination, metric):
//  - Only routes with our table and protocol are ours. Anything else is foreign and never the target of an op.
//  - A desired key already held by a foreign route is a conflict: reported, not installed. `replace` would
//    overwrite the foreign route (replace matches on the key, not the protocol), and `add` would fail with EEXIST.
//  - A new key is installed with `add`, never `replace`, so a foreign route that appeared since we read the table
//    makes the kernel refuse instead of us overwriting it.
//  - A key of ours whose route differs is changed with one `replace` (atomic: no gap in forwarding).
//  - Deletes carry our protocol, which the kernel matches, so they cannot remove a foreign route.
//  - Several routes of ours on one key (only possible through `ip route append`) are all deleted and re-added.
//  - Unchanged routes produce no op; order is deletes, replaces, adds.
import { type KernelRoute, type Owner, type RouteKey, isOurs, routeKey, routeKeyText, routeSatisfies } from './route.ts';

export type RouteOp =
  | { op: 'add'; route: KernelRoute }
  | { op: 'replace'; route: KernelRoute; was: KernelRoute }
  | { op: 'delete'; route: KernelRoute };

export interface RouteConflict {
  /** The route we wanted. */
  route: KernelRoute;
  /** The foreign route holding its key. */
  holder: KernelRoute;
}

export interface RoutePlan {
  ops: RouteOp[];
  conflicts: RouteConflict[];
  /** Desired routes already in place. */
  unchanged: number;
}

export class PlanError extends Error {
  override name = 'PlanError';
}

/**
 * Plan the ops that turn `actual` (routes read from our table; other tables are ignored) into `desired` (all in
 * `owner`'s table with its protocol).
 */
export function planRoutes(actual: Iterable<KernelRoute>, desired: Iterable<KernelRoute>, owner: Owner): RoutePlan {
  // One route per key is the rule; an array only where `ip route append` stacked several of ours.
  const ours = new Map<RouteKey, KernelRoute | KernelRoute[]>();
  const foreign = new Map<RouteKey, KernelRoute>();
  for (const r of actual) {
    if (r.table !== owner.table) continue;
    const k = routeKey(r);
    if (isOurs(r, owner)) {
      const had = ours.get(k);
      if (had === undefined) ours.set(k, r);
      else if (Array.isArray(had)) had.push(r);
      else ours.set(k, [had, r]);
    } else if (!foreign.has(k)) foreign.set(k, r);
  }

  const deletes: RouteOp[] = [];
  const replaces: RouteOp[] = [];
  const adds: RouteOp[] = [];
  const conflicts: RouteConflict[] = [];
  const handled = new Set<RouteKey>(); // keys whose routes of ours the loop below must not delete
  const conflicted = new Set<RouteKey>();
  let unchanged = 0;

  for (const d of desired) {
    if (!isOurs(d, owner) || d.kind === 'other') {
      throw new PlanError(`desired route ${routeKeyText(d)} is not an installable route of table ${owner.table} proto ${owner.protocol}`);
    }
    const k = routeKey(d);
    if (handled.has(k) || conflicted.has(k)) throw new PlanError(`desired routes hold ${routeKeyText(d)} twice`);
    const holder = foreign.size > 0 ? foreign.get(k) : undefined;
    if (holder) {
      // Ours may sit next to it (appended): left unhandled so it is deleted (safe by protocol; replace is not).
      conflicts.push({ route: d, holder });
      conflicted.add(k);
      continue;
    }
    handled.add(k);
    const mine = ours.get(k);
    if (mine === undefined) adds.push({ op: 'add', route: d });
    else if (!Array.isArray(mine)) {
      if (routeSatisfies(mine, d)) unchanged++;
      else replaces.push({ op: 'replace', route: d, was: mine });
    } else {
      for (const r of mine) deletes.push({ op: 'delete', route: r });
      adds.push({ op: 'add', route: d });
    }
  }
  for (const [k, mine] of ours) {
    if (handled.has(k)) continue;
    if (Array.isArray(mine)) for (const r of mine) deletes.push({ op: 'delete', route: r });
    else deletes.push({ op: 'delete', route: mine });
  }
  return { ops: [...deletes, ...replaces, ...adds], conflicts, unchanged };
}

/** Op counts for status and logs. */
export function countOps(ops: readonly RouteOp[]): { add: number; replace: number; delete: number } {
  const c = { add: 0, replace: 0, delete: 0 };
  for (const o of ops) c[o.op]++;
  return c;
}
