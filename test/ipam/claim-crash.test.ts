// Crash consistency of the one-transaction block claim.
// - Every crash point: a scripted run of claims, borrows and releases is stopped at its k-th write, before the
//   write reaches the store or after it did (acknowledgement lost), for every k; the store left behind is
//   consistent with no claim half-done (no pending affinity), `ipam check` (Calico layout) reports no problem, and
//   the next assigns work. The two-phase claim, crashed the same way, does leave pending claims (which the next
//   assign of that host finishes): that is what one transaction removes.
// - SIGKILL: a child claiming /30 blocks on the file store as fast as it can is killed at random moments; every
//   acknowledged address is there, no pending affinity, `ipam check` clean.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ipam, type IpamOptions } from '../../src/ipam/ipam.ts';
import { calicoLayout } from '../../src/ipam/calico/layout.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { openFileStore } from '../../src/store/file.ts';
import { StoreError, type Store } from '../../src/store/types.ts';
import { CrashingStore } from './crashing-store.ts';
import { checkInvariants } from './invariants.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const osOf = new Map([['a', 'linux'], ['b', 'linux']]);
const layouts: Record<string, () => IpamOptions> = {
  blockspeaker: () => ({ now: () => NOW }),
  calico: () => ({ now: () => NOW, layout: calicoLayout({ now: () => NOW }) }),
};

async function fresh(opts: IpamOptions): Promise<MemoryStore> {
  const store = new MemoryStore();
  const ipam = new Ipam(store, opts);
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/26', blockSize: 28 });
  for (const h of ['a', 'b']) await ipam.setHost({ name: h, os: 'linux', labels: {} });
  return store;
}

/** Claims (one, then several in one request), borrows once the pool's blocks are all taken, releases. */
async function script(ipam: Ipam): Promise<void> {
  await ipam.autoAssign({ host: 'a', num4: 1, handle: 'a1' });
  await ipam.autoAssign({ host: 'b', num4: 20, handle: 'b1' });
  await Promise.all([ipam.autoAssign({ host: 'a', num4: 15, handle: 'a2' }), ipam.autoAssign({ host: 'a', num4: 2, handle: 'a3' })]);
  await ipam.assignIP({ host: 'b', ip: '10.0.0.60', handle: 'b2' });
  await ipam.autoAssign({ host: 'a', num4: 8, handle: 'a4' }); // borrows: every block is taken
  await ipam.releaseByHandle('b1');
  await ipam.autoAssign({ host: 'b', num4: 1, handle: 'b3' });
}

async function pendingLeft(store: Store, opts: IpamOptions): Promise<number> {
  return (await new Ipam(store, opts).ds.affinities()).filter((a) => a.value.state === 'pending').length;
}

for (const [name, opts] of Object.entries(layouts)) {
  t.test(`${name} layout: a crash at any write leaves no half claim`, async (t) => {
    // How many writes the script makes without a crash.
    const probe = new CrashingStore(await fresh(opts()), 0, false);
    await script(new Ipam(probe, opts()));
    const total = probe.writes;
    t.ok(total >= 7, `${total} writes in the script`);

    const twoPhasePending: string[] = [];
    for (const claim of ['atomic', 'two-phase'] as const) {
      for (let k = 1; k <= (claim === 'atomic' ? total : total * 2); k++) {
        for (const after of [false, true]) {
          const inner = await fresh(opts());
          const crashing = new CrashingStore(inner, k, after);
          const err = await script(new Ipam(crashing, { ...opts(), claim })).then(() => undefined, (e: Error) => e);
          if (!crashing.dead) break; // the two-phase script writes more; past its end there is nothing to crash
          if (!(err instanceof StoreError)) throw err ?? new Error(`crash at write ${k} went unnoticed`);
          const where = `${claim}, crash ${after ? 'after' : 'before'} write ${k}`;
          const pending = await pendingLeft(inner, opts());
          if (claim === 'two-phase') {
            if (pending) twoPhasePending.push(where);
          } else if (pending) t.fail(`${where}: ${pending} pending affinities left`);
          if (claim === 'atomic') {
            await checkInvariants(new Ipam(inner, opts()), undefined, osOf).catch((e: Error) => t.fail(`${where}: ${e.message}`));
            if (name === 'calico') {
              const r = await checkCalico(inner);
              if (r.problems.length || r.notes.some((n) => /pending/.test(n))) t.fail(`${where}: ipam check: ${[...r.problems, ...r.notes].join('; ')}`);
            }
          }
          // The next process goes on: both hosts assign and release, and the store stays consistent (a two-phase
          // pending claim is finished only when its host needs that block, so it may still be there).
          const next = new Ipam(inner, opts());
          for (const h of ['a', 'b']) await next.autoAssign({ host: h, num4: 1, handle: `after-${h}` });
          await next.releaseByHandle('after-a');
          await next.releaseByHandle('after-b');
          await checkInvariants(next, undefined, osOf, { allowPending: claim === 'two-phase' }).catch((e: Error) => t.fail(`${where}, then assigns: ${e.message}`));
        }
      }
    }
    t.pass(`the one-transaction claim crashed at each of ${total} writes, before and after: no pending affinity, consistent`);
    t.ok(twoPhasePending.length > 0, `the two-phase claim left pending affinities at ${twoPhasePending.length} crash points (e.g. ${twoPhasePending[0]})`);
  });
}

// ---- SIGKILL on the file store ------------------------------------------------------------------------------------

const child = join(import.meta.dirname, 'alloc.child.ts');
const TRIALS = Number(process.env.CRASH_TRIALS ?? 5);
let seed = Number(process.env.CRASH_SEED ?? Date.now() % 100000);
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);

function killedRun(dir: string, layout: string, afterAcks: number, delayMs: number): Promise<string[]> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', child, dir, 'a', '100000', '4', '0'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ALLOC_LAYOUT: layout },
    });
    let buf = '';
    let armed = false;
    p.stdout.on('data', (d) => {
      buf += d;
      if (!armed && buf.split('\n').filter((l) => l.startsWith('ACK')).length >= afterAcks) {
        armed = true;
        setTimeout(() => p.kill('SIGKILL'), delayMs);
      }
    });
    p.on('close', () => resolve(buf.split('\n').filter((l) => l.startsWith('ACK '))));
  });
}

for (const layout of ['blockspeaker', 'calico']) {
  t.test(`${layout} layout, file store: SIGKILL while claiming /30 blocks (${TRIALS} trials, seed ${seed})`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), `bs-claim-crash-${process.pid}-`));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const opts = layout === 'calico' ? { layout: calicoLayout() } : {};
    const setup = new Ipam(await openFileStore(dir), opts);
    await setup.addPool({ name: 'p', cidr: '10.0.0.0/16', blockSize: 30 });
    await setup.setHost({ name: 'a', os: 'linux', labels: {} });
    await setup.store.close();
    const acked = new Map<string, string>();
    for (let trial = 0; trial < TRIALS; trial++) {
      for (const l of await killedRun(dir, layout, 1 + Math.floor(rand() * 30), Math.floor(rand() * 40))) {
        const [, handle, ip] = l.split(' ');
        acked.set(handle!, ip!);
      }
      const store = await openFileStore(dir);
      try {
        const ipam = new Ipam(store, opts);
        const held = await checkInvariants(ipam, undefined, osOf, { allowPending: false });
        const byHandle = new Map([...held].map(([ip, h]) => [h.handle, ip]));
        t.same([...acked].filter(([h, ip]) => byHandle.get(h) !== ip), [], `trial ${trial}: all ${acked.size} acknowledged addresses there, no pending claim`);
        if (layout === 'calico') {
          const r = await checkCalico(store);
          t.same([r.problems, r.notes.filter((n) => /pending/.test(n))], [[], []], `trial ${trial}: ipam check clean`);
        }
      } finally {
        await store.close();
      }
    }
    t.ok(acked.size > TRIALS, `${acked.size} addresses acknowledged before the kills`);
  });
}
