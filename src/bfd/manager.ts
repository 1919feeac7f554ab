// The UDP adapter around the pure BFD sessions (RFC 5881, single hop): one listening socket per family on port
// 3784, one sending socket per session bound to a fixed source port in 49152-65535 with TTL 255, a timer per
// session at its next deadline, and demultiplexing by Your Discriminator or, when that is zero, by the source
// address. BGP subscribes to onDown (src/bgp/speaker.ts); /peers shows status().
//
// RFC 5881 5: received packets must have TTL / Hop Limit 255. Node's dgram cannot read a datagram's TTL, so the
// listener gets a kernel socket filter (src/platform/udp-ttl.ts) that delivers any other TTL as an empty message,
// counted here as a discard. Where the filter cannot be had (Windows, koffi missing) the check is not enforced, and
// the log and every session's status say so.
import * as dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import { decode } from './codec.ts';
import { BfdSession, type BfdAction, type BfdParams, type BfdSessionStatus } from './session.ts';
import { formatIP, parseIP } from '../net/ip.ts';
import { hostUdpTtlGuard, type UdpTtlGuard } from '../platform/udp-ttl.ts';

export const BFD_PORT = 3784;
const SRC_PORT_MIN = 49152;
const SRC_PORT_MAX = 65535;

export interface BfdPeerConfig {
  /** the peer's address; one session per address */
  address: string;
  /** intervals in ms, as in the config file */
  minRx: number;
  minTx: number;
  multiplier: number;
  /** our source address (default: the kernel's choice for the peer) */
  localAddress?: string;
}

export interface BfdPeerStatus extends BfdSessionStatus {
  /** our UDP source port */
  localPort: number | null;
  /** Up -> Down transitions that were failures (not the remote's AdminDown) */
  downs: number;
  /** ms since the epoch of the last failure, null: never */
  lastDown: number | null;
  packetsIn: number;
  packetsOut: number;
  /** packets for this session dropped by a reception check */
  discarded: number;
  lastDiscard: string | null;
  /** when the state last changed, ms since the epoch */
  since: number;
  /** the received-TTL check of RFC 5881 5 on this session's listener; `why` says why it is not enforced */
  ttlCheck: { enforced: boolean; why?: string };
}

/** What the speaker needs of BFD: status per peer and the failure events. */
export interface BfdSource {
  status(address: string): BfdPeerStatus | null;
  /** fn(address, reason) on each Up -> Down failure; returns the unsubscribe function */
  onDown(fn: (address: string, reason: string) => void): () => void;
}

export interface BfdLogger {
  info(msg: string): void;
  warn(msg: string): void;
}

export interface BfdManagerOptions {
  /** where we listen (default 3784; 0 = ephemeral, tests) */
  port?: number;
  /** where we send (default 3784) */
  peerPort?: number;
  /** listen address per family (default all) */
  listenAddress?: { ipv4?: string; ipv6?: string };
  logger?: BfdLogger;
  random?: () => number;
  /** ms since the epoch */
  now?: () => number;
  /** the received-TTL check (default: the host's; null: none, said in the status) */
  ttlGuard?: UdpTtlGuard | null;
  /** TTL / Hop Limit of our packets (default 255, as RFC 5881 5 asks; lower only to test a receiver's check) */
  ttl?: number;
}

/** A session with its socket, timer and the counters its status shows. */
interface Entry extends Pick<BfdPeerStatus, 'downs' | 'lastDown' | 'packetsIn' | 'packetsOut' | 'discarded' | 'lastDiscard' | 'since'> {
  cfg: BfdPeerConfig;
  key: string;
  family: 4 | 6;
  session: BfdSession;
  sock: dgram.Socket | null;
  port: number | null;
  timer: NodeJS.Timeout | null;
  closed: boolean;
}

const usOf = (c: BfdPeerConfig): BfdParams => ({ desiredMinTx: c.minTx * 1000, requiredMinRx: c.minRx * 1000, detectMult: c.multiplier });
const canon = (a: string): string => {
  const s = a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
  return formatIP(parseIP(s));
};

export class BfdManager extends EventEmitter<{ down: [address: string, reason: string]; state: [address: string, status: BfdPeerStatus] }> implements BfdSource {
  private readonly entries = new Map<string, Entry>();
  private readonly byDiscr = new Map<number, Entry>();
  private readonly sockets: Partial<Record<4 | 6, dgram.Socket>> = {};
  /** per listener family: null when the TTL filter is attached, else why not */
  private readonly ttlUnchecked: Partial<Record<4 | 6, string | null>> = {};
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly log: BfdLogger;
  /** the monotonic clock the sessions run on (ms) */
  private readonly mono = () => performance.now();

  constructor(private readonly opts: BfdManagerOptions = {}) {
    super();
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
    this.log = opts.logger ?? { info: () => {}, warn: () => {} };
  }

  onDown(fn: (address: string, reason: string) => void): () => void {
    this.on('down', fn);
    return () => this.off('down', fn);
  }

  status(address: string): BfdPeerStatus | null {
    // Asked for every peer on every status read: a config's address is already canonical, so parse only on a miss.
    if (this.entries.size === 0) return null;
    let e = this.entries.get(address);
    if (!e) {
      try { e = this.entries.get(canon(address)); } catch { return null; }
    }
    if (!e) return null;
    return {
      ...e.session.status(), localPort: e.port, downs: e.downs, lastDown: e.lastDown, packetsIn: e.packetsIn,
      packetsOut: e.packetsOut, discarded: e.discarded, lastDiscard: e.lastDiscard, since: e.since,
      ttlCheck: this.ttlCheck(e.family),
    };
  }

  /** The port the IPv4 (else IPv6) listener is bound to, null when none (tests with port 0). */
  listeningPort(family: 4 | 6 = 4): number | null {
    const s = this.sockets[family];
    return s ? s.address().port : null;
  }

  /** Make the set of sessions match the list: new ones start Down, removed ones go AdminDown and close. */
  async configure(peers: BfdPeerConfig[]): Promise<void> {
    const want = new Map(peers.map((p) => [canon(p.address), p]));
    for (const [key, e] of this.entries) if (!want.has(key)) this.remove(e);
    for (const [key, cfg] of want) {
      const e = this.entries.get(key);
      if (!e) await this.add(key, cfg);
      else if (e.cfg.minRx !== cfg.minRx || e.cfg.minTx !== cfg.minTx || e.cfg.multiplier !== cfg.multiplier) {
        e.cfg = cfg;
        this.act(e, e.session.setParams(usOf(cfg), this.mono()));
      }
    }
    for (const f of [4, 6] as const) {
      const used = [...this.entries.values()].some((e) => e.family === f);
      if (used && !this.sockets[f]) await this.listen(f);
      if (!used && this.sockets[f]) {
        this.sockets[f]!.close();
        delete this.sockets[f];
        delete this.ttlUnchecked[f];
      }
    }
  }

  /** Every session goes AdminDown (the remote must not call it a failure) and closes; silent: no packet, as a crash. */
  async close(opts: { silent?: boolean } = {}): Promise<void> {
    for (const e of [...this.entries.values()]) this.remove(e, opts.silent === true);
    for (const f of [4, 6] as const) {
      this.sockets[f]?.close();
      delete this.sockets[f];
      delete this.ttlUnchecked[f];
    }
  }

  // ---- sockets ---------------------------------------------------------------------------------------------------

  private async listen(f: 4 | 6): Promise<void> {
    const sock = dgram.createSocket({ type: f === 4 ? 'udp4' : 'udp6', ipv6Only: f === 6, reuseAddr: false });
    sock.on('message', (msg, rinfo) => this.onMessage(msg, rinfo.address, f));
    sock.on('error', (err) => this.log.warn(`bfd: IPv${f} listener: ${err.message}`));
    const address = f === 4 ? (this.opts.listenAddress?.ipv4 ?? '0.0.0.0') : (this.opts.listenAddress?.ipv6 ?? '::');
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.bind({ port: this.opts.port ?? BFD_PORT, address }, () => {
        sock.off('error', reject);
        resolve();
      });
    }).catch((err: Error) => {
      throw new Error(`bfd: cannot listen on ${address} port ${this.opts.port ?? BFD_PORT}: ${err.message}`);
    });
    this.sockets[f] = sock;
    await this.guardTtl(sock, f);
  }

  /** Attach the received-TTL filter to a listener; when it cannot be, say so (never a silent gap). */
  private async guardTtl(sock: dgram.Socket, f: 4 | 6): Promise<void> {
    const guard = this.opts.ttlGuard === undefined ? hostUdpTtlGuard() : this.opts.ttlGuard;
    let why: string | null;
    if (!guard) why = 'the received TTL of BFD packets is not checked: no TTL guard was configured';
    else if (guard.unsupported) why = guard.unsupported;
    else why = await guard.attach(sock, f).then(() => null, (e: Error) => e.message);
    this.ttlUnchecked[f] = why;
    if (why) this.log.warn(`bfd: IPv${f}: ${why}; single-hop sessions still take packets only from their peer's address`);
  }

  private ttlCheck(f: 4 | 6): { enforced: boolean; why?: string } {
    const why = this.ttlUnchecked[f];
    if (why === undefined) return { enforced: false, why: 'no listener yet' };
    return why === null ? { enforced: true } : { enforced: false, why };
  }

  /** A socket on a free source port in 49152-65535 (RFC 5881 4), TTL 255 (RFC 5881 5). */
  private async sender(f: 4 | 6, address?: string): Promise<{ sock: dgram.Socket; port: number }> {
    const span = SRC_PORT_MAX - SRC_PORT_MIN + 1;
    let lastErr: Error | null = null;
    for (let i = 0; i < 64; i++) {
      const port = SRC_PORT_MIN + Math.floor(this.random() * span) % span;
      const sock = dgram.createSocket({ type: f === 4 ? 'udp4' : 'udp6' });
      try {
        await new Promise<void>((resolve, reject) => {
          sock.once('error', reject);
          sock.bind({ port, address, exclusive: true }, () => {
            sock.off('error', reject);
            resolve();
          });
        });
        sock.setTTL(this.opts.ttl ?? 255);
        sock.on('error', (err) => this.log.warn(`bfd: send socket ${port}: ${err.message}`));
        return { sock, port };
      } catch (e) {
        lastErr = e as Error;
        sock.close();
      }
    }
    throw new Error(`bfd: no free source port in ${SRC_PORT_MIN}-${SRC_PORT_MAX}: ${lastErr?.message}`);
  }

  private newDiscriminator(): number {
    for (;;) {
      const d = 1 + Math.floor(this.random() * 0xfffffffe);
      if (!this.byDiscr.has(d)) return d;
    }
  }

  private async add(key: string, cfg: BfdPeerConfig): Promise<void> {
    const family = parseIP(key).family;
    const { sock, port } = await this.sender(family, cfg.localAddress);
    const discr = this.newDiscriminator();
    const e: Entry = {
      cfg, key, family, sock, port, timer: null, downs: 0, lastDown: null, packetsIn: 0, packetsOut: 0, discarded: 0,
      lastDiscard: null, since: this.now(), closed: false,
      session: new BfdSession(discr, usOf(cfg), this.random, this.mono()),
    };
    this.entries.set(key, e);
    this.byDiscr.set(discr, e);
    this.schedule(e);
  }

  private remove(e: Entry, silent = false): void {
    // Tell the remote we are going away on purpose (RFC 5882 3.2: AdminDown is not a failure).
    if (!silent) this.act(e, e.session.setAdminDown(true, this.mono()));
    e.closed = true;
    if (e.timer) clearTimeout(e.timer);
    const s = e.sock;
    e.sock = null;
    // close after the AdminDown packet has left
    if (s) setImmediate(() => s.close());
    this.entries.delete(e.key);
    this.byDiscr.delete(e.session.localDiscr);
  }

  private onMessage(msg: Buffer, from: string, f: 4 | 6): void {
    let src: string;
    try { src = canon(from); } catch { return; }
    const bySrc = this.entries.get(src);
    if (msg.length === 0 && this.ttlUnchecked[f] === null) {
      // the TTL filter's mark (src/platform/bpf-ttl.ts): a packet that did not arrive with TTL / Hop Limit 255
      if (bySrc) this.discard(bySrc, `received with a TTL / Hop Limit other than 255 (RFC 5881 5)`);
      return;
    }
    const d = decode(msg);
    if (!d.ok) {
      if (bySrc) this.discard(bySrc, d.reason);
      return;
    }
    const p = d.packet;
    const e = p.yourDiscriminator !== 0 ? this.byDiscr.get(p.yourDiscriminator) : bySrc;
    if (!e) {
      if (bySrc) this.discard(bySrc, `Your Discriminator ${p.yourDiscriminator} names no session`);
      return;
    }
    if (e !== bySrc) {
      // single hop: a session only takes packets from its own peer
      this.discard(e, `packet for discriminator ${p.yourDiscriminator} from ${src}, not ${e.key}`);
      return;
    }
    const r = e.session.receive(p, this.mono());
    if (!Array.isArray(r)) {
      this.discard(e, r.discard);
      return;
    }
    e.packetsIn++;
    this.act(e, r);
  }

  private discard(e: Entry, reason: string): void {
    e.discarded++;
    if (e.lastDiscard !== reason) this.log.warn(`bfd ${e.key}: packet discarded: ${reason}`);
    e.lastDiscard = reason;
  }

  private act(e: Entry, actions: BfdAction[]): void {
    for (const a of actions) {
      if (a.type === 'send') {
        if (!e.sock) continue;
        e.packetsOut++;
        e.sock.send(a.packet, this.opts.peerPort ?? BFD_PORT, e.key);
      } else {
        e.since = this.now();
        const failure = a.from === 'Up' && a.to === 'Down' && !a.remoteAdminDown;
        const st = e.session.status();
        if (failure) {
          e.downs++;
          e.lastDown = this.now();
          this.log.warn(`bfd ${e.key}: ${a.from} -> ${a.to} (${st.diag})`);
        } else this.log.info(`bfd ${e.key}: ${a.from} -> ${a.to}${a.to === 'Down' ? ` (${st.diag})` : ''}`);
        const s = this.status(e.key);
        if (s) this.emit('state', e.key, s);
        if (failure) this.emit('down', e.key, `BFD session down: ${st.diag}`);
      }
    }
    if (!e.closed) this.schedule(e);
  }

  private schedule(e: Entry): void {
    if (e.timer) clearTimeout(e.timer);
    const delay = Math.max(0, e.session.deadline() - this.mono());
    e.timer = setTimeout(() => {
      e.timer = null;
      if (!e.closed) this.act(e, e.session.advance(this.mono()));
    }, delay);
    e.timer.unref();
  }
}
