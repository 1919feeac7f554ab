// The HCN executor over doubles of HcnApi and IpHelperApi (unit tests of the op -> call mapping; the packaged
// executables against stand-in DLLs under wine are the proof, test/windows/hcn-dataplane.test.ts). The HCN double is
// backed by the in-memory FakeHns, so HNS's refusals (unknown IDs, overlaps, endpoints in use) still apply.
import t from 'tap';
import { type HcnApi, type HcnKind, type IpForwardRow, type IpHelperApi, type IpInterface, RouteProtocol } from '../../src/platform/windows-net-api.ts';
import { HcnExecutor } from '../../src/hns/hcn-executor.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import { HCN, HcnError, type HnsNetwork, type ModifyNetworkRequest, type HnsOp } from '../../src/hns/model.ts';
import { planHns } from '../../src/hns/planner.ts';
import { ALIAS, desired, summary } from './helpers.ts';

function hcnDouble(fake: FakeHns, calls: string[]): HcnApi {
  const filterOf = (q: string) => JSON.parse((JSON.parse(q) as { Filter: string }).Filter || '{}') as Record<string, unknown>;
  const find = (kind: HcnKind, id: string): Record<string, unknown> => {
    const snap = fake.snapshot();
    const list = (kind === 'Network' ? snap.Networks : snap.Endpoints) as unknown as Record<string, unknown>[];
    const o = list.find((x) => String(x.ID).toLowerCase() === id.toLowerCase());
    if (!o) throw new HcnError(kind === 'Network' ? HCN.NETWORK_NOT_FOUND : HCN.ENDPOINT_NOT_FOUND, `${kind} ${id} not found`);
    return o;
  };
  return {
    async enumerate(kind, query) {
      calls.push(`enumerate ${kind}`);
      const f = filterOf(query);
      const snap = fake.snapshot();
      const list = (kind === 'Network' ? snap.Networks : snap.Endpoints) as unknown as Record<string, unknown>[];
      return list.filter((o) => Object.entries(f).every(([k, v]) => o[k] === v)).map((o) => String(o.ID));
    },
    async create(kind, settings, network) {
      calls.push(`create ${kind}`);
      const s = JSON.parse(settings);
      if (kind === 'Network') return fake.createNetwork(s as HnsNetwork) as unknown as Record<string, unknown>;
      if (s.HostComputeNetwork !== network) throw new HcnError(HCN.INVALID_ARG, 'network handle and HostComputeNetwork differ');
      return fake.createEndpoint(network!, s.IpConfigurations[0].IpAddress, s.Name) as unknown as Record<string, unknown>;
    },
    async query(kind, id) {
      calls.push(`query ${kind}`);
      return structuredClone(find(kind, id));
    },
    async modify(kind, id, settings) {
      calls.push(`modify ${kind} ${(JSON.parse(settings) as ModifyNetworkRequest).ResourceType}/${(JSON.parse(settings) as ModifyNetworkRequest).RequestType}`);
      if (kind !== 'Network') throw new HcnError(HCN.ELEMENT_NOT_FOUND, 'no namespaces here');
      fake.modifyNetwork(id, JSON.parse(settings));
    },
    async remove(kind, id) {
      calls.push(`remove ${kind}`);
      if (kind === 'Endpoint') fake.deleteEndpoint(id);
      else fake.deleteNetwork(id);
    },
  };
}

class IpHelperDouble implements IpHelperApi {
  rows: IpForwardRow[] = [];
  readonly nics: (IpInterface & { fwd: Record<4 | 6, boolean> })[] = [];
  sets = 0;
  nic(alias: string, luid: bigint): void {
    this.nics.push({ alias, luid, index: Number(luid), fwd: { 4: false, 6: false } });
  }
  async routes(family: 0 | 4 | 6) {
    return this.rows.filter((r) => family === 0 || r.family === family).map((r) => ({ ...r }));
  }
  async createRoute(r: Omit<IpForwardRow, 'interfaceIndex'> & { interfaceIndex?: number }) {
    if (!this.nics.some((n) => n.luid === r.interfaceLuid)) throw new HcnError(0x80070057, 'no such interface');
    if (this.rows.some((x) => x.destination === r.destination && x.nextHop === r.nextHop && x.interfaceLuid === r.interfaceLuid)) throw new HcnError(HCN.ALREADY_EXISTS, 'exists');
    this.rows.push({ ...r, interfaceIndex: r.interfaceIndex ?? 0 });
  }
  async deleteRoute(r: IpForwardRow) {
    const i = this.rows.findIndex((x) => x.destination === r.destination && x.nextHop === r.nextHop && x.interfaceLuid === r.interfaceLuid);
    if (i < 0) throw new HcnError(HCN.ELEMENT_NOT_FOUND, 'not found');
    this.rows.splice(i, 1);
  }
  async interfaceByAlias(alias: string) {
    const n = this.nics.find((x) => x.alias === alias);
    if (!n) throw new HcnError(HCN.ELEMENT_NOT_FOUND, `no interface ${alias}`);
    return { alias: n.alias, luid: n.luid, index: n.index };
  }
  async interfaceByLuid(luid: bigint) {
    const n = this.nics.find((x) => x.luid === luid);
    if (!n) throw new HcnError(HCN.ELEMENT_NOT_FOUND, `no interface ${luid}`);
    return { alias: n.alias, luid: n.luid, index: n.index };
  }
  async forwarding(luid: bigint, family: 4 | 6) {
    return this.nics.find((x) => x.luid === luid)!.fwd[family];
  }
  async setForwarding(luid: bigint, family: 4 | 6, on: boolean) {
    this.sets++;
    this.nics.find((x) => x.luid === luid)!.fwd[family] = on;
  }
}

function setup(alias: string | undefined = ALIAS) {
  const fake = new FakeHns();
  const calls: string[] = [];
  const ip = new IpHelperDouble();
  ip.nic(ALIAS, 7n);
  ip.nic('vEthernet (pods_ep_p)', 9n);
  const attached: string[] = [];
  const exec = new HcnExecutor({
    hcn: hcnDouble(fake, calls), ipHelper: ip, network: 'pods', interfaceAlias: () => alias,
    hns: { hostAttach: async (id, c) => void attached.push(`${id}@${c}`) },
  });
  return { fake, calls, ip, exec, attached };
}

t.test('a plan applied through HCN and IP Helper reads back as nothing to do', async (t) => {
  const { exec, ip, calls } = setup();
  const want = desired('l2bridge', ['10.0.1.0/26', '10.0.2.0/26', '10.9.0.4/30'], { '10.0.5.0/26': '192.168.1.5', '10.0.7.9/32': '192.168.1.7' });
  const first = planHns(await exec.read(), want);
  t.ok(first.ops.length > 0);
  const r = await exec.apply(first.ops);
  t.error(r.error);
  t.equal(r.applied, first.ops.length);
  t.ok(calls.includes('create Network'), 'the network, its Subnets and ip-subnets through HcnCreateNetwork');
  t.same(ip.rows.map((x) => `${x.destination} via ${x.nextHop} p${x.protocol} m${x.metric}`).sort(),
    [`10.0.5.0/26 via 192.168.1.5 p${RouteProtocol.NETMGMT} m271`, `10.0.7.9/32 via 192.168.1.7 p${RouteProtocol.NETMGMT} m271`], 'routes marked as ours');
  t.same(summary(planHns(await exec.read(), want).ops), [], 'steady: a second read plans nothing');

  // A block and a remote go: the ip-subnet is removed by the ID read back from HCN, the route by its key.
  const less = desired('l2bridge', ['10.0.1.0/26', '10.9.0.4/30'], { '10.0.5.0/26': '192.168.1.5' });
  const ops = planHns(await exec.read(), less).ops;
  t.same(summary(ops).sort(), ['remove-host-route 10.0.7.9/32 via 192.168.1.7', 'remove-ip-subnet 10.0.2.0/26'].sort());
  t.error((await exec.apply(ops)).error);
  t.ok(calls.includes('modify Network IPSubnet/Remove'), 'through HcnModifyNetwork');
  t.same(planHns(await exec.read(), less).ops, []);
});

t.test('a foreign route on the vNIC is read (it would collide) but never removed', async (t) => {
  const { exec, ip } = setup();
  ip.rows.push({ family: 4, interfaceLuid: 7n, interfaceIndex: 7, destination: '10.0.5.0/26', nextHop: '192.168.1.5', metric: 5, protocol: RouteProtocol.NETMGMT });
  const want = desired('l2bridge', ['10.0.1.0/26'], { '10.0.5.0/26': '192.168.1.5' });
  const plan = planHns(await exec.read(), want);
  t.notOk(plan.ops.some((o) => o.op === 'remove-host-route'), 'not ours (another metric): left alone');
});

t.test('host endpoint: created in the network and attached to the host compartment; removed by ID', async (t) => {
  const { exec, fake, attached } = setup();
  const op: HnsOp = { op: 'create-network', body: { Name: 'pods', Type: 'L2Bridge', Ipams: [{ Type: 'Static', Subnets: [{ IpAddressPrefix: '10.0.0.0/16', Routes: [{ NextHop: '10.0.0.1', DestinationPrefix: '0.0.0.0/0' }], IpSubnets: [{ IpAddressPrefix: '10.0.1.0/26', Flags: 3 }] }] }] } };
  t.error((await exec.apply([op])).error);
  const ep: HnsOp = { op: 'create-endpoint', network: 'pods', subnet: '10.0.0.0/16', body: { ID: '', Name: 'pods_ep_p', IpConfigurations: [{ IpAddress: '10.0.1.2', PrefixLength: 16 }] } };
  t.error((await exec.apply([ep])).error);
  const made = fake.snapshot().Endpoints.find((e) => e.Name === 'pods_ep_p');
  t.ok(made, 'created');
  t.same(attached, [`${made!.ID}@1`], 'host attach, compartment 1');
  const r = await exec.apply([{ op: 'remove-endpoint', network: 'pods', body: { ID: made!.ID } }]);
  t.error(r.error);
  t.notOk(fake.snapshot().Endpoints.length, 'gone');
  const again = await exec.apply([{ op: 'remove-endpoint', network: 'pods', body: { ID: made!.ID } }]);
  t.error(again.error, 'a remove of an absent endpoint is done (NOT_FOUND)');
});

t.test('an ip-subnet op without its Subnet ID: looked up by the parent prefix at apply time', async (t) => {
  const { exec, fake, calls } = setup();
  t.error((await exec.apply(planHns(await exec.read(), desired('l2bridge', ['10.0.1.0/26'])).ops)).error);
  const add: HnsOp = { op: 'add-ip-subnet', network: 'pods', subnet: '10.0.0.0/16', body: { ResourceType: 'IPSubnet', RequestType: 'Add', Settings: { IpSubnets: [{ IpAddressPrefix: '10.0.3.0/26', Flags: 3 }] } } };
  t.error((await exec.apply([add])).error);
  t.ok(calls.includes('modify Network IPSubnet/Add'));
  const subnet = (fake.snapshot().Networks[0].Ipams![0].Subnets!).find((x) => x.IpAddressPrefix === '10.0.0.0/16')!;
  t.same(subnet.IpSubnets!.map((x) => x.IpAddressPrefix).sort(), ['10.0.1.0/26', '10.0.3.0/26']);
  const bad: HnsOp = { ...add, subnet: '10.7.0.0/16' };
  t.equal(((await exec.apply([bad])).error as HcnError).code, HCN.SUBNET_NOT_FOUND, 'an unknown parent is SUBNET_NOT_FOUND');
  t.same(planHns(await exec.read(), desired('l2bridge', ['10.0.1.0/26', '10.0.3.0/26'])).ops, [], 'and HCN holds what the planner wants');
});

t.test('an unknown network is refused with its HCN code, not read as absent', async (t) => {
  const { exec } = setup();
  const r = await exec.apply([{ op: 'add-ip-subnet', network: 'pods', subnet: '10.0.0.0/16', body: { ResourceType: 'IPSubnet', RequestType: 'Add', Settings: { IpSubnets: [{ IpAddressPrefix: '10.0.1.0/26' }] } } }]);
  t.equal((r.error as HcnError).code, HCN.NETWORK_NOT_FOUND);
});

t.test('management vNIC from the default route; forwarding set only where off', async (t) => {
  const { exec, ip } = setup(undefined);
  t.equal(await exec.defaultRouteInterface(), undefined, 'no default route: not known');
  ip.rows.push({ family: 4, interfaceLuid: 9n, interfaceIndex: 9, destination: '0.0.0.0/0', nextHop: '192.168.1.1', metric: 50, protocol: RouteProtocol.NETMGMT });
  ip.rows.push({ family: 4, interfaceLuid: 7n, interfaceIndex: 7, destination: '0.0.0.0/0', nextHop: '192.168.1.1', metric: 10, protocol: RouteProtocol.NETMGMT });
  t.equal(await exec.defaultRouteInterface(), ALIAS, 'the lowest metric wins');
  ip.nics[0].fwd[4] = true;
  const changed = await exec.ensureForwarding([ALIAS, 'vEthernet (pods_ep_p)', 'vEthernet (not there)'], [4]);
  t.same(changed, [{ alias: 'vEthernet (pods_ep_p)', family: 4 }], 'only the host endpoint vNIC was off; a missing vNIC is skipped');
  t.same(await exec.ensureForwarding([ALIAS, 'vEthernet (pods_ep_p)'], [4]), [], 'second time: nothing to do');
  t.equal(ip.sets, 1);
});
