// Pool and block cidrs, parsed once: every part of the allocator parses the same few over and over on the hot path,
// so they share one cache.
import { parsePrefix, type Prefix } from '../net/ip.ts';

// Pool and block cidrs are parsed over and over on the hot path; they are few, so keep them parsed.
const parsed = new Map<string, Prefix>();
export function pfx(cidr: string): Prefix {
  let p = parsed.get(cidr);
  if (!p) {
    if (parsed.size > 100_000) parsed.clear();
    parsed.set(cidr, (p = parsePrefix(cidr)));
  }
  return p;
}
