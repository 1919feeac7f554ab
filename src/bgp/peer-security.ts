// TCP-MD5 (RFC 2385) and GTSM (RFC 5082) for the speaker's peers: reading the password a peer names, and putting
// the socket options of src/platform/sockopt.ts on the sockets the speaker uses (the connecting socket, the
// listener, accepted connections). A peer that asks for them where they cannot be had (Windows, koffi missing, an
// unreadable password) is refused with the reason, never started unprotected and never left silently down.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import { inspect } from 'node:util';
import type { IP } from '../net/ip.ts';
import type { SecretSource } from '../store/etcd-auth.ts';
import {
  acceptedOptions, connectOptions, encodeMd5Sig, listenerKeyRemoval, listenerOptions, SOL_TCP, TCP_MD5SIG, TCP_MD5SIG_MAXKEYLEN,
  type PeerSocketNeeds, type SockAddr, type SocketCalls, type SocketOptionsHost,
} from '../platform/sockopt.ts';

const SALT = randomBytes(16);

/**
 * A TCP-MD5 key. It prints and serialises as a salted fingerprint (the salt is per process), so comparing two
 * configs sees a changed key while logs, JSON and inspect never carry the key.
 */
export class PeerKey {
  readonly #bytes: Buffer;
  readonly fingerprint: string;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
    this.fingerprint = createHash('sha256').update(SALT).update(bytes).digest('hex').slice(0, 16);
  }

  get bytes(): Buffer {
    return this.#bytes;
  }

  toJSON(): string {
    return `md5-key:${this.fingerprint}`;
  }

  toString(): string {
    return '[TCP-MD5 key]';
  }

  [inspect.custom](): string {
    return '[TCP-MD5 key]';
  }
}

/** A peer's protection, normalised. `problem` set: the peer cannot run (its password could not be read). */
export interface PeerSecurity {
  md5Key: PeerKey | null;
  ttlSecurity: number | null;
  problem: string | null;
}

function describe(src: SecretSource): string {
  return 'file' in src ? `file ${src.file}` : `environment variable ${src.env}`;
}

/** The peer's key from its password source; errors name the file or variable, never the content. */
export function readPeerPassword(src: SecretSource, env: NodeJS.ProcessEnv = process.env): PeerKey {
  let text: string;
  if ('file' in src) {
    try {
      text = readFileSync(src.file, 'utf8').replace(/\r?\n$/, '');
    } catch (e) {
      throw new Error(`password: cannot read ${describe(src)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  } else {
    const v = env[src.env];
    if (v === undefined) throw new Error(`password: ${describe(src)} is not set`);
    text = v;
  }
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length === 0) throw new Error(`password: ${describe(src)} is empty`);
  if (bytes.length > TCP_MD5SIG_MAXKEYLEN) {
    throw new Error(`password: ${describe(src)} holds ${bytes.length} octets; a TCP-MD5 key has at most ${TCP_MD5SIG_MAXKEYLEN}`);
  }
  return new PeerKey(bytes);
}

export function peerSecurity(cfg: { password?: SecretSource; ttlSecurity?: number }, env?: NodeJS.ProcessEnv): PeerSecurity {
  const out: PeerSecurity = { md5Key: null, ttlSecurity: cfg.ttlSecurity ?? null, problem: null };
  if (out.ttlSecurity !== null && (!Number.isInteger(out.ttlSecurity) || out.ttlSecurity < 1 || out.ttlSecurity > 255)) {
    throw new Error(`ttlSecurity must be 1..255 hops, got ${out.ttlSecurity}`);
  }
  if (cfg.password) {
    try {
      out.md5Key = readPeerPassword(cfg.password, env);
    } catch (e) {
      out.problem = (e as Error).message;
      // Still "has a password": the status says md5 and why the peer is down, not an unprotected peer.
      out.md5Key = new PeerKey(Buffer.alloc(0));
    }
  }
  return out;
}

export function wantsSocketOptions(s: PeerSecurity): boolean {
  return s.md5Key !== null || s.ttlSecurity !== null;
}

function needs(s: PeerSecurity): PeerSocketNeeds {
  const n: PeerSocketNeeds = {};
  if (s.md5Key) n.md5Key = s.md5Key.bytes;
  if (s.ttlSecurity !== null) n.ttlSecurity = s.ttlSecurity;
  return n;
}

function sockAddr(ip: IP): SockAddr {
  const words = ip.family === 4 ? [ip.w0] : [ip.w0, ip.w1, ip.w2, ip.w3];
  const bytes = new Uint8Array(words.length * 4);
  words.forEach((w, i) => new DataView(bytes.buffer).setUint32(i * 4, w >>> 0));
  return { family: ip.family, bytes };
}

/** The OS file descriptor under a Node socket or server (Linux). */
function fdOf(x: net.Socket | net.Server): number {
  const fd = (x as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('no file descriptor for this socket');
  return fd;
}

/** The speaker's hands on socket options: loaded once for all peers that need them. */
export class PeerSockets {
  private calls: SocketCalls | null = null;
  /** Peers whose key is on the current listener, by address: their fingerprints. */
  private keyed = new Map<string, { ip: IP; fingerprint: string }>();
  private keyedServer: net.Server | null = null;

  constructor(private readonly host: SocketOptionsHost) {}

  /** Load the native calls if a peer needs them; resolves to the reason a peer that needs them is refused, or null. */
  async prepare(): Promise<string | null> {
    if (this.calls) return null;
    if (this.host.unsupported) return this.host.unsupported;
    try {
      this.calls = await this.host.load();
      return null;
    } catch (e) {
      return (e as Error).message;
    }
  }

  /** A socket for connecting to the peer, with its options set before connect() (the SYN is signed, TTL 255). */
  openConnecting(ip: IP, label: string, sec: PeerSecurity): net.Socket {
    const calls = this.need();
    const fd = calls.socket(ip.family);
    try {
      for (const o of connectOptions(sockAddr(ip), label, needs(sec))) calls.setsockopt(fd, o);
    } catch (e) {
      calls.close(fd);
      throw e;
    }
    // libuv adopts the fd (non-blocking); connect() on this socket then uses it rather than making a new one.
    // manualStart: do not read before the connect (an unconnected socket reads as hung up).
    return new net.Socket({ fd, manualStart: true } as net.SocketConstructorOpts);
  }

  /** GTSM on a connection the peer made: set before any of its data is processed. */
  onAccepted(sock: net.Socket, ip: IP, sec: PeerSecurity): void {
    const opts = acceptedOptions(sockAddr(ip), needs(sec));
    if (!opts.length) return;
    const calls = this.need();
    const fd = fdOf(sock);
    for (const o of opts) calls.setsockopt(fd, o);
  }

  /**
   * Bring the listener's keys in line with `peers` (those with a key or GTSM): set new and changed keys, remove
   * keys of peers gone or without a password now. Returns the errors per peer address (the peer is refused).
   */
  syncListener(server: net.Server | null, peers: Iterable<{ address: string; ip: IP; sec: PeerSecurity }>): Map<string, string> {
    const errors = new Map<string, string>();
    if (server !== this.keyedServer) {
      this.keyed.clear();
      this.keyedServer = server;
    }
    if (!server || !this.calls) return errors;
    const addr = server.address();
    if (!addr || typeof addr !== 'object') return errors;
    const family: 4 | 6 = addr.family === 'IPv6' || (addr.family as unknown) === 6 ? 6 : 4;
    const fd = fdOf(server);
    const want = new Map<string, { ip: IP; sec: PeerSecurity }>();
    for (const p of peers) if (wantsSocketOptions(p.sec) && !p.sec.problem) want.set(p.address, p);
    for (const [address, k] of this.keyed) {
      if (want.get(address)?.sec.md5Key) continue;
      for (const o of listenerKeyRemoval(sockAddr(k.ip), address, family)) {
        try {
          this.calls.setsockopt(fd, o);
        } catch {
          // already gone: nothing to remove
        }
      }
      this.keyed.delete(address);
    }
    for (const [address, p] of want) {
      const fp = p.sec.md5Key?.fingerprint ?? `ttl:${p.sec.ttlSecurity}`;
      if (this.keyed.get(address)?.fingerprint === fp) continue;
      try {
        for (const o of listenerOptions(sockAddr(p.ip), address, needs(p.sec), family)) this.calls.setsockopt(fd, o);
        if (p.sec.md5Key) this.keyed.set(address, { ip: p.ip, fingerprint: fp });
      } catch (e) {
        errors.set(address, `listener: ${(e as Error).message}`);
      }
    }
    return errors;
  }

  /** Replace the TCP-MD5 key on a session's socket (connected or accepted) with `sec`'s: see ./md5-rekey.ts. */
  rekey(sock: net.Socket, ip: IP, sec: PeerSecurity, label: string): void {
    if (!sec.md5Key) throw new Error('no TCP-MD5 key to set');
    const calls = this.need();
    const fd = fdOf(sock);
    const family: 4 | 6 = net.isIPv6(sock.localAddress ?? '') ? 6 : 4;
    calls.setsockopt(fd, { level: SOL_TCP, name: TCP_MD5SIG, value: encodeMd5Sig(sockAddr(ip), sec.md5Key.bytes, family), what: `TCP_MD5SIG for ${label}` });
  }

  private need(): SocketCalls {
    if (!this.calls) throw new Error('socket options are not loaded');
    return this.calls;
  }
}
