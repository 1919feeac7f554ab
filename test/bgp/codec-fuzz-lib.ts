// Mutation fuzzing of the BGP decoder: valid messages (from the round-trip arbitraries) are mutated at random
// and decoded, alone and through the framer. Nothing may throw; a decoder exception converted to an "internal"
// NOTIFICATION counts as a bug; a message that decodes fine must re-encode and decode to the same content.
import fc from 'fast-check';
import { mulberry32 } from '../../src/rib/tablegen.ts';
import {
  decodeMessage, describeResult, encodeMessage, encodeUpdate, EncodeError, Framer, type DecodeOptions, type DecodeResult,
} from '../../src/bgp/codec/index.ts';
import { openMessage, otherMessage, updateInput } from './codec-helpers.ts';

export interface FuzzReport {
  inputs: number;
  /** Decoder results by action, and notifications by "code/subcode". */
  outcomes: Record<string, number>;
  notifications: Record<string, number>;
  /** Messages the framer produced from mutated streams, and framer header errors. */
  framed: number;
  framerErrors: number;
  /** Must stay 0. */
  uncaught: number;
  internal: number;
  reencodeMismatch: number;
  reencodeError: number;
  /** Not bugs: a decoded message whose normalised re-encoding no longer fits (e.g. AS4_PATH added). */
  reencodeTooBig: number;
  examples: string[];
}

/** Valid seed messages of every type, both AS sizes. */
export function corpus(seed: number, n: number): Buffer[] {
  const out: Buffer[] = [];
  for (const four of [true, false]) {
    for (const u of fc.sample(updateInput(four), { seed: seed + (four ? 1 : 2), numRuns: n })) {
      try {
        out.push(encodeUpdate(u, { fourOctetAs: four }));
      } catch (e) {
        if (!(e instanceof EncodeError)) throw e; // too big for 4096: skip
      }
    }
  }
  for (const m of fc.sample(fc.oneof(openMessage, otherMessage), { seed: seed + 3, numRuns: Math.ceil(n / 2) })) out.push(encodeMessage(m));
  return out;
}

const INTERESTING = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0e, 0x0f, 0x10, 0x20, 0x21, 0x40, 0x50, 0x7f, 0x80, 0x81, 0x90, 0xc0, 0xe0, 0xff];

interface RawAttrBytes {
  flags: number;
  type: number;
  value: Buffer;
}

/** Split a well-formed UPDATE into its fields (null when it is not one). */
function splitUpdate(b: Buffer): { withdrawn: Buffer; attrs: RawAttrBytes[]; nlri: Buffer } | null {
  if (b.length < 23 || b[18] !== 2) return null;
  const wl = b.readUInt16BE(19);
  const tal = b.readUInt16BE(21 + wl);
  const attrs: RawAttrBytes[] = [];
  let p = 23 + wl;
  const end = p + tal;
  while (p < end) {
    const flags = b[p];
    const ext = (flags & 0x10) !== 0;
    const len = ext ? b.readUInt16BE(p + 2) : b[p + 2];
    const v = p + (ext ? 4 : 3);
    attrs.push({ flags, type: b[p + 1], value: b.subarray(v, v + len) });
    p = v + len;
  }
  return { withdrawn: b.subarray(21, 21 + wl), attrs, nlri: b.subarray(end) };
}

function joinUpdate(withdrawn: Buffer, attrs: RawAttrBytes[], nlri: Buffer): Buffer {
  const parts = attrs.map((a) => {
    const ext = a.value.length > 255 || (a.flags & 0x10) !== 0;
    const h = Buffer.alloc(ext ? 4 : 3);
    h[0] = ext ? a.flags | 0x10 : a.flags;
    h[1] = a.type;
    if (ext) h.writeUInt16BE(a.value.length & 0xffff, 2);
    else h[2] = a.value.length;
    return Buffer.concat([h, a.value]);
  });
  const ab = Buffer.concat(parts);
  const head = Buffer.alloc(19, 0xff);
  head[18] = 2;
  const wl = Buffer.alloc(2);
  wl.writeUInt16BE(withdrawn.length);
  const al = Buffer.alloc(2);
  al.writeUInt16BE(ab.length & 0xffff);
  const out = Buffer.concat([head, wl, withdrawn, al, ab, nlri]);
  out.writeUInt16BE(Math.min(out.length, 0xffff), 16);
  return out;
}

const ATTR_TYPES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16, 17, 18, 32, 99, 200];

/** Edit one attribute (flags, type, value, presence, order) and rebuild every length consistently. */
function mutateAttrs(src: Buffer, rnd: () => number): Buffer | null {
  const u = splitUpdate(src);
  if (!u) return null;
  const int = (n: number) => Math.floor(rnd() * n);
  const attrs = u.attrs.map((a) => ({ ...a, value: Buffer.from(a.value) }));
  const i = int(Math.max(1, attrs.length));
  const a = attrs[i];
  switch (int(8)) {
    case 0:
      if (a) a.flags = rnd() < 0.5 ? a.flags ^ (0x80 >> int(4)) : INTERESTING[int(INTERESTING.length)];
      break;
    case 1:
      if (a) a.type = ATTR_TYPES[int(ATTR_TYPES.length)];
      break;
    case 2:
      if (a && a.value.length) a.value[int(a.value.length)] = rnd() < 0.5 ? INTERESTING[int(INTERESTING.length)] : int(256);
      break;
    case 3:
      if (a) a.value = a.value.subarray(0, int(a.value.length + 1));
      break;
    case 4:
      if (a) a.value = Buffer.concat([a.value, Buffer.from(Array.from({ length: 1 + int(6) }, () => int(256)))]);
      break;
    case 5:
      if (a) attrs.splice(int(attrs.length + 1), 0, { ...a });
      break;
    case 6:
      attrs.splice(i, 1);
      break;
    case 7: {
      const type = ATTR_TYPES[int(ATTR_TYPES.length)];
      const flags = [0x40, 0x80, 0xc0, 0xe0][int(4)];
      attrs.splice(int(attrs.length + 1), 0, { flags, type, value: Buffer.from(Array.from({ length: int(12) }, () => int(256))) });
      break;
    }
  }
  return joinUpdate(u.withdrawn, attrs, u.nlri);
}

export function mutate(src: Buffer, corpus: readonly Buffer[], rnd: () => number): Buffer {
  if (rnd() < 0.4) {
    const m = mutateAttrs(src, rnd);
    if (m) return rnd() < 0.8 ? m : mutateBytes(m, corpus, rnd);
  }
  return mutateBytes(src, corpus, rnd);
}

function mutateBytes(src: Buffer, corpus: readonly Buffer[], rnd: () => number): Buffer {
  const int = (n: number) => Math.floor(rnd() * n);
  let b = Buffer.from(src);
  const rounds = 1 + int(3);
  for (let r = 0; r < rounds; r++) {
    // Mutate the body more than the header, or nothing gets past the header checks.
    const pos = b.length > 19 && rnd() < 0.9 ? 19 + int(b.length - 19) : int(Math.max(1, b.length));
    switch (int(9)) {
      case 0:
        if (pos < b.length) b[pos] ^= 1 << int(8);
        break;
      case 1:
        if (pos < b.length) b[pos] = INTERESTING[int(INTERESTING.length)];
        break;
      case 2:
        if (pos < b.length) b[pos] = int(256);
        break;
      case 3:
        b = b.subarray(0, pos);
        break;
      case 4:
        b = Buffer.concat([b.subarray(0, pos), Buffer.from(Array.from({ length: 1 + int(8) }, () => int(256))), b.subarray(pos)]);
        break;
      case 5:
        b = Buffer.concat([b.subarray(0, pos), b.subarray(pos + 1 + int(16))]);
        break;
      case 6: {
        const len = 1 + int(32);
        b = Buffer.concat([b.subarray(0, pos), b.subarray(pos, pos + len), b.subarray(pos)]);
        break;
      }
      case 7: {
        const other = corpus[int(corpus.length)];
        const s = int(other.length);
        b = Buffer.concat([b.subarray(0, pos), other.subarray(s, s + 1 + int(64)), b.subarray(pos + int(16))]);
        break;
      }
      case 8:
        // Nudge a 16-bit value (a length field, often).
        if (pos + 1 < b.length) b.writeUInt16BE((b.readUInt16BE(pos) + int(9) - 4) & 0xffff, pos);
        break;
    }
  }
  // Mostly keep the header consistent so that the body parsers get exercised.
  if (b.length >= 19 && rnd() < 0.85 && b.length <= 0xffff) b.writeUInt16BE(b.length, 16);
  return b;
}

function describe(r: DecodeResult): string {
  return JSON.stringify(describeResult(r));
}

function check(bytes: Buffer, opts: DecodeOptions, rep: FuzzReport): void {
  let r: DecodeResult;
  try {
    r = decodeMessage(bytes, opts);
  } catch (e) {
    rep.uncaught++;
    if (rep.examples.length < 10) rep.examples.push(`uncaught ${String(e)} on ${bytes.toString('hex')}`);
    return;
  }
  rep.outcomes[r.action] = (rep.outcomes[r.action] ?? 0) + 1;
  if (r.action === 'notification') {
    const k = `${r.code}/${r.subcode}`;
    rep.notifications[k] = (rep.notifications[k] ?? 0) + 1;
    if (r.internal) {
      rep.internal++;
      if (rep.examples.length < 10) rep.examples.push(`internal ${r.reason} on ${bytes.toString('hex')} ${JSON.stringify(opts)}`);
    }
    return;
  }
  if (r.action === 'treat-as-withdraw') return;
  // Decoded fine: the message must encode again, and decode to the same thing.
  let again: Buffer;
  try {
    again = encodeMessage(r.message, opts);
  } catch (e) {
    if (e instanceof EncodeError && /octets, more than/.test(e.message)) rep.reencodeTooBig++;
    else {
      rep.reencodeError++;
      if (rep.examples.length < 10) rep.examples.push(`re-encode ${String(e)} on ${bytes.toString('hex')} ${JSON.stringify(opts)}`);
    }
    return;
  }
  const r2 = decodeMessage(again, opts);
  // In 2-octet sessions the RFC 6793 rules can legitimately change a path on the way back (an AGGREGATOR that
  // is not AS_TRANS hides AS4_PATH), so only require that it still decodes.
  const same = opts.fourOctetAs === false ? r2.action === 'ok' : r2.action === 'ok' && describe(r2) === describe({ action: 'ok', message: r.message });
  if (!same) {
    rep.reencodeMismatch++;
    if (rep.examples.length < 10) rep.examples.push(`mismatch on ${bytes.toString('hex')} ${JSON.stringify(opts)}: ${describe(r)} vs ${describe(r2)}`);
  }
}

/** Run `n` mutated inputs; deterministic for a seed. */
export function fuzz(n: number, seed = 1, onProgress?: (done: number) => void): FuzzReport {
  const rnd = mulberry32(seed);
  const seeds = corpus(seed, 300);
  const rep: FuzzReport = {
    inputs: 0, outcomes: {}, notifications: {}, framed: 0, framerErrors: 0, uncaught: 0, internal: 0,
    reencodeMismatch: 0, reencodeError: 0, reencodeTooBig: 0, examples: [],
  };
  for (let i = 0; i < n; i++) {
    const bytes = mutate(seeds[Math.floor(rnd() * seeds.length)], seeds, rnd);
    const opts: DecodeOptions = { fourOctetAs: rnd() < 0.5, extendedMessage: rnd() < 0.3, external: rnd() < 0.3 };
    rep.inputs++;
    check(bytes, opts, rep);
    if (i % 8 === 0) {
      // Through the framer too: the mutant between two valid messages, in random chunks.
      const stream = Buffer.concat([seeds[i % seeds.length], bytes, seeds[(i + 1) % seeds.length]]);
      const framer = new Framer(opts);
      try {
        for (let p = 0; p < stream.length;) {
          const k = 1 + Math.floor(rnd() * 200);
          const err = framer.push(stream.subarray(p, p + k), (m) => {
            rep.framed++;
            const d = decodeMessage(m, opts);
            if (d.action === 'notification' && d.internal) rep.internal++;
          });
          if (err) {
            rep.framerErrors++;
            break;
          }
          p += k;
        }
      } catch (e) {
        rep.uncaught++;
        if (rep.examples.length < 10) rep.examples.push(`framer: ${String(e)} on ${stream.toString('hex')}`);
      }
    }
    if (onProgress && (i + 1) % 10000 === 0) onProgress(i + 1);
  }
  return rep;
}
