// Run a CNI plugin as a runtime does: env and stdin in, stdout and exit code out (stderr passed through).
import { spawn } from 'node:child_process';

export function execPlugin(bin: string, env: Record<string, string>, stdin: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.stdin.on('error', () => undefined);
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(stdin);
  });
}
