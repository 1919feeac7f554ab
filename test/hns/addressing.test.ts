// The HNS addressing model end to end against real IPAM (memory store): the gateway in the CNI result, the gateway
// and host endpoint in the HNS objects (planned, applied to the fake HNS, read back) and the addresses IPAM reserves
// agree, for a node's 1st, 2nd and 3rd block, in multi-subnet and single-network mode, and for micropools.
import t from 'tap';
import fc from 'fast-check';
import { Ipam } from '../../src/ipam/ipam.ts';
import type { BlockRecord, ReservationPolicy } from '../../src/ipam/types.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { ipamHandlers } from '../../src/ipc/ipam.ts';
import { formatIP, ipAt, parseIP, parsePrefix, offsetOf, prefixContainsIP, prefixSize } from '../../src/net/ip.ts';
import { hnsAddressing } from '../../src/hns/addressing.ts';
import { readIpamView } from '../../src/hns/ipam-view.ts';
import { buildDesired, hostEndpointName } from '../../src/hns/desired.ts';
import { planHns } from '../../src/hns/planner.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import { emptySnapshot, subnetsOf, endpointAddresses, findHresult, parseHresult, HCN, HcnError } from '../../src/hns/model.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';

interface Case {
  single: boolean;
  blockSize: number;
  reservation: ReservationPolicy;
  blocks: number;
}

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    single: fc.boolean(),
    blockSize: fc.integer({ min: 27, max: 30 }),
    reservation: fc.oneof(
      fc.constant<ReservationPolicy>({ kind: 'auto' }),
      fc.integer({ min: 3, max: 4 }).map((count): ReservationPolicy => ({ kind: 'perHost', count })),
      fc.record({ start: fc.integer({ min: 3, max: 3 }), end: fc.integer({ min: 0, max: 1 }) }).map((r): ReservationPolicy => ({ kind: 'perBlock', ...r })),
    ),
    blocks: fc.integer({ min: 1, max: 3 }),
  })
  // A /30 under auto or perBlock(3,1) leaves nothing for pods in the first block: IPAM refuses such pools.
  .filter((c) => !(c.blockSize === 30 && c.reservation.kind !== 'perHost'))
  .map((c) => (c.single ? { ...c, blocks: 1 } : c));

async function runCase(c: Case): Promise<string | null> {
  const host = 'win-1';
  const network = 'pods';
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p', cidr: '10.20.0.0/24', blockSize: c.blockSize, reservation: c.reservation });
  await ipam.setHost({ name: host, os: 'windows', labels: {} });
  const dataplaneGateway = async (pool: string) => {
    const v = await readIpamView(ipam, host, c.single);
    const a = v.pools.find((x) => x.pool === pool);
    return a ? { gateway: a.gateway, prefixLen: a.prefixLen } : null;
  };
  const h = ipamHandlers(ipam, host, { dataplaneGateway });
  const replies: AssignReply[] = [];
  // Pods until the node holds c.blocks blocks and the last one has a pod.
  for (let i = 0; i < 200; i++) {
    const r = (await h['ipam.assign']({ containerId: `c${i}`, ifname: 'eth0', addressing: {} }, { connectionId: 't' })) as AssignReply;
    replies.push(r);
    if ((await ipam.blocks(host)).length >= c.blocks && replies.length > 1) {
      const blocks = await ipam.blocks(host);
      if (blocks.every((b) => b.allocated > 0)) break;
    }
  }
  const records = (await ipam.ds.blocks()).map((r) => r.value as BlockRecord);
  if (records.length < c.blocks) return `only ${records.length} blocks`;
  const view = await readIpamView(ipam, host, c.single);
  if (view.problems.length) return `problems: ${JSON.stringify(view.problems)}`;
  const [a] = view.pools;
  // IPAM: the gateway and host endpoint are reserved in the first block, never a pod's.
  const first = records.find((b) => b.cidr === a.firstBlock)!;
  const fp = parsePrefix(first.cidr);
  for (const ip of [a.gateway, a.hostEndpoint]) {
    if (!first.reserved.includes(offsetOf(fp, parseIP(ip)))) return `${ip} not reserved in ${first.cidr}`;
  }
  const podIPs = replies.flatMap((r) => r.ips.map((x) => x.ip));
  if (podIPs.includes(a.gateway) || podIPs.includes(a.hostEndpoint)) return 'a pod got the gateway or host endpoint';
  // Auto on Windows reserves exactly what the model needs: .0, .1, .2, last in the first block; .0 and last after.
  if (c.reservation.kind === 'auto') {
    for (const b of records) {
      const last = prefixSize(parsePrefix(b.cidr)) - 1;
      const want = b.cidr === a.firstBlock ? [0, 1, 2, last] : [0, last];
      if (JSON.stringify([...b.reserved].sort((x, y) => x - y)) !== JSON.stringify(want)) return `block ${b.cidr} reserves ${b.reserved}, want ${want}`;
    }
  }
  // CNI: every result's gateway is the model's, with the subnet's prefix length.
  for (const r of replies) {
    for (const ip of r.cni!.ips) {
      if (ip.gateway !== a.gateway) return `CNI gateway ${ip.gateway} != ${a.gateway}`;
      if (ip.address !== `${ip.address.split('/')[0]}/${a.prefixLen}`) return `CNI address ${ip.address} not /${a.prefixLen}`;
    }
  }
  // HNS: plan from nothing, apply to the fake, read back.
  const d = buildDesired({
    config: { mode: 'l2bridge', network, singleNetwork: c.single, pools: view.pools.map((x) => ({ cidr: x.poolCidr, name: x.pool, gateway: x.gateway, hostEndpoint: x.hostEndpoint, reservation: c.reservation })) },
    localBlocks: records.map((b) => b.cidr),
    remoteRoutes: [],
    heldIPs: view.held,
  });
  const fake = new FakeHns();
  const r = fake.applyAll(planHns(emptySnapshot(), d).ops);
  if (r.error) return `apply: ${r.error.message}`;
  const snap = fake.snapshot();
  const net = snap.Networks.find((n) => n.Name === network)!;
  const subnets = subnetsOf(net);
  if (subnets.length !== 1) return `${subnets.length} subnets`;
  const s = subnets[0];
  const wantSubnet = c.single ? a.firstBlock : '10.20.0.0/24';
  if (s.IpAddressPrefix !== wantSubnet) return `subnet ${s.IpAddressPrefix} != ${wantSubnet}`;
  if (s.Routes?.[0]?.NextHop !== a.gateway) return `HNS gateway ${s.Routes?.[0]?.NextHop} != ${a.gateway}`;
  const ipSubnets = (s.IpSubnets ?? []).map((x) => x.IpAddressPrefix).sort();
  if (JSON.stringify(ipSubnets) !== JSON.stringify([...view.blocksByPool.get('p')!].sort())) return `ip-subnets ${ipSubnets}`;
  const ep = snap.Endpoints.find((e) => e.Name === hostEndpointName(network, 'p', c.single));
  if (!ep || endpointAddresses(ep)[0]?.toString() !== a.hostEndpoint) return `host endpoint ${JSON.stringify(ep)} != ${a.hostEndpoint}`;
  if (!prefixContainsIP(parsePrefix(a.firstBlock), parseIP(a.gateway))) return 'gateway outside the first block';
  // A second plan against what HNS now holds does nothing.
  const again = planHns(snap, d);
  if (again.ops.length) return `second plan: ${again.ops.map((o) => o.op).join(',')}`;
  return null;
}

t.test('CNI gateway = HNS gateway = reserved in IPAM, for 1..3 blocks, both modes, micropools', async (t) => {
  const r = await fc.check(fc.asyncProperty(caseArb, async (c) => {
    const why = await runCase(c);
    if (why) throw new Error(why);
  }), { numRuns: 25, seed: 13 });
  t.notOk(r.failed, r.failed ? `${String(r.errorInstance)}\n${fc.defaultReportMessage(r)}` : `property holds (${r.numRuns} runs)`);
  t.ok(r.numRuns > 0);
});

t.test('hnsAddressing: first block by hostReservation, else lowest that reserves .1 and .2; problems named', async (t) => {
  const pools = [{ name: 'p', cidr: '10.0.0.0/16' }, { name: 'q', cidr: '10.1.0.0/16' }];
  const r = hnsAddressing(pools, [
    { cidr: '10.0.0.64/26', pool: 'p', reserved: [0, 1, 2, 63], hostReservation: true },
    { cidr: '10.0.0.0/26', pool: 'p', reserved: [0, 1, 2, 63] }, // Calico's rule: every block reserves 0,1,2,last
    { cidr: '10.1.0.0/26', pool: 'q', reserved: [0, 63] },
    { cidr: '10.2.0.0/26', pool: 'gone', reserved: [] },
  ]);
  t.same(r.pools, [{
    pool: 'p', poolCidr: '10.0.0.0/16', subnet: '10.0.0.0/16', prefixLen: 16, gateway: '10.0.0.65', hostEndpoint: '10.0.0.66',
    firstBlock: '10.0.0.64/26', blocks: ['10.0.0.0/26', '10.0.0.64/26'],
  }]);
  t.match(r.problems, [{ pool: 'q', reason: /reserves ordinals 1 and 2/ }, { pool: 'gone', reason: /not known/ }]);
  const lowest = hnsAddressing(pools, [{ cidr: '10.0.1.0/26', pool: 'p', reserved: [0, 1, 2, 63] }, { cidr: '10.0.0.0/26', pool: 'p', reserved: [0, 1, 2, 63] }]);
  t.equal(lowest.pools[0].gateway, '10.0.0.1', 'no flag: the lowest block that reserves .1 and .2');
  const single = hnsAddressing(pools, [{ cidr: '10.0.0.0/26', pool: 'p', reserved: [0, 1, 2, 63], hostReservation: true }], true);
  t.same([single.pools[0].subnet, single.pools[0].prefixLen], ['10.0.0.0/26', 26]);
  const two = hnsAddressing(pools, [{ cidr: '10.0.0.0/26', pool: 'p', reserved: [0, 1, 2, 63] }, { cidr: '10.0.1.0/26', pool: 'p', reserved: [0, 63] }], true);
  t.match(two.problems, [{ pool: 'p', reason: /singleNetwork: one block per host/ }]);
  t.equal(formatIP(ipAt(parsePrefix('10.0.0.0/26'), 1)), '10.0.0.1');
});

t.test('HRESULTs parse from hex and decimal; HCN error constants; NOT_FOUND family', async (t) => {
  t.equal(parseHresult('0x803B0008'), HCN.POLICY_NOT_FOUND);
  t.equal(parseHresult('803b0008'), 0x803b0008);
  t.equal(parseHresult('-2143617016'), 0x803b0008, 'signed decimal, as PowerShell prints an Int32');
  t.equal(parseHresult('2151350280'), 0x803b0008, 'unsigned decimal');
  t.equal(parseHresult('nope'), null);
  t.equal(findHresult('HcnModifyNetwork failed with error : -2143617016 policy not found'), 0x803b0008);
  t.equal(findHresult('failed 0x803b0001 network'), HCN.NETWORK_NOT_FOUND);
  t.equal(findHresult('took 1234567890 ms'), null, 'a 10-digit number below 0x80000000 is no HRESULT');
  t.ok(new HcnError(HCN.POLICY_NOT_FOUND, 'x').notFound && new HcnError(HCN.ENDPOINT_NOT_FOUND, 'x').notFound);
  t.notOk(new HcnError(HCN.POLICY_ALREADY_EXISTS, 'x').notFound);
  t.equal(HCN.POLICY_NOT_FOUND, 0x803b0008);
});
