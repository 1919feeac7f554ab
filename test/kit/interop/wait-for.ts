// Waiting in the interop lab: poll until a condition holds, and on timeout fail with everything that explains why
// (the last value or error, each listed peer's state dump and log tail).
//   await waitFor(() => bird.routes('ipv4').then(rs => rs.find(r => r.prefix === '10.2.0.0/24')),
//                 { what: 'bird learns 10.2.0.0/24', timeoutMs: 10_000, peers: [bird, gobgp] });
// Polls until fn returns a truthy value (exceptions count as "not yet") and returns it; on timeout it throws a
// HarnessError: message = `what`, details (printed by tap as a YAML block) = the last value or error and each
// listed peer's state dump and log tail. waitEstablished/waitRoute include their own peer.
// Timing: a fresh session is up in ~1-2 s (BIRD/FRR/GoBGP all connect actively); after a drop GoBGP needs 5-10 s.
// KEEP_INTEROP=1 keeps the temp dirs (configs, logs) after the run.

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// waitFor

/**
 * An error with a one-line message and multi-line details (peer state, logs). tap prints `details` as a YAML block
 * under the failure; String(err) / err.stack include them too.
 */
export class HarnessError extends Error {
  constructor(message: string, readonly details: string) {
    super(message);
    this.name = 'HarnessError';
    this.stack = `${this.name}: ${message}\n${details}\n${(this.stack ?? '').split('\n').slice(1).join('\n')}`;
  }
  override toString(): string {
    return `${this.name}: ${this.message}\n${this.details}`;
  }
}

/** What waitFor prints of a peer on timeout; every Peer has it (named here so this file needs no peer types). */
export interface DescribedPeer {
  readonly kind: string;
  readonly name: string;
  readonly ns: { readonly name: string };
  describe(): Promise<string>;
}

export interface WaitOptions {
  what: string;
  timeoutMs?: number;
  intervalMs?: number;
  peers?: DescribedPeer[];
}

/** Polls fn until it returns a truthy value; throws a descriptive error (with peers' state and logs) on timeout. */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitOptions): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const interval = opts.intervalMs ?? 200;
  const start = Date.now();
  let last: unknown;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
      last = v;
      lastErr = undefined;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() - start >= timeoutMs) break;
    await sleep(interval);
  }
  const head = `timed out after ${Date.now() - start} ms waiting for: ${opts.what}`;
  const parts: string[] = [];
  if (lastErr !== undefined) parts.push(`last error: ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`);
  else parts.push(`last value: ${truncate(safeJson(last), 2000)}`);
  for (const p of opts.peers ?? []) {
    let d: string;
    try { d = await p.describe(); } catch (e) { d = `(describe failed: ${(e as Error).message})`; }
    parts.push(`----- ${p.kind} ${p.name} (${p.ns.name}) -----\n${d}`);
  }
  throw new HarnessError(head, parts.join('\n'));
}

function safeJson(v: unknown): string {
  try { return JSON.stringify(v) ?? String(v); } catch { return String(v); }
}
function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}... (${s.length - n} more chars)` : s;
}
