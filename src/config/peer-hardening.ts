// Config checks for the peer hardening options (bgp.peers[].maxPrefixes): kept apart from config.ts so that
// file only lists the fields. The speaker (src/bgp/maxprefix.ts) fills in the defaults.
import type { Checker, Path } from './check.ts';
import type { MaxPrefixesConfig } from './types.ts';

export const HARDENING_PEER_FIELDS = ['maxPrefixes'] as const;

const MAX_COUNT = 0xffffffff; // RFC 4486 4: the limit travels as 4 octets

/** maxPrefixes: N (each family) or { ipv4?, ipv6?, warningPercent?, restart? } with at least one family. */
export function maxPrefixes(c: Checker, path: Path, v: unknown): MaxPrefixesConfig | undefined {
  if (typeof v === 'number') return c.int(path, v, 1, MAX_COUNT);
  const o = c.object(path, v, ['ipv4', 'ipv6', 'warningPercent', 'restart']);
  if (!o) return undefined;
  if (o.ipv4 === undefined && o.ipv6 === undefined) return c.fail(path, 'give a limit for ipv4 and/or ipv6 (or one number for each family)');
  const out: Exclude<MaxPrefixesConfig, number> = {};
  let ok = true;
  const field = (k: 'ipv4' | 'ipv6' | 'warningPercent' | 'restart', min: number, max: number) => {
    if (o[k] === undefined) return;
    const n = c.int([...path, k], o[k], min, max);
    if (n === undefined) ok = false;
    else out[k] = n;
  };
  field('ipv4', 1, MAX_COUNT);
  field('ipv6', 1, MAX_COUNT);
  field('warningPercent', 1, 100);
  field('restart', 0, 86400);
  return ok ? out : undefined;
}
