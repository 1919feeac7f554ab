// Maximum-prefix limits per peer and family (what FRR calls maximum-prefix and BIRD a receive limit): when a peer
// holds more routes of a family than allowed, the session is closed with Cease / Maximum Number of Prefixes
// Reached (RFC 4486 3, subcode 1) carrying AFI, SAFI and the limit (RFC 4486 4), and started again after a
// restart time. A warning is logged once per session when the count crosses a threshold. Pure logic: the
// speaker feeds it counts and runs the timer.
import { Afi, CeaseSubcode, ErrorCode, Safi } from './codec/index.ts';
import type { AddressFamily } from './session.ts';

/**
 * As written in the config: one limit for each family, or limits per family with options: warningPercent (log a
 * warning at this percentage of a limit; default 75, as FRR) and restart (seconds before the session is started
 * again after the limit closed it; 0 = only on reconfiguration; default 60).
 */
export type MaxPrefixesConfig = number | { ipv4?: number; ipv6?: number; warningPercent?: number; restart?: number };

export interface MaxPrefixLimits {
  ipv4: number | null;
  ipv6: number | null;
  warningPercent: number;
  restart: number;
}

/** Validate and normalise; throws an Error naming the bad field (the config layer prefixes the path). */
export function normMaxPrefixes(v: MaxPrefixesConfig | undefined): MaxPrefixLimits | null {
  if (v === undefined) return null;
  const count = (x: unknown, what: string): number => {
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 1 || x > 0xffffffff) {
      throw new Error(`maxPrefixes${what}: must be an integer 1..4294967295, got ${JSON.stringify(x)}`);
    }
    return x;
  };
  if (typeof v === 'number') return { ipv4: count(v, ''), ipv6: count(v, ''), warningPercent: 75, restart: 60 };
  if (typeof v !== 'object' || v === null) throw new Error(`maxPrefixes: must be a number or { ipv4, ipv6, warningPercent, restart }`);
  for (const k of Object.keys(v)) {
    if (!['ipv4', 'ipv6', 'warningPercent', 'restart'].includes(k)) throw new Error(`maxPrefixes.${k}: unknown field (ipv4, ipv6, warningPercent, restart)`);
  }
  if (v.ipv4 === undefined && v.ipv6 === undefined) throw new Error('maxPrefixes: give ipv4 and/or ipv6');
  const warningPercent = v.warningPercent ?? 75;
  if (typeof warningPercent !== 'number' || !(warningPercent >= 1 && warningPercent <= 100)) {
    throw new Error(`maxPrefixes.warningPercent: must be 1..100, got ${JSON.stringify(v.warningPercent)}`);
  }
  const restart = v.restart ?? 60;
  if (typeof restart !== 'number' || !Number.isInteger(restart) || restart < 0 || restart > 86400) {
    throw new Error(`maxPrefixes.restart: must be seconds 0..86400, got ${JSON.stringify(v.restart)}`);
  }
  return {
    ipv4: v.ipv4 === undefined ? null : count(v.ipv4, '.ipv4'),
    ipv6: v.ipv6 === undefined ? null : count(v.ipv6, '.ipv6'),
    warningPercent,
    restart,
  };
}

/** The NOTIFICATION data of RFC 4486 4: AFI (2 octets), SAFI (1), the prefix upper bound (4). */
export function maxPrefixData(family: AddressFamily, limit: number): Uint8Array {
  const afi = family === 'ipv4' ? Afi.IPV4 : Afi.IPV6;
  return new Uint8Array([afi >> 8, afi & 255, Safi.UNICAST, (limit >>> 24) & 255, (limit >>> 16) & 255, (limit >>> 8) & 255, limit & 255]);
}

export interface MaxPrefixExceeded {
  family: AddressFamily;
  limit: number;
  count: number;
  notification: { code: number; subcode: number; data: Uint8Array };
}

export interface MaxPrefixStatus {
  limits: { ipv4: number | null; ipv6: number | null };
  warningPercent: number;
  restart: number;
  /** The last time the limit closed the session, and when it starts again (null: on reconfiguration only). */
  exceeded: { family: AddressFamily; limit: number; count: number; at: number; restartAt: number | null } | null;
}

/** One peer's limits and what they did. */
export class MaxPrefixGuard {
  private warned = new Set<AddressFamily>();
  private timer: NodeJS.Timeout | null = null;
  private last: MaxPrefixStatus['exceeded'] = null;

  constructor(readonly limits: MaxPrefixLimits) {}

  /** A new session: warnings may fire again. */
  reset(): void {
    this.warned.clear();
  }

  /**
   * Check the peer's counts. Returns the family over its limit (the caller closes the session), else null;
   * `warn` is called once per session and family when the threshold is crossed.
   */
  check(counts: { ipv4: number; ipv6: number }, families: readonly AddressFamily[], warn: (msg: string) => void): MaxPrefixExceeded | null {
    for (const f of families) {
      const limit = this.limits[f];
      if (limit === null) continue;
      const n = counts[f];
      if (n > limit) {
        return { family: f, limit, count: n, notification: { code: ErrorCode.CEASE, subcode: CeaseSubcode.MAX_PREFIXES, data: maxPrefixData(f, limit) } };
      }
      if (!this.warned.has(f) && n * 100 >= limit * this.limits.warningPercent) {
        this.warned.add(f);
        warn(`${n} ${f} prefixes received, ${this.limits.warningPercent}% warning threshold of the limit ${limit}`);
      }
    }
    return null;
  }

  /** The limit closed the session at `now`: run `restart` after the restart time (unless it is 0). */
  tripped(e: MaxPrefixExceeded, now: number, restart: () => void): void {
    this.clear();
    const secs = this.limits.restart;
    this.last = { family: e.family, limit: e.limit, count: e.count, at: now, restartAt: secs > 0 ? now + secs * 1000 : null };
    if (secs > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        restart();
      }, secs * 1000);
      this.timer.unref?.();
    }
  }

  /** True while the session is held down by the limit. */
  get holding(): boolean {
    return this.timer !== null || (this.last !== null && this.last.restartAt === null);
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  status(): MaxPrefixStatus {
    const l = this.limits;
    return { limits: { ipv4: l.ipv4, ipv6: l.ipv6 }, warningPercent: l.warningPercent, restart: l.restart, exceeded: this.last };
  }
}
