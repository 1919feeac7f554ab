// IPAM behaviour against the in-memory store: Calico's documented rules, Windows blocks and micropools.
import t from 'tap';
import { fnv1 } from '../../src/ipam/claim.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { IpamError, type Host, type PoolSpec } from '../../src/ipam/types.ts';
import { validatePool } from '../../src/ipam/validate.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { parseIP, parsePrefix, prefixContainsIP, ipAt } from '../../src/net/ip.ts';

async function setup(pools: PoolSpec[], hosts: Partial<Host>[], opts: { now?: () => number } = {}) {
  const ipam = new Ipam(new MemoryStore(), opts);
  for (const p of pools) await ipam.addPool(p);
  for (const h of hosts) await ipam.setHost({ name: h.name!, os: h.os ?? 'linux', labels: h.labels ?? {} });
  return ipam;
}

const ips = (r: { ipv4: { ip: string }[]; ipv6: { ip: string }[] }) => [...r.ipv4, ...r.ipv6].map((a) => a.ip);
const inBlock = (cidr: string, ip: string) => prefixContainsIP(parsePrefix(cidr), parseIP(ip));

t.test('pool validation names the bad field', async (t) => {
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.1/24' }), /cidr: .*host bits set \(the network is 10\.0\.0\.0\/24\)/);
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.0/16', blockSize: 19 }), /blockSize 19 out of range 20\.\.32/);
  t.throws(() => validatePool({ name: 'p', cidr: 'fd00::/48', blockSize: 64 }), /blockSize 64 out of range 116\.\.128/);
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.0/28', blockSize: 26 }), /blockSize \/26 is larger than the pool/);
  t.throws(() => validatePool({ name: 'Bad Name', cidr: '10.0.0.0/16' }), /pool name/);
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.0/16', nodeSelector: 'rack ==' }), /nodeSelector/);
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.0/16', allowedUses: ['Bogus' as never] }), /allowedUses/);
  t.throws(() => validatePool({ name: 'p', cidr: '10.0.0.0/24', blockSize: 30, reservation: { kind: 'perBlock', start: 3, end: 1 } }), /leaves no address/);
  const p = validatePool({ name: 'p', cidr: 'fd00::/64' });
  t.equal(p.blockSize, 122, 'IPv6 default block size');
  t.equal(validatePool({ name: 'q', cidr: '10.1.0.0/16' }).blockSize, 26, 'IPv4 default block size');
  t.same(p.allowedUses, ['Workload', 'Tunnel']);
});

t.test('overlapping pools are rejected, whichever order', async (t) => {
  const ipam = await setup([{ name: 'a', cidr: '10.0.0.0/16' }], []);
  await t.rejects(ipam.addPool({ name: 'b', cidr: '10.0.5.0/24' }), /overlaps pool a/);
  await t.rejects(ipam.addPool({ name: 'c', cidr: '10.0.0.0/8' }), /overlaps pool a/);
  await t.rejects(ipam.addPool({ name: 'a', cidr: '10.9.0.0/16' }), /already exists/);
  await ipam.addPool({ name: 'd', cidr: '10.1.0.0/16' });
  t.equal((await ipam.listPools()).length, 2);
});

t.test('an unknown host is refused by name', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], []);
  await t.rejects(ipam.autoAssign({ host: 'ghost', num4: 1 }), { code: 'UNKNOWN_HOST', message: /ghost/ });
});

t.test('first allocation claims a block at the host-seeded position, then uses it', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/16', blockSize: 26 }], [{ name: 'node-a' }]);
  const r = await ipam.autoAssign({ host: 'node-a', num4: 2 });
  t.equal(r.ipv4.length, 2);
  t.same(r.messages, []);
  const start = fnv1('node-a') % 1024; // 1024 /26 blocks in a /16
  const expectBlock = ipAt(parsePrefix('10.0.0.0/16'), start * 64).toString() + '/26';
  t.equal(r.ipv4[0].block, expectBlock, 'block chosen by FNV-1 of the host name');
  t.equal(r.ipv4[0].prefixLen, 26);
  t.equal(r.ipv4[0].ip, ipAt(parsePrefix(expectBlock), 0).toString(), 'Linux blocks reserve nothing: first address first');
  const r2 = await ipam.autoAssign({ host: 'node-a', num4: 1 });
  t.equal(r2.ipv4[0].block, expectBlock, 'second allocation stays in the affine block');
  t.equal((await ipam.blocks('node-a')).length, 1);
});

t.test('two hosts get different blocks; the walk skips taken blocks and wraps', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24', blockSize: 26 }], [{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd' }, { name: 'e' }]);
  const blocks = new Set<string>();
  for (const h of ['a', 'b', 'c', 'd']) blocks.add((await ipam.autoAssign({ host: h, num4: 1 })).ipv4[0].block);
  t.equal(blocks.size, 4, 'four hosts, four distinct blocks');
  const r = await ipam.autoAssign({ host: 'e', num4: 1 });
  t.equal(r.ipv4.length, 1, 'fifth host borrows (no free block left)');
  t.notOk(blocks.has('x'));
  t.equal((await ipam.blocks('e')).length, 0, 'host e holds no block');
});

t.test('partial fulfilment returns what it could with a message, not an error', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/29', blockSize: 29 }], [{ name: 'a' }]);
  const r = await ipam.autoAssign({ host: 'a', num4: 10 });
  t.equal(r.ipv4.length, 8);
  t.equal(r.messages.length, 1);
  t.match(r.messages[0], /assigned 8 of 10 requested IPv4 addresses/);
});

t.test('block limit stops claiming and does not fall back to borrowing', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24', blockSize: 28 }], [{ name: 'a' }, { name: 'b' }]);
  await ipam.autoAssign({ host: 'b', num4: 1 }); // b owns a block with room
  await ipam.setConfig({ maxBlocksPerHost: 1 });
  const r = await ipam.autoAssign({ host: 'a', num4: 20 });
  t.equal(r.ipv4.length, 16, 'only its one block');
  t.ok(r.ipv4.every((a) => a.block === r.ipv4[0].block));
  t.match(r.messages[0], /limit of 1 blocks/);
  t.equal((await ipam.routes('a')).hosts.length, 0, 'nothing borrowed');
  // The per-request override works the same way.
  await ipam.setConfig({ maxBlocksPerHost: 0 });
  const r2 = await ipam.autoAssign({ host: 'a', num4: 1, maxBlocks: 1 });
  t.equal(r2.ipv4.length, 0);
  t.match(r2.messages[0], /limit of 1 blocks/);
});

t.test('borrowing when the pool has no free block; strict affinity forbids it', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/26', blockSize: 26 }], [{ name: 'a' }, { name: 'b' }]);
  const ra = await ipam.autoAssign({ host: 'a', num4: 1 });
  const rb = await ipam.autoAssign({ host: 'b', num4: 2 });
  t.equal(rb.ipv4.length, 2, 'b borrowed from a');
  t.ok(rb.ipv4.every((x) => inBlock(ra.ipv4[0].block, x.ip)));
  t.same((await ipam.routes('b')).hosts, rb.ipv4.map((x) => `${x.ip}/32`), 'borrowed IPs are host routes of b');
  t.same((await ipam.routes('b')).aggregates, []);
  t.same((await ipam.routes('a')).aggregates, ['10.0.0.0/26']);
  await ipam.setConfig({ strictAffinity: true });
  const rs = await ipam.autoAssign({ host: 'b', num4: 1 });
  t.equal(rs.ipv4.length, 0);
  t.match(rs.messages[0], /strict affinity/);
});

t.test('FIFO reuse: a released address goes to the back of the queue', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/28', blockSize: 28 }], [{ name: 'a' }]);
  const first = ips(await ipam.autoAssign({ host: 'a', num4: 3 }));
  t.same(first, ['10.0.0.0', '10.0.0.1', '10.0.0.2']);
  t.same(await ipam.releaseIPs(['10.0.0.1']), { released: ['10.0.0.1'], notAllocated: [] });
  const next = ips(await ipam.autoAssign({ host: 'a', num4: 14 }));
  t.equal(next[next.length - 1], '10.0.0.1', 'the released address comes last');
  t.equal(new Set(next).size, 14, '13 never-used addresses first, then the released one');
});

t.test('cooldown: a released address is not handed out before ipCooldownSeconds', async (t) => {
  let now = 1_000_000;
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/30', blockSize: 30 }], [{ name: 'a' }], { now: () => now });
  await ipam.setConfig({ ipCooldownSeconds: 10 });
  const all = ips(await ipam.autoAssign({ host: 'a', num4: 4 }));
  t.equal(all.length, 4);
  await ipam.releaseIPs(['10.0.0.2']);
  const r = await ipam.autoAssign({ host: 'a', num4: 1 });
  t.equal(r.ipv4.length, 0, 'still cooling down');
  now += 10_001;
  t.same(ips(await ipam.autoAssign({ host: 'a', num4: 1 })), ['10.0.0.2']);
});

t.test('node selectors pick pools; requested pools bypass them', async (t) => {
  const ipam = await setup(
    [
      { name: 'rack1', cidr: '10.1.0.0/24', nodeSelector: 'rack == "r1"' },
      { name: 'rack2', cidr: '10.2.0.0/24', nodeSelector: 'rack == "r2" && !has(edge)' },
    ],
    [{ name: 'a', labels: { rack: 'r1' } }, { name: 'b', labels: { rack: 'r2' } }, { name: 'c', labels: { rack: 'r3' } }],
  );
  t.ok(inBlock('10.1.0.0/24', (await ipam.autoAssign({ host: 'a', num4: 1 })).ipv4[0].ip));
  t.ok(inBlock('10.2.0.0/24', (await ipam.autoAssign({ host: 'b', num4: 1 })).ipv4[0].ip));
  await t.rejects(ipam.autoAssign({ host: 'c', num4: 1 }), { code: 'NO_POOL', message: /node selector matches host c/ });
  const forced = await ipam.autoAssign({ host: 'c', num4: 1, pools: ['10.2.0.0/24'] });
  t.ok(inBlock('10.2.0.0/24', forced.ipv4[0].ip), 'a requested pool bypasses the selector');
  await t.rejects(ipam.autoAssign({ host: 'c', num4: 1, pools: ['10.9.0.0/24'] }), { code: 'NO_POOL', message: /10\.9\.0\.0\/24 does not exist/ });
});

t.test('allowed uses and disabled pools give exact errors', async (t) => {
  const ipam = await setup(
    [{ name: 'tun', cidr: '10.1.0.0/24', allowedUses: ['Tunnel'] }, { name: 'off', cidr: '10.2.0.0/24', disabled: true }],
    [{ name: 'a' }],
  );
  await t.rejects(ipam.autoAssign({ host: 'a', num4: 1 }), { code: 'NO_POOL_FOR_USE', message: /allows use Workload/ });
  t.equal((await ipam.autoAssign({ host: 'a', num4: 1, use: 'Tunnel' })).ipv4.length, 1);
  await t.rejects(ipam.autoAssign({ host: 'a', num4: 1, pools: ['off'] }), { code: 'POOL_DISABLED', message: /pool off .* is disabled/ });
  await t.rejects(ipam.autoAssign({ host: 'a', num6: 1 }), { code: 'NO_POOL', message: /no IPv6 pool is configured/ });
  await t.rejects(ipam.autoAssign({ host: 'a', num4: -1 }), { code: 'INVALID' });
});

t.test('natOutgoing is recorded on each allocation when it is made', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24', natOutgoing: true }], [{ name: 'a' }]);
  await ipam.autoAssign({ host: 'a', num4: 1, handle: 'h' });
  const [b] = await ipam.ds.blocks();
  t.equal(b.value.attributes[0].natOutgoing, true);
  t.equal(b.value.attributes[0].handle, 'h');
  t.equal(b.value.attributes[0].host, 'a');
});

t.test('dual stack in one request', async (t) => {
  const ipam = await setup([{ name: 'v4', cidr: '10.0.0.0/24' }, { name: 'v6', cidr: 'fd00:10::/120', blockSize: 122 }], [{ name: 'a' }]);
  const r = await ipam.autoAssign({ host: 'a', num4: 1, num6: 2, handle: 'pod1' });
  t.equal(r.ipv4.length, 1);
  t.equal(r.ipv6.length, 2);
  t.ok(r.ipv6.every((x) => inBlock('fd00:10::/120', x.ip) && x.prefixLen === 122));
  t.same((await ipam.releaseByHandle('pod1')).length, 3);
  t.same(await ipam.releaseByHandle('pod1'), [], 'release by handle is idempotent');
});

t.test('Windows: a /26 has 60 usable addresses, never .0 .1 .2 or .63', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/26', blockSize: 26 }], [{ name: 'win', os: 'windows' }]);
  const r = await ipam.autoAssign({ host: 'win', num4: 64 });
  t.equal(r.ipv4.length, 60);
  const got = new Set(ips(r));
  for (const bad of ['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.63']) t.notOk(got.has(bad), `${bad} never handed out`);
  t.match(r.messages[0], /Windows hosts never borrow/);
  const [info] = await ipam.blocks();
  t.same({ allocated: info.allocated, free: info.free, reserved: info.reserved, borrowable: info.borrowable, os: info.os }, { allocated: 60, free: 0, reserved: 4, borrowable: false, os: 'windows' });
  await t.rejects(ipam.assignIP({ host: 'win', ip: '10.0.0.1' }), /reserved/);
});

t.test('Windows blocks are never borrowed from, even with strict affinity off', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/26', blockSize: 26 }], [{ name: 'win', os: 'windows' }, { name: 'lin' }]);
  await ipam.autoAssign({ host: 'win', num4: 1 });
  const r = await ipam.autoAssign({ host: 'lin', num4: 1 });
  t.equal(r.ipv4.length, 0, 'Linux host cannot borrow from the Windows block');
  t.match(r.messages[0], /exhausted/);
  await t.rejects(ipam.assignIP({ host: 'lin', ip: '10.0.0.10' }), { code: 'NOT_BORROWABLE' });
});

t.test('Windows hosts never borrow from Linux blocks', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/26', blockSize: 26 }], [{ name: 'win', os: 'windows' }, { name: 'lin' }]);
  await ipam.autoAssign({ host: 'lin', num4: 1 });
  const r = await ipam.autoAssign({ host: 'win', num4: 1 });
  t.equal(r.ipv4.length, 0);
  t.match(r.messages[0], /Windows hosts never borrow/);
  await t.rejects(ipam.assignIP({ host: 'win', ip: '10.0.0.20' }), { code: 'NOT_BORROWABLE' });
});

t.test('Windows with blocks too small for the 4-address rule is told to use a micropool policy', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/28', blockSize: 30 }], [{ name: 'win', os: 'windows' }]);
  const r = await ipam.autoAssign({ host: 'win', num4: 1 });
  t.equal(r.ipv4.length, 0);
  t.match(r.messages[0], /too small for the Windows 4-address reservation/);
});

t.test('micropools: per-host reservation in /30 and /32 blocks', async (t) => {
  const ipam = await setup(
    [{ name: 'm30', cidr: '10.0.0.0/28', blockSize: 30, reservation: { kind: 'perHost', count: 1 } }],
    [{ name: 'win', os: 'windows' }],
  );
  const r = await ipam.autoAssign({ host: 'win', num4: 4 });
  // First block reserves one address for the host; the second block reserves nothing: 3 + 1.
  t.equal(r.ipv4.length, 4);
  const blocks = await ipam.blocks('win');
  t.equal(blocks.length, 2);
  t.same(blocks.map((b) => b.reserved).sort(), [0, 1], 'only the first block carries the per-host reservation');
  t.ok(blocks.every((b) => b.borrowable === false), 'Windows blocks stay non-borrowable in micropools');

  const ipam32 = await setup([{ name: 'm32', cidr: '10.0.1.0/29', blockSize: 32, reservation: { kind: 'perHost', count: 1 } }], [{ name: 'a' }]);
  const r32 = await ipam32.autoAssign({ host: 'a', num4: 3 });
  t.equal(r32.ipv4.length, 3);
  t.ok(r32.ipv4.every((x) => x.prefixLen === 32), '/32 blocks');
  t.equal((await ipam32.blocks('a')).length, 4, 'one /32 reserved for the host + three used');
});

t.test('micropools: per-pool and none', async (t) => {
  const ipam = await setup(
    [
      { name: 'pp', cidr: '10.0.0.0/29', blockSize: 30, reservation: { kind: 'perPool', count: 1 } },
      { name: 'nn', cidr: '10.0.1.0/30', blockSize: 30, reservation: { kind: 'none' } },
    ],
    [{ name: 'win', os: 'windows' }],
  );
  const r = await ipam.autoAssign({ host: 'win', num4: 8, pools: ['pp'] });
  t.equal(r.ipv4.length, 7, 'only the pool\'s first address is reserved');
  t.notOk(ips(r).includes('10.0.0.0'));
  const r2 = await ipam.autoAssign({ host: 'win', num4: 4, pools: ['nn'] });
  t.same(ips(r2).sort(), ['10.0.1.0', '10.0.1.1', '10.0.1.2', '10.0.1.3'], 'no reservation, no broadcast');
});

t.test('per-block reservation applies to every host', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/28', blockSize: 28, reservation: { kind: 'perBlock', start: 1, end: 1 } }], [{ name: 'a' }]);
  const r = await ipam.autoAssign({ host: 'a', num4: 16 });
  t.equal(r.ipv4.length, 14);
  t.notOk(ips(r).includes('10.0.0.0'));
  t.notOk(ips(r).includes('10.0.0.15'));
});

t.test('assignIP claims the block, refuses doubles, and borrows only where allowed', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], [{ name: 'a' }, { name: 'b' }]);
  const a = await ipam.assignIP({ host: 'a', ip: '10.0.0.70', handle: 'x' });
  t.same({ ip: a.ip, block: a.block, prefixLen: a.prefixLen }, { ip: '10.0.0.70', block: '10.0.0.64/26', prefixLen: 26 });
  t.same((await ipam.routes('a')).aggregates, ['10.0.0.64/26'], 'the block was claimed for a');
  await t.rejects(ipam.assignIP({ host: 'b', ip: '10.0.0.70' }), { code: 'IN_USE', message: /already allocated \(held by handle x\)/ });
  const b = await ipam.assignIP({ host: 'b', ip: '10.0.0.71' });
  t.equal(b.ip, '10.0.0.71', 'b borrows a specific address from a\'s block');
  t.same((await ipam.routes('b')).hosts, ['10.0.0.71/32']);
  await t.rejects(ipam.assignIP({ host: 'a', ip: '10.9.9.9' }), { code: 'NO_POOL' });
  await t.rejects(ipam.assignIP({ host: 'a', ip: 'not-an-ip' }), /invalid IP address "not-an-ip"/);
});

t.test('release reports addresses that were not allocated', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], [{ name: 'a' }]);
  const [ip] = ips(await ipam.autoAssign({ host: 'a', num4: 1 }));
  const r = await ipam.releaseIPs([ip, '10.0.0.200', '192.168.0.1']);
  t.same(r, { released: [ip], notAllocated: ['10.0.0.200', '192.168.0.1'] });
  t.same(await ipam.releaseIPs([ip]), { released: [], notAllocated: [ip] }, 'second release is a no-op');
  await t.rejects(ipam.releaseIPs(['10.0.0.1', 'garbage']), /invalid IP address "garbage"/);
});

t.test('an empty affine block stays; an empty non-affine block is deleted', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/26' }], [{ name: 'a' }, { name: 'b' }]);
  const [ip] = ips(await ipam.autoAssign({ host: 'a', num4: 1, handle: 'h' }));
  await ipam.releaseIPs([ip]);
  t.equal((await ipam.blocks('a')).length, 1, 'empty block keeps its affinity');
  // Make it non-affine while it holds a borrowed address of b, then release that address.
  const [borrowed] = ips(await ipam.autoAssign({ host: 'b', num4: 1 }));
  await ipam.releaseAffinity('10.0.0.0/26', 'a');
  t.equal((await ipam.blocks()).length, 1, 'non-empty block survives losing its affinity');
  t.equal((await ipam.blocks())[0].affinity, null);
  await ipam.releaseIPs([borrowed]);
  t.equal((await ipam.blocks()).length, 0, 'deleted once empty and non-affine');
});

t.test('claimAffinity and releaseAffinity', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], [{ name: 'a' }, { name: 'b' }]);
  t.same(await ipam.claimAffinity('10.0.0.0/25', 'a'), { claimed: ['10.0.0.0/26', '10.0.0.64/26'], failed: [] });
  t.same(await ipam.claimAffinity('10.0.0.64/26', 'b'), { claimed: [], failed: ['10.0.0.64/26'] }, 'already a\'s');
  await t.rejects(ipam.claimAffinity('10.0.0.0/27', 'a'), /smaller than pool p's \/26 blocks/);
  await t.rejects(ipam.claimAffinity('10.5.0.0/26', 'a'), { code: 'NO_POOL' });
  const r = await ipam.autoAssign({ host: 'a', num4: 1 });
  t.equal(r.ipv4[0].block, '10.0.0.0/26', 'claimed blocks are used first, in address order');
  await t.rejects(ipam.releaseAffinity('10.0.0.0/26', 'a', { requireEmpty: true }), { code: 'IN_USE', message: /still has 1 allocated/ });
  t.same(await ipam.releaseAffinity('10.0.0.64/26', 'a', { requireEmpty: true }), { released: ['10.0.0.64/26'] });
  t.same((await ipam.routes('a')).aggregates, ['10.0.0.0/26']);
  await t.rejects(ipam.releaseAffinity('10.0.0.128/26', 'a'), { code: 'NOT_FOUND' });
});

t.test('disableBGPExport pools are left out of the route view', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24', disableBGPExport: true }, { name: 'q', cidr: '10.1.0.0/24' }], [{ name: 'a' }]);
  await ipam.autoAssign({ host: 'a', num4: 1, pools: ['p'] });
  await ipam.autoAssign({ host: 'a', num4: 1, pools: ['q'] });
  const routes = await ipam.routes('a');
  t.equal(routes.aggregates.length, 1);
  t.ok(inBlock('10.1.0.0/24', routes.aggregates[0].split('/')[0]));
});

t.test('deleting a pool with allocations is refused; an empty one takes its blocks along', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], [{ name: 'a' }]);
  const [ip] = ips(await ipam.autoAssign({ host: 'a', num4: 1 }));
  await t.rejects(ipam.deletePool('p'), { code: 'IN_USE', message: /still has 1 allocated/ });
  await ipam.releaseIPs([ip]);
  await ipam.deletePool('p');
  t.same(await ipam.listPools(), []);
  t.same(await ipam.blocks(), []);
  t.same((await ipam.routes('a')).aggregates, []);
  await t.rejects(ipam.deletePool('p'), { code: 'NOT_FOUND' });
});

t.test('concurrent requests for one host are batched and all distinct', async (t) => {
  const store = new MemoryStore();
  let txns = 0;
  const txn = store.txn.bind(store);
  store.txn = (c, o) => {
    txns++;
    return txn(c, o);
  };
  const ipam = new Ipam(store);
  await ipam.addPool({ name: 'p', cidr: '10.0.0.0/22' });
  await ipam.setHost({ name: 'a', os: 'linux', labels: {} });
  txns = 0;
  const rs = await Promise.all(Array.from({ length: 200 }, (_, i) => ipam.autoAssign({ host: 'a', num4: 1, handle: `c${i}` })));
  const all = rs.flatMap(ips);
  t.equal(all.length, 200);
  t.equal(new Set(all).size, 200, 'no address twice');
  t.ok(txns < 100, `batched: ${txns} transactions for 200 requests`);
  const handles = await ipam.ds.handles();
  t.equal(handles.length, 200);
});

t.test('a pending affinity left by a crash is finished by the next allocation', async (t) => {
  const ipam = await setup([{ name: 'p', cidr: '10.0.0.0/24' }], [{ name: 'a' }]);
  // Simulate a crash after phase 1 of a claim: pending affinity, no block.
  await ipam.store.put('/blockspeaker/ipam/v1/affinity/a/10.0.0.128-26', JSON.stringify({ host: 'a', cidr: '10.0.0.128/26', state: 'pending' }));
  const r = await ipam.autoAssign({ host: 'a', num4: 1 });
  t.equal(r.ipv4[0].block, '10.0.0.128/26', 'the pending claim was completed and used');
  const aff = await ipam.ds.affinity('a', '10.0.0.128/26');
  t.equal(aff?.value.state, 'confirmed');
});

t.test('IpamError carries a code', async (t) => {
  const e = new IpamError('NO_POOL', 'x');
  t.equal(e.name, 'IpamError');
  t.equal(e.code, 'NO_POOL');
});
