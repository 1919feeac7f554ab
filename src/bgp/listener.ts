// Accepting BGP connections: the listening socket, what becomes of each incoming connection (a peer's session, a
// second session while collision detection decides, or refused: strangers counted and logged at most once a
// minute), and RFC 4271 6.8 collision detection at the OPEN. Its own file: the speaker only starts and stops it.
import * as net from 'node:net';
import { CeaseSubcode, ErrorCode, encodeNotification, type OpenMessage } from './codec/index.ts';
import type { PeerState } from './peer.ts';
import { wantsSocketOptions, type PeerSockets } from './peer-security.ts';
import { RefusedLog, REFUSED_LOG_INTERVAL_MS, type RefusedLine } from './refused-log.ts';
import { stripMapped, type Session } from './session.ts';
import { peerSourceName, type Logger } from './speaker-config.ts';

/** The BGP listener's accept queue (see listen). */
const LISTEN_BACKLOG = 4096;

/** What the listener asks of the speaker. */
export interface ListenerHost {
  readonly log: Logger;
  readonly sockets: PeerSockets;
  now(): number;
  /** Between start() and stop(). */
  running(): boolean;
  /** The configured peer whose RIB source name (peerSourceName) this is. */
  peer(key: string): PeerState | undefined;
  /** A new session for the peer; `secondary`: an incoming connection's while the peer has one of its own. */
  newSession(p: PeerState, secondary: boolean): Session;
  /** Drop a session object once its socket has closed. */
  forgetLater(s: Session): void;
}

export class Listener {
  private server: net.Server | null = null;
  /** Connections from addresses that are not peers: counted, logged at most once a minute per address. */
  private readonly refusedLog = new RefusedLog();
  private refusedTimer: NodeJS.Timeout | null = null;
  private readonly log: Logger;

  constructor(private readonly host: ListenerHost) {
    this.log = host.log;
  }

  /** The listening socket (the peers' TCP-MD5 keys go on it), or null. */
  get socket(): net.Server | null {
    return this.server;
  }

  /** The address and port the listener is bound to, or null when not listening. */
  address(): { address: string; port: number } | null {
    const a = this.server?.address();
    return a && typeof a === 'object' ? { address: stripMapped(a.address), port: a.port } : null;
  }

  /** Bind and listen; resolves once listening. */
  listen(l: { address: string; port: number }): Promise<void> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((sock) => this.onConnection(sock));
      server.once('error', reject);
      // A route reflector's clients (or a mesh) reconnect all at once after a restart: Node's default backlog of
      // 511 overflowed with 1,000 clients while the event loop was busy reflecting (bench:bgp-reflector), and each
      // dropped SYN costs that client a retry. The kernel caps it at net.core.somaxconn (4096 by default).
      server.listen({ host: l.address, port: l.port, backlog: LISTEN_BACKLOG }, () => {
        server.off('error', reject);
        server.on('error', (e) => this.log.error(`listener: ${e.message}`));
        this.server = server;
        this.log.info(`listening on ${l.address} port ${(server.address() as net.AddressInfo).port}`);
        resolve();
      });
    });
  }

  /** Count a refused connection; log it if the address's minute is up (src/bgp/refused-log.ts). */
  private noteRefused(address: string): void {
    const line = this.refusedLog.note(address, this.host.now());
    if (line) this.logRefused(line);
    this.armRefusedFlush();
  }

  /** Counts of addresses that then go quiet are logged when their minute is up (checked once a minute). */
  private armRefusedFlush(): void {
    if (this.refusedTimer || !this.refusedLog.waiting()) return;
    this.refusedTimer = setTimeout(() => {
      this.refusedTimer = null;
      this.flushRefused(false);
      this.armRefusedFlush();
    }, REFUSED_LOG_INTERVAL_MS);
    this.refusedTimer.unref();
  }

  /** Log the counts whose minute is up; `all`: every count now (when the speaker stops). */
  flushRefused(all: boolean): void {
    if (all && this.refusedTimer) {
      clearTimeout(this.refusedTimer);
      this.refusedTimer = null;
    }
    for (const line of this.refusedLog.flush(this.host.now(), all)) this.logRefused(line);
  }

  private logRefused(l: RefusedLine): void {
    const what = l.count === 1 ? 'connection' : `${l.count} connections`;
    if (l.address === null) this.log.info(`${what} refused from other addresses: not configured peers (not logged one by one)`, { count: l.count });
    else this.log.info(`${what} from ${l.address} refused: not a configured peer`, { from: l.address, count: l.count });
  }

  /** Stop listening; resolves once every connection it accepted has closed too. */
  close(): Promise<void> {
    const srv = this.server;
    this.server = null;
    if (!srv) return Promise.resolve();
    return new Promise((resolve) => srv.close(() => resolve()));
  }

  private onConnection(sock: net.Socket): void {
    const remote = sock.remoteAddress ? stripMapped(sock.remoteAddress) : '';
    let key: string;
    try {
      key = peerSourceName(remote);
    } catch {
      sock.destroy();
      return;
    }
    const p = this.host.peer(key);
    if (!p) {
      // Not a peer: closed at once, nothing read or sent (as BIRD does), so a scan costs a socket for a moment only.
      sock.on('error', () => {});
      sock.destroy();
      this.noteRefused(key);
      return;
    }
    const s = p.session;
    if (!s || !this.host.running()) {
      // RFC 4486: a connection we will not use gets Cease/Connection Rejected.
      this.log.info(`connection from ${remote} rejected: ${p.refused ? `peer refused (${p.refused})` : 'peer not running'}`);
      rejectSocket(sock);
      return;
    }
    const st = s.state;
    if (st === 'Idle') {
      if (!s.fsm.enabled || s.fsm.damped || !s.fsm.isRunning('IdleHold')) {
        this.log.info(`connection from ${remote} rejected: peer is ${s.fsm.damped ? 'damped' : 'stopped'}`);
        rejectSocket(sock);
        return;
      }
    }
    if (wantsSocketOptions(p.cfg.security)) {
      try {
        this.host.sockets.onAccepted(sock, p.cfg.ip, p.cfg.security);
      } catch (e) {
        this.log.error(`connection from ${remote} rejected: ${(e as Error).message}`);
        rejectSocket(sock);
        return;
      }
    }
    if (st === 'Idle' || st === 'Active') {
      s.accept(sock);
      return;
    }
    // We have a connection of our own, or one on its way (Connect): run the new one in its own FSM until its OPEN
    // tells us which one to keep (collision detection), or that the peer restarted. Dropping our own attempt
    // instead would be symmetric: two speakers connecting at once would each kill the other's connection.
    if (p.incoming) {
      const old = p.incoming;
      p.incoming = null;
      old.stop({ code: ErrorCode.CEASE, subcode: CeaseSubcode.CONNECTION_COLLISION });
      this.host.forgetLater(old);
    }
    const second = this.host.newSession(p, true);
    p.incoming = second;
    second.start(true);
    second.accept(sock);
  }
}

/**
 * RFC 4271 6.8 collision detection, at the OPEN of connection `s`. Returns false to dump `s`; may dump the other
 * connection instead. RFC 4724 4.2: an OPEN from a peer whose previous session is still Established means the peer
 * restarted: the old session goes as if its TCP had failed (its routes become stale when GR was negotiated).
 */
export function collision(p: PeerState, s: Session, open: OpenMessage, routerId: number, log: Logger): boolean {
  const other = s === p.session ? p.incoming : p.session;
  if (!other || other.state === 'Idle' || other.state === 'Connect' || other.state === 'Active') return true;
  if (other.state === 'Established') {
    if (open.capabilities.some((c) => c.kind === 'graceful-restart') && p.peerGr) {
      log.info(`peer ${p.cfg.address}: new OPEN while Established: the peer restarted (graceful restart)`);
      other.dispatch({ type: 'TcpConnectionFails', reason: 'peer restarted (new connection while Established)' });
      return true;
    }
    log.info(`peer ${p.cfg.address}: collision with the Established session: new connection closed`);
    return false;
  }
  if (s.incoming === other.incoming) {
    // Two connections in the same direction (an earlier one the peer gave up on but we still hold): the newer
    // one is what the peer is using now.
    other.dispatch({ type: 'OpenCollisionDump' });
    return true;
  }
  // The connection initiated by the side with the higher BGP Identifier survives (RFC 6286 2.3: on equal
  // identifiers, the higher AS number).
  const peerId = open.bgpId >>> 0;
  const localWins = routerId !== peerId ? routerId > peerId : p.cfg.localAs > p.cfg.asn;
  const keep = localWins ? (s.incoming ? other : s) : (s.incoming ? s : other);
  log.info(`peer ${p.cfg.address}: connection collision, keeping the ${keep.incoming ? 'incoming' : 'outgoing'} connection`);
  if (keep === s) {
    other.dispatch({ type: 'OpenCollisionDump' });
    return true;
  }
  return false;
}

function rejectSocket(sock: net.Socket): void {
  sock.on('error', () => {});
  sock.end(encodeNotification(ErrorCode.CEASE, CeaseSubcode.CONNECTION_REJECTED));
  setTimeout(() => sock.destroy(), 2000).unref();
}
