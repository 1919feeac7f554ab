// The HNS reconcile loop: read actual state, plan against the desired state, apply; on every change batch (after a
// short debounce that coalesces bursts) and every `intervalMs` (drift: host routes get lost, someone edits the
// network). After a failure it retries with exponential backoff; a change batch does not cut a backoff short (a
// failing HNS is not helped by being asked faster). Keeps the last plan, the last error and drift for the status
// endpoint. Clock and timers are injected, so tests drive it without waiting.
import type { DesiredState } from './desired.ts';
import { type HnsEndpoint, type HnsExecutor, type HnsOp, type HnsOpKind, type HnsSnapshot, HcnError, endpointAddresses, hresultText } from './model.ts';
import { type BlockedOp, planHns } from './planner.ts';

export interface Clock {
  now(): number;
}

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export type PassReason = 'start' | 'change' | 'periodic' | 'retry' | 'manual';

export interface ReconcileOptions {
  executor: HnsExecutor;
  /**
   * Computes the desired state; called in every pass right after the read, so what it knows (IPAM's handles) is at
   * least as new as the HNS state read: an endpoint seen in HNS had its address assigned before the read.
   */
  desired: (actual: HnsSnapshot) => DesiredState | Promise<DesiredState>;
  clock?: Clock;
  timers?: Timers;
  /** Periodic pass interval; default 30 s. */
  intervalMs?: number;
  /** Delay between a change batch and its pass; default 100 ms. */
  debounceMs?: number;
  /** Retry delays: initialMs * factor^(failures-1), at most maxMs; defaults 1 s, 2, 60 s. */
  backoff?: { initialMs?: number; maxMs?: number; factor?: number };
  /** Jitter source for retries (delay * (0.8..1.2)); none by default. */
  random?: () => number;
  /** Ops kept per plan/drift record in status. Default 20. */
  sampleSize?: number;
  onPass?: (record: PassRecord) => void;
}

export interface PassRecord {
  at: number;
  reason: PassReason;
  ok: boolean;
  ops: number;
  applied: number;
  /** Ops that failed (independent ones are skipped past, so there can be several). */
  failed: number;
  byOp: Partial<Record<HnsOpKind, number>>;
  blocked: BlockedOp[];
  /** Remote routes the desired state left out (outside the owned ranges, over a local block, via this node). */
  ignoredRemotes: number;
  sample: HnsOp[];
  durationMs: number;
  /** Endpoints this pass set out to remove ("name address id"): leaked ones and stale host endpoints. */
  removedEndpoints: { name: string; ip: string; id: string }[];
}

export interface ReconcileError {
  at: number;
  stage: 'desired' | 'read' | 'apply';
  message: string;
  code?: string;
  op?: HnsOpKind;
}

export interface DriftRecord {
  at: number;
  ops: number;
  byOp: Partial<Record<HnsOpKind, number>>;
  sample: HnsOp[];
}

export interface ReconcileStatus {
  passes: number;
  consecutiveFailures: number;
  lastPlan: PassRecord | null;
  lastSuccessAt: number | null;
  lastError: ReconcileError | null;
  /** The latest pass that found work although nothing had changed since the last clean pass. */
  drift: DriftRecord | null;
  driftEvents: number;
  nextRunAt: number | null;
  nextReason: PassReason | null;
}

const defaultTimers: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

const countByOp = (ops: readonly HnsOp[]) => {
  const out: Partial<Record<HnsOpKind, number>> = {};
  for (const o of ops) out[o.op] = (out[o.op] ?? 0) + 1;
  return out;
};

export class HnsReconciler {
  private readonly clock: Clock;
  private readonly timers: Timers;
  private readonly intervalMs: number;
  private readonly debounceMs: number;
  private readonly backoff: { initialMs: number; maxMs: number; factor: number };
  private timer: unknown = null;
  private current: Promise<PassRecord> | null = null;
  private stopped = true;
  private dirty = false;
  /** True after a clean pass (nothing left, nothing blocked) and no change since: work found now is drift. */
  private settled = false;
  private readonly st: ReconcileStatus = {
    passes: 0,
    consecutiveFailures: 0,
    lastPlan: null,
    lastSuccessAt: null,
    lastError: null,
    drift: null,
    driftEvents: 0,
    nextRunAt: null,
    nextReason: null,
  };

  constructor(private readonly opts: ReconcileOptions) {
    this.clock = opts.clock ?? Date;
    this.timers = opts.timers ?? defaultTimers;
    this.intervalMs = opts.intervalMs ?? 30_000;
    this.debounceMs = opts.debounceMs ?? 100;
    this.backoff = { initialMs: 1000, maxMs: 60_000, factor: 2, ...opts.backoff };
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0, 'start');
  }

  stop(): void {
    this.stopped = true;
    this.cancel();
  }

  /** A change batch arrived (RIB, IPAM, config): plan again soon. */
  notify(): void {
    this.dirty = true;
    this.settled = false;
    if (this.stopped || this.current || this.st.consecutiveFailures > 0) return; // the pass's end schedules
    if (this.st.nextRunAt === null || this.st.nextRunAt > this.clock.now() + this.debounceMs) this.schedule(this.debounceMs, 'change');
  }

  status(): ReconcileStatus {
    return structuredClone(this.st);
  }

  /** The running pass, if any. */
  idle(): Promise<unknown> {
    return this.current ?? Promise.resolve();
  }

  /** Run a pass now (or join the running one). */
  runOnce(reason: PassReason = 'manual'): Promise<PassRecord> {
    if (this.current) return this.current;
    this.cancel();
    const p = this.pass(reason).finally(() => {
      this.current = null;
      this.afterPass();
    });
    this.current = p;
    return p;
  }

  private cancel(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.st.nextRunAt = null;
    this.st.nextReason = null;
  }

  private schedule(ms: number, reason: PassReason): void {
    this.cancel();
    this.st.nextRunAt = this.clock.now() + ms;
    this.st.nextReason = reason;
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      void this.runOnce(reason);
    }, ms);
  }

  private afterPass(): void {
    if (this.stopped) return;
    const f = this.st.consecutiveFailures;
    if (f > 0) {
      let delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * this.backoff.factor ** (f - 1));
      if (this.opts.random) delay = Math.round(delay * (0.8 + 0.4 * this.opts.random()));
      this.schedule(delay, 'retry');
    } else if (this.dirty) this.schedule(this.debounceMs, 'change');
    else this.schedule(this.intervalMs, 'periodic');
  }

  private async pass(reason: PassReason): Promise<PassRecord> {
    const at = this.clock.now();
    const wasSettled = this.settled;
    this.dirty = false;
    this.st.passes++;
    const record: PassRecord = { at, reason, ok: false, ops: 0, applied: 0, failed: 0, byOp: {}, blocked: [], ignoredRemotes: 0, sample: [], durationMs: 0, removedEndpoints: [] };
    const n = this.opts.sampleSize ?? 20;
    const fail = (stage: ReconcileError['stage'], e: unknown, op?: HnsOpKind) => {
      const err = e as Error;
      this.st.lastError = {
        at: this.clock.now(),
        stage,
        message: err?.message ?? String(e),
        ...(err instanceof HcnError ? { code: hresultText(err.code) } : {}),
        ...(op ? { op } : {}),
      };
      this.st.consecutiveFailures++;
      this.settled = false;
    };
    try {
      let actual;
      try {
        actual = await this.opts.executor.read();
      } catch (e) {
        fail('read', e); // never "nothing exists": no plan from a failed read
        return record;
      }
      let desired: DesiredState;
      try {
        desired = await this.opts.desired(actual);
      } catch (e) {
        fail('desired', e);
        return record;
      }
      record.ignoredRemotes = desired.ignored.length;
      const plan = planHns(actual, desired);
      record.ops = plan.ops.length;
      record.byOp = countByOp(plan.ops);
      record.blocked = plan.blocked;
      record.sample = plan.ops.slice(0, n);
      for (const o of plan.ops) {
        if (o.op !== 'remove-endpoint') continue;
        const e = o.body as HnsEndpoint;
        record.removedEndpoints.push({ name: e.Name ?? '', ip: endpointAddresses(e).map(String).join(','), id: e.ID });
      }
      if (wasSettled && plan.ops.length > 0) {
        this.st.drift = { at, ops: plan.ops.length, byOp: record.byOp, sample: record.sample };
        this.st.driftEvents++;
      }
      if (plan.ops.length > 0) {
        const r = await this.opts.executor.apply(plan.ops);
        record.applied = r.applied;
        record.failed = r.failures?.length ?? (r.error ? 1 : 0);
        if (r.error) {
          fail('apply', r.error, r.failedOp?.op);
          return record;
        }
      }
      record.ok = true;
      this.st.consecutiveFailures = 0;
      this.st.lastSuccessAt = this.clock.now();
      // Blocked work (endpoints still on an ip-subnet) is not drift when it goes through later.
      this.settled = plan.blocked.length === 0 && !this.dirty;
      return record;
    } finally {
      record.durationMs = this.clock.now() - at;
      this.st.lastPlan = record;
      this.opts.onPass?.(record);
    }
  }
}
