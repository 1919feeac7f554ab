// AS-path loop detection with allowas-in (RFC 4271 9.1.2; Calico BGPPeer numAllowedLocalASNumbers, BIRD's
// `allow local as N`): a route is a loop when one of our AS numbers (the speaker's, and a peer's local AS when it
// differs) appears in its AS_PATH more than `allowed` times. Pure.
import { pathHasAsn, type PathAttrs } from '../rib/attrs.ts';

/** How many times `asn` appears in the path (each AS_SEQUENCE hop and each AS_SET member counts once). */
export function asnOccurrences(a: PathAttrs, asn: number): number {
  if (!pathHasAsn(a, asn)) return 0; // the bloom answers most routes without walking the path
  let n = 0;
  for (const seg of a.asPath) for (const x of seg.asns) if (x === asn) n++;
  return n;
}

/** `asn` (one of ours) appears more than `allowed` times. Asked per AS of ours: no list per UPDATE on the ingest path. */
export function ownAsLoop(a: PathAttrs, asn: number, allowed: number): boolean {
  return allowed === 0 ? pathHasAsn(a, asn) : asnOccurrences(a, asn) > allowed;
}
