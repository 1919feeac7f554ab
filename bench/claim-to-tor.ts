// bench/claim-to-tor: how long from a pod's IPAM assign to its route being at the ToR (root, bird2, iproute2).
//
//   node --import tsx bench/claim-to-tor.ts [--tries N] [--warmup N] [--compare DIR]
//   (npm run bench:claim-to-tor builds dist/ first; bench/footprint.ts runs it as a child)
//
//   [ToR netns: BIRD, protocol kernel exports every route it learns] ── veth ── [node A netns: blockspeaker run]
//
// One compiled daemon (node-a; dist/ when present, as users run it), eBGP to a real BIRD, an embedded store in a
// temp dir, dataplane none. BIRD exports what it learns into its namespace's kernel table, and `ip -n TOR monitor
// route` timestamps every route as it lands there (BIRD's kernel protocol writes a route the moment it enters its
// table, so this is "in BIRD's table" plus one netlink write). Two cases, interleaved try by try so they see the
// same load, each try timed from just before the assign request on the control socket (a fresh connection, as
// the CNI plugin makes) to the route's arrival:
//   claim    `ipam.assign` num4 1 in pool `claim` (10.96.0.0/20, /29 blocks): node-a's blocks there are all full,
//            so the assign claims a new block, and the route is that /29. Untimed afterwards, the rest of the
//            block is filled so the next try claims again.
//   borrow   `ipam.assign` num4 1 in pool `borrow` (10.97.0.0/24, one /24 block): node-b (a second host, via the
//            CLI on the same store) claimed the pool's only block first, so node-a can neither use its own nor
//            claim one and borrows a single address (strictAffinity off, the default): the route is that /32.
// --warmup tries of each case run first and are not counted. Every wait is bounded (10 s per try); a try whose
// route never arrives is counted under `missed`. Namespaces, daemons and the temp dir are removed at exit.
// The final line is JSON: claimToTor.{p50Ms,p99Ms} over both cases and claim/borrow figures, each with the p50/p99
// of the assign's reply alone (assignReplyP50Ms, ...: the IPAM and store part of the latency).
// --compare DIR: a second node-a from another checkout (its dist/ built, e.g. the main branch) on its own veth,
// store and pools (10.98.0.0/20, 10.99.0.0/24), peered with the same BIRD; the two builds' tries alternate, so a
// busy machine loads both alike. Its figures are claimToTor.compare.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ipcRequest } from '../src/ipc/client.ts';
import type { AssignReply, AvailableReply } from '../src/ipc/protocol.ts';
import { cleanupAll, createLink, createNetns, execInNetns, runInNetns } from '../test/kit/interop/netns.ts';
import { assertPrereqs } from '../test/kit/interop/prereqs.ts';
import { waitFor } from '../test/kit/interop/wait-for.ts';

const { values } = parseArgs({
  options: {
    tries: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '5' },
    // Another checkout of blockspeaker (dist/ built): its daemon runs beside ours, peered with the same BIRD,
    // tries interleaved with ours, so both see the same load (an A/B of two versions in one run).
    compare: { type: 'string' },
  },
});
const TRIES = Number(values.tries);
const WARMUP = Number(values.warmup);
const TRY_TIMEOUT_MS = 10_000;
const root = new URL('..', import.meta.url).pathname;
const log = (s: string) => console.error(s);
const r2 = (x: number) => Math.round(x * 100) / 100;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil(s.length * p) - 1)]! : NaN;
};

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  return env;
}

assertPrereqs(['bird']);
const pid = process.pid;
const dir = mkdtempSync(join(tmpdir(), `bs-bench-c2t-${pid}-`));

/** Routes as they land in the ToR's kernel table: prefix -> arrival time (performance.now()). */
const arrived = new Map<string, number>();
const waiters = new Map<string, () => void>();

/** One daemon under test: its build, namespace, store, pools (distinct per daemon) and control socket. */
interface Subject {
  label: string;
  bin: string;
  link: Awaited<ReturnType<typeof createLink>>;
  asn: number;
  claimCidr: string;
  borrowCidr: string;
  store: string;
  sock: string;
  log: string;
}

async function main(): Promise<Record<string, unknown>> {
  const tor = await createNetns(`bs-c2ttor-${pid}`);
  const builds = [{ label: 'this', root }, ...(values.compare ? [{ label: 'compare', root: values.compare }] : [])];
  const subjects: Subject[] = [];
  for (const [i, b] of builds.entries()) {
    subjects.push({
      label: b.label,
      bin: join(b.root, 'bin/blockspeaker.js'),
      link: await createLink({ name: `c2t${i}`, local: tor }),
      asn: 65101 + i,
      claimCidr: `10.${96 + 2 * i}.0.0/20`,
      borrowCidr: `10.${97 + 2 * i}.0.0/24`,
      store: join(dir, `store-${i}`),
      sock: join(dir, `node-a-${i}.sock`),
      log: join(dir, `node-a-${i}.log`),
    });
  }

  // ---- BIRD on the ToR
  const ctl = join(dir, 'bird.ctl');
  writeFileSync(join(dir, 'bird.conf'), [
    `log "${join(dir, 'bird.log')}" all;`,
    `router id ${subjects[0]!.link.local.v4};`,
    'protocol device { scan time 1; }',
    'protocol kernel { ipv4 { import none; export all; }; }',
    ...subjects.map((x, i) => `protocol bgp node_${i} { local as 65001; neighbor ${x.link.peer.v4} as ${x.asn}; hold time 9; keepalive time 3; ` +
      'connect retry time 2; error wait time 1, 5; ipv4 { import all; export none; }; }'),
    '',
  ].join('\n'));
  runInNetns(tor, '/usr/sbin/bird', ['-f', '-c', join(dir, 'bird.conf'), '-s', ctl, '-P', join(dir, 'bird.pid')],
    { logFile: join(dir, 'bird.out') });
  const birdc = async (...args: string[]) => (await execInNetns(tor, '/usr/sbin/birdc', ['-s', ctl, ...args], { check: false })).stdout;

  // ---- the route watcher
  const mon = runInNetns(tor, '/usr/sbin/ip', ['-4', 'monitor', 'route'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let buf = '';
  mon.stdout!.on('data', (c: Buffer) => {
    const now = performance.now();
    buf += c.toString('utf8');
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const line of lines) {
      const first = line.trim().split(/\s+/)[0];
      if (!first || first === 'Deleted' || !/^\d/.test(first)) continue;
      const prefix = first.includes('/') ? first : `${first}/32`;
      if (!arrived.has(prefix)) arrived.set(prefix, now);
      waiters.get(prefix)?.();
    }
  });

  // ---- the daemons (node-a of each build)
  for (const [i, x] of subjects.entries()) {
    const conf = join(dir, `node-a-${i}.yaml`);
    writeFileSync(conf, `node: { name: node-a, os: linux }
bgp:
  asn: ${x.asn}
  routerId: ${x.link.peer.v4}
  listen: false
  peers: [{ address: ${x.link.local.v4}, asn: 65001, holdTime: 9 }]
ipam:
  store: ${x.store}
  pools:
    - { name: claim, cidr: ${x.claimCidr}, blockSize: 29 }
    - { name: borrow, cidr: ${x.borrowCidr}, blockSize: 24 }
dataplane: { kind: none }
status: false
ipc: { path: ${x.sock} }
`);
    const runDir = join(dir, `run-${i}`);
    mkdirSync(runDir);
    const daemon = runInNetns(x.link.peer.ns, process.execPath, [x.bin, 'run', '-c', conf, '--run-dir', runDir], { logFile: x.log, env: cleanEnv() });
    const tail = () => readFileSync(x.log, 'utf8').split('\n').slice(-20).join('\n');
    try {
      await waitFor(async () => {
        if (daemon.exitCode !== null) throw new Error(`daemon ${x.label} exited (${daemon.exitCode})`);
        return new RegExp(`node_${i}\\s+BGP.*Established`).test(await birdc('show', 'protocols'));
      }, { what: `BIRD: node-a (${x.label}) Established`, timeoutMs: 60_000 });
      await waitFor(async () => ipcRequest<AvailableReply>(x.sock, 'ipam.available', {}).then(() => true, () => false),
        { what: `node-a (${x.label}) control socket`, timeoutMs: 30_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${tail()}`);
    }

    // ---- node B takes the borrow pool's only block (the CLI on the shared store, as a second host would)
    const cli = (...args: string[]) => {
      const r = spawnSync(process.execPath, [x.bin, 'ipam', '--store', x.store, ...args], { encoding: 'utf8', env: cleanEnv() });
      if (r.status !== 0) throw new Error(`blockspeaker ipam ${args.join(' ')}: ${r.stderr.trim()}`);
      return r.stdout;
    };
    cli('host', 'set', '--name', 'node-b', '--os', 'linux');
    cli('assign', '--host', 'node-b', '--num4', '1', '--pool', 'borrow', '--handle', 'node-b-pod');
  }

  let n = 0;
  type Case = 'claim' | 'borrow';
  const once = async (x: Subject, pool: Case, replyMs: Record<Case, number[]>): Promise<number | null> => {
    const handle = `${pool}-${++n}`;
    const t0 = performance.now();
    const reply = await ipcRequest<AssignReply>(x.sock, 'ipam.assign', { handle, num4: 1, pools: [pool] });
    replyMs[pool].push(performance.now() - t0);
    const ip = reply.ips[0];
    if (!ip) throw new Error(`assign ${handle}: no address (${JSON.stringify(reply)})`);
    if ((pool === 'borrow') !== ip.borrowed) throw new Error(`assign ${handle}: ${ip.ip} borrowed=${ip.borrowed}, expected a ${pool}`);
    const prefix = pool === 'borrow' ? `${ip.ip}/32` : ip.block;
    if (!arrived.has(prefix)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => { waiters.delete(prefix); resolve(); }, TRY_TIMEOUT_MS);
        waiters.set(prefix, () => { clearTimeout(timer); waiters.delete(prefix); resolve(); });
      });
    }
    const at = arrived.get(prefix);
    if (pool === 'claim') {
      // Untimed (after the route arrived, so the daemon is not asked anything else while the route is on its way):
      // the block was new, and it is filled so the next claim try needs a new block.
      const free = (await ipcRequest<AvailableReply>(x.sock, 'ipam.available', { pools: ['claim'] })).v4.free;
      if (free !== 7) throw new Error(`assign ${handle}: ${ip.block} was not a new block (${free} free after one address)`);
      await ipcRequest<AssignReply>(x.sock, 'ipam.assign', { handle: `${handle}-fill`, num4: 7, pools: ['claim'] });
    }
    return at === undefined ? null : at - t0;
  };

  const runs = subjects.map((x) => ({ x, claim: [] as number[], borrow: [] as number[], missed: 0, replyMs: { claim: [] as number[], borrow: [] as number[] } }));
  for (let i = 0; i < WARMUP; i++) for (const r of runs) { await once(r.x, 'claim', r.replyMs); await once(r.x, 'borrow', r.replyMs); }
  for (const r of runs) r.replyMs.claim.length = r.replyMs.borrow.length = 0;
  for (let i = 0; i < TRIES; i++) {
    // Interleaved try by try (and the order of the builds alternates), so every case sees the same load.
    for (const r of i % 2 ? [...runs].reverse() : runs) {
      for (const pool of ['claim', 'borrow'] as const) {
        const ms = await once(r.x, pool, r.replyMs);
        if (ms === null) r.missed++;
        else r[pool].push(ms);
      }
    }
    if ((i + 1) % 50 === 0) {
      log(`claim-to-tor: ${i + 1}/${TRIES} tries; ${runs.map((r) => `${r.x.label}: p50 claim ${r2(pct(r.claim, 0.5))} ms, borrow ${r2(pct(r.borrow, 0.5))} ms`).join('; ')}`);
    }
  }
  const figures = (xs: number[]) => ({ p50Ms: r2(pct(xs, 0.5)), p99Ms: r2(pct(xs, 0.99)), maxMs: r2(Math.max(...xs)), n: xs.length });
  // Where the time goes: the assign's reply alone (store write included), the rest is announce + BGP + BIRD.
  const summary = (r: (typeof runs)[number]) => {
    const withReply = (xs: number[], pool: Case) => ({ ...figures(xs), assignReplyP50Ms: r2(pct(r.replyMs[pool], 0.5)), assignReplyP99Ms: r2(pct(r.replyMs[pool], 0.99)) });
    return { ...figures([...r.claim, ...r.borrow]), missed: r.missed, tries: TRIES, warmup: WARMUP, claim: withReply(r.claim, 'claim'), borrow: withReply(r.borrow, 'borrow') };
  };
  const [ours, other] = runs;
  return { ...summary(ours!), ...(other ? { compare: { build: values.compare, ...summary(other) } } : {}) };
}

const loadStart = loadavg().map((x) => Math.round(x * 10) / 10);
let code = 0;
try {
  const claimToTor = await main();
  console.log(JSON.stringify({
    bench: 'claim-to-tor', date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, loadStart, loadEnd: loadavg().map((x) => Math.round(x * 10) / 10) },
    claimToTor,
  }));
} catch (e) {
  console.error(`claim-to-tor: ${(e as Error).message}`);
  code = 1;
} finally {
  await cleanupAll();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
