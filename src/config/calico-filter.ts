// Calico BGPFilter rules beyond plain prefix lists: NotEqual/NotIn, source, peerType, communities, asPathPrefix,
// priority and operations (addCommunity, prependASPath, setPriority). A peer whose filters use any of them gets
// the filters as a route policy (src/bgp/route-policy.ts) instead of prefix lists. Checks name the field.
import { parseAsNumber } from '../calico/node.ts';
import { maxLen, parsePrefix, formatPrefix } from '../net/ip.ts';
import { parseCommunity } from '../bgp/communities.ts';
import type { PolicyOperation, PolicyRule } from '../bgp/route-policy.ts';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const PRIORITY_MAX = 2147483646;

/** Does this rule need the route policy (anything a prefix list cannot say)? */
export function needsPolicy(rule: Obj): boolean {
  return ['source', 'interface', 'peerType', 'communities', 'asPathPrefix', 'priority', 'operations'].some((k) => rule[k] !== undefined && rule[k] !== '' && rule[k] !== null) ||
    rule.matchOperator === 'NotEqual' || rule.matchOperator === 'NotIn';
}

/** Check the newer fields of one rule; `fail(field, msg)` with the field relative to the rule. False on error. */
export function checkRuleExtras(rule: Obj, fail: (field: string, msg: string) => void): boolean {
  let ok = true;
  const bad = (f: string, msg: string) => {
    fail(f, msg);
    ok = false;
  };
  if (rule.source !== undefined && rule.source !== '' && rule.source !== 'RemotePeers') bad('source', `must be RemotePeers, got ${JSON.stringify(rule.source)}`);
  if (rule.peerType !== undefined && rule.peerType !== '' && rule.peerType !== 'eBGP' && rule.peerType !== 'iBGP') bad('peerType', `must be eBGP or iBGP, got ${JSON.stringify(rule.peerType)}`);
  if (rule.communities !== undefined) {
    const c = rule.communities;
    if (!isObj(c) || Object.keys(c).some((k) => k !== 'values') || !Array.isArray(c.values) || c.values.length !== 1) {
      bad('communities', `must be { values: [one community] }, got ${JSON.stringify(c)}`);
    } else {
      try {
        parseCommunity(String(c.values[0]));
      } catch (e) {
        bad('communities.values[0]', (e as Error).message);
      }
    }
  }
  if (rule.asPathPrefix !== undefined) {
    const l = rule.asPathPrefix;
    if (!Array.isArray(l) || l.some((x) => parseAsNumber(x) === undefined)) bad('asPathPrefix', `must be a list of AS numbers, got ${JSON.stringify(l)}`);
  }
  if (rule.priority !== undefined && (!Number.isInteger(rule.priority) || (rule.priority as number) < 1 || (rule.priority as number) > PRIORITY_MAX)) {
    bad('priority', `must be 1..${PRIORITY_MAX}, got ${JSON.stringify(rule.priority)}`);
  }
  if (rule.operations !== undefined) {
    const ops = rule.operations;
    if (!Array.isArray(ops) || ops.length < 1 || ops.length > 10) bad('operations', `must be a list of 1..10 operations, got ${JSON.stringify(ops)}`);
    else {
      if (rule.action !== 'Accept') bad('operations', 'only valid with action Accept (Calico refuses operations on Reject)');
      ops.forEach((op, i) => {
        const f = `operations[${i}]`;
        if (!isObj(op) || Object.keys(op).length !== 1) return bad(f, `must set exactly one of addCommunity, prependASPath, setPriority, got ${JSON.stringify(op)}`);
        const [k, v] = Object.entries(op)[0]!;
        if (k === 'addCommunity') {
          if (!isObj(v) || Object.keys(v).some((x) => x !== 'value')) return bad(`${f}.addCommunity`, `must be { value }, got ${JSON.stringify(v)}`);
          try {
            parseCommunity(String(v.value));
          } catch (e) {
            bad(`${f}.addCommunity.value`, (e as Error).message);
          }
        } else if (k === 'prependASPath') {
          if (!isObj(v) || Object.keys(v).some((x) => x !== 'prefix') || !Array.isArray(v.prefix) || v.prefix.length < 1 || v.prefix.length > 10 ||
              v.prefix.some((x) => parseAsNumber(x) === undefined)) return bad(`${f}.prependASPath`, `must be { prefix: [1..10 AS numbers] }, got ${JSON.stringify(v)}`);
        } else if (k === 'setPriority') {
          if (!isObj(v) || Object.keys(v).some((x) => x !== 'value') || !Number.isInteger(v.value) || (v.value as number) < 1 || (v.value as number) > PRIORITY_MAX) {
            return bad(`${f}.setPriority`, `must be { value: 1..${PRIORITY_MAX} }, got ${JSON.stringify(v)}`);
          }
        } else bad(`${f}.${k}`, 'unknown operation (known: addCommunity, prependASPath, setPriority)');
      });
    }
  }
  return ok;
}

/** One checked BGPFilter rule list as route policy rules. */
export function policyRules(v: unknown, family: 4 | 6): PolicyRule[] {
  if (!Array.isArray(v)) return [];
  return (v as Obj[]).map((r) => {
    const out: PolicyRule = { action: r.action === 'Accept' ? 'accept' : 'reject' };
    if (r.cidr !== undefined && r.cidr !== '') {
      const p = parsePrefix(String(r.cidr));
      const op = (r.matchOperator ?? 'In') as string;
      const pl = (r.prefixLength ?? {}) as { min?: number; max?: number };
      const exact = op === 'Equal' || op === 'NotEqual';
      out.prefix = { cidr: formatPrefix(p), exact, negate: op === 'NotEqual' || op === 'NotIn' };
      if (!exact) {
        out.prefix.ge = Math.max(p.len, pl.min ?? p.len);
        out.prefix.le = Math.min(maxLen(p.family), pl.max ?? maxLen(p.family));
      }
    } else {
      // No cidr: every prefix of the list's family.
      out.prefix = { cidr: family === 6 ? '::/0' : '0.0.0.0/0', exact: false };
    }
    if (r.source === 'RemotePeers') out.remotePeersOnly = true;
    if (typeof r.interface === 'string' && r.interface !== '') out.never = true;
    if (r.peerType === 'eBGP' || r.peerType === 'iBGP') out.peerType = r.peerType === 'eBGP' ? 'ebgp' : 'ibgp';
    if (isObj(r.communities)) out.community = String((r.communities.values as unknown[])[0]);
    if (Array.isArray(r.asPathPrefix) && r.asPathPrefix.length) out.asPathPrefix = r.asPathPrefix.map((x) => parseAsNumber(x)!);
    if (r.priority !== undefined) out.priority = r.priority as number;
    if (Array.isArray(r.operations)) {
      out.operations = (r.operations as Obj[]).map((op): PolicyOperation => {
        if (isObj(op.addCommunity)) return { addCommunity: String(op.addCommunity.value) };
        if (isObj(op.prependASPath)) return { prependAsPath: (op.prependASPath.prefix as unknown[]).map((x) => parseAsNumber(x)!) };
        return { setPriority: (op.setPriority as Obj).value as number };
      });
    }
    return out;
  });
}
