#!/usr/bin/env -S node --max-semi-space-size=1 --v8-pool-size=1
// Entry point. Runs `npm run build`'s bundle (dist/bundle: smaller and quicker to start) when it is at least as new
// as tsc's output, else the compiled CLI when `tsc` has produced it, else the TypeScript sources via tsx;
// BLOCKSPEAKER_FROM_SOURCE=1 forces the sources. A bundle older than dist/src is stale (tsc ran after the last
// `npm run build`) and is not used.
// --max-semi-space-size=1 in the line above: V8's young generation capped at 1 MB per semi-space (default 16):
// ~1.4 MB less RSS for the idle daemon, ~15 MB less peak RSS at 100 peers x 100 prefixes. 2 MB would save ~10 MB
// more at that peak but costs the idle daemon ~1.7 MB, past the 55 MB goal (BENCHMARKS.md "Runtime flags and the
// status endpoint under load"). --v8-pool-size=1: one V8 worker thread instead of four for the collector's
// parallel and concurrent work on a heap of a few tens of MB; on a node whose cores the pods use, four helpers only
// contended with the main thread: a full table from BIRD ~6% less CPU, ~4 KB less RSS per session at 1,000 iBGP
// clients (BENCHMARKS.md "One V8 worker thread"). Started as `node bin/blockspeaker.js`, pass them yourself, as
// the systemd unit, the DaemonSets and the Windows service do (env -S: coreutils 8.30+, macOS);
// test/deploy/node-flags.test.ts holds them all to this line.
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// import() takes a URL: a plain absolute path breaks on Windows (drive letter read as a URL scheme).
const compiledUrl = new URL('../dist/src/cli/main.js', import.meta.url);
const bundleUrl = new URL('../dist/bundle/main.js', import.meta.url);
const compiled = fileURLToPath(compiledUrl);
const mtime = (url) => statSync(fileURLToPath(url), { throwIfNoEntry: false })?.mtimeMs;
if (process.env.BLOCKSPEAKER_FROM_SOURCE !== '1' && (mtime(bundleUrl) ?? -1) >= (mtime(compiledUrl) ?? 0)) {
  await import(bundleUrl.href);
} else if (process.env.BLOCKSPEAKER_FROM_SOURCE !== '1' && existsSync(compiled)) {
  await import(compiledUrl.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
