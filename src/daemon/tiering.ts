// `blockspeaker run` starts without V8's optimising compiler (TurboFan) and turns it on when the first BGP session
// is established (issue 17).
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
// v8.setFlagsFromString after start is not a documented contract; V8 reads this flag at each tiering decision,
// which is what makes the switch work (test/daemon/tiering.test.ts checks both directions in a child process).
import v8 from 'node:v8';

// Flags by which the user chose the compilers: then neither switch is ours to flip.
const USER_CHOICE = /^--(no-)?(opt|turbofan|jitless|max-opt|always-turbofan|always-opt)\b/;

let held = false;

/** True when the user set the optimiser's flags on the command line or in NODE_OPTIONS. */
export function userChoseTiering(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((a) => USER_CHOICE.test(a.replaceAll('_', '-')));
}

/** Turn the optimiser off until release(); a no-op when the user chose the flags. Returns whether it held. */
export function holdOptimizer(): boolean {
  if (held || userChoseTiering()) return false;
  v8.setFlagsFromString('--no-turbofan');
  held = true;
  return true;
}

/** Turn the optimiser back on (idempotent; nothing when hold did not hold). */
export function release(): void {
  if (!held) return;
  held = false;
  v8.setFlagsFromString('--turbofan');
}

export function isHeld(): boolean {
  return held;
}
