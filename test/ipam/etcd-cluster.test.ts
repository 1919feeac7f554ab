// IPAM on a three-member etcd cluster: while hosts allocate and release in separate processes, the leader is
// stopped and later started again. The clients know all three endpoints and carry on through the election.
// Nothing acknowledged is lost, nothing is allocated twice, every request succeeded or failed with a clear error.
import t from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { startChild, verify, waitFor } from './etcd-run.ts';

const HOSTS = ['h1', 'h2', 'h3'];
const PER_HOST = Number(process.env.ETCD_FAULT_PER_HOST ?? 240);

t.test('one member of three (the leader) stopped and restarted mid-run', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t, { size: 3 });
  const setup = new Ipam(await openStore(etcd.url));
  await setup.addPool({ name: 'p', cidr: '10.0.0.0/20', blockSize: 26 });
  for (const h of HOSTS) await setup.setHost({ name: h, os: 'linux', labels: {} });
  await setup.store.close();

  const runs = HOSTS.map((h) => startChild(etcd.url, h, PER_HOST, 4, 5));
  t.teardown(() => runs.forEach((r) => r.proc.kill('SIGKILL')));
  await waitFor('allocations to flow', () => runs.reduce((n, r) => n + r.acks(), 0) >= 120);
  const leader = (await etcd.leader()) ?? 0;
  await etcd.stop(leader);
  const atStop = runs.reduce((n, r) => n + r.acks(), 0);
  await waitFor('allocations to go on with two members', () => runs.reduce((n, r) => n + r.acks(), 0) >= atStop + 60, 30000);
  await etcd.restart(leader);
  const atRestart = runs.reduce((n, r) => n + r.acks(), 0);
  t.comment(`leader m${leader} stopped after ${atStop} acknowledgements, restarted after ${atRestart}`);
  t.ok(atRestart > atStop, 'the two remaining members elected a leader and served requests');

  for (const r of runs) {
    const res = await r.done;
    t.equal(res.code, 0, `${r.host} finished`);
  }
  const ipam = new Ipam(await openStore(etcd.url));
  t.teardown(() => ipam.store.close());
  const v = await verify(ipam, runs, new Map(HOSTS.map((h) => [h, 'linux'])));
  t.ok(v.acked > 0, `${v.acked} acknowledged and not released, ${v.held} held`);
  t.same(v.lost, [], 'nothing acknowledged is lost');
  t.same(v.duplicated, [], 'no handle holds two addresses');
  t.same(v.unreleased, [], 'acknowledged releases stay released');
  t.same(v.unexplained, [], 'everything held was acknowledged or reported as outcome unknown');
  t.same(v.unclear, [], `every failure is a clear error (${v.errors.length} failures${v.errors.length ? `: ${v.errors.slice(0, 3).join(' | ')}` : ''})`);
  // Every member has the same data once the stopped one has caught up.
  await etcd.waitHealthy();
  const views = await Promise.all(
    etcd.endpoints.map(async (ep) => {
      const s = await openStore(`etcd://${ep}`);
      try {
        return JSON.stringify((await s.list('/blockspeaker/')).map((kv) => [kv.key, kv.modRevision]));
      } finally {
        await s.close();
      }
    }),
  );
  t.ok(views.every((v) => v === views[0]), 'all three members hold the same keys at the same revisions');
  const stderr = (await Promise.all(runs.map((r) => r.done))).map((d) => d.stderr).join('');
  const count = (re: RegExp) => stderr.split('\n').filter((l) => re.test(l)).length;
  t.comment(`client log: ${count(/retrying/)} retries, ${count(/outcome unknown, resolving/)} unknown outcomes (${count(/had applied/)} had applied, ${count(/sending again/)} sent again)`);
});
