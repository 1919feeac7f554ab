// The stand-in DLLs under wine: a mingw-built probe loads computenetwork.dll, vmcompute.dll and bs-iphlpapi.dll from
// the prefix's System32 (as the product does) and calls every export against the stand-in server, which keeps HCN's
// and IP Helper's state across calls and processes and refuses what Windows refuses. Also checks the stand-in's
// layout.ts (the struct offsets the koffi bindings must use) against mingw's headers.
//
// Needs wine and mingw-w64; with REQUIRE_PEERS=1 (CI) their absence is a failure.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runWine, zPath } from '../../packaging/windows/wine.ts';
import { HCN } from '../../src/hns/model.ts';
import { HR, type Standin, WIN32 } from '../kit/windows-standin/api.ts';
import { buildProbe, installStandins, standinEnv, standinReady } from '../kit/windows-standin/build.ts';
import { LAYOUT } from '../kit/windows-standin/layout.ts';
import { startStandin } from '../kit/windows-standin/server.ts';

interface Out {
  i?: number;
  fn?: string;
  hr?: number;
  out?: string | null;
  err?: string | null;
  fatal?: string;
  [k: string]: unknown;
}

interface Step {
  cmd: (string | number | bigint)[];
  /** The expected result code (omit for calls that return nothing). */
  hr?: number;
  /** Name to find the output by. */
  tag?: string;
}

const ZERO = '00000000-0000-0000-0000-000000000000';
const N1 = '1a000000-0000-4000-8000-000000000001';
const N3 = '1a000000-0000-4000-8000-000000000003';
const E1 = '2b000000-0000-4000-8000-000000000001';
const E2 = '2b000000-0000-4000-8000-000000000002';
const E3 = '2b000000-0000-4000-8000-000000000003';
const NS2 = '3c000000-0000-4000-8000-000000000002';
const UNKNOWN = '9f000000-0000-4000-8000-0000000000ff';
const j = (v: unknown) => JSON.stringify(v);
const query = (filter: Record<string, unknown> = {}) => j({ SchemaVersion: { Major: 2, Minor: 0 }, Flags: 0, Filter: j(filter) });
const modify = (ResourceType: string, RequestType: string, Settings: unknown) => j({ ResourceType, RequestType, Settings });
const rsr = (DestinationPrefix: string) => ({
  Type: 'RemoteSubnetRoute',
  Settings: { DestinationPrefix, IsolationId: 4096, ProviderAddress: '192.168.1.20', DistributedRouterMacAddress: '00-15-5D-01-02-03' },
});
const net = (Name: string, Type: string, subnets: unknown[], extra: Record<string, unknown> = {}) =>
  j({ Name, Type, Ipams: [{ Type: 'Static', Subnets: subnets }], SchemaVersion: { Major: 2, Minor: 0 }, ...extra });
const errorOf = (o: Out) => JSON.parse(o.err ?? 'null') as { Success: boolean; Error: string; ErrorCode: number } | null;

if (standinReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-standin-'));
  const logFile = path.join(dir, 'calls.jsonl');
  installStandins();
  const probeExe = buildProbe();
  let s: Standin;
  t.before(async () => {
    s = await startStandin({ log: logFile });
  });
  t.teardown(async () => {
    await s?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  let runs = 0;
  /** Runs the steps in one probe process; checks each result code; the outputs by tag. */
  const probe = async (tt: Test, steps: Step[], port = s.port): Promise<Record<string, Out>> => {
    const script = path.join(dir, `script-${++runs}.txt`);
    fs.writeFileSync(script, `${steps.map((st) => st.cmd.map(String).join('\t')).join('\n')}\n`);
    const r = await runWine(probeExe, [zPath(script)], { env: standinEnv(port), timeoutMs: 300_000 });
    tt.equal(r.code, 0, `probe exits 0 (stderr: ${r.stderr.slice(0, 500)})`);
    const outs = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Out);
    for (const o of outs) if (o.fatal) tt.fail(`probe: ${o.fatal}`);
    const byTag: Record<string, Out> = {};
    steps.forEach((st, k) => {
      const o = outs.find((x) => x.i === k + 1) ?? (st.cmd[0] === 'layout' ? outs.find((x) => x.fn === 'layout') : undefined);
      if (!o) return void tt.fail(`no output for line ${k + 1}: ${st.cmd.join(' ').slice(0, 200)}`);
      if (st.hr !== undefined) {
        tt.equal(o.hr, st.hr >>> 0, `${st.tag ?? st.cmd[0]}: ${st.cmd.slice(1).join(' ').slice(0, 160)} (err ${o.err ?? ''})`);
      }
      if (st.tag) byTag[st.tag] = o;
    });
    return byTag;
  };

  t.test('standinEnv keeps wine.ts overrides and names the stand-ins native', async (tt) => {
    const env = standinEnv(4242);
    tt.same(env, {
      BS_STANDIN_PORT: '4242',
      BLOCKSPEAKER_IPHLPAPI: 'bs-iphlpapi.dll',
      WINEDLLOVERRIDES: 'mscoree,mshtml=;computenetwork,vmcompute,bs-iphlpapi=n',
    });
  });

  t.test('layout.ts matches mingw headers', async (tt) => {
    const o = await probe(tt, [{ cmd: ['layout'], tag: 'layout' }]);
    tt.strictSame(o.layout.layout, LAYOUT);
  });

  t.test('HCN create, enumerate, handles and create refusals', async (tt) => {
    const pods = net('pods', 'L2Bridge', [
      { IpAddressPrefix: '10.244.0.0/16', IpSubnets: [{ IpAddressPrefix: '10.244.1.0/26' }] },
      { IpAddressPrefix: 'fd00:10:244::/48', IpSubnets: [{ IpAddressPrefix: 'fd00:10:244:1::/64' }] },
    ]);
    const o = await probe(tt, [
      { cmd: ['HcnCreateNetwork', N1, pods, 'n1'], hr: 0 },
      { cmd: ['HcnCreateNetwork', ZERO, net('nat', 'NAT', [{ IpAddressPrefix: '172.16.0.0/24' }]), 'n2'], hr: 0, tag: 'nat' },
      {
        cmd: ['HcnCreateNetwork', N3, net('vxlan0', 'Overlay', [
          { IpAddressPrefix: '10.245.0.0/24', Policies: [{ Type: 'VSID', Settings: { IsolationId: 4096 } }], IpSubnets: [{ IpAddressPrefix: '10.245.0.0/26' }] },
        ]), 'n3'],
        hr: 0,
      },
      { cmd: ['HcnCreateNetwork', ZERO, '{bad', 'x'], hr: HCN.INVALID_JSON, tag: 'badJson' },
      { cmd: ['HcnCreateNetwork', ZERO, '{bad', 'x', 'noerr'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnCreateNetwork', ZERO, j({ Name: 'x', Type: 'L2Bridge', Bogus: 1 }), 'x'], hr: HCN.INVALID_JSON, tag: 'unknownField' },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'Weird', []), 'x'], hr: HCN.INVALID_NETWORK_TYPE },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'NAT', [{ IpAddressPrefix: '10.1.0.0/24' }, { IpAddressPrefix: '10.2.0.0/24' }]), 'x'], hr: HCN.INVALID_ARG },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'Overlay', [{ IpAddressPrefix: '10.1.0.0/24' }]), 'x'], hr: HCN.INVALID_ARG },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'L2Bridge', [{ IpAddressPrefix: '10.1.0.1/24' }]), 'x'], hr: HCN.INVALID_PREFIX },
      {
        cmd: ['HcnCreateNetwork', ZERO, net('x', 'L2Bridge', [{ IpAddressPrefix: '10.1.0.0/24', IpSubnets: [{ IpAddressPrefix: '10.2.0.0/26' }] }]), 'x'],
        hr: HCN.INVALID_PREFIX,
      },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'L2Bridge', [{ IpAddressPrefix: '10.1.0.0/16' }, { IpAddressPrefix: '10.1.2.0/24' }]), 'x'], hr: HCN.INVALID_PREFIX },
      { cmd: ['HcnCreateNetwork', N1, net('again', 'L2Bridge', []), 'x'], hr: HCN.NETWORK_ALREADY_EXISTS },
      { cmd: ['HcnCreateNetwork', ZERO, net('x', 'L2Bridge', []), '~'], hr: HR.E_POINTER },
      { cmd: ['HcnEnumerateNetworks', query({ Name: 'pods' })], hr: 0, tag: 'byName' },
      { cmd: ['HcnEnumerateNetworks', query({ ID: `{${N1.toUpperCase()}}` })], hr: 0, tag: 'byId' },
      { cmd: ['HcnEnumerateNetworks', query()], hr: 0, tag: 'all' },
      { cmd: ['HcnEnumerateNetworks', '{'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnEnumerateNetworks', j({ Filter: '{' })], hr: HCN.INVALID_JSON },
      { cmd: ['HcnEnumerateNetworks', query(), 'noout'], hr: HR.E_POINTER },
      { cmd: ['HcnOpenNetwork', UNKNOWN, 'x'], hr: HCN.NETWORK_NOT_FOUND },
      { cmd: ['HcnQueryNetworkProperties', 'n1', '{}'], hr: 0, tag: 'props' },
      { cmd: ['HcnQueryNetworkProperties', 'n1', '{'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnQueryNetworkProperties', 'foreign', '{}'], hr: HR.E_HANDLE, tag: 'foreign' },
      { cmd: ['HcnModifyNetwork', 'null', modify('Policy', 'Add', { Policies: [] })], hr: HR.E_HANDLE },
      { cmd: ['HcnCloseNetwork', 'n1'], hr: 0 },
      { cmd: ['HcnCloseNetwork', 'n1'], hr: HR.E_HANDLE },
      { cmd: ['HcnQueryNetworkProperties', 'n1', '{}'], hr: HR.E_HANDLE },
      { cmd: ['HcnCloseNetwork', 'n2'], hr: 0 },
      { cmd: ['HcnCloseNetwork', 'n3'], hr: 0 },
    ]);
    const bad = errorOf(o.badJson);
    tt.equal(bad?.Success, false);
    tt.equal(bad?.ErrorCode, HCN.INVALID_JSON);
    tt.match(errorOf(o.unknownField)?.Error, /Bogus/);
    tt.same(JSON.parse(o.byName.out!), [N1]);
    tt.same(JSON.parse(o.byId.out!), [N1]);
    const nat = s.state.networks.find((n) => n.Name === 'nat');
    tt.match(nat?.ID, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'the zero GUID gets a fresh lower-case ID');
    tt.same(JSON.parse(o.all.out!), [N1, nat?.ID, N3]);
    const props = JSON.parse(o.props.out!);
    tt.equal(props.ID, N1);
    tt.equal(props.Name, 'pods');
    for (const sub of props.Ipams[0].Subnets) {
      tt.match(sub.ID, /^[0-9a-f-]{36}$/, `Subnet ${sub.IpAddressPrefix} has an ID`);
      for (const ip of sub.IpSubnets) tt.match(ip.ID, /^[0-9a-f-]{36}$/, `ip-subnet ${ip.IpAddressPrefix} has an ID`);
    }
    tt.equal(s.state.networks.length, 3, 'refused creates left nothing behind');
  });

  t.test('HCN modify, endpoints and namespaces (another process, same state)', async (tt) => {
    const pods = s.state.networks.find((n) => n.ID === N1) as { Ipams: { Subnets: { ID: string; IpAddressPrefix: string }[] }[] };
    const s4 = pods.Ipams[0].Subnets.find((x) => x.IpAddressPrefix === '10.244.0.0/16')!.ID;
    const nat = s.state.networks.find((n) => n.Name === 'nat')!.ID as string;
    const ns1 = s.addNamespace();
    const ep = (Name: string, IpAddress: string, extra: Record<string, unknown> = {}) =>
      j({ Name, HostComputeNetwork: N1, IpConfigurations: [{ IpAddress, PrefixLength: IpAddress.includes(':') ? 48 : 16 }], SchemaVersion: { Major: 2, Minor: 0 }, ...extra });
    const o = await probe(tt, [
      { cmd: ['HcnOpenNetwork', N1, 'n1'], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n1', modify('Subnet', 'Add', { Subnets: [{ IpAddressPrefix: '10.250.0.0/24', IpSubnets: [{ IpAddressPrefix: '10.250.0.0/28' }] }] })], hr: 0 },
      {
        cmd: ['HcnModifyNetwork', 'n1', modify('Subnet', 'Add', { Subnets: [{ IpAddressPrefix: '10.251.0.0/24' }, { IpAddressPrefix: '10.244.5.0/24' }] })],
        hr: HCN.INVALID_PREFIX,
      },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Add', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.2.0/26' }] })], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Add', { SubnetId: UNKNOWN, IpSubnets: [{ IpAddressPrefix: '10.244.3.0/26' }] })], hr: HCN.SUBNET_NOT_FOUND },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Add', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.99.0.0/26' }] })], hr: HCN.INVALID_PREFIX },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Add', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.1.32/27' }] })], hr: HCN.INVALID_PREFIX },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Add', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.3.1/26' }] })], hr: HCN.INVALID_PREFIX },
      { cmd: ['HcnModifyNetwork', 'n1', j({ ResourceType: 'Policy', RequestType: 'Add', Settings: { Policies: [] }, Extra: true })], hr: HCN.INVALID_JSON, tag: 'extra' },
      { cmd: ['HcnModifyNetwork', 'n1', '{"ResourceType":'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnModifyNetwork', 'n1', modify('Policy', 'Add', { Policies: [rsr('10.246.1.0/24')] })], hr: HCN.INVALID_ARG },
      { cmd: ['HcnOpenNetwork', N3, 'n3'], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n3', modify('Policy', 'Add', { Policies: [rsr('10.246.1.0/24')] })], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n3', modify('Policy', 'Add', { Policies: [rsr('10.246.1.0/24')] })], hr: HCN.POLICY_ALREADY_EXISTS },
      { cmd: ['HcnModifyNetwork', 'n3', modify('Policy', 'Add', { Policies: [rsr('10.246.2.0/24'), rsr('10.246.2.0/24')] })], hr: HCN.POLICY_ALREADY_EXISTS },
      { cmd: ['HcnModifyNetwork', 'n3', modify('Policy', 'Remove', { Policies: [rsr('10.246.1.0/24')] })], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n3', modify('Policy', 'Remove', { Policies: [rsr('10.246.1.0/24')] })], hr: HCN.POLICY_NOT_FOUND },
      // Endpoints.
      {
        cmd: ['HcnCreateEndpoint', 'n1', E1, ep('pod-a', '10.244.1.5', { Dns: { ServerList: ['10.96.0.10'] }, Routes: [{ NextHop: '10.244.1.1', DestinationPrefix: '0.0.0.0/0' }] }), 'e1'],
        hr: 0,
      },
      { cmd: ['HcnCreateEndpoint', 'n1', ZERO, ep('dup', '10.244.1.5'), 'x'], hr: HCN.INVALID_IP, tag: 'inUse' },
      { cmd: ['HcnCreateEndpoint', 'n1', ZERO, ep('outside', '10.244.200.5'), 'x'], hr: HCN.INVALID_IP },
      { cmd: ['HcnCreateEndpoint', 'n1', ZERO, ep('odd', '10.244.1.6', { Bogus: 1 }), 'x'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnCreateEndpoint', 'null', ZERO, ep('nohandle', '10.244.1.6'), 'x'], hr: HR.E_HANDLE },
      { cmd: ['HcnCreateEndpoint', 'n1', ZERO, ep('othernet', '10.244.1.6', { HostComputeNetwork: nat }), 'x'], hr: HCN.INVALID_ARG },
      { cmd: ['HcnCreateEndpoint', 'n1', ZERO, ep('nonet', '10.244.1.6', { HostComputeNetwork: UNKNOWN }), 'x'], hr: HCN.NETWORK_NOT_FOUND },
      { cmd: ['HcnCreateEndpoint', 'n1', E2, ep('host-ep', '10.244.1.2'), 'e2'], hr: 0 },
      { cmd: ['HcnCreateEndpoint', 'n1', E3, ep('pod-v6', 'fd00:10:244:1::5'), 'e3'], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Remove', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.1.0/26' }] })], hr: HCN.ENTITY_HAS_REFERENCES },
      { cmd: ['HcnModifyNetwork', 'n1', modify('Subnet', 'Remove', { Subnets: [{ ID: s4 }] })], hr: HCN.ENTITY_HAS_REFERENCES },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Remove', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.2.0/26' }] })], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n1', modify('IPSubnet', 'Remove', { SubnetId: s4, IpSubnets: [{ IpAddressPrefix: '10.244.2.0/26' }] })], hr: HCN.SUBNET_NOT_FOUND },
      { cmd: ['HcnModifyNetwork', 'n1', modify('Subnet', 'Remove', { Subnets: [{ IpAddressPrefix: '10.250.0.0/24' }] })], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n1', modify('Subnet', 'Remove', { Subnets: [{ ID: UNKNOWN }] })], hr: HCN.SUBNET_NOT_FOUND },
      // Namespaces.
      { cmd: ['HcnOpenNamespace', ns1, 'ns1'], hr: 0 },
      { cmd: ['HcnModifyNamespace', 'ns1', modify('Endpoint', 'Add', { EndpointId: E1 })], hr: 0 },
      { cmd: ['HcnModifyNamespace', 'ns1', modify('Endpoint', 'Add', { EndpointId: E1 })], hr: HCN.ENDPOINT_ALREADY_ATTACHED },
      { cmd: ['HcnCreateNamespace', NS2, j({ Type: 'HostDefault', SchemaVersion: { Major: 2, Minor: 0 } }), 'ns2'], hr: 0 },
      { cmd: ['HcnCreateNamespace', ZERO, j({ Type: 'HostDefault', Color: 'blue' }), 'x'], hr: HCN.INVALID_JSON },
      { cmd: ['HcnModifyNamespace', 'ns2', modify('Endpoint', 'Add', { EndpointId: E1 })], hr: HCN.ENDPOINT_ALREADY_ATTACHED },
      { cmd: ['HcnModifyNamespace', 'ns2', modify('Endpoint', 'Add', { EndpointId: UNKNOWN })], hr: HCN.ENDPOINT_NOT_FOUND },
      { cmd: ['HcnModifyNamespace', 'ns2', modify('Endpoint', 'Remove', { EndpointId: E1 })], hr: HCN.ELEMENT_NOT_FOUND },
      { cmd: ['HcnQueryNamespaceProperties', 'ns1', '{}'], hr: 0, tag: 'ns1' },
      { cmd: ['HcnOpenEndpoint', E1.toUpperCase(), 'e1b'], hr: 0 },
      { cmd: ['HcnQueryEndpointProperties', 'e1b', '{}'], hr: 0, tag: 'e1' },
      { cmd: ['HcnQueryNetworkProperties', 'e1b', '{}'], hr: HR.E_HANDLE },
      { cmd: ['HcnEnumerateEndpoints', query({ HostComputeNetwork: N1 })], hr: 0, tag: 'eps' },
      { cmd: ['HcnEnumerateEndpoints', query({ HostComputeNamespace: ns1 })], hr: 0, tag: 'inNs' },
      { cmd: ['HcnDeleteEndpoint', E1], hr: HCN.ENTITY_HAS_REFERENCES },
      { cmd: ['HcnDeleteNetwork', N1], hr: HCN.ENTITY_HAS_REFERENCES },
      { cmd: ['HcnOpenNamespace', UNKNOWN, 'x'], hr: HCN.ELEMENT_NOT_FOUND },
      { cmd: ['HcnOpenEndpoint', UNKNOWN, 'x'], hr: HCN.ENDPOINT_NOT_FOUND },
      { cmd: ['HcnDeleteNetwork', UNKNOWN], hr: HCN.NETWORK_NOT_FOUND },
      { cmd: ['HcnDeleteEndpoint', UNKNOWN], hr: HCN.ENDPOINT_NOT_FOUND },
      { cmd: ['HcnDeleteNamespace', UNKNOWN], hr: HCN.ELEMENT_NOT_FOUND },
      { cmd: ['HcnModifyEndpoint', 'e1b', modify('Policy', 'Add', { Policies: [{ Type: 'OutBoundNAT', Settings: { Exceptions: ['10.0.0.0/8'] } }] })], hr: 0 },
      { cmd: ['HcnModifyNamespace', 'ns1', modify('Endpoint', 'Remove', { EndpointId: E1 })], hr: 0 },
      { cmd: ['HcnDeleteEndpoint', E1], hr: 0 },
      { cmd: ['HcnQueryEndpointProperties', 'e1b', '{}'], hr: HCN.ENDPOINT_NOT_FOUND },
      { cmd: ['HcnDeleteNamespace', NS2], hr: 0 },
      // A handle outlives its object: calls through it find nothing.
      { cmd: ['HcnOpenNetwork', nat, 'n2'], hr: 0 },
      { cmd: ['HcnDeleteNetwork', nat], hr: 0 },
      { cmd: ['HcnModifyNetwork', 'n2', modify('Policy', 'Add', { Policies: [] })], hr: HCN.NETWORK_NOT_FOUND },
      { cmd: ['HcnCloseNetwork', 'n2'], hr: 0 },
    ]);
    tt.match(errorOf(o.extra)?.Error, /Extra/);
    tt.match(errorOf(o.inUse)?.Error, /address already in use/);
    const pods2 = s.state.networks.find((n) => n.ID === N1) as { Ipams: { Subnets: { IpAddressPrefix: string; IpSubnets: { IpAddressPrefix: string }[] }[] }[] };
    tt.same(
      pods2.Ipams[0].Subnets.map((x) => [x.IpAddressPrefix, x.IpSubnets.map((i) => i.IpAddressPrefix)]),
      [['10.244.0.0/16', ['10.244.1.0/26']], ['fd00:10:244::/48', ['fd00:10:244:1::/64']]],
      'refused requests changed nothing; the accepted ones are all there',
    );
    const overlay = s.state.networks.find((n) => n.ID === N3) as { Policies: unknown[] };
    tt.same(overlay.Policies, [], 'the all-or-nothing policy add left nothing');
    tt.same(JSON.parse(o.ns1.out!).Resources, [{ Type: 'Endpoint', Data: { ID: E1 } }]);
    const e1 = JSON.parse(o.e1.out!);
    tt.equal(e1.ID, E1);
    tt.equal(e1.HostComputeNetwork, N1);
    tt.equal(e1.HostComputeNamespace, ns1);
    tt.same(e1.Dns, { ServerList: ['10.96.0.10'] });
    tt.same(e1.Routes, [{ NextHop: '10.244.1.1', DestinationPrefix: '0.0.0.0/0' }]);
    tt.same(JSON.parse(o.eps.out!), [E1, E2, E3]);
    tt.same(JSON.parse(o.inNs.out!), [E1]);
    tt.same(s.state.endpoints.map((e) => e.ID), [E2, E3]);
    tt.same(s.state.namespaces.map((n) => [n.ID, n.endpoints]), [[ns1, []]]);
    tt.notOk(s.state.networks.some((n) => n.ID === nat));
  });

  t.test('IP Helper routes, forwarding, conversions, and HNSCall host attach', async (tt) => {
    const eth = s.addInterface('Ethernet', {}, [
      { destination: '0.0.0.0/0', nextHop: '192.168.1.1', metric: 0 },
      { destination: '192.168.1.0/24', nextHop: '0.0.0.0', metric: 256, protocol: 2, origin: 1 },
    ]);
    const mgmt = s.addInterface('vEthernet (Ethernet)', { ipv4Forwarding: false, ipv6Forwarding: false });
    const v4only = s.addInterface('Loopback Pseudo-Interface 1', { families: [4] });
    const L = mgmt.luid;
    const before = s.state.routes.length;
    const o = await probe(tt, [
      { cmd: ['InitializeIpForwardEntry'], tag: 'init' },
      { cmd: ['CreateIpForwardEntry2', 4, L, 0, '10.244.5.0/24', '192.168.1.21', 271, 3], hr: 0 },
      { cmd: ['CreateIpForwardEntry2', 4, L, 0, '10.244.5.0/24', '192.168.1.21', 271, 3], hr: WIN32.OBJECT_ALREADY_EXISTS },
      { cmd: ['CreateIpForwardEntry2', 4, 0, mgmt.index, '10.244.6.0/24', '192.168.1.22', 271, '-'], hr: 0 },
      { cmd: ['CreateIpForwardEntry2', 4, L, 0, '10.244.7.1/24', '192.168.1.23', 271, 3], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['CreateIpForwardEntry2', 4, 999, 0, '10.244.8.0/24', '192.168.1.23', 271, 3], hr: WIN32.NOT_FOUND },
      { cmd: ['CreateIpForwardEntry2', 4, 0, 0, '10.244.8.0/24', '192.168.1.23', 271, 3], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['CreateIpForwardEntry2', 4, L, 0, '10.244.8.0/24', '-', 271, 3], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['CreateIpForwardEntry2', 0, L, 0, '10.244.8.0/24', '-', 271, 3], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['CreateIpForwardEntry2', 6, L, 0, 'fd00:10:245::/64', 'fe80::1', 271, 3], hr: 0 },
      { cmd: ['CreateIpForwardEntry2', 6, v4only.luid, 0, 'fd00:10:246::/64', 'fe80::1', 271, 3], hr: WIN32.NOT_FOUND },
      { cmd: ['DeleteIpForwardEntry2', 4, L, 0, '10.244.5.0/24', '192.168.1.21', 271, 3], hr: 0 },
      { cmd: ['DeleteIpForwardEntry2', 4, L, 0, '10.244.5.0/24', '192.168.1.21', 271, 3], hr: WIN32.NOT_FOUND },
      { cmd: ['DeleteIpForwardEntry2', 4, 999, 0, '10.244.6.0/24', '192.168.1.22', 271, 3], hr: WIN32.NOT_FOUND },
      { cmd: ['GetIpForwardTable2', 0], hr: 0, tag: 'all' },
      { cmd: ['GetIpForwardTable2', 2], hr: 0, tag: 'v4' },
      { cmd: ['GetIpForwardTable2', 23], hr: 0, tag: 'v6' },
      { cmd: ['GetIpForwardTable2', 5], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['FreeMibTable'] },
      { cmd: ['GetIpInterfaceEntry', 4, L, 0], hr: 0, tag: 'if4' },
      { cmd: ['GetIpInterfaceEntry', 4, 0, mgmt.index], hr: 0, tag: 'ifByIndex' },
      { cmd: ['GetIpInterfaceEntry', 4, 999, 0], hr: WIN32.FILE_NOT_FOUND },
      { cmd: ['GetIpInterfaceEntry', 0, L, 0], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['GetIpInterfaceEntry', 6, v4only.luid, 0], hr: WIN32.NOT_FOUND },
      { cmd: ['SetIpInterfaceEntry', 4, L, 0, 1, 64], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['SetForwarding', 4, L, 1, 0], hr: WIN32.INVALID_PARAMETER, tag: 'passBack' },
      { cmd: ['SetForwarding', 4, L, 1, 1], hr: 0 },
      { cmd: ['SetForwarding', 6, L, 1, 0], hr: 0 },
      { cmd: ['GetIpInterfaceEntry', 4, L, 0], hr: 0, tag: 'if4after' },
      { cmd: ['SetIpInterfaceEntry', 4, 0, eth.index, 0, 0], hr: 0, tag: 'setByIndex' },
      { cmd: ['SetIpInterfaceEntry', 4, 999, 0, 1, 0], hr: WIN32.FILE_NOT_FOUND },
      { cmd: ['ConvertInterfaceAliasToLuid', 'vEthernet (Ethernet)'], hr: 0, tag: 'aliasLuid' },
      { cmd: ['ConvertInterfaceAliasToLuid', 'vEthernet (nope)'], hr: WIN32.INVALID_PARAMETER, tag: 'aliasUnknown' },
      { cmd: ['ConvertInterfaceLuidToAlias', L, 256], hr: 0, tag: 'luidAlias' },
      { cmd: ['ConvertInterfaceLuidToAlias', L, 5], hr: WIN32.NOT_ENOUGH_MEMORY },
      { cmd: ['ConvertInterfaceLuidToAlias', 999, 256], hr: WIN32.INVALID_PARAMETER },
      { cmd: ['ConvertInterfaceLuidToIndex', L], hr: 0, tag: 'luidIndex' },
      { cmd: ['ConvertInterfaceLuidToIndex', 999], hr: WIN32.INVALID_PARAMETER, tag: 'indexUnknown' },
      // Host attach (vmcompute.dll HNSCall) makes the endpoint's vNIC.
      { cmd: ['HNSCall', 'POST', `/endpoints/${E2}/attach`, j({ SystemType: 'Host', CompartmentId: 1 })], hr: 0, tag: 'attach' },
      { cmd: ['HNSCall', 'POST', `/endpoints/${E2}/attach`, j({ SystemType: 'Host', CompartmentId: 1 })], hr: HCN.ENDPOINT_ALREADY_ATTACHED, tag: 'again' },
      { cmd: ['HNSCall', 'POST', `/endpoints/${UNKNOWN}/attach`, j({ SystemType: 'Host', CompartmentId: 1 })], hr: HCN.ENDPOINT_NOT_FOUND },
      { cmd: ['HNSCall', 'GET', '/endpoints/', '~'], hr: HCN.REQUEST_UNSUPPORTED, tag: 'get' },
      { cmd: ['HNSCall', 'POST', `/endpoints/${E3}/attach`, '{'], hr: HCN.INVALID_JSON },
      { cmd: ['HNSCall', 'POST', `/endpoints/${E3}/attach`, j({ SystemType: 'Container', CompartmentId: 1 })], hr: HCN.INVALID_ARG },
      { cmd: ['ConvertInterfaceAliasToLuid', 'vEthernet (host-ep)'], hr: 0, tag: 'vnic' },
    ]);
    const init = o.init.row as Record<string, number>;
    tt.same(
      [init.validLifetime, init.preferredLifetime, init.loopback, init.autoconfigureAddress, init.publish, init.immortal, init.sitePrefixLength, init.metric, init.protocol, init.family],
      [0xffffffff, 0xffffffff, 1, 1, 1, 1, 255, 0xffffffff, -1, 0],
      'InitializeIpForwardEntry: infinite lifetimes, flags TRUE, "illegal" site prefix/metric/protocol, the rest zero',
    );
    type Row = { family: number; luid: string; index: number; destination: string; prefixLength: number; nextHop: string; metric: number; protocol: number };
    const rows = (x: Out) => (x.rows as Row[]).map((r) => `${r.family} ${r.luid} ${r.index} ${r.destination}/${r.prefixLength} ${r.nextHop} ${r.metric} ${r.protocol}`);
    tt.same(rows(o.all), [
      `2 ${eth.luid} ${eth.index} 0.0.0.0/0 192.168.1.1 0 3`,
      `2 ${eth.luid} ${eth.index} 192.168.1.0/24 0.0.0.0 256 2`,
      `2 ${L} ${mgmt.index} 10.244.6.0/24 192.168.1.22 271 3`,
      `23 ${L} ${mgmt.index} fd00:10:245:0:0:0:0:0/64 fe80:0:0:0:0:0:0:1 271 3`,
    ]);
    tt.equal(o.v4.rows && (o.v4.rows as Row[]).length, 3);
    tt.same((o.v6.rows as Row[]).map((r) => r.destination), ['fd00:10:245:0:0:0:0:0']);
    tt.same(
      s.state.routes.filter((r) => r.interfaceLuid === L).map((r) => [r.destination, r.nextHop, r.metric, r.protocol]),
      [['10.244.6.0/24', '192.168.1.22', 271, 3], ['fd00:10:245::/64', 'fe80::1', 271, 3]],
    );
    const free = s.calls.filter((c) => c.fn === 'FreeMibTable');
    tt.same(free.map((c) => c.hr), [0, 0, 0, WIN32.INVALID_PARAMETER], 'tables from the DLL are freed; a foreign block is refused');
    tt.match(o.if4.row, { luid: String(L), index: mgmt.index, forwarding: 0, sitePrefixLength: 64 });
    tt.match(o.ifByIndex.row, { luid: String(L), index: mgmt.index });
    tt.match(o.passBack, { get: 0, gotSitePrefixLength: 64 }, 'GetIpInterfaceEntry reports a site prefix Set refuses for IPv4');
    tt.match(o.if4after.row, { forwarding: 1 });
    tt.match(o.setByIndex.row, { luid: String(eth.luid) }, 'Set fills the LUID when called by index');
    const ifs = s.state.interfaces;
    tt.match(ifs.find((i) => i.luid === L), { ipv4Forwarding: true, ipv6Forwarding: true });
    tt.match(ifs.find((i) => i.luid === eth.luid), { ipv4Forwarding: false });
    tt.equal(o.aliasLuid.luid, String(L));
    tt.equal(o.aliasUnknown.luid, '0', 'an unknown alias gives a zero LUID');
    tt.equal(o.luidAlias.alias, 'vEthernet (Ethernet)');
    tt.equal(o.luidIndex.index, mgmt.index);
    tt.equal(o.indexUnknown.index, 0, 'NET_IFINDEX_UNSPECIFIED on failure');
    tt.same(JSON.parse(o.attach.out!), { Success: true });
    tt.match(JSON.parse(o.again.out!), { Success: false, Error: /attached/ });
    tt.match(JSON.parse(o.get.out!), { Success: false });
    const vnic = ifs.find((i) => i.alias === 'vEthernet (host-ep)');
    tt.match(vnic, { endpoint: E2, ipv4Forwarding: false, ipv6Forwarding: false });
    tt.equal(o.vnic.luid, String(vnic?.luid));
    tt.same(
      s.state.routes.filter((r) => r.interfaceLuid === vnic?.luid).map((r) => [r.destination, r.nextHop]),
      [['10.244.0.0/16', '0.0.0.0'], ['10.244.1.2/32', '0.0.0.0']],
      'the vNIC comes with its connected routes',
    );
    tt.equal(s.state.routes.filter((r) => r.interfaceLuid !== vnic?.luid).length, before + 2, 'two routes made, the refused ones not');
    tt.match(s.state.endpoints.find((e) => e.ID === E2), { hostCompartment: 1 });
    const attachCall = s.calls.find((c) => c.fn === 'HNSCall' && c.hr === 0);
    tt.match(attachCall?.args, { method: 'POST', path: `/endpoints/${E2}/attach` });
  });

  t.test('deleting a host-attached endpoint removes its vNIC; calls are logged', async (tt) => {
    await probe(tt, [
      { cmd: ['HcnDeleteEndpoint', E2], hr: 0 },
      { cmd: ['ConvertInterfaceAliasToLuid', 'vEthernet (host-ep)'], hr: WIN32.INVALID_PARAMETER },
    ]);
    tt.notOk(s.state.interfaces.some((i) => i.alias === 'vEthernet (host-ep)'));
    tt.notOk(s.state.routes.some((r) => r.destination === '10.244.1.2/32'));
    const logged = fs.readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { fn: string; hr: number; pid?: number });
    tt.equal(logged.length, s.calls.length, 'every call is in the log file');
    tt.same(logged.map((c) => [c.fn, c.hr]), s.calls.map((c) => [c.fn, c.hr]));
    tt.ok(s.calls.every((c) => typeof c.pid === 'number' && c.at > 0), 'calls carry the caller pid and a time');
    tt.ok(new Set(s.calls.map((c) => c.pid)).size > 1, 'calls came from several processes');
  });

  t.test('without the server every call fails with RPC_S_SERVER_UNAVAILABLE', async (tt) => {
    const gone = await startStandin();
    const port = gone.port;
    await gone.close();
    const o = await probe(
      tt,
      [
        { cmd: ['HcnEnumerateNetworks', query()], hr: 0x800706ba, tag: 'enum' },
        { cmd: ['CreateIpForwardEntry2', 4, 1, 0, '10.0.0.0/24', '10.0.0.1', 1, 3], hr: 1722 },
        { cmd: ['HNSCall', 'POST', `/endpoints/${E3}/attach`, '{}'], hr: 0x800706ba },
      ],
      port,
    );
    tt.match(errorOf(o.enum), { Success: false, Error: /unreachable/ });
  });
}

