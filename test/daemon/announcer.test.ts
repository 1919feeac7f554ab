// IPAM -> announcements: claims, borrows and releases show up as announce/withdraw calls, and only the changes.
import t from 'tap';
import { Ipam } from '../../src/ipam/ipam.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { IpamAnnouncer } from '../../src/daemon/announcer.ts';
import type { Prefix } from '../../src/net/ip.ts';

class Recorder {
  readonly table = new Set<string>();
  readonly log: string[] = [];
  announce(p: Prefix): void {
    this.log.push(`+${p}`);
    this.table.add(p.toString());
  }
  withdraw(p: Prefix): boolean {
    this.log.push(`-${p}`);
    return this.table.delete(p.toString());
  }
}

const settle = async (a: IpamAnnouncer) => {
  await new Promise((r) => setTimeout(r, 30));
  await a.refresh();
};

t.test('claims, borrows and releases reach the announcement set', async (t) => {
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/25', blockSize: 26 });
  await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
  await ipam.setHost({ name: 'b', os: 'linux', labels: {} });
  const rec = new Recorder();
  const ann = new IpamAnnouncer(ipam, 'a', rec, { debounceMs: 1 });
  await ann.start();
  t.teardown(() => ann.stop());
  t.same([...rec.table], [], 'nothing to announce yet');

  const first = await ipam.autoAssign({ host: 'a', num4: 1, handle: 'x' });
  await settle(ann);
  t.same([...rec.table], [first.ipv4[0].block], 'the claimed block is announced as an aggregate');

  // b takes the other block, then a must borrow from b once its own block is full.
  await ipam.autoAssign({ host: 'b', num4: 1 });
  await ipam.setConfig({ maxBlocksPerHost: 0 });
  const more = await ipam.autoAssign({ host: 'a', num4: 64, handle: 'y' });
  const borrowed = more.ipv4.filter((x) => x.block !== first.ipv4[0].block);
  t.equal(borrowed.length, 1, 'one address borrowed from b');
  await settle(ann);
  t.same([...rec.table].sort(), [first.ipv4[0].block, `${borrowed[0].ip}/32`].sort(), 'the borrowed /32 is announced');
  const logLen = rec.log.length;

  await ann.refresh();
  t.equal(rec.log.length, logLen, 'a refresh without changes sends nothing');

  await ipam.releaseIPs([borrowed[0].ip]);
  await settle(ann);
  t.same([...rec.table], [first.ipv4[0].block], 'released borrowed address is withdrawn');
  t.equal(rec.log[rec.log.length - 1], `-${borrowed[0].ip}/32`);

  await ipam.releaseByHandle('x');
  await ipam.releaseByHandle('y');
  await ipam.releaseAffinity(first.ipv4[0].block, 'a');
  await settle(ann);
  t.same([...rec.table], [], 'released block is withdrawn');
  t.equal(ann.stats.errors, 0);
});

t.test('summarisation joins sibling blocks of the host', async (t) => {
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/24', blockSize: 26 });
  await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
  await ipam.claimAffinity('10.0.0.0/25', 'a');
  const rec = new Recorder();
  const ann = new IpamAnnouncer(ipam, 'a', rec, { summarise: true });
  await ann.start();
  t.teardown(() => ann.stop());
  t.same([...rec.table], ['10.0.0.0/25']);
});

// Yield to the event loop up to `turns` times until `done` (no clock involved: a trailing debounce of an hour
// would never get there).
const turnsUntil = async (done: () => boolean, turns = 2000) => {
  for (let i = 0; i < turns && !done(); i++) await new Promise((r) => setImmediate(r));
  return done();
};

t.test('a change after a quiet spell is announced at once; changes inside the window wait for its end', async (t) => {
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/24', blockSize: 26 });
  await ipam.addPool({ name: 'q', cidr: '10.1.0.0/24', blockSize: 26 });
  await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
  const rec = new Recorder();
  let clock = 1_000_000;
  const ann = new IpamAnnouncer(ipam, 'a', rec, { debounceMs: 3_600_000, now: () => clock });
  await ann.start();
  t.teardown(() => ann.stop());
  const startRefreshes = ann.stats.refreshes;

  const first = await ipam.autoAssign({ host: 'a', num4: 1, pools: ['p'], handle: 'x' });
  t.ok(await turnsUntil(() => rec.table.has(first.ipv4[0].block)), 'the first claim is announced without waiting an hour');
  t.equal(ann.stats.refreshes, startRefreshes + 1, 'by one refresh');

  clock += 1000; // inside the hour
  const burst = [];
  for (let i = 0; i < 5; i++) burst.push((await ipam.autoAssign({ host: 'a', num4: 64, pools: ['q', 'p'], handle: `b${i}` })).ipv4[0].block);
  await turnsUntil(() => false, 200);
  t.equal(ann.stats.refreshes, startRefreshes + 1, 'a burst inside the window makes no refresh before it ends');
  t.notOk(burst.some((b) => b !== first.ipv4[0].block && rec.table.has(b)), 'its blocks are not announced yet');
  await ann.refresh();
  t.ok(burst.every((b) => rec.table.has(b)), 'and all of them are at the next refresh');
});
