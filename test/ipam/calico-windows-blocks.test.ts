// On Calico's layout every block a Windows host creates carries Calico's reservation (0, 1, 2 and last on the
// windows-reserved-ipam-handle attribute), the second and later ones too, even when one request claims several
// blocks in one pass; a Linux host's blocks reserve nothing. (Our own layout reserves .1/.2 only in the first.)
import t from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { decodeBlock, isWindowsReserved } from '../../src/calico/ipam-model.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { ipamConfig, node } from './calico-fixtures.ts';

t.test('every Windows block gets Calico\'s four reservations; Linux blocks none', async (t) => {
  const store = new MemoryStore();
  for (const kv of [ipamConfig(true), node('win-c', 'windows', '10.0.0.13'), node('linux-a', 'linux', '10.0.0.11')]) await store.put(kv.key, kv.value);
  const ipam = new Ipam(store, { layout: calicoLayout(), warn: () => undefined });
  await ipam.addPool({ name: 'p4', cidr: '10.244.0.0/24', blockSize: 28 });
  const w = await ipam.autoAssign({ host: 'win-c', num4: 30, handle: 'pods-w' });
  t.equal(w.ipv4.length, 30, 'one request, three blocks');
  const l = await ipam.autoAssign({ host: 'linux-a', num4: 3, handle: 'pods-l' });
  t.equal(l.ipv4.length, 3);
  const reservedOf = new Map<string, { host: string | null; ords: number[] }>();
  for (const kv of await store.list(calicoKeys.blocks)) {
    const b = decodeBlock(kv.key, kv.value);
    reservedOf.set(b.cidr, { host: b.affinity, ords: b.allocations.flatMap((a, o) => (a !== null && isWindowsReserved(b.attributes[a]) ? [o] : [])) });
  }
  const win = [...reservedOf.values()].filter((b) => b.host === 'host:win-c');
  t.equal(win.length, 3);
  t.ok(win.every((b) => JSON.stringify(b.ords) === '[0,1,2,15]'), `every Windows block reserves 0, 1, 2, 15 (${JSON.stringify(win)})`);
  t.same([...reservedOf.values()].filter((b) => b.host === 'host:linux-a').map((b) => b.ords), [[]], 'the Linux block reserves nothing');
  const used = new Set(w.ipv4.map((a) => a.ip));
  for (const [cidr, b] of reservedOf) {
    if (b.host !== 'host:win-c') continue;
    const base = Number(cidr.split('/')[0].split('.')[3]);
    for (const o of b.ords) t.notOk(used.has(`10.244.0.${base + o}`), `${cidr} ordinal ${o} is no pod's`);
  }
  const report = await checkCalico(store);
  t.same(report.problems, []);
  t.equal(report.reservedForWindows, 12);
});
