// The RIB's path entries: every source's path for every prefix, 16 bytes each in typed-array segments, so the
// millions of paths of a full table are no objects. Its own file: the path store, the change feed and the queries
// all read entries through this one layout.

const NONE = -1;
/** Entry flags (EntryPool.flags). */
export const STALE = 1;
export const BEST = 2;
export const MULTI = 4;

// Pools are lists of fixed-size segments: growing never copies, spare room is at most one segment, and nothing is
// freed back to malloc (copy-on-grow of one big array left RSS far above the live data: the old buffers and the
// doubling slack stay resident).
const SEG_SHIFT = 14;
const SEG = 1 << SEG_SHIFT;
const SEG_MASK = SEG - 1;

/**
 * Path entries, 16 bytes each, in one Int32Array per segment (array-of-structs, so an entry is one cache line
 * quarter): [source | flags << 16, received attrs id, effective attrs id (-1 = rejected), next entry (-1 = end)].
 */
export class EntryPool {
  private segs: Int32Array[] = [];
  private top = 0;
  private freeHead = NONE;
  live = 0;

  /** A new entry of source `src`, no flags, no next; its attribute ids are the caller's to set. */
  alloc(src: number): number {
    return this.allocPath(src, 0, 0, NONE);
  }

  /** A new entry with all its fields: source, flags, received and effective attribute ids, no next. */
  allocPath(src: number, flags: number, raw: number, eff: number): number {
    let e = this.freeHead;
    if (e !== NONE) this.freeHead = this.next(e);
    else {
      if (this.top === this.segs.length * SEG) this.segs.push(new Int32Array(SEG * 4));
      e = this.top++;
    }
    this.live++;
    const s = this.segs[e >>> SEG_SHIFT];
    const o = (e & SEG_MASK) << 2;
    s[o] = src | (flags << 16);
    s[o + 1] = raw;
    s[o + 2] = eff;
    s[o + 3] = NONE;
    return e;
  }

  free(e: number): void {
    this.segs[e >>> SEG_SHIFT][(e & SEG_MASK) << 2] = 0;
    this.setNext(e, this.freeHead);
    this.freeHead = e;
    this.live--;
  }

  src(e: number): number {
    return this.segs[e >>> SEG_SHIFT][(e & SEG_MASK) << 2] & 0xffff;
  }
  flags(e: number): number {
    return this.segs[e >>> SEG_SHIFT][(e & SEG_MASK) << 2] >>> 16;
  }
  setFlags(e: number, f: number): void {
    const s = this.segs[e >>> SEG_SHIFT];
    const o = (e & SEG_MASK) << 2;
    s[o] = (s[o] & 0xffff) | (f << 16);
  }
  raw(e: number): number {
    return this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 1];
  }
  setRaw(e: number, id: number): void {
    this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 1] = id;
  }
  eff(e: number): number {
    return this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 2];
  }
  setEff(e: number, id: number): void {
    this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 2] = id;
  }
  next(e: number): number {
    return this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 3];
  }
  setNext(e: number, n: number): void {
    this.segs[e >>> SEG_SHIFT][((e & SEG_MASK) << 2) + 3] = n;
  }

  bytes(): number {
    return this.segs.length * SEG * 16;
  }
}
