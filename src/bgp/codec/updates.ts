// UPDATEs that announce or withdraw many prefixes, packed back to back into one buffer. Pure: values in, Buffers
// out; bad input (a caller bug) throws EncodeError.
//
// The export pump (src/bgp/export-queue.ts) puts everything one pump step produces for a peer into one
// UpdatePacker, so a step is one socket write however many UPDATEs it holds. Attribute blocks are cached per
// attribute record (records are immutable; the exporter's are interned): a peer's routes share a handful of
// records, so a block is encoded once, not once per UPDATE.
import { type PathAttrs } from '../../rib/attrs.ts';
import { encodePathAttributes, type EncodeOptions } from './encode.ts';
import { EncodeError } from './errors.ts';
import { Afi, AttrType, ATTR_FLAGS, AttrFlag, MsgType, Safi, maxMessageLen } from './messages.ts';
import { PrefixReader, prefixWireLen, writePrefix, writePrefix4, type PrefixSource } from './nlri.ts';
import { mpNextHopLen, w16, wIP, writeHeader } from './wire.ts';

// ---- attribute blocks, once per record ------------------------------------------------------------------------

// Index: 2 when 4-octet AS, + 1 when NEXT_HOP is included.
const blocks = [new WeakMap<PathAttrs, Uint8Array>(), new WeakMap<PathAttrs, Uint8Array>(),
  new WeakMap<PathAttrs, Uint8Array>(), new WeakMap<PathAttrs, Uint8Array>()];

/** encodePathAttributes, remembered per (record, AS size, NEXT_HOP or not). The result must not be modified. */
export function cachedPathAttributes(a: PathAttrs, opts: EncodeOptions, nextHop: boolean): Uint8Array {
  const m = blocks[(opts.fourOctetAs !== false ? 2 : 0) + (nextHop ? 1 : 0)];
  let b = m.get(a);
  if (b === undefined) {
    b = encodePathAttributes(a, opts, nextHop);
    m.set(a, b);
  }
  return b;
}

// ---- prefix helpers -----------------------------------------------------------------------------------------

/** How many prefixes from `from` fit in `room` octets; at least one or an error. */
function fitCount(r: PrefixReader, idx: readonly number[], from: number, room: number): number {
  let used = 0;
  let i = from;
  while (i < idx.length) {
    const n = prefixWireLen(r.len(idx[i]));
    if (used + n > room) break;
    used += n;
    i++;
  }
  if (i === from) throw new EncodeError(`no room for a prefix: ${room} octets left in the UPDATE`);
  return i - from;
}

function splitFamilies(r: PrefixReader): { v4: number[]; v6: number[] } {
  const v4: number[] = [];
  const v6: number[] = [];
  for (let i = 0; i < r.count; i++) (r.family(i) === 4 ? v4 : v6).push(i);
  return { v4, v6 };
}

function writeIndexed(b: Uint8Array, p: number, r: PrefixReader, idx: readonly number[], from: number, to: number): number {
  for (let k = from; k < to; k++) {
    const i = idx[k];
    p = r.family(i) === 4
      ? writePrefix4(b, p, r.word(i, 0), r.len(i))
      : writePrefix(b, p, r.word(i, 0), r.word(i, 1), r.word(i, 2), r.word(i, 3), r.len(i));
  }
  return p;
}

function indexedBytes(r: PrefixReader, idx: readonly number[], from: number, to: number): number {
  let n = 0;
  for (let k = from; k < to; k++) n += prefixWireLen(r.len(idx[k]));
  return n;
}

/** Header of an MP attribute with a value of `len` octets at p; returns where the value starts. */
function mpHeader(b: Uint8Array, p: number, type: number, len: number): number {
  b[p] = ATTR_FLAGS[type] | (len > 255 ? AttrFlag.EXTENDED_LENGTH : 0);
  b[p + 1] = type;
  if (len > 255) return w16(b, p + 2, len);
  b[p + 2] = len;
  return p + 3;
}

// ---- the packer ---------------------------------------------------------------------------------------------

/**
 * UPDATE messages appended back to back into one reusable scratch buffer; take() copies them out as one Buffer of
 * their own. A call that throws leaves nothing half-written: messages are appended whole.
 */
export class UpdatePacker {
  private buf: Buffer;
  private end = 0;
  /** Messages appended since the last take(). */
  messages = 0;
  /** Where each message starts (encodeUpdates splits on these). */
  private readonly starts: number[] = [];

  constructor(initial = 4096) {
    this.buf = Buffer.allocUnsafeSlow(initial);
  }

  /** Octets packed since the last take(). */
  get bytes(): number {
    return this.end;
  }

  /** Reserve a whole UPDATE of `len` octets (header written); returns its offset. */
  private message(len: number): number {
    if (this.end + len > this.buf.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.end + len));
      this.buf.copy(next, 0, 0, this.end);
      this.buf = next;
    }
    const at = this.end;
    writeHeader(this.buf, at, len, MsgType.UPDATE);
    this.end += len;
    this.messages++;
    this.starts.push(at);
    return at;
  }

  /**
   * Announce `prefixes` with `attrs` in as few UPDATEs as fit (4096 octets, or 65535 with extended messages).
   * IPv4 prefixes go in the classic NLRI field with NEXT_HOP = attrs.nextHop (IPv4); IPv6 prefixes in
   * MP_REACH_NLRI with attrs.nextHop (IPv6 global) and attrs.nextHopLinkLocal if set.
   */
  announce(attrs: PathAttrs, prefixes: PrefixSource, opts: EncodeOptions = {}): void {
    this.whole(() => this.announceAll(attrs, prefixes, opts));
  }

  /** Withdraw `prefixes` in as few UPDATEs as fit: IPv4 in the withdrawn routes field, IPv6 in MP_UNREACH_NLRI. */
  withdraw(prefixes: PrefixSource, opts: EncodeOptions = {}): void {
    this.whole(() => this.withdrawAll(prefixes, opts));
  }

  /** Run `f`; if it throws, drop what it appended (a prefix that fits no message may come after some that did). */
  private whole(f: () => void): void {
    const end = this.end;
    const messages = this.messages;
    const starts = this.starts.length;
    try {
      f();
    } catch (e) {
      this.end = end;
      this.messages = messages;
      this.starts.length = starts;
      throw e;
    }
  }

  private announceAll(attrs: PathAttrs, prefixes: PrefixSource, opts: EncodeOptions): void {
    const r = new PrefixReader(prefixes);
    const { v4, v6 } = splitFamilies(r);
    const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
    // Validate and encode everything that can fail before the first message is appended.
    const block4 = v4.length > 0 ? cachedPathAttributes(attrs, opts, true) : null;
    let block6: Uint8Array | null = null;
    let nhl = 0;
    if (v6.length > 0) {
      const nh = attrs.nextHop;
      if (nh === null || nh.family !== 6) throw new EncodeError('IPv6 NLRI need an IPv6 next hop');
      nhl = mpNextHopLen(nh, attrs.nextHopLinkLocal);
      block6 = cachedPathAttributes(attrs, opts, false);
    }
    if (block4) {
      const room = max - 23 - block4.length;
      for (let k = 0; k < v4.length;) {
        const n = fitCount(r, v4, k, room);
        const nlen = indexedBytes(r, v4, k, k + n);
        const at = this.message(23 + block4.length + nlen);
        const b = this.buf;
        w16(b, at + 19, 0);
        w16(b, at + 21, block4.length);
        b.set(block4, at + 23);
        writeIndexed(b, at + 23 + block4.length, r, v4, k, k + n);
        k += n;
      }
    }
    if (block6) {
      const nh = attrs.nextHop!;
      const ll = attrs.nextHopLinkLocal;
      // Room assumes the 4-octet attribute header; a short MP_REACH then uses 3 and the message is one octet less.
      const room = max - 23 - block6.length - 4 - 5 - nhl;
      for (let k = 0; k < v6.length;) {
        const n = fitCount(r, v6, k, room);
        const vlen = 5 + nhl + indexedBytes(r, v6, k, k + n);
        const alen = (vlen > 255 ? 4 : 3) + vlen + block6.length;
        let p = this.mpMessage(alen, AttrType.MP_REACH_NLRI, vlen);
        const b = this.buf;
        b[p++] = nhl;
        p = wIP(b, p, nh);
        if (ll) p = wIP(b, p, ll);
        b[p++] = 0;
        p = writeIndexed(b, p, r, v6, k, k + n);
        b.set(block6, p);
        k += n;
      }
    }
  }

  private withdrawAll(prefixes: PrefixSource, opts: EncodeOptions): void {
    const r = new PrefixReader(prefixes);
    const { v4, v6 } = splitFamilies(r);
    const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
    for (let k = 0; k < v4.length;) {
      const n = fitCount(r, v4, k, max - 23);
      const wlen = indexedBytes(r, v4, k, k + n);
      const at = this.message(23 + wlen);
      const b = this.buf;
      w16(b, at + 19, wlen);
      w16(b, writeIndexed(b, at + 21, r, v4, k, k + n), 0);
      k += n;
    }
    for (let k = 0; k < v6.length;) {
      const n = fitCount(r, v6, k, max - 23 - 4 - 3);
      const vlen = 3 + indexedBytes(r, v6, k, k + n);
      const alen = (vlen > 255 ? 4 : 3) + vlen;
      const p = this.mpMessage(alen, AttrType.MP_UNREACH_NLRI, vlen);
      writeIndexed(this.buf, p, r, v6, k, k + n);
      k += n;
    }
  }

  /** An UPDATE whose attributes (`alen` octets) start with an IPv6 unicast MP attribute; returns where its value goes on. */
  private mpMessage(alen: number, type: number, vlen: number): number {
    const at = this.message(23 + alen);
    const b = this.buf;
    w16(b, at + 19, 0);
    w16(b, at + 21, alen);
    const p = w16(b, mpHeader(b, at + 23, type, vlen), Afi.IPV6);
    b[p] = Safi.UNICAST;
    return p + 1;
  }

  /** The packed messages as one Buffer of their own (the scratch is reused), then empty. */
  take(): Buffer {
    const out = Buffer.allocUnsafe(this.end);
    this.buf.copy(out, 0, 0, this.end);
    this.end = 0;
    this.messages = 0;
    this.starts.length = 0;
    return out;
  }

  /** take(), split into its messages (views of one Buffer). */
  takeMessages(): Buffer[] {
    const starts = this.starts.slice();
    const all = this.take();
    return starts.map((s, i) => all.subarray(s, i + 1 < starts.length ? starts[i + 1] : all.length));
  }
}

/** Announce `prefixes` with `attrs` in as few UPDATEs as fit; see UpdatePacker.announce. */
export function encodeUpdates(attrs: PathAttrs, prefixes: PrefixSource, opts: EncodeOptions = {}): Buffer[] {
  const k = new UpdatePacker(256);
  k.announce(attrs, prefixes, opts);
  return k.takeMessages();
}

/** Withdraw `prefixes` in as few UPDATEs as fit; see UpdatePacker.withdraw. */
export function encodeWithdrawals(prefixes: PrefixSource, opts: EncodeOptions = {}): Buffer[] {
  const k = new UpdatePacker(256);
  k.withdraw(prefixes, opts);
  return k.takeMessages();
}
