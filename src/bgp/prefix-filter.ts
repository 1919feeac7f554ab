// Prefix lists for import and export, compiled to filters: ordered rules, first match wins, no match = reject, no
// list = accept all. A rule matches a prefix inside its own prefix whose length is within ge..le (both absent:
// exactly the rule's length; only le: rule length..le; only ge: ge..family max), the usual router prefix-list
// semantics. (Route policy, Calico's BGPFilter rules, is route-policy.ts; what a peer is sent, export-policy.ts.)
import { type Prefix, maxLen, parsePrefix, prefixContainsPrefix } from '../net/ip.ts';

export interface PrefixRule {
  prefix: string;
  /** Match lengths ge..le; both absent = exactly the prefix's length. */
  ge?: number;
  le?: number;
  /** Default 'accept'. */
  action?: 'accept' | 'reject';
}

export class PrefixListError extends Error {
  override name = 'PrefixListError';
}

interface Compiled {
  prefix: Prefix;
  lo: number;
  hi: number;
  accept: boolean;
}

/** A compiled prefix list; `accepts` is the filter. */
export class PrefixFilter {
  private readonly rules: Compiled[];

  constructor(rules: readonly PrefixRule[]) {
    this.rules = rules.map(compileRule);
  }

  /** accepts, bound: to hand to code that takes a plain predicate. */
  readonly acceptor = (p: Prefix): boolean => this.accepts(p);

  accepts(p: Prefix): boolean {
    for (const r of this.rules) {
      if (p.family === r.prefix.family && p.len >= r.lo && p.len <= r.hi && prefixContainsPrefix(r.prefix, p)) return r.accept;
    }
    return false;
  }
}

function compileRule(r: PrefixRule): Compiled {
  let prefix: Prefix;
  try {
    prefix = parsePrefix(r.prefix);
  } catch (e) {
    throw new PrefixListError(`prefix list: ${(e as Error).message}`);
  }
  const max = maxLen(prefix.family);
  const lo = r.ge ?? prefix.len;
  const hi = r.le ?? (r.ge !== undefined ? max : prefix.len);
  for (const [name, v] of [['ge', r.ge], ['le', r.le]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < prefix.len || v > max)) {
      throw new PrefixListError(`prefix list ${r.prefix}: ${name} ${v} must be within ${prefix.len}..${max}`);
    }
  }
  if (lo > hi) throw new PrefixListError(`prefix list ${r.prefix}: ge ${lo} > le ${hi}`);
  if (r.action !== undefined && r.action !== 'accept' && r.action !== 'reject') {
    throw new PrefixListError(`prefix list ${r.prefix}: action must be accept or reject, not ${String(r.action)}`);
  }
  return { prefix, lo, hi, accept: r.action !== 'reject' };
}

/** A filter for an optional list: null means "accept everything". */
export function compilePrefixList(rules: readonly PrefixRule[] | undefined): PrefixFilter | null {
  return rules === undefined ? null : new PrefixFilter(rules);
}

/** Same rules (for reconfiguration: unchanged policy needs no refresh). */
export function sameRules(a: readonly PrefixRule[] | undefined, b: readonly PrefixRule[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  return a.every((r, i) => r.prefix === b[i].prefix && r.ge === b[i].ge && r.le === b[i].le && (r.action ?? 'accept') === (b[i].action ?? 'accept'));
}
