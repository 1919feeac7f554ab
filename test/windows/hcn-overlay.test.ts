// Overlay mode through HCN under wine: the packaged blockspeaker.exe (no --dry-run) on a real etcd shared with two
// other nodes, against the stand-in computenetwork.dll. Every block of another node becomes exactly one
// RemoteSubnetRoute network policy with that node's provider address and DR MAC as it published them; a pod ADD
// through blockspeaker-cni.exe gets an endpoint in the Overlay network.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ourVtepLayout } from '../../src/cluster/vtep.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { openStore } from '../../src/store/open.ts';
import { driveC, runWine, startWine, zPath } from '../../packaging/windows/wine.ts';
import { freePort } from '../kit/wait.ts';
import { EtcdCluster, etcdGate } from '../kit/etcd-cluster.ts';
import { exe, windowsReady } from './harness.ts';
import { installStandins, standinEnv, standinReady } from '../kit/windows-standin/build.ts';
import { startStandin } from '../kit/windows-standin/server.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

if (windowsReady(t) && standinReady(t)) {
  installStandins();
  t.test('overlay: one RemoteSubnetRoute per remote block, with its node\'s PA and DR MAC', async (t) => {
    if (!etcdGate(t)) return;
    const etcd = await EtcdCluster.start(t);
    const store = await openStore(etcd.url);
    t.teardown(() => store.close());
    const ipam = new Ipam(store);
    const remote: Record<string, { pa: string; mac: string; blocks: Set<string> }> = {
      'win-b': { pa: '192.168.50.11', mac: '00-15-5D-0B-0B-0B', blocks: new Set() },
      'win-c': { pa: '192.168.50.12', mac: '00-15-5D-0C-0C-0C', blocks: new Set() },
    };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-windows-overlay-${process.pid}-`));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const sd = await startStandin({ log: path.join(dir, 'calls.jsonl') });
    t.teardown(() => sd.close());
    const statusPort = await freePort('127.0.0.1');
    const pipe = `\\\\.\\pipe\\bs-ovl-${process.pid}`;
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-a, os: windows }
ipam:
  store: "${etcd.url}"
  pools: [{ name: p4, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: hns, mode: overlay, network: vxlan0, vni: 4097, drMac: "00-15-5D-0A-0A-0A", providerAddress: 192.168.50.10, adapter: Ethernet }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '${pipe}' }
`);
    const d = startWine(exe.cli, ['run', '-c', zPath(config)], { timeoutMs: 600_000, env: standinEnv(sd.port) });
    t.teardown(() => d.kill());
    const get = async (p: string): Promise<Json> => (await (await fetch(`http://127.0.0.1:${statusPort}${p}`)).json());
    const until = async <T>(what: string, ms: number, f: () => Promise<T | false | undefined> | T | false | undefined): Promise<T> => {
      const end = Date.now() + ms;
      for (;;) {
        const v = await f();
        if (v) return v;
        if (Date.now() > end) throw new Error(`gave up waiting for ${what}: ${d.output().stderr.slice(-1500)}`);
        await new Promise((r) => setTimeout(r, 300));
      }
    };
    await until('the daemon', 240_000, () => get('/dataplane').then((x) => x.passes >= 1, () => false));

    // The other nodes, as their own daemons would leave the store: blocks (two for win-b) and published facts.
    for (const [name, n] of Object.entries(remote)) {
      await ipam.setHost({ name, os: 'windows', labels: {} });
      const count = name === 'win-b' ? 14 : 3; // a first Windows /28 holds 12 pods: win-b spills into a second block
      for (let i = 0; i < count; i++) {
        const ip = (await ipam.autoAssign({ host: name, handle: `${name}-pod${i}`, num4: 1 })).ipv4[0].ip;
        const o = ip.split('.').map(Number);
        n.blocks.add(`10.244.0.${o[3] & ~15}/28`);
      }
      await store.put(ourVtepLayout.key(name), JSON.stringify({ providerAddress: n.pa, drMac: n.mac }));
    }
    t.equal(remote['win-b'].blocks.size, 2, 'win-b has two blocks');

    // A pod on win-a: its block, the network and the pod's endpoint.
    const ns = sd.addNamespace();
    const add = await runWine(exe.cni, [], {
      stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'vxlan0', type: 'blockspeaker', socket: pipe }),
      env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'a0a0a0a0b1b1', CNI_NETNS: ns, CNI_IFNAME: 'eth0', CNI_PATH: 'C:\\cni' },
      timeoutMs: 180_000,
    });
    t.equal(add.code, 0, `ADD on the overlay node: ${add.stdout}${add.stderr.slice(-500)}`);

    const want = Object.values(remote).flatMap((n) => [...n.blocks].map((b) => ({ DestinationPrefix: b, IsolationId: 4097, ProviderAddress: n.pa, DistributedRouterMacAddress: n.mac })));
    const sortKey = (x: Json) => x.DestinationPrefix;
    const rsr = () => {
      const net = sd.state.networks.find((n: Json) => n.Name === 'vxlan0') as Json;
      return ((net?.Policies ?? []) as Json[]).filter((p) => p.Type === 'RemoteSubnetRoute').map((p) => p.Settings).sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : 1));
    };
    await until('a RemoteSubnetRoute per remote block', 60_000, () => rsr().length >= want.length);
    t.same(rsr(), want.sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : 1)), 'exactly one per remote block, with its node\'s PA and MAC');
    const net = sd.state.networks.find((n: Json) => n.Name === 'vxlan0') as Json;
    t.equal(net.Type, 'Overlay');
    t.ok((net.Policies as Json[]).some((p) => p.Type === 'HostRoute'), 'and the HostRoute policy');
    const ep = sd.state.endpoints.find((e) => e.namespace?.toLowerCase() === ns.toLowerCase());
    t.ok(ep, 'the pod\'s endpoint, attached to its namespace');
    // `passes` counts passes started and `lastPlan` is the last one finished, so a pass begun before this point may
    // still finish with the ops that built the routes above: wait for a settled pass, then for one wholly after it
    // (its `at` is when it started; the daemon under wine reads the same clock). Periodic passes are 30 s apart.
    await until('a pass that plans nothing', 60_000, async () => (await get('/dataplane')).lastPlan?.ops === 0);
    const calls = sd.calls.length;
    const since = Date.now();
    await until('a whole pass after that', 120_000, async () => ((await get('/dataplane')).lastPlan?.at ?? 0) > since);
    t.equal((await get('/dataplane')).lastPlan.ops, 0, 'steady: a later pass plans nothing');
    t.notOk(sd.calls.slice(calls).some((c) => /^HcnModifyNetwork|^HcnCreate/.test(c.fn)), 'and sends nothing');
  });
}
