// The HNS addressing model on Calico's etcd layout: a Windows node's daemon, HNS fake dataplane, on a real
// etcd that calico-node shares. The pool's first address lies in a Linux node's block (so it cannot be our
// gateway); the node's first block is one calico-node created with Calico's Windows reservation (0, 1, 2, last).
// Pods through the CNI plugin until the node holds three blocks: every CNI result's gateway is HNS's, and is .1
// of that Calico-made block (.2 the host endpoint), which Calico's own reservation protects; every block the
// daemon creates carries Calico's reservation too (0, 1, 2 and last, as calico-node's Windows IPAM makes them), so
// calicoctl sees each as "reserved for Windows"; no pod gets a reserved address; `ipam check` is clean.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endpointAddresses, subnetsOf } from '../../src/hns/model.ts';
import { runCni } from '../../src/cni/plugin.ts';
import { startHnsDaemon } from '../kit/daemon.ts';
import { ipAt, parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';
import { openStore } from '../../src/store/open.ts';
import { calicoKeys } from '../../src/calico/keys.ts';
import { decodeBlock, isWindowsReserved } from '../../src/calico/ipam-model.ts';
import { checkCalico } from '../../src/ipam/calico/check.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { affinity, ipamConfig, node } from '../ipam/calico-fixtures.ts';

const SEQ = 1795600000123456789n;
/** A /28 as calico-node leaves it: `allocated` ordinals -> attribute index, Windows reservation when `windows`. */
function block28(cidr: string, host: string, windows: boolean, pods: [number, string][]): { key: string; value: string } {
  const attrs: string[] = [];
  const allocs: (number | null)[] = Array(16).fill(null);
  if (windows) {
    attrs.push('{"handle_id":"windows-reserved-ipam-handle","secondary":{"note":"windows host rsvd"}}');
    for (const o of [0, 1, 2, 15]) allocs[o] = 0;
  }
  for (const [o, h] of pods) allocs[o] = attrs.push(`{"handle_id":"${h}","secondary":{"namespace":"default","node":"${host}","pod":"${h}"}}`) - 1;
  const unalloc = allocs.map((a, o) => (a === null ? o : -1)).filter((o) => o >= 0);
  const sfa = pods.map(([o]) => `"${o}":${SEQ}`).join(',');
  return {
    key: `/calico/ipam/v2/assignment/ipv4/block/${cidr.replace('/', '-')}`,
    value: `{"cidr":"${cidr}","affinity":"host:${host}","affinity_claim_time":"2026-11-25T10:00:00Z","allocations":[${allocs.map((a) => (a === null ? 'null' : a)).join(',')}],` +
      `"unallocated":[${unalloc.join(',')}],"attributes":[${attrs.join(',')}],"sequenceNumber":${SEQ + BigInt(pods.length)},"sequenceNumberForAllocation":{${sfa}},"deleted":false}`,
  };
}

t.test('HNS addressing holds on Calico\'s layout: three blocks through the CNI plugin', async (t) => {
  if (!etcdGate(t)) return;
  const etcd = await EtcdCluster.start(t);
  const store = await openStore(etcd.url);
  t.teardown(() => store.close());
  const pool = '{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"default-ipv4-ippool","uid":"u-p"},' +
    '"spec":{"cidr":"10.244.0.0/24","vxlanMode":"Never","ipipMode":"Never","natOutgoing":true,"blockSize":28,"nodeSelector":"all()"}}';
  const fixture = [
    ipamConfig(true),
    { key: '/calico/resources/v3/projectcalico.org/ippools/default-ipv4-ippool', value: pool },
    node('linux-a', 'linux', '10.0.0.11'),
    node('win-c', 'windows', '10.0.0.13'),
    // linux-a holds the pool's first block: 10.244.0.1 is a Linux pod's address.
    block28('10.244.0.0/28', 'linux-a', false, [[0, 'k8s-pod-network.l0'], [1, 'k8s-pod-network.l1']]),
    affinity('linux-a', '10.244.0.0/28'),
    { key: '/calico/ipam/v2/handle/k8s-pod-network.l0', value: '{"block":{"10.244.0.0/28":1},"deleted":false}' },
    { key: '/calico/ipam/v2/handle/k8s-pod-network.l1', value: '{"block":{"10.244.0.0/28":1},"deleted":false}' },
    // win-c's first block, made by calico-node (Calico's Windows reservation), no pods yet.
    block28('10.244.0.32/28', 'win-c', true, []),
    affinity('win-c', '10.244.0.32/28'),
  ];
  for (const kv of fixture) await store.put(kv.key, kv.value);

  const dir = mkdtempSync(join(tmpdir(), `bs-hns-calico-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = join(dir, 'bs.sock');
  const file = join(dir, 'node.yaml');
  const text = `
node: { name: win-c, os: windows }
ipam: { store: "${etcd.url}", layout: calico }
dataplane: { kind: hns, mode: l2bridge, network: cbr0, adapter: Ethernet, ownedPrefixes: [10.244.0.0/16] }
status: { listen: "127.0.0.1:0" }
ipc: { path: ${sock} }
`;
  const { fake, reconciler, get } = await startHnsDaemon(file, text, t);
  const netconf = JSON.stringify({ cniVersion: '1.0.0', name: 'cbr0', type: 'win-bridge', ipam: { type: 'blockspeaker-cni', socket: sock } });
  const blockOf = (ip: string) => parsePrefix(`${ip.split('.').slice(0, 3).join('.')}.${Number(ip.split('.')[3]) & ~15}/28`).toString();

  const results: { id: string; address: string; gateway: string }[] = [];
  for (let i = 0; i < 40; i++) {
    const id = `pod${i}`;
    const out = await runCni({ env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: 'none', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' }, stdin: netconf });
    t.equal(out.exitCode, 0, `ADD ${id}: ${out.stdout}`);
    const r = JSON.parse(out.stdout);
    results.push({ id, address: r.ips[0].address, gateway: r.ips[0].gateway });
    await reconciler.runOnce();
    fake.createEndpoint(fake.networkByName('cbr0')!.ID!, r.ips[0].address.split('/')[0], id);
    if (new Set(results.map((x) => blockOf(x.address.split('/')[0]))).size === 3) break;
  }
  const blocks = [...new Set(results.map((x) => blockOf(x.address.split('/')[0])))].sort();
  t.equal(blocks.length, 3, `addresses from three blocks (${blocks.join(', ')})`);
  t.ok(blocks.includes('10.244.0.32/28'), 'the Calico-made block is used first');

  await reconciler.runOnce();
  const dp = JSON.parse(await get('/dataplane'));
  const net = dp.hns.Networks.find((n: { Name: string }) => n.Name === 'cbr0');
  const subnets = subnetsOf(net);
  t.equal(subnets.length, 1, 'one Subnet: the pool');
  t.equal(subnets[0].IpAddressPrefix, '10.244.0.0/24');
  const gateway = subnets[0].Routes![0].NextHop;
  t.equal(gateway, '10.244.0.33', ".1 of the node's first block, the one calico-node made");
  t.not(gateway, '10.244.0.1', "not the pool's first address, which is in linux-a's block");
  t.same(subnets[0].IpSubnets!.map((x) => x.IpAddressPrefix).sort(), blocks, 'an IpSubnet per block');
  t.ok(results.every((r) => r.gateway === gateway), 'every CNI result\'s gateway is HNS\'s');
  t.ok(results.every((r) => r.address.endsWith('/24')), 'every pod in the pool subnet');
  t.equal(dp.addressing[0].firstBlock, '10.244.0.32/28');
  const hostEp = dp.hns.Endpoints.find((e: { Name: string }) => e.Name === 'cbr0_ep_default-ipv4-ippool');
  t.ok(hostEp, 'host endpoint');
  t.equal(endpointAddresses(hostEp)[0].toString(), '10.244.0.34', 'host endpoint at .2 of the first block');

  // Calico's reservation in every block of this node, as calico-node's Windows IPAM makes them; no pod on one.
  for (const b of blocks) {
    const kv = (await store.get(calicoKeys.block(b)))!;
    const cb = decodeBlock(kv.key, kv.value);
    const reserved = cb.allocations.flatMap((a, o) => (a !== null && isWindowsReserved(cb.attributes[a]) ? [o] : []));
    t.same(reserved, [0, 1, 2, 15], `${b}: Calico's Windows reservation`);
    t.equal(cb.affinity, 'host:win-c');
    for (const r of results) {
      const ip = parseIP(r.address.split('/')[0]);
      if (prefixContainsIP(parsePrefix(b), ip)) t.notOk([0, 1, 2, 15].some((o) => ipAt(parsePrefix(b), o).toString() === ip.toString()), `${r.id} not on a reserved address`);
    }
  }
  t.notOk(await store.get(calicoKeys.handle('windows-reserved-ipam-handle')), 'no handle key for the reservation');
  const ipamBlocks = JSON.parse(await get('/ipam/blocks?host=win-c'));
  t.same(ipamBlocks.map((b: { reserved: number }) => b.reserved), [4, 4, 4], 'IPAM counts 4 reserved in each');
  const report = await checkCalico(store);
  t.same(report.problems, [], 'ipam check clean');
  t.equal(report.reservedForWindows, 12, 'and counts 3 x 4 reserved for Windows');
  t.equal((await reconciler.runOnce()).ops, 0, 'steady state');
});
