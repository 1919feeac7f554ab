// blockspeaker-cni spawned exactly as a runtime runs it (env + stdin), against an in-test daemon: a real Ipam on a
// temporary file store behind the real IPC server. Every command, every error path with its code; as IPAM plugin
// and as the main plugin (the daemon's cni.* methods over an in-memory HCN).
import t, { type Test } from 'tap';
import { join } from 'node:path';
import { IpcClient } from '../../src/ipc/client.ts';
import type { StatusReply } from '../../src/ipc/protocol.ts';
import { startTestDaemon, type TestDaemon } from '../ipc/fixture.ts';
import { ipamHandlers } from '../../src/ipc/ipam.ts';
import { ipamPools, networkByName, windowsCniHandlers } from '../../src/daemon/cni-windows.ts';
import { HcnDouble } from '../daemon/hcn-double.ts';
import { cniEnv, errorProblems, resultProblems, runPlugin, type CniRun } from './helpers.ts';

function conf(d: TestDaemon | string, ipam: Record<string, unknown> = {}, top: Record<string, unknown> = {}): Record<string, unknown> {
  const socket = typeof d === 'string' ? d : d.path;
  return { cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'bridge', ipam: { type: 'blockspeaker-cni', socket, ...ipam }, ...top };
}

async function handles(d: TestDaemon, attrs?: Record<string, string>): Promise<Record<string, string[]>> {
  const c = new IpcClient(d.path);
  try {
    const r = await c.call('ipam.handles', attrs ? { attrs } : {});
    return Object.fromEntries(r.handles.map((h) => [h.handle, h.ips]));
  } finally {
    await c.close();
  }
}

function expectError(t: Test, r: CniRun, code: number, msg: RegExp | string): void {
  t.not(r.code, 0, 'non-zero exit');
  t.same(errorProblems(r.json), [], `a spec error object: ${r.stdout.trim()}`);
  t.equal(r.json?.code, code, `code ${code}`);
  if (typeof msg === 'string') t.equal(r.json?.msg, msg);
  else t.match(r.json?.msg, msg);
}

t.test('VERSION', async (t) => {
  const [a, b, c] = await Promise.all([
    runPlugin({ CNI_COMMAND: 'VERSION' }, { cniVersion: '0.4.0' }),
    runPlugin({ CNI_COMMAND: 'VERSION' }, ''),
    runPlugin({ CNI_COMMAND: 'VERSION' }, { cniVersion: '9.9.9' }),
  ]);
  t.equal(a.code, 0);
  t.same(a.json, { cniVersion: '0.4.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
  t.equal(b.json.cniVersion, '1.1.0', 'no config: the latest');
  t.equal(c.json.cniVersion, '1.1.0');
});

t.test('ADD, retried ADD, CHECK, DEL, DEL again', async (t) => {
  const d = await startTestDaemon({ pools: [{ name: 'pods', cidr: '10.99.0.0/24', blockSize: 26 }, { name: 'pods6', cidr: 'fd00:99::/120', blockSize: 122 }] });
  t.teardown(() => d.close());
  const cfg = conf(d, { num4: 1, num6: 1, routes: [{ dst: '0.0.0.0/0' }], dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] } });
  const env = cniEnv('ADD', 'ctr-1', { CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=ctr-1' });
  const add = await runPlugin(env, cfg);
  t.equal(add.code, 0, add.stdout + add.stderr);
  t.same(resultProblems(add.json, '1.0.0'), [], 'result conforms to CNI 1.0.0');
  const gw = (await new IpcClient(d.path).call('ipam.gateway', { family: 4 })).ip;
  t.match(add.json.ips[0], { address: /^10\.99\.0\.\d+\/24$/, gateway: gw });
  t.match(add.json.ips[1], { address: /^fd00:99::[0-9a-f]+\/120$/, gateway: /^fd00:99::/ });
  t.same(add.json.routes.map((r: { dst: string }) => r.dst), ['10.99.0.0/25', '10.99.0.128/25', 'fd00:99::/121', 'fd00:99::80/121', '0.0.0.0/0']);
  t.same(add.json.dns, { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] });
  const held = await handles(d, { 'cni.network': 'k8s-pod-network' });
  t.same(Object.keys(held), ['ctr-1.eth0'], 'handle = container ID + interface');

  const c = new IpcClient(d.path);
  t.teardown(() => c.close());
  const attrs = (await c.call('ipam.handles', {})).handles.find((h) => h.handle === 'ctr-1.eth0')!.attrs;
  t.same(attrs, { 'cni.network': 'k8s-pod-network', 'cni.containerID': 'ctr-1', 'cni.ifname': 'eth0', 'k8s.namespace': 'default', 'k8s.pod': 'web-0' });

  const retry = await runPlugin(env, cfg);
  t.equal(retry.code, 0);
  t.same(retry.json, add.json, 'a retried ADD gets the same addresses');
  t.equal((await d.ipam.blocks()).reduce((n, b) => n + b.allocated, 0), 4, 'pod v4 + v6, gateway v4 + v6: nothing more');

  const check = await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: add.json });
  t.equal(check.code, 0, check.stdout);
  t.equal(check.stdout, '', 'CHECK prints nothing on success');
  const wrong = structuredClone(add.json);
  wrong.ips[0].address = '10.99.0.250/24';
  expectError(t, await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: wrong }), 101, /not held: 10\.99\.0\.250; held but not in prevResult: 10\.99\.0\./);
  expectError(t, await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, cfg), 7, 'CHECK needs "prevResult" in the network configuration');

  const del = await runPlugin({ ...env, CNI_COMMAND: 'DEL' }, cfg);
  t.equal(del.code, 0, del.stdout);
  t.equal(del.stdout, '');
  t.same(await handles(d, { 'cni.network': 'k8s-pod-network' }), {}, 'released');
  const del2 = await runPlugin({ ...env, CNI_COMMAND: 'DEL', CNI_NETNS: undefined }, cfg);
  t.equal(del2.code, 0, 'DEL again (and without CNI_NETNS) succeeds');
  const delUnknown = await runPlugin(cniEnv('DEL', 'never-added'), cfg);
  t.equal(delUnknown.code, 0, 'DEL of an unknown container succeeds');
  expectError(t, await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: add.json }), 101, /not held/);
});

t.test('result format per version: 0.4.0 (ips carry version), 1.1.0 (route scope)', async (t) => {
  const d = await startTestDaemon();
  t.teardown(() => d.close());
  const [v04, v11, v11host] = await Promise.all([
    runPlugin(cniEnv('ADD', 'old-1'), conf(d, {}, { cniVersion: '0.4.0' })),
    runPlugin(cniEnv('ADD', 'new-1'), conf(d, {}, { cniVersion: '1.1.0' })),
    runPlugin(cniEnv('ADD', 'host-1'), conf(d, { prefix: 'host' }, { cniVersion: '1.1.0' })),
  ]);
  t.equal(v04.code, 0, v04.stdout);
  t.same(resultProblems(v04.json, '0.4.0'), []);
  t.equal(v04.json.ips[0].version, '4');
  t.same(resultProblems(v11.json, '1.1.0'), []);
  t.same(resultProblems(v11host.json, '1.1.0'), []);
  t.match(v11host.json.ips[0].address, /\/32$/);
  t.same(v11host.json.routes[0], { dst: `${v11host.json.ips[0].gateway}/32`, scope: 253 }, 'host mode: a link-scoped route to the gateway');
  const v10host = await runPlugin(cniEnv('ADD', 'host-2'), conf(d, { prefix: 'host' }));
  t.same(resultProblems(v10host.json, '1.0.0'), [], '1.0.0 drops the scope field');
});

t.test('GC releases this network\'s attachments that are not valid, nothing else', async (t) => {
  const d = await startTestDaemon();
  t.teardown(() => d.close());
  const k8s = conf(d, {}, { cniVersion: '1.1.0' });
  const other = conf(d, {}, { cniVersion: '1.1.0', name: 'storage' });
  const adds = await Promise.all([
    runPlugin(cniEnv('ADD', 'keep'), k8s),
    runPlugin(cniEnv('ADD', 'leaked'), k8s),
    runPlugin(cniEnv('ADD', 'keep', { CNI_IFNAME: 'net1' }), other),
  ]);
  for (const a of adds) t.equal(a.code, 0, a.stdout);
  const gcEnv = { CNI_COMMAND: 'GC', CNI_PATH: '/usr/lib/cni' };
  const gc = await runPlugin(gcEnv, { ...k8s, 'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'eth0' }] });
  t.equal(gc.code, 0, gc.stdout);
  t.equal(gc.stdout, '');
  const left = await handles(d);
  t.ok(left['keep.eth0'], 'valid attachment kept');
  t.notOk(left['leaked.eth0'], 'stale attachment released');
  t.ok(left['keep.net1'], 'another network\'s attachment untouched');
  t.ok(left['blockspeaker-gateway.node-a.pods'], 'the node gateway untouched');
  expectError(t, await runPlugin(gcEnv, conf(d)), 1, 'config version 1.0.0 does not allow GC (1.1.0 or later)');
  expectError(t, await runPlugin(gcEnv, { ...k8s, 'cni.dev/valid-attachments': [{ containerID: 1 }] }), 7, 'cni.dev/valid-attachments[0] must be {containerID, ifname}');
});

t.test('STATUS: ready, no addresses (50), daemon down (50), limited connectivity (51)', async (t) => {
  const d = await startTestDaemon({ pools: [{ name: 'tiny', cidr: '10.98.0.0/30', blockSize: 30 }] });
  t.teardown(() => d.close());
  const stEnv = { CNI_COMMAND: 'STATUS', CNI_PATH: '/usr/lib/cni' };
  const ok = await runPlugin(stEnv, conf(d, {}, { cniVersion: '1.1.0' }));
  t.equal(ok.code, 0, ok.stdout);
  t.equal(ok.stdout, '');
  await d.ipam.autoAssign({ host: 'node-a', num4: 4, handle: 'filler' });
  expectError(t, await runPlugin(stEnv, conf(d, {}, { cniVersion: '1.1.0' })), 50, 'no IPv4 addresses to give on node-a: pools tiny have no free address for this node');
  const missing = join(d.dir, 'gone.sock');
  expectError(t, await runPlugin(stEnv, conf(missing, {}, { cniVersion: '1.1.0' })), 50, `STATUS: blockspeaker daemon is not running (no socket at ${missing})`);
  d.server.register('status', (): StatusReply => ({ pid: process.pid, uptimeSeconds: 1, methods: [], limitedConnectivity: true, reason: 'no BGP peer is established' }));
  expectError(t, await runPlugin(stEnv, conf(d, {}, { cniVersion: '1.1.0' })), 51, 'blockspeaker daemon reports limited connectivity: no BGP peer is established');
  expectError(t, await runPlugin(stEnv, conf(d)), 1, 'config version 1.0.0 does not allow STATUS (1.1.0 or later)');
});

t.test('error paths and their codes', async (t) => {
  const d = await startTestDaemon({
    pools: [{ name: 'pods', cidr: '10.99.0.0/24', blockSize: 26 }, { name: 'workload-only', cidr: '10.96.0.0/24', allowedUses: ['Workload'] }],
  });
  t.teardown(() => d.close());
  const good = conf(d);
  const missingSock = join(d.dir, 'nothing-here.sock');
  const cases: [string, Record<string, string | undefined>, string | object, number, RegExp | string][] = [
    ['no CNI_COMMAND', { ...cniEnv('ADD', 'e1'), CNI_COMMAND: undefined }, good, 4, 'CNI_COMMAND is not set (ADD, DEL, CHECK, VERSION, GC or STATUS)'],
    ['unknown command', cniEnv('FROB', 'e1'), good, 4, 'unknown CNI_COMMAND "FROB" (ADD, DEL, CHECK, VERSION, GC or STATUS)'],
    ['missing env', { CNI_COMMAND: 'ADD', CNI_PATH: '/x' }, good, 4, 'required environment variables missing for ADD: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME'],
    ['bad container id', cniEnv('ADD', '-bad id'), good, 4, /CNI_CONTAINERID "-bad id" is not valid/],
    ['bad ifname', cniEnv('ADD', 'e1', { CNI_IFNAME: 'a/b' }), good, 4, 'CNI_IFNAME "a/b" is not a valid interface name'],
    ['long ifname', cniEnv('ADD', 'e1', { CNI_IFNAME: 'abcdefghijklmnop' }), good, 4, 'CNI_IFNAME "abcdefghijklmnop" is longer than 15 characters'],
    ['empty stdin', cniEnv('ADD', 'e1'), '', 6, 'no network configuration on stdin'],
    ['not JSON', cniEnv('ADD', 'e1'), '{"cniVersion": ', 6, /^network configuration on stdin is not JSON/],
    ['JSON array', cniEnv('ADD', 'e1'), '[1]', 6, 'network configuration on stdin must be a JSON object'],
    ['old version', cniEnv('ADD', 'e1'), { ...good, cniVersion: '0.2.0' }, 1, /incompatible CNI versions: config is "0.2.0", plugin supports/],
    ['no version', cniEnv('ADD', 'e1'), { name: 'n', ipam: { type: 'blockspeaker-cni' } }, 1, /config is "0.1.0"/],
    ['CHECK on 0.3.1', cniEnv('CHECK', 'e1'), { ...good, cniVersion: '0.3.1' }, 1, 'config version 0.3.1 does not allow CHECK (0.4.0 or later)'],
    ['no ipam', cniEnv('ADD', 'e1'), { cniVersion: '1.0.0', name: 'n', type: 'bridge' }, 7, 'network configuration has no "ipam" object'],
    ['no name', cniEnv('ADD', 'e1'), { cniVersion: '1.0.0', ipam: {} }, 7, 'network configuration has no "name"'],
    ['bad num4', cniEnv('ADD', 'e1'), conf(d, { num4: 'two' }), 7, 'ipam.num4 must be a whole number from 0 to 16'],
    ['nothing asked', cniEnv('ADD', 'e1'), conf(d, { num4: 0 }), 7, 'ipam.num4 and ipam.num6 are both 0: nothing to assign'],
    ['bad route', cniEnv('ADD', 'e1'), conf(d, { routes: [{ dst: '0.0.0.0' }] }), 7, 'ipam.routes[0].dst must be a CIDR such as "0.0.0.0/0"'],
    ['bad gateway', cniEnv('ADD', 'e1'), conf(d, { gateway: 'router' }), 7, /ipam.gateway must be "auto", "none", an address/],
    ['bad prefix', cniEnv('ADD', 'e1'), conf(d, { prefix: 'block' }), 7, 'ipam.prefix must be "pool" or "host", got "block"'],
    ['unknown pool', cniEnv('ADD', 'e1'), conf(d, { pools: ['nope'] }), 7, 'ADD: pool nope does not exist'],
    ['gateway needs Tunnel', cniEnv('ADD', 'e1'), conf(d, { pools: ['workload-only'] }), 7, /use Tunnel, which the pool does not allow/],
    ['daemon down: ADD', cniEnv('ADD', 'e1'), conf(missingSock), 11, `ADD: blockspeaker daemon is not running (no socket at ${missingSock})`],
    ['daemon down: DEL', cniEnv('DEL', 'e1'), conf(missingSock), 11, `DEL: blockspeaker daemon is not running (no socket at ${missingSock})`],
    ['daemon down: CHECK', cniEnv('CHECK', 'e1'), { ...conf(missingSock), prevResult: { cniVersion: '1.0.0', ips: [] } }, 11, /not running/],
  ];
  // Two at a time: the machine is shared.
  for (let i = 0; i < cases.length; i += 2) {
    const batch = cases.slice(i, i + 2);
    const runs = await Promise.all(batch.map(([, env, stdin]) => runPlugin(env, stdin)));
    batch.forEach(([name, , , code, msg], j) => t.test(name, async (t) => expectError(t, runs[j]!, code, msg)));
  }
  t.same(await handles(d, { 'cni.network': 'k8s-pod-network' }), {}, 'no failed ADD left an address behind');
});

t.test('pools exhausted: code 100 and nothing held', async (t) => {
  const d = await startTestDaemon({ pools: [{ name: 'tiny', cidr: '10.98.0.0/30', blockSize: 30 }] });
  t.teardown(() => d.close());
  await d.ipam.autoAssign({ host: 'node-a', num4: 4, handle: 'filler' });
  expectError(t, await runPlugin(cniEnv('ADD', 'late'), conf(d)), 100, /^ADD: could not assign 1 IPv4 and 0 IPv6 addresses to late\.eth0: /);
  t.same(Object.keys(await handles(d)), ['filler']);
});

// ---- main-plugin mode ("type": "blockspeaker"): the daemon does the HCN work ---------------------------------

/** Problems with a main plugin's ADD result (interfaces present, every ip pointing at interface 0). */
function mainResultProblems(r: any, version: string): string[] {
  const p: string[] = [];
  const { interfaces, ...rest } = r ?? {};
  if (!Array.isArray(interfaces) || interfaces.length !== 1) p.push('one interface expected');
  else {
    const i = interfaces[0];
    if (typeof i.name !== 'string' || !i.name) p.push('interfaces[0].name missing');
    if (typeof i.sandbox !== 'string' || !i.sandbox) p.push('interfaces[0].sandbox missing');
    if (i.mac !== undefined && typeof i.mac !== 'string') p.push('interfaces[0].mac must be a string');
    for (const k of Object.keys(i)) if (!['name', 'mac', 'sandbox', 'mtu', 'socketPath', 'pciID'].includes(k)) p.push(`interfaces[0] unknown field ${k}`);
  }
  for (const [n, ip] of (r?.ips ?? []).entries()) if (ip.interface !== 0) p.push(`ips[${n}].interface must be 0`);
  p.push(...resultProblems(rest, version));
  return p;
}

async function mainDaemon(t: Test, pools?: { name: string; cidr: string; blockSize?: number; natOutgoing?: boolean }[]) {
  const d = await startTestDaemon({ pools, hosts: [{ name: 'node-a', os: 'windows', labels: {} }] });
  t.teardown(() => d.close());
  const hcn = new HcnDouble();
  hcn.addNetwork('cbr0');
  const h = windowsCniHandlers({
    hcn, ipam: ipamHandlers(d.ipam, d.host), network: networkByName(hcn, 'cbr0'), pools: ipamPools(d.ipam, d.host),
    serviceCidr: '10.96.0.0/12', nodeIP: '192.168.10.5', dns: { servers: ['10.96.0.10'] },
  });
  for (const [m, fn] of Object.entries(h)) d.server.register(m, fn);
  const mainConf = (top: Record<string, unknown> = {}) => ({ cniVersion: '1.0.0', name: 'cbr0', type: 'blockspeaker', socket: d.path, capabilities: { portMappings: true, dns: true }, ...top });
  return { d, hcn, mainConf };
}

t.test('main plugin: ADD, retried ADD, CHECK, DEL, DEL again over the daemon\'s cni.* methods', async (t) => {
  const { d, hcn, mainConf } = await mainDaemon(t);
  const ns = hcn.addNamespace();
  const env = cniEnv('ADD', 'ctr-1', { CNI_NETNS: ns.toUpperCase(), CNI_ARGS: 'K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0' });
  const cfg = mainConf({ runtimeConfig: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }], dns: { servers: ['10.96.0.99'], searches: ['default.svc.cluster.local'] } } });
  const add = await runPlugin(env, cfg);
  t.equal(add.code, 0, add.stdout + add.stderr);
  t.same(mainResultProblems(add.json, '1.0.0'), [], `a CNI 1.0.0 main-plugin result: ${add.stdout}`);
  const ep = hcn.endpoints()[0]!;
  t.equal(ep.Name, 'ctr-1_eth0');
  t.same(add.json.interfaces, [{ name: 'eth0', mac: ep.MacAddress, sandbox: ns }]);
  t.match(add.json.ips, [{ interface: 0, address: /^10\.99\.0\.\d+\/24$/, gateway: /^10\.99\.0\.\d+$/ }]);
  t.same(add.json.routes, [{ dst: '0.0.0.0/0', gw: add.json.ips[0].gateway }]);
  t.same(add.json.dns, { nameservers: ['10.96.0.99'], search: ['default.svc.cluster.local'] });
  t.ok((ep.Policies as { Type: string }[]).some((p) => p.Type === 'PortMapping'), 'runtimeConfig.portMappings reached the endpoint');
  t.same(hcn.namespaceEndpoints(ns), [String(ep.ID).toLowerCase()], 'attached to CNI_NETNS');
  t.same(await handles(d, { 'cni.network': 'cbr0' }), { 'ctr-1.eth0': [add.json.ips[0].address.split('/')[0]] });

  const retry = await runPlugin(env, cfg);
  t.same(retry.json, add.json, 'a retried ADD prints the same result');
  t.equal(hcn.endpoints().length, 1);

  const check = await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: add.json });
  t.equal(check.code, 0, check.stdout);
  const wrong = structuredClone(add.json);
  wrong.ips[0].address = '10.99.0.250/24';
  expectError(t, await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: wrong }), 101, /^CHECK ctr-1_eth0: compared with prevResult, it lacks 10\.99\.0\.250/);

  const del = await runPlugin({ ...env, CNI_COMMAND: 'DEL' }, cfg);
  t.equal(del.code, 0, del.stdout);
  t.equal(del.stdout, '');
  t.same(hcn.endpoints(), [], 'endpoint deleted');
  t.same(await handles(d, { 'cni.network': 'cbr0' }), {}, 'addresses released');
  const del2 = await runPlugin({ ...env, CNI_COMMAND: 'DEL', CNI_NETNS: undefined }, cfg);
  t.equal(del2.code, 0, 'DEL again, without CNI_NETNS');
  expectError(t, await runPlugin({ ...env, CNI_COMMAND: 'CHECK' }, { ...cfg, prevResult: add.json }), 101, /no endpoint named ctr-1_eth0/);
});

t.test('main plugin: 0.4.0 and 1.1.0 results, GC, and its error paths', async (t) => {
  const { d, hcn, mainConf } = await mainDaemon(t);
  const v04 = await runPlugin(cniEnv('ADD', 'old-1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ cniVersion: '0.4.0' }));
  t.equal(v04.code, 0, v04.stdout);
  t.same(mainResultProblems(v04.json, '0.4.0'), []);
  t.equal(v04.json.ips[0].version, '4');
  t.same(v04.json.dns, { nameservers: ['10.96.0.10'] }, 'the daemon\'s default DNS');
  const v11 = await runPlugin(cniEnv('ADD', 'new-1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ cniVersion: '1.1.0', dns: { nameservers: ['10.0.0.53'] } }));
  t.same(mainResultProblems(v11.json, '1.1.0'), []);
  t.same(v11.json.dns, { nameservers: ['10.0.0.53'] }, 'the config\'s dns over the daemon\'s');

  const st = await runPlugin({ CNI_COMMAND: 'STATUS', CNI_PATH: '/x' }, mainConf({ cniVersion: '1.1.0' }));
  t.equal(st.code, 0, `STATUS: ${st.stdout}`);
  const gc = await runPlugin({ CNI_COMMAND: 'GC', CNI_PATH: '/x' }, mainConf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [{ containerID: 'new-1', ifname: 'eth0' }] }));
  t.equal(gc.code, 0, gc.stdout);
  t.same(hcn.endpoints().map((e) => e.Name), ['new-1_eth0'], 'GC removed old-1\'s endpoint');
  t.same(Object.keys(await handles(d, { 'cni.network': 'cbr0' })), ['new-1.eth0']);

  expectError(t, await runPlugin(cniEnv('ADD', 'e1'), mainConf()), 4, /^CNI_NETNS "\/var\/run\/netns\/e1" is not an HCN namespace ID \(a GUID\)/);
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: '0b0b0b0b-1111-2222-3333-444455556666' }), mainConf()), 3, /^ADD: namespace 0b0b0b0b-1111-2222-3333-444455556666 does not exist/);
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ name: 'other' })), 7, /^ADD: the network config's name "other" is not this node's HNS network "cbr0"/);
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ runtimeConfig: { portMappings: [{ hostPort: 0, containerPort: 80 }] } })), 7, /^ADD: runtimeConfig\.portMappings\[0\]\.hostPort: must be a port/);
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ num4: 2 })), 7, 'num4 must be 0 or 1 (an endpoint holds one address per family)');
  hcn.failNext('create', 'Endpoint');
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: hcn.addNamespace() }), mainConf()), 11, /^ADD: HNS: injected create Endpoint failure/);
  t.same(Object.keys(await handles(d, { 'cni.network': 'cbr0' })), ['new-1.eth0'], 'no failed ADD left an address behind');

  // A daemon without the main-plugin methods (a Linux node): a config error that says so.
  const plain = await startTestDaemon();
  t.teardown(() => plain.close());
  expectError(t, await runPlugin(cniEnv('ADD', 'e1', { CNI_NETNS: hcn.addNamespace() }), mainConf({ socket: plain.path })), 7, /^ADD: the daemon does not serve blockspeaker as the main plugin/);
  // No ipam section needed; the IPAM role is untouched by the main type existing.
  const ipamRole = await runPlugin(cniEnv('ADD', 'ipam-1'), conf(plain));
  t.equal(ipamRole.code, 0, ipamRole.stdout);
  t.same(resultProblems(ipamRole.json, '1.0.0'), [], 'as IPAM under another main plugin: unchanged');
});
