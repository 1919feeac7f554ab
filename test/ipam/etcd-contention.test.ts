// Contention on a real etcd: 8 processes, each a different host, allocate through IPAM at the same time from a
// pool that is too small for all of them. Blocks are claimed concurrently, late hosts must borrow, and the pool
// runs dry. Every acknowledged address is distinct and held by its handle, every affinity is confirmed and matches
// its block, handles agree with blocks.
import t from 'tap';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { checkInvariants } from './invariants.ts';

const child = join(import.meta.dirname, 'etcd-alloc.child.ts');
const HOSTS = 8;
// Uneven demand, so that some hosts still want addresses when the free blocks are gone while others have room
// left in theirs: 4 hosts x 200 and 4 hosts x 72 (4 and a half blocks of 16 each) = 1088 requests.
const demand = (i: number) => (i < HOSTS / 2 ? 200 : 72);
const TOTAL = Array.from({ length: HOSTS }, (_, i) => demand(i)).reduce((a, b) => a + b, 0);

export function runChild(args: string[]): Promise<{ lines: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', child, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) =>
      code === 0 ? resolve({ lines: out.trim().split('\n'), stderr: err }) : reject(new Error(`child ${args[1]} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

t.test(`${HOSTS} hosts in ${HOSTS} processes allocate concurrently through etcd`, async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const setup = new Ipam(await openStore(etcd.url));
  // 64 blocks of 16 = 1024 addresses for 1088 requests: blocks are claimed concurrently, run out, the busy hosts
  // borrow from the quiet hosts' half-full blocks, and the last requests find the pool exhausted.
  await setup.addPool({ name: 'p', cidr: '10.0.0.0/22', blockSize: 28 });
  const hosts = Array.from({ length: HOSTS }, (_, i) => `host-${i}`);
  for (const h of hosts) await setup.setHost({ name: h, os: 'linux', labels: {} });
  await setup.store.close();

  const started = Date.now();
  const runs = await Promise.all(hosts.map((h, i) => runChild([etcd.url, h, String(demand(i)), '4'])));
  t.comment(`${TOTAL} requests from ${HOSTS} processes in ${Date.now() - started} ms`);
  const lines = runs.flatMap((r) => r.lines);
  const acks = lines.filter((l) => l.startsWith('ACK ')).map((l) => l.split(' '));
  const errs = lines.filter((l) => l.startsWith('ERR '));
  const ips = acks.map((a) => a[2]);
  t.equal(new Set(ips).size, ips.length, `${ips.length} acknowledged addresses, all distinct`);
  t.equal(ips.length, Math.min(1024, TOTAL), 'the whole pool was handed out, nothing more');
  t.ok(errs.every((l) => /exhausted/.test(l)), `the only failures are exhaustion (${errs.length}): ${errs.filter((l) => !/exhausted/.test(l)).slice(0, 3).join(' | ')}`);
  t.equal(acks.length + errs.length, TOTAL, 'every request has exactly one outcome line');

  const ipam = new Ipam(await openStore(etcd.url));
  t.teardown(() => ipam.store.close());
  const held = await checkInvariants(ipam, undefined, new Map(hosts.map((h) => [h, 'linux'])));
  t.equal(held.size, ips.length, 'the store holds exactly what was acknowledged');
  const wrong = acks.filter(([, handle, ip]) => held.get(ip)?.handle !== handle);
  t.same(wrong, [], 'each acknowledged address is held by its handle');
  const affs = await ipam.ds.affinities();
  const claimedBy = new Set(affs.map((a) => a.value.host));
  t.ok(claimedBy.size >= HOSTS - 1, `blocks were claimed by ${claimedBy.size} hosts (${affs.length} affinities, all confirmed)`);
  const borrowed = (await Promise.all(hosts.map((h) => ipam.routes(h)))).reduce((n, r) => n + r.hosts.length, 0);
  t.ok(borrowed > 0, `some hosts borrowed (${borrowed} host routes)`);
});
