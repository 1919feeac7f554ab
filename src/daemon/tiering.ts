// `blockspeaker run` starts without V8's optimising compiler (TurboFan) and turns it on when the first BGP session
// is established.
//
// Why: starting loads a few hundred modules. The loader's own functions (path and URL handling, the CommonJS
// export scanner, argument validators) run often enough then to be optimised, and optimising touches several MB
// of the node binary's compiler code and leaves its compile zones in malloc: about 10 MB of the idle daemon's RSS
// (BENCHMARKS.md "Footprint"), for code that never runs hot again. Released right after start, the functions
// that start-up warmed are optimised a moment later anyway (half of that cost), so the switch waits for work that
// needs the optimiser: UPDATEs to decode and routes to select, which come with an established session. Until then
// the daemon serves IPAM, the control socket and the status endpoint from bytecode (Ignition and Sparkplug), which
// those light, occasional requests do not notice.
//
// Sparkplug (the baseline compiler) is held with it: start-up would otherwise compile baseline code for the
// loader's warm functions too (~0.4 MB of the idle daemon; BENCHMARKS.md "Footprint").
//
// On Node.js 20 the optimiser also waits twice as long as V8's default before it compiles a function
// (INTERRUPT_BUDGET). A hundred peers coming up is a short burst of work, a few hundred ms of the main thread, and
// about a third of its CPU went to TurboFan's background compiles of functions that had run only briefly: with the
// longer wait, 13 of 96 compiles and 4-10% of the CPU less there, and a full table shows no difference.
//
// v8.setFlagsFromString after start is not a documented contract; V8 reads these flags at each tiering decision,
// which is what makes the switch work (test/daemon/tiering.test.ts checks both directions in a child process).
// Nothing depends on it working: if a Node.js ignores the flags, or refuses them (the call throws), the daemon runs
// with the compilers on, as any Node.js program does, only larger. And a daemon that never gets a BGP session still
// gets optimised code for IPAM: the hold also ends after RELEASE_AFTER_REQUESTS control-socket requests (a node
// starting pods: the CNI plugin's ADD and DEL arrive there) or RELEASE_AFTER_MS, whichever comes first.
import v8 from 'node:v8';

// Flags by which the user chose the compilers: then neither switch is ours to flip.
const USER_CHOICE = /^--(no-)?(opt|turbofan|jitless|max-opt|always-turbofan|always-opt|sparkplug|always-sparkplug)\b/;

/** V8's profiler budget while the daemon runs: twice Node.js 20's (V8 11.3) default of 67,584. */
export const INTERRUPT_BUDGET = 135_168;
const USER_BUDGET = /^--interrupt-budget=/;
/**
 * The V8 the budget was measured on. Others name and scale it differently: Node.js 22's V8 12.4 (the Windows
 * executables) has no --interrupt-budget, and prints "unrecognized flag" to stderr instead of throwing.
 */
export const BUDGET_V8 = /^11\.3\./;

/** Control-socket requests after which the hold ends without a BGP session (about 100 pods' ADD and DEL). */
export const RELEASE_AFTER_REQUESTS = 200;
/** Time after which the hold ends anyway: by then start-up's warm code has gone cold, so little is compiled. */
export const RELEASE_AFTER_MS = 10 * 60_000;

let held = false;
/** Control-socket requests the hold still waits for; each hold starts it afresh. */
let requestsLeft = RELEASE_AFTER_REQUESTS;
let timer: NodeJS.Timeout | undefined;
let setFlags: (flags: string) => void = (f) => v8.setFlagsFromString(f);

/** Whether a node flag matching `re` is on the command line or in NODE_OPTIONS (V8 takes _ for -). */
function userSet(re: RegExp, execArgv: readonly string[], nodeOptions: string): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((a) => re.test(a.replaceAll('_', '-')));
}

/** True when the user set the optimiser's flags on the command line or in NODE_OPTIONS. */
export function userChoseTiering(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return userSet(USER_CHOICE, execArgv, nodeOptions);
}

/** True when the user gave V8's --interrupt-budget: then INTERRUPT_BUDGET is not set over it. */
export function userChoseBudget(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return userSet(USER_BUDGET, execArgv, nodeOptions);
}

export interface HoldOptions {
  /** Release after this many ms (default RELEASE_AFTER_MS); the timer never keeps the process alive. */
  releaseAfterMs?: number;
  /** Release after this many noteRequest() calls (default RELEASE_AFTER_REQUESTS). */
  releaseAfterRequests?: number;
  /** For tests: what sets a V8 flag (default v8.setFlagsFromString). */
  setFlags?: (flags: string) => void;
  /** For tests: the V8 version (default process.versions.v8). */
  v8Version?: string;
}

/**
 * Turn the optimising and baseline compilers off until release(); a no-op when the user chose the flags, and when
 * V8 refuses the flags (then the compilers simply stay on). Returns whether it held.
 */
export function holdOptimizer(opts: HoldOptions = {}): boolean {
  if (held || userChoseTiering()) return false;
  if (opts.setFlags) setFlags = opts.setFlags;
  try {
    setFlags('--no-turbofan');
  } catch {
    return false; // not held: nothing to release
  }
  try {
    setFlags('--no-sparkplug');
  } catch {
    /* the optimiser alone is held */
  }
  // With the hold, before the functions start-up warms are given their budgets; a user's own budget stays.
  if (BUDGET_V8.test(opts.v8Version ?? process.versions.v8) && !userChoseBudget()) {
    try {
      setFlags(`--interrupt-budget=${INTERRUPT_BUDGET}`);
    } catch {
      /* V8's own default, then */
    }
  }
  held = true;
  requestsLeft = opts.releaseAfterRequests ?? RELEASE_AFTER_REQUESTS;
  timer = setTimeout(release, opts.releaseAfterMs ?? RELEASE_AFTER_MS);
  timer.unref();
  return true;
}

/** Turn the compilers back on (idempotent; nothing when hold did not hold). */
export function release(): void {
  if (!held) return;
  held = false;
  clearTimeout(timer);
  timer = undefined;
  for (const f of ['--turbofan', '--sparkplug']) {
    try {
      setFlags(f);
    } catch {
      /* refused: it was not held either */
    }
  }
}

/** One unit of request work (a control-socket request): enough of them release the hold. */
export function noteRequest(): void {
  if (held && --requestsLeft <= 0) release();
}

/** The handlers, each counting as one request for noteRequest() (the daemon's control socket). */
export function countedRequests<H extends Record<string, (...args: never[]) => unknown>>(handlers: H): H {
  const out: Record<string, (...args: never[]) => unknown> = {};
  for (const [name, h] of Object.entries(handlers)) {
    out[name] = (...args: never[]) => {
      noteRequest();
      return h(...args);
    };
  }
  return out as H;
}

export function isHeld(): boolean {
  return held;
}
