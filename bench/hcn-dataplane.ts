// bench/hcn-dataplane: the Windows dataplane through HCN and IP Helper, under wine, against the test-only stand-in
// DLLs (test/kit/windows-standin). Figures under wine are indicative only: wine's process start, and a stand-in that
// answers over loopback TCP instead of HNS's RPC, are not a Windows node's costs.
//
//   npm run bench:hcn -- [--count N] [--routes N]
//
// CNI: blockspeaker-cni.exe as the main plugin, called as containerd calls it: ADD (assign, endpoint, attach) and
// DEL, interleaved with the same executable's VERSION (no daemon, no HCN: the fixed cost of starting the process),
// so ADD - VERSION is what the daemon and HCN add per pod.
// Routes: a BGP peer (in this process) announces N remote blocks at once; the time from the announce to the last
// CreateIpForwardEntry2, the pass's own duration, and the same for the withdrawal. Needs `npm run package:windows`.
// The final line is JSON.
import fs from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Speaker } from '../src/bgp/speaker.ts';
import { driveC, ensureWinePrefix, runWine, startWine, windowsDist, zPath } from '../packaging/windows/wine.ts';
import { installStandins, standinEnv } from '../test/kit/windows-standin/build.ts';
import { startStandin } from '../test/kit/windows-standin/server.ts';
import { freePort } from '../test/kit/wait.ts';

const { values } = parseArgs({ options: { count: { type: 'string', default: '15' }, routes: { type: 'string', default: '1000' } } });
const COUNT = Number(values.count);
const ROUTES = Number(values.routes);
const cliExe = path.join(windowsDist, 'blockspeaker.exe');
const cniExe = path.join(windowsDist, 'blockspeaker-cni.exe');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! * 10) / 10;
};
const log = (m: string) => process.stderr.write(`bench:hcn: ${m}\n`);

async function until<T>(what: string, ms: number, f: () => T | false | undefined | Promise<T | false | undefined>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main() {
  if (!fs.existsSync(cliExe) || !fs.existsSync(cniExe)) throw new Error('run npm run package:windows first');
  ensureWinePrefix();
  installStandins();
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'bs-bench-hcn-'));
  const storeName = `bs-bench-hcn-${process.pid}`;
  const sd = await startStandin();
  sd.addInterface('vEthernet (Ethernet)', {}, [{ destination: '192.168.50.0/24', nextHop: '0.0.0.0', origin: 1 }, { destination: '0.0.0.0/0', nextHop: '192.168.50.1' }]);
  const peerPort = await freePort('127.0.0.3');
  const peer = new Speaker({ asn: 65099, routerId: '127.0.0.3', listen: { address: '127.0.0.3', port: peerPort }, peers: [{ address: '127.0.0.1', asn: 65010, passive: true, holdTime: 30 }] });
  await peer.start();
  const statusPort = await freePort('127.0.0.1');
  const pipe = `\\\\.\\pipe\\bs-bench-hcn-${process.pid}`;
  const config = path.join(dir, 'node.yaml');
  fs.writeFileSync(config, `node: { name: win-bench, os: windows }
bgp: { asn: 65010, routerId: 127.0.0.1, listen: false, peers: [{ address: 127.0.0.3, asn: 65099, port: ${peerPort}, holdTime: 30 }] }
ipam: { store: C:\\${storeName}\\store, pools: [{ name: p4, cidr: 10.244.0.0/16, blockSize: 26, natOutgoing: true }] }
dataplane: { kind: hns, mode: l2bridge, network: cbr0, adapter: Ethernet, ownedPrefixes: [10.0.0.0/8] }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '${pipe}' }
`);
  const d = startWine(cliExe, ['run', '-c', zPath(config)], { timeoutMs: 3_600_000, env: standinEnv(sd.port) });
  const get = async (p: string) => (await (await fetch(`http://127.0.0.1:${statusPort}${p}`)).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    await until('the daemon', 240_000, () => get('/dataplane').then((x) => x.passes >= 1, () => false));
    const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'cbr0', type: 'blockspeaker', socket: pipe, capabilities: { portMappings: true, dns: true },
      runtimeConfig: { portMappings: [{ hostPort: 30080, containerPort: 80, protocol: 'tcp' }], dns: { servers: ['10.96.0.10'], searches: ['svc.cluster.local'] } } });
    const call = async (cmd: string, id: string, ns: string) => {
      const t0 = performance.now();
      const r = await runWine(cniExe, [], { stdin: conf, env: { CNI_COMMAND: cmd, CNI_CONTAINERID: id, CNI_NETNS: ns, CNI_IFNAME: 'eth0', CNI_PATH: 'C:\\cni' } });
      const ms = performance.now() - t0;
      if (r.code !== 0) throw new Error(`${cmd} ${id}: ${r.stdout}${r.stderr.slice(-300)}`);
      return ms;
    };
    // Warm-up: the first ADD claims the node's first block and creates the network (not a per-pod cost).
    const warm = sd.addNamespace();
    await call('ADD', 'warmup0', warm);
    const version: number[] = [];
    const add: number[] = [];
    const del: number[] = [];
    for (let i = 0; i < COUNT; i++) {
      const ns = sd.addNamespace();
      version.push(await call('VERSION', `v${i}`, ns));
      add.push(await call('ADD', `pod${i}`, ns));
      del.push(await call('DEL', `pod${i}`, ns));
    }
    await call('DEL', 'warmup0', warm);
    log(`CNI p50: VERSION ${median(version)} ms, ADD ${median(add)} ms, DEL ${median(del)} ms`);

    // N remote blocks at once (10.250.0.0/16 and up: inside ownedPrefixes, outside the pool).
    await until('the BGP session', 120_000, () => peer.peers()[0]?.state === 'Established');
    const prefixes = Array.from({ length: ROUTES }, (_, i) => `10.${250 + (i >> 10)}.${(i >> 2) & 255}.${(i & 3) * 64}/26`);
    const creates = () => sd.calls.filter((c) => c.fn === 'CreateIpForwardEntry2' && c.hr === 0);
    const deletes = () => sd.calls.filter((c) => c.fn === 'DeleteIpForwardEntry2' && c.hr === 0);
    const c0 = creates().length;
    const t0 = Date.now();
    for (const p of prefixes) peer.announce(p);
    await until(`${ROUTES} routes`, 600_000, () => creates().length - c0 >= ROUTES);
    const announceMs = creates()[creates().length - 1]!.at - t0;
    const addPass = (await get('/dataplane')).lastPlan;
    const d0 = deletes().length;
    const t1 = Date.now();
    for (const p of prefixes) peer.withdraw(p);
    await until(`${ROUTES} withdrawals`, 600_000, () => deletes().length - d0 >= ROUTES);
    const withdrawMs = deletes()[deletes().length - 1]!.at - t1;
    const delPass = (await get('/dataplane')).lastPlan;
    log(`${ROUTES} routes: announce -> last CreateIpForwardEntry2 ${announceMs} ms (pass ${addPass.durationMs} ms, ${addPass.ops} ops); withdraw -> last delete ${withdrawMs} ms`);
    console.log(JSON.stringify({
      bench: 'hcn-dataplane', under: 'wine (stand-in DLLs; indicative only)', cpus: cpus().length, load: loadavg()[0].toFixed(2), count: COUNT,
      cni_p50_ms: { version: median(version), add: median(add), del: median(del), add_minus_version: Math.round((median(add) - median(version)) * 10) / 10 },
      routes: { n: ROUTES, announce_to_last_create_ms: announceMs, add_pass_ms: addPass.durationMs, add_pass_ops: addPass.ops, withdraw_to_last_delete_ms: withdrawMs, delete_pass_ms: delPass.durationMs },
    }));
  } finally {
    d.kill();
    await d.exited;
    await peer.stop();
    await sd.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
  }
}

main().catch((e) => {
  log(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
