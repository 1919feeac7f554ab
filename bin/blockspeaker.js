#!/usr/bin/env node
// Entry point. Runs the compiled CLI when `npm run build` has produced it, else the TypeScript sources via tsx;
// BLOCKSPEAKER_FROM_SOURCE=1 forces the sources.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// import() takes a URL: a plain absolute path breaks on Windows (drive letter read as a URL scheme).
const compiledUrl = new URL('../dist/src/cli/main.js', import.meta.url);
const compiled = fileURLToPath(compiledUrl);
if (process.env.BLOCKSPEAKER_FROM_SOURCE !== '1' && existsSync(compiled)) {
  await import(compiledUrl.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
