// The in-memory HNS keeps HNS's rules and answers with HNS's error codes.
import t from 'tap';
import { FakeHns, FakeExecutor } from '../../src/hns/fake.ts';
import { HCN, HcnError, type HnsNetwork, type ModifyNetworkRequest, parseSnapshot } from '../../src/hns/model.ts';
import { mulberry32 } from '../../src/rib/tablegen.ts';

const l2 = (extra: Partial<HnsNetwork> = {}): HnsNetwork => ({
  Name: 'pods',
  Type: 'L2Bridge',
  Ipams: [{ Type: 'Static', Subnets: [{ IpAddressPrefix: '10.0.0.0/16', Routes: [{ NextHop: '10.0.0.1', DestinationPrefix: '0.0.0.0/0' }], IpSubnets: [{ IpAddressPrefix: '10.0.1.0/26', Flags: 3 }] }] }],
  ...extra,
});
const code = (c: number) => ({ code: c });
const sub = (f: FakeHns) => f.networkByName('pods')!.Ipams![0].Subnets![0];
const ipAdd = (subnetId: string | undefined, prefix: string): ModifyNetworkRequest => ({
  ResourceType: 'IPSubnet',
  RequestType: 'Add',
  Settings: { SubnetId: subnetId, IpSubnets: [{ IpAddressPrefix: prefix, Flags: 0 }] },
});

t.test('network, subnet and ip-subnet errors', async (t) => {
  const f = new FakeHns();
  const n = f.createNetwork(l2());
  t.ok(n.ID && sub(f).ID && sub(f).IpSubnets![0].ID, 'IDs assigned');
  t.throws(() => f.modifyNetwork('00000000-0000-0000-0000-00000000dead', ipAdd(sub(f).ID, '10.0.2.0/26')), code(HCN.NETWORK_NOT_FOUND), 'unknown network: 0x803B0001');
  t.throws(() => f.modifyNetwork(n.ID!, ipAdd('00000000-0000-0000-0000-00000000beef', '10.0.2.0/26')), code(HCN.SUBNET_NOT_FOUND), 'unknown subnet: 0x803B0005');
  t.throws(() => f.modifyNetwork(n.ID!, ipAdd(sub(f).ID, '10.1.2.0/26')), code(HCN.INVALID_PREFIX), 'ip-subnet outside its subnet: 0x803B0030');
  t.throws(() => f.modifyNetwork(n.ID!, ipAdd(sub(f).ID, '10.0.1.32/27')), code(HCN.INVALID_PREFIX), 'overlapping ip-subnets: 0x803B0030');
  t.throws(() => f.modifyNetwork(n.ID!, ipAdd(sub(f).ID, '10.0.2.1/26')), code(HCN.INVALID_PREFIX), 'host bits set: 0x803B0030');
  t.throws(
    () => f.modifyNetwork(n.ID!, { ResourceType: 'Subnet', RequestType: 'Add', Settings: { Subnets: [{ IpAddressPrefix: '10.0.128.0/17', IpSubnets: [] }] } }),
    code(HCN.INVALID_PREFIX),
    'overlapping subnets: 0x803B0030',
  );
  t.throws(
    () => f.modifyNetwork(n.ID!, { ResourceType: 'Subnet', RequestType: 'Remove', Settings: { Subnets: [{ ID: '00000000-0000-0000-0000-00000000beef', IpAddressPrefix: 'x' }] } }),
    code(HCN.SUBNET_NOT_FOUND),
  );
  // All or nothing: a good ip-subnet and a bad one in one request leaves nothing behind.
  const before = JSON.stringify(f.snapshot());
  t.throws(() =>
    f.modifyNetwork(n.ID!, { ResourceType: 'IPSubnet', RequestType: 'Add', Settings: { SubnetId: sub(f).ID, IpSubnets: [{ IpAddressPrefix: '10.0.2.0/26' }, { IpAddressPrefix: '10.0.2.0/27' }] } }),
  );
  t.equal(JSON.stringify(f.snapshot()), before, 'a failed request changes nothing');
  f.modifyNetwork(n.ID!, ipAdd(sub(f).ID, '10.0.2.0/26'));
  t.same(sub(f).IpSubnets!.map((i) => i.IpAddressPrefix), ['10.0.1.0/26', '10.0.2.0/26']);
});

t.test('endpoints hold their ip-subnet and subnet', async (t) => {
  const f = new FakeHns();
  const n = f.createNetwork(l2());
  t.throws(() => f.createEndpoint(n.ID!, '10.0.9.9'), code(HCN.INVALID_PREFIX), 'an endpoint needs an ip-subnet');
  const e = f.createEndpoint(n.ID!, '10.0.1.5');
  const s = sub(f);
  const rm: ModifyNetworkRequest = { ResourceType: 'IPSubnet', RequestType: 'Remove', Settings: { SubnetId: s.ID, IpSubnets: [{ ID: s.IpSubnets![0].ID, IpAddressPrefix: '10.0.1.0/26' }] } };
  t.throws(() => f.modifyNetwork(n.ID!, rm), code(HCN.ENTITY_HAS_REFERENCES), 'ip-subnet with endpoints: 0x803B002C');
  t.throws(
    () => f.modifyNetwork(n.ID!, { ResourceType: 'Subnet', RequestType: 'Remove', Settings: { Subnets: [{ ID: s.ID, IpAddressPrefix: s.IpAddressPrefix }] } }),
    code(HCN.ENTITY_HAS_REFERENCES),
    'subnet holding it: 0x803B002C',
  );
  f.deleteEndpoint(e.ID);
  f.modifyNetwork(n.ID!, rm);
  t.same(sub(f).IpSubnets, []);
});

t.test('policies', async (t) => {
  const f = new FakeHns();
  const l2net = f.createNetwork(l2());
  const rsr = { Type: 'RemoteSubnetRoute', Settings: { DestinationPrefix: '10.1.0.0/26', IsolationId: 4096, ProviderAddress: '192.168.1.2', DistributedRouterMacAddress: '01-02-03-04-05-06' } };
  const add = (id: string, p: object): void => f.modifyNetwork(id, { ResourceType: 'Policy', RequestType: 'Add', Settings: { Policies: [p as never] } });
  t.throws(() => add(l2net.ID!, rsr), code(HCN.INVALID_ARG), 'RemoteSubnetRoute needs an overlay network');
  t.throws(() => f.createNetwork(l2({ Name: 'o', Type: 'Overlay' })), code(HCN.INVALID_ARG), 'an overlay subnet needs a VSID');
  const o = f.createNetwork({
    Name: 'o',
    Type: 'Overlay',
    Ipams: [{ Subnets: [{ IpAddressPrefix: '10.0.0.0/16', Policies: [{ Type: 'VSID', Settings: { IsolationId: 4096 } }], IpSubnets: [] }] }],
  });
  add(o.ID!, rsr);
  t.throws(() => add(o.ID!, { ...rsr, Settings: { ...rsr.Settings, ProviderAddress: '192.168.1.3' } }), code(HCN.POLICY_ALREADY_EXISTS), 'a second route for the prefix: 0x803B0012');
  t.throws(() => add(o.ID!, { ...rsr, Settings: { ...rsr.Settings, DestinationPrefix: '10.2.0.0/26', IsolationId: 100 } }), code(HCN.INVALID_ARG), 'VSID below 4096');
  add(o.ID!, { Type: 'HostRoute', Settings: {} });
  t.throws(() => add(o.ID!, { Type: 'HostRoute', Settings: {} }), code(HCN.POLICY_ALREADY_EXISTS));
  const rm = (p: object) => f.modifyNetwork(o.ID!, { ResourceType: 'Policy', RequestType: 'Remove', Settings: { Policies: [p as never] } });
  const e = t.throws(() => rm({ ...rsr, Settings: { ...rsr.Settings, ProviderAddress: '192.168.1.9' } }), code(HCN.ELEMENT_NOT_FOUND)) as unknown as HcnError;
  t.ok(e.notFound, 'a missing policy is NOT_FOUND');
  rm({ ...rsr, Settings: { ...rsr.Settings, DistributedRouterMacAddress: '01:02:03:04:05:06' } });
  t.same(f.networkByName('o')!.Policies!.map((p) => p.Type), ['HostRoute'], 'removed, MAC spelling aside');
});

t.test('several subnets only on L2Bridge, L2Tunnel and Overlay', async (t) => {
  const f = new FakeHns();
  const two = { Type: 'Static', Subnets: [{ IpAddressPrefix: '10.0.0.0/24' }, { IpAddressPrefix: '10.0.1.0/24' }] };
  t.throws(() => f.createNetwork({ Name: 'n', Type: 'NAT', Ipams: [two] }), code(HCN.INVALID_ARG));
  t.ok(f.createNetwork({ Name: 't', Type: 'L2Tunnel', Ipams: [two] }).ID);
});

t.test('host routes', async (t) => {
  const f = new FakeHns();
  const r = { DestinationPrefix: '10.1.0.0/26', NextHop: '192.168.1.2', InterfaceAlias: 'vEthernet (Ethernet)', RouteMetric: 271 };
  f.addRoute(r);
  t.throws(() => f.addRoute(r), code(HCN.ALREADY_EXISTS));
  f.removeRoute(r);
  const e = t.throws(() => f.removeRoute(r), code(HCN.ELEMENT_NOT_FOUND)) as unknown as HcnError;
  t.ok(e.notFound);
  f.addRoute(r);
  t.equal(f.loseHostRoutes(), 1, 'routes can vanish');
});

t.test('only NOT_FOUND codes are NOT_FOUND', async (t) => {
  for (const c of [HCN.NETWORK_NOT_FOUND, HCN.SUBNET_NOT_FOUND, HCN.ELEMENT_NOT_FOUND]) t.ok(new HcnError(c, 'x').notFound);
  for (const c of [HCN.POLICY_ALREADY_EXISTS, HCN.ENTITY_HAS_REFERENCES, HCN.INVALID_PREFIX, HCN.UNAVAILABLE, HCN.INVALID_ARG]) t.notOk(new HcnError(c, 'x').notFound);
  t.match(new HcnError(HCN.ENTITY_HAS_REFERENCES, 'in use').message, /\(0x803B002C\)$/);
});

t.test('injected faults: before (nothing done) or after (done, reply lost)', async (t) => {
  // rate 0.5: r < 0.25 fails before, 0.25 <= r < 0.5 fails after.
  const seq = [0.1, 0.9, 0.3]; // one draw before the change, one after
  const f = new FakeHns({ faults: { random: () => seq.shift() ?? 0.9, rate: 0.5 } });
  t.throws(() => f.createNetwork(l2()), code(HCN.UNAVAILABLE));
  t.equal(f.snapshot().Networks.length, 0, 'failed before: nothing created');
  t.throws(() => f.createNetwork(l2()), code(HCN.UNAVAILABLE));
  t.equal(f.snapshot().Networks.length, 1, 'failed after: created all the same');
});

t.test('read faults are never "nothing exists"', async (t) => {
  const f = new FakeHns({ faults: { random: () => 0, rate: 0, readRate: 1 } });
  await t.rejects(new FakeExecutor(f).read(), code(HCN.UNAVAILABLE));
});

t.test('snapshots: PowerShell flattening restored, IDs given to what lacks them, round trip', async (t) => {
  // ConvertTo-Json writes one-element arrays as the element and empty ones as null.
  const ps = {
    Networks: { Name: 'pods', Type: 'L2Bridge', Ipams: { Type: 'Static', Subnets: { IpAddressPrefix: '10.0.0.0/16', Routes: { NextHop: '10.0.0.1', DestinationPrefix: '0.0.0.0/0' }, IpSubnets: { IpAddressPrefix: '10.0.1.0/26', Flags: 3 } } }, Policies: null },
    Endpoints: null,
    HostRoutes: { DestinationPrefix: '10.1.0.0/26', NextHop: '192.168.1.2', InterfaceAlias: 'vEthernet (Ethernet)', RouteMetric: 271 },
  };
  const s = parseSnapshot(ps);
  t.equal(s.Networks[0].Ipams![0].Subnets![0].IpSubnets![0].IpAddressPrefix, '10.0.1.0/26');
  t.same(s.Endpoints, []);
  t.equal(s.HostRoutes.length, 1);
  const f = FakeHns.fromSnapshot(ps);
  const snap = f.snapshot();
  t.ok(snap.Networks[0].ID && snap.Networks[0].Ipams![0].Subnets![0].IpSubnets![0].ID);
  t.same(FakeHns.fromSnapshot(snap).snapshot(), snap, 'round trip keeps IDs');
  t.same(parseSnapshot({ Name: 'x', Type: 'L2Bridge' }).Networks.length, 1, 'a lone network');
  t.throws(() => parseSnapshot({ foo: 1 }), /not HNS JSON/);
});

t.test('a fake full of random faults is still consistent: every change is all or nothing', async (t) => {
  const rnd = mulberry32(3);
  const f = new FakeHns({ faults: { random: rnd, rate: 0.4 } });
  let created: HnsNetwork | undefined;
  while (!f.networkByName('pods')) {
    try {
      created = f.createNetwork(l2());
    } catch {
      /* retried */
    }
  }
  void created;
  const id = f.networkByName('pods')!.ID!;
  for (let i = 0; i < 40; i++) {
    try {
      f.modifyNetwork(id, ipAdd(sub(f).ID, `10.0.${10 + i}.0/26`));
    } catch (e) {
      t.equal((e as HcnError).code, HCN.UNAVAILABLE);
    }
  }
  const have = sub(f).IpSubnets!.map((i) => i.IpAddressPrefix);
  t.equal(new Set(have).size, have.length, 'no duplicates');
  t.ok(have.length > 1 && have.length < 41, `some adds landed (${have.length})`);
});

t.test('apply rules: a failed route or policy is skipped and recorded; a failed ip-subnet op ends the run', async (t) => {
  const f = new FakeHns();
  const alias = 'vEthernet (Ethernet)';
  const route = (p: string, nh: string) => ({ op: 'add-host-route' as const, body: { DestinationPrefix: p, NextHop: nh, InterfaceAlias: alias, RouteMetric: 271 } });
  const ops = [route('10.1.0.0/26', '192.168.1.2'), route('10.1.1.0/26', 'not-an-ip'), route('10.1.2.0/26', '192.168.1.2')];
  const r = f.applyAll(ops);
  t.equal(r.applied, 2, 'the routes after the bad one still go in');
  t.same(r.failures?.map((x) => x.op.body), [ops[1].body]);
  t.match(r, { failedOp: ops[1], error: { code: HCN.INVALID_ARG } });
  t.equal(f.snapshot().HostRoutes.length, 2);

  f.createNetwork(l2());
  const ipOps = [
    { op: 'add-ip-subnet' as const, network: 'pods', subnet: '10.0.0.0/16', body: ipAdd(undefined, '10.5.0.0/26') },
    { op: 'add-ip-subnet' as const, network: 'pods', subnet: '10.0.0.0/16', body: ipAdd(undefined, '10.0.9.0/26') },
  ];
  const r2 = f.applyAll(ipOps);
  t.match(r2, { applied: 0, failedOp: ipOps[0], error: { code: HCN.INVALID_PREFIX } });
  t.equal(r2.failures?.length, 1, 'stopped there');
});
