/**
 * Interop harness: real BGP peers (BIRD 2, GoBGP, FRR) in network namespaces joined by veth pairs.
 *
 * Needs root, iproute2 and the Debian packages bird2, gobgpd, frr. Nothing here touches the host's own network
 * namespace or the system's daemon instances: every daemon runs inside a namespace this module created, with its
 * config, control socket, pid file and logs in a private temp dir.
 *
 * ## Gate (skip or fail when the machine cannot run peers)
 *   const gate = interopGate(t, ['bird', 'gobgp']);   // false when usable, else a skip reason
 *   t.test('bird <-> gobgp', { skip: gate }, async (t) => { ... });
 * Without REQUIRE_PEERS=1 a missing package or not being root skips with the reason ("bird not found: apt-get
 * install bird2"); with REQUIRE_PEERS=1 (CI) it is a test failure. When usable, the gate also removes leftovers
 * of earlier crashed runs (namespaces `bs-*-<pid>` and temp dirs `bs-interop-<pid>-*` of dead pids) and registers
 * `cleanupAll()` on t.teardown. `missingPrereqs(kinds)` gives the raw list; `assertPrereqs(kinds)` throws it.
 *
 * ## Links
 *   const link = await createLink({ name: 'bg', t });
 * Creates namespaces `bs-bg-<pid>` (the peer side) and `bs-bg-<pid>-us` (our side: where our speaker runs), a
 * veth pair between them, addresses 10.255.<n>.1/30 + fd00:255:<n>::1/64 on our side and .2 / ::2 on the peer
 * side (n is per process, 1..250), IPv6 DAD off (addresses usable at once), loopbacks up; it waits until both ends
 * are up. `link.local` / `link.peer` are the two `Side`s: { ns, ifname, v4, v6, v4cidr, v6cidr }.
 * `createLink({ name, local: otherLink.local.ns })` hangs another peer namespace off an existing "our side"
 * namespace (one speaker, several peers); the addresses use the new link's own n. With `t` the link (namespaces,
 * daemons, temp dirs) is torn down at t's teardown; `link.destroy()` does it by hand; `cleanupAll()` destroys
 * everything this process created, and an exit/SIGTERM/SIGINT hook does the same synchronously.
 *
 * ## Peers
 *   const bird = await startPeer('bird', link, {
 *     asn: 65001,                         // routerId defaults to the side's IPv4 address
 *     neighbors: [{ address: link.local.v4, asn: 65000, families: ['ipv4'], passive?, holdTime?, port?,
 *                   gracefulRestart?: true | { restartTime } }],
 *     announce: ['10.1.0.0/24'],           // or { prefix, communities?, largeCommunities?, med? }
 *     side: 'peer',                        // default; 'local' runs it in link.local.ns
 *   });
 * kind is 'bird' | 'gobgp' | 'frr'. families default to the neighbour address's family. Every peer accepts
 * everything and exports everything it has (its announcements and, like a router, what it learned) to every
 * neighbour; eBGP policy gates (FRR's ebgp-requires-policy, BIRD's mandatory filters) are opened. Timers are made
 * test-friendly (connect retry 1-2 s, BIRD error wait 1-5 s, FRR MRAI 0).
 * A Peer has:
 *   state(addr)            -> 'Idle'|'Connect'|'Active'|'OpenSent'|'OpenConfirm'|'Established'|'Down'|'Unknown'
 *   neighbor(addr)         -> { state, lastError, raw }
 *   routes(family)         -> Route[] { prefix, nexthop, nexthops, asPath, origin, med, localPref, communities,
 *                             largeCommunities, from (neighbour address, null = originated here), best, stale }
 *   routeCount(family)     -> number of prefixes in the peer's table (cheap; for big tables)
 *   announce(prefix | spec), withdraw(prefix)   (kept across restart())
 *   stop() graceful (SIGTERM, Cease sent), kill() SIGKILL (FRR: bgpd only, zebra keeps running),
 *   restart({ gracefulRestart }) stop if running, then start again; gracefulRestart=true starts BIRD with -R and
 *                             gobgpd with -r (restarting-speaker R bit); FRR sets the R bit on every start anyway.
 *   With gracefulRestart on a neighbour, FRR also gets `preserve-fw-state` (F bit), else a helper flushes its
 *   routes when bgpd dies.
 *   logs(lines?)           -> tail of the daemon's logs; describe() -> logs plus the daemon's own status dump
 *   waitEstablished(addr, timeoutMs?), waitRoute(family, prefix, { from?, present?, timeoutMs? })
 *
 * ## Waiting
 *   await waitFor(() => bird.routes('ipv4').then(rs => rs.find(r => r.prefix === '10.2.0.0/24')),
 *                 { what: 'bird learns 10.2.0.0/24', timeoutMs: 10_000, peers: [bird, gobgp] });
 * Polls until fn returns a truthy value (exceptions count as "not yet") and returns it; on timeout it throws a
 * HarnessError: message = `what`, details (printed by tap as a YAML block) = the last value or error and each
 * listed peer's state dump and log tail. waitEstablished/waitRoute include their own peer.
 * Timing: a fresh session is up in ~1-2 s (BIRD/FRR/GoBGP all connect actively); after a drop GoBGP needs 5-10 s.
 * KEEP_INTEROP=1 keeps the temp dirs (configs, logs) after the run.
 *
 * ## Running our own speaker
 *   const child = runInNetns(link.local.ns, process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...], opts);
 *   const child = runNodeInNetns(link.local.ns, 'bin/blockspeaker.js', ['run', '-c', file], { logFile });
 * spawn(`ip netns exec <ns> cmd ...args`); the child has the pid of the process itself (ip execs it), is tracked
 * and SIGKILLed at cleanup if still alive. `execInNetns(ns, cmd, args)` runs a command to completion.
 *
 * Quirks worth knowing (found on Debian 12: bird 2.0.12, gobgpd 3.10, frr 8.4.4): see the per-kind sections below.
 */
import { spawn, execFile, execFileSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { promisify } from 'node:util';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ipaddr from 'ipaddr.js';

const execFileP = promisify(execFile);

// ---------------------------------------------------------------------------------------------------------------
// Types

export type PeerKind = 'bird' | 'gobgp' | 'frr';
export type Family = 'ipv4' | 'ipv6';
export type SessionState =
  | 'Idle' | 'Connect' | 'Active' | 'OpenSent' | 'OpenConfirm' | 'Established' | 'Down' | 'Unknown';

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

export interface NeighborOptions {
  address: string;
  asn: number;
  families?: Family[];
  /** only accept the neighbour's connections, never connect */
  passive?: boolean;
  /** proposed hold time (keepalive = hold/3); default: the daemon's (BIRD 240, GoBGP 90, FRR 180) */
  holdTime?: number;
  /** the neighbour's TCP port (where this peer connects to), e.g. when our speaker listens elsewhere than 179 */
  port?: number;
  gracefulRestart?: boolean | { restartTime?: number };
  /** TCP-MD5 password (BIRD `password`, FRR `neighbor X password`) */
  password?: string;
  /** GTSM: the neighbour is this many hops away (BIRD `ttl security on` + multihop, FRR `ttl-security hops N`) */
  ttlSecurity?: number;
  /** BFD with this neighbour (BIRD: protocol bfd + `bfd on`; FRR: bfdd + `neighbor X bfd profile`); ms, default 300 x 3 */
  bfd?: boolean | { minRx?: number; minTx?: number; multiplier?: number };
}

/** A neighbour's BFD parameters, null when it has none (test/interop/bfd.ts reads the sessions). */
export function bfdOf(n: NeighborOptions): { minRx: number; minTx: number; multiplier: number } | null {
  if (!n.bfd) return null;
  const o = n.bfd === true ? {} : n.bfd;
  return { minRx: o.minRx ?? 300, minTx: o.minTx ?? 300, multiplier: o.multiplier ?? 3 };
}

export interface Announcement {
  prefix: string;
  communities?: string[]; // 'a:b'
  largeCommunities?: string[]; // 'a:b:c'
  med?: number;
  /** GoBGP only: an AS_PATH for the route as originated (the peer's own AS is prepended on eBGP export). */
  asPath?: number[];
}

export interface PeerOptions {
  asn: number;
  routerId?: string;
  neighbors: NeighborOptions[];
  announce?: (string | Announcement)[];
  side?: 'peer' | 'local';
  name?: string;
}

export interface Route {
  prefix: string;
  nexthop: string | null;
  nexthops: string[];
  asPath: number[];
  origin: 'igp' | 'egp' | 'incomplete' | null;
  med: number | null;
  localPref: number | null;
  communities: string[];
  largeCommunities: string[];
  /** neighbour address it was learned from; null when originated by this peer */
  from: string | null;
  best: boolean;
  stale: boolean;
}

export interface NeighborStatus {
  state: SessionState;
  lastError: string | null;
  raw: unknown;
}

export interface Peer {
  readonly kind: PeerKind;
  readonly name: string;
  readonly ns: Netns;
  readonly dir: string;
  readonly options: PeerOptions;
  readonly running: boolean;
  state(neighbor: string): Promise<SessionState>;
  neighbor(neighbor: string): Promise<NeighborStatus>;
  routes(family: Family): Promise<Route[]>;
  routeCount(family: Family): Promise<number>;
  announce(a: string | Announcement): Promise<void>;
  withdraw(prefix: string): Promise<void>;
  stop(): Promise<void>;
  kill(): Promise<void>;
  restart(opts?: { gracefulRestart?: boolean }): Promise<void>;
  logs(lines?: number): string;
  describe(): Promise<string>;
  waitEstablished(neighbor: string, timeoutMs?: number): Promise<void>;
  waitRoute(family: Family, prefix: string, opts?: { from?: string | null; present?: boolean; timeoutMs?: number }):
    Promise<Route | undefined>;
}

// ---------------------------------------------------------------------------------------------------------------
// Prerequisites

const BIN = {
  ip: '/usr/sbin/ip',
  bird: '/usr/sbin/bird',
  birdc: '/usr/sbin/birdc',
  gobgpd: '/usr/bin/gobgpd',
  gobgp: '/usr/bin/gobgp',
  zebra: '/usr/lib/frr/zebra',
  bgpd: '/usr/lib/frr/bgpd',
  bfdd: '/usr/lib/frr/bfdd',
  vtysh: '/usr/bin/vtysh',
};

function findBin(name: string, fallback: string): string | null {
  if (fs.existsSync(fallback)) return fallback;
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin', '/usr/bin'])) {
    const p = path.join(dir, name);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

/** Human-readable list of what is missing to run the given peer kinds; empty when all is there. */
export function missingPrereqs(kinds: PeerKind[] = []): string[] {
  const missing: string[] = [];
  if (process.platform !== 'linux') return [`network namespaces need Linux (this is ${process.platform})`];
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    missing.push('not root: network namespaces and BGP port 179 need root (run the interop tests as root)');
  }
  const need = (name: keyof typeof BIN, pkg: string) => {
    const found = findBin(path.basename(BIN[name]), BIN[name]);
    if (found) BIN[name] = found;
    else missing.push(`${path.basename(BIN[name])} not found: apt-get install ${pkg}`);
  };
  need('ip', 'iproute2');
  const set = new Set(kinds);
  if (set.has('bird')) { need('bird', 'bird2'); need('birdc', 'bird2'); }
  if (set.has('gobgp')) { need('gobgpd', 'gobgpd'); need('gobgp', 'gobgpd'); }
  if (set.has('frr')) {
    need('zebra', 'frr'); need('bgpd', 'frr'); need('vtysh', 'frr'); need('bfdd', 'frr');
    if (!missing.some((m) => m.includes('frr')) && frrUser() === null) missing.push('user frr not found: apt-get install frr');
  }
  return missing;
}

export function assertPrereqs(kinds: PeerKind[] = []): void {
  const missing = missingPrereqs(kinds);
  if (missing.length) throw new Error(`interop harness cannot run: ${missing.join('; ')}`);
}

export const requirePeers = (): boolean => process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true';

interface GateTest {
  fail(message: string): unknown;
  teardown(fn: () => unknown): unknown;
  comment(...args: unknown[]): unknown;
}

/**
 * false when the peers can run (and then leftovers are cleaned and cleanupAll is registered on t.teardown), else
 * the skip reason. With REQUIRE_PEERS=1 a missing prerequisite is also reported as a failure on t.
 */
export function interopGate(t: GateTest, kinds: PeerKind[]): false | string {
  const d = gateDecision(missingPrereqs(kinds));
  if (d.fail) t.fail(`${d.skip} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else if (d.skip) t.comment(`skipping: ${d.skip} (set REQUIRE_PEERS=1 to make this a failure)`);
  if (d.skip) return d.skip;
  cleanupLeftovers();
  t.teardown(() => cleanupAll());
  return false;
}

/** The gate's decision for a list of missing prerequisites: skip reason (or false) and whether it is a failure. */
export function gateDecision(missing: string[], required = requirePeers()): { skip: false | string; fail: boolean } {
  if (!missing.length) return { skip: false, fail: false };
  return { skip: `interop peers unavailable: ${missing.join('; ')}`, fail: required };
}

// ---------------------------------------------------------------------------------------------------------------
// Process bookkeeping and cleanup

const NS_PREFIX = 'bs-';
const TMP_PREFIX = 'bs-interop-';
const registry = {
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

async function exec(cmd: string, args: string[], opts: { timeoutMs?: number; check?: boolean } = {}): Promise<ExecResult> {
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

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
  const peers = new Set<Peer>();
  let destroyed = false;
  const link: Link & { peers: Set<Peer> } = {
    name: opts.name, n, local, peer, peers,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      registry.links.delete(link);
      for (const p of peers) await (p as BasePeer).dispose();
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

// ---------------------------------------------------------------------------------------------------------------
// waitFor

/**
 * An error with a one-line message and multi-line details (peer state, logs). tap prints `details` as a YAML block
 * under the failure; String(err) / err.stack include them too.
 */
export class HarnessError extends Error {
  constructor(message: string, readonly details: string) {
    super(message);
    this.name = 'HarnessError';
    this.stack = `${this.name}: ${message}\n${details}\n${(this.stack ?? '').split('\n').slice(1).join('\n')}`;
  }
  override toString(): string {
    return `${this.name}: ${this.message}\n${this.details}`;
  }
}

export interface WaitOptions {
  what: string;
  timeoutMs?: number;
  intervalMs?: number;
  peers?: Peer[];
}

/** Polls fn until it returns a truthy value; throws a descriptive error (with peers' state and logs) on timeout. */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitOptions): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const interval = opts.intervalMs ?? 200;
  const start = Date.now();
  let last: unknown;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
      last = v;
      lastErr = undefined;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() - start >= timeoutMs) break;
    await sleep(interval);
  }
  const head = `timed out after ${Date.now() - start} ms waiting for: ${opts.what}`;
  const parts: string[] = [];
  if (lastErr !== undefined) parts.push(`last error: ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`);
  else parts.push(`last value: ${truncate(safeJson(last), 2000)}`);
  for (const p of opts.peers ?? []) {
    let d: string;
    try { d = await p.describe(); } catch (e) { d = `(describe failed: ${(e as Error).message})`; }
    parts.push(`----- ${p.kind} ${p.name} (${p.ns.name}) -----\n${d}`);
  }
  throw new HarnessError(head, parts.join('\n'));
}

function safeJson(v: unknown): string {
  try { return JSON.stringify(v) ?? String(v); } catch { return String(v); }
}
function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}... (${s.length - n} more chars)` : s;
}

// ---------------------------------------------------------------------------------------------------------------
// Normalisation helpers

function familyOf(addr: string): Family {
  return addr.includes(':') ? 'ipv6' : 'ipv4';
}

/** Canonical text of a prefix (RFC 5952 for IPv6), so daemons' spellings compare equal. */
export function canonPrefix(p: string): string {
  try {
    const [addr, len] = ipaddr.parseCIDR(p);
    return `${addr.toString()}/${len}`;
  } catch {
    return p;
  }
}
function canonAddr(a: string): string {
  try { return ipaddr.parse(a).toString(); } catch { return a; }
}
function isUnspecified(a: string): boolean {
  return a === '0.0.0.0' || a === '::' || a === '';
}
function normAnnouncement(a: string | Announcement): Announcement {
  const ann = typeof a === 'string' ? { prefix: a } : { ...a };
  ann.prefix = canonPrefix(ann.prefix);
  return ann;
}
function neighborFamilies(n: NeighborOptions): Family[] {
  return n.families ?? [familyOf(n.address)];
}
function grTime(n: NeighborOptions): number | undefined {
  return typeof n.gracefulRestart === 'object' ? n.gracefulRestart.restartTime : undefined;
}
function keepaliveFor(hold: number): number {
  return hold === 0 ? 0 : Math.max(1, Math.floor(hold / 3));
}
function tailLines(s: string, n: number): string {
  const lines = s.split('\n');
  return lines.length > n ? `... (${lines.length - n} earlier lines)\n${lines.slice(-n).join('\n')}` : s;
}

function frrUser(): { uid: number; gid: number } | null {
  try {
    const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('frr:'));
    if (!line) return null;
    const f = line.split(':');
    return { uid: Number(f[2]), gid: Number(f[3]) };
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Peers

let peerCounter = 0;

export async function startPeer(kind: PeerKind, link: Link, opts: PeerOptions): Promise<Peer> {
  assertPrereqs([kind]);
  const side = opts.side === 'local' ? link.local : link.peer;
  const name = opts.name ?? `${kind}${++peerCounter}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}${process.pid}-${name}-`));
  registry.dirs.add(dir);
  fs.chmodSync(dir, 0o755); // FRR's daemons run as user frr and must reach DIR/frr
  const full: PeerOptions = {
    ...opts,
    routerId: opts.routerId ?? side.v4,
    announce: (opts.announce ?? []).map(normAnnouncement),
  };
  const Ctor = kind === 'bird' ? BirdPeer : kind === 'gobgp' ? GobgpPeer : FrrPeer;
  const peer = new Ctor(name, side.ns, dir, full);
  (link as Link & { peers?: Set<Peer> }).peers?.add(peer);
  try {
    await peer.start();
  } catch (e) {
    const logs = peer.logs(40);
    await peer.dispose();
    throw new HarnessError(`starting ${kind} ${name} in ${side.ns.name} failed: ${(e as Error).message}`, logs);
  }
  return peer;
}

abstract class BasePeer implements Peer {
  abstract readonly kind: PeerKind;
  protected procs = new Map<string, ChildProcess>();
  protected announced = new Map<string, Announcement>();

  constructor(readonly name: string, readonly ns: Netns, readonly dir: string, readonly options: PeerOptions) {
    for (const a of options.announce ?? []) {
      const ann = normAnnouncement(a);
      this.announced.set(ann.prefix, ann);
    }
  }

  get running(): boolean {
    return [...this.procs.values()].some(alive);
  }

  /** Starts the daemon(s) and waits until they answer queries. */
  abstract start(recovery?: boolean): Promise<void>;
  abstract neighbor(addr: string): Promise<NeighborStatus>;
  abstract routes(family: Family): Promise<Route[]>;
  abstract routeCount(family: Family): Promise<number>;
  abstract announce(a: string | Announcement): Promise<void>;
  abstract withdraw(prefix: string): Promise<void>;
  protected abstract status(): Promise<string>;
  protected abstract logFiles(): string[];

  async state(addr: string): Promise<SessionState> {
    if (!this.running) return 'Down';
    return (await this.neighbor(addr)).state;
  }

  protected spawnDaemon(key: string, cmd: string, args: string[], logFile: string): ChildProcess {
    fs.appendFileSync(logFile, `\n=== ${new Date().toISOString()} ${cmd} ${args.join(' ')}\n`);
    const child = runInNetns(this.ns, cmd, args, { logFile });
    child.on('error', (e) => fs.appendFileSync(logFile, `spawn error: ${e.message}\n`));
    const pid = child.pid;
    child.once('exit', (code, sig) => {
      try { fs.appendFileSync(logFile, `=== ${new Date().toISOString()} ${path.basename(cmd)} exited (${code ?? sig})\n`); } catch { /* dir gone */ }
      this.afterExit(key, pid);
    });
    this.procs.set(key, child);
    return child;
  }

  protected async stopProc(key: string, signal: NodeJS.Signals, timeoutMs = 5000): Promise<void> {
    const child = this.procs.get(key);
    if (!child || !alive(child)) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(signal);
    const timer = sleep(timeoutMs).then(() => 'timeout' as const);
    if ((await Promise.race([exited, timer])) === 'timeout') {
      child.kill('SIGKILL');
      await exited;
    }
  }

  /** Hook to remove per-pid debris a daemon leaves behind. */
  protected afterExit(_key: string, _pid: number | undefined): void {}

  async stop(): Promise<void> {
    for (const key of [...this.procs.keys()].reverse()) await this.stopProc(key, 'SIGTERM');
  }

  async kill(): Promise<void> {
    for (const key of [...this.procs.keys()].reverse()) await this.stopProc(key, 'SIGKILL');
  }

  async restart(opts: { gracefulRestart?: boolean } = {}): Promise<void> {
    if (this.running) await this.stop();
    await this.start(opts.gracefulRestart ?? false);
  }

  /** Teardown: SIGKILL, no waiting for graceful shutdown. */
  async dispose(): Promise<void> {
    await this.kill();
  }

  logs(lines = 80): string {
    return this.logFiles().map((f) => {
      let text: string;
      try { text = fs.readFileSync(f, 'utf8'); } catch { text = '(no log yet)'; }
      return `--- ${path.basename(f)} ---\n${tailLines(text.trimEnd(), lines)}`;
    }).join('\n');
  }

  async describe(): Promise<string> {
    let st: string;
    try { st = this.running ? await this.status() : '(daemon not running)'; } catch (e) { st = `(status failed: ${(e as Error).message})`; }
    return `${st}\n${this.logs(40)}`;
  }

  async waitEstablished(addr: string, timeoutMs = 20_000): Promise<void> {
    await waitFor(async () => (await this.state(addr)) === 'Established',
      { what: `${this.kind} ${this.name}: session with ${addr} Established`, timeoutMs, peers: [this] });
  }

  async waitRoute(family: Family, prefix: string,
    opts: { from?: string | null; present?: boolean; timeoutMs?: number } = {}): Promise<Route | undefined> {
    const want = canonPrefix(prefix);
    const present = opts.present ?? true;
    const from = opts.from === undefined ? undefined : opts.from === null ? null : canonAddr(opts.from);
    const match = (r: Route) => r.prefix === want && (from === undefined || r.from === from);
    let found: Route | undefined;
    await waitFor(async () => {
      const rs = await this.routes(family);
      found = rs.find(match);
      return present ? !!found : !found;
    }, {
      what: `${this.kind} ${this.name}: route ${want}${from !== undefined ? ` from ${from}` : ''} ${present ? 'present' : 'gone'}`,
      timeoutMs: opts.timeoutMs ?? 20_000, peers: [this],
    });
    return found;
  }

  protected async waitReady(what: string, probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    const start = Date.now();
    for (;;) {
      const dead = [...this.procs.entries()].find(([, c]) => !alive(c));
      if (dead) {
        throw new Error(`${what}: ${dead[0]} exited (${dead[1].exitCode ?? dead[1].signalCode}) during startup`);
      }
      try { if (await probe()) return; } catch { /* not yet */ }
      if (Date.now() - start > timeoutMs) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
      await sleep(50);
    }
  }
}

function alive(c: ChildProcess): boolean {
  return c.exitCode === null && c.signalCode === null && c.pid !== undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// BIRD 2
//
// Command line: ip netns exec NS bird -f -c DIR/bird.conf -s DIR/bird.ctl -P DIR/bird.pid [-R]
//  - -f keeps it in the foreground (the child is the daemon); -s gives a private control socket, so birdc never
//    talks to a system instance: birdc -s DIR/bird.ctl <command> (no netns exec needed, it is a unix socket).
//  - bird 2 needs explicit import/export in every eBGP channel (else nothing passes); `protocol device` is needed
//    for interface/address discovery (direct eBGP checks the neighbour is on a connected network).
//  - defaults are slow for tests: connect delay 5 s, connect retry 120 s, error wait 60-300 s after any error.
//  - no `protocol kernel`: nothing is written to the namespace's kernel table.
//  - reconfiguration (announce/withdraw) is `birdc configure`: static routes are in the config.
//  - iBGP: gateway recursive (the default) needs IGP routes to resolve next hops; we use `gateway direct`.
//  - BIRD cannot have two protocols to the same neighbour address at once.
//  - a bgp_med set on a static route is not sent to eBGP neighbours (communities and large communities are).
//  - `show route` has no stale flag: routes of a protocol whose neighbour is in graceful restart ("Neighbor
//    graceful restart active" in `show protocols all`) are reported stale until its End-of-RIB.
//  - `bird -R` (restart({ gracefulRestart: true })) sets the R bit and holds back its own route selection until
//    the neighbours' End-of-RIBs (or `graceful restart wait`, 240 s) — the peer must send End-of-RIB.

class BirdPeer extends BasePeer {
  readonly kind = 'bird' as const;
  private get conf() { return path.join(this.dir, 'bird.conf'); }
  private get ctl() { return path.join(this.dir, 'bird.ctl'); }
  private protoName(addr: string): string {
    const i = this.options.neighbors.findIndex((n) => canonAddr(n.address) === canonAddr(addr));
    if (i < 0) throw new Error(`bird ${this.name}: no neighbour ${addr} configured`);
    return `nb${i + 1}`;
  }

  private config(): string {
    const o = this.options;
    const out: string[] = [
      `log "${path.join(this.dir, 'bird.log')}" all;`,
      `router id ${o.routerId};`,
      'protocol device { scan time 1; }',
    ];
    const bfdN = o.neighbors.map(bfdOf).find((b) => b);
    if (bfdN) {
      out.push('protocol bfd {', '  interface "*" {', `    min rx interval ${bfdN.minRx} ms;`, `    min tx interval ${bfdN.minTx} ms;`,
        `    multiplier ${bfdN.multiplier};`, '  };', '}');
    }
    for (const fam of ['ipv4', 'ipv6'] as const) {
      out.push(`protocol static static${fam === 'ipv4' ? 4 : 6} {`, `  ${fam};`);
      for (const a of this.announced.values()) {
        if (familyOf(a.prefix) !== fam) continue;
        const attrs: string[] = [];
        for (const c of a.communities ?? []) attrs.push(`bgp_community.add((${c.split(':').join(',')}));`);
        for (const c of a.largeCommunities ?? []) attrs.push(`bgp_large_community.add((${c.split(':').join(',')}));`);
        if (a.med !== undefined) attrs.push(`bgp_med = ${a.med};`);
        out.push(`  route ${a.prefix} blackhole${attrs.length ? ` { ${attrs.join(' ')} }` : ''};`);
      }
      out.push('}');
    }
    o.neighbors.forEach((n, i) => {
      const ibgp = n.asn === o.asn;
      out.push(`protocol bgp nb${i + 1} {`,
        `  description "${n.address}";`,
        `  local as ${o.asn};`,
        `  neighbor ${n.address}${n.port ? ` port ${n.port}` : ''} as ${n.asn};`,
        '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  error forget time 10;');
      if (n.passive) out.push('  passive on;');
      if (n.password !== undefined) out.push(`  password "${n.password}";`);
      if (n.ttlSecurity !== undefined) out.push('  ttl security on;', ...(n.ttlSecurity > 1 ? [`  multihop ${n.ttlSecurity};`] : []));
      if (bfdOf(n)) out.push('  bfd on;');
      if (n.holdTime !== undefined) {
        out.push(`  hold time ${n.holdTime};`);
        if (n.holdTime > 0) out.push(`  keepalive time ${keepaliveFor(n.holdTime)};`);
      }
      if (n.gracefulRestart !== undefined) {
        out.push(`  graceful restart ${n.gracefulRestart ? 'on' : 'off'};`);
        const t = grTime(n);
        if (t !== undefined) out.push(`  graceful restart time ${t};`);
      }
      for (const fam of neighborFamilies(n)) {
        out.push(`  ${fam} { import all; export all;${ibgp ? ' gateway direct; next hop self;' : ''} };`);
      }
      out.push('}');
    });
    return `${out.join('\n')}\n`;
  }

  protected logFiles(): string[] {
    return [path.join(this.dir, 'bird.out'), path.join(this.dir, 'bird.log')];
  }

  async start(recovery = false): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    fs.rmSync(this.ctl, { force: true });
    const args = ['-f', '-c', this.conf, '-s', this.ctl, '-P', path.join(this.dir, 'bird.pid')];
    if (recovery) args.push('-R');
    this.spawnDaemon('bird', BIN.bird, args, path.join(this.dir, 'bird.out'));
    await this.waitReady(`bird ${this.name}`, async () =>
      fs.existsSync(this.ctl) && (await this.birdc(['show', 'status'], false)).includes('Daemon is up'));
  }

  async birdc(args: string[], check = true): Promise<string> {
    const r = await exec(BIN.birdc, ['-s', this.ctl, ...args], { check: false });
    const text = r.stdout + r.stderr;
    if (check && (r.code !== 0 || /^(syntax error|Unable to connect)/m.test(text))) {
      throw new Error(`birdc ${args.join(' ')}: ${text.trim()}`);
    }
    return text;
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const text = await this.birdc(['show', 'protocols', 'all', this.protoName(addr)]);
    return parseBirdProtocol(text);
  }

  async routes(family: Family): Promise<Route[]> {
    const table = family === 'ipv4' ? 'master4' : 'master6';
    const text = await this.birdc(['show', 'route', 'all', 'table', table]);
    const byProto = new Map(this.options.neighbors.map((n, i) => [`nb${i + 1}`, canonAddr(n.address)]));
    // BIRD does not flag stale routes in `show route`; a protocol in GR helper mode ("Neighbor graceful restart
    // active", until the End-of-RIB) has all its routes stale, which is what we report.
    const grActive = parseBirdGrActive(await this.birdc(['show', 'protocols', 'all']));
    return parseBirdRoutes(text, byProto).map((r) => {
      const proto = [...byProto].find(([, a]) => a === r.from)?.[0];
      return proto && grActive.has(proto) ? { ...r, stale: true } : r;
    });
  }

  async routeCount(family: Family): Promise<number> {
    const text = await this.birdc(['show', 'route', 'table', family === 'ipv4' ? 'master4' : 'master6', 'count']);
    const m = /(\d+) of \d+ routes for (\d+) networks/.exec(text);
    return m ? Number(m[2]) : 0;
  }

  private async reconfigure(): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    if (!this.running) return;
    const out = await this.birdc(['configure']);
    if (!/Reconfigur|Reconfiguration in progress/.test(out)) throw new Error(`bird configure: ${out.trim()}`);
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    this.announced.set(ann.prefix, ann);
    await this.reconfigure();
  }

  async withdraw(prefix: string): Promise<void> {
    this.announced.delete(canonPrefix(prefix));
    await this.reconfigure();
  }

  protected async status(): Promise<string> {
    return this.birdc(['show', 'protocols', 'all'], false);
  }
}

/** Parses `birdc show protocols all NAME`. */
export function parseBirdProtocol(text: string): NeighborStatus {
  const m = /BGP state:\s+(\S+)/.exec(text);
  const err = /Last error:\s+(.+)/.exec(text);
  let state: SessionState = 'Unknown';
  if (m) state = normState(m[1]);
  else if (/^\S+\s+BGP\s+\S+\s+(down|start)\b/m.test(text)) state = 'Idle';
  return { state, lastError: err ? err[1].trim() : null, raw: text };
}

/** Names of BGP protocols in `birdc show protocols all` whose neighbour is in graceful restart (we are helper). */
export function parseBirdGrActive(text: string): Set<string> {
  const out = new Set<string>();
  let cur = '';
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s+BGP\s/.exec(line);
    if (m) cur = m[1];
    else if (cur && /Neighbor graceful restart active/.test(line)) out.add(cur);
  }
  return out;
}

function normState(s: string): SessionState {
  const k = s.toLowerCase().replace(/[^a-z]/g, '');
  const map: Record<string, SessionState> = {
    idle: 'Idle', connect: 'Connect', active: 'Active', opensent: 'OpenSent', openconfirm: 'OpenConfirm',
    established: 'Established', down: 'Down',
    passive: 'Active', // BIRD's name for a passive peer waiting for the neighbour to connect
  };
  return map[k] ?? (k.startsWith('idle') ? 'Idle' : 'Unknown');
}

/**
 * Parses `birdc show route all [table T]`. protoToNeighbor maps BGP protocol names to neighbour addresses;
 * routes of other protocols (static) have from = null.
 */
export function parseBirdRoutes(text: string, protoToNeighbor: Map<string, string> = new Map()): Route[] {
  const routes: Route[] = [];
  let prefix = '';
  let cur: (Route & { proto: string }) | null = null;
  const header = /^(\S+)?\s+(unicast|blackhole|unreachable|prohibit|multicast|recursive)?\s*\[(\S+)\s+[^\]]*?(?:\s+from\s+(\S+))?\]\s*(\*)?/;
  for (const line of text.split('\n')) {
    if (!line.trim() || /^(BIRD|Table)\b/.test(line)) continue;
    if (line.startsWith('\t')) {
      if (!cur) continue;
      const l = line.trim();
      let m: RegExpExecArray | null;
      if ((m = /^via\s+(\S+)/.exec(l))) cur.nexthops.push(canonAddr(m[1]));
      else if ((m = /^BGP\.origin:\s+(\S+)/.exec(l))) cur.origin = m[1].toLowerCase() as Route['origin'];
      else if ((m = /^BGP\.as_path:\s*(.*)$/.exec(l))) cur.asPath = (m[1].match(/\d+/g) ?? []).map(Number);
      else if ((m = /^BGP\.next_hop:\s+(.+)$/.exec(l))) {
        const hops = m[1].trim().split(/\s+/).map(canonAddr);
        if (!cur.nexthops.length) cur.nexthops.push(...hops);
        else for (const h of hops) if (!cur.nexthops.includes(h)) cur.nexthops.push(h);
        cur.nexthop = hops[0] ?? null;
      } else if ((m = /^BGP\.med:\s+(\d+)/.exec(l))) cur.med = Number(m[1]);
      else if ((m = /^BGP\.local_pref:\s+(\d+)/.exec(l))) cur.localPref = Number(m[1]);
      else if ((m = /^BGP\.community:\s+(.*)$/.exec(l))) {
        cur.communities = [...m[1].matchAll(/\((\d+),\s*(\d+)\)/g)].map((x) => `${x[1]}:${x[2]}`);
      } else if ((m = /^BGP\.large_community:\s+(.*)$/.exec(l))) {
        cur.largeCommunities = [...m[1].matchAll(/\((\d+),\s*(\d+),\s*(\d+)\)/g)].map((x) => `${x[1]}:${x[2]}:${x[3]}`);
      }
      continue;
    }
    const m = header.exec(line);
    if (!m) continue;
    if (m[1]) prefix = canonPrefix(m[1]);
    const proto = m[3];
    cur = {
      prefix, nexthop: null, nexthops: [], asPath: [], origin: null, med: null, localPref: null, communities: [],
      largeCommunities: [], from: protoToNeighbor.get(proto) ?? (m[4] ? canonAddr(m[4]) : null), best: m[5] === '*',
      stale: /\bstale\b/i.test(line), proto,
    };
    routes.push(cur);
  }
  return routes.map((x) => {
    const { proto: _p, ...r } = x as Route & { proto?: string };
    if (r.nexthop === null && r.nexthops.length) r.nexthop = r.nexthops[0];
    return r;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// GoBGP
//
// Command line: ip netns exec NS gobgpd -f DIR/gobgpd.toml -t toml --api-hosts 127.0.0.1:PORT -p --pprof-disable [-r]
//  - the gRPC API listens inside the namespace, so the CLI must run there too:
//    ip netns exec NS gobgp -u 127.0.0.1 -p PORT neighbor -j | global rib -a ipv4 -j | global rib add -a ipv4 P
//  - --pprof-disable, else it binds localhost:6060; -p gives plain-text logs.
//  - routes live only in gobgpd's memory (no static routes in the TOML): announcements are re-added after each
//    (re)start; `global rib add` with the default next hop 0.0.0.0/:: is rewritten to the session address on eBGP.
//  - defaults are slow for tests: connect-retry 120 s, idle-hold-time-after-reset 30 s.
//  - `neighbor -j` gives state.session_state as a number (6 = established) in 3.x; older versions use strings.
//  - after any session drop gobgpd sits in Idle for a fixed 5 s and closes incoming connections (the configured
//    idle-hold-time-after-reset only applies to `gobgp neighbor X reset`), and its own first connect attempt comes
//    5-10 s later (connect-retry is clamped to >= 5 s): re-establishing with GoBGP takes ~5-10 s. Let the other
//    side connect actively when you can.

let grpcPortCounter = 0;

class GobgpPeer extends BasePeer {
  readonly kind = 'gobgp' as const;
  private readonly port = 50051 + (++grpcPortCounter % 1000);
  private get conf() { return path.join(this.dir, 'gobgpd.toml'); }

  private config(): string {
    const o = this.options;
    const out: string[] = ['[global.config]', `  as = ${o.asn}`, `  router-id = "${o.routerId}"`, '  port = 179', ''];
    for (const n of o.neighbors) {
      out.push('[[neighbors]]', '  [neighbors.config]', `    neighbor-address = "${n.address}"`, `    peer-as = ${n.asn}`);
      out.push('  [neighbors.timers.config]', '    connect-retry = 2', '    idle-hold-time-after-reset = 1');
      if (n.holdTime !== undefined) out.push(`    hold-time = ${n.holdTime}`, `    keepalive-interval = ${keepaliveFor(n.holdTime)}`);
      if (n.passive || n.port) {
        out.push('  [neighbors.transport.config]');
        if (n.passive) out.push('    passive-mode = true');
        if (n.port) out.push(`    remote-port = ${n.port}`);
      }
      const gr = !!n.gracefulRestart;
      if (gr) {
        out.push('  [neighbors.graceful-restart.config]', '    enabled = true', `    restart-time = ${grTime(n) ?? 120}`);
      }
      for (const fam of neighborFamilies(n)) {
        out.push('  [[neighbors.afi-safis]]', '    [neighbors.afi-safis.config]', `      afi-safi-name = "${fam}-unicast"`);
        if (gr) out.push('    [neighbors.afi-safis.mp-graceful-restart.config]', '      enabled = true');
      }
      out.push('');
    }
    return `${out.join('\n')}\n`;
  }

  protected logFiles(): string[] {
    return [path.join(this.dir, 'gobgpd.log')];
  }

  async gobgp(args: string[], check = true): Promise<string> {
    const r = await this.ns.exec(BIN.gobgp, ['-u', '127.0.0.1', '-p', String(this.port), ...args], { check: false });
    if (check && r.code !== 0) throw new Error(`gobgp ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
    return r.stdout;
  }

  async start(recovery = false): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    const args = ['-f', this.conf, '-t', 'toml', '--api-hosts', `127.0.0.1:${this.port}`, '-p', '--pprof-disable'];
    if (recovery) args.push('-r');
    this.spawnDaemon('gobgpd', BIN.gobgpd, args, path.join(this.dir, 'gobgpd.log'));
    await this.waitReady(`gobgpd ${this.name}`, async () => {
      const r = await this.ns.exec(BIN.gobgp, ['-u', '127.0.0.1', '-p', String(this.port), 'global'], { check: false, timeoutMs: 3000 });
      return r.code === 0 && /AS/.test(r.stdout);
    });
    for (const a of this.announced.values()) await this.ribAdd(a);
  }

  private async ribAdd(a: Announcement): Promise<void> {
    const args = ['global', 'rib', 'add', '-a', familyOf(a.prefix), a.prefix];
    if (a.communities?.length) args.push('community', a.communities.join(','));
    if (a.largeCommunities?.length) args.push('large-community', a.largeCommunities.join(','));
    if (a.med !== undefined) args.push('med', String(a.med));
    if (a.asPath?.length) args.push('aspath', a.asPath.join(' '));
    await this.gobgp(args);
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const list = JSON.parse((await this.gobgp(['neighbor', '-j'])) || '[]') as GobgpNeighbor[];
    const want = canonAddr(addr);
    const nb = (list ?? []).find((n) => canonAddr(n.conf?.neighbor_address ?? n.state?.neighbor_address ?? '') === want);
    if (!nb) return { state: 'Unknown', lastError: `neighbour ${addr} not configured`, raw: list };
    return { state: gobgpState(nb.state?.session_state), lastError: null, raw: nb };
  }

  async routes(family: Family): Promise<Route[]> {
    const text = (await this.gobgp(['global', 'rib', '-a', family, '-j'])).trim();
    return normalizeGobgpRib(text ? JSON.parse(text) : {});
  }

  async routeCount(family: Family): Promise<number> {
    const text = await this.gobgp(['global', 'rib', 'summary', '-a', family]);
    const m = /Destination:\s*(\d+)/.exec(text);
    return m ? Number(m[1]) : 0;
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    if (this.announced.has(ann.prefix) && this.running) await this.gobgp(['global', 'rib', 'del', '-a', familyOf(ann.prefix), ann.prefix]);
    this.announced.set(ann.prefix, ann);
    if (this.running) await this.ribAdd(ann);
  }

  async withdraw(prefix: string): Promise<void> {
    const p = canonPrefix(prefix);
    this.announced.delete(p);
    if (this.running) await this.gobgp(['global', 'rib', 'del', '-a', familyOf(p), p]);
  }

  protected async status(): Promise<string> {
    return `${await this.gobgp(['neighbor'], false)}\n${await this.gobgp(['global', 'rib', '-a', 'ipv4'], false)}`;
  }
}

interface GobgpNeighbor {
  conf?: { neighbor_address?: string; peer_asn?: number };
  state?: { neighbor_address?: string; session_state?: number | string };
}

function gobgpState(s: number | string | undefined): SessionState {
  if (typeof s === 'number') {
    return (['Unknown', 'Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] as const)[s] ?? 'Unknown';
  }
  if (typeof s === 'string') return normState(s.replace(/^BGP_FSM_|^SESSION_STATE_/i, ''));
  return 'Unknown';
}

interface GobgpPath {
  nlri?: { prefix?: string };
  best?: boolean;
  stale?: boolean;
  'neighbor-ip'?: string;
  attrs?: { type: number; [k: string]: unknown }[];
}

/** Normalises `gobgp global rib -a FAMILY -j` (a map prefix -> paths). */
export function normalizeGobgpRib(rib: Record<string, GobgpPath[]> | null): Route[] {
  const out: Route[] = [];
  for (const [pfx, paths] of Object.entries(rib ?? {})) {
    for (const p of paths ?? []) {
      const r: Route = {
        prefix: canonPrefix(p.nlri?.prefix ?? pfx), nexthop: null, nexthops: [], asPath: [], origin: null, med: null,
        localPref: null, communities: [], largeCommunities: [],
        from: p['neighbor-ip'] && !isUnspecified(p['neighbor-ip']) ? canonAddr(p['neighbor-ip']) : null,
        best: !!p.best, stale: !!p.stale,
      };
      for (const a of p.attrs ?? []) {
        switch (a.type) {
          case 1: r.origin = (['igp', 'egp', 'incomplete'] as const)[a.value as number] ?? null; break;
          case 2:
            for (const seg of (a.as_paths as { asns?: number[] }[] | undefined) ?? []) r.asPath.push(...(seg.asns ?? []));
            break;
          case 3: if (!isUnspecified(String(a.nexthop))) r.nexthops.push(canonAddr(String(a.nexthop))); break;
          case 4: r.med = Number(a.metric ?? a.value ?? 0); break;
          case 5: r.localPref = Number(a.value ?? 0); break;
          case 8:
            r.communities = ((a.communities as number[] | undefined) ?? []).map((c) => `${c >>> 16}:${c & 0xffff}`);
            break;
          case 14: {
            const hops = (a.nexthop ? [a.nexthop] : []).concat((a.nexthops as string[] | undefined) ?? []);
            for (const h of hops.map(String)) if (!isUnspecified(h) && !r.nexthops.includes(canonAddr(h))) r.nexthops.push(canonAddr(h));
            break;
          }
          case 32:
            r.largeCommunities = ((a.value as { ASN?: number; LocalData1?: number; LocalData2?: number }[] | undefined) ??
              (a.values as { ASN?: number; LocalData1?: number; LocalData2?: number }[] | undefined) ?? [])
              .map((c) => `${c.ASN ?? 0}:${c.LocalData1 ?? 0}:${c.LocalData2 ?? 0}`);
            break;
        }
      }
      r.nexthop = r.nexthops[0] ?? null;
      out.push(r);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// FRR
//
// Command lines (all inside the namespace, foreground, private paths; DIR owned by user frr):
//   ip netns exec NS /usr/lib/frr/zebra -f DIR/zebra.conf -i DIR/zebra.pid -z DIR/zserv.api --vty_socket DIR
//        -A 127.0.0.1 -P 0 --log file:DIR/zebra.log --limit-fds 1024
//   ip netns exec NS /usr/lib/frr/bgpd  -f DIR/bgpd.conf  -i DIR/bgpd.pid  -z DIR/zserv.api --vty_socket DIR
//        -A 127.0.0.1 -P 0 --log file:DIR/bgpd.log --limit-fds 1024
//   vtysh --vty_socket DIR -d bgpd -c 'show bgp summary json'      (unix socket: no netns exec needed)
//  - `-u root -g root` fails: "privs_init: user(root) is not part of vty group specified(frrvty)"; so the daemons
//    keep their default user frr and DIR is chowned to frr.
//  - bgpd wants zebra: without it (-Z) it knows no interfaces, so direct eBGP neighbours fail the connected check.
//  - FRR 8 defaults that block a plain test: `bgp ebgp-requires-policy` (nothing is sent or accepted on eBGP
//    without route-maps) and `bgp network import-check` (a `network` must exist in the RIB); both turned off, and
//    `no bgp default ipv4-unicast` so every neighbour gets only the families it is given.
//  - `show bgp ipv4 unicast json detail` gives per-path attributes (communities, aspath segments); the first
//    element of each prefix's array is a header, not a path.
//  - -P 0 stops the TCP vty listeners (2601/2605); --limit-fds keeps it from sizing tables by a huge ulimit.
//  - a SIGKILLed daemon leaves /var/tmp/frr/<daemon>.<pid>/ behind; it is removed here.

class FrrPeer extends BasePeer {
  readonly kind = 'frr' as const;
  private get frrDir() { return path.join(this.dir, 'frr'); }

  private bgpdConfig(): string {
    const o = this.options;
    const out: string[] = ['frr defaults traditional', `hostname ${this.name}`, '!', `router bgp ${o.asn}`,
      ` bgp router-id ${o.routerId}`, ' no bgp ebgp-requires-policy', ' no bgp default ipv4-unicast',
      ' no bgp network import-check'];
    const grNeighbors = o.neighbors.filter((n) => n.gracefulRestart);
    if (grNeighbors.length) {
      // preserve-fw-state sets the F bit; without it a helper (BIRD) flushes our routes when bgpd dies
      out.push(' bgp graceful-restart', ' bgp graceful-restart preserve-fw-state');
      const t = grNeighbors.map(grTime).find((x) => x !== undefined);
      if (t !== undefined) out.push(` bgp graceful-restart restart-time ${t}`);
    }
    for (const n of o.neighbors) {
      const a = n.address;
      out.push(` neighbor ${a} remote-as ${n.asn}`, ` neighbor ${a} timers connect 1`, ` neighbor ${a} advertisement-interval 0`);
      if (n.holdTime !== undefined) out.push(` neighbor ${a} timers ${keepaliveFor(n.holdTime)} ${n.holdTime}`);
      if (n.passive) out.push(` neighbor ${a} passive`);
      if (n.port) out.push(` neighbor ${a} port ${n.port}`);
      if (n.password !== undefined) out.push(` neighbor ${a} password ${n.password}`);
      if (n.ttlSecurity !== undefined) out.push(` neighbor ${a} ttl-security hops ${n.ttlSecurity}`);
      if (n.gracefulRestart === false) out.push(` neighbor ${a} graceful-restart-disable`);
      if (bfdOf(n)) out.push(` neighbor ${a} bfd`, ` neighbor ${a} bfd profile ${this.bfdProfile(n)}`);
    }
    for (const fam of ['ipv4', 'ipv6'] as const) {
      out.push(` address-family ${fam} unicast`);
      for (const a of this.announced.values()) {
        if (familyOf(a.prefix) === fam) out.push(`  network ${a.prefix}${this.hasAttrs(a) ? ` route-map ${this.rmName(a.prefix)}` : ''}`);
      }
      for (const n of o.neighbors) if (neighborFamilies(n).includes(fam)) out.push(`  neighbor ${n.address} activate`);
      out.push(' exit-address-family');
    }
    out.push('!');
    for (const a of this.announced.values()) if (this.hasAttrs(a)) out.push(...this.routeMap(a), '!');
    return `${out.join('\n')}\n`;
  }

  private bfdProfile(n: NeighborOptions): string {
    const b = bfdOf(n)!;
    return `bs-${b.minRx}-${b.minTx}-${b.multiplier}`;
  }

  /** bfdd's profiles, one per distinct parameter set of the neighbours. */
  private bfddConfig(): string {
    const out = ['frr defaults traditional', `hostname ${this.name}`, '!', 'bfd'];
    const seen = new Set<string>();
    for (const n of this.options.neighbors) {
      const b = bfdOf(n);
      if (!b || seen.has(this.bfdProfile(n))) continue;
      seen.add(this.bfdProfile(n));
      out.push(` profile ${this.bfdProfile(n)}`, `  receive-interval ${b.minRx}`, `  transmit-interval ${b.minTx}`,
        `  detect-multiplier ${b.multiplier}`, ' !');
    }
    out.push('!');
    return `${out.join('\n')}\n`;
  }

  private get wantsBfd(): boolean {
    return this.options.neighbors.some((n) => bfdOf(n));
  }

  private hasAttrs(a: Announcement): boolean {
    return !!(a.communities?.length || a.largeCommunities?.length || a.med !== undefined);
  }
  private rmName(prefix: string): string {
    return `bs-ann-${prefix.replace(/[^0-9a-f]/gi, '-')}`;
  }
  private routeMap(a: Announcement): string[] {
    const out = [`route-map ${this.rmName(a.prefix)} permit 10`];
    if (a.communities?.length) out.push(` set community ${a.communities.join(' ')}`);
    if (a.largeCommunities?.length) out.push(` set large-community ${a.largeCommunities.join(' ')}`);
    if (a.med !== undefined) out.push(` set metric ${a.med}`);
    return out;
  }

  protected logFiles(): string[] {
    return ['zebra.out', 'zebra.log', 'bgpd.out', 'bgpd.log', ...(this.wantsBfd ? ['bfdd.out', 'bfdd.log'] : [])].map((f) => path.join(this.frrDir, f));
  }

  private daemonArgs(d: 'zebra' | 'bgpd' | 'bfdd'): string[] {
    const D = this.frrDir;
    return ['-f', path.join(D, `${d}.conf`), '-i', path.join(D, `${d}.pid`), '-z', path.join(D, 'zserv.api'),
      '--vty_socket', D, '-A', '127.0.0.1', '-P', '0', '--log', `file:${path.join(D, `${d}.log`)}`, '--limit-fds', '1024'];
  }

  async start(_recovery = false): Promise<void> {
    const D = this.frrDir;
    const user = frrUser();
    if (!user) throw new Error('user frr not found: apt-get install frr');
    fs.mkdirSync(D, { recursive: true });
    fs.writeFileSync(path.join(D, 'bgpd.conf'), this.bgpdConfig());
    if (!fs.existsSync(path.join(D, 'zebra.conf'))) fs.writeFileSync(path.join(D, 'zebra.conf'), `hostname ${this.name}\n!\n`);
    for (const f of ['zebra.log', 'bgpd.log', 'zebra.out', 'bgpd.out']) fs.appendFileSync(path.join(D, f), '');
    for (const f of ['', ...fs.readdirSync(D)]) fs.chownSync(path.join(D, f), user.uid, user.gid);
    const zebra = this.procs.get('zebra');
    if (!zebra || !alive(zebra)) {
      fs.rmSync(path.join(D, 'zserv.api'), { force: true });
      this.spawnDaemon('zebra', BIN.zebra, this.daemonArgs('zebra'), path.join(D, 'zebra.out'));
      await this.waitReady(`zebra ${this.name}`, async () => fs.existsSync(path.join(D, 'zserv.api')));
    }
    const bfdd = this.procs.get('bfdd');
    if (this.wantsBfd && (!bfdd || !alive(bfdd))) {
      // bfdd before bgpd: bgpd registers its BFD sessions through zebra, bfdd must be there to take them
      fs.writeFileSync(path.join(D, 'bfdd.conf'), this.bfddConfig());
      for (const f of ['bfdd.conf', 'bfdd.log', 'bfdd.out']) {
        fs.appendFileSync(path.join(D, f), '');
        fs.chownSync(path.join(D, f), user.uid, user.gid);
      }
      fs.rmSync(path.join(D, 'bfdd.vty'), { force: true });
      this.spawnDaemon('bfdd', BIN.bfdd, [...this.daemonArgs('bfdd'), '--bfdctl', path.join(D, 'bfdd.sock')], path.join(D, 'bfdd.out'));
      await this.waitReady(`bfdd ${this.name}`, async () => fs.existsSync(path.join(D, 'bfdd.vty')));
    }
    fs.rmSync(path.join(D, 'bgpd.vty'), { force: true });
    this.spawnDaemon('bgpd', BIN.bgpd, this.daemonArgs('bgpd'), path.join(D, 'bgpd.out'));
    await this.waitReady(`bgpd ${this.name}`, async () =>
      fs.existsSync(path.join(D, 'bgpd.vty')) && (await this.vtysh(['show bgp summary json'], false)).includes('{'));
  }

  /** Runs vtysh commands against this instance's bgpd; throws on an error line ("% ...") when check is set. */
  async vtysh(cmds: string[], check = true): Promise<string> {
    const args = ['--vty_socket', this.frrDir, '-d', 'bgpd'];
    for (const c of cmds) args.push('-c', c);
    const r = await exec(BIN.vtysh, args, { check: false });
    const text = r.stdout + r.stderr;
    if (check && (r.code !== 0 || /^%/m.test(text))) throw new Error(`vtysh ${cmds.join(' ; ')}: ${text.trim()}`);
    return r.stdout;
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const j = JSON.parse(await this.vtysh([`show bgp neighbors ${addr} json`])) as Record<string, FrrNeighbor>;
    const nb = j[addr] ?? Object.values(j).find((v) => typeof v === 'object' && v && 'bgpState' in v);
    if (!nb) return { state: 'Unknown', lastError: `neighbour ${addr} not configured`, raw: j };
    return {
      state: normState(nb.bgpState ?? ''),
      lastError: nb.lastNotificationReason ?? nb.lastResetDueTo ?? null,
      raw: nb,
    };
  }

  async routes(family: Family): Promise<Route[]> {
    const text = await this.vtysh([`show bgp ${family} unicast json detail`]);
    return normalizeFrrRoutes(JSON.parse(text || '{}'));
  }

  async routeCount(family: Family): Promise<number> {
    const j = JSON.parse(await this.vtysh([`show bgp ${family} unicast summary json`]) || '{}') as Record<string, unknown>;
    if (typeof j.ribCount === 'number') return j.ribCount;
    const inner = Object.values(j).find((v) => typeof v === 'object' && v !== null && 'ribCount' in v) as { ribCount?: number } | undefined;
    return inner?.ribCount ?? 0;
  }

  private async configure(lines: string[]): Promise<void> {
    fs.writeFileSync(path.join(this.frrDir, 'bgpd.conf'), this.bgpdConfig());
    if (this.procs.get('bgpd') && alive(this.procs.get('bgpd')!)) await this.vtysh(['configure terminal', ...lines]);
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    this.announced.set(ann.prefix, ann);
    const lines = this.hasAttrs(ann) ? [...this.routeMap(ann), 'exit'] : [];
    lines.push(`router bgp ${this.options.asn}`, `address-family ${familyOf(ann.prefix)} unicast`,
      `network ${ann.prefix}${this.hasAttrs(ann) ? ` route-map ${this.rmName(ann.prefix)}` : ''}`);
    await this.configure(lines);
  }

  async withdraw(prefix: string): Promise<void> {
    const p = canonPrefix(prefix);
    this.announced.delete(p);
    await this.configure([`router bgp ${this.options.asn}`, `address-family ${familyOf(p)} unicast`, `no network ${p}`]);
  }

  /** kill(): SIGKILL bgpd only; zebra stays (like a crashed bgpd on a real router). stop() stops both. */
  override async kill(): Promise<void> {
    await this.stopProc('bgpd', 'SIGKILL');
  }

  override async dispose(): Promise<void> {
    await this.stopProc('bgpd', 'SIGKILL');
    await this.stopProc('bfdd', 'SIGKILL');
    await this.stopProc('zebra', 'SIGKILL');
  }

  override get running(): boolean {
    const b = this.procs.get('bgpd');
    return !!b && alive(b);
  }

  protected override afterExit(key: string, pid: number | undefined): void {
    if (pid) fs.rmSync(`/var/tmp/frr/${key}.${pid}`, { recursive: true, force: true });
  }

  protected async status(): Promise<string> {
    return this.vtysh(['show bgp summary', 'show bgp ipv4 unicast', 'show bgp ipv6 unicast'], false);
  }
}

interface FrrNeighbor {
  bgpState?: string;
  lastNotificationReason?: string;
  lastResetDueTo?: string;
}

interface FrrPath {
  aspath?: { string?: string; segments?: { type: string; list: number[] }[] };
  origin?: string;
  med?: number;
  metric?: number;
  locPrf?: number;
  localpref?: number;
  community?: { string?: string; list?: string[] };
  largeCommunity?: { string?: string; list?: string[] };
  valid?: boolean;
  bestpath?: { overall?: boolean } | boolean;
  stale?: boolean;
  local?: boolean;
  sourced?: boolean;
  nexthops?: { ip?: string; scope?: string; used?: boolean }[];
  peer?: { peerId?: string };
  peerId?: string;
}

/** Normalises `show bgp FAMILY unicast json detail` (also accepts the non-detail form). */
export function normalizeFrrRoutes(j: { routes?: Record<string, FrrPath[]> }): Route[] {
  const out: Route[] = [];
  for (const [pfx, entries] of Object.entries(j.routes ?? {})) {
    for (const p of entries ?? []) {
      if (!p || !('nexthops' in p || 'aspath' in p || 'path' in p)) continue; // the per-prefix header
      const peerId = p.peer?.peerId ?? p.peerId;
      const local = !!(p.local || p.sourced) || !peerId || peerId === '(unspec)' || isUnspecified(peerId);
      const nexthops = (p.nexthops ?? []).map((n) => n.ip ?? '').filter((ip) => !isUnspecified(ip)).map(canonAddr);
      const segs = p.aspath?.segments;
      const asPath = segs
        ? segs.flatMap((s) => s.list)
        : ((p.aspath?.string ?? (p as { path?: string }).path ?? '').match(/\d+/g) ?? []).map(Number);
      const comm = p.community?.string ?? '';
      const large = p.largeCommunity?.string ?? '';
      const origin = (p.origin ?? '').toLowerCase();
      out.push({
        prefix: canonPrefix(pfx),
        nexthop: nexthops[0] ?? null,
        nexthops,
        asPath,
        origin: origin === 'igp' || origin === 'egp' || origin === 'incomplete' ? origin : null,
        med: p.metric ?? p.med ?? null,
        localPref: p.locPrf ?? p.localpref ?? null,
        communities: comm ? comm.split(/\s+/).filter((c) => /^\d+:\d+$/.test(c)) : [],
        largeCommunities: large ? large.split(/\s+/).filter(Boolean) : [],
        from: local ? null : canonAddr(peerId!),
        best: typeof p.bestpath === 'object' ? !!p.bestpath.overall : !!p.bestpath,
        stale: !!p.stale,
      });
    }
  }
  return out;
}
