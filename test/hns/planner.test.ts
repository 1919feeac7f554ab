// The HNS planner against the in-memory HNS: scenarios for each mode, and properties over random sequences of
// desired states (reach exactly the desired state, touch nothing foreign, send only the diff).
import t, { type Test } from 'tap';
import fc from 'fast-check';
import type { DesiredState, HnsMode } from '../../src/hns/desired.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import {
  type HnsIpSubnet,
  type HnsNetwork,
  type HnsOp,
  type HnsPolicy,
  type HnsSnapshot,
  type HnsSubnet,
  type ModifyNetworkRequest,
  type NetRoute,
  HCN,
  emptySnapshot,
  readIP,
  readPrefix,
  subnetsOf,
} from '../../src/hns/model.ts';
import { desiredView, observe, planHns, rsrSig } from '../../src/hns/planner.ts';
import { subnetSig } from '../../src/hns/desired.ts';
import { parsePrefix, prefixContainsPrefix } from '../../src/net/ip.ts';
import { ALIAS, MODES, desired, fromSpec, stateArb, summary } from './helpers.ts';

/** Plan, apply to the fake (must succeed), and check the result is exactly the desired state with nothing left. */
function converge(t: Test, fake: FakeHns, d: DesiredState, what = ''): HnsOp[] {
  const before = fake.snapshot();
  const existed = before.Networks.some((n) => n.Name === d.networkName);
  const plan = planHns(before, d);
  const r = fake.applyAll(plan.ops);
  if (r.error) t.fail(`${what}: op ${r.applied} (${r.failedOp?.op}) failed: ${r.error.message}`);
  const after = fake.snapshot();
  t.same(observe(after, d), desiredView(d, existed), `${what}: reaches the desired state`);
  const again = planHns(after, d);
  t.same(again.ops, [], `${what}: nothing left to do`);
  return plan.ops;
}

const net = (fake: FakeHns): HnsNetwork => fake.networkByName('pods')!;
const subnet = (fake: FakeHns, prefix: string): HnsSubnet => subnetsOf(net(fake)).find((s) => s.IpAddressPrefix === prefix)!;

for (const mode of MODES) {
  t.test(`${mode}: disjoint blocks of one pool, micropool /30 and /32, release, move, endpoints`, async (t) => {
    const fake = new FakeHns();
    const remoteA = { '10.0.5.0/26': '192.168.1.5', '10.0.7.9/32': '192.168.1.7' };
    let d = desired(mode, ['10.0.123.0/26', '10.0.200.0/26', '10.9.0.4/30', '10.9.0.9/32'], remoteA);
    const first = converge(t, fake, d, 'first');
    const remoteOps = mode === 'overlay'
      ? ['add-policy HostRoute', 'add-policy 10.0.5.0/26 via 192.168.1.5', 'add-policy 10.0.7.9/32 via 192.168.1.7']
      : ['add-host-route 10.0.5.0/26 via 192.168.1.5', 'add-host-route 10.0.7.9/32 via 192.168.1.7'];
    t.same(summary(first), ['create-network pods', ...remoteOps]);
    const created = first[0].body as HnsNetwork;
    t.equal(created.Type, { l2bridge: 'L2Bridge', l2tunnel: 'L2Tunnel', overlay: 'Overlay' }[mode]);
    const subs = created.Ipams![0].Subnets!;
    t.same(subs.map((s) => s.IpAddressPrefix), ['10.0.0.0/16', '10.9.0.0/24'], 'a Subnet per pool');
    t.same(subs[0].Routes, [{ NextHop: '10.0.0.1', DestinationPrefix: '0.0.0.0/0' }], 'the shared gateway route');
    t.same(subs[0].IpSubnets, [{ IpAddressPrefix: '10.0.123.0/26', Flags: 3 }, { IpAddressPrefix: '10.0.200.0/26', Flags: 3 }], 'normal blocks: broadcast + reserved network address');
    t.same(subs[1].IpSubnets, [{ IpAddressPrefix: '10.9.0.4/30', Flags: 0 }, { IpAddressPrefix: '10.9.0.9/32', Flags: 0 }], 'micropool blocks: flags 0');
    t.same(subs[0].Policies, mode === 'overlay' ? [{ Type: 'VSID', Settings: { IsolationId: 4096 } }] : []);
    if (mode === 'overlay') {
      const p = (first[2].body as ModifyNetworkRequest).Settings as { Policies: HnsPolicy[] };
      t.same(p.Policies, [{ Type: 'RemoteSubnetRoute', Settings: { DestinationPrefix: '10.0.5.0/26', IsolationId: 4096, ProviderAddress: '192.168.1.5', DistributedRouterMacAddress: '01-02-03-04-05-06' } }]);
    } else {
      t.same(first[1].body, { DestinationPrefix: '10.0.5.0/26', NextHop: '192.168.1.5', InterfaceAlias: ALIAS, RouteMetric: 271 });
    }

    // A new block in the same pool: one add-ip-subnet into the existing Subnet, by its ID.
    d = desired(mode, ['10.0.123.0/26', '10.0.200.0/26', '10.0.201.0/26', '10.9.0.4/30', '10.9.0.9/32'], remoteA);
    const grow = converge(t, fake, d, 'grow');
    t.same(summary(grow), ['add-ip-subnet 10.0.201.0/26']);
    t.equal(((grow[0].body as ModifyNetworkRequest).Settings as { SubnetId: string }).SubnetId, subnet(fake, '10.0.0.0/16').ID, 'SubnetId of the pool Subnet');

    // A block released: exactly its ip-subnet goes, by ID.
    const ipId = subnet(fake, '10.0.0.0/16').IpSubnets!.find((i) => i.IpAddressPrefix === '10.0.200.0/26')!.ID;
    d = desired(mode, ['10.0.123.0/26', '10.0.201.0/26', '10.9.0.4/30', '10.9.0.9/32'], remoteA);
    const release = converge(t, fake, d, 'release');
    t.same(summary(release), ['remove-ip-subnet 10.0.200.0/26']);
    t.same(((release[0].body as ModifyNetworkRequest).Settings as { IpSubnets: HnsIpSubnet[] }).IpSubnets, [{ ID: ipId, IpAddressPrefix: '10.0.200.0/26' }]);

    // A remote block moves to another next hop: the stale one goes first.
    const remoteB = { '10.0.5.0/26': '192.168.1.6', '10.0.7.9/32': '192.168.1.7' };
    d = desired(mode, ['10.0.123.0/26', '10.0.201.0/26', '10.9.0.4/30', '10.9.0.9/32'], remoteB);
    const move = converge(t, fake, d, 'move');
    t.same(summary(move), mode === 'overlay'
      ? ['remove-policy 10.0.5.0/26 via 192.168.1.5', 'add-policy 10.0.5.0/26 via 192.168.1.6']
      : ['remove-host-route 10.0.5.0/26 via 192.168.1.5', 'add-host-route 10.0.5.0/26 via 192.168.1.6']);

    // The micropool's last blocks go: its Subnet goes, ip-subnets and all, in one op.
    d = desired(mode, ['10.0.123.0/26', '10.0.201.0/26'], remoteB);
    t.same(summary(converge(t, fake, d, 'micropool emptied')), ['remove-subnet 10.9.0.0/24']);

    // An ip-subnet an endpoint uses is not removed: blocked, and HNS itself would refuse.
    fake.createEndpoint(net(fake).ID!, '10.0.201.5', 'pod-a');
    d = desired(mode, ['10.0.123.0/26'], remoteB);
    const plan = planHns(fake.snapshot(), d);
    t.same(summary(plan.ops), []);
    t.same(plan.blocked, [{ op: 'remove-ip-subnet', object: '10.0.201.0/26', reason: '1 endpoint(s) still use it' }]);
    const s = subnet(fake, '10.0.0.0/16');
    const id201 = s.IpSubnets!.find((i) => i.IpAddressPrefix === '10.0.201.0/26')!.ID!;
    t.throws(
      () => fake.modifyNetwork(net(fake).ID!, { ResourceType: 'IPSubnet', RequestType: 'Remove', Settings: { SubnetId: s.ID, IpSubnets: [{ ID: id201, IpAddressPrefix: '10.0.201.0/26' }] } }),
      { code: HCN.ENTITY_HAS_REFERENCES },
      'the fake answers 0x803B002C',
    );
    // Once the endpoint is gone, the next pass removes it.
    fake.deleteEndpoint(fake.snapshot().Endpoints[0].ID);
    t.same(summary(converge(t, fake, d, 'after endpoint')), ['remove-ip-subnet 10.0.201.0/26']);

    // A /26 replaced by an overlapping /27: remove first, then add (HNS refuses overlapping ip-subnets).
    d = desired(mode, ['10.0.123.0/27'], remoteB);
    t.same(summary(converge(t, fake, d, 'reshape')), ['remove-ip-subnet 10.0.123.0/26', 'add-ip-subnet 10.0.123.0/27']);

    // Remote routes withdrawn; the last block released: the Subnet goes, the network stays (never deleted).
    d = desired(mode, [], {});
    const gone = converge(t, fake, d, 'empty');
    t.same(summary(gone), [
      ...(mode === 'overlay' ? ['remove-policy 10.0.5.0/26 via 192.168.1.6', 'remove-policy 10.0.7.9/32 via 192.168.1.7'] : ['remove-host-route 10.0.5.0/26 via 192.168.1.6', 'remove-host-route 10.0.7.9/32 via 192.168.1.7']),
      'remove-subnet 10.0.0.0/16',
    ]);
    t.ok(net(fake), 'network kept');
  });
}

t.test('subnet and endpoint: a stale Subnet with endpoints keeps them, loses what no endpoint uses', async (t) => {
  const fake = new FakeHns();
  converge(t, fake, desired('l2bridge', ['10.9.0.4/30', '10.9.0.8/30', '10.0.1.0/26']), 'setup');
  fake.createEndpoint(net(fake).ID!, '10.9.0.5');
  const d = desired('l2bridge', ['10.0.1.0/26']);
  const plan = planHns(fake.snapshot(), d);
  t.same(summary(plan.ops), ['remove-ip-subnet 10.9.0.8/30']);
  t.same(plan.blocked.map((b) => `${b.op} ${b.object}`), ['remove-subnet 10.9.0.0/24']);
  t.notOk(fake.applyAll(plan.ops).error);
});

t.test('overlapping add is blocked while an endpoint holds the old ip-subnet', async (t) => {
  const fake = new FakeHns();
  converge(t, fake, desired('l2bridge', ['10.0.1.0/26']), 'setup');
  fake.createEndpoint(net(fake).ID!, '10.0.1.40');
  const plan = planHns(fake.snapshot(), desired('l2bridge', ['10.0.1.0/27']));
  t.same(plan.ops, []);
  t.same(plan.blocked.map((b) => `${b.op} ${b.object}`), ['remove-ip-subnet 10.0.1.0/26', 'add-ip-subnet 10.0.1.0/27']);
});

t.test('a network of the wrong type is reported, never modified', async (t) => {
  const fake = new FakeHns();
  converge(t, fake, desired('l2bridge', ['10.0.1.0/26']), 'setup');
  const plan = planHns(fake.snapshot(), desired('overlay', ['10.0.1.0/26']));
  t.same(plan.ops, []);
  t.match(plan.blocked, [{ op: 'create-network', object: 'pods', reason: /exists as L2Bridge.*needs Overlay/ }]);
});

t.test('single-network mode: the block is the Subnet, gateway .1', async (t) => {
  const fake = new FakeHns();
  const ops = converge(t, fake, desired('l2bridge', ['10.0.123.0/26'], {}, { singleNetwork: true }), 'single');
  const s = (ops[0].body as HnsNetwork).Ipams![0].Subnets!;
  t.same(s, [{ IpAddressPrefix: '10.0.123.0/26', Routes: [{ NextHop: '10.0.123.1', DestinationPrefix: '0.0.0.0/0' }], Policies: [], IpSubnets: [{ IpAddressPrefix: '10.0.123.0/26', Flags: 3 }] }]);
  t.throws(() => desired('l2bridge', ['10.0.1.0/26', '10.0.2.0/26'], {}, { singleNetwork: true }), /one local block per host, got 2/);
});

t.test('flags follow the reservation policy; /31 and /32 never reserve', async (t) => {
  const d = desired('l2bridge', [
    '10.0.1.0/26',
    { cidr: '10.0.2.0/26', reservation: { kind: 'perHost', count: 2 } },
    { cidr: '10.0.3.0/26', reservation: { kind: 'perBlock', start: 0, end: 0 } },
    { cidr: '10.0.4.0/26', reservation: { kind: 'perBlock', start: 3, end: 1 } },
    '10.0.5.0/31',
    '10.0.5.8/32',
  ]);
  t.same(d.subnets[0].ipSubnets.map((i) => `${i.key}=${i.flags}`), ['10.0.1.0/26=3', '10.0.2.0/26=0', '10.0.3.0/26=0', '10.0.4.0/26=3', '10.0.5.0/31=0', '10.0.5.8/32=0']);
});

t.test('remote routes: own blocks, ourselves and foreign space are left out', async (t) => {
  const d = desired('overlay', ['10.0.1.0/26'], {
    '10.0.1.0/26': '192.168.1.9', // our own block reflected back
    '10.0.1.7/32': '192.168.1.9', // a more-specific inside it
    '10.0.2.0/26': '192.168.1.1', // via ourselves
    '172.16.0.0/24': '192.168.1.2', // not pod space
    '10.0.3.0/26': '192.168.1.3',
  }, { providerAddress: '192.168.1.1' });
  t.same(d.remoteSubnetRoutes.map((r) => r.key), ['10.0.3.0/26']);
  t.same(d.ignored.map((i) => `${i.prefix}: ${i.reason}`).sort(), [
    '10.0.1.0/26: overlaps a local block',
    '10.0.1.7/32: overlaps a local block',
    '10.0.2.0/26: via this node',
    '172.16.0.0/24: outside the pools and owned prefixes',
  ]);
});

t.test('the plan does not depend on the order HNS lists things in', async (t) => {
  const fake = new FakeHns();
  const d1 = desired('overlay', ['10.0.1.0/26', '10.0.2.0/26', '10.0.3.0/26', '10.9.0.4/30'], { '10.0.50.0/26': '192.168.1.1', '10.0.51.0/26': '192.168.1.2', '10.0.52.0/26': '192.168.1.3' });
  converge(t, fake, d1, 'setup');
  const d2 = desired('overlay', ['10.0.2.0/26', '10.0.4.0/26'], { '10.0.51.0/26': '192.168.1.3', '10.0.53.0/26': '192.168.1.1' });
  const snap = fake.snapshot();
  const reversed: HnsSnapshot = structuredClone(snap);
  for (const n of reversed.Networks) {
    n.Policies!.reverse();
    for (const s of subnetsOf(n)) s.IpSubnets!.reverse();
    n.Ipams![0].Subnets!.reverse();
  }
  const a = planHns(snap, d2).ops;
  t.same(planHns(reversed, d2).ops, a);
  t.same(summary(a), [
    'remove-policy 10.0.50.0/26 via 192.168.1.1',
    'remove-policy 10.0.51.0/26 via 192.168.1.2',
    'remove-policy 10.0.52.0/26 via 192.168.1.3',
    'remove-ip-subnet 10.0.1.0/26',
    'remove-ip-subnet 10.0.3.0/26',
    'remove-subnet 10.9.0.0/24',
    'add-ip-subnet 10.0.4.0/26',
    'add-policy 10.0.51.0/26 via 192.168.1.3',
    'add-policy 10.0.53.0/26 via 192.168.1.1',
  ]);
});

t.test('a plan from Get-HnsNetwork JSON without IDs resolves subnets by prefix', async (t) => {
  const fake = new FakeHns();
  converge(t, fake, desired('l2bridge', ['10.0.1.0/26']), 'setup');
  const snap = fake.snapshot();
  for (const s of subnetsOf(snap.Networks[0])) {
    delete s.ID;
    for (const i of s.IpSubnets!) delete i.ID;
  }
  const plan = planHns(snap, desired('l2bridge', ['10.0.2.0/26']));
  t.same(plan.ops.map((o) => [o.op, o.subnet, (o.body as ModifyNetworkRequest).Settings]), [
    ['remove-ip-subnet', '10.0.0.0/16', { IpSubnets: [{ IpAddressPrefix: '10.0.1.0/26' }] }],
    ['add-ip-subnet', '10.0.0.0/16', { IpSubnets: [{ IpAddressPrefix: '10.0.2.0/26', Flags: 3 }] }],
  ]);
  const r = fake.applyAll(plan.ops);
  t.notOk(r.error, 'the executor finds the IDs');
  t.same(planHns(fake.snapshot(), desired('l2bridge', ['10.0.2.0/26'])).ops, []);
});

// ---- properties ----------------------------------------------------------------------------------------------

/** Foreign objects a real host has: another network, a foreign Subnet, other policies, other routes. */
function foreignSeed(mode: HnsMode): HnsSnapshot {
  const type = { l2bridge: 'L2Bridge', l2tunnel: 'L2Tunnel', overlay: 'Overlay' }[mode];
  const vsid = mode === 'overlay' ? [{ Type: 'VSID', Settings: { IsolationId: 5000 } }] : [];
  const policies: HnsPolicy[] = [{ Type: 'NetAdapterName', Settings: { NetworkAdapterName: 'Ethernet' } }];
  if (mode === 'overlay') {
    policies.push({ Type: 'RemoteSubnetRoute', Settings: { DestinationPrefix: '172.16.0.0/24', IsolationId: 5000, ProviderAddress: '192.168.9.9', DistributedRouterMacAddress: '0A-0B-0C-0D-0E-0F' } });
  }
  return {
    Networks: [
      {
        ID: 'F0000000-0000-0000-0000-000000000001',
        Name: 'pods',
        Type: type,
        Ipams: [{ Type: 'Static', Subnets: [{ ID: 'F0000000-0000-0000-0000-000000000002', IpAddressPrefix: '192.168.50.0/24', Routes: [{ NextHop: '192.168.50.1', DestinationPrefix: '0.0.0.0/0' }], Policies: vsid, IpSubnets: [{ ID: 'F0000000-0000-0000-0000-000000000003', IpAddressPrefix: '192.168.50.0/25', Flags: 3 }] }] }],
        Policies: policies,
      },
      {
        ID: 'F0000000-0000-0000-0000-000000000010',
        Name: 'other',
        Type: 'L2Bridge',
        Ipams: [{ Type: 'Static', Subnets: [{ ID: 'F0000000-0000-0000-0000-000000000011', IpAddressPrefix: '10.0.0.0/16', Routes: [{ NextHop: '10.0.0.1', DestinationPrefix: '0.0.0.0/0' }], Policies: [], IpSubnets: [{ ID: 'F0000000-0000-0000-0000-000000000012', IpAddressPrefix: '10.0.1.0/26', Flags: 3 }] }] }],
        Policies: [],
      },
    ],
    Endpoints: [{ ID: 'F0000000-0000-0000-0000-000000000020', HostComputeNetwork: 'F0000000-0000-0000-0000-000000000001', IpConfigurations: [{ IpAddress: '192.168.50.10', PrefixLength: 25 }] }],
    HostRoutes: [
      { DestinationPrefix: '10.0.0.0/16', NextHop: '0.0.0.0', InterfaceAlias: ALIAS, RouteMetric: 271 }, // on-link, the host's own
      { DestinationPrefix: '10.0.120.0/26', NextHop: '192.168.1.9', InterfaceAlias: ALIAS, RouteMetric: 5 }, // someone else's metric
      { DestinationPrefix: '10.0.100.0/26', NextHop: '192.168.1.1', InterfaceAlias: 'Ethernet 2', RouteMetric: 271 }, // other interface
      { DestinationPrefix: '0.0.0.0/0', NextHop: '192.168.0.1', InterfaceAlias: ALIAS, RouteMetric: 271 }, // default route
      { DestinationPrefix: '172.16.0.0/24', NextHop: '192.168.1.9', InterfaceAlias: ALIAS, RouteMetric: 271 }, // outside owned
    ],
  };
}

/** The foreign parts of a snapshot, to compare before and after. */
function foreignParts(s: HnsSnapshot) {
  const pods = s.Networks.find((n) => n.Name === 'pods');
  return {
    other: s.Networks.find((n) => n.Name === 'other'),
    subnet: pods && subnetsOf(pods).find((x) => x.IpAddressPrefix === '192.168.50.0/24'),
    policies: pods?.Policies?.filter((p) => p.Type !== 'HostRoute' && (p.Type !== 'RemoteSubnetRoute' || String(p.Settings?.DestinationPrefix).startsWith('172.'))),
    endpoints: s.Endpoints,
    routes: s.HostRoutes.filter((r) => r.RouteMetric !== 271 || r.InterfaceAlias !== ALIAS || r.NextHop === '0.0.0.0' || !r.DestinationPrefix.startsWith('10.')),
  };
}

/** Every prefix and ID an op names, to check none is foreign. */
function named(op: HnsOp): { prefixes: string[]; ids: string[] } {
  const prefixes: string[] = [];
  const ids: string[] = [];
  const walk = (v: unknown, key = ''): void => {
    if (Array.isArray(v)) v.forEach((x) => walk(x));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
    else if (typeof v === 'string' && (key === 'IpAddressPrefix' || (key === 'DestinationPrefix' && !v.endsWith('/0')))) prefixes.push(v);
    else if (typeof v === 'string' && (key === 'ID' || key === 'SubnetId')) ids.push(v);
  };
  walk(op.body);
  return { prefixes, ids };
}

t.test('property: sequences of desired states reach exactly each one; foreign objects are never touched', async (t) => {
  const owned = parsePrefix('10.0.0.0/8');
  fc.assert(
    fc.property(fc.constantFrom(...MODES), fc.boolean(), fc.array(stateArb, { minLength: 1, maxLength: 6 }), (mode, seeded, specs) => {
      const seed = seeded ? foreignSeed(mode) : emptySnapshot();
      const fake = FakeHns.fromSnapshot(seed);
      const foreignBefore = foreignParts(fake.snapshot());
      const foreignIds = new Set(JSON.stringify(foreignBefore).match(/F0000000-[0-9A-F-]+/g) ?? []);
      for (const spec of specs) {
        const d = fromSpec(mode, spec);
        const before = fake.snapshot();
        const existed = before.Networks.some((n) => n.Name === 'pods');
        const plan = planHns(before, d);
        // The one expected wait: overlay remote routes before any local block exists to create the network with.
        const blocked = plan.blocked.filter((b) => !(b.op === 'create-network' && !existed && d.subnets.length === 0));
        if (blocked.length) throw new Error(`unexpected blocked: ${JSON.stringify(plan.blocked)}`);
        for (const op of plan.ops) {
          const n = named(op);
          for (const p of n.prefixes) if (!prefixContainsPrefix(owned, parsePrefix(p))) throw new Error(`${op.op} names foreign ${p}`);
          for (const id of n.ids) if (foreignIds.has(id)) throw new Error(`${op.op} names foreign ID ${id}`);
          if (op.network !== undefined && op.network !== 'pods') throw new Error(`${op.op} on network ${op.network}`);
        }
        const r = fake.applyAll(plan.ops);
        if (r.error) throw new Error(`op ${r.applied} ${r.failedOp?.op} failed: ${r.error.message}`);
        const after = fake.snapshot();
        const got = observe(after, d);
        const want = desiredView(d, existed);
        if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`not the desired state:\n${JSON.stringify(got)}\n${JSON.stringify(want)}`);
        if (planHns(after, d).ops.length !== 0) throw new Error('second plan not empty');
        if (seeded && JSON.stringify(foreignParts(after)) !== JSON.stringify(foreignBefore)) throw new Error('a foreign object changed');
      }
    }),
    { numRuns: 150 },
  );
  t.pass('150 random sequences');
});

/** The owned objects a plan adds and removes, expanded to object level (a Subnet with its ip-subnets). */
function touched(before: HnsSnapshot, ops: readonly HnsOp[], d: DesiredState) {
  const pods = before.Networks.find((n) => n.Name === 'pods');
  const subById = new Map<string, HnsSubnet>();
  const ipById = new Map<string, { sub: HnsSubnet; ip: HnsIpSubnet }>();
  for (const s of pods ? subnetsOf(pods) : []) {
    subById.set(s.ID!, s);
    for (const ip of s.IpSubnets ?? []) ipById.set(ip.ID!, { sub: s, ip });
  }
  const key = (p: string) => readPrefix(p)!.key;
  const subKey = (s: HnsSubnet) => `${key(s.IpAddressPrefix)}|${subnetSig(s.Routes ?? [], s.Policies ?? [])}`;
  const ipKey = (s: string, ip: HnsIpSubnet) => `${key(s)}>${key(ip.IpAddressPrefix)}|${ip.Flags ?? 0}`;
  const add: string[] = [];
  const remove: string[] = [];
  const addSubnet = (s: HnsSubnet) => {
    add.push(`S ${subKey(s)}`);
    for (const ip of s.IpSubnets ?? []) add.push(`I ${ipKey(s.IpAddressPrefix, ip)}`);
  };
  for (const op of ops) {
    const req = op.body as ModifyNetworkRequest;
    const set = req.Settings as Record<string, unknown>;
    switch (op.op) {
      case 'create-network':
        for (const s of subnetsOf(op.body as HnsNetwork)) addSubnet(s);
        break;
      case 'add-subnet':
        for (const s of set.Subnets as HnsSubnet[]) addSubnet(s);
        break;
      case 'remove-subnet':
        for (const ref of set.Subnets as HnsSubnet[]) {
          const s = subById.get(ref.ID!)!;
          remove.push(`S ${subKey(s)}`);
          for (const ip of s.IpSubnets ?? []) remove.push(`I ${ipKey(s.IpAddressPrefix, ip)}`);
        }
        break;
      case 'add-ip-subnet':
        for (const ip of set.IpSubnets as HnsIpSubnet[]) add.push(`I ${ipKey(op.subnet!, ip)}`);
        break;
      case 'remove-ip-subnet':
        for (const ref of set.IpSubnets as HnsIpSubnet[]) {
          const { sub, ip } = ipById.get(ref.ID!)!;
          remove.push(`I ${ipKey(sub.IpAddressPrefix, ip)}`);
        }
        break;
      case 'add-policy':
      case 'remove-policy':
        for (const p of set.Policies as HnsPolicy[]) {
          const k = p.Type === 'HostRoute' ? 'H' : `P ${rsrSig(p.Settings, key(String(p.Settings!.DestinationPrefix)))}`;
          (op.op === 'add-policy' ? add : remove).push(k);
        }
        break;
      case 'add-host-route':
      case 'remove-host-route': {
        const r = op.body as NetRoute;
        (op.op === 'add-host-route' ? add : remove).push(`R ${key(r.DestinationPrefix)}|${readIP(r.NextHop)!.key}`);
        break;
      }
    }
  }
  void d;
  return { add: add.sort(), remove: remove.sort() };
}

function viewSet(v: ReturnType<typeof observe>): Set<string> {
  return new Set([
    ...v.subnets.map((s) => `S ${s}`),
    ...v.ipSubnets.map((s) => `I ${s}`),
    ...v.policies.map((s) => `P ${s}`),
    ...v.hostRoutes.map((s) => `R ${s}`),
    ...(v.hostRoutePolicy ? ['H'] : []),
  ]);
}

t.test('property: no unchanged object is re-sent; the ops are exactly the difference', async (t) => {
  fc.assert(
    fc.property(fc.constantFrom(...MODES), stateArb, stateArb, (mode, s1, s2) => {
      const fake = new FakeHns();
      const d1 = fromSpec(mode, s1);
      const r1 = fake.applyAll(planHns(fake.snapshot(), d1).ops);
      if (r1.error) throw r1.error;
      const before = fake.snapshot();
      const d2 = fromSpec(mode, s2);
      const ops = planHns(before, d2).ops;
      const r2 = fake.applyAll(ops);
      if (r2.error) throw r2.error;
      const v1 = viewSet(observe(before, d2));
      const v2 = viewSet(observe(fake.snapshot(), d2));
      const want = { add: [...v2].filter((x) => !v1.has(x)).sort(), remove: [...v1].filter((x) => !v2.has(x)).sort() };
      const got = touched(before, ops, d2);
      if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`ops are not the diff:\n${JSON.stringify(got)}\n${JSON.stringify(want)}`);
      // Every object sent is sent once.
      if (new Set(got.add).size !== got.add.length || new Set(got.remove).size !== got.remove.length) throw new Error('an object sent twice');
    }),
    { numRuns: 200 },
  );
  t.pass('200 random pairs');
});

t.test('an overlay Subnet listed without its VSID policy is judged on its routes', async (t) => {
  const fake = new FakeHns();
  const d = desired('overlay', ['10.0.1.0/26']);
  converge(t, fake, d, 'setup');
  const snap = fake.snapshot();
  for (const s of subnetsOf(snap.Networks[0])) s.Policies = [];
  t.same(planHns(snap, d).ops, [], 'no churn');
  for (const s of subnetsOf(snap.Networks[0])) s.Routes = [{ NextHop: '10.0.0.254', DestinationPrefix: '0.0.0.0/0' }];
  t.same(summary(planHns(snap, d).ops), ['remove-subnet 10.0.0.0/16', 'add-subnet 10.0.0.0/16'], 'a changed gateway still replaces it');
});
