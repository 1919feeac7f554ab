// A peer's export queue and write pump: what the RIB decided to send to one peer (ExportUpdate), turned into
// UPDATEs only while the socket takes them.
//
// - One write per pump step: every UPDATE a step produces is packed into one buffer (codec/updates.ts), so a RIB
//   flush that touches 99 peers makes 99 writes, not one per UPDATE.
// - Encoded bytes ahead of the socket stay bounded: a step stops at PACK_BYTES and the next only runs while the
//   session is `writable` (its socket buffer below the session's high-water mark); otherwise we wait for 'drain'.
// - While the queue waits (a slow reader), it works like BIRD's per-attribute buckets: an announce with the same
//   attributes as a queued one joins it, a withdraw joins the queued withdraw, and only the latest state of each
//   prefix is sent (a later withdraw or re-announce of a prefix wins over what was queued for it earlier, and the
//   earlier entry is skipped). A peer that keeps up never pays for this bookkeeping.
import type { AddressFamily } from './session.ts';
import { type Prefix } from '../net/ip.ts';
import { type PathAttrs } from '../rib/attrs.ts';
import { type ExportUpdate } from '../rib/rib.ts';
import { UpdatePacker, type EncodeOptions } from './codec/index.ts';

/** Prefixes per encode step (one step may yield several UPDATEs). */
const PUMP_CHUNK = 4096;
/** Octets packed into one write before the pump checks the socket again. */
export const PACK_BYTES = 64 * 1024;

/** What the pump needs of a session (src/bgp/session.ts; a double in tests). */
export interface ExportSession {
  readonly writable: boolean;
  /** Write `buf`, which holds `updates` whole UPDATE messages. */
  sendPacked(buf: Buffer, updates: number): void;
  sendEndOfRib(family: AddressFamily): void;
  /** Call `fn` once the socket has drained. */
  onDrain(fn: () => void): void;
}

export interface PumpHooks {
  /** An encoder refusal (a bug or an unrepresentable route): the routes are skipped, the session goes on. */
  error(message: string): void;
  endOfRibSent(family: AddressFamily): void;
  /** The socket drained after the pump had to stop: pump again if the session is still the peer's. */
  resume(s: ExportSession): void;
}

interface Routes {
  attrs: PathAttrs | null; // null = withdraw
  /** Own copy once anything joins it (the RIB's arrays may be shared between peers: never modified). */
  prefixes: Prefix[];
  own: boolean;
  pos: number;
}

type Item = Routes | { attrs?: undefined; eor: AddressFamily };

const isRoutes = (x: Item): x is Routes => x.attrs !== undefined;

/** A value key per prefix (numbers for IPv4, strings for IPv6: the two never meet). */
function prefixKey(p: Prefix): number | string {
  return p.family === 4 ? (p.w0 >>> 0) * 64 + p.len : `${p.w0},${p.w1},${p.w2},${p.w3}/${p.len}`;
}

function flush(s: ExportSession, k: UpdatePacker): void {
  if (k.bytes === 0) return;
  const n = k.messages;
  s.sendPacked(k.take(), n);
}

// One scratch for every peer: a pump step runs synchronously and take() copies the bytes out.
let packer: UpdatePacker | null = null;

export class ExportQueue {
  private items: Item[] = [];
  private waitingDrain = false;
  /** While the queue waits: the item holding each queued prefix's latest state. */
  private latest: Map<number | string, Routes> | null = null;
  /** While the queue waits: the item a new announce of these attributes (null: a withdraw) joins. */
  private open: Map<PathAttrs | null, Routes> | null = null;

  /** Queued items (End-of-RIB markers included). */
  get length(): number {
    return this.items.length;
  }

  /** Prefixes still to send (while a slow peer's queue coalesces, superseded entries count until skipped). */
  pendingPrefixes(): number {
    let n = 0;
    for (const x of this.items) if (isRoutes(x)) n += x.prefixes.length - x.pos;
    return n;
  }

  /** Forget everything queued (the session went down); a pending drain callback then finds nothing to do. */
  clear(): void {
    this.items = [];
    this.waitingDrain = false;
    this.stopCoalescing();
  }

  push(u: ExportUpdate): void {
    if (u.withdraw.length > 0) this.add(null, u.withdraw);
    for (const [attrs, prefixes] of u.announce) this.add(attrs, prefixes);
  }

  pushAnnounce(attrs: PathAttrs, prefixes: Prefix[]): void {
    this.add(attrs, prefixes);
  }

  pushEndOfRib(family: AddressFamily): void {
    this.items.push({ eor: family });
  }

  private add(attrs: PathAttrs | null, prefixes: Prefix[]): void {
    if (prefixes.length === 0) return;
    const latest = this.latest;
    if (latest === null) {
      this.items.push({ attrs, prefixes, own: false, pos: 0 });
      return;
    }
    const open = this.open!; // set with latest
    let it = open.get(attrs);
    if (it === undefined) {
      it = { attrs, prefixes, own: false, pos: 0 };
      this.items.push(it);
      open.set(attrs, it);
    } else {
      if (!it.own) {
        it.prefixes = it.prefixes.slice();
        it.own = true;
      }
      for (const p of prefixes) it.prefixes.push(p);
    }
    for (const p of prefixes) latest.set(prefixKey(p), it);
  }

  /** The socket is full: from now on, coalesce what is queued behind it. */
  private startCoalescing(): void {
    if (this.latest !== null) return;
    const latest = new Map<number | string, Routes>();
    const open = new Map<PathAttrs | null, Routes>();
    for (const x of this.items) {
      if (!isRoutes(x)) continue;
      for (let i = x.pos; i < x.prefixes.length; i++) latest.set(prefixKey(x.prefixes[i]), x);
      open.set(x.attrs, x);
    }
    this.latest = latest;
    this.open = open;
  }

  // The maps are dropped, not cleared, and an emptied queue gets a fresh array: a session that has caught up keeps
  // none of the room its initial table needed (a route reflector holds a thousand of them).
  private stopCoalescing(): void {
    this.latest = null;
    this.open = null;
    if (this.items.length === 0) this.items = [];
  }

  /** The prefixes [from, to) of `it` still to send: all of them, or while coalescing those whose latest state it holds. */
  private take(it: Routes, from: number, to: number): readonly Prefix[] {
    const latest = this.latest;
    if (latest === null) return from === 0 && to === it.prefixes.length ? it.prefixes : it.prefixes.slice(from, to);
    const out: Prefix[] = [];
    for (let i = from; i < to; i++) {
      const p = it.prefixes[i];
      const k = prefixKey(p);
      if (latest.get(k) !== it) continue;
      latest.delete(k);
      out.push(p);
    }
    return out;
  }

  /** Encode and write while `s` takes it; when it is full, wait for its 'drain' and call hooks.resume. */
  pump(s: ExportSession, opts: EncodeOptions, hooks: PumpHooks): void {
    if (this.waitingDrain) return;
    const k = (packer ??= new UpdatePacker(PACK_BYTES + 4096));
    while (this.items.length > 0) {
      if (!s.writable) {
        this.startCoalescing();
        this.waitingDrain = true;
        s.onDrain(() => {
          this.waitingDrain = false;
          hooks.resume(s);
        });
        return;
      }
      while (this.items.length > 0 && k.bytes < PACK_BYTES) {
        const it = this.items[0];
        if (!isRoutes(it)) {
          this.items.shift();
          flush(s, k);
          s.sendEndOfRib(it.eor);
          hooks.endOfRibSent(it.eor);
          continue;
        }
        const end = Math.min(it.prefixes.length, it.pos + PUMP_CHUNK);
        const routes = this.take(it, it.pos, end);
        try {
          if (routes.length > 0) {
            if (it.attrs === null) k.withdraw(routes, opts);
            else k.announce(it.attrs, routes, opts);
          }
        } catch (e) {
          hooks.error((e as Error).message);
        }
        it.pos = end;
        if (it.pos >= it.prefixes.length) {
          this.items.shift();
          if (this.open !== null && this.open.get(it.attrs) === it) this.open.delete(it.attrs);
        }
      }
      flush(s, k);
    }
    this.stopCoalescing();
  }
}
