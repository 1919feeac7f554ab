// BIRD 2 processes for benches that run their own (not the interop harness's peers): start one in a namespace with a
// given config, raise its open-file limit, talk to it over a kept-open control socket (./birdctl.ts), and read
// `show protocols [all]` replies.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runInNetns } from '../../test/kit/interop/netns.ts';
import { BirdCtl } from './birdctl.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The soft limit on open files of a process (/proc/PID/limits); raised with prlimit to `need` when below it. */
export function ensureNofile(pid: number, need: number): { before: number; after: number } {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  const num = (s: string | undefined) => (s === undefined || s === 'unlimited' ? Infinity : Number(s));
  const soft = num(m?.[1]);
  const hard = num(m?.[2]);
  if (soft >= need) return { before: soft, after: soft };
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${need}:${Math.max(need, hard === Infinity ? need : hard)}`]);
  return { before: soft, after: need };
}

/** A reply of BirdCtl.cmd as birdc prints it: the 4-digit codes and continuation markers taken off. */
export function birdText(lines: string[]): string {
  return lines.map((l) => (/^\d{4}[ -]/.test(l) ? l.slice(5) : l.startsWith(' ') ? l.slice(1) : l)).join('\n');
}

export interface BirdProto {
  state: string;
  /** BGP: state up and Info "Established". */
  established: boolean;
  /** The last state change, ms since the epoch (needs `timeformat protocol iso long ms;`); NaN when not parsed. */
  since: number;
  /** Sum of "Routes: N imported" over the protocol's channels (`show protocols all` only). */
  imported: number;
}

/** `show protocols [all] [...]` (birdText'd): each protocol's state, since and imported routes. */
export function parseProtocols(text: string): Map<string, BirdProto> {
  const out = new Map<string, BirdProto>();
  let cur: BirdProto | null = null;
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s+(\S+)\s+\S+\s+(up|down|start|stop|flush)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s*(.*)$/.exec(line);
    if (m) {
      cur = { state: m[3], established: m[3] === 'up' && (m[2] !== 'BGP' || m[5].trim().startsWith('Established')), since: new Date(m[4].replace(' ', 'T')).getTime(), imported: 0 };
      out.set(m[1], cur);
      continue;
    }
    const r = cur && /^\s+Routes:\s+(\d+) imported/.exec(line);
    if (r) cur!.imported += Number(r[1]);
  }
  return out;
}

export interface BirdProcess {
  pid: number;
  child: ChildProcess;
  ctlPath: string;
  ctl: BirdCtl;
  /** One command, its reply as text; throws on BIRD's error replies (8xxx, 9xxx). */
  cmd(line: string): Promise<string>;
  /** The last lines of bird.out and the log file (when the config logs to DIR/bird.log). */
  logTail(n?: number): string;
  /** SIGKILL (or SIGTERM: BIRD then closes its sessions with a Cease) and wait for the exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * `bird -f -c DIR/bird.conf -s DIR/bird.ctl -P DIR/bird.pid` in namespace `ns` (tracked by the harness: killed at
 * cleanup, on error and on SIGINT). Ready once the control socket answers `show status` with "Daemon is up".
 * nofile: the open-file limit it needs (a socket per session, a listening socket per local address).
 */
export async function startBird(ns: string, dir: string, conf: string, what: string, opts: { nofile?: number; timeoutMs?: number } = {}): Promise<BirdProcess> {
  writeFileSync(join(dir, 'bird.conf'), conf);
  const ctlPath = join(dir, 'bird.ctl');
  const out = join(dir, 'bird.out');
  const child = runInNetns(ns, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctlPath, '-P', join(dir, 'bird.pid')], { logFile: out });
  const logTail = (n = 30) => [out, join(dir, 'bird.log')].filter(existsSync)
    .map((f) => `--- ${f}\n${readFileSync(f, 'utf8').split('\n').slice(-n).join('\n')}`).join('\n');
  if (opts.nofile && child.pid) ensureNofile(child.pid, opts.nofile);
  const until = Date.now() + (opts.timeoutMs ?? 120_000);
  let ctl: BirdCtl | null = null;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what}: bird exited:\n${logTail()}`);
    try {
      if (existsSync(ctlPath)) {
        ctl ??= await BirdCtl.connect(ctlPath);
        if (birdText(await ctl.cmd('show status')).includes('Daemon is up')) break;
      }
    } catch {
      ctl?.close();
      ctl = null;
    }
    if (Date.now() > until) throw new Error(`${what}: not ready after ${(opts.timeoutMs ?? 120_000) / 1000} s:\n${logTail()}`);
    await sleep(100);
  }
  const c = ctl;
  return {
    pid: child.pid!, child, ctlPath, ctl: c, logTail,
    async cmd(line) {
      const lines = await c.cmd(line);
      const last = lines.at(-1) ?? '';
      if (/^[89]\d{3} /.test(last)) throw new Error(`${what}: bird: ${line}: ${last.slice(5)}`);
      return birdText(lines);
    },
    async stop(signal = 'SIGKILL') {
      c.close();
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
