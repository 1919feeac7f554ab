// The HNS dataplane end to end, under wine with the packaged executables: blockspeaker.exe runs a Windows node config with
// the HNS dataplane on its in-memory fake (--dry-run; wine has no HNS), started from a seed holding our network and
// one leaked endpoint (BLOCKSPEAKER_HNS_FAKE_SEED, tests only). blockspeaker-cni.exe ADDs pods until their addresses
// span three blocks; /dataplane shows one network whose ip-subnets, shared gateway and host endpoint agree with every
// CNI result; a later pass plans nothing; the leaked endpoint is gone and counted.
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, zPath, type WineResult } from '../../packaging/windows/wine.ts';
import { parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, windowsReady } from './harness.ts';

const NET = 'cbr0';
const NET_ID = '5E3D0000-0000-4000-8000-000000000001';
const LEAK = { id: '5E3D0000-0000-4000-8000-0000000000E1', name: 'gone-pod_eth0', ip: '10.244.0.250' };

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-windows-hns-${process.pid}-`));
  const storeName = `bs-hns-${process.pid}`;
  const pipe = `\\\\.\\pipe\\bs-hns-${process.pid}`;
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
  });

  t.test('blockspeaker.exe + blockspeaker-cni.exe: three blocks, one network that agrees, steady, leak removed', async (t) => {
    const statusPort = await freePort();
    const config = path.join(dir, 'node.yaml');
    // /29 blocks: the node's first keeps .0, .1 (gateway), .2 (host endpoint) and the last; later ones .0 and the last.
    fs.writeFileSync(config, `node: { name: win-hns-1, os: windows }
ipam:
  store: C:\\${storeName}\\store
  pools: [{ name: p4, cidr: 10.244.0.0/24, blockSize: 29 }]
dataplane: { kind: hns, mode: l2bridge, network: ${NET}, adapter: Ethernet }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '${pipe}' }
`);
    const seed = path.join(dir, 'seed.json');
    fs.writeFileSync(seed, JSON.stringify({
      Networks: [{ ID: NET_ID, Name: NET, Type: 'L2Bridge', Ipams: [{ Type: 'Static', Subnets: [] }], Policies: [] }],
      Endpoints: [{ ID: LEAK.id, Name: LEAK.name, HostComputeNetwork: NET_ID, IpConfigurations: [{ IpAddress: LEAK.ip, PrefixLength: 24 }] }],
      HostRoutes: [],
    }));
    const d = startWine(exe.cli, ['run', '-c', zPath(config), '--dry-run'], { timeoutMs: 600_000, env: { BLOCKSPEAKER_HNS_FAKE_SEED: zPath(seed) } });
    t.teardown(() => d.kill());
    const get = async (p: string) => (await (await fetch(`http://127.0.0.1:${statusPort}${p}`)).json()) as any;
    const until = Date.now() + 240_000;
    for (;;) {
      // Up, and its first pass done (it removes the leak before any pod could be handed the leaked address).
      const ok = await get('/dataplane').then((x) => x.kind === 'hns' && x.passes >= 1, () => false);
      if (ok) break;
      if (Date.now() > until) throw new Error(`daemon never served /dataplane: ${JSON.stringify(d.output())}`);
      await new Promise((r) => setTimeout(r, 1000));
    }

    const netConf = JSON.stringify({ cniVersion: '1.0.0', name: NET, type: 'win-bridge', ipam: { type: 'blockspeaker-cni', socket: pipe } });
    const add = (id: string): Promise<WineResult> => runWine(exe.cni, [], {
      stdin: netConf,
      env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: 'c2b1f0de-7a0b-4b8e-9a57-3f4c7d1e2a10', CNI_IFNAME: 'eth0', CNI_PATH: 'C:\\cni\\bin' },
      timeoutMs: 180_000,
    });
    // Twelve pods: the first /29 holds 4 (it keeps the gateway and host endpoint too), later ones 6, so the pods
    // span three blocks. Three at a time (each wine start costs seconds).
    const results: { id: string; address: string; gateway: string }[] = [];
    for (let batch = 0; batch < 4; batch++) {
      const ids = [0, 1, 2].map((i) => `pod${batch * 3 + i}`);
      const outs = await Promise.all(ids.map(add));
      outs.forEach((o, i) => {
        t.equal(o.code, 0, `ADD ${ids[i]}: ${o.stdout}${o.stderr}`);
        const r = JSON.parse(o.stdout);
        results.push({ id: ids[i], address: r.ips[0].address, gateway: r.ips[0].gateway });
      });
    }
    const blockOf = (a: string) => {
      const ip = a.split('/')[0].split('.').map(Number);
      return `10.244.0.${ip[3] & ~7}/29`;
    };
    const blocks = [...new Set(results.map((r) => blockOf(r.address)))].sort();
    t.equal(blocks.length, 3, `addresses from three blocks: ${results.map((r) => r.address).join(' ')}`);

    // The network, as HNS (the fake) holds it, agrees with every CNI result.
    const dp = await get('/dataplane');
    const nets = dp.hns.Networks.filter((n: { Name: string }) => n.Name === NET);
    t.equal(nets.length, 1, 'one network');
    const subnets = nets[0].Ipams.flatMap((i: { Subnets: unknown[] }) => i.Subnets);
    t.equal(subnets.length, 1, 'one Subnet: the pool');
    t.equal(subnets[0].IpAddressPrefix, '10.244.0.0/24');
    const gateway = subnets[0].Routes[0].NextHop;
    t.same(subnets[0].Routes, [{ NextHop: gateway, DestinationPrefix: '0.0.0.0/0' }]);
    const ipSubnets = subnets[0].IpSubnets.map((x: { IpAddressPrefix: string }) => x.IpAddressPrefix).sort();
    t.same(ipSubnets, blocks, 'an ip-subnet per block, no more');
    for (const r of results) {
      t.equal(r.gateway, gateway, `${r.id}: the CNI gateway is HNS's`);
      t.equal(r.address.split('/')[1], '24', `${r.id}: the pool's length (one subnet)`);
      t.ok(ipSubnets.some((p: string) => prefixContainsIP(parsePrefix(p), parseIP(r.address.split('/')[0]))), `${r.id}: inside an ip-subnet`);
    }
    const hostEps = dp.hns.Endpoints.filter((e: { Name: string }) => e.Name === `${NET}_ep_p4`);
    t.equal(hostEps.length, 1, 'the host endpoint');
    const hostIP = hostEps[0].IpConfigurations[0].IpAddress;
    t.equal(dp.addressing[0].gateway, gateway);
    t.equal(dp.addressing[0].hostEndpoint, hostIP);
    t.notOk(results.some((r) => r.address.split('/')[0] === hostIP || r.address.split('/')[0] === gateway), 'no pod holds the gateway or the host endpoint');
    t.equal(parseIP(gateway).toString().split('.').slice(0, 3).join('.'), '10.244.0', 'gateway inside the pool');

    // The leaked endpoint: removed and counted; nothing else of ours was.
    t.notOk(dp.hns.Endpoints.some((e: { ID: string }) => e.ID === LEAK.id), 'the leaked endpoint is gone');
    t.equal(dp.endpoints.leakedRemoved, 1);
    t.match(dp.endpoints.lastLeaked, [{ name: LEAK.name, ip: LEAK.ip }]);

    // A later pass (the periodic one, at the latest) plans nothing.
    const passes = dp.passes;
    const until2 = Date.now() + 120_000;
    let last = dp;
    while (!(last.passes > passes && last.lastPlan?.ok && last.lastPlan.ops === 0)) {
      if (Date.now() > until2) break;
      await new Promise((r) => setTimeout(r, 2000));
      last = await get('/dataplane');
    }
    t.ok(last.passes > passes, `another pass ran (${passes} -> ${last.passes})`);
    t.equal(last.lastPlan?.ops, 0, `and planned nothing: ${JSON.stringify(last.lastPlan?.byOp)}`);
    t.equal(last.errors, 0, 'no dataplane errors');
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace in the daemon log');
  });
}
