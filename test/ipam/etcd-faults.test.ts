// IPAM on a single-member etcd under faults, with several hosts allocating and releasing in separate processes:
// a client killed with SIGKILL mid-run and started again; the etcd server itself killed and restarted mid-run.
// Nothing acknowledged is lost, nothing is allocated twice, and every request either succeeded or failed with a
// clear error (the children's output lines say which).
import t, { type Test } from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { kill9, startChild, verify, waitFor, type ChildRun } from './etcd-run.ts';

const HOSTS = ['h1', 'h2', 'h3'];
const PER_HOST = Number(process.env.ETCD_FAULT_PER_HOST ?? 240);
const hostsOs = new Map(HOSTS.map((h) => [h, 'linux']));

async function setup(url: string): Promise<void> {
  const ipam = new Ipam(await openStore(url));
  // Room for everyone (64 blocks of 64), so that every failure would be a fault, not exhaustion.
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/20', blockSize: 26 });
  for (const h of HOSTS) await ipam.setHost({ name: h, os: 'linux', labels: {} });
  await ipam.store.close();
}

async function check(t: Test, url: string, runs: ChildRun[]): Promise<void> {
  for (const r of runs) {
    const res = await r.done;
    if (!r.killed) t.equal(res.code, 0, `${r.host} (pid ${r.proc.pid}) finished: ${res.stderr.split('\n').filter((l) => !/retrying|resolving|lost|applied|sending again/.test(l)).slice(-3).join(' | ')}`);
  }
  const ipam = new Ipam(await openStore(url));
  try {
    const v = await verify(ipam, runs, hostsOs);
    t.ok(v.acked > 0, `${v.acked} acknowledged and not released, ${v.held} held`);
    t.same(v.lost, [], 'nothing acknowledged is lost');
    t.same(v.duplicated, [], 'no handle holds two addresses');
    t.same(v.unreleased, [], 'acknowledged releases stay released');
    t.same(v.unexplained, [], 'everything a finished child holds was acknowledged or reported as outcome unknown');
    t.same(v.unclear, [], `every failure is a clear error (${v.errors.length} failures${v.errors.length ? `: ${v.errors.slice(0, 3).join(' | ')}` : ''})`);
  } finally {
    await ipam.store.close();
  }
  const stderr = (await Promise.all(runs.map((r) => r.done))).map((d) => d.stderr).join('');
  const count = (re: RegExp) => stderr.split('\n').filter((l) => re.test(l)).length;
  t.comment(
    `client log: ${count(/retrying/)} retries, ${count(/outcome unknown, resolving/)} unknown outcomes ` +
      `(${count(/had applied/)} had applied, ${count(/sending again/)} sent again), ${count(/watch .* lost/)} watch reconnects`,
  );
}

t.test('a client killed with SIGKILL mid-run, then started again', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  await setup(etcd.url);
  const runs = HOSTS.map((h) => startChild(etcd.url, h, PER_HOST, 4, 5));
  t.teardown(() => runs.forEach((r) => r.proc.kill('SIGKILL')));
  const victim = runs[1];
  await waitFor('h2 to get going', () => victim.acks() >= 40);
  kill9(victim);
  await victim.done;
  t.comment(`h2 killed after ${victim.acks()} acknowledgements`);
  // The same host again, in a new process: it picks up the host's blocks (and any claim left pending).
  runs.push(startChild(etcd.url, 'h2', PER_HOST / 2, 4, 5));
  await check(t, etcd.url, runs);
});

t.test('the whole (single-member) etcd killed with SIGKILL and restarted mid-run', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  await setup(etcd.url);
  const runs = HOSTS.map((h) => startChild(etcd.url, h, PER_HOST, 4, 5));
  t.teardown(() => runs.forEach((r) => r.proc.kill('SIGKILL')));
  await waitFor('allocations to flow', () => runs.reduce((n, r) => n + r.acks(), 0) >= 120);
  await etcd.kill(0);
  const ackedAtKill = runs.reduce((n, r) => n + r.acks(), 0);
  await new Promise((r) => setTimeout(r, 1500));
  await etcd.restart(0);
  t.comment(`etcd killed after ${ackedAtKill} acknowledgements, back after ~1.5 s`);
  await check(t, etcd.url, runs);
  t.ok(runs.reduce((n, r) => n + r.acks(), 0) > ackedAtKill, 'allocations went on after the restart');
});
