// UPDATEs that announce or withdraw many prefixes, packed back to back into one buffer. Pure: values in, Buffers
// out; bad input (a caller bug) throws EncodeError.
//
// The export pump (src/bgp/export-queue.ts) puts everything one pump step produces for a peer into one
// UpdatePacker, so a step is one socket write however many UPDATEs it holds. Attribute blocks are cached per
// attribute record (records are immutable; the exporter's are interned): a peer's routes share a handful of
// records, so a block is encoded once, not once per UPDATE.
import { type IP } from '../../net/ip.ts';
import { type PathAttrs } from '../../rib/attrs.ts';
import { encodePathAttributes, type EncodeOptions } from './encode.ts';
import { EncodeError } from './errors.ts';
import { Afi, AttrType, ATTR_FLAGS, AttrFlag, MsgType, Safi, maxMessageLen } from './messages.ts';
import { PrefixReader, prefixWireLen, writePrefix, writePrefix4, type PrefixSource } from './nlri.ts';
import { NEXT_HOP_SELF4, NEXT_HOP_SELF6 } from './next-hop-self.ts';
import { mpNextHopLen, w16, w32, wIP, writeHeader } from './wire.ts';

/** EncodeOptions, and the session's own next hops: what NEXT_HOP_SELF4/6 in attributes stand for (next-hop-self.ts). */
export interface PackOptions extends EncodeOptions {
  selfNextHop4?: IP | null;
  selfNextHop6?: IP | null;
  /** Sent with selfNextHop6 as the second (link-local) MP_REACH next hop when set. */
  selfNextHop6ll?: IP | null;
}

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

/** Octets of the prefixes the last fitCount counted. */
let fitUsed = 0;

/** How many prefixes from `from` fit in `room` octets (their octets in fitUsed); at least one or an error. */
function fitCount(r: PrefixReader, idx: Positions, count: number, from: number, room: number): number {
  let used = 0;
  let i = from;
  while (i < count) {
    const n = prefixWireLen(r.len(idx === null ? i : idx[i]));
    if (used + n > room) break;
    used += n;
    i++;
  }
  if (i === from) throw new EncodeError(`no room for a prefix: ${room} octets left in the UPDATE`);
  fitUsed = used;
  return i - from;
}

/**
 * The prefixes of one family as positions in the reader: null when every prefix is of that family (the usual case:
 * the k-th is then at k, and nothing is built), else a list. The lists are scratch, reused: a packer call runs
 * synchronously and never re-enters (a pump step sends each route to each peer through here, so fresh arrays were
 * garbage per route per peer).
 */
type Positions = readonly number[] | null;
const scratch4: number[] = [];
const scratch6: number[] = [];

/** The prefixes of a reader by family; one record, rewritten by each splitFamilies call (read it at once). */
interface Split {
  v4: Positions;
  n4: number;
  v6: Positions;
  n6: number;
}
const split: Split = { v4: null, n4: 0, v6: null, n6: 0 };

function splitFamilies(r: PrefixReader): Split {
  let n4 = 0;
  for (let i = 0; i < r.count; i++) if (r.family(i) === 4) n4++;
  split.n4 = n4;
  split.n6 = r.count - n4;
  if (n4 === r.count || n4 === 0) {
    split.v4 = split.v6 = null;
    return split;
  }
  scratch4.length = 0;
  scratch6.length = 0;
  for (let i = 0; i < r.count; i++) (r.family(i) === 4 ? scratch4 : scratch6).push(i);
  split.v4 = scratch4;
  split.v6 = scratch6;
  return split;
}

/** Where the NEXT_HOP value is in an encoded attribute block (it holds one), to write a session's own address there. */
function nextHopValueAt(block: Uint8Array): number {
  for (let p = 0; p < block.length;) {
    const ext = (block[p] & AttrFlag.EXTENDED_LENGTH) !== 0;
    const len = ext ? (block[p + 2] << 8) | block[p + 3] : block[p + 2];
    const hdr = ext ? 4 : 3;
    if (block[p + 1] === AttrType.NEXT_HOP) return p + hdr;
    p += hdr + len;
  }
  throw new EncodeError('no NEXT_HOP in the attribute block');
}

function writeIndexed(b: Uint8Array, p: number, r: PrefixReader, idx: Positions, from: number, to: number): number {
  for (let k = from; k < to; k++) {
    const i = idx === null ? k : idx[k];
    p = r.family(i) === 4
      ? writePrefix4(b, p, r.word(i, 0), r.len(i))
      : writePrefix(b, p, r.word(i, 0), r.word(i, 1), r.word(i, 2), r.word(i, 3), r.len(i));
  }
  return p;
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
  announce(attrs: PathAttrs, prefixes: PrefixSource, opts: PackOptions = {}): void {
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

  private announceAll(attrs: PathAttrs, prefixes: PrefixSource, opts: PackOptions): void {
    const r = new PrefixReader(prefixes);
    const { v4, n4, v6, n6 } = splitFamilies(r);
    const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
    // Validate and encode everything that can fail before the first message is appended.
    const block4 = n4 > 0 ? cachedPathAttributes(attrs, opts, true) : null;
    // Next hop self: the block holds a placeholder NEXT_HOP, overwritten with the session's address per message.
    let self4: IP | null = null;
    let self4At = 0;
    if (block4 && attrs.nextHop === NEXT_HOP_SELF4) {
      self4 = opts.selfNextHop4 ?? null;
      if (self4 === null || self4.family !== 4) throw new EncodeError('IPv4 NLRI with next hop self, but no IPv4 next hop of ours on this session');
      self4At = nextHopValueAt(block4);
    }
    let block6: Uint8Array | null = null;
    let nhl = 0;
    let nh: IP | null = null;
    let ll: IP | null = null;
    if (n6 > 0) {
      const self6 = attrs.nextHop === NEXT_HOP_SELF6;
      nh = self6 ? opts.selfNextHop6 ?? null : attrs.nextHop;
      ll = self6 ? opts.selfNextHop6ll ?? null : attrs.nextHopLinkLocal;
      if (nh === null || nh.family !== 6) throw new EncodeError(self6 ? 'IPv6 NLRI with next hop self, but no IPv6 next hop of ours on this session' : 'IPv6 NLRI need an IPv6 next hop');
      nhl = mpNextHopLen(nh, ll);
      block6 = cachedPathAttributes(attrs, opts, false);
    }
    if (block4) {
      const room = max - 23 - block4.length;
      for (let k = 0; k < n4;) {
        const n = fitCount(r, v4, n4, k, room);
        const at = this.message(23 + block4.length + fitUsed);
        const b = this.buf;
        w16(b, at + 19, 0);
        w16(b, at + 21, block4.length);
        b.set(block4, at + 23);
        if (self4 !== null) w32(b, at + 23 + self4At, self4.w0);
        writeIndexed(b, at + 23 + block4.length, r, v4, k, k + n);
        k += n;
      }
    }
    if (block6) {
      // Room assumes the 4-octet attribute header; a short MP_REACH then uses 3 and the message is one octet less.
      const room = max - 23 - block6.length - 4 - 5 - nhl;
      for (let k = 0; k < n6;) {
        const n = fitCount(r, v6, n6, k, room);
        const vlen = 5 + nhl + fitUsed;
        const alen = (vlen > 255 ? 4 : 3) + vlen + block6.length;
        let p = this.mpMessage(alen, AttrType.MP_REACH_NLRI, vlen);
        const b = this.buf;
        b[p++] = nhl;
        p = wIP(b, p, nh!);
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
    const { v4, n4, v6, n6 } = splitFamilies(r);
    const max = maxMessageLen(MsgType.UPDATE, opts.extendedMessage);
    for (let k = 0; k < n4;) {
      const n = fitCount(r, v4, n4, k, max - 23);
      const wlen = fitUsed;
      const at = this.message(23 + wlen);
      const b = this.buf;
      w16(b, at + 19, wlen);
      w16(b, writeIndexed(b, at + 21, r, v4, k, k + n), 0);
      k += n;
    }
    for (let k = 0; k < n6;) {
      const n = fitCount(r, v6, n6, k, max - 23 - 4 - 3);
      const vlen = 3 + fitUsed;
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
