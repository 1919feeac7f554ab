// Per-process figures from /proc, for benches that measure daemons they did not write (BIRD, GoBGP) the same way
// as ours: CPU time (utime + stime) and memory high-water mark (VmHWM).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let clkTck = 0;
function ticksPerSecond(): number {
  if (!clkTck) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

/**
 * Fields of /proc/PID/stat (or of a thread's, /proc/PID/task/TID/stat) after the command name (index 0 = state,
 * the stat(5) field 3).
 */
function statFields(pid: number | 'self', tid?: string): string[] {
  const s = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of stat fields, ms. */
const cpuOf = (f: string[]): number => ((Number(f[11]) + Number(f[12])) * 1000) / ticksPerSecond();

/** CPU time of the process itself (user + system), ms. */
export function cpuMs(pid: number): number {
  return cpuOf(statFields(pid));
}

/** CPU time of this process's waited-for children (cutime + cstime), ms: what short-lived pollers cost. */
export function childrenCpuMs(): number {
  const f = statFields('self');
  return ((Number(f[13]) + Number(f[14])) * 1000) / ticksPerSecond();
}

function statusKb(pid: number, key: string): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** Peak resident set size (VmHWM), MB. */
export function peakRssMB(pid: number): number {
  return statusKb(pid, 'VmHWM') / 1024;
}

/** Current resident set size (VmRSS), MB. */
export function rssMB(pid: number): number {
  return statusKb(pid, 'VmRSS') / 1024;
}

/** The command name (/proc/PID/comm), or null when the process is gone. */
export function comm(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}

/**
 * CPU time (user + system, ms) of the process's main thread and of all its other threads together. For a Node.js
 * daemon the others are V8's helper threads (parallel and concurrent GC, background compiles) and libuv's pool;
 * BIRD has only a main thread. Threads that ended before the call are not counted (none do in the daemons here).
 */
/**
 * How long the process's main thread has waited for a CPU while it was ready to run (ms; the second field of
 * /proc/PID/task/PID/schedstat, in ns): the part of a run's wall time lost to other threads and processes, as
 * opposed to the time it had nothing to do.
 */
export function mainThreadRunDelayMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0; // no schedstat (a kernel without CONFIG_SCHED_INFO): reported as no delay
  }
}

/**
 * The process's read system calls and the octets they returned so far (/proc/PID/io syscr and rchar; every read,
 * of sockets and files alike), or null when the file cannot be read. During a table load a receiver reads little
 * but its session's socket: how many reads the table took says how the sender's writes arrived.
 */
export function readCounts(pid: number): { reads: number; bytes: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    const reads = field('syscr');
    const bytes = field('rchar');
    return Number.isFinite(reads) && Number.isFinite(bytes) ? { reads, bytes } : null;
  } catch {
    return null;
  }
}

export function threadCpuMs(pid: number): { main: number; others: number } {
  let main = 0;
  let others = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let ms: number;
    try {
      ms = cpuOf(statFields(pid, tid));
    } catch {
      continue; // the thread ended meanwhile
    }
    if (Number(tid) === pid) main = ms;
    else others += ms;
  }
  return { main, others };
}
