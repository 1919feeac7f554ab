// The change feed: a prefix's best path is remembered before its first change in a batch, and flush() hands the
// subscribers the net effect as a RibChangeBatch, which makes objects only when read. Its own file: whatever
// follows the RIB (the BGP exports, the dataplanes) reads it through this layer.
import type { Prefix } from '../net/ip.ts';
import { PathStore } from './path-store.ts';
import type { Table } from './table.ts';
import { BEST, MULTI } from './entry-pool.ts';
import type { RibChange, RibOptions } from './types.ts';

const NONE = -1;

/**
 * The records touched since the last flush, with their best path before the first touch: typed arrays, no object
 * per prefix (a table load touches a million). The effective attribute ids named here are retained until the
 * flush, so an id cannot be recycled for other content while the batch compares against it.
 */
class PendingLog {
  keys = new Int32Array(1024); // record * 2 + family index
  beforeSrc = new Int32Array(1024); // source of the best path before, NONE when there was none
  beforeEff = new Int32Array(1024); // its effective attribute id
  /** Full [source, attrs id, ...] of the multipath set before, when it had more than one path. */
  readonly multi = new Map<number, number[]>();
  n = 0;

  push(key: number, src: number, eff: number): number {
    if (this.n === this.keys.length) {
      const grow = (a: Int32Array) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.keys = grow(this.keys);
      this.beforeSrc = grow(this.beforeSrc);
      this.beforeEff = grow(this.beforeEff);
    }
    const i = this.n++;
    this.keys[i] = key;
    this.beforeSrc[i] = src;
    this.beforeEff[i] = eff;
    return i;
  }
}

/**
 * Changes in a batch past which the RIB asks for a flush at once (RibOptions.scheduleFull): 65,536 records' log
 * entries are 768 KiB, within a core's cache, where a table's 250 ms of changes (the flush pacer's longest hold)
 * were half a million, read back from memory at the flush.
 */
export const FULL_BATCH = 1 << 16;

const CHANGE_TYPES = ['add', 'replace', 'withdraw'] as const;
const NO_EMPTIES = new Int32Array(0);
const ADD = 0;
const REPLACE = 1;
const WITHDRAW = 2;

/** What a change batch reads from its RIB (closures made once per Rib, so the batch needs no private access). */
interface BatchView {
  prefix(key: number): Prefix;
  sourceName(index: number): string;
  /** The best source of a record now (null when it has no best). */
  currentSource(key: number): string | null;
  /** A counter of RIB changes, to tell whether the RIB moved since a batch was made. */
  mutations(): number;
  change(key: number, type: RibChange['type'], prefix: Prefix): RibChange;
}

/**
 * One flush's best-path changes. Changes are materialised (Prefix and Path objects) only when read, so a
 * subscriber that needs few of them — an export to the very peer that sent the routes — costs no objects. Read it
 * inside the callback: afterwards the RIB has moved on.
 */
export class RibChangeBatch implements Iterable<RibChange> {
  /** @param keys record keys, @param types change types (0 add, 1 replace, 2 withdraw) */
  constructor(
    private readonly view: BatchView,
    private readonly keys: Int32Array,
    private readonly types: Uint8Array,
    private readonly sources: Int32Array,
    readonly length: number,
  ) {
    this.mutations = view.mutations();
  }

  private readonly mutations: number;
  // Objects already made, shared by every reader of the batch (100 peers exporting one batch made 100 copies of
  // each change before): valid while the RIB has not moved since they were made.
  private made: (RibChange | undefined)[] | null = null;
  private prefixes: (Prefix | undefined)[] | null = null;
  private madeAt = -1;

  /** Change `i` as an object (the same object for every reader while the RIB has not moved; do not modify it). */
  at(i: number): RibChange {
    this.checkMade();
    let ch = this.made![i];
    if (ch === undefined) ch = this.made![i] = this.view.change(this.keys[i], CHANGE_TYPES[this.types[i]], this.prefixAt(i));
    return ch;
  }

  typeAt(i: number): RibChange['type'] {
    return CHANGE_TYPES[this.types[i]];
  }

  /** The record key of change i (record * 2 + family index), for the Adj-RIB-Out. */
  keyAt(i: number): number {
    return this.keys[i];
  }

  prefixAt(i: number): Prefix {
    // Change i is about one prefix whatever the RIB does later: made once, read from the record while it is kept.
    this.prefixes ??= new Array<Prefix | undefined>(this.length);
    let p = this.prefixes[i];
    if (p === undefined) p = this.prefixes[i] = this.view.prefix(this.keys[i]);
    return p;
  }

  private checkMade(): void {
    const m = this.view.mutations();
    if (this.made === null || m !== this.madeAt) {
      this.made = new Array<RibChange | undefined>(this.length);
      this.madeAt = m;
    }
  }

  /** The source of the new best path; null for a withdrawal. No objects made. */
  sourceAt(i: number): string | null {
    // As decided at the flush, unless a subscriber has changed the RIB since: then as at(i) would read it.
    if (this.view.mutations() !== this.mutations) return this.view.currentSource(this.keys[i]);
    return this.types[i] === WITHDRAW ? null : this.view.sourceName(this.sources[i]);
  }

  *[Symbol.iterator](): IterableIterator<RibChange> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }
}

/**
 * The change feed over the path store: capture() notes a prefix's best path before its first change in a batch, and
 * flush() delivers the batch's net effect to the subscribers. Rib (rib.ts) is the class to use.
 */
export abstract class ChangeFeed extends PathStore {
  private readonly schedule: ((flush: () => void) => void) | undefined;
  private readonly scheduleFull: ((flush: () => void) => void) | undefined;
  private readonly subscribers = new Set<(batch: RibChangeBatch) => void>();
  private log = new PendingLog();
  private spareLog: PendingLog | null = new PendingLog();
  private emptyScratch = new Int32Array(1024);
  private scheduled = false;
  // Made once: an arrow function written inside capture() made V8 allocate capture's context (it holds `this`) on
  // every call, taken or not: 56 bytes per prefix, 60 MB of a full table's load.
  private readonly scheduledFlush = (): void => {
    this.flush();
  };
  private mutationCount = 0; // best-path-relevant changes seen by capture(), for RibChangeBatch.sourceAt
  private readonly view: BatchView = {
    prefix: (key) => this.tables[key & 1].sharedPrefix(key >>> 1),
    sourceName: (index) => this.sources[index]!.name,
    currentSource: (key) => {
      const t = this.tables[key & 1];
      const r = key >>> 1;
      if (!t.isLive(r)) return null;
      const h = t.head(r);
      return h === NONE || !(this.e.flags(h) & BEST) ? null : this.sources[this.e.src(h)]!.name;
    },
    mutations: () => this.mutationCount,
    change: (key, type, prefix) => {
      const t = this.tables[key & 1];
      const r = key >>> 1;
      const ch: RibChange = { type, prefix };
      if (type !== 'withdraw') {
        const mp = this.multipathOf(t, r);
        ch.best = mp[0];
        if (this.maxPaths > 1) ch.multipath = mp;
      }
      return ch;
    },
  };

  protected flushing = 0; // flush() calls under way (a subscriber may flush again): records let go wait in `deferred`
  protected readonly deferred: number[] = []; // record keys let go during a flush

  constructor(opts: RibOptions) {
    super(opts);
    this.schedule = opts.schedule;
    this.scheduleFull = opts.scheduleFull;
  }

  /**
   * Receive batches of best-path changes. Pending changes are flushed first, so a snapshot read right after
   * subscribing (entries()) plus the batches that follow describe the table exactly. Returns an unsubscribe.
   */
  subscribe(fn: (batch: RibChangeBatch) => void): () => void {
    this.flush();
    this.subscribers.add(fn);
    return () => {
      this.subscribers.delete(fn);
      if (this.subscribers.size === 0) this.flush();
    };
  }

  /** Deliver the net effect of the changes since the last flush to the subscribers. Returns the number of changes. */
  flush(): number {
    this.scheduled = false; // whoever calls it: a change from here on schedules the next flush
    const log = this.log;
    const n = log.n;
    if (n === 0) return 0;
    // Changes a subscriber makes while reading this batch start the next one.
    this.log = this.spareLog ?? new PendingLog();
    this.spareLog = null;
    const E = this.e;
    const keys = new Int32Array(n);
    const types = new Uint8Array(n);
    const srcs = new Int32Array(n);
    // Records left without paths (removed after delivery). Taken from the scratch while in use: a subscriber may
    // flush again from its callback.
    const empties = this.emptyScratch.length >= n ? this.emptyScratch : new Int32Array(n);
    this.emptyScratch = NO_EMPTIES;
    let c = 0;
    let ne = 0;
    for (let i = 0; i < n; i++) {
      const key = log.keys[i];
      const t = this.tables[key & 1];
      const r = key >>> 1;
      t.setPending(r, false);
      const h = t.head(r);
      if (h === NONE) empties[ne++] = key;
      const hasBest = h !== NONE && (E.flags(h) & BEST) !== 0;
      const before = log.beforeSrc[i];
      let type = -1;
      if (before === NONE) {
        if (hasBest) type = ADD;
      } else if (!hasBest) {
        type = WITHDRAW;
      } else if (E.src(h) !== before || E.eff(h) !== log.beforeEff[i] || !this.sameMultipath(h, log.multi.get(i))) {
        type = REPLACE;
      }
      if (type < 0) continue;
      keys[c] = key;
      types[c] = type;
      srcs[c++] = hasBest ? E.src(h) : NONE;
    }
    for (const s of this.retiredSources) this.freeSources.push(s);
    this.retiredSources = [];
    this.flushing++; // records the subscribers' Adj-RIB-Outs let go are recycled after the batch, not under it
    try {
      if (c > 0 && this.subscribers.size > 0) {
        const batch = new RibChangeBatch(this.view, keys, types, srcs, c);
        for (const fn of [...this.subscribers]) fn(batch);
      }
    } finally {
      this.flushing--;
    }
    // Only now: withdrawn prefixes keep their records (and so their words) while the subscribers read the batch.
    for (let i = 0; i < n; i++) if (log.beforeSrc[i] !== NONE) this.interner.releaseId(log.beforeEff[i]);
    for (let j = 0; j < ne; j++) {
      const t = this.tables[empties[j] & 1];
      const r = empties[j] >>> 1;
      if (t.unused(r)) t.remove(r);
    }
    if (this.flushing === 0) this.freeDeferred();
    this.emptyScratch = empties;
    for (const sig of log.multi.values()) for (let j = 3; j < sig.length; j += 2) this.interner.releaseId(sig[j]);
    log.multi.clear();
    log.n = 0;
    this.spareLog = log;
    return c;
  }

  /** Changes waiting for the next flush (prefixes touched in this batch). */
  override get pendingCount(): number {
    return this.log.n;
  }

  protected override capture(fi: number, r: number, t: Table): void {
    this.mutationCount++;
    if (this.subscribers.size === 0 || t.isPending(r)) return;
    t.setPending(r, true);
    const E = this.e;
    const h = t.head(r);
    const key = r * 2 + fi;
    if (h === NONE || !(E.flags(h) & BEST)) this.log.push(key, NONE, NONE);
    else {
      const i = this.log.push(key, E.src(h), E.eff(h));
      this.interner.retainId(E.eff(h));
      const second = E.next(h);
      if (second !== NONE && E.flags(second) & MULTI) {
        // A multipath set: remember all of it (the head's pair included, for a plain comparison later).
        const sig = [E.src(h), E.eff(h)];
        for (let e = second; e !== NONE && E.flags(e) & MULTI; e = E.next(e)) {
          sig.push(E.src(e), E.eff(e));
          this.interner.retainId(E.eff(e));
        }
        this.log.multi.set(i, sig);
      }
    }
    if (this.log.n === 1 && this.schedule && !this.scheduled) {
      this.scheduled = true;
      this.schedule(this.scheduledFlush);
    } else if (this.log.n === FULL_BATCH && this.scheduleFull) this.scheduleFull(this.scheduledFlush);
  }

  /** Whether the multipath set after the best entry `h` is the one recorded before (`before`: full sig or none). */
  private sameMultipath(h: number, before: number[] | undefined): boolean {
    const E = this.e;
    let j = 2;
    for (let e = E.next(h); e !== NONE && E.flags(e) & MULTI; e = E.next(e)) {
      if (before === undefined || j >= before.length || before[j] !== E.src(e) || before[j + 1] !== E.eff(e)) return false;
      j += 2;
    }
    return before === undefined || j === before.length;
  }

  /** Recycle records an Adj-RIB-Out let go of during a flush, once the batch is done. */
  private freeDeferred(): void {
    const d = this.deferred;
    for (let i = 0; i < d.length; i++) {
      const t = this.tables[d[i] & 1];
      if (t.unused(d[i] >>> 1)) t.remove(d[i] >>> 1);
    }
    d.length = 0;
  }
}
