// A diagnostic preload for the daemon (node --require bench/lib/mem-sampler.cjs), used by the BGP ingest benches
// --mem-sample: where the peak RSS is when it is not live JS heap. Every 10 ms (when the event loop lets it) it
// reads process.memoryUsage(); at each new RSS peak (0.25 MB or more above the last one written) it writes
// MEM_SAMPLE_FILE with that sample, V8's heap spaces (committed and used), /proc/self/smaps_rollup, and the GC
// pauses so far (count and ms by kind, from the 'gc' performance entries). The daemon is killed without warning, so
// the file is always the last peak; FILE.last holds the GC totals and maxima as of the last 250 ms. CommonJS so that --require works in front of the ESM bundle.
'use strict';
const fs = require('node:fs');
const v8 = require('node:v8');
const { PerformanceObserver } = require('node:perf_hooks');

const file = process.env.MEM_SAMPLE_FILE;
if (file) {
  const MB = 2 ** 20;
  const r1 = (n) => Math.round((n / MB) * 10) / 10;
  const gc = {};
  const KINDS = { 1: 'scavenge', 2: 'markCompact', 4: 'incremental', 8: 'weakCallbacks' };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const k = KINDS[e.detail?.kind ?? e.kind] ?? 'other';
      const g = (gc[k] ??= { count: 0, ms: 0 });
      g.count++;
      g.ms += e.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  // Whole files only (the bench may read one at any moment): write aside, then rename over.
  const put = (f, text) => {
    fs.writeFileSync(`${f}.tmp`, text);
    fs.renameSync(`${f}.tmp`, f);
  };
  const max = {};
  let written = 0;
  const t0 = Date.now();
  const sample = () => {
    const m = process.memoryUsage();
    for (const [k, v] of Object.entries(m)) if (!(max[k] >= v)) max[k] = v;
    if (m.rss < written + MB / 4) return;
    written = m.rss;
    const spaces = {};
    for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name] = { committedMB: r1(s.space_size), usedMB: r1(s.space_used_size) };
    const h = v8.getHeapStatistics();
    const out = {
      atMs: Date.now() - t0,
      rssMB: r1(m.rss), heapTotalMB: r1(m.heapTotal), heapUsedMB: r1(m.heapUsed), externalMB: r1(m.external), arrayBuffersMB: r1(m.arrayBuffers),
      heap: { totalPhysicalMB: r1(h.total_physical_size), mallocedMB: r1(h.malloced_memory), peakMallocedMB: r1(h.peak_malloced_memory) },
      spaces,
      maxSoFar: Object.fromEntries(Object.entries(max).map(([k, v]) => [k, r1(v)])),
      gc: Object.fromEntries(Object.entries(gc).map(([k, g]) => [k, { count: g.count, ms: Math.round(g.ms) }])),
      smapsRollup: fs.readFileSync('/proc/self/smaps_rollup', 'utf8'),
      execArgv: process.execArgv,
    };
    put(file, JSON.stringify(out, null, 1));
  };
  setInterval(sample, 10).unref();
  // The GC totals and maxima keep moving after the peak: FILE.last has them as of the last quarter second.
  setInterval(() => {
    const gcOut = Object.fromEntries(Object.entries(gc).map(([k, g]) => [k, { count: g.count, ms: Math.round(g.ms) }]));
    put(`${file}.last`, JSON.stringify({ atMs: Date.now() - t0, gc: gcOut, maxSoFar: Object.fromEntries(Object.entries(max).map(([k, v]) => [k, r1(v)])) }));
  }, 250).unref();
}
