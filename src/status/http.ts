// The JSON status endpoint over node:http: read-only views of the running daemon. Handlers are registered by path
// (exact, or a prefix ending in "/" for /peers/{addr}), so later parts (metrics, ipam, dataplane) add their own.
// Two listeners share the handlers: status.listen serves every path, status.metricsListen only METRICS_PATHS, so
// the address scrapers and probes need can be wider than the one that shows routes, peers and IPAM state.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { getHeapStatistics } from 'node:v8';
import type { AddressInfo } from 'node:net';
import { describeAttrs } from '../bgp/codec/json.ts';
import type { PeerStatus } from '../bgp/peer.ts';
import { AddressError, formatIP, formatPrefix, parseIP, parsePrefix, type Family } from '../net/ip.ts';
import type { Path } from '../rib/bestpath.ts';
import type { Rib } from '../rib/rib.ts';
import type { Prefix } from '../net/ip.ts';

/** What the endpoint reads; getters because a config reload may change them. */
export interface StatusSource {
  version: string;
  /** ms since the epoch. */
  startedAt: number;
  node(): { name: string; os: string };
  bgp(): { asn: number; routerId: string } | null;
  peers(): PeerStatus[];
  /** Peers configured and established, without building every peer's status (what /status shows); else from peers(). */
  peerCounts?: () => { configured: number; established: number };
  rib(): Rib | null;
  /** ms since the epoch. Default Date.now. */
  now?: () => number;
  /** Service IP ranges announced from this node (Calico BGPConfiguration), shown in /status. */
  services?: () => unknown;
  /** The control socket or pipe and what protects it (as enforced and read back), shown in /status. */
  control?: () => unknown;
  /** Calico's etcd resources (layout calico): what is applied, and which IPAM settings are in force; in /status. */
  calico?: () => unknown;
}

export interface Reply {
  status?: number;
  body: unknown;
  /** Default application/json (body is JSON-encoded); text/* bodies are sent as they are. */
  contentType?: string;
  /** Extra response headers (e.g. the status page's content-security-policy). */
  headers?: Record<string, string>;
}

export type Handler = (url: URL, req: IncomingMessage) => Reply | Promise<Reply>;

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** /status's peer counts from the peers' statuses, for a source without peerCounts. */
function countPeers(peers: readonly PeerStatus[]): { configured: number; established: number } {
  return { configured: peers.length, established: peers.filter((p) => p.state === 'Established').length };
}

/**
 * The node flags this process runs with and the V8 heap limit they give, so an operator (and the Windows test under
 * wine, where the executable takes its flags from NODE_OPTIONS) can see the launcher's flags took effect: the
 * limit counts the young generation (three semi-spaces), so --max-semi-space-size shows in it.
 */
function runtime() {
  return {
    execArgv: process.execArgv,
    nodeOptions: process.env.NODE_OPTIONS ?? null,
    heapSizeLimitMB: Math.round((getHeapStatistics().heap_size_limit / 2 ** 20) * 10) / 10,
  };
}

/** Most routes /routes returns unless ?limit= says otherwise: a full table as one JSON document is ~200 MB. */
export const DEFAULT_ROUTE_LIMIT = 10_000;

/**
 * The most /routes returns whatever ?limit= says: ?limit=0 (once "all") and anything above are clamped to it and the
 * reply says so (`capped: true`, `limit`), so one request cannot make the daemon build a whole RIB as one document.
 */
export const MAX_ROUTE_LIMIT = 10_000;

/**
 * Both listeners' connection limits: with Node's defaults (no connection cap, headers timeout checked
 * only every 30 s) 15,000 connections that never finished their headers took the daemon from 80 to 187 MB RSS.
 * Status requests are small GETs answered at once, so the limits can be tight.
 */
export interface HttpLimits {
  /** A client must have sent its whole request head within this (ms), or gets 408 and is closed. */
  headersTimeout: number;
  /** ... and the whole request within this (ms). */
  requestTimeout: number;
  /** An idle keep-alive connection is closed after this (ms); also keeps it from holding shutdown up. */
  keepAliveTimeout: number;
  /** How often (ms) the two timeouts above are checked (Node's default is 30 s, which let half-open heads pile up). */
  connectionsCheckingInterval: number;
  /** Open connections per listener; more are closed at once (a scraper, probes and a few browsers need a handful). */
  maxConnections: number;
  /** Request head size (bytes); larger gets 431. Node's default is 16 KiB. */
  maxHeaderSize: number;
  /** Header lines read per request; the rest are dropped. Node's default is 2,000. */
  maxHeadersCount: number;
}

export const HTTP_LIMITS: Readonly<HttpLimits> = Object.freeze({
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  keepAliveTimeout: 5_000,
  connectionsCheckingInterval: 1_000,
  maxConnections: 256,
  maxHeaderSize: 8 * 1024,
  maxHeadersCount: 64,
});

export interface StatusServerOptions {
  /** Tests only: shorter timeouts or fewer connections than HTTP_LIMITS. */
  limits?: Partial<HttpLimits>;
}

/** What the metrics listener (status.metricsListen) serves: scrapers and kubelet probes, nothing about routes or peers. */
export const METRICS_PATHS: ReadonlySet<string> = new Set(['/metrics', '/healthz', '/readyz']);

const NOT_ON_METRICS = 'not served here: this listener (status.metricsListen) serves /metrics, /healthz and /readyz only; ' +
  'the rest is on the status address (status.listen)\n';

/** The main listener (status.listen, every path) or the metrics one (METRICS_PATHS only). */
export type Listener = 'status' | 'metrics';

export class StatusServer {
  private readonly exact = new Map<string, Handler>();
  private readonly prefixed: [string, Handler][] = [];
  private readonly servers: Record<Listener, Server | null> = { status: null, metrics: null };
  /** HTTP_LIMITS with the constructor's overrides, as both listeners use them. */
  readonly limits: Readonly<HttpLimits>;

  constructor(private readonly src: StatusSource, opts: StatusServerOptions = {}) {
    this.limits = { ...HTTP_LIMITS, ...opts.limits };
    const now = () => (src.now ?? Date.now)();
    this.route('/healthz', () => ({ body: 'ok\n', contentType: 'text/plain' }));
    this.route('/status', () => {
      const bgp = src.bgp();
      return {
        body: {
          node: src.node().name,
          os: src.node().os,
          ...(src.services ? { services: src.services() } : {}),
          ...(src.control ? { control: src.control() } : {}),
          ...(src.calico?.() ? { calico: src.calico() } : {}),
          asn: bgp?.asn ?? null,
          routerId: bgp?.routerId ?? null,
          version: src.version,
          node_version: process.version,
          runtime: runtime(),
          startedAt: new Date(src.startedAt).toISOString(),
          uptime: Math.floor((now() - src.startedAt) / 1000),
          peers: src.peerCounts?.() ?? countPeers(src.peers()),
          routes: src.rib()?.size ?? 0,
        },
      };
    });
    this.route('/peers', () => ({ body: src.peers() }));
    this.route('/peers/', (url) => {
      const text = decodeURIComponent(url.pathname.slice('/peers/'.length));
      let addr: string;
      try {
        addr = formatIP(parseIP(text));
      } catch {
        throw new HttpError(400, `not an IP address: ${JSON.stringify(text)}`);
      }
      const p = src.peers().find((x) => x.address === addr);
      if (!p) throw new HttpError(404, `no peer ${addr}`);
      return { body: p };
    });
    this.route('/routes', (url) => ({ body: routes(src.rib(), url.searchParams) }));
  }

  /** Register a GET handler: an exact path, or all paths under a prefix ending in "/". */
  route(path: string, handler: Handler): void {
    if (path.endsWith('/') && path !== '/') this.prefixed.push([path, handler]);
    else this.exact.set(path, handler);
  }

  /** The main listener: every path. */
  listen(address: string, port: number): Promise<{ address: string; port: number }> {
    return this.bind('status', address, port);
  }

  /** The metrics listener: METRICS_PATHS, with the same handlers; any other path is 404. */
  listenMetrics(address: string, port: number): Promise<{ address: string; port: number }> {
    return this.bind('metrics', address, port);
  }

  private async bind(which: Listener, address: string, port: number): Promise<{ address: string; port: number }> {
    if (this.servers[which]) throw new Error(`the ${which} listener is already open`);
    const only = which === 'metrics' ? METRICS_PATHS : undefined;
    const l = this.limits;
    const server = createServer({
      headersTimeout: l.headersTimeout,
      requestTimeout: l.requestTimeout,
      keepAliveTimeout: l.keepAliveTimeout,
      connectionsCheckingInterval: l.connectionsCheckingInterval,
      maxHeaderSize: l.maxHeaderSize,
    }, (req, res) => void this.handle(req, res, which, only));
    server.maxConnections = l.maxConnections;
    server.maxHeadersCount = l.maxHeadersCount;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, address, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.servers[which] = server;
    return this.boundAddress(which)!;
  }

  /** Where the main listener is bound (null when closed). */
  address(): { address: string; port: number } | null {
    return this.boundAddress('status');
  }

  /** Where the metrics listener is bound (null when closed or not configured). */
  metricsAddress(): { address: string; port: number } | null {
    return this.boundAddress('metrics');
  }

  private boundAddress(which: Listener): { address: string; port: number } | null {
    const a = this.servers[which]?.address() as AddressInfo | null | undefined;
    return a ? { address: a.address, port: a.port } : null;
  }

  /** Close one listener, or both. */
  async close(which?: Listener): Promise<void> {
    await Promise.all((which ? [which] : (['status', 'metrics'] as const)).map(async (w) => {
      const s = this.servers[w];
      if (!s) return;
      this.servers[w] = null;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    }));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, which: Listener, only?: ReadonlySet<string>): Promise<void> {
    let reply: Reply;
    try {
      if (!wellEscaped(req.url ?? '/')) return this.send(req, res, plain(400, 'bad request: malformed percent-escape in the path or query\n'));
      const url = new URL(req.url ?? '/', 'http://status');
      const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
      url.pathname = path; // handlers see "/peers/10.0.0.2" for "/peers/10.0.0.2/" too
      if (only && !only.has(path)) return this.send(req, res, plain(404, NOT_ON_METRICS));
      // DNS rebinding: a page on evil.example whose name turns into 127.0.0.1 could read the status views; its
      // requests carry Host: evil.example. The metrics paths are served to anyone on the metrics listener anyway.
      if (which === 'status' && !METRICS_PATHS.has(path) && !this.hostAllowed(req)) {
        return this.send(req, res, plain(421, `Host ${JSON.stringify(req.headers.host)} not accepted: this endpoint answers to ` +
          `localhost, 127.x.x.x and [::1] (any port), and the address it is reached on${this.boundHint()}\n`));
      }
      const handler = this.exact.get(path) ?? this.prefixed.find(([p]) => path.startsWith(p) && path.length > p.length)?.[1];
      if (!handler) throw new HttpError(404, `no such endpoint: ${url.pathname} (try /, /status, /peers, /routes, /healthz)`);
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET, HEAD');
        throw new HttpError(405, `${req.method} not allowed`);
      }
      reply = await handler(url, req);
    } catch (e) {
      const status = e instanceof HttpError ? e.status : e instanceof URIError ? 400 : 500;
      reply = { status, body: { error: e instanceof Error ? e.message : String(e) } };
    }
    this.send(req, res, reply);
  }

  /** The Host header names loopback, the listener's bound address, or the address this connection came in on. */
  private hostAllowed(req: IncomingMessage): boolean {
    const host = req.headers.host;
    if (host === undefined) return true; // not from a browser (HTTP/1.0); HTTP/1.1 without Host is refused by node
    const name = hostName(host);
    if (name === null) return false;
    if (name === 'localhost' || name === '::1' || /^127\.\d+\.\d+\.\d+$/.test(name)) return true;
    const bound = canonicalIP(this.boundAddress('status')?.address);
    return (bound !== null && bound !== '0.0.0.0' && bound !== '::' && name === bound) || name === canonicalIP(req.socket.localAddress);
  }

  private boundHint(): string {
    const a = this.boundAddress('status')?.address;
    return a && !['0.0.0.0', '::'].includes(a) ? ` (${a.includes(':') ? `[${a}]` : a})` : '';
  }

  private send(req: IncomingMessage, res: ServerResponse, reply: Reply): void {
    const type = reply.contentType ?? 'application/json';
    const body = type === 'application/json' ? JSON.stringify(reply.body, null, 2) + '\n' : String(reply.body);
    res.writeHead(reply.status ?? 200, { ...reply.headers, 'content-type': `${type}; charset=utf-8`, 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}

/** A short plain-text reply (errors raised before a handler runs). */
function plain(status: number, body: string): Reply {
  return { status, body, contentType: 'text/plain', headers: { 'x-content-type-options': 'nosniff' } };
}

/** Every %-escape in the request target is well formed (and decodes to UTF-8), as handlers' decodeURIComponent needs. */
function wellEscaped(target: string): boolean {
  if (!target.includes('%')) return true;
  try {
    decodeURIComponent(target);
    return true;
  } catch {
    return false;
  }
}

/** An address as formatIP spells it ("::ffff:10.0.0.1" as 10.0.0.1), or null when not an address. */
function canonicalIP(text: string | undefined): string | null {
  if (!text) return null;
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(text);
  try {
    return formatIP(parseIP(m ? m[1]! : text));
  } catch {
    return null;
  }
}

/** The name in a Host header without its port: lower case, an address canonical, IPv6 without brackets. */
function hostName(host: string): string | null {
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:\[\]]+))(?::\d*)?$/i.exec(host.trim());
  if (!m) return null;
  if (m[1] !== undefined) return canonicalIP(m[1]);
  const name = m[2]!.toLowerCase().replace(/\.$/, '');
  return canonicalIP(name) ?? name;
}

// ---- /routes ----------------------------------------------------------------------------------------------------

function describePath(p: Path, best: boolean) {
  return {
    source: p.source,
    peer: p.peer.address ? formatIP(p.peer.address) : null,
    type: p.peer.type,
    best,
    stale: p.stale,
    attributes: describeAttrs(p.attrs, true),
  };
}

function describeRoute(prefix: Prefix, paths: Path[]) {
  return { prefix: formatPrefix(prefix), paths: paths.map((p, i) => describePath(p, i === 0)) };
}

/**
 * ?prefix=P   that prefix with every candidate path (best first); 404 when absent
 * ?lpm=ADDR   the longest match for an address, best path (and ECMP set)
 * (neither)   best routes in prefix order, ?family=ipv4|ipv6, ?limit=N (0 or above MAX_ROUTE_LIMIT: MAX_ROUTE_LIMIT, and
 *             the reply says `capped: true` and the `limit` used)
 */
function routes(rib: Rib | null, q: URLSearchParams): unknown {
  const prefixText = q.get('prefix');
  const lpmText = q.get('lpm');
  const familyText = q.get('family');
  if (prefixText !== null && lpmText !== null) throw new HttpError(400, 'give prefix= or lpm=, not both');
  let family: Family | undefined;
  if (familyText !== null) {
    if (familyText !== 'ipv4' && familyText !== 'ipv6') throw new HttpError(400, `family must be ipv4 or ipv6, got ${JSON.stringify(familyText)}`);
    family = familyText === 'ipv4' ? 4 : 6;
  }
  const parse = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      throw new HttpError(400, e instanceof AddressError ? e.message : String(e));
    }
  };
  if (prefixText !== null) {
    const p = parse(() => parsePrefix(prefixText));
    const paths = rib ? rib.paths(p) : [];
    if (!paths.length) throw new HttpError(404, `no route for ${formatPrefix(p)}`);
    return describeRoute(p, paths);
  }
  if (lpmText !== null) {
    const ip = parse(() => parseIP(lpmText));
    const r = rib?.lpm(ip);
    if (!r) throw new HttpError(404, `no route covers ${formatIP(ip)}`);
    return { address: formatIP(ip), ...describeRoute(r.prefix, r.multipath.length ? r.multipath : [r.best]) };
  }
  const limitText = q.get('limit');
  const asked = limitText === null ? DEFAULT_ROUTE_LIMIT : Number(limitText);
  if (!Number.isInteger(asked) || asked < 0) throw new HttpError(400, `limit must be a whole number, got ${JSON.stringify(limitText)}`);
  const capped = asked === 0 || asked > MAX_ROUTE_LIMIT;
  const limit = capped ? MAX_ROUTE_LIMIT : asked;
  const out: unknown[] = [];
  let truncated = false;
  if (rib) {
    for (const r of rib.entries(family)) {
      if (out.length === limit) {
        truncated = true;
        break;
      }
      out.push(describeRoute(r.prefix, r.multipath.length ? r.multipath : [r.best]));
    }
  }
  // `capped` and `limit` only when the limit asked for was clamped, so other replies keep their shape.
  return { count: out.length, truncated, routes: out, ...(capped ? { capped: true, limit } : {}) };
}
