// The received-TTL check for a UDP socket (single-hop BFD, RFC 5881 5): on Linux the BPF filter of ./bpf-ttl.ts
// attached through koffi (./udp-ttl-koffi.ts, loaded on first use); on Windows there is no socket filter and no
// way for Node to read a datagram's TTL, so the check is not enforced and the host says so.
import type * as dgram from 'node:dgram';
import { HOST_PLATFORM, type PlatformId } from './paths.ts';
import { encodeProgram, ttlFilterProgram } from './bpf-ttl.ts';
import type { FilterCalls } from './udp-ttl-koffi.ts';

export interface UdpTtlGuard {
  /** Why received TTLs cannot be checked here, or null when they can. */
  readonly unsupported: string | null;
  /** Make `sock` (bound) deliver datagrams of any other TTL / Hop Limit than 255 as empty messages; rejects saying why not. */
  attach(sock: dgram.Socket, family: 4 | 6): Promise<void>;
}

export const WINDOWS_TTL_UNSUPPORTED =
  'the received TTL of BFD packets is not checked (RFC 5881 5): Windows offers no socket filter and Node cannot read a datagram\'s TTL';

/**
 * The file descriptor of a bound dgram socket. Node keeps its handle under an internal symbol (the public `_handle`
 * getter is deprecated and warns); null when this Node version lays it out otherwise.
 */
export function dgramFd(sock: dgram.Socket): number | null {
  const sym = Object.getOwnPropertySymbols(sock).find((s) => s.description === 'state symbol');
  const handle = sym ? (sock as unknown as Record<symbol, { handle?: { fd?: unknown } }>)[sym]?.handle : undefined;
  return typeof handle?.fd === 'number' && handle.fd >= 0 ? handle.fd : null;
}

export function udpTtlGuard(
  id: PlatformId = HOST_PLATFORM,
  loader: () => Promise<FilterCalls> = async () => (await import('./udp-ttl-koffi.ts')).loadFilterCalls(),
): UdpTtlGuard {
  if (id === 'win32') return { unsupported: WINDOWS_TTL_UNSUPPORTED, attach: () => Promise.reject(new Error(WINDOWS_TTL_UNSUPPORTED)) };
  let loading: Promise<FilterCalls> | null = null;
  return {
    unsupported: null,
    async attach(sock, family) {
      loading ??= loader().catch((e: unknown) => {
        loading = null;
        throw new Error(`the received TTL of BFD packets is not checked: the koffi native module did not load: ${(e as Error).message}`);
      });
      const calls = await loading;
      const fd = dgramFd(sock);
      if (fd === null) throw new Error('the received TTL of BFD packets is not checked: this Node version does not expose the socket\'s descriptor');
      try {
        calls.attachFilter(fd, encodeProgram(ttlFilterProgram(family)));
      } catch (e) {
        throw new Error(`the received TTL of BFD packets is not checked: ${(e as Error).message}`);
      }
    },
  };
}

let host: UdpTtlGuard | undefined;

/** This process's guard, made once. */
export function hostUdpTtlGuard(): UdpTtlGuard {
  return (host ??= udpTtlGuard());
}
