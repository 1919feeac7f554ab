// Endpoint reconciliation, the other direction: addresses held by pods' handles whose endpoint is gone are released
// after the grace period (clock injected), the node's own handles never; listed at /dataplane and counted.
import t from 'tap';
import { HnsDataplane } from '../../src/daemon/hns.ts';
import { FakeExecutor, FakeHns } from '../../src/hns/fake.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { MemoryStore } from '../../src/store/memory.ts';

const log = { info: () => undefined, warn: () => undefined, error: () => undefined };

t.test('a handle whose endpoint is gone is released after the grace period, not before', async (t) => {
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p', cidr: '10.30.0.0/24', blockSize: 28 });
  await ipam.setHost({ name: 'win', os: 'windows', labels: {} });
  let now = 1_000_000;
  const fake = new FakeHns();
  const hns = new HnsDataplane({
    dp: { kind: 'hns', mode: 'l2bridge', network: 'n', endpointGraceSeconds: 60 }, host: 'win', ipam, executor: new FakeExecutor(fake), fake, log, now: () => now,
  });
  const a = await ipam.autoAssign({ host: 'win', num4: 1, handle: 'pod-a.eth0' });
  const b = await ipam.autoAssign({ host: 'win', num4: 1, handle: 'pod-b.eth0' });
  await ipam.autoAssign({ host: 'win', num4: 1, handle: 'blockspeaker-gateway.win.p' });
  await hns.reconciler.runOnce(); // creates the network: from now on, missing endpoints count
  fake.createEndpoint(fake.networkByName('n')!.ID!, a.ipv4[0].ip, 'pod-a');
  await hns.reconciler.runOnce();
  t.same((hns.status().endpoints as { awaitingRelease: { handle: string }[] }).awaitingRelease.map((x) => x.handle), ['pod-b.eth0'], 'pod-b has no endpoint: waiting');
  now += 59_000;
  await hns.reconciler.runOnce();
  t.equal(hns.orphansReleased, 0, 'not before the grace period');
  now += 2_000;
  await hns.reconciler.runOnce();
  t.equal(hns.orphansReleased, 1);
  t.notOk(await ipam.ds.handle('pod-b.eth0'), "pod-b's address released");
  t.ok(await ipam.ds.handle('pod-a.eth0'), 'pod-a (endpoint present) kept');
  t.ok(await ipam.ds.handle('blockspeaker-gateway.win.p'), "the node's own handle kept");
  t.match((hns.status().endpoints as { lastReleased: unknown[] }).lastReleased, [{ handle: 'pod-b.eth0', ips: [b.ipv4[0].ip] }]);
  hns.stop();
});
