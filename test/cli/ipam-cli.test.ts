// Drives the real `blockspeaker ipam` command as a user would: one process per command against an embedded file store
// in a temporary directory, JSON on stdout, one-line errors on stderr. State must survive from one process to the
// next (the store is durable), which every scenario below relies on. Scenarios use separate stores and run
// concurrently to keep the wall time down.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ipaddr from 'ipaddr.js';

type T = Parameters<Parameters<typeof t.test>[0]>[0];

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'bin', 'blockspeaker.js');

interface Run {
  args: string[];
  code: number;
  stdout: string;
  stderr: string;
}

let spawned = 0;

function run(args: string[]): Promise<Run> {
  spawned++;
  const env = { ...process.env };
  delete env.BLOCKSPEAKER_STORE;
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ args, code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

function newStore(t: T): string {
  const dir = mkdtempSync(join(tmpdir(), 'bs-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `blockspeaker ipam --store DIR ...args` bound to one store. */
const ipam = (store: string) => (...args: string[]) => run(['ipam', '--store', store, ...args]);

/** Assert success: exit 0, nothing on stderr, exactly one JSON line on stdout; return the parsed value. */
function ok<V = any>(t: T, r: Run): V {
  const what = r.args.slice(3).join(' ');
  t.equal(r.code, 0, `${what}: exit 0`, { stderr: r.stderr });
  t.equal(r.stderr, '', `${what}: quiet stderr`);
  t.match(r.stdout, /^[^\n]+\n$/, `${what}: one line on stdout`);
  try {
    return JSON.parse(r.stdout) as V;
  } catch {
    t.fail(`${what}: stdout is not JSON: ${r.stdout}`);
    return undefined as V;
  }
}

/** Assert a refusal: non-zero exit, nothing on stdout, one line on stderr matching every pattern. */
function refused(t: T, r: Run, ...patterns: RegExp[]): void {
  const what = r.args.join(' ');
  t.not(r.code, 0, `${what}: non-zero exit`);
  t.equal(r.stdout, '', `${what}: nothing on stdout`);
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  t.equal(lines.length, 1, `${what}: exactly one line on stderr, got ${JSON.stringify(r.stderr)}`);
  t.notMatch(r.stderr, /\n\s+at /, `${what}: no stack trace`);
  for (const p of patterns) t.match(r.stderr, p, `${what}: error says ${p}`);
}

// ---- address helpers (independent of src/net) -------------------------------------------------------------------

const v4num = (s: string): number => s.split('.').reduce((a, o) => a * 256 + Number(o), 0);
const v4text = (n: number): string => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
const stripLen = (s: string): string => s.slice(0, s.indexOf('/'));
/** The addresses a.b.c.(start..end) of a /24-aligned base, as text. */
const range4 = (base: string, from: number, to: number): string[] => {
  const b = v4num(base);
  const out: string[] = [];
  for (let i = from; i <= to; i++) out.push(v4text(b + i));
  return out;
};
const sorted = (xs: string[]) => [...xs].sort();
/** The /122 block holding a v6 address (ipaddr.js as the oracle). */
const block122 = (ip: string): string => {
  const parts = (ipaddr.parse(ip) as ipaddr.IPv6).parts.slice();
  parts[7] &= 0xffc0;
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/122`;
};
/** The /26 block holding a v4 address. */
const block26 = (ip: string): string => `${v4text(Math.floor(v4num(ip) / 64) * 64)}/26`;

function checkBlockSums(t: T, blocks: { cidr: string; size: number; allocated: number; free: number; reserved: number }[]): void {
  for (const b of blocks) {
    const len = Number(b.cidr.split('/')[1]);
    const bits = b.cidr.includes(':') ? 128 : 32;
    t.equal(b.size, 2 ** (bits - len), `${b.cidr}: size is 2^(${bits}-${len})`);
    t.equal(b.allocated + b.free + b.reserved, b.size, `${b.cidr}: allocated + free + reserved = size`);
  }
}

// ---- scenarios ----------------------------------------------------------------------------------------------------

// The scenarios use separate stores, so they may run side by side.
t.jobs = 4;

t.test('pools, hosts, config and input errors', async (t) => {
  const store = newStore(t);
  const cli = ipam(store);

  const p4 = ok(t, await cli('pool', 'add', '--name', 'pods-v4', '--cidr', '10.0.0.0/16', '--block-size', '26'));
  t.match(p4, { name: 'pods-v4', cidr: '10.0.0.0/16', blockSize: 26, disabled: false, natOutgoing: false });
  const p6 = ok(t, await cli('pool', 'add', '--name', 'pods-v6', '--cidr', 'FD00:0:0::/48', '--nat-outgoing', '--node-selector', 'rack == "r1"'));
  t.match(p6, { name: 'pods-v6', cidr: 'fd00::/48', blockSize: 122, natOutgoing: true, nodeSelector: 'rack == "r1"' }, 'v6 default /122, canonical cidr');

  // Refusals: one line each, naming the problem.
  const [hostBits, size33, overlap, reserve, unknown, noStore, badSel, badOs, badBool] = await Promise.all([
    cli('pool', 'add', '--name', 'x', '--cidr', '10.0.0.1/24'),
    cli('pool', 'add', '--name', 'x', '--cidr', '10.9.0.0/16', '--block-size', '33'),
    cli('pool', 'add', '--name', 'x', '--cidr', '10.0.128.0/17'),
    cli('pool', 'add', '--name', 'x', '--cidr', '10.9.0.0/16', '--reserve', 'per-block:3'),
    cli('pool', 'frobnicate'),
    run(['ipam', 'pool', 'list']),
    cli('pool', 'add', '--name', 'x', '--cidr', '10.9.0.0/16', '--node-selector', 'rack = "r1"'),
    cli('host', 'set', '--name', 'h', '--os', 'macos'),
    cli('config', 'set', '--strict-affinity', 'yes'),
  ]);
  refused(t, hostBits, /10\.0\.0\.1\/24/, /host bits/, /10\.0\.0\.0\/24/);
  refused(t, size33, /33/, /block ?size/i);
  refused(t, overlap, /overlap/, /pods-v4/, /10\.0\.128\.0\/17/);
  refused(t, reserve, /--reserve/, /per-block:3/);
  t.not(unknown.code, 0, 'unknown command: non-zero exit');
  t.match(unknown.stderr, /frobnicate/, 'unknown command: named');
  t.equal(unknown.stderr.trim().split('\n').length, 1, 'unknown command: one line on stderr');
  refused(t, noStore, /--store/);
  refused(t, badSel, /position 6/);
  refused(t, badOs, /macos/);
  refused(t, badBool, /--strict-affinity/, /yes/);

  // Nothing the refusals tried was stored; the two good pools were (in a fresh process).
  const pools = ok<{ name: string; cidr: string }[]>(t, await cli('pool', 'list'));
  t.same(sorted(pools.map((p) => `${p.name} ${p.cidr}`)), ['pods-v4 10.0.0.0/16', 'pods-v6 fd00::/48']);

  t.same(ok(t, await cli('pool', 'delete', '--name', 'pods-v6')), { deleted: 'pods-v6' });
  refused(t, await cli('pool', 'delete', '--name', 'pods-v6'), /pods-v6/);
  t.same(ok<{ name: string }[]>(t, await cli('pool', 'list')).map((p) => p.name), ['pods-v4']);

  // Config and hosts persist across processes.
  const cfg = ok(t, await cli('config', 'set', '--strict-affinity', 'true', '--max-blocks-per-host', '3'));
  t.match(cfg, { strictAffinity: true, maxBlocksPerHost: 3 });
  t.same(ok(t, await cli('config', 'show')), cfg, 'config show in a new process returns what was set');
  const host = ok(t, await cli('host', 'set', '--name', 'node-a', '--os', 'linux', '--label', 'rack=r1', '--label', 'zone=a=b'));
  t.same(host, { name: 'node-a', os: 'linux', labels: { rack: 'r1', zone: 'a=b' } });
});

t.test('Windows host: a /26 gives exactly 60 addresses, never .0/.1/.2/.63, and is never borrowed from', async (t) => {
  const store = newStore(t);
  const cli = ipam(store);
  // One /26 pool = exactly one block.
  ok(t, await cli('pool', 'add', '--name', 'win', '--cidr', '10.1.0.0/26'));
  await Promise.all([cli('host', 'set', '--name', 'win1', '--os', 'windows'), cli('host', 'set', '--name', 'lin1', '--os', 'linux')]).then((rs) =>
    rs.forEach((r) => ok(t, r)),
  );

  const got = ok<{ ipv4: string[]; ipv6: string[]; messages: string[] }>(t, await cli('assign', '--host', 'win1', '--num4', '64', '--handle', 'pod1'));
  t.same(Object.keys(got).sort(), ['ipv4', 'ipv6', 'messages']);
  t.equal(got.ipv4.length, 60, 'exactly 60 usable addresses');
  t.ok(got.ipv4.every((a) => a.endsWith('/26')), 'printed with the block length');
  t.same(sorted(got.ipv4.map(stripLen)), sorted(range4('10.1.0.0', 3, 62)), 'all of .3 .. .62 and nothing else');
  t.same(got.ipv6, []);
  t.equal(got.messages.length, 1, 'a partial result carries a message');
  t.match(got.messages[0], /60/);

  const [blocksRun, routesRun] = await Promise.all([cli('blocks'), cli('routes', '--host', 'win1')]);
  const blocks = ok<any[]>(t, blocksRun);
  t.same(ok(t, routesRun), { aggregates: ['10.1.0.0/26'], hosts: [] }, 'the Windows host announces its block');
  t.equal(blocks.length, 1);
  t.match(blocks[0], { cidr: '10.1.0.0/26', affinity: 'win1', os: 'windows', borrowable: false, size: 64, allocated: 60, free: 0, reserved: 4 });
  checkBlockSums(t, blocks);

  // Release one address and a reserved one (not allocated).
  const rel = ok(t, await cli('release', '--ip', '10.1.0.10', '--ip', '10.1.0.1'));
  t.same(rel, { released: ['10.1.0.10'], notAllocated: ['10.1.0.1'] });

  // A Linux host may not take it, neither by assign nor by assign-ip; the Windows host may not take a reserved one.
  const [linAssign, linIp, winReserved] = await Promise.all([
    cli('assign', '--host', 'lin1', '--num4', '1'),
    cli('assign-ip', '--host', 'lin1', '--ip', '10.1.0.10'),
    cli('assign-ip', '--host', 'win1', '--ip', '10.1.0.63'),
  ]);
  const la = ok<{ ipv4: string[]; messages: string[] }>(t, linAssign);
  t.same(la.ipv4, [], 'Linux host does not borrow from a Windows block');
  t.equal(la.messages.length, 1);
  refused(t, linIp, /10\.1\.0\.10/);
  refused(t, winReserved, /10\.1\.0\.63/, /reserved/);

  // The freed address is the only one left, and it goes back to the Windows host.
  const again = ok<{ ipv4: string[]; messages: string[] }>(t, await cli('assign', '--host', 'win1'));
  t.same(again, { ipv4: ['10.1.0.10/26'], ipv6: [], messages: [] });
});

t.test('assign, assign-ip, release, claim, release-affinity, blocks and routes', async (t) => {
  const store = newStore(t);
  const cli = ipam(store);
  ok(t, await cli('pool', 'add', '--name', 'p4', '--cidr', '10.2.0.0/25'));
  ok(t, await cli('pool', 'add', '--name', 'p6', '--cidr', 'fd00:2::/120'));
  await Promise.all([cli('host', 'set', '--name', 'a', '--os', 'linux'), cli('host', 'set', '--name', 'b', '--os', 'linux')]).then((rs) =>
    rs.forEach((r) => ok(t, r)),
  );

  // Dual-stack assignment: output shape and lengths.
  const ga = ok<{ ipv4: string[]; ipv6: string[]; messages: string[] }>(t, await cli('assign', '--host', 'a', '--num4', '3', '--num6', '2', '--handle', 'ha'));
  t.same(Object.keys(ga).sort(), ['ipv4', 'ipv6', 'messages']);
  t.equal(ga.ipv4.length, 3);
  t.equal(ga.ipv6.length, 2);
  t.same(ga.messages, []);
  t.ok(ga.ipv4.every((a) => /^10\.2\.0\.\d+\/26$/.test(a)), `v4 from the pool, /26: ${ga.ipv4}`);
  t.ok(ga.ipv6.every((a) => /^fd00:2::([0-9a-f]{1,2})?\/122$/.test(a)), `v6 from the pool, /122: ${ga.ipv6}`);
  t.equal(new Set(ga.ipv6.map((a) => block122(stripLen(a)))).size, 1, 'the v6 addresses share one block');
  t.equal(new Set(ga.ipv4.map((a) => block26(stripLen(a)))).size, 1, 'the v4 addresses share one block');
  const aBlock = block26(stripLen(ga.ipv4[0]));
  const otherBlock = aBlock === '10.2.0.0/26' ? '10.2.0.64/26' : '10.2.0.0/26';
  const aV6Block = block122(stripLen(ga.ipv6[0]));

  // b borrows a free address from a's block with assign-ip (strict affinity is off by default).
  const aAddrs = new Set(ga.ipv4.map(stripLen));
  const borrowed = range4(stripLen(aBlock), 0, 63).find((x) => !aAddrs.has(x))!;
  const gb = ok(t, await cli('assign-ip', '--host', 'b', '--ip', borrowed, '--handle', 'hb'));
  t.same(gb, { ip: `${borrowed}/26`, pool: 'p4', block: aBlock });
  refused(t, await cli('assign-ip', '--host', 'a', '--ip', borrowed), new RegExp(borrowed.replace(/\./g, '\\.')), /allocated/);

  const [routesA, routesB, blocks] = await Promise.all([cli('routes', '--host', 'a'), cli('routes', '--host', 'b'), cli('blocks')]);
  t.same(ok(t, routesA), { aggregates: [aBlock, aV6Block], hosts: [] }, "a announces its own blocks and no /32 inside them");
  t.same(ok(t, routesB), { aggregates: [], hosts: [`${borrowed}/32`] }, 'b announces its borrowed address as a /32');
  const bl = ok<any[]>(t, blocks);
  checkBlockSums(t, bl);
  t.match(bl.find((b) => b.cidr === aBlock), { affinity: 'a', allocated: 4, reserved: 0, free: 60 }, "a's block holds a's 3 and b's 1");
  t.match(bl.find((b) => b.cidr === aV6Block), { affinity: 'a', allocated: 2, free: 62, size: 64 });

  refused(t, await cli('pool', 'delete', '--name', 'p4'), /p4/, /allocated/);

  // Release by handle returns exactly what the handle held; a second release finds nothing.
  const rh = ok<{ released: string[]; notAllocated: string[] }>(t, await cli('release', '--handle', 'ha'));
  t.same(sorted(rh.released), sorted([...ga.ipv4, ...ga.ipv6].map(stripLen)));
  t.same(rh.notAllocated, []);
  const gone = stripLen(ga.ipv4[0]);
  t.same(
    ok(t, await cli('release', '--ip', gone, '--ip', '192.0.2.1')),
    { released: [], notAllocated: [gone, '192.0.2.1'] },
    'a free address and one outside every pool are reported as not allocated',
  );
  refused(t, await cli('release', '--ip', '10.2.0.300'), /10\.2\.0\.300/);

  // b claims the whole pool: the free block is claimed, a's block fails.
  const claim = ok(t, await cli('claim', '--host', 'b', '--cidr', '10.2.0.0/25'));
  t.same(claim, { claimed: [otherBlock], failed: [aBlock] });

  // a cannot give up its block while b's borrowed address is in it, with --require-empty.
  refused(t, await cli('release-affinity', '--host', 'a', '--cidr', aBlock, '--require-empty'), new RegExp(aBlock.replace(/[./]/g, '\\$&')));
  t.match(ok<any[]>(t, await cli('blocks', '--host', 'a')), [{ cidr: aBlock, affinity: 'a', allocated: 1 }], 'the refused release changed nothing');

  // Without it, the block stays (non-affine) for the borrowed address.
  t.same(ok(t, await cli('release-affinity', '--host', 'a', '--cidr', aBlock)), { released: [aBlock] });
  const [bl2, rb2, ra2] = await Promise.all([cli('blocks'), cli('routes', '--host', 'b'), cli('routes', '--host', 'a')]);
  const blocks2 = ok<any[]>(t, bl2);
  checkBlockSums(t, blocks2);
  t.match(blocks2.find((b) => b.cidr === aBlock), { affinity: null, allocated: 1 });
  t.same(ok(t, rb2), { aggregates: [otherBlock], hosts: [`${borrowed}/32`] });
  t.same(ok(t, ra2), { aggregates: [aV6Block], hosts: [] });

  // Releasing the last address of the non-affine block deletes it; b's empty affine block stays with b.
  t.same(ok(t, await cli('release', '--handle', 'hb')), { released: [borrowed], notAllocated: [] });
  const blocks3 = ok<any[]>(t, await cli('blocks'));
  t.same(sorted(blocks3.map((b) => `${b.cidr} ${b.affinity}`)), sorted([`${otherBlock} b`, `${aV6Block} a`]));

  // An empty block can be given up with --require-empty.
  t.same(ok(t, await cli('release-affinity', '--host', 'b', '--cidr', otherBlock, '--require-empty')), { released: [otherBlock] });
  t.same(ok<any[]>(t, await cli('blocks', '--host', 'b')), []);
  refused(t, await cli('release-affinity', '--host', 'b', '--cidr', otherBlock), /b/, new RegExp(otherBlock.replace(/[./]/g, '\\$&')));
});

t.test('borrowing when a pool is full, and strict affinity', async (t) => {
  const store = newStore(t);
  const cli = ipam(store);
  // One /28 block in a /28 pool (micro-ish, Linux reserves nothing): 16 addresses.
  ok(t, await cli('pool', 'add', '--name', 'tiny', '--cidr', '10.3.0.0/28', '--block-size', '28'));
  await Promise.all([cli('host', 'set', '--name', 'a', '--os', 'linux'), cli('host', 'set', '--name', 'b', '--os', 'linux')]).then((rs) =>
    rs.forEach((r) => ok(t, r)),
  );
  const ga = ok<{ ipv4: string[] }>(t, await cli('assign', '--host', 'a', '--num4', '10'));
  t.equal(ga.ipv4.length, 10);
  // b finds no free block and borrows the remaining 6 from a's block; a 7th is not there.
  const gb = ok<{ ipv4: string[]; messages: string[] }>(t, await cli('assign', '--host', 'b', '--num4', '7'));
  t.equal(gb.ipv4.length, 6);
  t.equal(gb.messages.length, 1);
  t.same(sorted([...ga.ipv4, ...gb.ipv4].map(stripLen)), sorted(range4('10.3.0.0', 0, 15)), 'together they hold the whole /28, no duplicates');
  const rb = ok<{ aggregates: string[]; hosts: string[] }>(t, await cli('routes', '--host', 'b'));
  t.same(rb.aggregates, []);
  t.same(sorted(rb.hosts), sorted(gb.ipv4.map((a) => `${stripLen(a)}/32`)), 'each borrowed address is a /32 host route');

  // With strict affinity on, a free address in a's block is not borrowed.
  ok(t, await cli('release', '--ip', stripLen(ga.ipv4[0])));
  ok(t, await cli('config', 'set', '--strict-affinity', 'true'));
  const [strictAssign, strictIp] = await Promise.all([cli('assign', '--host', 'b'), cli('assign-ip', '--host', 'b', '--ip', stripLen(ga.ipv4[0]))]);
  const sa = ok<{ ipv4: string[]; messages: string[] }>(t, strictAssign);
  t.same(sa.ipv4, []);
  t.match(sa.messages.join(' '), /strict/i);
  refused(t, strictIp, /strict/i);
  const blocks = ok<any[]>(t, await cli('blocks'));
  checkBlockSums(t, blocks);
  t.match(blocks, [{ cidr: '10.3.0.0/28', affinity: 'a', allocated: 15, free: 1, reserved: 0 }]);
});

t.teardown(() => {
  // Keep this suite cheap: each process costs a few hundred milliseconds.
  if (spawned > 80) throw new Error(`${spawned} processes spawned; keep it under 80`);
});
