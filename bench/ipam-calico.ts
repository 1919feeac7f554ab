// bench/ipam-calico: IPAM allocations per second and p99 on one real etcd member, blockspeaker's own layout against
// Calico's (layout calico: Calico's JSON with exact 19-digit sequence numbers), side by side in one run.
//
//   npm run bench:ipam-calico -- [--count N] [--in-flight K] [--rounds R]
//
// Each round runs both layouts in turn (order alternating) under a fresh key prefix of the same etcd: a /16 pool of
// /26 blocks, one Windows host (so its blocks carry Calico's reservations) allocating --count addresses with K
// requests in flight, each with its own handle. Throughput = allocations / wall time; p99 over all latencies of
// that layout. Prints a final JSON line with medians over rounds and the calico/blockspeaker ratio.
import { parseArgs } from 'node:util';
import { Ipam } from '../src/ipam/ipam.ts';
import { layoutByName } from '../src/ipam/layouts.ts';
import { openStore } from '../src/store/open.ts';
import { EtcdCluster } from '../test/kit/etcd-cluster.ts';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '400' }, 'in-flight': { type: 'string', default: '1' }, rounds: { type: 'string', default: '3' } },
});
const COUNT = Number(values.count);
const IN_FLIGHT = Number(values['in-flight']);
const ROUNDS = Number(values.rounds);

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function once(url: string, layout: 'blockspeaker' | 'calico'): Promise<{ opsPerSec: number; lat: number[] }> {
  const store = await openStore(url);
  const ipam = new Ipam(store, { layout: layoutByName(layout) });
  await ipam.setConfig({ strictAffinity: true });
  await ipam.addPool({ name: 'pods', cidr: '10.128.0.0/16', blockSize: 26 });
  await ipam.setHost({ name: 'win-1', os: 'windows', labels: {} });
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < COUNT) {
        const i = next++;
        const s = performance.now();
        const r = await ipam.autoAssign({ host: 'win-1', num4: 1, handle: `pod-${i}` });
        if (r.ipv4.length !== 1) throw new Error(`${layout}: allocation ${i} failed: ${r.messages.join('; ')}`);
        lat.push(performance.now() - s);
      }
    }),
  );
  const wall = performance.now() - t0;
  await store.close();
  return { opsPerSec: (COUNT / wall) * 1000, lat };
}

const fakeTap = { teardown: (fn: () => unknown) => cleanups.push(fn) } as unknown as Parameters<typeof EtcdCluster.start>[0];
const cleanups: (() => unknown)[] = [];
const etcd = await EtcdCluster.start(fakeTap);
const per: Record<string, { ops: number[]; lat: number[] }> = { blockspeaker: { ops: [], lat: [] }, calico: { ops: [], lat: [] } };
try {
  for (let r = 0; r < ROUNDS; r++) {
    const order: ('blockspeaker' | 'calico')[] = r % 2 === 0 ? ['blockspeaker', 'calico'] : ['calico', 'blockspeaker'];
    for (const layout of order) {
      const res = await once(`${etcd.url}/bench-${r}-${layout}`, layout);
      per[layout].ops.push(res.opsPerSec);
      per[layout].lat.push(...res.lat);
      console.log(`round ${r + 1} ${layout.padEnd(12)} ${res.opsPerSec.toFixed(0).padStart(6)} allocations/s  p99 ${pct([...res.lat].sort((a, b) => a - b), 0.99).toFixed(1)} ms`);
    }
  }
} finally {
  for (const fn of cleanups.reverse()) await fn();
}
const sum = (k: string) => {
  const sorted = [...per[k].lat].sort((a, b) => a - b);
  return { opsPerSec: Math.round(median(per[k].ops)), p50ms: +pct(sorted, 0.5).toFixed(2), p99ms: +pct(sorted, 0.99).toFixed(2) };
};
const ours = sum('blockspeaker');
const calico = sum('calico');
console.log(JSON.stringify({
  bench: 'ipam-calico', count: COUNT, inFlight: IN_FLIGHT, rounds: ROUNDS, blockspeaker: ours, calico,
  throughputRatio: +(ours.opsPerSec / calico.opsPerSec).toFixed(2), p99Ratio: +(calico.p99ms / ours.p99ms).toFixed(2),
}));
