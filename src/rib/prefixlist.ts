// A compact, growable list of prefixes of one family (columnar typed arrays), for tables of a million prefixes
// where one Prefix object each would cost far more than the data.
import { type Family, Prefix, formatPrefix } from '../net/ip.ts';

export class PrefixList {
  /** Number of prefixes. */
  count = 0;
  /** Address words: one per prefix for IPv4, four (most significant first) for IPv6. */
  words: Uint32Array;
  lens: Uint8Array;
  readonly stride: number;

  constructor(readonly family: Family, capacity = 1024) {
    this.stride = family === 4 ? 1 : 4;
    this.words = new Uint32Array(Math.max(1, capacity) * this.stride);
    this.lens = new Uint8Array(Math.max(1, capacity));
  }

  /** Append a prefix given as words (already masked) and a length. */
  push(w0: number, w1: number, w2: number, w3: number, len: number): void {
    if (this.count === this.lens.length) this.grow();
    const i = this.count++;
    this.lens[i] = len;
    if (this.stride === 1) this.words[i] = w0;
    else {
      const b = i * 4;
      this.words[b] = w0;
      this.words[b + 1] = w1;
      this.words[b + 2] = w2;
      this.words[b + 3] = w3;
    }
  }

  pushPrefix(p: Prefix): void {
    if (p.family !== this.family) throw new RangeError(`IPv${p.family} prefix pushed to an IPv${this.family} list`);
    this.push(p.w0, p.w1, p.w2, p.w3, p.len);
  }

  /** Word `k` (0..3) of prefix `i`. */
  word(i: number, k: number): number {
    return this.stride === 1 ? (k === 0 ? this.words[i] : 0) : this.words[i * 4 + k];
  }

  prefix(i: number): Prefix {
    if (this.stride === 1) return new Prefix(4, this.words[i], 0, 0, 0, this.lens[i]);
    const b = i * 4;
    return new Prefix(6, this.words[b], this.words[b + 1], this.words[b + 2], this.words[b + 3], this.lens[i]);
  }

  format(i: number): string {
    return formatPrefix(this.prefix(i));
  }

  /** Drop spare capacity. */
  trim(): this {
    this.words = this.words.slice(0, this.count * this.stride);
    this.lens = this.lens.slice(0, this.count);
    return this;
  }

  private grow(): void {
    const words = new Uint32Array(this.words.length * 2);
    words.set(this.words);
    this.words = words;
    const lens = new Uint8Array(this.lens.length * 2);
    lens.set(this.lens);
    this.lens = lens;
  }
}
