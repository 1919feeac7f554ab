// Where a run's JS heap allocation came from: the sampling heap profile V8 writes (the inspector's
// HeapProfiler.startSampling/stopSampling), summed by allocating function. Started with the objects that minor and
// major GCs collect kept in the profile (includeObjectsCollectedBy*), it counts everything allocated, not only what
// is still alive at the end: what the young generation's scavenges pay for. Pure: the caller does the I/O.
import { shortUrl } from './cpuprofile.ts';

export interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

export interface SamplingProfile {
  head: SamplingNode;
}

export interface AllocEntry {
  name: string;
  bytes: number;
  pct: number;
}

/** The `top` functions by bytes allocated in their own body (inlined callees included, as V8 reports them). */
export function summarizeAllocations(p: SamplingProfile, top = 15): { totalBytes: number; functions: AllocEntry[] } {
  const by = new Map<string, number>();
  let total = 0;
  const stack: SamplingNode[] = [p.head];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (n.selfSize > 0) {
      const cf = n.callFrame;
      const line = cf.lineNumber > 0 ? `:${cf.lineNumber + 1}` : '';
      const name = cf.url ? `${cf.functionName || '(anonymous)'} ${shortUrl(cf.url)}${line}` : cf.functionName || '(native)';
      by.set(name, (by.get(name) ?? 0) + n.selfSize);
      total += n.selfSize;
    }
    for (const c of n.children) stack.push(c);
  }
  const functions = [...by].sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([name, bytes]) => ({ name, bytes, pct: Math.round((bytes / (total || 1)) * 1000) / 10 }));
  return { totalBytes: total, functions };
}
