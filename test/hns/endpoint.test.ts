// The pod endpoint's HCN settings (src/hns/endpoint.ts): policies per natOutgoing, dual stack, port mappings, DNS
// precedence, every bad field named; reading endpoints and namespaces back; CHECK's comparison.
import t from 'tap';
import fc from 'fast-check';
import {
  EndpointSpecError, buildEndpoint, effectiveDns, endpointMatches, endpointName, isAttachmentName, namespaceEndpointRequest, namespaceEndpoints,
  parseEndpoint, parsePortMappings, parseRuntimeDns, type EndpointSpec,
} from '../../src/hns/endpoint.ts';

const NET = '5A2C1B4E-0F39-4C2B-9C35-7D6A1E0B9F10';
const base: EndpointSpec = {
  containerId: 'abc123',
  ifname: 'eth0',
  network: NET,
  addresses: [{ ip: '10.244.1.7', prefixLen: 16, gateway: '10.244.1.1' }],
  pools: [{ cidr: '10.244.0.0/16', natOutgoing: true }, { cidr: '10.250.0.0/24', natOutgoing: false }, { cidr: 'fd00:244::/64', natOutgoing: false }],
  serviceCidr: '10.96.0.0/12',
  exceptions: ['192.168.10.0/24'],
  nodeIP: '192.168.10.5',
};

t.test('IPv4 pod in a NAT pool: the full V2 document', async (t) => {
  t.same(buildEndpoint({ ...base, dns: { servers: ['10.96.0.10'], search: ['svc.cluster.local'] } }), {
    SchemaVersion: { Major: 2, Minor: 0 },
    Name: 'abc123_eth0',
    HostComputeNetwork: NET.toLowerCase(),
    IpConfigurations: [{ IpAddress: '10.244.1.7', PrefixLength: 16 }],
    Routes: [{ NextHop: '10.244.1.1', DestinationPrefix: '0.0.0.0/0' }],
    Dns: { ServerList: ['10.96.0.10'], Search: ['svc.cluster.local'] },
    Policies: [
      { Type: 'OutBoundNAT', Settings: { Exceptions: ['10.244.0.0/16', '10.250.0.0/24', '10.96.0.0/12', '192.168.10.0/24'] } },
      { Type: 'SDNRoute', Settings: { DestinationPrefix: '10.96.0.0/12', NeedEncap: true } },
      { Type: 'SDNRoute', Settings: { DestinationPrefix: '192.168.10.5/32', NeedEncap: true } },
    ],
  });
  t.equal(endpointName('abc123', 'eth0'), 'abc123_eth0');
});

t.test('natOutgoing of the address\'s own pool decides; the most specific pool wins', async (t) => {
  const types = (s: EndpointSpec) => buildEndpoint(s).Policies.map((p) => p.Type);
  t.same(types({ ...base, addresses: [{ ip: '10.250.0.9', prefixLen: 24, gateway: '10.250.0.1' }] }), ['SDNRoute', 'SDNRoute'], 'no NAT for a pool without natOutgoing');
  const nested = { ...base, pools: [{ cidr: '10.0.0.0/8', natOutgoing: true }, { cidr: '10.244.0.0/16', natOutgoing: false }] };
  t.same(types(nested), ['SDNRoute', 'SDNRoute'], 'the /16 inside the /8 is the pod\'s pool');
  t.throws(() => buildEndpoint({ ...base, addresses: [{ ip: '172.16.0.5', prefixLen: 24, gateway: '172.16.0.1' }] }), /addresses: 172\.16\.0\.5 lies in none of the pools/);
  t.same(types({ ...base, serviceCidr: undefined, nodeIP: undefined }), ['OutBoundNAT'], 'no service CIDR, no node IP: no SDNRoute');
});

t.test('dual stack: one IpConfiguration and one default route per family; NAT and routes per family', async (t) => {
  const ep = buildEndpoint({
    ...base,
    addresses: [{ ip: '10.244.1.7', prefixLen: 16, gateway: '10.244.1.1', family: 4 }, { ip: 'fd00:244::7', prefixLen: 64, gateway: 'fd00:244::1', family: 6 }],
    serviceCidr: ['10.96.0.0/12', 'fd00:96::/108'],
  });
  t.same(ep.IpConfigurations, [{ IpAddress: '10.244.1.7', PrefixLength: 16 }, { IpAddress: 'fd00:244::7', PrefixLength: 64 }]);
  t.same(ep.Routes, [{ NextHop: '10.244.1.1', DestinationPrefix: '0.0.0.0/0' }, { NextHop: 'fd00:244::1', DestinationPrefix: '::/0' }]);
  const nat = ep.Policies.filter((p) => p.Type === 'OutBoundNAT');
  t.equal(nat.length, 1, 'one OutBoundNAT, for IPv4');
  t.notOk((nat[0]!.Settings.Exceptions as string[]).some((x) => x.includes(':')), 'IPv4 exceptions only');
  t.same(ep.Policies.filter((p) => p.Type === 'SDNRoute').map((p) => p.Settings.DestinationPrefix), ['10.96.0.0/12', 'fd00:96::/108', '192.168.10.5/32']);
  const v6only = buildEndpoint({ ...base, addresses: [{ ip: 'fd00:244::7', prefixLen: 64, gateway: 'fd00:244::1' }], serviceCidr: ['10.96.0.0/12', 'fd00:96::/108'] });
  t.same(v6only.Policies.map((p) => [p.Type, p.Settings.DestinationPrefix]), [['SDNRoute', 'fd00:96::/108']], 'IPv6 only: no NAT, no IPv4 routes');
  t.throws(() => buildEndpoint({ ...base, addresses: [{ ip: '10.244.1.7', prefixLen: 16 }, { ip: '10.244.1.8', prefixLen: 16 }] }), /addresses: more than one IPv4 address/);
});

t.test('port mappings: protocols, VIP, IPv6 flag, duplicates and conflicts', async (t) => {
  const ep = buildEndpoint({
    ...base,
    portMappings: [
      { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
      { hostPort: 5353, containerPort: 53, protocol: 'UDP', hostIP: '192.168.10.5' },
      { hostPort: 9000, containerPort: 9000, protocol: 'sctp', hostIP: '0.0.0.0' },
      { hostPort: 8443, containerPort: 443, hostIP: 'fd00::5' },
      { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
    ],
  });
  t.same(ep.Policies.filter((p) => p.Type === 'PortMapping').map((p) => p.Settings), [
    { InternalPort: 80, ExternalPort: 8080, Protocol: 6 },
    { InternalPort: 53, ExternalPort: 5353, Protocol: 17, VIP: '192.168.10.5' },
    { InternalPort: 9000, ExternalPort: 9000, Protocol: 132 },
    { InternalPort: 443, ExternalPort: 8443, Protocol: 6, VIP: 'fd00::5', Flags: 2 },
  ], 'the exact duplicate is dropped; 0.0.0.0 is no VIP; tcp when left out');
  const err = (pm: unknown, re: RegExp) => t.throws(() => buildEndpoint({ ...base, portMappings: pm as never }), re, re.source);
  err([{ hostPort: 0, containerPort: 80, protocol: 'tcp' }], /portMappings\[0\]\.hostPort: must be a port from 1 to 65535, got 0/);
  err([{ hostPort: 80, containerPort: 70000 }], /portMappings\[0\]\.containerPort: must be a port from 1 to 65535, got 70000/);
  err([{ hostPort: 80, containerPort: 80, protocol: 'icmp' }], /portMappings\[0\]\.protocol: unknown protocol "icmp" \(tcp, udp or sctp\)/);
  err([{ hostPort: 80, containerPort: 80, hostIP: 'host' }], /portMappings\[0\]\.hostIP: "host" is not an IP address/);
  err([{ hostPort: 80, containerPort: 80 }, { hostPort: 80, containerPort: 81, protocol: 'tcp' }], /portMappings\[1\]: host port 80\/tcp is already mapped to container port 80 by portMappings\[0\]/);
  err({ hostPort: 80 }, /portMappings: must be a list/);
  t.same(parsePortMappings([{ hostPort: 1, containerPort: 2, protocol: 'udp', hostIP: '' }]), [{ hostPort: 1, containerPort: 2, protocol: 'udp' }]);
  t.throws(() => parsePortMappings(['x']), /runtimeConfig\.portMappings\[0\]: must be an object/);
});

t.test('DNS: runtimeConfig wins per field over the config, the config over the fallback', async (t) => {
  t.same(effectiveDns({ servers: ['10.0.0.10'], search: ['a'] }, { servers: ['10.96.0.10'] }), { servers: ['10.96.0.10'], search: ['a'] });
  t.same(effectiveDns({ servers: ['10.0.0.10'] }, { servers: [], searches: ['ns.svc.cluster.local'], options: ['ndots:5'] }), { servers: ['10.0.0.10'], search: ['ns.svc.cluster.local'], options: ['ndots:5'] });
  t.same(effectiveDns(undefined, undefined, { servers: ['1.1.1.1'] }), { servers: ['1.1.1.1'] });
  t.same(effectiveDns({ domain: 'cluster.local' }, undefined, { servers: ['1.1.1.1'], search: ['x'] }), { servers: ['1.1.1.1'], search: ['x'], domain: 'cluster.local' });
  const ep = buildEndpoint({ ...base, dns: { servers: ['10.0.0.10'], search: ['conf'] }, runtimeDns: { servers: ['10.96.0.10'], searches: ['rt.svc'] } });
  t.same(ep.Dns, { ServerList: ['10.96.0.10'], Search: ['rt.svc'] });
  t.notOk('Dns' in buildEndpoint(base), 'no DNS at all: no Dns field');
  t.throws(() => parseRuntimeDns({ servers: ['x'] }), /runtimeConfig\.dns\.servers\[0\]: "x" is not an IP address/);
  t.throws(() => parseRuntimeDns([]), /runtimeConfig\.dns: must be an object/);
});

t.test('field errors name the field', async (t) => {
  const err = (patch: Partial<EndpointSpec>, re: RegExp) => {
    let got: unknown;
    try {
      buildEndpoint({ ...base, ...patch });
    } catch (e) {
      got = e;
    }
    t.ok(got instanceof EndpointSpecError, `${re.source}: an EndpointSpecError`);
    t.match((got as Error | undefined)?.message, re);
  };
  err({ containerId: '-x' }, /^containerId: must be a letter or digit/);
  err({ ifname: 'a/b' }, /^ifname: must be an interface name/);
  err({ ifname: 'sixteen-chars-xx' }, /^ifname: /);
  err({ network: 'pods' }, /^network: must be the HNS network's ID \(a GUID\), got "pods"/);
  err({ addresses: [] }, /^addresses: at least one address is needed/);
  err({ addresses: [{ ip: '10.244.1.300', prefixLen: 16 }] }, /^addresses\[0\]\.ip: "10\.244\.1\.300" is not an IP address/);
  err({ addresses: [{ ip: '10.244.1.3', prefixLen: 33 }] }, /^addresses\[0\]\.prefixLen: must be 0\.\.32, got 33/);
  err({ addresses: [{ ip: '10.244.1.3', prefixLen: 16, gateway: 'fd00::1' }] }, /^addresses\[0\]\.gateway: fd00::1 is not an IPv4 address/);
  err({ addresses: [{ ip: '10.244.1.3', prefixLen: 16, family: 6 }] }, /^addresses\[0\]\.family: is 6 but 10\.244\.1\.3 is an IPv4 address/);
  err({ pools: [{ cidr: '10.244.0.1/16', natOutgoing: true }] }, /^pools\[0\]\.cidr: .*host bits/);
  err({ serviceCidr: 'ten' }, /^serviceCidr: /);
  err({ serviceCidr: ['10.96.0.0/12', 'x'] }, /^serviceCidr\[1\]: /);
  err({ exceptions: ['10.0.0.0/33'] }, /^exceptions\[0\]: /);
  err({ nodeIP: 'node' }, /^nodeIP: "node" is not an IP address/);
  err({ macPrefix: '0E2A' }, /^macPrefix: must be two bytes such as 0E-2A/);
  t.equal(buildEndpoint({ ...base, macPrefix: '0e-2a' }).MacAddress, '0E-2A-0A-F4-01-07', 'overlay MAC: prefix + the IPv4 address');
});

t.test('reading back: endpoint properties, namespace resources, requests, names', async (t) => {
  const props = {
    ID: 'D1F7A0C2-1111-2222-3333-444455556666', Name: 'abc123_eth0', HostComputeNetwork: NET, HostComputeNamespace: '{AAAAAAAA-0000-1111-2222-333333333333}',
    MacAddress: '00-15-5d-01-02-03', IpConfigurations: [{ IpAddress: '10.244.1.7', PrefixLength: 16 }, { IpAddress: 'fd00:244:0::7', PrefixLength: 64 }],
    Routes: [{ NextHop: '10.244.1.1', DestinationPrefix: '0.0.0.0/0' }], Flags: 0,
  };
  const ep = parseEndpoint(props);
  t.same(ep, {
    id: 'd1f7a0c2-1111-2222-3333-444455556666', name: 'abc123_eth0', network: NET.toLowerCase(), namespace: 'aaaaaaaa-0000-1111-2222-333333333333',
    mac: '00-15-5D-01-02-03', addresses: [{ ip: '10.244.1.7', prefixLen: 16, family: 4 }, { ip: 'fd00:244::7', prefixLen: 64, family: 6 }],
    routes: [{ destination: '0.0.0.0/0', nextHop: '10.244.1.1' }], flags: 0,
  });
  t.notOk(parseEndpoint({ ...props, HostComputeNamespace: '00000000-0000-0000-0000-000000000000' }).namespace, 'the zero GUID is no namespace');
  t.throws(() => parseEndpoint({ Name: 'x' }), /no ID/);
  t.same(endpointMatches(props, { network: NET, addresses: ['10.244.1.7/16', 'fd00:244::7'], namespace: 'aaaaaaaa-0000-1111-2222-333333333333' }), []);
  t.same(endpointMatches(ep, { network: '11111111-2222-3333-4444-555555555555', addresses: ['10.244.1.8'], namespace: 'bbbbbbbb-0000-1111-2222-333333333333' }), [
    `it is on network ${NET.toLowerCase()}, not 11111111-2222-3333-4444-555555555555`,
    'it lacks 10.244.1.8',
    'it also holds 10.244.1.7, fd00:244::7',
    'it is in namespace aaaaaaaa-0000-1111-2222-333333333333, not bbbbbbbb-0000-1111-2222-333333333333',
  ]);
  t.same(namespaceEndpoints({ Resources: [{ Type: 'Container', Data: { ID: 'x' } }, { Type: 'Endpoint', Data: { ID: 'D1F7A0C2-1111-2222-3333-444455556666' } }, { Type: 'Endpoint', Data: '{"ID":"{0000AAAA-1111-2222-3333-444455556666}"}' }] }),
    ['d1f7a0c2-1111-2222-3333-444455556666', '0000aaaa-1111-2222-3333-444455556666']);
  t.same(namespaceEndpoints({}), []);
  t.same(JSON.parse(namespaceEndpointRequest('d1f7a0c2-1111-2222-3333-444455556666', 'Add')), { ResourceType: 'Endpoint', RequestType: 'Add', Settings: { EndpointId: 'd1f7a0c2-1111-2222-3333-444455556666' } });
  t.ok(isAttachmentName('abc_eth0'));
  t.ok(isAttachmentName('a_b_c_net1'));
  t.notOk(isAttachmentName('noseparator'));
  t.notOk(isAttachmentName('abc_'));
  t.notOk(isAttachmentName('abc_way-too-long-ifname'));
});

t.test('property: every address has its default route; the exceptions hold every IPv4 pool; one config per family', async (t) => {
  const v4Pool = fc.tuple(fc.integer({ min: 1, max: 223 }), fc.integer({ min: 0, max: 255 }), fc.boolean()).map(([a, b, nat]) => ({ cidr: `${a}.${b}.0.0/16`, natOutgoing: nat }));
  // Canonical text (no zero group) so addresses compare as strings.
  const v6Pool = fc.tuple(fc.integer({ min: 1, max: 0xffff }), fc.boolean()).map(([x, nat]) => ({ cidr: `fd00:${x.toString(16)}::/64`, natOutgoing: nat }));
  fc.assert(
    fc.property(
      fc.uniqueArray(v4Pool, { minLength: 1, maxLength: 5, selector: (p) => p.cidr }),
      fc.uniqueArray(v6Pool, { maxLength: 3, selector: (p) => p.cidr }),
      fc.nat(), fc.integer({ min: 2, max: 254 }), fc.integer({ min: 2, max: 0xfffe }),
      (pools4, pools6, pick, host4, host6) => {
        const p4 = pools4[pick % pools4.length]!;
        const [a, b] = p4.cidr.split('.');
        const addresses = [{ ip: `${a}.${b}.3.${host4}`, prefixLen: 16, gateway: `${a}.${b}.0.1` }];
        const p6 = pools6.length ? pools6[pick % pools6.length]! : undefined;
        if (p6) addresses.push({ ip: p6.cidr.replace('::/64', `::${host6.toString(16)}`), prefixLen: 64, gateway: p6.cidr.replace('::/64', '::1') });
        const ep = buildEndpoint({ ...base, addresses, pools: [...pools4, ...pools6] });
        for (const addr of addresses) {
          const dst = addr.ip.includes(':') ? '::/0' : '0.0.0.0/0';
          if (!ep.Routes.some((r) => r.NextHop === addr.gateway && r.DestinationPrefix === dst)) return false;
        }
        if (ep.IpConfigurations.length !== addresses.length) return false;
        const nat = ep.Policies.find((p) => p.Type === 'OutBoundNAT');
        // The most specific v4 pool holding the address decides NAT (pools here are distinct /16s: its own).
        if (!!nat !== p4.natOutgoing) return false;
        if (nat) {
          const ex = nat.Settings.Exceptions as string[];
          if (!pools4.every((p) => ex.includes(p.cidr))) return false;
          if (!ex.includes('10.96.0.0/12')) return false;
          if (ex.some((x) => x.includes(':'))) return false;
        }
        return true;
      },
    ),
    { numRuns: 300 },
  );
  t.pass('held for 300 random pool sets');
});
