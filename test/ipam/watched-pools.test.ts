// Pools fed by a watch (the daemon on Calico's layout): allocations answer from them and never list the pool keys;
// a pool the watch removes is no longer allocated from; undefined goes back to reading the store.
import t from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { ipamConfig, node } from './calico-fixtures.ts';

class CountingStore extends MemoryStore {
  poolLists = 0;
  override async list(prefix: string) {
    if (prefix.includes('/ippools/')) this.poolLists++;
    return super.list(prefix);
  }
}

t.test('allocations use the watched pools without listing the pool keys', async (t) => {
  const store = new CountingStore();
  for (const kv of [ipamConfig(true), node('linux-a', 'linux', '10.0.0.11')]) await store.put(kv.key, kv.value);
  const ipam = new Ipam(store, { layout: calicoLayout(), warn: () => undefined });
  const a = await ipam.addPool({ name: 'a', cidr: '10.244.0.0/24', blockSize: 28 });
  const b = await ipam.addPool({ name: 'b', cidr: '10.245.0.0/24', blockSize: 28 });
  ipam.ds.setWatchedPools([b, a]);
  store.poolLists = 0;
  const r1 = await ipam.autoAssign({ host: 'linux-a', num4: 2, handle: 'h1' });
  t.match(r1.ipv4[0].ip, /^10\.244\.0\./, 'pools in name order');
  t.equal(store.poolLists, 0, 'no pool listing per allocation');
  ipam.ds.setWatchedPools([b]);
  const r2 = await ipam.autoAssign({ host: 'linux-a', num4: 1, handle: 'h2' });
  t.match(r2.ipv4[0].ip, /^10\.245\.0\./, 'a pool the watch removed is not used');
  t.same((await ipam.listPools()).map((p) => p.name), ['b']);
  ipam.ds.setWatchedPools(undefined);
  t.same((await ipam.listPools()).map((p) => p.name), ['a', 'b'], 'back to the store');
  t.ok(store.poolLists > 0);
});
