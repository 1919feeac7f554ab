// The distributed Store: etcd v3 through the etcd3 client (gRPC). Every node of a cluster shares IPAM state here.
//
// Mapping: a Store key is the etcd key keyPrefix + key (UTF-8); createRevision/modRevision are etcd's
// create_revision/mod_revision and the store revision is etcd's header revision. A compare {key, modRevision: 0}
// is create_revision == 0 (the key is absent), any other is mod_revision == N. No leases: nothing expires.
//
// Failures (also in docs/reference/store.md):
// - Reads (get, list, revision) are linearizable and are retried with backoff while etcd is unreachable, has no
//   leader or times out, for up to `retryForMs`; then a StoreError names the endpoints and the last error.
// - A write whose request provably never left (connection refused, every endpoint's breaker open) is retried the
//   same way, and if it never gets through the StoreError says it was not applied.
// - A write whose outcome is unknown (the connection broke or the deadline passed after sending) is never simply
//   sent again as if it had failed. It is resolved: once etcd answers, the history between the last revision this
//   client had seen before sending (L) and now (H) is read through a watch of the whole key space from L+1 (every
//   revision holds at least one event, so reaching H proves the history is complete). If some revision holds
//   exactly the transaction's writes, it applied there and that is the result. If none does, the same request is
//   sent again: a transaction that compares a key it also writes (every IPAM write does) cannot apply twice,
//   because applying it moves that key off the compared revision. If that re-send fails its compare, the history
//   is read once more up to the re-send's revision, in case the first copy committed late and is the reason.
//   Transactions with no such compare (plain put) are at-least-once: the same writes may land twice, to the same
//   final state. If history was compacted first, or etcd stays away past `retryForMs`, the StoreError says
//   "outcome unknown".
// - Watches resume after a broken stream from the revision after the last one delivered; a watch whose start
//   revision was compacted stops with a StoreError to `onError`.
import { circuitBreaker, ConsecutiveBreaker, handleWhen, isBrokenCircuitError, noop } from 'cockatiel';
import {
  Etcd3,
  isRecoverableError,
  type ICompare,
  type IEvent,
  type IKeyValue,
  type IRequestOp,
  type IResponseHeader,
  type ITxnRequest,
  type ITxnResponse,
  type IWatchResponse,
} from 'etcd3';
import {
  StoreError,
  type Compare,
  type KeyValue,
  type Op,
  type Store,
  type TxnResult,
  type WatchEvent,
  type Watcher,
} from './types.ts';
import type { EtcdCredentials } from './etcd-auth.ts';

export interface EtcdStoreOptions {
  /**
   * Prepended to every key, and stripped from keys read back, so several independent stores can share one etcd.
   * Default "": IPAM keys already start with /blockspeaker/.
   */
  keyPrefix?: string;
  /** Deadline of a single request to etcd, in ms. Default 5000. */
  requestTimeoutMs?: number;
  /** How long one call keeps retrying while etcd is unreachable, leaderless or timing out, in ms. Default 20000. */
  retryForMs?: number;
  /** How long openEtcdStore waits for a first answer, in ms. Default 10000. */
  connectTimeoutMs?: number;
  /** Keys per range request when listing a prefix. Default 500. */
  pageSize?: number;
  /** One line per retry, reconnect and resolved outcome (for logs). */
  log?: (line: string) => void;
  /** Speak TLS to every endpoint (etcds://). */
  tls?: boolean;
  /** TLS files' contents and etcd user/password (see etcd-auth.ts); the password is never logged. */
  credentials?: EtcdCredentials;
}

export interface EtcdStoreStats {
  /** Transactions sent (puts and deletes included). */
  txns: number;
  /** Requests retried after an error (reads, and writes that provably were not sent). */
  retries: number;
  /** Writes whose outcome was unknown after an error. */
  unknownOutcomes: number;
  /** ... of which the history showed they had applied. */
  resolvedApplied: number;
  /** ... of which were sent again because the history showed they had not applied. */
  resolvedResent: number;
  /** Watch streams re-established. */
  watchReconnects: number;
}

type ErrorKind = 'notSent' | 'retry' | 'permanent' | 'compacted' | 'closed';

const MAX_BACKOFF_MS = 1000;
const ALL = Buffer.from([0]);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * A failed TLS handshake, said plainly: it will not heal by retrying (wrong CA, no or unknown client certificate,
 * a server certificate without our address), so it is a permanent error. undefined when msg is something else.
 */
export function tlsFailure(msg: string): string | undefined {
  if (/unable to verify|self[- ]signed certificate|unable to get (local )?issuer|certificate verify failed|CERT_/i.test(msg)) {
    return "etcd's server certificate is not signed by the CA we trust (give the CA that signed it: ipam.etcd.ca or --etcd-ca)";
  }
  if (/Hostname\/IP does not match|altnames|ERR_TLS_CERT_ALTNAME/i.test(msg)) {
    return "etcd's server certificate does not name the address we connect to (its subjectAltName must list it)";
  }
  if (/alert (bad certificate|certificate required|unknown ca|certificate unknown|handshake failure)|alert number (42|46|48|116)\b/i.test(msg)) {
    return 'etcd refused our client certificate, or we sent none (etcd runs with --client-cert-auth: give ipam.etcd.cert and key, signed by its --trusted-ca-file)';
  }
  if (/certificate has expired|certificate is not yet valid/i.test(msg)) return `a certificate is outside its validity period (${/certificate (has expired|is not yet valid)/i.exec(msg)![0]})`;
  if (/wrong version number|packet length too long|http\/1\.1 ?400|unexpected eof while reading/i.test(msg)) return 'TLS handshake failed: is the endpoint really serving TLS (etcds://), or plain TCP (etcd://)?';
  return undefined;
}

let sniQuiet = false;
/**
 * grpc-js sends an IP endpoint as the TLS ServerName, which Node flags once per process with DEP0123 on stderr
 * (the certificate is still checked against the IP's subjectAltName). Drop that one warning so the CLI's error
 * stays one line and the daemon's stderr stays JSON; every other warning passes.
 */
function quietIpServerNameWarning(): void {
  if (sniQuiet) return;
  sniQuiet = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const code = typeof rest[0] === 'object' && rest[0] !== null ? (rest[0] as { code?: string }).code : rest[1];
    if (code === 'DEP0123') return;
    emit(warning, ...rest);
  }) as typeof process.emitWarning;
}

/** What an error from the client means for a retry. Only 'notSent' proves a write did not reach etcd. */
function classify(e: unknown): ErrorKind {
  if (e instanceof StoreError) return 'permanent';
  if (isBrokenCircuitError(e)) return 'notSent';
  const msg = message(e);
  if (tlsFailure(msg)) return 'permanent';
  if (/client was already closed/i.test(msg)) return 'closed';
  // Refused connections and calls that found no connection to go out on.
  if (/ECONNREFUSED|No connection established|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/i.test(msg)) return 'notSent';
  // etcd checks this before it proposes anything.
  if (/etcdserver: too many requests/i.test(msg)) return 'notSent';
  if (/required revision has been compacted/i.test(msg)) return 'compacted';
  if (
    /duplicate key given|too many operations in txn|request is too large|permission denied|authentication failed|invalid auth token|user name is empty|key is not provided|received message larger than max|value provided is too large/i.test(msg)
  ) {
    return 'permanent';
  }
  // Everything else (unavailable, deadline exceeded, leader changed, request timed out, ...) may be transient;
  // for a write it means the outcome is unknown.
  return 'retry';
}

/** The end of the range holding every key that starts with `prefix` (etcd's "prefix end"). */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return end.subarray(0, i + 1);
    }
  }
  return ALL; // all 0xff (or empty): to the end of the key space
}

interface Effect {
  type: 'put' | 'delete';
  value?: Buffer;
}

type WatchStream = Awaited<ReturnType<Etcd3['watchClient']['watch']>>;

/** Stop a raw watch stream without etcd3 marking the endpoint failed (it does so for errors while writable). */
function dropStream(stream: WatchStream): void {
  stream.on('error', () => {});
  try {
    stream.end();
    stream.cancel();
  } catch {
    // already gone
  }
}

export class EtcdStore implements Store {
  readonly name: string;
  readonly endpoints: string[];
  private readonly client: Etcd3;
  private readonly keyPrefix: Buffer;
  private readonly requestTimeoutMs: number;
  private readonly retryForMs: number;
  private readonly pageSize: number;
  private readonly log: (line: string) => void;
  private readonly watchers = new Set<EtcdWatcher>();
  private closed = false;
  /** The highest header revision seen in any answer: a transaction sent after it can only apply above it. */
  private seenRev = 0;
  private readonly counters: EtcdStoreStats = { txns: 0, retries: 0, unknownOutcomes: 0, resolvedApplied: 0, resolvedResent: 0, watchReconnects: 0 };

  constructor(endpoints: string[], opts: EtcdStoreOptions = {}) {
    if (!Array.isArray(endpoints) || endpoints.length === 0) throw new StoreError('etcd store: no endpoints given (host:port)');
    for (const ep of endpoints) {
      if (!/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(ep)) throw new StoreError(`etcd store: endpoint "${ep}" is not host:port`);
    }
    this.endpoints = [...endpoints];
    this.keyPrefix = Buffer.from(opts.keyPrefix ?? '', 'utf8');
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 5000;
    this.retryForMs = opts.retryForMs ?? 20000;
    this.pageSize = opts.pageSize ?? 500;
    this.log = opts.log ?? (() => {});
    const tls = opts.tls ?? false;
    const user = opts.credentials?.auth?.username;
    this.name = `${tls ? 'etcds' : 'etcd'}://${endpoints.join(',')}${opts.keyPrefix ? ` (key prefix ${JSON.stringify(opts.keyPrefix)})` : ''}${user ? ` (user ${user})` : ''}`;
    const timeout = this.requestTimeoutMs;
    const t = opts.credentials?.tls;
    if (tls) quietIpServerNameWarning();
    this.client = new Etcd3({
      hosts: endpoints.map((e) => `${tls ? 'https' : 'http'}://${e}`),
      // No CA given: grpc's default roots (rootCertificate null).
      credentials: tls && t ? { rootCertificate: t.ca as Buffer, privateKey: t.key, certChain: t.cert } : undefined,
      auth: opts.credentials?.auth,
      // Retries are ours (a blind client-side retry of a write would hide an unknown outcome). Per endpoint, a
      // breaker stops sending to a member that keeps failing and tries it again after a second.
      faultHandling: {
        global: noop,
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(3) }),
      },
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
      grpcOptions: {
        // A restarted etcd is found again within a second, not after grpc's default backoff of up to 2 minutes;
        // a private subchannel pool keeps one store's backoff state from leaking into another's.
        'grpc.use_local_subchannel_pool': 1,
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.min_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1000,
        // etcd refuses pings more often than every 5 s.
        'grpc.keepalive_time_ms': 10000,
        'grpc.keepalive_timeout_ms': 5000,
        // History scans and list pages can be larger than grpc's 4 MiB default.
        'grpc.max_receive_message_length': -1,
      },
    });
  }

  stats(): EtcdStoreStats {
    return { ...this.counters };
  }

  // ---- keys and answers -------------------------------------------------------------------------------------

  private enc(key: string): Buffer {
    return this.keyPrefix.length ? Buffer.concat([this.keyPrefix, Buffer.from(key, 'utf8')]) : Buffer.from(key, 'utf8');
  }

  private dec(key: Buffer): string {
    return key.subarray(this.keyPrefix.length).toString('utf8');
  }

  private toKv(kv: IKeyValue): KeyValue {
    return { key: this.dec(kv.key), value: kv.value.toString('utf8'), createRevision: Number(kv.create_revision), modRevision: Number(kv.mod_revision) };
  }

  private seen(header: IResponseHeader | undefined): number {
    const rev = Number(header?.revision ?? 0);
    if (rev > this.seenRev) this.seenRev = rev;
    return rev;
  }

  private checkOpen(): void {
    if (this.closed) throw new StoreError(`${this.name}: store is closed`);
  }

  private unreachable(what: string, err: unknown, extra = '', windowMs = this.retryForMs): StoreError {
    return new StoreError(
      `${this.name}: ${what}: etcd unreachable at ${this.endpoints.join(', ')} for ${(windowMs / 1000).toFixed(1)} s${extra} (last error: ${message(err)})`,
    );
  }

  private wrap(what: string, err: unknown): StoreError {
    if (err instanceof StoreError) return err;
    if (classify(err) === 'closed') return new StoreError(`${this.name}: store is closed`);
    const msg = message(err);
    const tls = tlsFailure(msg);
    if (tls) return new StoreError(`${this.name}: ${what}: TLS with ${this.endpoints.join(', ')} failed: ${tls}`);
    const hint = /too many operations in txn/.test(msg)
      ? ' (etcd allows --max-txn-ops operations per transaction, 128 by default)'
      : /request is too large/.test(msg)
        ? ' (etcd accepts requests up to --max-request-bytes, 1.5 MiB by default)'
        : '';
    return new StoreError(`${this.name}: ${what}: ${msg}${hint}`);
  }

  /** Run a request that is safe to repeat (a read), retrying with backoff until `retryForMs` has passed. */
  private async retrying<T>(what: string, fn: () => Promise<T>, retryForMs = this.retryForMs): Promise<T> {
    const deadline = Date.now() + retryForMs;
    let delay = 25;
    let cause: unknown; // the last error that was not "circuit breaker open", which says nothing about why
    for (;;) {
      this.checkOpen();
      try {
        return await fn();
      } catch (e) {
        const kind = classify(e);
        if (kind !== 'notSent' && kind !== 'retry') throw this.wrap(what, e);
        if (this.closed) throw new StoreError(`${this.name}: store is closed`);
        if (!isBrokenCircuitError(e)) cause = e;
        if (Date.now() + delay > deadline) throw this.unreachable(what, cause ?? e, '', retryForMs);
        this.counters.retries++;
        this.log(`etcd: ${what}: ${message(e)}; retrying in ${delay} ms`);
        await sleep(delay + Math.floor(Math.random() * delay));
        delay = Math.min(delay * 2, MAX_BACKOFF_MS);
      }
    }
  }

  // ---- reads ------------------------------------------------------------------------------------------------

  async get(key: string): Promise<KeyValue | undefined> {
    const res = await this.retrying(`get ${key}`, () => this.client.kv.range({ key: this.enc(key) }));
    this.seen(res.header);
    return res.kvs[0] ? this.toKv(res.kvs[0]) : undefined;
  }

  async list(prefix: string): Promise<KeyValue[]> {
    const start = this.enc(prefix);
    const [from, end] = start.length ? [start, prefixEnd(start)] : [ALL, ALL];
    // Pages after the first read at the first page's revision, so the list is one consistent snapshot. If that
    // revision is compacted between pages, start over.
    for (let attempt = 0; ; attempt++) {
      const out: KeyValue[] = [];
      let key = from;
      let rev = '0';
      try {
        for (;;) {
          const res = await this.retrying(`list ${prefix}`, () =>
            this.client.kv.range({ key, range_end: end, limit: this.pageSize, revision: rev }),
          );
          if (rev === '0') rev = String(this.seen(res.header));
          for (const kv of res.kvs) out.push(this.toKv(kv));
          if (!res.more || res.kvs.length === 0) return out;
          key = Buffer.concat([res.kvs[res.kvs.length - 1].key, ALL]);
        }
      } catch (e) {
        if (attempt < 3 && e instanceof StoreError && /compacted/.test(e.message)) continue;
        throw e;
      }
    }
  }

  async revision(): Promise<number> {
    return this.currentRevision(this.retryForMs);
  }

  /** The current revision, retrying for at most `retryForMs` (openEtcdStore uses it to wait for etcd). */
  async currentRevision(retryForMs: number): Promise<number> {
    // One key under the store's own prefix (not the whole key space), so an etcd user allowed only that prefix may
    // open the store; the header carries the store-wide revision either way.
    const res = await this.retrying('read the revision', () => this.client.kv.range({ key: this.enc('/blockspeaker/'), count_only: true }), retryForMs);
    return this.seen(res.header);
  }

  // ---- writes -----------------------------------------------------------------------------------------------

  async put(key: string, value: string): Promise<number> {
    return (await this.txn([], [{ type: 'put', key, value }])).revision;
  }

  async delete(key: string): Promise<boolean> {
    // Compare-and-delete, so the answer is exact even when an outcome had to be resolved.
    for (;;) {
      const cur = await this.get(key);
      if (!cur) return false;
      if ((await this.txn([{ key, modRevision: cur.modRevision }], [{ type: 'delete', key }])).succeeded) return true;
    }
  }

  async txn(compares: Compare[], ops: Op[]): Promise<TxnResult> {
    this.checkOpen();
    // etcd refuses two ops on one key in a transaction; the last one decides the result anyway.
    const last = new Map<string, Op>();
    for (const op of ops) {
      last.delete(op.key);
      last.set(op.key, op);
    }
    const effect = new Map<string, Effect>();
    const success: IRequestOp[] = [];
    for (const op of last.values()) {
      const key = this.enc(op.key);
      if (op.type === 'put') {
        const value = Buffer.from(op.value, 'utf8');
        success.push({ request_put: { key, value } });
        effect.set(key.toString('latin1'), { type: 'put', value });
      } else {
        success.push({ request_delete_range: { key } });
        effect.set(key.toString('latin1'), { type: 'delete' });
      }
    }
    const req: ITxnRequest = {
      compare: compares.map(
        (c): ICompare =>
          c.modRevision === 0
            ? { key: this.enc(c.key), target: 'Create', result: 'Equal', create_revision: '0' }
            : { key: this.enc(c.key), target: 'Mod', result: 'Equal', mod_revision: String(c.modRevision) },
      ),
      success,
      // On failure, read the compared keys in the same transaction to say which compares did not hold.
      failure: compares.map((c): IRequestOp => ({ request_range: { key: this.enc(c.key), keys_only: true } })),
    };
    const what = `txn on ${[...last.keys()].slice(0, 3).join(', ')}${last.size > 3 ? ` and ${last.size - 3} more` : ''}`;
    const deadline = Date.now() + this.retryForMs;
    let delay = 25;
    let cause: unknown; // as in retrying()
    for (;;) {
      this.checkOpen();
      const before = this.seenRev;
      this.counters.txns++;
      try {
        return this.txnResult(await this.client.kv.txn(req), compares);
      } catch (e) {
        const kind = classify(e);
        if (kind === 'notSent') {
          if (!isBrokenCircuitError(e)) cause = e;
          if (Date.now() + delay > deadline) throw this.unreachable(what, cause ?? e, '; not applied');
          this.counters.retries++;
          this.log(`etcd: ${what}: ${message(e)}; not sent, retrying in ${delay} ms`);
          await sleep(delay + Math.floor(Math.random() * delay));
          delay = Math.min(delay * 2, MAX_BACKOFF_MS);
          continue;
        }
        if (kind !== 'retry') throw this.wrap(what, e);
        this.counters.unknownOutcomes++;
        this.log(`etcd: ${what}: ${message(e)}; outcome unknown, resolving from history after revision ${before}`);
        return this.resolve(what, req, compares, effect, before, deadline, e);
      }
    }
  }

  private txnResult(res: ITxnResponse, compares: Compare[]): TxnResult {
    const revision = this.seen(res.header);
    if (res.succeeded) return { succeeded: true, revision };
    const failed: string[] = [];
    compares.forEach((c, i) => {
      const kv = res.responses[i]?.response_range?.kvs?.[0];
      const actual = kv ? Number(kv.mod_revision) : 0;
      if (actual !== c.modRevision) failed.push(c.key);
    });
    return { succeeded: false, revision, failed };
  }

  /** Find out whether a transaction whose answer was lost applied (see the file comment). */
  private async resolve(
    what: string,
    req: ITxnRequest,
    compares: Compare[],
    effect: Map<string, Effect>,
    before: number,
    deadline: number,
    firstErr: unknown,
  ): Promise<TxnResult> {
    let lastErr = firstErr;
    let delay = 50;
    for (;;) {
      this.checkOpen();
      if (Date.now() > deadline) {
        throw new StoreError(
          `${this.name}: ${what}: outcome unknown: etcd at ${this.endpoints.join(', ')} did not answer within ${(this.retryForMs / 1000).toFixed(1)} s after the request was sent (last error: ${message(lastErr)}); re-read before acting on it`,
        );
      }
      try {
        const now = await this.currentRevision(Math.max(0, deadline - Date.now()));
        const at = await this.appliedAt(effect, before, now);
        if (at !== undefined) {
          this.counters.resolvedApplied++;
          this.log(`etcd: ${what}: had applied at revision ${at}`);
          return { succeeded: true, revision: at };
        }
        // Not in the history up to `now`: send it again (see the file comment for why this cannot apply twice).
        this.counters.resolvedResent++;
        this.log(`etcd: ${what}: not applied by revision ${now}; sending again`);
        this.counters.txns++;
        const res = await this.client.kv.txn(req);
        const result = this.txnResult(res, compares);
        if (result.succeeded) return result;
        const late = await this.appliedAt(effect, before, result.revision);
        if (late !== undefined) {
          this.counters.resolvedApplied++;
          this.log(`etcd: ${what}: had applied late, at revision ${late}`);
          return { succeeded: true, revision: late };
        }
        return result;
      } catch (e) {
        const kind = classify(e);
        if (kind === 'compacted' || (e instanceof StoreError && /compacted/.test(e.message))) {
          throw new StoreError(`${this.name}: ${what}: outcome unknown: ${message(e)}; re-read before acting on it`);
        }
        if (kind === 'closed' || (e instanceof StoreError && /closed/.test(e.message))) throw new StoreError(`${this.name}: store is closed`);
        if (kind === 'permanent' && !(e instanceof StoreError && /unreachable/.test(e.message))) {
          throw new StoreError(`${this.name}: ${what}: outcome unknown: ${message(e)}`);
        }
        lastErr = e;
        this.log(`etcd: ${what}: still resolving: ${message(e)}`);
        await sleep(delay);
        delay = Math.min(delay * 2, MAX_BACKOFF_MS);
      }
    }
  }

  /**
   * The revision in (after, upTo] whose events are exactly `effect`, if any. Reads the history through a watch
   * of the whole key space from after+1: every revision has at least one event, so an event at upTo or later
   * proves nothing before it is missing.
   */
  private async appliedAt(effect: Map<string, Effect>, after: number, upTo: number): Promise<number | undefined> {
    if (upTo <= after || effect.size === 0) return undefined;
    const stream = await this.client.watchClient.watch();
    return new Promise<number | undefined>((resolve, reject) => {
      let done = false;
      let cur = -1;
      let group: IEvent[] = [];
      const finish = (err: unknown, at?: number) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        dropStream(stream);
        if (err) reject(err);
        else resolve(at);
      };
      const timer = setTimeout(() => finish(new Error(`history scan (${after}, ${upTo}] timed out`)), this.requestTimeoutMs * 2);
      stream.on('data', (res: IWatchResponse) => {
        if (done) return;
        if (res.canceled) {
          const compact = Number(res.compact_revision || 0);
          finish(
            compact > 0
              ? new StoreError(`the history after revision ${after} was compacted (oldest kept revision ${compact})`)
              : new Error(`history scan canceled: ${res.cancel_reason}`),
          );
          return;
        }
        for (const ev of res.events ?? []) {
          const rev = Number(ev.kv.mod_revision);
          if (rev !== cur) {
            if (group.length && matches(group, effect)) return finish(undefined, cur);
            if (rev > upTo) return finish(undefined, undefined);
            group = [];
            cur = rev;
          }
          group.push(ev);
        }
        // etcd never splits one revision's events over two responses, so the group at upTo is complete here.
        if (cur >= upTo) finish(undefined, group.length && matches(group, effect) ? cur : undefined);
      });
      stream.on('error', (e: unknown) => finish(e));
      stream.on('end', () => finish(new Error('history scan stream ended')));
      stream.write({ create_request: { key: ALL, range_end: ALL, start_revision: String(after + 1) } });
    });
  }

  // ---- watch ------------------------------------------------------------------------------------------------

  watch(prefix: string, fromRevision: number, onEvent: (events: WatchEvent[]) => void, onError?: (err: StoreError) => void): Watcher {
    this.checkOpen();
    const start = this.enc(prefix);
    const [key, end] = start.length ? [start, prefixEnd(start)] : [ALL, ALL];
    const w = new EtcdWatcher(this, prefix, key, end, fromRevision, onEvent, onError);
    this.watchers.add(w);
    w.connect();
    return { close: () => w.close() };
  }

  /** @internal for EtcdWatcher */
  openWatchStream(): Promise<WatchStream> {
    return this.client.watchClient.watch();
  }

  /** @internal for EtcdWatcher */
  watcherEvent(kind: 'reconnect' | 'closed', w: EtcdWatcher, line?: string): void {
    if (kind === 'closed') this.watchers.delete(w);
    else {
      this.counters.watchReconnects++;
      if (line) this.log(line);
    }
  }

  /** @internal for EtcdWatcher */
  decodeEvent(ev: IEvent): WatchEvent {
    this.seen({ revision: ev.kv.mod_revision } as IResponseHeader);
    const key = this.dec(ev.kv.key);
    const revision = Number(ev.kv.mod_revision);
    return ev.type === 'Put' ? { type: 'put', key, value: ev.kv.value.toString('utf8'), revision } : { type: 'delete', key, revision };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of [...this.watchers]) w.close();
    this.client.close();
  }
}

function matches(group: IEvent[], effect: Map<string, Effect>): boolean {
  let puts = 0;
  for (const ev of group) {
    const want = effect.get(ev.kv.key.toString('latin1'));
    if (!want) return false;
    if (want.type === 'put') {
      if (ev.type !== 'Put' || !ev.kv.value.equals(want.value!)) return false;
      puts++;
    } else if (ev.type !== 'Delete') return false;
  }
  // Every put shows as an event; a delete of a key that was already absent does not.
  let wantPuts = 0;
  for (const e of effect.values()) if (e.type === 'put') wantPuts++;
  return puts === wantPuts && group.length > 0;
}

/** One Store.watch: a watch stream of its own, re-created from the next undelivered revision when it breaks. */
class EtcdWatcher {
  /** The first revision not yet delivered (0 until the first stream says where "now" is). */
  private next: number;
  private stream: WatchStream | undefined;
  private closed = false;
  private delay = 50;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: EtcdStore,
    private readonly prefix: string,
    private readonly key: Buffer,
    private readonly end: Buffer,
    fromRevision: number,
    private readonly onEvent: (events: WatchEvent[]) => void,
    private readonly onError: ((err: StoreError) => void) | undefined,
  ) {
    this.next = fromRevision > 0 ? fromRevision + 1 : 0;
  }

  connect(): void {
    this.timer = undefined;
    if (this.closed) return;
    this.store.openWatchStream().then(
      (stream) => {
        if (this.closed) return dropStream(stream);
        this.stream = stream;
        stream.on('data', (res: IWatchResponse) => this.onData(stream, res));
        stream.on('error', (e: unknown) => this.lost(stream, e));
        stream.on('end', () => this.lost(stream, new Error('watch stream ended')));
        stream.write({
          create_request: {
            key: this.key,
            range_end: this.end,
            progress_notify: true,
            ...(this.next > 0 ? { start_revision: String(this.next) } : {}),
          },
        });
      },
      (e: unknown) => this.lost(undefined, e),
    );
  }

  private onData(stream: WatchStream, res: IWatchResponse): void {
    if (stream !== this.stream || this.closed) return;
    if (res.canceled) {
      const compact = Number(res.compact_revision || 0);
      if (compact > 0) {
        this.fail(
          new StoreError(
            `${this.store.name}: watch of ${JSON.stringify(this.prefix)} from revision ${this.next}: that revision was compacted (oldest kept revision ${compact}); list again and watch from the list's revision`,
          ),
        );
      } else this.lost(stream, new Error(`watch canceled by etcd: ${res.cancel_reason || 'no reason given'}`));
      return;
    }
    if (res.created) {
      if (this.next === 0) this.next = Number(res.header.revision) + 1;
      this.delay = 50;
      return;
    }
    const out: WatchEvent[] = [];
    for (const ev of res.events ?? []) {
      const e = this.store.decodeEvent(ev);
      if (e.revision >= this.next) out.push(e);
    }
    if (!out.length) return;
    this.next = out[out.length - 1].revision + 1;
    try {
      this.onEvent(out);
    } catch (e) {
      // The caller's bug, not the stream's: surface it instead of letting grpc treat it as a broken stream.
      queueMicrotask(() => {
        throw e;
      });
    }
  }

  private lost(stream: WatchStream | undefined, e: unknown): void {
    if (this.closed || (stream && stream !== this.stream)) return;
    if (stream) dropStream(stream);
    this.stream = undefined;
    const delay = this.delay;
    this.delay = Math.min(this.delay * 2, 2000);
    this.store.watcherEvent('reconnect', this, `etcd: watch of ${JSON.stringify(this.prefix)} lost (${message(e)}); resuming from revision ${this.next || 'now'} in ${delay} ms`);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  private fail(err: StoreError): void {
    this.close();
    if (this.onError) this.onError(err);
    else queueMicrotask(() => {
      throw err;
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.stream) dropStream(this.stream);
    this.stream = undefined;
    this.store.watcherEvent('closed', this);
  }
}

/** Open the etcd store and wait (up to connectTimeoutMs) for etcd to answer, so a wrong endpoint fails here. */
export async function openEtcdStore(endpoints: string[], opts: EtcdStoreOptions = {}): Promise<EtcdStore> {
  const store = new EtcdStore(endpoints, opts);
  try {
    await store.currentRevision(opts.connectTimeoutMs ?? 10000);
  } catch (e) {
    await store.close();
    throw new StoreError(`${store.name}: cannot open: ${message(e).replace(`${store.name}: `, '')}`);
  }
  return store;
}
