#!/usr/bin/env node
// Runs the whole tap suite and ends with the plain line "N passed, N failed" that CI reads.
// Extra arguments go to tap (e.g. a single test file).
import { spawn } from 'node:child_process';

const args = process.argv.slice(2);
const child = spawn('npx', ['tap', '--reporter=tap', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
let tail = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  tail = (tail + chunk.toString()).slice(-4096);
});
child.on('close', (code) => {
  // tap's closing summary: "# { total: 7, pass: 6, fail: 1, skip: 0 }"
  const m = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?(?:, todo: (\d+))?(?:, skip: (\d+))?/.exec(tail);
  const pass = m ? Number(m[2] ?? 0) : 0;
  let fail = m ? Number(m[3] ?? 0) : 0;
  const skip = m ? Number(m[5] ?? 0) : 0;
  if (code !== 0 && fail === 0) fail = 1; // the runner itself failed (crash, timeout, no summary)
  console.log(`\n${pass} passed, ${fail} failed${skip ? `, ${skip} skipped` : ''}`);
  process.exit(code === 0 && fail === 0 ? 0 : 1);
});
