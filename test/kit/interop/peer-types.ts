// The shapes of the interop lab's peers: what a test asks of a BIRD, GoBGP or FRR peer (Peer), how it is configured
// (PeerOptions, NeighborOptions, Announcement) and what it reports (Route, NeighborStatus). Its own file so that
// tests, the kit's peer kinds and the benches share one set of types.
import type { Netns } from './netns.ts';

export type PeerKind = 'bird' | 'gobgp' | 'frr';
export type Family = 'ipv4' | 'ipv6';
export type SessionState =
  | 'Idle' | 'Connect' | 'Active' | 'OpenSent' | 'OpenConfirm' | 'Established' | 'Down' | 'Unknown';

export interface NeighborOptions {
  address: string;
  asn: number;
  families?: Family[];
  /** only accept the neighbour's connections, never connect */
  passive?: boolean;
  /** proposed hold time (keepalive = hold/3); default: the daemon's (BIRD 240, GoBGP 90, FRR 180) */
  holdTime?: number;
  /** the neighbour's TCP port (where this peer connects to), e.g. when our speaker listens elsewhere than 179 */
  port?: number;
  gracefulRestart?: boolean | { restartTime?: number };
  /** TCP-MD5 password (BIRD `password`, FRR `neighbor X password`) */
  password?: string;
  /** GTSM: the neighbour is this many hops away (BIRD `ttl security on` + multihop, FRR `ttl-security hops N`) */
  ttlSecurity?: number;
  /** BFD with this neighbour (BIRD: protocol bfd + `bfd on`; FRR: bfdd + `neighbor X bfd profile`); ms, default 300 x 3 */
  bfd?: boolean | { minRx?: number; minTx?: number; multiplier?: number };
}

/** A neighbour's BFD parameters, null when it has none (test/kit/interop/bfd.ts reads the sessions). */
export function bfdOf(n: NeighborOptions): { minRx: number; minTx: number; multiplier: number } | null {
  if (!n.bfd) return null;
  const o = n.bfd === true ? {} : n.bfd;
  return { minRx: o.minRx ?? 300, minTx: o.minTx ?? 300, multiplier: o.multiplier ?? 3 };
}

export interface Announcement {
  prefix: string;
  communities?: string[]; // 'a:b'
  largeCommunities?: string[]; // 'a:b:c'
  med?: number;
  /** GoBGP only: an AS_PATH for the route as originated (the peer's own AS is prepended on eBGP export). */
  asPath?: number[];
}

export interface PeerOptions {
  asn: number;
  routerId?: string;
  neighbors: NeighborOptions[];
  announce?: (string | Announcement)[];
  side?: 'peer' | 'local';
  name?: string;
}

export interface Route {
  prefix: string;
  nexthop: string | null;
  nexthops: string[];
  asPath: number[];
  origin: 'igp' | 'egp' | 'incomplete' | null;
  med: number | null;
  localPref: number | null;
  communities: string[];
  largeCommunities: string[];
  /** neighbour address it was learned from; null when originated by this peer */
  from: string | null;
  best: boolean;
  stale: boolean;
}

export interface NeighborStatus {
  state: SessionState;
  lastError: string | null;
  raw: unknown;
}

export interface Peer {
  readonly kind: PeerKind;
  readonly name: string;
  readonly ns: Netns;
  readonly dir: string;
  readonly options: PeerOptions;
  readonly running: boolean;
  state(neighbor: string): Promise<SessionState>;
  neighbor(neighbor: string): Promise<NeighborStatus>;
  routes(family: Family): Promise<Route[]>;
  routeCount(family: Family): Promise<number>;
  announce(a: string | Announcement): Promise<void>;
  withdraw(prefix: string): Promise<void>;
  stop(): Promise<void>;
  kill(): Promise<void>;
  restart(opts?: { gracefulRestart?: boolean }): Promise<void>;
  logs(lines?: number): string;
  describe(): Promise<string>;
  waitEstablished(neighbor: string, timeoutMs?: number): Promise<void>;
  waitRoute(family: Family, prefix: string, opts?: { from?: string | null; present?: boolean; timeoutMs?: number }):
    Promise<Route | undefined>;
}
