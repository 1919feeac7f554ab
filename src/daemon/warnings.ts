// The daemon's warnings (`/warnings`, `/overview`, the status page, `blockspeaker top`): problems that do not stop
// it, kept one entry per key with a count, and bounded, because some of them come from what others write (a store
// record, a Calico resource) and a writer who rewrites a bad record, or writes many, must not grow the daemon.
//
// - Key: a store key when the warning is about one record (IPAM's skipped records), else the text itself, so the
//   same warning repeated is one entry. A later warning of the same key replaces the message and counts one more.
// - Bound: at most `limit` entries (default 256); a new key beyond that evicts the one seen least recently, and
//   `evicted` counts those. Messages and keys are cut to a length that keeps the whole list small (256 x ~1 KB).
// - Cleared: a store record that is fine again (fixed or deleted) takes its entry away (IpamStore tells us).
// - Log: a new entry is logged at once; the same key again at most once a minute, with its count.
import { createHash } from 'node:crypto';

export interface WarningEntry {
  /** The store key the warning is about, or null (a warning about the config, a peer, ...). */
  key: string | null;
  message: string;
  /** How many times it was given. */
  count: number;
  /** ISO 8601. */
  firstSeen: string;
  lastSeen: string;
}

/** What `/warnings` returns and `/overview` carries as `warnings`. */
export interface WarningsView {
  /** In the order first seen. */
  entries: WarningEntry[];
  /** Entries dropped to keep the list at `limit`. */
  evicted: number;
  limit: number;
}

export interface WarningLogOptions {
  limit?: number;
  now?: () => number;
  /** Where log lines go (the daemon's logger); called for a new entry and at most once a minute per entry after. */
  log?: (msg: string, fields: { key?: string; count?: number }) => void;
  /** Least time between two log lines of one entry. Default 60 s. */
  logEveryMs?: number;
}

export const WARNINGS_LIMIT = 256;
const MESSAGE_MAX = 1000;
const KEY_MAX = 300;

interface Entry {
  key: string | null;
  message: string;
  count: number;
  first: number;
  last: number;
  seq: number;
  loggedAt: number;
}

/** A key (or text) cut to `max` characters, with a digest of the whole so that long distinct ones stay distinct. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 12);
  return `${text.slice(0, max - 20)}...[${digest}]`;
}

export class WarningLog {
  readonly limit: number;
  private readonly entries = new Map<string, Entry>();
  private evictedCount = 0;
  private seq = 0;
  private readonly now: () => number;
  private readonly logEveryMs: number;

  constructor(private readonly opts: WarningLogOptions = {}) {
    this.limit = Math.max(1, opts.limit ?? WARNINGS_LIMIT);
    this.now = opts.now ?? Date.now;
    this.logEveryMs = opts.logEveryMs ?? 60_000;
  }

  /** Record a warning; `key`: the store key it is about (else the message is its key). */
  add(message: string, key?: string): void {
    const msg = cut(String(message), MESSAGE_MAX);
    const k = key === undefined ? undefined : cut(key, KEY_MAX);
    const id = k === undefined ? `text:${msg}` : `key:${k}`;
    const now = this.now();
    let e = this.entries.get(id);
    if (e) {
      this.entries.delete(id); // re-inserted below: the map's order is least recently seen first
      e.count++;
      e.last = now;
      e.message = msg;
    } else {
      e = { key: k ?? null, message: msg, count: 1, first: now, last: now, seq: this.seq++, loggedAt: -Infinity };
      while (this.entries.size >= this.limit) {
        this.entries.delete(this.entries.keys().next().value!);
        this.evictedCount++;
      }
    }
    this.entries.set(id, e);
    if (now - e.loggedAt >= this.logEveryMs) {
      e.loggedAt = now;
      this.opts.log?.(e.count > 1 ? `${msg} (seen ${e.count} times)` : msg, { ...(k !== undefined ? { key: k } : {}), ...(e.count > 1 ? { count: e.count } : {}) });
    }
  }

  /** The record behind a key is fine again: its entry goes. */
  clear(key: string): boolean {
    return this.entries.delete(`key:${cut(key, KEY_MAX)}`);
  }

  get size(): number {
    return this.entries.size;
  }

  get evicted(): number {
    return this.evictedCount;
  }

  /** The messages, in the order first seen. */
  messages(): string[] {
    return this.list().map((e) => e.message);
  }

  list(): WarningEntry[] {
    return [...this.entries.values()]
      .sort((a, b) => a.seq - b.seq)
      .map((e) => ({ key: e.key, message: e.message, count: e.count, firstSeen: new Date(e.first).toISOString(), lastSeen: new Date(e.last).toISOString() }));
  }

  view(): WarningsView {
    return { entries: this.list(), evicted: this.evictedCount, limit: this.limit };
  }
}
