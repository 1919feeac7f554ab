// Summarises a V8 .cpuprofile (node --cpu-prof) into self time per function and per source file, optionally only
// for samples inside a time window (so a daemon's startup and idle time do not drown the part being measured).
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  name: string;
  ms: number;
  pct: number;
}

export interface ProfileSummary {
  /** Sampled time inside the window, ms (idle excluded). */
  totalMs: number;
  functions: ProfileEntry[];
  files: ProfileEntry[];
}

export const shortUrl = (url: string) => {
  const i = url.indexOf('/src/');
  if (i >= 0) return url.slice(i + 1);
  const n = url.lastIndexOf('node_modules/');
  if (n >= 0) return url.slice(n);
  return url.replace(/^file:\/\//, '') || '(native)';
};

/**
 * fromMs/toMs: window on CLOCK_MONOTONIC in ms (null = unbounded). V8 stamps profiles with that clock, which is
 * also process.hrtime's, so another process's times map onto the profile exactly. Time is attributed to the
 * sampled (leaf) function: self time.
 */
export function summarizeProfile(file: string, fromMs: number | null = null, toMs: number | null = null, top = 15): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const fn = new Map<string, number>();
  const files = new Map<string, number>();
  let t = p.startTime / 1000;
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] / 1000;
    if (fromMs !== null && t < fromMs) continue;
    if (toMs !== null && t > toMs) break;
    // A sample's time is the gap to the next one.
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    const node = byId.get(p.samples[i]);
    if (!node) continue;
    const cf = node.callFrame;
    if (cf.functionName === '(idle)') continue;
    const file = cf.url ? shortUrl(cf.url) : cf.functionName;
    // Code run through tsx reports line 0 for everything (no source maps in profiles): then the file is enough.
    const line = cf.lineNumber > 0 ? `:${cf.lineNumber + 1}` : '';
    const name = cf.url ? `${cf.functionName || '(anonymous)'} ${file}${line}` : cf.functionName;
    fn.set(name, (fn.get(name) ?? 0) + dt);
    files.set(file, (files.get(file) ?? 0) + dt);
    total += dt;
  }
  const list = (m: Map<string, number>) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, top)
      .map(([name, ms]) => ({ name, ms: Math.round(ms), pct: Math.round((ms / (total || 1)) * 1000) / 10 }));
  return { totalMs: Math.round(total), functions: list(fn), files: list(files) };
}
