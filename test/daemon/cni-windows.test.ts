// blockspeaker as the main CNI plugin on Windows, the daemon's side (src/daemon/cni-windows.ts): cni.add / del /
// check / gc over an in-memory HCN (hcn-double.ts) and a real Ipam on the in-memory store, through the same IPAM
// handlers the daemon serves. ADD makes and attaches one endpoint, is idempotent, and leaves nothing behind when it
// fails; DEL is idempotent; CHECK names what differs; GC removes what the runtime no longer knows; dual stack.
import t, { type Test } from 'tap';
import { CniHandlerError, ipamPools, networkByName, windowsCniHandlers, type WindowsCniOptions } from '../../src/daemon/cni-windows.ts';
import { HCN } from '../../src/hns/model.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import type { PoolSpec } from '../../src/ipam/types.ts';
import { ipamHandlers } from '../../src/ipc/ipam.ts';
import type { CniAddParams, CniAddReply, CniCheckParams, CniDelParams, CniGcParams, CniGcReply, HandleInfo } from '../../src/ipc/protocol.ts';
import { ipAt, parsePrefix } from '../../src/net/ip.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { HcnDouble } from './hcn-double.ts';

const HOST = 'win-1';
const NETWORK = 'cbr0';

async function setup(t: Test, opts: { pools?: PoolSpec[]; options?: Partial<WindowsCniOptions> } = {}) {
  const ipam = new Ipam(new MemoryStore());
  for (const p of opts.pools ?? [{ name: 'p4', cidr: '10.244.0.0/16', blockSize: 26, natOutgoing: true }]) await ipam.addPool(p);
  await ipam.setHost({ name: HOST, os: 'windows', labels: {} });
  const ready: string[][] = [];
  // The HNS addressing model in short: the gateway is .1 of the node's first block in the pool, the prefix the pool's.
  const gateway = async (pool: string) => {
    const blocks = (await ipam.blocks(HOST)).filter((b) => b.pool === pool).map((b) => parsePrefix(b.cidr)).sort((a, b) => (a.w0 - b.w0) || (a.w3 - b.w3));
    const cidr = (await ipam.listPools()).find((p) => p.name === pool)!.cidr;
    return blocks[0] ? { gateway: ipAt(blocks[0], 1).toString(), prefixLen: parsePrefix(cidr).len } : null;
  };
  const ih = ipamHandlers(ipam, HOST, {
    dataplaneGateway: gateway,
    dataplaneReady: async (ips) => {
      ready.push([...ips]);
    },
  });
  const hcn = new HcnDouble();
  const netId = hcn.addNetwork(NETWORK);
  const h = windowsCniHandlers({
    hcn,
    ipam: ih,
    network: networkByName(hcn, NETWORK),
    pools: ipamPools(ipam, HOST),
    serviceCidr: '10.96.0.0/12',
    exceptions: ['192.168.10.0/24'],
    nodeIP: '192.168.10.5',
    dns: { servers: ['10.96.0.10'], search: ['svc.cluster.local'] },
    ...opts.options,
  });
  const call = async <T>(m: string, p: unknown): Promise<T> => (await h[m]!(p, { connectionId: 't' })) as T;
  /** Every handle's addresses but the node's own (gateway, parked edges). */
  const handles = async (): Promise<Record<string, string[]>> => {
    const r = (await ih['ipam.handles']!({}, { connectionId: 't' })) as { handles: HandleInfo[] };
    return Object.fromEntries(r.handles.filter((x) => !x.handle.startsWith('blockspeaker-')).map((x) => [x.handle, x.ips]));
  };
  const add = (p: Partial<CniAddParams> & { containerId: string; netns: string }) => call<CniAddReply>('cni.add', { ifname: 'eth0', network: NETWORK, ...p });
  const del = (p: Partial<CniDelParams> & { containerId: string }) => call<unknown>('cni.del', { ifname: 'eth0', network: NETWORK, ...p });
  const check = (p: Partial<CniCheckParams> & { containerId: string; netns: string }) => call<unknown>('cni.check', { ifname: 'eth0', network: NETWORK, ...p });
  const gc = (p: CniGcParams) => call<CniGcReply>('cni.gc', p);
  const gw = async (pool: string) => (await gateway(pool))!.gateway;
  return { ipam, ih, hcn, netId, h, add, del, check, gc, handles, ready, gw };
}

async function rejects(t: Test, p: Promise<unknown>, code: string, msg: RegExp): Promise<void> {
  try {
    await p;
    t.fail(`expected ${code}`);
  } catch (e) {
    t.equal((e as { code?: string }).code, code, `code ${code}: ${(e as Error).message}`);
    t.match((e as Error).message, msg);
  }
}

t.test('ADD: one endpoint named <containerId>_<ifname>, attached to the namespace, with the policies', async (t) => {
  const s = await setup(t);
  const ns = s.hcn.addNamespace();
  const r = await s.add({
    containerId: 'pod1', netns: `{${ns.toUpperCase()}}`, attrs: { 'k8s.namespace': 'default', 'k8s.pod': 'web-0' },
    runtimeConfig: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }], dns: { servers: ['10.96.0.99'], searches: ['default.svc.cluster.local'] } },
    dns: { nameservers: ['10.0.0.53'], search: ['conf.local'] },
  });
  const eps = s.hcn.endpoints();
  const gw4 = await s.gw('p4');
  t.equal(eps.length, 1, 'one endpoint');
  const ep = eps[0]!;
  t.equal(ep.Name, 'pod1_eth0');
  t.match(r, {
    endpoint: { id: String(ep.ID).toLowerCase(), name: 'pod1_eth0' },
    existing: false,
    interface: { name: 'eth0', mac: ep.MacAddress, sandbox: ns },
    ips: [{ family: 4, address: /^10\.244\.\d+\.\d+\/16$/, gateway: gw4 }],
    routes: [{ dst: '0.0.0.0/0', gw: gw4 }],
    dns: { nameservers: ['10.96.0.99'], search: ['default.svc.cluster.local'] },
  });
  const ip = r.ips[0]!.address.split('/')[0];
  t.same(ep.IpConfigurations, [{ IpAddress: ip, PrefixLength: 16 }]);
  t.same(ep.Routes, [{ NextHop: gw4, DestinationPrefix: '0.0.0.0/0' }]);
  t.same(ep.Dns, { ServerList: ['10.96.0.99'], Search: ['default.svc.cluster.local'] }, 'runtimeConfig.dns wins over the config\'s');
  t.same((ep.Policies as { Type: string; Settings: unknown }[]), [
    { Type: 'OutBoundNAT', Settings: { Exceptions: ['10.244.0.0/16', '10.96.0.0/12', '192.168.10.0/24'] } },
    { Type: 'SDNRoute', Settings: { DestinationPrefix: '10.96.0.0/12', NeedEncap: true } },
    { Type: 'SDNRoute', Settings: { DestinationPrefix: '192.168.10.5/32', NeedEncap: true } },
    { Type: 'PortMapping', Settings: { InternalPort: 80, ExternalPort: 8080, Protocol: 6 } },
  ]);
  t.same(s.hcn.namespaceEndpoints(ns), [String(ep.ID).toLowerCase()], 'attached');
  t.same(await s.handles(), { 'pod1.eth0': [ip] });
  const info = ((await s.ih['ipam.handles']!({}, { connectionId: 't' })) as { handles: HandleInfo[] }).handles.find((x) => x.handle === 'pod1.eth0')!;
  t.same(info.attrs, { 'k8s.namespace': 'default', 'k8s.pod': 'web-0', 'cni.network': NETWORK, 'cni.containerID': 'pod1', 'cni.ifname': 'eth0' });
  t.same(s.ready, [[ip]], 'the ADD waited for the dataplane (dataplaneReady) before the endpoint');

  const noDns = await s.add({ containerId: 'pod2', netns: s.hcn.addNamespace() });
  t.same(noDns.dns, { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] }, 'neither runtime nor config: the daemon\'s default');
});

t.test('a retried ADD returns the same result; an endpoint found detached is attached again', async (t) => {
  const s = await setup(t);
  const ns = s.hcn.addNamespace();
  const first = await s.add({ containerId: 'pod1', netns: ns });
  const creates = s.hcn.calls.filter((c) => c.op === 'create').length;
  const again = await s.add({ containerId: 'pod1', netns: ns });
  t.same({ ...again, existing: false }, first, 'same endpoint, addresses, routes');
  t.equal(again.existing, true);
  t.equal(s.hcn.calls.filter((c) => c.op === 'create').length, creates, 'no second create');
  t.equal(s.hcn.endpoints().length, 1);

  await s.hcn.modify('Namespace', ns, JSON.stringify({ ResourceType: 'Endpoint', RequestType: 'Remove', Settings: { EndpointId: first.endpoint.id } }));
  const third = await s.add({ containerId: 'pod1', netns: ns });
  t.equal(third.endpoint.id, first.endpoint.id);
  t.same(s.hcn.namespaceEndpoints(ns), [first.endpoint.id], 'attached again');

  // Two ADDs at once for one attachment: serialised, one endpoint.
  const ns2 = s.hcn.addNamespace();
  const [a, b] = await Promise.all([s.add({ containerId: 'pod2', netns: ns2 }), s.add({ containerId: 'pod2', netns: ns2 })]);
  t.equal(a.endpoint.id, b.endpoint.id);
  t.equal(s.hcn.endpoints().filter((e) => e.Name === 'pod2_eth0').length, 1);

  // A stale endpoint under our name with other addresses (an earlier attempt whose addresses were released): replaced.
  const stale = s.hcn.addEndpoint({ Name: 'pod3_eth0', HostComputeNetwork: s.netId, IpConfigurations: [{ IpAddress: '10.244.9.9', PrefixLength: 16 }] });
  const r3 = await s.add({ containerId: 'pod3', netns: s.hcn.addNamespace() });
  t.not(r3.endpoint.id, stale);
  t.notOk(s.hcn.objects.Endpoint.get(stale), 'the stale endpoint is gone');
});

t.test('a failure after the assign leaves no endpoint and no address', async (t) => {
  const s = await setup(t);
  s.hcn.failNext('create', 'Endpoint', HCN.INVALID_IP);
  await rejects(t, s.add({ containerId: 'pod1', netns: s.hcn.addNamespace() }), 'HCN', /^HNS: injected create Endpoint failure \(0x803B001E\)/);
  t.same(s.hcn.endpoints(), [], 'create failed: nothing');
  t.same(await s.handles(), {}, 'create failed: address released');

  s.hcn.failNext('modify', 'Namespace');
  await rejects(t, s.add({ containerId: 'pod1', netns: s.hcn.addNamespace() }), 'HCN_UNAVAILABLE', /injected modify Namespace failure/);
  t.same(s.hcn.endpoints(), [], 'attach failed: the endpoint is deleted');
  t.same(await s.handles(), {}, 'attach failed: address released');

  await rejects(t, s.add({ containerId: 'pod1', netns: '0b0b0b0b-1111-2222-3333-444455556666' }), 'UNKNOWN_NETNS', /namespace 0b0b0b0b-1111-2222-3333-444455556666 does not exist/);
  t.same(s.hcn.endpoints(), []);
  t.same(await s.handles(), {});

  // A retried ADD whose attach fails: the existing endpoint and the handle go too (the runtime DELs a failed ADD).
  const ns = s.hcn.addNamespace();
  await s.add({ containerId: 'pod2', netns: ns });
  s.hcn.failNext('query', 'Namespace');
  await rejects(t, s.add({ containerId: 'pod2', netns: ns }), 'HCN_UNAVAILABLE', /injected/);
  t.same(s.hcn.endpoints(), []);
  t.same(await s.handles(), {});
});

t.test('input is checked before anything is assigned', async (t) => {
  const s = await setup(t);
  const ns = s.hcn.addNamespace();
  await rejects(t, s.add({ containerId: 'pod1', netns: '/var/run/netns/x' }), 'INVALID', /netns must be the pod's HCN namespace ID \(a GUID/);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, network: 'other' }), 'INVALID', /the network config's name "other" is not this node's HNS network "cbr0"/);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, runtimeConfig: { portMappings: [{ hostPort: 70000, containerPort: 80 }] } }), 'INVALID', /^runtimeConfig\.portMappings\[0\]\.hostPort: must be a port from 1 to 65535, got 70000/);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, runtimeConfig: { portMappings: [{ hostPort: 80, containerPort: 80, protocol: 'gre' }] } }), 'INVALID', /protocol: unknown protocol "gre"/);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, dns: { nameservers: ['dns'] } }), 'INVALID', /^dns\.nameservers\[0\]: "dns" is not an IP address/);
  await rejects(t, s.add({ containerId: '-x', netns: ns }), 'INVALID', /^containerId: /);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, num4: 2 }), 'INVALID', /num4 must be 0 or 1/);
  t.same(await s.handles(), {}, 'nothing assigned');

  const none = await setup(t, { options: { network: async () => null } });
  await rejects(t, none.add({ containerId: 'pod1', netns: none.hcn.addNamespace() }), 'NO_NETWORK', /HNS network cbr0 does not exist yet/);
  await rejects(t, s.add({ containerId: 'pod1', netns: ns, num4: 0 }), 'NO_POOL', /no usable pool|could not assign/);
  t.ok(new CniHandlerError('X', 'y') instanceof Error);
});

t.test('DEL detaches, deletes and releases; twice, without a namespace, for an unknown container: all fine', async (t) => {
  const s = await setup(t);
  const ns = s.hcn.addNamespace();
  const r = await s.add({ containerId: 'pod1', netns: ns });
  const other = await s.add({ containerId: 'pod2', netns: s.hcn.addNamespace() });
  t.match(await s.del({ containerId: 'pod1', netns: ns }), { removed: [r.endpoint.id], released: [r.ips[0]!.address.split('/')[0]] });
  t.same(s.hcn.namespaceEndpoints(ns), []);
  t.same(s.hcn.endpoints().map((e) => e.Name), ['pod2_eth0'], 'only pod1\'s endpoint went');
  t.same(Object.keys(await s.handles()), ['pod2.eth0']);
  t.same(await s.del({ containerId: 'pod1', netns: ns }), { removed: [], released: [] }, 'DEL again');
  t.same(await s.del({ containerId: 'nobody' }), { removed: [], released: [] }, 'unknown container');
  // Without CNI_NETNS: the endpoint's own HostComputeNamespace tells where to detach from.
  t.match(await s.del({ containerId: 'pod2' }), { removed: [other.endpoint.id] });
  t.same(s.hcn.endpoints(), []);
  t.same(await s.handles(), {});
  // The namespace already gone (the sandbox was torn down first): still fine.
  const ns3 = s.hcn.addNamespace();
  await s.add({ containerId: 'pod3', netns: ns3 });
  s.hcn.objects.Namespace.delete(ns3);
  const ep3 = s.hcn.endpoints()[0]!;
  delete ep3.HostComputeNamespace; // HCN forgets the link with the namespace
  t.match(await s.del({ containerId: 'pod3', netns: ns3 }), { removed: [String(ep3.ID).toLowerCase()] });
  // No network at all: the addresses still go.
  const gone = await setup(t, { options: { network: async () => null } });
  await gone.ipam.autoAssign({ host: HOST, num4: 1, handle: 'pod9.eth0' });
  t.match(await gone.del({ containerId: 'pod9' }), { removed: [], released: [/^10\.244\./] });
});

t.test('CHECK: ok, and each difference named', async (t) => {
  const s = await setup(t);
  const ns = s.hcn.addNamespace();
  const r = await s.add({ containerId: 'pod1', netns: ns });
  const ip = r.ips[0]!.address;
  t.match(await s.check({ containerId: 'pod1', netns: ns, ips: [ip] }), { ok: true, endpoint: r.endpoint.id });
  await rejects(t, s.check({ containerId: 'pod1', netns: ns, ips: ['10.244.0.250/16'] }), 'CHECK_MISMATCH',
    new RegExp(`^CHECK pod1_eth0: compared with prevResult, it lacks 10\\.244\\.0\\.250; compared with prevResult, it also holds ${ip.split('/')[0]!.replace(/\./g, '\\.')}$`));
  const ns2 = s.hcn.addNamespace();
  await rejects(t, s.check({ containerId: 'pod1', netns: ns2 }), 'CHECK_MISMATCH', new RegExp(`the endpoint is not attached to namespace ${ns2}`));
  await rejects(t, s.check({ containerId: 'pod1', netns: '0b0b0b0b-1111-2222-3333-444455556666' }), 'CHECK_MISMATCH', /namespace 0b0b0b0b-1111-2222-3333-444455556666 does not exist/);
  await s.ih['ipam.release']!({ handle: 'pod1.eth0' }, { connectionId: 't' });
  await rejects(t, s.check({ containerId: 'pod1', netns: ns }), 'CHECK_MISMATCH', /the endpoint holds 10\.244\.\d+\.\d+, which IPAM handle pod1\.eth0 does not/);
  await rejects(t, s.check({ containerId: 'nobody', netns: ns }), 'CHECK_MISMATCH', /^CHECK nobody_eth0: no endpoint named nobody_eth0 on network cbr0$/);
});

t.test('GC: leaked endpoints and handles go; valid ones, host endpoints, remote endpoints and other networks stay', async (t) => {
  const s = await setup(t);
  const keep = await s.add({ containerId: 'keep', netns: s.hcn.addNamespace() });
  await s.add({ containerId: 'leaked', netns: s.hcn.addNamespace() });
  await s.add({ containerId: 'keep', ifname: 'net1', netns: s.hcn.addNamespace() });
  const hostEp = s.hcn.addEndpoint({ Name: 'cbr0_ep', HostComputeNetwork: s.netId, IpConfigurations: [{ IpAddress: '10.244.0.2' }] });
  const hostEpPool = s.hcn.addEndpoint({ Name: 'cbr0_ep_p4', HostComputeNetwork: s.netId, IpConfigurations: [{ IpAddress: '10.244.0.2' }] });
  const remote = s.hcn.addEndpoint({ Name: 'remote_eth0', HostComputeNetwork: s.netId, Flags: 1, IpConfigurations: [{ IpAddress: '10.244.5.5' }] });
  const otherNet = s.hcn.addNetwork('nat');
  const foreign = s.hcn.addEndpoint({ Name: 'x_eth0', HostComputeNetwork: otherNet, IpConfigurations: [{ IpAddress: '172.16.0.5' }] });
  const unnamed = s.hcn.addEndpoint({ HostComputeNetwork: s.netId, IpConfigurations: [{ IpAddress: '10.244.6.6' }] });
  // An address of another network's attachment (another conflist on the node), and one only IPAM knows (a lost endpoint).
  await s.ipam.autoAssign({ host: HOST, num4: 1, handle: 'storage.net1', attrs: { 'cni.network': 'storage' } });
  await s.ipam.autoAssign({ host: HOST, num4: 1, handle: 'lost.eth0', attrs: { 'cni.network': NETWORK } });

  const r = await s.gc({ network: NETWORK, validAttachments: [{ containerID: 'keep', ifname: 'eth0' }, { containerID: 'keep', ifname: 'net1' }] });
  t.same(r, { endpointsRemoved: ['leaked_eth0'], handlesReleased: ['leaked.eth0', 'lost.eth0'] });
  const names = s.hcn.endpoints().map((e) => e.Name).sort();
  t.same(names, [undefined, 'cbr0_ep', 'cbr0_ep_p4', 'keep_eth0', 'keep_net1', 'remote_eth0', 'x_eth0'].sort());
  for (const id of [hostEp, hostEpPool, remote, foreign, unnamed]) t.ok(s.hcn.objects.Endpoint.get(id), 'not ours to remove');
  t.same(Object.keys(await s.handles()).sort(), ['keep.eth0', 'keep.net1', 'storage.net1']);
  t.same(await s.gc({ network: NETWORK, validAttachments: [{ containerID: 'keep', ifname: 'eth0' }, { containerID: 'keep', ifname: 'net1' }] }), { endpointsRemoved: [], handlesReleased: [] }, 'GC again: nothing');
  await s.check({ containerId: 'keep', netns: keep.interface.sandbox });
  await rejects(t, s.gc({ network: NETWORK, validAttachments: [{ containerID: 1 }] as never }), 'INVALID', /validAttachments\[0\] must be \{containerID, ifname\}/);
});

t.test('dual stack: an IPv4 and an IPv6 pool give one endpoint with one address of each', async (t) => {
  const s = await setup(t, {
    pools: [{ name: 'p4', cidr: '10.244.0.0/16', blockSize: 26, natOutgoing: true }, { name: 'p6', cidr: 'fd00:244::/64', blockSize: 122 }],
    options: { serviceCidr: ['10.96.0.0/12', 'fd00:96::/108'] },
  });
  const ns = s.hcn.addNamespace();
  const r = await s.add({ containerId: 'pod1', netns: ns });
  const [gw4, gw6] = [await s.gw('p4'), await s.gw('p6')];
  t.match(r.ips, [{ family: 4, address: /^10\.244\.\d+\.\d+\/16$/, gateway: gw4 }, { family: 6, address: /^fd00:244::[0-9a-f:]+\/64$/, gateway: gw6 }]);
  t.same(r.routes, [{ dst: '0.0.0.0/0', gw: gw4 }, { dst: '::/0', gw: gw6 }]);
  const ep = s.hcn.endpoints()[0]!;
  t.equal((ep.IpConfigurations as unknown[]).length, 2);
  t.same((ep.Policies as { Type: string; Settings: { DestinationPrefix?: string } }[]).filter((p) => p.Type === 'SDNRoute').map((p) => p.Settings.DestinationPrefix), ['10.96.0.0/12', 'fd00:96::/108', '192.168.10.5/32']);
  t.same((await s.handles())['pod1.eth0']!.length, 2);
  await s.check({ containerId: 'pod1', netns: ns, ips: r.ips.map((x) => x.address) });
  const v4only = await s.add({ containerId: 'pod2', netns: s.hcn.addNamespace(), num6: 0 });
  t.same(v4only.ips.map((x) => x.family), [4], 'num6: 0 overrides');
  await s.del({ containerId: 'pod1', netns: ns });
  t.same(Object.keys(await s.handles()), ['pod2.eth0']);
});

t.test('overlay (no IPv6 in Windows overlay networks): IPv6 pools give no address, and asking for one is refused', async (t) => {
  const s = await setup(t, {
    pools: [{ name: 'p4', cidr: '10.244.0.0/16', blockSize: 26, natOutgoing: true }, { name: 'p6', cidr: 'fd00:244::/64', blockSize: 122 }],
    options: { ipv6: false },
  });
  const r = await s.add({ containerId: 'pod1', netns: s.hcn.addNamespace() });
  t.same(r.ips.map((x) => x.family), [4], 'IPv4 only');
  t.same((s.hcn.endpoints()[0]!.IpConfigurations as unknown[]).length, 1);
  await rejects(t, s.add({ containerId: 'pod2', netns: s.hcn.addNamespace(), num6: 1 }), 'INVALID', /num6: this node's HNS network has no IPv6/);
  t.same(Object.keys(await s.handles()), ['pod1.eth0'], 'the refused ADD assigned nothing');
});

t.test('pools not usable on this node are exceptions but give no address', async (t) => {
  const s = await setup(t, {
    pools: [
      { name: 'p4', cidr: '10.244.0.0/16', blockSize: 26, natOutgoing: true },
      { name: 'p6', cidr: 'fd00:244::/64', blockSize: 122, nodeSelector: 'rack == "r9"' },
      { name: 'old', cidr: '10.250.0.0/16', disabled: true },
    ],
  });
  const r = await s.add({ containerId: 'pod1', netns: s.hcn.addNamespace() });
  t.same(r.ips.map((x) => x.family), [4], 'no IPv6: the v6 pool is for other nodes');
  const nat = (s.hcn.endpoints()[0]!.Policies as { Type: string; Settings: { Exceptions?: string[] } }[]).find((p) => p.Type === 'OutBoundNAT')!;
  t.same(nat.Settings.Exceptions, ['10.244.0.0/16', '10.250.0.0/16', '10.96.0.0/12', '192.168.10.0/24'], 'the disabled pool is still never NATed to');
});
