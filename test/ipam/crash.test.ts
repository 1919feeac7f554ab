// Crash safety: a child allocating (and releasing) in a loop is killed with SIGKILL at random moments. After each
// kill the store reopens consistent, every acknowledged allocation is there, and nothing is held twice.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openFileStore } from '../../src/store/file.ts';
import { checkInvariants } from './invariants.ts';

const child = join(import.meta.dirname, 'alloc.child.ts');
const TRIALS = Number(process.env.CRASH_TRIALS ?? 12);

// Seeded so a failure can be replayed (CRASH_SEED).
let seed = Number(process.env.CRASH_SEED ?? Date.now() % 100000);
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);

function killedRun(dir: string, host: string, afterAcks: number, delayMs: number): Promise<string[]> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', child, dir, host, '100000', '8', '3'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    let acks = 0;
    let armed = false;
    p.stdout.on('data', (d) => {
      buf += d;
      acks = buf.split('\n').filter((l) => l.startsWith('ACK')).length;
      if (!armed && acks >= afterAcks) {
        armed = true;
        setTimeout(() => p.kill('SIGKILL'), delayMs);
      }
    });
    p.on('close', () => resolve(buf.split('\n').filter((l) => /^(ACK|DEL|REL) /.test(l))));
  });
}

t.test(`SIGKILL at random moments loses nothing acknowledged (${TRIALS} trials, seed ${seed})`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bs-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const setup = new Ipam(await openFileStore(dir));
  await setup.addPool({ name: 'p', cidr: '10.0.0.0/16', blockSize: 26 });
  await setup.addPool({ name: 'w', cidr: '10.1.0.0/16', blockSize: 26, nodeSelector: 'os == "windows"' });
  await setup.setHost({ name: 'lin', os: 'linux', labels: {} });
  await setup.setHost({ name: 'win', os: 'windows', labels: { os: 'windows' } });
  await setup.store.close();
  const hostsOs = new Map([['lin', 'linux'], ['win', 'windows']]);

  const expected = new Map<string, string>(); // handle -> ip, for acknowledged and not released
  let totalAcks = 0;
  for (let trial = 0; trial < TRIALS; trial++) {
    const host = trial % 3 === 2 ? 'win' : 'lin';
    const lines = await killedRun(dir, host, 1 + Math.floor(rand() * 40), Math.floor(rand() * 60));
    for (const l of lines) {
      const [kind, handle, ip] = l.split(' ');
      if (kind === 'ACK') {
        expected.set(handle, ip);
        totalAcks++;
      } else expected.delete(handle); // DEL: released or not, it is no longer promised
    }
    const ipam = new Ipam(await openFileStore(dir));
    try {
      const held = await checkInvariants(ipam, undefined, hostsOs, { allowPending: true });
      const byHandle = new Map([...held].map(([ip, h]) => [h.handle, ip]));
      const missing = [...expected].filter(([handle, ip]) => byHandle.get(handle) !== ip);
      t.same(missing, [], `trial ${trial}: all ${expected.size} acknowledged allocations present`);
    } finally {
      await ipam.store.close();
    }
  }
  t.ok(totalAcks > TRIALS, `${totalAcks} allocations acknowledged before the kills`);
});
