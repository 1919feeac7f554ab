// The interop lab's network: namespaces joined by veth pairs, processes run inside them, and the bookkeeping that
// removes every namespace, daemon and temp dir this process made (at teardown, at exit and on SIGTERM/SIGINT).
// Nothing here touches the host's own network namespace.
//
// ## Links
//   const link = await createLink({ name: 'bg', t });
// Creates namespaces `bs-bg-<pid>` (the peer side) and `bs-bg-<pid>-us` (our side: where our speaker runs), a
// veth pair between them, addresses 10.255.<n>.1/30 + fd00:255:<n>::1/64 on our side and .2 / ::2 on the peer
// side (n is per process, 1..250), IPv6 DAD off (addresses usable at once), loopbacks up; it waits until both ends
// are up. `link.local` / `link.peer` are the two `Side`s: { ns, ifname, v4, v6, v4cidr, v6cidr }.
// `createLink({ name, local: otherLink.local.ns })` hangs another peer namespace off an existing "our side"
// namespace (one speaker, several peers); the addresses use the new link's own n. With `t` the link (namespaces,
// daemons, temp dirs) is torn down at t's teardown; `link.destroy()` does it by hand; `cleanupAll()` destroys
// everything this process created, and an exit/SIGTERM/SIGINT hook does the same synchronously.
//
// ## Running our own speaker
//   const child = runInNetns(link.local.ns, process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...], opts);
//   const child = runNodeInNetns(link.local.ns, 'bin/blockspeaker.js', ['run', '-c', file], { logFile });
// spawn(`ip netns exec <ns> cmd ...args`); the child has the pid of the process itself (ip execs it), is tracked
// and SIGKILLed at cleanup if still alive. `execInNetns(ns, cmd, args)` runs a command to completion.
import { spawn, execFile, execFileSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { promisify } from 'node:util';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BIN } from './prereqs.ts';
import { waitFor } from './wait-for.ts';

const execFileP = promisify(execFile);

export interface Side {
  ns: Netns;
  ifname: string;
  v4: string;
  v6: string;
  v4cidr: string;
  v6cidr: string;
}

export interface Link {
  name: string;
  n: number;
  local: Side;
  peer: Side;
  destroy(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// Process bookkeeping and cleanup

const NS_PREFIX = 'bs-';
/** Temp dirs of peers start with this (and the pid), so leftovers of dead runs can be found. */
export const TMP_PREFIX = 'bs-interop-';
/** What this process made; removed by cleanupAll and the exit hooks. */
export const registry = {
  netns: new Set<Netns>(),
  procs: new Set<ChildProcess>(),
  dirs: new Set<string>(),
  links: new Set<Link>(),
};
let hooksInstalled = false;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => cleanupAllSync());
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      cleanupAllSync();
      process.exit(sig === 'SIGTERM' ? 143 : 130);
    });
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // a recycled pid that is not a node process does not keep leftovers alive
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('node');
  } catch {
    return false;
  }
}

function nsPids(ns: string): number[] {
  try {
    return execFileSync(BIN.ip, ['netns', 'pids', ns], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split(/\s+/).filter(Boolean).map(Number).filter((p) => p > 1 && p !== process.pid);
  } catch {
    return [];
  }
}

/** true when the pid is gone or a zombie. */
function pidDead(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return true;
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** SIGKILLs the pids and waits (up to 2 s) until they are gone. */
function killPids(pids: number[]): void {
  for (const p of pids) {
    try { process.kill(p, 'SIGKILL'); } catch { /* gone */ }
  }
  const until = Date.now() + 2000;
  while (pids.some((p) => !pidDead(p)) && Date.now() < until) sleepSync(20);
}

function deleteNsSync(ns: string): void {
  killPids(nsPids(ns));
  try {
    execFileSync(BIN.ip, ['netns', 'del', ns], { stdio: 'ignore' });
  } catch { /* already gone */ }
}

/** Removes namespaces and temp dirs left by earlier runs whose process is dead. Safe with concurrent runs. */
export function cleanupLeftovers(): string[] {
  const removed: string[] = [];
  let names: string[] = [];
  try { names = fs.readdirSync('/run/netns'); } catch { /* none */ }
  for (const name of names) {
    const m = /^bs-.+-(\d+)(?:-us)?$/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || pidAlive(pid)) continue;
    deleteNsSync(name);
    removed.push(name);
  }
  const tmp = os.tmpdir();
  for (const name of fs.readdirSync(tmp)) {
    const m = /^bs-interop-(\d+)-/.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || pidAlive(pid)) continue;
    removeFrrDebris(path.join(tmp, name));
    fs.rmSync(path.join(tmp, name), { recursive: true, force: true });
    removed.push(path.join(tmp, name));
  }
  return removed;
}

/**
 * FRR daemons that die by SIGKILL leave /var/tmp/frr/<daemon>.<pid>/ (crash-log buffers) behind; the pids are in
 * the pid files of our peer dir.
 */
function removeFrrDebris(peerDir: string): void {
  for (const d of ['zebra', 'bgpd', 'bfdd']) {
    let pid = '';
    try { pid = fs.readFileSync(path.join(peerDir, 'frr', `${d}.pid`), 'utf8').trim(); } catch { continue; }
    if (/^\d+$/.test(pid) && pidDead(Number(pid))) fs.rmSync(`/var/tmp/frr/${d}.${pid}`, { recursive: true, force: true });
  }
}

function cleanupAllSync(): void {
  for (const p of registry.procs) {
    if (p.exitCode === null && p.signalCode === null && p.pid) {
      try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ }
    }
  }
  registry.procs.clear();
  for (const ns of registry.netns) deleteNsSync(ns.name);
  registry.netns.clear();
  for (const d of registry.dirs) {
    removeFrrDebris(d);
    if (!keepDirs()) fs.rmSync(d, { recursive: true, force: true });
  }
  registry.dirs.clear();
  registry.links.clear();
}

const keepDirs = (): boolean => process.env.KEEP_INTEROP === '1';

/** Destroys every link, namespace, daemon and temp dir this process created. */
export async function cleanupAll(): Promise<void> {
  for (const l of [...registry.links]) await l.destroy();
  cleanupAllSync();
}

// ---------------------------------------------------------------------------------------------------------------
// Command helpers

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function exec(cmd: string, args: string[], opts: { timeoutMs?: number; check?: boolean } = {}): Promise<ExecResult> {
  try {
    const { stdout, stderr } = await execFileP(cmd, args, {
      timeout: opts.timeoutMs ?? 15_000,
      maxBuffer: 1 << 30,
      encoding: 'utf8',
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stdout?: string; stderr?: string; code?: number | string };
    const res = { code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? String(err.message) };
    if (opts.check !== false) {
      throw new Error(`${cmd} ${args.join(' ')} failed (${err.code}): ${(res.stderr || res.stdout).trim()}`);
    }
    return res;
  }
}

async function run(cmd: string, args: string[], timeoutMs?: number): Promise<string> {
  return (await exec(cmd, args, { timeoutMs })).stdout;
}

// ---------------------------------------------------------------------------------------------------------------
// Network namespaces

export class Netns {
  constructor(readonly name: string) {}

  /** Runs a command inside the namespace to completion; throws on a non-zero exit unless check is false. */
  exec(cmd: string, args: string[] = [], opts: { timeoutMs?: number; check?: boolean } = {}): Promise<ExecResult> {
    return exec(BIN.ip, ['netns', 'exec', this.name, cmd, ...args], opts);
  }

  /** Spawns a long-running process inside the namespace (tracked, SIGKILLed at cleanup). */
  spawn(cmd: string, args: string[] = [], opts: SpawnOptions & { logFile?: string } = {}): ChildProcess {
    return runInNetns(this, cmd, args, opts);
  }

  pids(): number[] {
    return nsPids(this.name);
  }

  async destroy(): Promise<void> {
    deleteNsSync(this.name);
    registry.netns.delete(this);
  }
}

/** Creates (or re-creates, when a stale one of the same name exists) a namespace with lo up and DAD off. */
export async function createNetns(name: string): Promise<Netns> {
  installExitHooks();
  if (fs.existsSync(`/run/netns/${name}`)) deleteNsSync(name);
  await run(BIN.ip, ['netns', 'add', name]);
  const ns = new Netns(name);
  registry.netns.add(ns);
  // DAD off before any interface appears, so link-local and global v6 addresses are usable at once.
  await ns.exec('/bin/sh', ['-c', [
    'echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad',
    'echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad',
    'echo 0 > /proc/sys/net/ipv6/conf/default/disable_ipv6',
  ].join('; ')]);
  await run(BIN.ip, ['-n', name, 'link', 'set', 'lo', 'up']);
  return ns;
}

/**
 * Spawns cmd inside the namespace via `ip netns exec` (which execs, so child.pid is the process itself).
 * With logFile, stdout and stderr are appended to it (the default is to inherit nothing: 'ignore').
 */
export function runInNetns(ns: Netns | string, cmd: string, args: string[] = [],
  opts: SpawnOptions & { logFile?: string } = {}): ChildProcess {
  installExitHooks();
  const name = typeof ns === 'string' ? ns : ns.name;
  const { logFile, ...spawnOpts } = opts;
  let stdio = spawnOpts.stdio;
  let fd: number | undefined;
  if (logFile) {
    fd = fs.openSync(logFile, 'a');
    stdio = ['ignore', fd, fd];
  }
  const child = spawn(BIN.ip, ['netns', 'exec', name, cmd, ...args], { ...spawnOpts, stdio: stdio ?? 'ignore' });
  if (fd !== undefined) fs.closeSync(fd);
  registry.procs.add(child);
  child.once('exit', () => registry.procs.delete(child));
  child.once('error', () => registry.procs.delete(child));
  return child;
}

/** runInNetns for a node script, with tsx loaded so .ts entry points work. */
export function runNodeInNetns(ns: Netns | string, script: string, args: string[] = [],
  opts: SpawnOptions & { logFile?: string } = {}): ChildProcess {
  return runInNetns(ns, process.execPath, ['--import', 'tsx', script, ...args], opts);
}

export function execInNetns(ns: Netns | string, cmd: string, args: string[] = [],
  opts: { timeoutMs?: number; check?: boolean } = {}): Promise<ExecResult> {
  return new Netns(typeof ns === 'string' ? ns : ns.name).exec(cmd, args, opts);
}

let linkCounter = 0;

export async function createLink(opts: { name: string; local?: Netns; t?: { teardown(fn: () => unknown): unknown } }): Promise<Link> {
  if (!/^[a-z0-9][a-z0-9-]{0,30}$/i.test(opts.name)) throw new Error(`link name ${JSON.stringify(opts.name)}: use [a-z0-9-], at most 31`);
  const n = ++linkCounter;
  if (n > 250) throw new Error('createLink: more than 250 links in one process');
  const peerNs = await createNetns(`${NS_PREFIX}${opts.name}-${process.pid}`);
  const ownLocal = !opts.local;
  let localNs: Netns;
  try {
    localNs = opts.local ?? await createNetns(`${NS_PREFIX}${opts.name}-${process.pid}-us`);
  } catch (e) {
    await peerNs.destroy();
    throw e;
  }
  const local: Side = {
    ns: localNs, ifname: `bs${n}l`, v4: `10.255.${n}.1`, v6: `fd00:255:${n}::1`,
    v4cidr: `10.255.${n}.1/30`, v6cidr: `fd00:255:${n}::1/64`,
  };
  const peer: Side = {
    ns: peerNs, ifname: `bs${n}p`, v4: `10.255.${n}.2`, v6: `fd00:255:${n}::2`,
    v4cidr: `10.255.${n}.2/30`, v6cidr: `fd00:255:${n}::2/64`,
  };
  // The peers started on this link (startPeer adds them): killed when the link goes.
  const peers = new Set<{ dispose(): Promise<void> }>();
  let destroyed = false;
  const link: Link & { peers: typeof peers } = {
    name: opts.name, n, local, peer, peers,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      registry.links.delete(link);
      for (const p of peers) await p.dispose();
      await peerNs.destroy();
      if (ownLocal) await localNs.destroy();
      else {
        // only our veth end and the daemons of this link; the shared namespace stays
        await exec(BIN.ip, ['-n', localNs.name, 'link', 'del', local.ifname], { check: false });
      }
    },
  };
  registry.links.add(link);
  opts.t?.teardown(() => link.destroy());
  try {
    // Both ends are created straight inside their namespaces, so nothing ever appears in the host namespace and
    // interface names cannot clash with other processes.
    await run(BIN.ip, ['link', 'add', local.ifname, 'netns', localNs.name, 'type', 'veth',
      'peer', 'name', peer.ifname, 'netns', peerNs.name]);
    for (const s of [local, peer]) {
      await run(BIN.ip, ['-n', s.ns.name, 'addr', 'add', s.v4cidr, 'dev', s.ifname]);
      await run(BIN.ip, ['-n', s.ns.name, 'addr', 'add', s.v6cidr, 'dev', s.ifname, 'nodad']);
      await run(BIN.ip, ['-n', s.ns.name, 'link', 'set', s.ifname, 'up']);
    }
    await waitFor(async () => (await sideReady(local)) && (await sideReady(peer)),
      { what: `link ${opts.name}: veth up with usable IPv4/IPv6 addresses`, timeoutMs: 5000, intervalMs: 50 });
  } catch (e) {
    await link.destroy();
    throw e;
  }
  return link;
}

async function sideReady(s: Side): Promise<boolean> {
  const out = await run(BIN.ip, ['-j', '-n', s.ns.name, 'addr', 'show', 'dev', s.ifname]);
  const [info] = JSON.parse(out) as { operstate?: string; flags?: string[]; addr_info?: { local: string; family: string; tentative?: boolean; dadfailed?: boolean }[] }[];
  if (!info || !info.flags?.includes('LOWER_UP')) return false;
  const addrs = info.addr_info ?? [];
  if (addrs.some((a) => a.tentative || a.dadfailed)) return false;
  return addrs.some((a) => a.local === s.v4) && addrs.some((a) => a.local === s.v6);
}
