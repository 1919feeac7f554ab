// `blockspeaker ipam --store DIR migrate --to etcd://...`: an embedded store with real IPAM state is copied into a
// real etcd; the copy refuses a target that already has IPAM keys unless --force, verifies what it wrote, and IPAM
// carries on against etcd with everything it had.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openFileStore } from '../../src/store/file.ts';
import { migrateStore } from '../../src/store/migrate.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openStore } from '../../src/store/open.ts';
import { checkInvariants } from '../ipam/invariants.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin', 'blockspeaker.js');

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env.BLOCKSPEAKER_STORE;
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

t.test('migrate an embedded store into etcd', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const dir = mkdtempSync(join(tmpdir(), 'bs-migrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  // Real IPAM state: two pools, a Windows and a Linux host, allocations, a release, a borrowed address.
  const src = new Ipam(await openFileStore(dir));
  await src.addPool({ name: 'lin', cidr: '10.0.0.0/24', blockSize: 28 });
  await src.addPool({ name: 'win', cidr: '10.1.0.0/24', blockSize: 26, nodeSelector: 'os == "windows"' });
  await src.setHost({ name: 'a', os: 'linux', labels: {} });
  await src.setHost({ name: 'w', os: 'windows', labels: { os: 'windows' } });
  for (let i = 0; i < 40; i++) await src.autoAssign({ host: i % 4 === 0 ? 'w' : 'a', num4: 1, handle: `c${i}` });
  await src.releaseByHandle('c5');
  const before = await src.blocks();
  const srcKeys = await src.store.list('');
  const hostsOs = new Map([['a', 'linux'], ['w', 'windows']]);
  const held = await checkInvariants(src, undefined, hostsOs);
  await src.store.close();

  const ok = await cli(['ipam', '--store', dir, 'migrate', '--to', etcd.url]);
  t.equal(ok.code, 0, `migrate exits 0 ${ok.stderr}`);
  const out = JSON.parse(ok.stdout);
  t.match(out, { from: `file:${dir}`, to: etcd.url, keys: srcKeys.length, deleted: 0, replaced: 0, verified: true });

  const again = await cli(['ipam', '--store', dir, 'migrate', '--to', etcd.url]);
  t.equal(again.code, 1, 'a second copy is refused');
  t.match(again.stderr, /already holds \d+ keys under \/blockspeaker\/ipam\/; refusing .* --force/);

  // The etcd copy is the same IPAM state, and IPAM works on from there.
  const dst = new Ipam(await openStore(etcd.url));
  t.teardown(() => dst.store.close());
  t.same(await dst.blocks(), before, 'same blocks');
  t.same([...(await checkInvariants(dst, undefined, hostsOs))], [...held], 'same allocations, consistent');
  const r = await dst.autoAssign({ host: 'a', num4: 1, handle: 'after' });
  t.equal(r.ipv4.length, 1, 'allocates on etcd');
  t.notOk([...held.keys()].includes(r.ipv4[0].ip), 'a new address, not one already held');

  // --force replaces: keys only the target has under /blockspeaker/ipam/ go, the rest is overwritten.
  await dst.store.put('/blockspeaker/ipam/v1/hosts/stray', '{}');
  await dst.store.put('/other/app', 'kept');
  const forced = await cli(['ipam', '--store', dir, 'migrate', '--to', etcd.url, '--force']);
  t.equal(forced.code, 0, forced.stderr);
  t.match(JSON.parse(forced.stdout), { keys: srcKeys.length, verified: true });
  t.equal(await dst.store.get('/blockspeaker/ipam/v1/hosts/stray'), undefined, 'stray IPAM key removed');
  t.equal((await dst.store.get('/other/app'))?.value, 'kept', 'keys outside /blockspeaker/ipam/ untouched');
  t.same([...(await checkInvariants(dst, undefined, hostsOs))], [...held], 'back to the source state');

  const bad = await cli(['ipam', '--store', dir, 'migrate']);
  t.equal(bad.code, 2, 'usage error without --to');
  t.match(bad.stderr, /--to is required/);
});

t.test('migrateStore notices a source that changes during the copy', async (t) => {
  const from = new MemoryStore();
  for (let i = 0; i < 10; i++) await from.put(`/blockspeaker/ipam/v1/k${i}`, String(i));
  const to = new MemoryStore();
  // A target whose writes let another writer slip into the source.
  const sneaky = Object.assign(Object.create(to), {
    txn: async (...args: Parameters<MemoryStore['txn']>) => {
      await from.put('/blockspeaker/ipam/v1/late', 'x');
      return to.txn(...args);
    },
  });
  await t.rejects(migrateStore(from, sneaky), { name: 'StoreError', message: /changed while it was copied/ });
});
