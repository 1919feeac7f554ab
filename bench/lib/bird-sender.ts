// BIRD as the sender of the BGP ingest benches (bench/bgp-ingest.ts, bench/bgp-peers.ts, bench/bgp-idle-sessions.ts):
// started in a namespace with a generated config and waited for until it has loaded its routes, then driven and read
// through birdc (`show protocols` sessions with BIRD's own ms timestamps, "Routes: N imported").
import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { runInNetns, type Link } from '../../test/kit/interop/netns.ts';
import { now, sleep } from './daemon-bench.ts';

const execFileP = promisify(execFile);
const BIRDC = '/usr/sbin/birdc';

export async function birdc(ctl: string, args: string[]): Promise<string> {
  const { stdout } = await execFileP(BIRDC, ['-s', ctl, ...args], { timeout: 30_000, maxBuffer: 64 << 20, encoding: 'utf8' });
  return stdout;
}

export interface Sender {
  ctl: string;
  pid: number;
  child: ChildProcess;
  dir: string;
}

export async function startBird(ns: Link['local']['ns'], dir: string, conf: string, ready: (ctl: string) => Promise<boolean>, what: string): Promise<Sender> {
  writeFileSync(join(dir, 'bird.conf'), conf);
  const ctl = join(dir, 'bird.ctl');
  const child = runInNetns(ns, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctl, '-P', join(dir, 'bird.pid')],
    { logFile: join(dir, 'bird.out') });
  const until = now() + 180_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what}: bird exited: ${readFileSync(join(dir, 'bird.out'), 'utf8').slice(-2000)}`);
    }
    try {
      if (existsSync(ctl) && (await ready(ctl))) break;
    } catch { /* not up yet */ }
    if (now() > until) throw new Error(`${what}: not ready after 180 s`);
    await sleep(100);
  }
  return { ctl, pid: child.pid!, child, dir };
}

/** Sum of "Routes: N imported" over the protocol's channels in `birdc show protocols all NAME`. */
export function importedRoutes(text: string): number {
  let n = 0;
  for (const m of text.matchAll(/Routes:\s+(\d+) imported/g)) n += Number(m[1]);
  return n;
}

/** BGP protocols in `birdc show protocols`: state and since (ms since the epoch, BIRD's `iso long ms`). */
export function birdSessions(text: string): Map<string, { established: boolean; since: number }> {
  const out = new Map<string, { established: boolean; since: number }>();
  for (const m of text.matchAll(/^(\S+)\s+BGP\s+\S+\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\s*(\S*)/gm)) {
    out.set(m[1], { established: m[2] === 'up' && m[4] === 'Established', since: new Date(m[3].replace(' ', 'T')).getTime() });
  }
  return out;
}
