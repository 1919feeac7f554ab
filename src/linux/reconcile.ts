// The Linux reconcile loop: read the table, plan, apply — after input changes (debounced), every intervalMs to
// repair drift (routes deleted or changed behind our back), and after failures with exponential backoff.
// Runs never overlap. Timers and the clock are injected so tests drive the loop by hand.
import type { DesiredRoutes } from './desired.ts';
import { countOps, planRoutes, type RouteOp } from './planner.ts';
import { type ApplyResult, type ReadResult, describeFailure } from './programmer.ts';
import { type Owner, describeRoute } from './route.ts';
import { formatPrefix, formatIP } from '../net/ip.ts';

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

// Unref'd so a forgotten loop never keeps a process (or a test) alive.
export const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** What the loop needs from the adapter (IpRouteProgrammer, or a fake in tests). */
export interface RouteProgrammerPort {
  readonly owner: Owner;
  /** Runs first in every reconcile (policy rules); a throw fails the run. */
  prepare?(): Promise<void>;
  read(): Promise<ReadResult>;
  apply(ops: readonly RouteOp[]): Promise<ApplyResult>;
}

export interface LinuxReconcilerOptions {
  programmer: RouteProgrammerPort;
  /** Computes the desired routes; called at the start of every run. */
  desired: () => DesiredRoutes;
  /** Drift repair period (default 30 s). */
  intervalMs?: number;
  /** Delay after a change so a burst of change-feed batches makes one run (default 50 ms). */
  debounceMs?: number;
  /** Backoff after a failed run: initialMs * factor^(failures-1), at most maxMs (defaults 1 s, 2, 60 s). */
  retry?: { initialMs?: number; factor?: number; maxMs?: number };
  timers?: Timers;
  now?: () => number;
  /** Called with every run's record (logging). */
  onRun?: (r: RunRecord) => void;
}

export type Trigger = 'start' | 'change' | 'interval' | 'retry' | 'manual';

const SAMPLE = 20;

export interface RunRecord {
  at: number;
  trigger: Trigger;
  durationMs: number;
  ok: boolean;
  desired: number;
  unchanged: number;
  planned: { add: number; replace: number; delete: number };
  /** The first planned ops, as text. */
  ops: string[];
  failedCount: number;
  failed: string[];
  conflictCount: number;
  /** Desired routes whose key a foreign route holds (not installed; not an error). */
  conflicts: string[];
  skippedCount: number;
  skipped: string[];
  /** Table entries ip printed that could not be parsed. */
  unparsedCount: number;
  /** Ops that were needed although the inputs had not changed since the last good run: drift repaired. */
  drift: number;
  /** Why the run failed (ip could not run, or the first op failure). */
  error?: string;
}

export interface LinuxReconcilerStatus {
  running: boolean;
  runs: number;
  failures: number;
  consecutiveFailures: number;
  driftRepairs: number;
  lastRun?: RunRecord;
  /** The last run that planned any op. */
  lastPlan?: RunRecord;
  lastError?: { at: number; message: string };
  lastDrift?: { at: number; ops: number; sample: string[] };
  nextRunAt?: number;
  nextRunReason?: Trigger;
}

const opText = (o: RouteOp): string => `${o.op} ${describeRoute(o.route)}`;

export class LinuxReconciler {
  private readonly programmer: RouteProgrammerPort;
  private readonly desiredFn: () => DesiredRoutes;
  private readonly intervalMs: number;
  private readonly debounceMs: number;
  private readonly retryInitial: number;
  private readonly retryFactor: number;
  private readonly retryMax: number;
  private readonly timers: Timers;
  private readonly now: () => number;
  private readonly onRun?: (r: RunRecord) => void;

  private started = false;
  private stopped = false;
  private running = false;
  private timer: unknown = null;
  private due = 0;
  private chain: Promise<void> = Promise.resolve();
  private inputVersion = 0;
  private appliedVersion = -1;
  private readonly st: LinuxReconcilerStatus = {
    running: false, runs: 0, failures: 0, consecutiveFailures: 0, driftRepairs: 0,
  };

  constructor(o: LinuxReconcilerOptions) {
    this.programmer = o.programmer;
    this.desiredFn = o.desired;
    this.intervalMs = o.intervalMs ?? 30_000;
    this.debounceMs = o.debounceMs ?? 50;
    this.retryInitial = o.retry?.initialMs ?? 1_000;
    this.retryFactor = o.retry?.factor ?? 2;
    this.retryMax = o.retry?.maxMs ?? 60_000;
    this.timers = o.timers ?? realTimers;
    this.now = o.now ?? Date.now;
    this.onRun = o.onRun;
  }

  /** Begin: a first run right away, then on changes, periodically and on retry. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.schedule(0, 'start');
  }

  /** Stop scheduling and wait for a run in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.clearTimer();
    await this.chain;
  }

  /** The inputs changed (IPAM view or a RIB batch): run soon. While backing off, the retry picks it up instead. */
  changed(): void {
    this.inputVersion++;
    if (!this.started || this.stopped || this.running || this.st.consecutiveFailures > 0) return;
    this.schedule(this.debounceMs, 'change');
  }

  /** Run now (after any run in progress); resolves with the run's record. */
  runOnce(trigger: Trigger = 'manual'): Promise<RunRecord> {
    const p = this.chain.then(() => this.reconcile(trigger));
    this.chain = p.then(() => undefined, () => undefined);
    return p;
  }

  status(): LinuxReconcilerStatus {
    return { ...this.st, running: this.running };
  }

  // ---- scheduling -------------------------------------------------------------------------------------------

  /** Arrange a run `delay` ms from now, unless one is already due sooner. */
  private schedule(delay: number, reason: Trigger): void {
    if (this.stopped) return;
    const at = this.now() + delay;
    if (this.timer !== null && this.due <= at) return;
    this.clearTimer();
    this.due = at;
    this.st.nextRunAt = at;
    this.st.nextRunReason = reason;
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      void this.runOnce(reason);
    }, delay);
  }

  private clearTimer(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.st.nextRunAt = undefined;
    this.st.nextRunReason = undefined;
  }

  private backoffMs(): number {
    const n = Math.max(1, this.st.consecutiveFailures);
    return Math.min(this.retryMax, this.retryInitial * this.retryFactor ** (n - 1));
  }

  // ---- one run ----------------------------------------------------------------------------------------------

  private async reconcile(trigger: Trigger): Promise<RunRecord> {
    this.running = true;
    const at = this.now();
    const version = this.inputVersion;
    const rec: RunRecord = {
      at, trigger, durationMs: 0, ok: false, desired: 0, unchanged: 0, planned: { add: 0, replace: 0, delete: 0 },
      ops: [], failedCount: 0, failed: [], conflictCount: 0, conflicts: [], skippedCount: 0, skipped: [],
      unparsedCount: 0, drift: 0,
    };
    try {
      const want = this.desiredFn();
      rec.desired = want.routes.length;
      rec.skippedCount = want.skipped.length;
      rec.skipped = want.skipped.slice(0, SAMPLE).map((s) =>
        `${formatPrefix(s.prefix)}${s.nextHop ? ` via ${formatIP(s.nextHop)}` : ''}: ${s.reason}`);
      await this.programmer.prepare?.();
      const actual = await this.programmer.read();
      rec.unparsedCount = actual.unparsed.length;
      const plan = planRoutes(actual.routes, want.routes, this.programmer.owner);
      rec.unchanged = plan.unchanged;
      rec.planned = countOps(plan.ops);
      rec.ops = plan.ops.slice(0, SAMPLE).map(opText);
      rec.conflictCount = plan.conflicts.length;
      rec.conflicts = plan.conflicts.slice(0, SAMPLE).map((c) =>
        `${describeRoute(c.route)}: key held by ${describeRoute(c.holder)}`);
      if (plan.ops.length > 0 && version === this.appliedVersion) rec.drift = plan.ops.length;
      const res = await this.programmer.apply(plan.ops);
      rec.failedCount = res.failed.length;
      rec.failed = res.failed.slice(0, SAMPLE).map(describeFailure);
      rec.ok = res.failed.length === 0;
      if (!rec.ok) rec.error = `${res.failed.length} of ${res.attempted} route ops failed; first: ${rec.failed[0]}`;
    } catch (err) {
      rec.error = (err as Error).message;
    }
    rec.durationMs = this.now() - at;
    this.record(rec, version);
    this.running = false;
    this.afterRun(rec, version);
    this.onRun?.(rec);
    return rec;
  }

  private record(rec: RunRecord, version: number): void {
    const st = this.st;
    st.runs++;
    st.lastRun = rec;
    if (rec.ops.length > 0) st.lastPlan = rec;
    if (rec.drift > 0) {
      st.driftRepairs++;
      st.lastDrift = { at: rec.at, ops: rec.drift, sample: rec.ops };
    }
    if (rec.ok) {
      st.consecutiveFailures = 0;
      this.appliedVersion = version;
    } else {
      st.failures++;
      st.consecutiveFailures++;
      st.lastError = { at: rec.at, message: rec.error ?? 'failed' };
    }
  }

  private afterRun(rec: RunRecord, version: number): void {
    if (!this.started || this.stopped) return;
    if (!rec.ok) this.schedule(this.backoffMs(), 'retry');
    else if (this.inputVersion !== version) this.schedule(this.debounceMs, 'change');
    else this.schedule(this.intervalMs, 'interval');
  }
}
