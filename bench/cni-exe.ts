// bench/cni-exe: the Windows CNI executable (dist/windows/blockspeaker-cni.exe, a Node SEA) under wine, next to the
// same plugin natively on Linux and Debian's host-local, in one run, interleaved call by call.
//
//   npm run bench:cni-exe -- [--count N] [--host-local PATH]
//
// Start-up: CNI VERSION (no daemon, no I/O beyond stdin/stdout), per mode; plus plain node.exe -e 0 under wine,
// the floor any Node program pays there. ADD+DEL: one pod at a time, each mode against its own daemon:
//   exe-wine     blockspeaker-cni.exe under wine -> blockspeaker.exe daemon under wine, over a named pipe
//   dist-linux   bin/blockspeaker-cni (compiled dist/) -> an in-process daemon over a Unix socket
//   host-local   Debian's Go plugin (file lock, no daemon)
// Needs `npm run package:windows` and `npx tsc -p tsconfig.json` first. The final line is JSON.
import fs from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Ipam } from '../src/ipam/ipam.ts';
import { ipamHandlers } from '../src/ipc/ipam.ts';
import { startIpcServer } from '../src/ipc/server.ts';
import { openFileStore } from '../src/store/file.ts';
import { execPlugin } from './lib/exec.ts';
import { driveC, ensureWinePrefix, projectRoot, runWine, startWine, windowsDist, windowsNode, zPath } from '../packaging/windows/wine.ts';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '10' }, 'host-local': { type: 'string', default: '/usr/lib/cni/host-local' } },
});
const COUNT = Number(values.count);
const cniExe = path.join(windowsDist, 'blockspeaker-cni.exe');
const distBin = path.join(projectRoot, 'bin', 'blockspeaker-cni');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! * 10) / 10;
};

function execLinux(bin: string, env: Record<string, string>, stdin: string): Promise<{ code: number | null; out: string }> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'NODE_OPTIONS' && !k.startsWith('CNI_')) clean[k] = v;
  return execPlugin(bin, { ...clean, ...env }, stdin);
}

type Call = (env: Record<string, string>, stdin: string) => Promise<{ code: number | null; out: string }>;

interface Mode {
  name: string;
  call: Call;
  conf: string;
  startup_ms: number[];
  add_del_ms: number[];
}

const cniEnv = (cmd: string, id: string) => ({ CNI_COMMAND: cmd, CNI_CONTAINERID: id, CNI_NETNS: `ns-${id}`, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' });

async function timed(m: Mode, env: Record<string, string>, stdin: string, check: (out: string) => boolean): Promise<number> {
  const t0 = performance.now();
  const r = await m.call(env, stdin);
  const ms = performance.now() - t0;
  if (r.code !== 0 || !check(r.out)) throw new Error(`${m.name} ${env.CNI_COMMAND} failed (${r.code}): ${r.out}`);
  return ms;
}

async function main(): Promise<void> {
  if (!fs.existsSync(cniExe)) throw new Error(`${cniExe} missing: run npm run package:windows first`);
  if (!fs.existsSync(path.join(projectRoot, 'dist', 'src', 'cni', 'main.js'))) throw new Error('dist/ missing: run npx tsc -p tsconfig.json first');
  ensureWinePrefix();
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'bench-cni-exe-'));
  const storeName = `bs-bench-${process.pid}`;
  const pipe = `\\\\.\\pipe\\bs-bench-${process.pid}`;
  const cleanups: (() => unknown)[] = [() => fs.rmSync(dir, { recursive: true, force: true }), () => fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true })];
  try {
    // The Windows daemon under wine, on its own pipe.
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: bench-win, os: windows }
bgp: { asn: 65010, routerId: 10.0.0.21, listen: false }
ipam: { store: C:\\${storeName}\\store, pools: [{ name: pods, cidr: 10.66.0.0/16, blockSize: 26 }] }
dataplane: { kind: hns }
status: false
ipc: { path: '${pipe}' }
`);
    const d = startWine(path.join(windowsDist, 'blockspeaker.exe'), ['run', '-c', zPath(config), '--dry-run'], { timeoutMs: 3_600_000 });
    cleanups.unshift(() => d.kill());
    for (let i = 0; !d.output().stderr.includes('"msg":"started"'); i++) {
      if (i > 600) throw new Error(`windows daemon did not start: ${JSON.stringify(d.output())}`);
      await new Promise((r) => setTimeout(r, 500));
    }

    // The Linux daemon, in process, on the durable file store.
    const store = await openFileStore(path.join(dir, 'store'));
    cleanups.unshift(() => store.close());
    const ipam = new Ipam(store);
    await ipam.addPool({ name: 'pods', cidr: '10.64.0.0/16', blockSize: 26 });
    await ipam.setHost({ name: 'node-a', os: 'linux', labels: {} });
    const sock = path.join(dir, 'bs.sock');
    const server = await startIpcServer({ path: sock, handlers: ipamHandlers(ipam, 'node-a') });
    cleanups.unshift(() => server.close());

    const bs = (socket: string) => JSON.stringify({ cniVersion: '1.1.0', name: 'bench', type: 'sdnbridge', ipam: { type: 'blockspeaker-cni', socket } });
    const wineCall: Call = async (env, stdin) => {
      const r = await runWine(cniExe, [], { env, stdin });
      return { code: r.code, out: r.stdout };
    };
    const modes: Mode[] = [
      { name: 'exe-wine', call: wineCall, conf: bs(pipe), startup_ms: [], add_del_ms: [] },
      { name: 'dist-linux', call: (env, stdin) => execLinux(distBin, env, stdin), conf: bs(sock), startup_ms: [], add_del_ms: [] },
    ];
    if (fs.existsSync(values['host-local']!)) {
      const hl = JSON.stringify({ cniVersion: '1.0.0', name: 'bench', type: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: '10.65.0.0/16' }]], dataDir: path.join(dir, 'host-local') } });
      modes.push({ name: 'host-local', call: (env, stdin) => execLinux(values['host-local']!, env, stdin), conf: hl, startup_ms: [], add_del_ms: [] });
    } else console.error(`${values['host-local']} not found: apt-get install containernetworking-plugins`);
    const node = windowsNode();
    const nodeFloor: number[] = [];

    for (let i = -1; i < COUNT; i++) {
      // i = -1 warms every mode (page cache, wine's DLLs) and is not recorded.
      for (const m of modes) {
        const v = await timed(m, { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}', (o) => o.includes('supportedVersions'));
        const id = `${m.name}-${i + 1}`;
        const t0 = performance.now();
        await timed(m, cniEnv('ADD', id), m.conf, (o) => o.includes('"ips"'));
        await timed(m, cniEnv('DEL', id), m.conf, () => true);
        if (i >= 0) m.startup_ms.push(v), m.add_del_ms.push(performance.now() - t0);
      }
      const t0 = performance.now();
      const r = await runWine(node, ['-e', '0']);
      if (r.code !== 0) throw new Error(`node.exe -e 0 failed: ${r.stderr}`);
      if (i >= 0) nodeFloor.push(performance.now() - t0);
      console.error(`${i + 1}/${COUNT}`);
    }

    const results: Record<string, unknown> = {};
    for (const m of modes) {
      results[m.name] = { version_p50_ms: median(m.startup_ms), add_del_p50_ms: median(m.add_del_ms) };
      console.error(`${m.name.padEnd(11)} VERSION p50 ${median(m.startup_ms)} ms | ADD+DEL p50 ${median(m.add_del_ms)} ms`);
    }
    results['node.exe-wine'] = { e0_p50_ms: median(nodeFloor) };
    console.error(`node.exe -e 0 under wine p50 ${median(nodeFloor)} ms`);
    const hl = results['host-local'] as { add_del_p50_ms: number } | undefined;
    console.log(JSON.stringify({
      bench: 'cni-exe',
      count: COUNT,
      cpus: cpus().length,
      loadavg1: Math.round(loadavg()[0]! * 100) / 100,
      exe_bytes: fs.statSync(cniExe).size,
      results,
      ratio_exe_wine_vs_node_floor: Math.round((median(modes[0]!.startup_ms) / median(nodeFloor)) * 100) / 100,
      ratio_dist_vs_host_local_add_del: hl ? Math.round((median(modes[1]!.add_del_ms) / hl.add_del_p50_ms) * 10) / 10 : null,
    }));
  } finally {
    for (const c of cleanups) await c();
  }
}

await main();
