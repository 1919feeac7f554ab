// A reconcile pass that adds 10,000 management-vNIC routes (l2bridge: 10,000 add-host-route ops, batches of 500)
// plus its read, through the PowerShell executor with (a) one long-lived worker (ScriptWorker) and (b) one process
// per batch (what processRunner does with powershell.exe). No PowerShell on Linux: both run the stand-in worker
// (node, test/hns/worker-standin.mjs) that speaks worker.ps1's protocol, so (b) pays a node start per batch where
// Windows pays a powershell.exe start plus the HNS.V2.psm1 import (much more). Rounds alternate a and b.
// Usage: node --import tsx bench/hns-worker.ts [rounds]   Prints lines, then one JSON line.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { buildDesired } from '../src/hns/desired.ts';
import { emptySnapshot } from '../src/hns/model.ts';
import { planHns } from '../src/hns/planner.ts';
import { PowerShellExecutor, type PowerShellResult, type PowerShellRunner } from '../src/hns/powershell.ts';
import { ScriptWorker } from '../src/hns/worker.ts';

const rounds = Number(process.argv[2] ?? 5);
const standin = new URL('../test/hns/worker-standin.mjs', import.meta.url).pathname;
const v4 = (n: number) => `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;

const desired = buildDesired({
  config: { mode: 'l2bridge', network: 'n', adapter: 'Ethernet', pools: [{ cidr: '10.0.0.0/16', gateway: '10.0.0.1' }], ownedPrefixes: ['10.0.0.0/8'] },
  localBlocks: [],
  remoteRoutes: Array.from({ length: 10_000 }, (_, i) => ({ prefix: `${v4(((10 << 24) >>> 0) + 0x10000 + i * 64)}/26`, nextHop: `192.168.1.${(i % 100) + 1}` })),
});
const ops = planHns(emptySnapshot(), desired).ops;
if (ops.length !== 10_000) throw new Error(`expected 10,000 ops, planned ${ops.length}`);

/** One process per script, as processRunner starts powershell.exe per batch. */
const spawnPerBatch: PowerShellRunner = {
  run: (script) =>
    new Promise<PowerShellResult>((resolve, reject) => {
      const child = spawn(process.execPath, [standin], { stdio: ['pipe', 'pipe', 'ignore'] });
      let buf = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        for (const line of buf.split('\n')) {
          if (!line.startsWith('{')) continue;
          const r = JSON.parse(line);
          child.kill();
          resolve({ code: r.code, stdout: r.stdout, stderr: r.stderr });
          return;
        }
      });
      child.on('error', reject);
      child.stdin.write(JSON.stringify({ id: 1, script }) + '\n');
    }),
};

async function pass(runner: PowerShellRunner): Promise<number> {
  const ex = new PowerShellExecutor({ runner, network: 'n', interfaceAlias: 'vEthernet (Ethernet)', batchSize: 500 });
  const t0 = performance.now();
  await ex.read();
  const r = await ex.apply(ops);
  if (r.error || r.applied !== ops.length) throw new Error(`applied ${r.applied}: ${r.error?.message}`);
  return performance.now() - t0;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const worker = new ScriptWorker({ command: process.execPath, args: [standin] });
await pass(worker); // start the worker once, as the daemon does at its first pass
const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < rounds; i++) {
  a.push(await pass(worker));
  b.push(await pass(spawnPerBatch));
}
worker.close();
const out = { bench: 'hns-worker', ops: ops.length, batches: Math.ceil(ops.length / 500) + 1, rounds, workerMedianMs: Math.round(median(a)), spawnPerBatchMedianMs: Math.round(median(b)), ratio: Math.round((median(b) / median(a)) * 100) / 100, workerStarts: worker.stats().starts };
console.log(`long-lived worker: median ${out.workerMedianMs} ms per pass; one process per batch: ${out.spawnPerBatchMedianMs} ms (x${out.ratio})`);
console.log(JSON.stringify(out));
