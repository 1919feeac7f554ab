// Socket options Node cannot set: TCP-MD5 (RFC 2385) and GTSM (RFC 5082) for BGP peers. This file is the pure
// half: the Linux option numbers and struct layouts, and which options each socket of a peer gets. The native
// half (./sockopt-koffi.ts: socket(2) and setsockopt(2) through koffi) is loaded with a dynamic import only when
// a peer needs it, so an idle daemon never maps the FFI library. Windows has neither option for applications
// (Winsock offers no TCP_MD5SIG and no minimum-TTL option), so there the host says why and loads nothing.
//
// Numbers checked against this machine's headers: linux/tcp.h (TCP_MD5SIG 14, struct tcp_md5sig,
// TCP_MD5SIG_MAXKEYLEN 80), linux/in.h (IP_TTL 2, IP_MINTTL 21), linux/in6.h (IPV6_UNICAST_HOPS 16,
// IPV6_MINHOPCOUNT 73); socket families from bits/socket.h (AF_INET 2, AF_INET6 10).
import { HOST_PLATFORM, type PlatformId } from './paths.ts';
import type { SockOpt, SocketCalls } from './socket-calls.ts';

export type { SockOpt, SocketCalls } from './socket-calls.ts';

export const AF_INET = 2;
export const AF_INET6 = 10;
export const SOL_IP = 0;
export const SOL_TCP = 6;
export const SOL_IPV6 = 41;
export const TCP_MD5SIG = 14;
export const TCP_MD5SIG_MAXKEYLEN = 80;
export const IP_TTL = 2;
export const IP_MINTTL = 21;
export const IPV6_UNICAST_HOPS = 16;
export const IPV6_MINHOPCOUNT = 73;
/** sizeof(struct tcp_md5sig): sockaddr_storage 128, flags 1, prefixlen 1, keylen 2, ifindex 4, key 80. */
export const TCP_MD5SIG_SIZE = 216;

/** What a peer asks of its sockets. */
export interface PeerSocketNeeds {
  /** The TCP-MD5 key (1..80 octets); absent: none. */
  md5Key?: Buffer;
  /** GTSM: the peer is at most this many hops away (1..255); absent: GTSM off. */
  ttlSecurity?: number;
}

/** A peer address in the form the socket calls need: the family and the octets (4 or 16). */
export interface SockAddr {
  family: 4 | 6;
  bytes: Uint8Array;
}

/** An IPv4 address as an IPv6 socket sees it (::ffff:a.b.c.d), so a dual-stack listener can key it. */
function mapped(a: SockAddr): Uint8Array {
  if (a.family === 6) return a.bytes;
  const b = new Uint8Array(16);
  b[10] = 0xff;
  b[11] = 0xff;
  b.set(a.bytes, 12);
  return b;
}

/**
 * struct tcp_md5sig for `peer` on a socket of family `sockFamily` (an IPv6 socket takes an IPv4 peer as
 * ::ffff:a.b.c.d; the kernel files it as an IPv4 key). An empty key deletes the peer's key.
 */
export function encodeMd5Sig(peer: SockAddr, key: Uint8Array, sockFamily: 4 | 6): Buffer {
  if (key.length > TCP_MD5SIG_MAXKEYLEN) throw new Error(`TCP-MD5 key is ${key.length} octets; the kernel takes at most ${TCP_MD5SIG_MAXKEYLEN}`);
  if (sockFamily === 4 && peer.family === 6) throw new Error('an IPv6 peer cannot have a key on an IPv4 socket');
  const b = Buffer.alloc(TCP_MD5SIG_SIZE);
  // struct sockaddr_in / sockaddr_in6 at the start of the sockaddr_storage; sa_family is host order (x86, arm: LE).
  if (sockFamily === 4) {
    b.writeUInt16LE(AF_INET, 0);
    b.set(peer.bytes, 4); // sin_addr after sin_port
  } else {
    b.writeUInt16LE(AF_INET6, 0);
    b.set(mapped(peer), 8); // sin6_addr after sin6_port and sin6_flowinfo
  }
  // tcpm_flags 0 (no prefix, no ifindex): the key is for exactly this address, on any interface.
  b.writeUInt16LE(key.length, 130);
  b.set(key, 136);
  return b;
}

function int(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32LE(v, 0);
  return b;
}

/** RFC 5082 3: send with TTL 255, accept only TTL >= 256 - hops (255 for a directly connected peer). */
export function gtsmOptions(family: 4 | 6, hops: number): SockOpt[] {
  if (!Number.isInteger(hops) || hops < 1 || hops > 255) throw new Error(`ttlSecurity must be 1..255 hops, got ${hops}`);
  const min = 256 - hops;
  return family === 4
    ? [
      { level: SOL_IP, name: IP_TTL, value: int(255), what: 'IP_TTL 255' },
      { level: SOL_IP, name: IP_MINTTL, value: int(min), what: `IP_MINTTL ${min}` },
    ]
    : [
      { level: SOL_IPV6, name: IPV6_UNICAST_HOPS, value: int(255), what: 'IPV6_UNICAST_HOPS 255' },
      { level: SOL_IPV6, name: IPV6_MINHOPCOUNT, value: int(min), what: `IPV6_MINHOPCOUNT ${min}` },
    ];
}

function md5Option(peer: SockAddr, key: Uint8Array, sockFamily: 4 | 6, label: string): SockOpt {
  return { level: SOL_TCP, name: TCP_MD5SIG, value: encodeMd5Sig(peer, key, sockFamily), what: `TCP_MD5SIG for ${label}` };
}

/** Options of the socket we connect to the peer from, set before connect() so the SYN is signed and sent at TTL 255. */
export function connectOptions(peer: SockAddr, label: string, needs: PeerSocketNeeds): SockOpt[] {
  const out: SockOpt[] = [];
  if (needs.md5Key) out.push(md5Option(peer, needs.md5Key, peer.family, label));
  if (needs.ttlSecurity !== undefined) out.push(...gtsmOptions(peer.family, needs.ttlSecurity));
  return out;
}

/**
 * Options on the listening socket for one peer: its key (accepted connections inherit the listener's keys, and
 * the SYN must be checked before any socket of ours exists). A minimum TTL on the listener would apply to every
 * peer, so GTSM sets only the outgoing TTL here (the SYN-ACK must reach a GTSM peer at 255); the minimum goes on
 * the accepted socket (acceptedOptions).
 */
export function listenerOptions(peer: SockAddr, label: string, needs: PeerSocketNeeds, listenerFamily: 4 | 6): SockOpt[] {
  const out: SockOpt[] = [];
  if (needs.md5Key && !(listenerFamily === 4 && peer.family === 6)) out.push(md5Option(peer, needs.md5Key, listenerFamily, label));
  // An IPv4 peer on a dual-stack listener is answered by the IPv4 stack: IP_TTL, not IPV6_UNICAST_HOPS.
  if (needs.ttlSecurity !== undefined) out.push(gtsmOptions(peer.family, needs.ttlSecurity)[0]);
  return out;
}

/** Options on a connection the peer made to us: GTSM's minimum TTL and our TTL 255. */
export function acceptedOptions(peer: SockAddr, needs: PeerSocketNeeds): SockOpt[] {
  return needs.ttlSecurity === undefined ? [] : gtsmOptions(peer.family, needs.ttlSecurity);
}

/** A key removal for `peer` on the listener (a peer removed or re-keyed). */
export function listenerKeyRemoval(peer: SockAddr, label: string, listenerFamily: 4 | 6): SockOpt[] {
  if (listenerFamily === 4 && peer.family === 6) return [];
  return [md5Option(peer, new Uint8Array(0), listenerFamily, label)];
}

// ---- the host --------------------------------------------------------------------------------------------------

export interface SocketOptionsHost {
  /** Why this OS cannot set these options (said in /peers and logs), or null when it can. */
  readonly unsupported: string | null;
  /** Load the native calls; rejects with an Error saying why they are unavailable. Loads once. */
  load(): Promise<SocketCalls>;
}

export const WINDOWS_UNSUPPORTED =
  'TCP-MD5 (RFC 2385) and GTSM (RFC 5082) are not available on Windows: Winsock has no TCP_MD5SIG and no minimum-TTL ' +
  'socket option, so a session could never be protected; the peer is not started';

/** The host's socket options: Linux loads the koffi adapter on first use; Windows refuses. */
export function socketOptionsHost(
  id: PlatformId = HOST_PLATFORM,
  loader: () => Promise<SocketCalls> = async () => (await import('./sockopt-koffi.ts')).loadSocketCalls(),
): SocketOptionsHost {
  if (id === 'win32') {
    return { unsupported: WINDOWS_UNSUPPORTED, load: () => Promise.reject(new Error(WINDOWS_UNSUPPORTED)) };
  }
  let loading: Promise<SocketCalls> | null = null;
  return {
    unsupported: null,
    load() {
      loading ??= loader().catch((e: unknown) => {
        loading = null; // a later peer may try again (e.g. after the package is installed)
        throw new Error(`TCP-MD5/GTSM need the koffi native module, which did not load: ${(e as Error).message}; the peer is not started`);
      });
      return loading;
    },
  };
}

let host: SocketOptionsHost | undefined;

/** This process's socket options host, made once. */
export function hostSocketOptions(): SocketOptionsHost {
  return (host ??= socketOptionsHost());
}
