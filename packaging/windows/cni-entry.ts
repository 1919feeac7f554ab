// blockspeaker-cni.exe's script: src/cni/main.ts without its top-level await, which a single executable's
// CommonJS script cannot have. Same contract: env + stdin in, CNI result or error object on stdout, exit code.
import { readFileSync } from 'node:fs';
import { runCni } from '../../src/cni/plugin.ts';

function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return ''; // no stdin at all (VERSION from a terminal): the plugin reports what it needs
  }
}

void runCni({ env: process.env, stdin: readStdin() }).then((out) => {
  if (out.stdout) process.stdout.write(out.stdout.endsWith('\n') ? out.stdout : `${out.stdout}\n`);
  process.exit(out.exitCode);
});
