// Entry point of the blockspeaker-cni executable: env + stdin in, result or error object out, exit code.
import { readFileSync } from 'node:fs';
import { runCni } from './plugin.ts';

function readStdin(): string {
  if (process.stdin.isTTY) return '';
  try {
    return readFileSync(0, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EOF' || code === 'EBADF' || code === 'ENXIO') return '';
    throw e;
  }
}

const out = await runCni({ env: process.env, stdin: readStdin() });
if (out.stdout) process.stdout.write(out.stdout.endsWith('\n') ? out.stdout : `${out.stdout}\n`);
// Exit at once: the socket's goodbye needs no answer, and every millisecond is per pod.
process.exit(out.exitCode);
