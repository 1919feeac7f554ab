// bench/cni: CNI ADD+DEL latency through the blockspeaker-cni executable against the daemon's IPC socket (a real
// Ipam on the durable file store), and through Debian's host-local IPAM plugin, same count, same run.
//
//   npm run bench:cni -- [--count N] [--host-local PATH] [--no-tsx]
//
// Each plugin is executed as a runtime executes it (CNI_* env, config on stdin), one pod at a time, the modes
// interleaved pod by pod so they see the same machine load. Modes:
//   dist         bin/blockspeaker-cni running the compiled plugin (what `npm run build` produces; compiled here
//                into a temp dir so the shared dist/ is left alone)
//   tsx          bin/blockspeaker-cni running the TypeScript sources through tsx (no build)
//   shim         bin/blockspeaker-cni-shim (Perl, forwards the invocation to the daemon's `cni.invoke`)
//   host-local   Debian's Go plugin (file lock, no fsync)
//   ipc-only     the same assign+release over the socket from this process: the cost without process start-up
// VERSION is timed too, once per pod, for each executable. The final line is JSON.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Ipam } from '../src/ipam/ipam.ts';
import { IpcClient } from '../src/ipc/client.ts';
import { ipamHandlers } from '../src/ipc/ipam.ts';
import { startIpcServer } from '../src/ipc/server.ts';
import { cniInvoke } from '../src/daemon/cni-invoke.ts';
import { openFileStore } from '../src/store/file.ts';
import { execPlugin } from './lib/exec.ts';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '100' },
    'host-local': { type: 'string', default: '/usr/lib/cni/host-local' },
    'no-tsx': { type: 'boolean', default: false },
  },
});
const COUNT = Number(values.count);
const HOST_LOCAL = values['host-local']!;
const root = new URL('..', import.meta.url).pathname;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const r2 = (x: number) => Math.round(x * 100) / 100;

const exec = execPlugin;

interface Mode {
  name: string;
  version?: () => Promise<void>;
  version_ms?: number[];
  add(i: number): Promise<void>;
  del(i: number): Promise<void>;
  add_ms: number[];
  del_ms: number[];
  pair_ms: number[];
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'NODE_OPTIONS' && !k.startsWith('CNI_')) env[k] = v;
  return env;
}

function pluginMode(name: string, bin: string, extraEnv: Record<string, string>, stdin: string): Mode {
  const run = async (cmd: string, i: number) => {
    const env = { ...baseEnv(), ...extraEnv, CNI_COMMAND: cmd, CNI_CONTAINERID: `${name}-${i}`, CNI_NETNS: `/var/run/netns/${name}-${i}`, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
    const r = await exec(bin, env, stdin);
    if (r.code !== 0) throw new Error(`${name} ${cmd} ${i} failed (${r.code}): ${r.out}`);
    if (cmd === 'VERSION' && !/"supportedVersions"/.test(r.out)) throw new Error(`${name} VERSION: ${r.out}`);
    if (cmd === 'ADD' && !/"ips"/.test(r.out)) throw new Error(`${name} ADD ${i}: no ips in ${r.out}`);
  };
  return { name, add: (i) => run('ADD', i), del: (i) => run('DEL', i), version: () => run('VERSION', 0), version_ms: [], add_ms: [], del_ms: [], pair_ms: [] };
}

/** Compile the plugin's files exactly as `npm run build` does, into a temp dir laid out like the package. */
function buildPlugin(dir: string): { bin: string; ms: number } {
  const t0 = performance.now();
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '--outDir', join(dir, 'dist'), '--rootDir', root, '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext',
    '--rewriteRelativeImportExtensions', '--allowImportingTsExtensions', '--types', 'node', '--skipLibCheck', '--strict', join(root, 'src/cni/main.ts')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc failed: ${r.stdout}${r.stderr}`);
  mkdirSync(join(dir, 'bin'));
  copyFileSync(join(root, 'bin', 'blockspeaker-cni'), join(dir, 'bin', 'blockspeaker-cni'));
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
  if (!existsSync(join(dir, 'dist', 'src', 'cni', 'main.js'))) throw new Error('tsc produced no dist/src/cni/main.js');
  return { bin: join(dir, 'bin', 'blockspeaker-cni'), ms: performance.now() - t0 };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-cni-'));
  try {
    const build = buildPlugin(join(dir, 'pkg'));
    const store = await openFileStore(join(dir, 'store'));
    const ipam = new Ipam(store);
    await ipam.addPool({ name: 'pods', cidr: '10.64.0.0/16', blockSize: 26 });
    await ipam.setHost({ name: 'node-a', os: 'linux', labels: {} });
    const sock = join(dir, 'bs.sock');
    const server = await startIpcServer({ path: sock, handlers: { ...ipamHandlers(ipam, 'node-a'), 'cni.invoke': cniInvoke } });

    const bsConf = JSON.stringify({ cniVersion: '1.0.0', name: 'bench', type: 'bridge', ipam: { type: 'blockspeaker-cni', socket: sock, routes: [{ dst: '0.0.0.0/0' }] } });
    const hlConf = JSON.stringify({ cniVersion: '1.0.0', name: 'bench', type: 'bridge', ipam: { type: 'host-local', ranges: [[{ subnet: '10.65.0.0/16' }]], dataDir: join(dir, 'host-local'), routes: [{ dst: '0.0.0.0/0' }] } });
    const modes: Mode[] = [pluginMode('dist', build.bin, {}, bsConf)];
    if (!values['no-tsx']) modes.push(pluginMode('tsx', join(root, 'bin', 'blockspeaker-cni'), { BLOCKSPEAKER_FROM_SOURCE: '1' }, bsConf));
    modes.push(pluginMode('shim', join(root, 'bin', 'blockspeaker-cni-shim'), {}, bsConf));
    if (existsSync(HOST_LOCAL)) modes.push(pluginMode('host-local', HOST_LOCAL, {}, hlConf));
    else console.error(`host-local not found at ${HOST_LOCAL}: apt-get install containernetworking-plugins`);
    const client = new IpcClient(sock);
    modes.push({
      name: 'ipc-only',
      add: async (i) => void (await client.call('ipam.assign', { containerId: `ipc-${i}`, ifname: 'eth0', addressing: { routes: [{ dst: '0.0.0.0/0' }] } })),
      del: async (i) => void (await client.call('ipam.release', { handle: `ipc-${i}.eth0` })),
      add_ms: [],
      del_ms: [],
      pair_ms: [],
    });

    // Warm up each mode once (page cache, tsx's transform cache), not measured.
    for (const m of modes) {
      await m.add(-1);
      await m.del(-1);
    }
    const wall = new Map<string, number>();
    for (let i = 0; i < COUNT; i++) {
      for (const m of modes) {
        const t0 = performance.now();
        await m.add(i);
        const t1 = performance.now();
        await m.del(i);
        const t2 = performance.now();
        m.add_ms.push(t1 - t0);
        m.del_ms.push(t2 - t1);
        m.pair_ms.push(t2 - t0);
        wall.set(m.name, (wall.get(m.name) ?? 0) + (t2 - t0));
        if (m.version) {
          const t3 = performance.now();
          await m.version();
          m.version_ms!.push(performance.now() - t3);
        }
      }
      if ((i + 1) % 25 === 0) console.error(`${i + 1}/${COUNT}`);
    }
    await client.close();
    await server.close();
    const syncs = store.stats().syncs;
    await store.close();

    const results: Record<string, unknown> = {};
    for (const m of modes) {
      const s = (xs: number[]) => {
        const sorted = [...xs].sort((a, b) => a - b);
        return { p50_ms: r2(pct(sorted, 0.5)), p99_ms: r2(pct(sorted, 0.99)) };
      };
      results[m.name] = { ...(m.version_ms ? { version: s(m.version_ms) } : {}), add: s(m.add_ms), del: s(m.del_ms), add_del: s(m.pair_ms), add_del_per_sec: r2(COUNT / (wall.get(m.name)! / 1000)) };
      console.error(`${m.name.padEnd(10)} ${m.version_ms ? `VERSION p50 ${s(m.version_ms).p50_ms} ms | ` : ''}ADD p50 ${s(m.add_ms).p50_ms} ms p99 ${s(m.add_ms).p99_ms} ms | DEL p50 ${s(m.del_ms).p50_ms} ms | ADD+DEL p50 ${s(m.pair_ms).p50_ms} ms p99 ${s(m.pair_ms).p99_ms} ms | ${r2(COUNT / (wall.get(m.name)! / 1000))} pods/s`);
    }
    console.log(
      JSON.stringify({
        bench: 'cni',
        count: COUNT,
        node: process.version,
        cpus: cpus().length,
        loadavg1: r2(loadavg()[0]!),
        build_ms: Math.round(build.ms),
        store_fsyncs: syncs,
        results,
      }),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
