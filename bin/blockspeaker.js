#!/usr/bin/env node
// Entry point. Runs the compiled CLI when `npm run build` has produced it, else the TypeScript sources via tsx.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
if (existsSync(compiled)) {
  await import(compiled);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
