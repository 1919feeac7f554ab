// Sending peers their routes: the RIB's changes and whole tables through each session's export policy into the
// peer's queue, a route refresh's re-send, and the pump that encodes UPDATEs only while the socket takes them;
// also our next hops toward a peer. Its own file: what goes out and how, apart from when (the session events).
import * as os from 'node:os';
import { IP, type Prefix, parseIP, parseIPWithLen, prefixContainsIP, prefixOf } from '../net/ip.ts';
import type { PathAttrs } from '../rib/attrs.ts';
import type { ExportPolicy, Rib, RibChangeBatch } from '../rib/rib.ts';
import type { ExportPolicies } from './export-policy.ts';
import type { PeerState } from './peer.ts';
import type { AddressFamily, Session } from './session.ts';
import type { Logger } from './speaker-config.ts';

/** The export side of a speaker: its RIB, its peers, the export policies they share. */
export class Exporter {
  constructor(
    private readonly rib: Rib,
    private readonly peerMap: ReadonlyMap<string, PeerState>,
    private readonly exports: ExportPolicies,
    private readonly log: Logger,
  ) {}

  /** A flush's changes to every established peer. */
  onRibChanges(batch: RibChangeBatch): void {
    for (const p of this.peerMap.values()) {
      if (!p.established) continue;
      p.queue.push(this.rib.exportChanges(p.source, batch, this.exportPolicyFor(p)));
      this.pump(p);
    }
  }

  /** The whole table to the peer (a new session, a changed export policy); only differences go on the wire. */
  exportAllTo(p: PeerState): void {
    p.queue.push(this.rib.exportAll(p.source, this.exportPolicyFor(p)));
    this.pump(p);
  }

  /** The session's export policy: it reads the peer's filters, route policy and our tagger when called, so it
   * stays right across reconfiguration; what it fixes (families, local AS, peer type) is the session's. */
  private exportPolicyFor(p: PeerState): ExportPolicy {
    if (p.exportPolicy === null || p.exportPolicyOf !== p.established) {
      p.exportPolicy = this.exports.policy(p, p.established?.negotiated?.families ?? []);
      p.exportPolicyOf = p.established;
    }
    return p.exportPolicy;
  }

  onRouteRefresh(p: PeerState, s: Session, family: AddressFamily, subtype: number): void {
    if (s !== p.established || subtype !== 0) return;
    // RFC 2918: re-send the whole Adj-RIB-Out of the family.
    const groups = new Map<PathAttrs, Prefix[]>();
    for (const { prefix, attrs } of this.rib.adjRibOut(p.source).entries()) {
      if ((prefix.family === 4 ? 'ipv4' : 'ipv6') !== family) continue;
      const l = groups.get(attrs);
      if (l) l.push(prefix);
      else groups.set(attrs, [prefix]);
    }
    this.log.info(`peer ${p.cfg.address}: route refresh ${family}: re-sending ${[...groups.values()].reduce((n, l) => n + l.length, 0)} routes`);
    for (const [attrs, prefixes] of groups) p.queue.pushAnnounce(attrs, prefixes);
    this.pump(p);
  }

  // ---- the write pump (src/bgp/export-queue.ts): UPDATEs are encoded only while the socket takes them -------------

  pump(p: PeerState): void {
    const s = p.established;
    if (!s) return;
    const neg = s.negotiated!;
    const opts = { fourOctetAs: neg.fourOctetAs, extendedMessage: neg.extendedMessage, selfNextHop4: p.nh4, selfNextHop6: p.nh6, selfNextHop6ll: p.nh6ll };
    p.queue.pump(s, opts, {
      error: (m) => this.log.error(`peer ${p.cfg.address}: cannot encode UPDATE: ${m}`),
      endOfRibSent: (f) => this.log.debug(`peer ${p.cfg.address}: sent End-of-RIB ${f}`),
      resume: (from) => {
        if (p.established === from) this.pump(p);
      },
    });
  }
}

// ---- our next hops --------------------------------------------------------------------------------------------

/** Our next hops toward the peer on session `s`: its configured ones, else the session's local address. */
export function computeNextHops(p: PeerState, s: Session): void {
  const nh = p.cfg.nextHop;
  const local = s.localIP();
  p.nh4 = nh.ipv4 ? parseIP(nh.ipv4) : local?.family === 4 ? local : null;
  p.nh6ll = nh.ipv6LinkLocal ? parseIP(nh.ipv6LinkLocal) : null;
  if (nh.ipv6) p.nh6 = parseIP(nh.ipv6);
  else if (local?.family === 6) {
    p.nh6 = local;
    if (!p.nh6ll && s.localAddress) p.nh6ll = linkLocalFor(s.localAddress, p.cfg.ip);
    if (p.nh6ll && isLinkLocal(local)) p.nh6ll = null;
  } else if (local?.family === 4) {
    // IPv6 routes over an IPv4 session: the IPv4-mapped address, as BIRD and FRR do.
    p.nh6 = new IP(6, 0, 0, 0xffff, local.w0);
  } else p.nh6 = null;
}

function isLinkLocal(ip: IP): boolean {
  return ip.family === 6 && ip.w0 >>> 22 === 0x3fa; // fe80::/10
}

/** Our link-local address on the interface that holds `localAddress`, when `peer` is on that link. */
function linkLocalFor(localAddress: string, peer: IP): IP | null {
  for (const addrs of Object.values(os.networkInterfaces())) {
    if (!addrs) continue;
    const mine = addrs.find((a) => a.family === 'IPv6' && a.address === localAddress);
    if (!mine || !mine.cidr) continue;
    const { ip, len } = parseIPWithLen(mine.cidr);
    const onLink = isLinkLocal(peer) || prefixContainsIP(prefixOf(ip, len), peer);
    if (!onLink) return null;
    const ll = addrs.find((a) => a.family === 'IPv6' && a.address.startsWith('fe80'));
    return ll ? parseIP(ll.address.split('%')[0]) : null;
  }
  return null;
}
