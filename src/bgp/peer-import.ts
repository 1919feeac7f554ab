// A peer's UPDATEs into its Adj-RIB-In: the withdrawals, and the routes through the import policy in two halves:
// the attributes once per UPDATE (dropped when they loop back to us: our router ID, our AS, our cluster ID), then
// the peer's prefix list and route policy per prefix. This is the full-table ingest path: no closure per UPDATE,
// no object per prefix. Its own file: what the speaker takes in, apart from when (the session events).
import { withAttrs, type PathAttrs } from '../rib/attrs.ts';
import type { PrefixList } from '../rib/prefixlist.ts';
import type { ImportPolicy, Rib } from '../rib/rib.ts';
import type { UpdateMessage } from './codec/index.ts';
import { ownAsLoop } from './loops.ts';
import type { PeerState } from './peer.ts';
import { clusterLoop } from './reflect.ts';
import { familyOfAfi, ipv4ToU32, type AddressFamily } from './session.ts';
import type { SpeakerConfig } from './speaker-config.ts';

/** The import side of a speaker: its RIB, and who we are as the loop checks see it. */
export class Importer {
  private routerId: number;
  private cfg: SpeakerConfig;

  constructor(private readonly rib: Rib, routerId: number, cfg: SpeakerConfig) {
    this.routerId = routerId;
    this.cfg = cfg;
  }

  /** Our BGP Identifier (as a number) and config: set when the speaker is made and again on reconfiguration. */
  setLocal(routerId: number, cfg: SpeakerConfig): void {
    this.routerId = routerId;
    this.cfg = cfg;
  }

  /**
   * The withdrawals and routes of an UPDATE (not End-of-RIB) on `p`'s established session of families `fams`.
   * True when it announced routes (then the peer's max-prefix limits are checked), false when it only withdrew.
   */
  update(p: PeerState, fams: readonly AddressFamily[], m: UpdateMessage, action: string): boolean {
    const src = p.source;
    const v4 = fams.includes('ipv4');
    if (v4) this.withdrawList(src, m.withdrawn);
    if (m.mpUnreach && familyOk(m.mpUnreach.afi, m.mpUnreach.safi, fams)) this.withdrawList(src, m.mpUnreach.withdrawn);
    if (action === 'treat-as-withdraw' || m.attrs === null) {
      // RFC 7606 2: every prefix the UPDATE carries is withdrawn.
      if (v4) this.withdrawList(src, m.nlri);
      if (m.mpReach && familyOk(m.mpReach.afi, m.mpReach.safi, fams)) this.withdrawList(src, m.mpReach.nlri);
      return false;
    }
    // The import policy (the two halves of policy()): the attributes' half once per UPDATE, the prefix list per prefix.
    const attrs = m.attrs;
    const loop = this.importedAttrs(p, attrs) === null;
    if (v4 && m.nlri.count > 0) this.ingestList(p, m.nlri, attrs, loop);
    const mp = m.mpReach;
    if (mp && mp.nlri.count > 0 && familyOk(mp.afi, mp.safi, fams)) {
      // attrs.nextHop is the classic NEXT_HOP when the UPDATE also has classic NLRI.
      const a = m.nlri.count > 0 ? withAttrs(attrs, { nextHop: mp.nextHop, nextHopLinkLocal: mp.nextHopLinkLocal }) : attrs;
      this.ingestList(p, mp.nlri, a, loop);
    }
    return true;
  }

  /** One UPDATE's prefixes into the RIB. A method, not a closure per UPDATE: that was 16% of a full table's allocation. */
  private ingestList(p: PeerState, list: PrefixList, a: PathAttrs, loop: boolean): void {
    const src = p.source;
    // A route policy may change attributes per prefix: that peer's UPDATEs take the per-prefix path.
    if (!p.importRoutePolicy || loop) {
      this.rib.updateList(src, list, a, loop ? null : a, p.importFilter ? p.importFilter.acceptor : undefined);
      return;
    }
    const pol = this.policy(p);
    for (let i = 0; i < list.count; i++) {
      const prefix = list.prefix(i);
      this.rib.update(src, prefix, a, pol(prefix, a, src));
    }
  }

  private withdrawList(src: string, list: PrefixList): void {
    for (let i = 0; i < list.count; i++) this.rib.withdraw(src, list.prefix(i));
  }

  // The import policy in two halves, so the ingest path can apply the first once per UPDATE: the attributes
  // (dropped when they loop back to us), then the peer's prefix list.
  private importedAttrs(p: PeerState, attrs: PathAttrs): PathAttrs | null {
    const c = p.cfg;
    // Our AS, and the peer's local AS when it differs (RFC 4271 9.1.2, allowas-in).
    const loop = isLoop(attrs, this.routerId) || ownAsLoop(attrs, this.cfg.asn, c.allowAsIn) ||
      (c.localAs !== this.cfg.asn && ownAsLoop(attrs, c.localAs, c.allowAsIn)) || clusterLoop(attrs, this.clusterIdNum());
    return loop ? null : attrs;
  }

  // Asked per route and peer on export (and per UPDATE on import): parsed once per configured text, not per call.
  private clusterIdText: string | undefined = undefined;
  private clusterIdValue: number | undefined = undefined;

  /** Our route reflector cluster ID as a number, undefined when we are not a reflector. */
  clusterIdNum(): number | undefined {
    const text = this.cfg.clusterId;
    if (text !== this.clusterIdText) {
      this.clusterIdText = text;
      this.clusterIdValue = text ? ipv4ToU32(text) : undefined;
    }
    return this.clusterIdValue;
  }

  /**
   * The peer's whole import policy: the RIB keeps it to re-import the Adj-RIB-In, and a peer with a route policy
   * has its UPDATEs' prefixes taken through it one by one.
   */
  policy(p: PeerState): ImportPolicy {
    return (prefix, attrs) => {
      if (this.importedAttrs(p, attrs) === null) return null;
      if (p.importFilter && !p.importFilter.accepts(prefix)) return null;
      return p.importRoutePolicy ? p.importRoutePolicy.evaluate(prefix, attrs, { peerType: p.type, fromPeer: true }) : attrs;
    };
  }
}

/** Our own reflected route (RFC 4456 8); own AS in the path is ownAsLoop (src/bgp/loops.ts, with allowas-in). */
function isLoop(attrs: PathAttrs, routerId: number): boolean {
  return attrs.originatorId === routerId;
}

function familyOk(afi: number, safi: number, fams: readonly AddressFamily[]): boolean {
  const f = familyOfAfi(afi, safi);
  return f !== null && fams.includes(f);
}
