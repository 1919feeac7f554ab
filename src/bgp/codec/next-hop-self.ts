// "This session's own address" as an exported route's next hop. The speaker's eBGP (and next-hop-self iBGP)
// rewrite puts these in the attributes instead of the session's address, so a route sent to 99 peers has one
// exported attribute record, not 99 that differ only in NEXT_HOP: one rewrite, one interned record and one encoded
// attribute block per source record, shared by every peer. The UPDATE packer (updates.ts) writes the session's
// address in their place, from PackOptions. BIRD does the same: its next hop self is applied per channel at encode
// time.
import { IP } from '../../net/ip.ts';

/** A marker, not an address: its last word is fractional, so no parsed or decoded address equals it. */
class SelfNextHop extends IP {
  override toString(): string {
    return `self (IPv${this.family})`;
  }
}

export const NEXT_HOP_SELF4: IP = Object.freeze(new SelfNextHop(4, 0, 0, 0, 0.5));
export const NEXT_HOP_SELF6: IP = Object.freeze(new SelfNextHop(6, 0, 0, 0, 0.5));
