// Run the blockspeaker command as a user would: a child process with arguments and stdin, collecting its output.
import { spawn } from 'node:child_process';

export const blockspeakerBin = new URL('../../bin/blockspeaker.js', import.meta.url).pathname;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], stdin: string | Buffer = ''): Promise<CliResult> {
  return runChild(process.execPath, [blockspeakerBin, ...args], { stdin });
}

/**
 * Run any command as a child process with stdin, collecting its output. Asynchronous, so a daemon or IPC server in
 * the test's own process keeps answering meanwhile.
 */
export function runChild(file: string, args: string[], opts: { env?: NodeJS.ProcessEnv; stdin?: string | Buffer } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.stdin.on('error', () => undefined); // EPIPE when the command exits without reading stdin
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.stdin ?? '');
  });
}
