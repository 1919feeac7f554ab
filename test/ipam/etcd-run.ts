// Shared by the etcd fault tests: run allocating children (etcd-alloc.child.ts), read what they promised, and
// check the store against it afterwards.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Ipam } from '../../src/ipam/ipam.ts';
import { checkInvariants } from './invariants.ts';

const child = join(import.meta.dirname, 'etcd-alloc.child.ts');

export interface ChildRun {
  host: string;
  proc: ChildProcess;
  lines: string[];
  /** Outcome lines so far (ACK/ERR/DEL/REL/RERR). */
  acks(): number;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
  killed: boolean;
}

/** Start a child allocating `count` addresses for `host` with `inFlight` concurrent requests. */
export function startChild(spec: string, host: string, count: number, inFlight = 4, releaseEvery = 0): ChildRun {
  const proc = spawn(process.execPath, ['--import', 'tsx', child, spec, host, String(count), String(inFlight), String(releaseEvery)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const run: ChildRun = {
    host,
    proc,
    lines: [],
    killed: false,
    acks: () => run.lines.filter((l) => l.startsWith('ACK ')).length,
    done: undefined as never,
  };
  let buf = '';
  let stderr = '';
  proc.stdout!.on('data', (d) => {
    buf += d;
    const parts = buf.split('\n');
    buf = parts.pop()!;
    run.lines.push(...parts.filter(Boolean));
  });
  proc.stderr!.on('data', (d) => (stderr += d));
  run.done = new Promise((resolve) =>
    proc.on('close', (code, signal) => {
      if (buf) run.lines.push(buf);
      resolve({ code, signal, stderr });
    }),
  );
  return run;
}

/** Wait until `cond` holds (polling), or throw after `ms`. */
export async function waitFor(what: string, cond: () => boolean, ms = 60000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function kill9(run: ChildRun): void {
  run.killed = true;
  run.proc.kill('SIGKILL');
}

/** An error line is clear when it says which layer failed and why. */
const CLEAR = /^(StoreError: etcd:\/\/\S+ .*(unreachable|outcome unknown|closed)|IpamError: |exhausted: )/;

export interface Verdict {
  acked: number;
  errors: string[];
  unclear: string[];
  lost: string[];
  duplicated: string[];
  unexplained: string[];
  /** Releases acknowledged whose addresses are still held. */
  unreleased: string[];
  held: number;
}

/**
 * Compare the store with what the children said. Nothing acknowledged (and not released since) may be missing,
 * no handle may hold two addresses, and an address held by a child that finished must have been acknowledged or
 * reported as "outcome unknown". Children that were killed may leave behind what they had in flight.
 */
export async function verify(ipam: Ipam, runs: ChildRun[], hostsOs: Map<string, string>): Promise<Verdict> {
  const expected = new Map<string, string>();
  const errors: string[] = [];
  const unknownOk = new Set<string>();
  const releasing = new Set<string>();
  const released = new Set<string>();
  for (const r of runs) {
    for (const l of r.lines) {
      const [kind, handle, ...rest] = l.split(' ');
      if (kind === 'ACK') expected.set(handle, rest[0]);
      else if (kind === 'DEL') {
        expected.delete(handle);
        releasing.add(handle);
      } else if (kind === 'REL') released.add(handle);
      else if (kind === 'ERR' || kind === 'RERR') {
        const msg = rest.join(' ');
        errors.push(`${r.host} ${kind} ${handle}: ${msg}`);
        if (/outcome unknown/.test(msg) || kind === 'RERR') unknownOk.add(handle);
      }
    }
  }
  const held = await checkInvariants(ipam, undefined, hostsOs, { allowPending: true });
  const byHandle = new Map<string, string[]>();
  for (const [ip, h] of held) if (h.handle) byHandle.set(h.handle, [...(byHandle.get(h.handle) ?? []), ip]);
  const lost = [...expected].filter(([handle, ip]) => !byHandle.get(handle)?.includes(ip)).map(([h, ip]) => `${h} ${ip}`);
  const duplicated = [...byHandle].filter(([, ips]) => ips.length > 1).map(([h, ips]) => `${h} ${ips.join(',')}`);
  const killedTags = runs.filter((r) => r.killed).map((r) => `${r.host}-${r.proc.pid}-`);
  const unexplained = [...byHandle.keys()].filter(
    (h) => !expected.has(h) && !unknownOk.has(h) && !releasing.has(h) && !killedTags.some((tag) => h.startsWith(tag)),
  );
  const unreleased = [...released].filter((h) => byHandle.has(h));
  return {
    acked: expected.size,
    unreleased,
    errors,
    unclear: errors.filter((e) => !CLEAR.test(e.replace(/^\S+ \S+ \S+: /, ''))),
    lost,
    duplicated,
    unexplained,
    held: held.size,
  };
}
