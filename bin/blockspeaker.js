#!/usr/bin/env node
// Entry point. Runs the compiled CLI when `npm run build` has produced it, else the TypeScript sources via tsx;
// BLOCKSPEAKER_FROM_SOURCE=1 forces the sources.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
if (process.env.BLOCKSPEAKER_FROM_SOURCE !== '1' && existsSync(compiled)) {
  await import(compiled);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
