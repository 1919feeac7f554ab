// Route policy rules with Calico BGPFilter's full match and action set, evaluated as confd renders them into
// BIRD: rules in order, the first whose every condition holds decides (accept, after its operations, or reject);
// when none matches the route is accepted unchanged (Calico's default treatment). Pure: no I/O.
//   conditions: prefix (Equal / In with lengths, or their negations), peer type, a community carried, an AS path
//   prefix, a priority (LOCAL_PREF = 2^31-1 - priority, Calico's mapping), and "learned from a BGP peer".
//   operations: add a community, prepend AS numbers, set the priority.
import { type Prefix, maxLen, parsePrefix, prefixContainsPrefix } from '../net/ip.ts';
import { asSequence, withAttrs, type AsPathSegment, type PathAttrs } from '../rib/attrs.ts';
import { addCommunities, parseCommunity, type Community } from './communities.ts';

/** Calico's conversion between priority (a route metric: lower wins) and LOCAL_PREF (higher wins). */
export const PRIORITY_BASE = 2147483647;

export interface PolicyRule {
  /** Absent: any prefix. `exact`: the cidr itself (Equal), else within it with ge..le (In); `negate` flips it. */
  prefix?: { cidr: string; exact: boolean; ge?: number; le?: number; negate?: boolean };
  peerType?: 'ibgp' | 'ebgp';
  /** The route carries this community ("aa:nn" or "aa:nn:mm"). */
  community?: string;
  /** The AS path begins with these ASNs (the route's path, before we prepend our AS toward an eBGP peer). */
  asPathPrefix?: number[];
  /** LOCAL_PREF equals PRIORITY_BASE - priority. */
  priority?: number;
  /** Only routes learned from BGP peers (Calico source: RemotePeers), never our own. */
  remotePeersOnly?: boolean;
  /** A rule that can never match here (Calico interface: we export no interface routes). */
  never?: boolean;
  action: 'accept' | 'reject';
  operations?: PolicyOperation[];
}

export type PolicyOperation = { addCommunity: string } | { prependAsPath: number[] } | { setPriority: number };

export interface PolicyContext {
  peerType: 'ibgp' | 'ebgp';
  /** The route came from a BGP peer (import: always; export: not one of our own routes). */
  fromPeer: boolean;
}

interface Compiled {
  rule: PolicyRule;
  prefix?: { p: Prefix; exact: boolean; ge: number; le: number; negate: boolean };
  community?: Community;
  localPref?: number;
  ops: ((a: PathAttrs) => PathAttrs)[];
}

/** A compiled rule list; `evaluate` returns the attributes to use, or null for rejected. */
export class RoutePolicy {
  private readonly rules: Compiled[];
  /** Results of a rule's operations, per rule and input attributes: shared sets stay shared. */
  private readonly cache: WeakMap<PathAttrs, PathAttrs>[];

  constructor(rules: readonly PolicyRule[]) {
    this.rules = rules.map(compile);
    this.cache = this.rules.map(() => new WeakMap());
  }

  /** Index of the first matching rule, or -1. */
  match(prefix: Prefix, a: PathAttrs, ctx: PolicyContext): number {
    for (let i = 0; i < this.rules.length; i++) if (matches(this.rules[i], prefix, a, ctx)) return i;
    return -1;
  }

  evaluate(prefix: Prefix, a: PathAttrs, ctx: PolicyContext): PathAttrs | null {
    const i = this.match(prefix, a, ctx);
    if (i < 0) return a;
    const c = this.rules[i];
    if (c.rule.action === 'reject') return null;
    if (c.ops.length === 0) return a;
    let out = this.cache[i].get(a);
    if (!out) {
      out = c.ops.reduce((x, op) => op(x), a);
      this.cache[i].set(a, out);
    }
    return out;
  }
}

function compile(rule: PolicyRule): Compiled {
  const c: Compiled = { rule, ops: [] };
  if (rule.prefix) {
    const p = parsePrefix(rule.prefix.cidr);
    c.prefix = { p, exact: rule.prefix.exact, ge: rule.prefix.ge ?? p.len, le: rule.prefix.le ?? maxLen(p.family), negate: rule.prefix.negate === true };
  }
  if (rule.community !== undefined) c.community = parseCommunity(rule.community);
  if (rule.priority !== undefined) c.localPref = PRIORITY_BASE - rule.priority;
  for (const op of rule.operations ?? []) {
    if ('addCommunity' in op) {
      const add = [parseCommunity(op.addCommunity)];
      c.ops.push((a) => addCommunities(a, add));
    } else if ('prependAsPath' in op) {
      const seg = asSequence(...op.prependAsPath);
      c.ops.push((a) => withAttrs(a, { asPath: prepend(seg, a.asPath) }));
    } else {
      const lp = PRIORITY_BASE - op.setPriority;
      c.ops.push((a) => withAttrs(a, { localPref: lp }));
    }
  }
  return c;
}

function prepend(seg: AsPathSegment, path: readonly AsPathSegment[]): AsPathSegment[] {
  return [seg, ...path]; // withAttrs normalises (merges adjacent sequences)
}

function matches(c: Compiled, prefix: Prefix, a: PathAttrs, ctx: PolicyContext): boolean {
  const r = c.rule;
  if (r.never) return false;
  if (c.prefix) {
    const q = c.prefix;
    let m = prefix.family === q.p.family && (q.exact
      ? prefix.len === q.p.len && prefixContainsPrefix(q.p, prefix)
      : prefixContainsPrefix(q.p, prefix) && prefix.len >= q.ge && prefix.len <= q.le);
    if (q.negate) m = !m;
    if (!m) return false;
  }
  if (r.peerType !== undefined && r.peerType !== ctx.peerType) return false;
  if (r.remotePeersOnly && !ctx.fromPeer) return false;
  if (c.community) {
    const k = c.community;
    if (k.kind === 'standard' ? !a.communities.includes(k.value) : !a.largeCommunities.some((l) => l[0] === k.value[0] && l[1] === k.value[1] && l[2] === k.value[2])) return false;
  }
  if (r.asPathPrefix?.length) {
    const flat: number[] = [];
    for (const seg of a.asPath) {
      if (seg.type !== 2) break; // only a leading AS_SEQUENCE can begin with a given sequence
      flat.push(...seg.asns);
      if (flat.length >= r.asPathPrefix.length) break;
    }
    if (flat.length < r.asPathPrefix.length || r.asPathPrefix.some((x, i) => flat[i] !== x)) return false;
  }
  if (c.localPref !== undefined && a.localPref !== c.localPref) return false;
  return true;
}
