// dataplane kind hns: every field validated with its path; the checks against node.os and the pools.
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/config.ts';
import { hnsPoolProblem } from '../../src/config/hns.ts';
import { HNS_VNI_MAX, HNS_VNI_MIN } from '../../src/hns/limits.ts';

const WIN = 'node: { name: win-1, os: windows }\n';
const issues = (text: string): string[] => {
  try {
    parseConfig(text, 'n.yaml');
  } catch (e) {
    if (e instanceof ConfigError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  return [];
};

t.test('a full hns section loads with every field', async (t) => {
  const c = parseConfig(`${WIN}ipam: { store: /tmp/x, maxBlocksPerHost: 1, pools: [{ name: p, cidr: 10.244.0.0/16 }] }
dataplane:
  kind: hns
  mode: l2bridge
  network: cbr0
  adapter: Ethernet 2
  interfaceAlias: "vEthernet (Ethernet 2)"
  ownedPrefixes: [10.244.0.0/16, 10.96.0.0/12]
  singleNetwork: true
  routeMetric: 300
  endpointGraceSeconds: 30
`);
  t.same(c.dataplane, {
    kind: 'hns', mode: 'l2bridge', network: 'cbr0', adapter: 'Ethernet 2', interfaceAlias: 'vEthernet (Ethernet 2)',
    ownedPrefixes: ['10.244.0.0/16', '10.96.0.0/12'], singleNetwork: true, routeMetric: 300,
    endpointGraceSeconds: 30,
  });
  const o = parseConfig(`${WIN}dataplane: { kind: hns, mode: overlay, vni: 4096, drMac: "00:15:5d:aa:bb:01", providerAddress: 192.0.2.7 }\n`);
  t.same(o.dataplane, { kind: 'hns', mode: 'overlay', vni: 4096, drMac: '00-15-5D-AA-BB-01', providerAddress: '192.0.2.7' }, 'MAC in HNS spelling');
  const l2t = parseConfig(`${WIN}dataplane: { kind: hns, mode: l2tunnel }\n`);
  t.equal((l2t.dataplane as { mode: string }).mode, 'l2tunnel');
});

t.test('each bad field is named', async (t) => {
  const cases: [string, RegExp][] = [
    ['{ kind: hns, mode: l3 }', /^dataplane\.mode: must be one of l2bridge, l2tunnel, overlay, got "l3"$/],
    [`{ kind: hns, mode: overlay, vni: ${HNS_VNI_MIN - 1}, drMac: 00-15-5D-00-00-01 }`, new RegExp(`^dataplane\\.vni: must be ${HNS_VNI_MIN}\\.\\.${HNS_VNI_MAX}, got 4095$`)],
    [`{ kind: hns, mode: overlay, vni: ${HNS_VNI_MAX + 1}, drMac: 00-15-5D-00-00-01 }`, /^dataplane\.vni: must be 4096\.\.65535, got 65536$/],
    ['{ kind: hns, mode: overlay, drMac: 00-15-5D-00-00-01 }', /^dataplane\.vni: required for mode overlay/],
    ['{ kind: hns, mode: overlay, vni: 5000 }', /^dataplane\.drMac: required for mode overlay/],
    ['{ kind: hns, mode: overlay, vni: 5000, drMac: 00-15-5D-00-01 }', /^dataplane\.drMac: must be a MAC address/],
    ['{ kind: hns, mode: l2bridge, vni: 5000 }', /^dataplane\.vni: only used with mode overlay, not l2bridge$/],
    ['{ kind: hns, mode: overlay, vni: 5000, drMac: 00-15-5D-00-00-01, providerAddress: nope }', /^dataplane\.providerAddress: must be an IP address/],
    ['{ kind: hns, adapter: "" }', /^dataplane\.adapter: must be a non-empty string/],
    ['{ kind: hns, ownedPrefixes: [10.0.0.1/8] }', /^dataplane\.ownedPrefixes\[0\]: must be a prefix/],
    ['{ kind: hns, ownedPrefixes: [0.0.0.0/0] }', /^dataplane\.ownedPrefixes\[0\]: wider than a \/8/],
    ['{ kind: hns, ownedPrefixes: 10.0.0.0/8 }', /^dataplane\.ownedPrefixes: must be a list of prefixes/],
    ['{ kind: hns, singleNetwork: yes }', /^dataplane\.singleNetwork: must be true or false/],
    ['{ kind: hns, routeMetric: 0 }', /^dataplane\.routeMetric: must be 1\.\.9999, got 0$/],
    ['{ kind: hns, endpointGraceSeconds: -1 }', /^dataplane\.endpointGraceSeconds: must be 0\.\.86400/],
    ['{ kind: hns, module: "C:\\\\k\\\\hns.v2.psm1" }', /^dataplane\.module: no longer used: HNS is programmed through computenetwork\.dll/],
    ['{ kind: hns, adaptor: x }', /^dataplane\.adaptor: unknown field \(did you mean adapter\?\)$/],
  ];
  for (const [dp, re] of cases) t.match(issues(`${WIN}dataplane: ${dp}\n`), [re], dp);
});

t.test('hns needs a Windows node, one block per host in single-network mode, and pools that reserve .1 and .2', async (t) => {
  t.match(issues('node: { name: l, os: linux }\ndataplane: { kind: hns }\n'), [/^dataplane\.kind: hns needs node\.os: windows/]);
  t.match(issues(`${WIN}ipam: { store: /tmp/x, pools: [{ name: p, cidr: 10.0.0.0/16 }] }\ndataplane: { kind: hns, singleNetwork: true }\n`),
    [/^dataplane\.singleNetwork: one block per host: set ipam\.maxBlocksPerHost: 1, got 0$/]);
  const got = issues(`${WIN}ipam:
  store: /tmp/x
  pools:
    - { name: a, cidr: 10.1.0.0/24, blockSize: 30, reservation: { kind: perHost, count: 2 } }
    - { name: b, cidr: 10.2.0.0/24, blockSize: 29, reservation: none }
    - { name: c, cidr: 10.3.0.0/24, blockSize: 29, reservation: { kind: perPool, count: 3 } }
    - { name: d, cidr: 10.4.0.0/24, blockSize: 29, reservation: { kind: perBlock, start: 1, end: 1 } }
    - { name: e, cidr: 10.5.0.0/24, blockSize: 31, reservation: { kind: perHost, count: 3 } }
    - { name: f, cidr: 10.6.0.0/24, blockSize: 29, reservation: none, disabled: true }
    - { name: g, cidr: 10.7.0.0/24, blockSize: 30, reservation: { kind: perHost, count: 3 } }
dataplane: { kind: hns }
`);
  t.match(got, [
    /^ipam\.pools\[0\]\.reservation: reservation perHost count 2 .* use count >= 3 \(dataplane hns\)$/,
    /^ipam\.pools\[1\]\.reservation: reservation none/,
    /^ipam\.pools\[2\]\.reservation: reservation perPool/,
    /^ipam\.pools\[3\]\.reservation: reservation perBlock start 1/,
    /^ipam\.pools\[4\]\.blockSize: blockSize \/31 leaves no room/,
  ]);
  t.equal(got.length, 5, 'a disabled pool and a /30 perHost 3 micropool are fine');
  t.equal(hnsPoolProblem({ cidr: 'fd00::/64', blockSize: 122, reservation: { kind: 'auto' } }), null);
});

t.test('dataplane.cni.flavor: blockspeaker by default and for every mode; the IPAM-only ones only where they fit', async (t) => {
  const cfg = (mode: string, flavor?: string) => `${WIN}dataplane:
  kind: hns
  mode: ${mode}
${mode === 'overlay' ? '  vni: 4096\n  drMac: "00-15-5D-AA-BB-01"\n' : ''}  cni: { confDir: 'C:\\etc\\cni\\net.d', serviceCidr: 10.96.0.0/12, nodeSubnet: 192.168.10.0/24${flavor ? `, flavor: ${flavor}` : ''} }
`;
  const flavorOf = (text: string) => (parseConfig(text, 'n.yaml').dataplane as { cni: { flavor: string } }).cni.flavor;
  for (const mode of ['l2bridge', 'l2tunnel', 'overlay']) {
    t.equal(flavorOf(cfg(mode)), 'blockspeaker', `default for ${mode}`);
    t.equal(flavorOf(cfg(mode, 'blockspeaker')), 'blockspeaker');
  }
  t.equal(flavorOf(cfg('l2bridge', 'win-bridge')), 'win-bridge');
  t.equal(flavorOf(cfg('l2tunnel', 'win-bridge')), 'win-bridge');
  t.equal(flavorOf(cfg('overlay', 'win-overlay')), 'win-overlay');
  t.equal(flavorOf(cfg('l2bridge', 'sdnbridge')), 'sdnbridge');
  t.same(issues(cfg('l2bridge', 'win-overlay')), ['dataplane.cni.flavor: win-overlay does not drive a l2bridge network: use blockspeaker or win-bridge or sdnbridge with mode l2bridge']);
  t.same(issues(cfg('l2tunnel', 'sdnbridge')), ['dataplane.cni.flavor: sdnbridge does not drive a l2tunnel network: use blockspeaker or win-bridge with mode l2tunnel']);
  t.same(issues(cfg('overlay', 'win-bridge')), ['dataplane.cni.flavor: win-bridge does not drive a overlay network: use blockspeaker or win-overlay with mode overlay']);
  t.match(issues(cfg('l2bridge', 'calico'))[0], /^dataplane\.cni\.flavor: .*blockspeaker.*win-bridge.*win-overlay.*sdnbridge/);
});
