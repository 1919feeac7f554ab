// What a peer is sent for a route: the export policy of one session (prefix filter, route policy, route
// reflection rules) and the eBGP/iBGP rewrite of the attributes (RFC 4271 5.1, 9.1.1; RFC 4456).
//
// Our own next hop is the NEXT_HOP_SELF marker (codec/next-hop-self.ts), written as the session's address when the
// UPDATE is encoded, so the rewrite does not depend on the session: peers of one kind (eBGP or iBGP, local AS,
// next-hop-self) share one rewritten record per source record, hence one interned id and one encoded attribute
// block. Whether the session has an address of ours to put there is checked per session, before the shared cache.
import type { AddressFamily } from './session.ts';
import type { IP, Prefix } from '../net/ip.ts';
import { prependAs, withAttrs, type PathAttrs } from '../rib/attrs.ts';
import { DEFAULT_LOCAL_PREF, type Path } from '../rib/bestpath.ts';
import type { ExportPolicy } from '../rib/rib.ts';
import { NEXT_HOP_SELF4, NEXT_HOP_SELF6 } from './codec/next-hop-self.ts';
import type { PrefixFilter } from './prefix-filter.ts';
import { reflectedAttrs, reflects } from './reflect.ts';
import type { RoutePolicy } from './route-policy.ts';

type Origin = 'local' | 'ibgp' | 'ebgp';

/** What the export policy reads of a peer (PeerState, src/bgp/peer.ts). Filters and route policy are read per call. */
export interface ExportPeer {
  readonly cfg: { readonly address: string; readonly localAs: number; readonly nextHopSelf: boolean; readonly rrClient: boolean };
  readonly type: 'ibgp' | 'ebgp';
  readonly exportFilter: PrefixFilter | null;
  readonly exportRoutePolicy: RoutePolicy | null;
  /** The session's own next hops (null: none of that family). */
  readonly nh4: IP | null;
  readonly nh6: IP | null;
  /** Families already warned about on this session (no next hop of ours). */
  readonly warnedNoNextHop: Set<AddressFamily>;
}

/** What the export policy reads of the speaker, when called. */
export interface ExportContext {
  /** Our route reflector cluster ID, undefined when we are not a reflector. */
  clusterId(): number | undefined;
  /** Whether the peer a route was learned from is a route-reflector client of ours. */
  isRrClient(source: Path['peer']): boolean;
  /** The communities prefix advertisements put on the route (src/bgp/communities.ts). */
  tag(prefix: Prefix, a: PathAttrs): PathAttrs;
  warn(message: string): void;
}

type RewriteCache = Record<Origin, WeakMap<PathAttrs, PathAttrs>>;

const newCache = (): RewriteCache => ({ local: new WeakMap(), ibgp: new WeakMap(), ebgp: new WeakMap() });

/** Whether a route (source attributes `a`, learned from a `from` source) goes to `p` with our own next hop. */
export function usesSelf(p: ExportPeer, family: 4 | 6, from: Origin, a: PathAttrs): boolean {
  return p.type === 'ebgp' || from === 'local' || p.cfg.nextHopSelf || a.nextHop === null || a.nextHop.family !== family;
}

/**
 * The attributes sent to a peer like `p` for a route with source attributes `a` learned from a `from` source, our
 * own next hop as the marker. The same for every peer of p's kind.
 */
export function rewriteForPeer(p: ExportPeer, family: 4 | 6, from: Origin, a: PathAttrs): PathAttrs {
  const self = family === 4 ? NEXT_HOP_SELF4 : NEXT_HOP_SELF6;
  if (p.type === 'ebgp') {
    return withAttrs(a, {
      asPath: prependAs(a.asPath, p.cfg.localAs),
      nextHop: self,
      nextHopLinkLocal: null,
      localPref: undefined,
      // MED is about the links into the AS that set it: only our own routes' MED leaves the AS (RFC 4271 5.1.4).
      med: from === 'local' ? a.med : undefined,
      originatorId: undefined,
      clusterList: [],
    });
  }
  const useSelf = usesSelf(p, family, from, a);
  return withAttrs(a, {
    localPref: a.localPref ?? DEFAULT_LOCAL_PREF,
    nextHop: useSelf ? self : a.nextHop,
    nextHopLinkLocal: useSelf ? null : a.nextHopLinkLocal,
  });
}

/** Export policies for sessions, with the rewrite results shared by peers of one kind. */
export class ExportPolicies {
  // Keyed by the (immutable) source records: nothing to invalidate.
  private readonly caches = new Map<string, [RewriteCache, RewriteCache]>();

  constructor(private readonly ctx: ExportContext) {}

  /** Kinds of peers seen (tests). */
  get kinds(): number {
    return this.caches.size;
  }

  /**
   * The export policy of `p`'s session, negotiated `families`. Make it once per session: it fixes the families,
   * the local AS and the peer's kind, and reads filters, route policy and tags when called.
   */
  policy(p: ExportPeer, families: readonly AddressFamily[]): ExportPolicy {
    const v4 = families.includes('ipv4');
    const v6 = families.includes('ipv6');
    const caches = this.cacheOf(p);
    const ctx = this.ctx;
    // The last answer: routes reach a policy grouped by source record (a whole UPDATE's worth, or a table walk
    // whose neighbours share a best path), so most calls repeat the previous one's input.
    let lastIn: PathAttrs | null = null;
    let lastFrom = '';
    let lastFamily = 0;
    let lastOut: PathAttrs | null = null;
    return (prefix, best) => {
      const family = prefix.family;
      if (family === 4 ? !v4 : !v6) return null;
      // (Never back to where it came from: exportChanges/exportAll do not ask the policy for those.)
      if (p.exportFilter && !p.exportFilter.accepts(prefix)) return null;
      const from = best.peer.type;
      // The route policy sees the route as held (before our AS is prepended), as a BIRD export filter does.
      let attrs = best.attrs;
      if (p.exportRoutePolicy) {
        const r = p.exportRoutePolicy.evaluate(prefix, attrs, { peerType: p.type, fromPeer: from !== 'local' });
        if (r === null) return null;
        attrs = r;
      }
      // iBGP-learned routes go to iBGP peers only by route reflection (RFC 4271 9.1.1 / 9.2, RFC 4456).
      if (from === 'ibgp' && p.type === 'ibgp') {
        const cid = ctx.clusterId();
        if (cid === undefined || !reflects(ctx.isRrClient(best.peer), p.cfg.rrClient)) return null;
        if (!this.hasNextHopFor(p, family, from, attrs)) return null;
        // Both steps cached (the rewrite per kind of peer, the reflection per rewritten record): every client of
        // a reflector gets the same record for a route, not one built per route and client.
        return ctx.tag(prefix, reflectedAttrs(this.rewritten(caches, p, family, from, attrs), best.peer.routerId, cid));
      }
      let out: PathAttrs;
      if (attrs === lastIn && from === lastFrom && family === lastFamily) out = lastOut!;
      else {
        if (!this.hasNextHopFor(p, family, from, attrs)) return null; // (per session: not cached)
        out = this.rewritten(caches, p, family, from, attrs);
        lastIn = attrs;
        lastFrom = from;
        lastFamily = family;
        lastOut = out;
      }
      return ctx.tag(prefix, out);
    };
  }

  /** rewriteForPeer through the cache of peers like `p`. */
  private rewritten(caches: [RewriteCache, RewriteCache], p: ExportPeer, family: 4 | 6, from: Origin, attrs: PathAttrs): PathAttrs {
    const cache = caches[family === 4 ? 0 : 1][from];
    let out = cache.get(attrs);
    if (out === undefined) cache.set(attrs, (out = rewriteForPeer(p, family, from, attrs)));
    return out;
  }

  /** The rewrite cache of peers like `p` (everything rewriteForPeer reads of a peer). */
  private cacheOf(p: ExportPeer): [RewriteCache, RewriteCache] {
    const kind = `${p.type} ${p.cfg.localAs} ${p.cfg.nextHopSelf ? 'self' : ''}`;
    let c = this.caches.get(kind);
    if (c === undefined) this.caches.set(kind, (c = [newCache(), newCache()]));
    return c;
  }

  /** Whether the route can go with the next hop it needs: not when that is ours and the session has none (warned once per family and session). */
  private hasNextHopFor(p: ExportPeer, family: 4 | 6, from: Origin, a: PathAttrs): boolean {
    if ((family === 4 ? p.nh4 : p.nh6) !== null || !usesSelf(p, family, from, a)) return true;
    const f: AddressFamily = family === 4 ? 'ipv4' : 'ipv6';
    if (!p.warnedNoNextHop.has(f)) {
      p.warnedNoNextHop.add(f);
      this.ctx.warn(`peer ${p.cfg.address}: no ${f} next hop of ours on this session (set nextHop.${f}): ${f} routes not sent`);
    }
    return false;
  }
}
