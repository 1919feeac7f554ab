// Several processes allocate against one embedded store directory at the same time: every address is distinct
// and the store stays consistent. Some hosts must claim blocks concurrently and some must borrow.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openFileStore } from '../../src/store/file.ts';
import { checkInvariants } from './invariants.ts';

const child = join(import.meta.dirname, 'alloc.child.ts');

function runChild(args: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', child, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => (code === 0 ? resolve(out.trim().split('\n')) : reject(new Error(`child ${args[1]} exited ${code}: ${err}`))));
  });
}

t.test('concurrent processes hand out distinct addresses', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-mp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const setup = new Ipam(await openFileStore(dir));
  // 12 blocks of 16 for 6 processes x 40 = 240 requests against 192 addresses: blocks run out, hosts borrow,
  // and the request is partially filled once the pool is exhausted.
  await setup.addPool({ name: 'p', cidr: '10.0.0.0/25', blockSize: 28 });
  await setup.addPool({ name: 'q', cidr: '10.0.1.0/26', blockSize: 28 });
  const hosts = ['h1', 'h2', 'h3', 'h4', 'h5'];
  for (const h of hosts) await setup.setHost({ name: h, os: 'linux', labels: {} });
  await setup.store.close();

  // h1 runs in two processes at once: same host, different processes.
  const runs = await Promise.all([...hosts, 'h1'].map((h) => runChild([dir, h, '40', '4'])));
  const acks = runs.flat().filter((l) => l.startsWith('ACK ')).map((l) => l.split(' '));
  const ips = acks.map((a) => a[2]);
  t.equal(new Set(ips).size, ips.length, `${ips.length} acknowledged addresses, all distinct`);
  t.equal(ips.length, 192, 'the whole pool was handed out, nothing more');

  const ipam = new Ipam(await openFileStore(dir));
  t.teardown(() => ipam.store.close());
  const hostsOs = new Map(hosts.map((h) => [h, 'linux']));
  const held = await checkInvariants(ipam, undefined, hostsOs);
  t.equal(held.size, ips.length, 'the store holds exactly what was acknowledged');
  for (const [, handle, ip] of acks) t.equal(held.get(ip)?.handle, handle, `${ip} is held by ${handle}`);
  const borrowed = (await Promise.all(hosts.map((h) => ipam.routes(h)))).reduce((n, r) => n + r.hosts.length, 0);
  t.ok(borrowed > 0, `some hosts borrowed (${borrowed} host routes)`);
});
