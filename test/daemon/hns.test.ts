// The HNS dataplane end to end, on Linux: a daemon with a Windows node config and the HNS dataplane (the in-memory fake)
// hands out addresses from three blocks through the CNI plugin; /dataplane shows one network whose IP subnets,
// shared gateway and host endpoint agree with every CNI result; a second pass plans nothing; leaked endpoints are
// removed and counted. The daemon runs in this process (the fake is handed in, so the test can play win-bridge,
// which creates each pod's endpoint after the IPAM plugin answers); the CNI plugin's own code talks to it over the
// real control socket.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endpointAddresses, subnetsOf } from '../../src/hns/model.ts';
import { runCni } from '../../src/cni/plugin.ts';
import { startHnsDaemon } from '../kit/daemon.ts';
import { ipAt, parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';

const dir = mkdtempSync(join(tmpdir(), `bs-hns-daemon-${process.pid}-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('Windows node, HNS fake: three blocks through the CNI plugin, one network that agrees, steady state, leaks removed', async (t) => {
  const sock = join(dir, 'bs.sock');
  const file = join(dir, 'node.yaml');
  const text = `
node: { name: win-1, os: windows }
ipam:
  store: ${join(dir, 'store')}
  pools: [{ name: p4, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: hns, mode: l2bridge, network: cbr0, adapter: Ethernet, ownedPrefixes: [10.244.0.0/16] }
status: { listen: "127.0.0.1:0" }
ipc: { path: ${sock} }
`;
  const { fake, reconciler, get } = await startHnsDaemon(file, text, t);

  const netconf = (id: string) => JSON.stringify({ cniVersion: '1.0.0', name: 'cbr0', type: 'win-bridge', ipam: { type: 'blockspeaker-cni', socket: sock } });
  const cni = async (cmd: 'ADD' | 'DEL', id: string) => {
    const out = await runCni({ env: { CNI_COMMAND: cmd, CNI_CONTAINERID: id, CNI_NETNS: `none`, CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' }, stdin: netconf(id) });
    t.equal(out.exitCode, 0, `${cmd} ${id}: ${out.stdout}`);
    return out.stdout ? JSON.parse(out.stdout) : null;
  };

  // Pods until the node holds three blocks. Each pod's endpoint is made as win-bridge would, once HNS holds its
  // block's ip-subnet (the reconcile pass that follows the block claim).
  const results: { id: string; address: string; gateway: string }[] = [];
  for (let i = 0; i < 48; i++) {
    const id = `pod${i}`;
    const r = await cni('ADD', id);
    t.equal(r.ips.length, 1);
    results.push({ id, address: r.ips[0].address, gateway: r.ips[0].gateway });
    await reconciler.runOnce();
    const net = fake.networkByName('cbr0')!;
    fake.createEndpoint(net.ID!, r.ips[0].address.split('/')[0], id);
    const blocks = new Set(results.map((x) => x.address.split('/')[0]).map((ip) => `${ip.split('.').slice(0, 3).join('.')}.${Number(ip.split('.')[3]) & ~15}`));
    if (blocks.size === 3) break;
  }
  const blocksOf = (ip: string) => parsePrefix(`${ip.split('.').slice(0, 3).join('.')}.${Number(ip.split('.')[3]) & ~15}/28`).toString();
  const blocks = [...new Set(results.map((x) => blocksOf(x.address.split('/')[0])))];
  t.equal(blocks.length, 3, 'addresses from three blocks');

  // /dataplane: HNS's own JSON.
  await reconciler.runOnce();
  const dp = JSON.parse(await get('/dataplane'));
  t.equal(dp.kind, 'hns');
  const nets = dp.hns.Networks.filter((n: { Name: string }) => n.Name === 'cbr0');
  t.equal(nets.length, 1, 'one network');
  const subnets = subnetsOf(nets[0]);
  t.equal(subnets.length, 1, 'one Subnet: the pool');
  t.equal(subnets[0].IpAddressPrefix, '10.244.0.0/24');
  const gateway = subnets[0].Routes![0].NextHop;
  t.same(subnets[0].Routes, [{ NextHop: gateway, DestinationPrefix: '0.0.0.0/0' }]);
  t.same(subnets[0].IpSubnets!.map((x) => x.IpAddressPrefix).sort(), [...blocks].sort(), 'an IpSubnet per block');
  t.ok(results.every((r) => r.gateway === gateway), `every CNI result's gateway is HNS's (${gateway})`);
  t.ok(results.every((r) => r.address.endsWith('/24')), 'every pod sits in the pool subnet');
  const first = dp.addressing[0].firstBlock as string;
  t.equal(gateway, ipAt(parsePrefix(first), 1).toString(), "the gateway is .1 of the node's first block");
  const hostEp = dp.hns.Endpoints.find((e: { Name: string }) => e.Name === 'cbr0_ep_p4');
  t.ok(hostEp, 'host endpoint cbr0_ep_p4');
  const hostIP = endpointAddresses(hostEp)[0].toString();
  t.equal(hostIP, ipAt(parsePrefix(first), 2).toString(), 'host endpoint at .2 of the first block');
  t.ok(prefixContainsIP(parsePrefix(first), parseIP(gateway)));
  t.notOk(results.some((r) => [gateway, hostIP].includes(r.address.split('/')[0])), 'no pod has the gateway or the host endpoint address');
  const ipamBlocks = JSON.parse(await get('/ipam/blocks'));
  t.same(ipamBlocks.map((b: { reserved: number }) => b.reserved).sort(), [2, 2, 4], 'IPAM reserves .0 .1 .2 last in the first block, .0 and last in the others');

  // Steady state: the next pass plans nothing.
  const again = await reconciler.runOnce();
  t.equal(again.ops, 0, 'a second pass plans zero operations');
  t.ok(again.ok);

  // Leaks: a pod whose DEL released its address but whose endpoint stayed; an endpoint nobody allocated.
  await cni('DEL', 'pod0');
  const net = fake.networkByName('cbr0')!;
  const stray = ipAt(parsePrefix(blocks[blocks.length - 1]), 14).toString();
  fake.createEndpoint(net.ID!, stray, 'stray');
  const pass = await reconciler.runOnce();
  t.ok(pass.ok);
  t.same(pass.removedEndpoints.map((e) => e.name).sort(), ['pod0', 'stray'], 'both leaked endpoints removed');
  const names = fake.snapshot().Endpoints.map((e) => e.Name);
  t.notOk(names.includes('pod0') || names.includes('stray'));
  t.ok(names.includes('pod1') && names.includes('cbr0_ep_p4'), 'live pods and the host endpoint stay');
  const dp2 = JSON.parse(await get('/dataplane'));
  t.equal(dp2.endpoints.leakedRemoved, 2);
  t.same(dp2.endpoints.lastLeaked.map((e: { name: string }) => e.name).sort(), ['pod0', 'stray']);
  const metrics = await get('/metrics');
  t.match(metrics, /blockspeaker_hns_leaked_endpoints_removed_total 2/);
  t.equal((await reconciler.runOnce()).ops, 0, 'and then steady again');
});
