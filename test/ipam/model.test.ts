// Model-based properties: random operations from several hosts against IPAM, checked after every step against a
// plain map of "address -> holder" and against the store's own records (blocks, handles, affinities).
import t from 'tap';
import fc from 'fast-check';
import { Ipam } from '../../src/ipam/ipam.ts';
import { checkInvariants } from './invariants.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { ipAt, parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';
import type { ReservationPolicy } from '../../src/ipam/types.ts';

const HOSTS = [
  { name: 'lin-a', os: 'linux' as const },
  { name: 'lin-b', os: 'linux' as const },
  { name: 'win-c', os: 'windows' as const },
];

type Op =
  | { k: 'assign'; host: number; n4: number; n6: number; handle: number }
  | { k: 'assignIP'; host: number; off: number; handle: number }
  | { k: 'release'; pick: number; stray: number }
  | { k: 'releaseHandle'; handle: number }
  | { k: 'releaseAffinity'; host: number; pick: number }
  | { k: 'config'; strict: boolean; maxBlocks: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant('assign' as const), host: fc.nat(2), n4: fc.nat(12), n6: fc.nat(3), handle: fc.nat(9) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('assignIP' as const), host: fc.nat(2), off: fc.nat(127), handle: fc.nat(9) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('release' as const), pick: fc.nat(1000), stray: fc.nat(127) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('releaseHandle' as const), handle: fc.nat(9) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('releaseAffinity' as const), host: fc.nat(2), pick: fc.nat(10) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('config' as const), strict: fc.boolean(), maxBlocks: fc.nat(3) }) },
);

const policyArb: fc.Arbitrary<ReservationPolicy> = fc.constantFrom<ReservationPolicy>(
  { kind: 'auto' },
  { kind: 'none' },
  { kind: 'perHost', count: 1 },
  { kind: 'perPool', count: 2 },
  { kind: 'perBlock', start: 1, end: 1 },
);

t.test('random operations keep IPAM consistent with a simple model', async (t) => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(policyArb, fc.array(opArb, { minLength: 1, maxLength: 40 }), async (policy, ops) => {
      runs++;
      const ipam = new Ipam(new MemoryStore());
      // Small pools so blocks run out and hosts must borrow.
      await ipam.addPool({ name: 'v4', cidr: '10.0.0.0/25', blockSize: 28, reservation: policy });
      await ipam.addPool({ name: 'v6', cidr: 'fd00::/124', blockSize: 126, reservation: policy.kind === 'auto' ? { kind: 'none' } : policy });
      const hostsOs = new Map<string, string>();
      for (const h of HOSTS) {
        await ipam.setHost({ ...h, labels: {} });
        hostsOs.set(h.name, h.os);
      }
      const model = new Map<string, { host: string; handle: string }>();
      const pool4 = parsePrefix('10.0.0.0/25');
      for (const op of ops) {
        if (op.k === 'assign') {
          const host = HOSTS[op.host];
          const handle = `h${op.handle}`;
          const r = await ipam.autoAssign({ host: host.name, num4: op.n4, num6: op.n6, handle });
          const got = [...r.ipv4, ...r.ipv6];
          if (got.length < op.n4 + op.n6 && r.messages.length === 0) throw new Error('short result without a message');
          for (const a of got) {
            if (model.has(a.ip)) throw new Error(`${a.ip} handed out while held by ${model.get(a.ip)!.host}`);
            model.set(a.ip, { host: host.name, handle });
          }
        } else if (op.k === 'assignIP') {
          const host = HOSTS[op.host];
          const ip = ipAt(pool4, op.off).toString();
          const handle = `h${op.handle}`;
          try {
            await ipam.assignIP({ host: host.name, ip, handle });
            if (model.has(ip)) throw new Error(`assignIP gave out held ${ip}`);
            model.set(ip, { host: host.name, handle });
          } catch (e) {
            if ((e as Error).name !== 'IpamError') throw e;
          }
        } else if (op.k === 'release') {
          const held = [...model.keys()];
          const ip = held.length && op.pick % 2 === 0 ? held[op.pick % held.length] : ipAt(pool4, op.stray).toString();
          const wasHeld = model.has(ip);
          const r = await ipam.releaseIPs([ip]);
          if (wasHeld !== (r.released.length === 1) || r.released.length + r.notAllocated.length !== 1) {
            throw new Error(`release ${ip}: held=${wasHeld}, got ${JSON.stringify(r)}`);
          }
          model.delete(ip);
        } else if (op.k === 'releaseHandle') {
          const handle = `h${op.handle}`;
          const expected = [...model].filter(([, m]) => m.handle === handle).map(([ip]) => ip).sort();
          const got = (await ipam.releaseByHandle(handle)).sort();
          if (JSON.stringify(got) !== JSON.stringify(expected)) throw new Error(`releaseByHandle ${handle}: ${got} vs ${expected}`);
          for (const ip of expected) model.delete(ip);
        } else if (op.k === 'releaseAffinity') {
          const host = HOSTS[op.host].name;
          const mine = await ipam.blocks(host);
          if (mine.length) await ipam.releaseAffinity(mine[op.pick % mine.length].cidr, host);
        } else {
          await ipam.setConfig({ strictAffinity: op.strict, maxBlocksPerHost: op.maxBlocks });
        }
        await checkInvariants(ipam, model, hostsOs);
      }
      // Everything the model holds is inside a pool.
      for (const ip of model.keys()) {
        const a = parseIP(ip);
        if (!prefixContainsIP(pool4, a) && !prefixContainsIP(parsePrefix('fd00::/124'), a)) throw new Error(`${ip} outside every pool`);
      }
    }),
    { numRuns: 60 },
  );
  t.equal(runs >= 60, true, `ran ${runs} random sequences`);
});
