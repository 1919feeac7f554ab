// Config checks for a peer's AS options: bgp.peers[].allowAsIn (allowas-in; Calico numAllowedLocalASNumbers) and
// bgp.peers[].localAsn (our AS toward this peer; Calico localASNumber). Kept apart so config.ts only lists them.
import type { Checker, Path } from './check.ts';

export const AS_PEER_FIELDS = ['allowAsIn', 'localAsn'] as const;

/** BIRD's `allow local as` takes any count; more than the longest sane path is a mistake. */
export const MAX_ALLOW_AS_IN = 255;

export function peerAsOptions(c: Checker, path: Path, o: Record<string, unknown>): { allowAsIn?: number; localAsn?: number } | undefined {
  const out: { allowAsIn?: number; localAsn?: number } = {};
  let ok = true;
  if (o.allowAsIn !== undefined) {
    const n = c.int([...path, 'allowAsIn'], o.allowAsIn, 0, MAX_ALLOW_AS_IN);
    if (n === undefined) ok = false;
    else if (n > 0) out.allowAsIn = n;
  }
  if (o.localAsn !== undefined) {
    // RFC 7607: AS 0 is never valid; 4-octet (RFC 6793) allowed.
    const n = c.int([...path, 'localAsn'], o.localAsn, 1, 0xffffffff);
    if (n === undefined) ok = false;
    else out.localAsn = n;
  }
  return ok ? out : undefined;
}
