// The real Debian bridge plugin with blockspeaker-cni as its IPAM, in network namespaces this test creates:
// a "node" namespace holding the bridge, pod namespaces attached by the bridge plugin. Pods get their addresses
// from IPAM through the daemon's socket, reach each other and their gateway, and DEL through bridge removes them and
// releases the addresses. A pod whose address is borrowed from another host's block still reaches its gateway:
// that is what the "pool" addressing mode (pool prefix length, node gateway) is for.
//
// Needs root, iproute2, iputils-ping and containernetworking-plugins. With REQUIRE_PEERS=1 (CI) a missing piece fails the test.
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IpcClient } from '../../src/ipc/client.ts';
import { startTestDaemon, type TestDaemon } from '../ipc/fixture.ts';
import { pluginBin, runAsRuntime } from './helpers.ts';
import { missingTools } from '../kit/tools.ts';

const PLUGINS = '/usr/lib/cni';
const require_ = process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true';

function unavailable(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'not root (network namespaces need CAP_SYS_ADMIN)';
  const missing = missingTools(['ip', 'ping', 'bridge', 'loopback', 'host-local']);
  return missing.length ? missing.join('; ') : null;
}

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run a command as the container runtime would (see runAsRuntime): the daemon in this process keeps answering. */
function run(cmd: string, args: string[], opts: { env?: Record<string, string>; stdin?: string } = {}): Promise<Out> {
  return runAsRuntime(cmd, args, opts.env ?? {}, opts.stdin ?? '');
}

async function must(cmd: string, args: string[], opts: { env?: Record<string, string>; stdin?: string } = {}): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}): ${r.stdout}${r.stderr}`);
  return r.stdout;
}

async function main(): Promise<void> {
  const tag = `bs-cni-${process.pid}`;
  const nsNames: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'bs-cni-bridge-'));
  const cniPath = join(dir, 'bin');
  mkdirSync(cniPath);
  // The runtime's CNI_PATH: our plugin next to Debian's.
  for (const p of ['bridge', 'loopback', 'host-local']) symlinkSync(join(PLUGINS, p), join(cniPath, p));
  symlinkSync(pluginBin, join(cniPath, 'blockspeaker-cni'));

  const listeners: { kill(): void }[] = [];
  let d: TestDaemon | undefined;
  t.teardown(async () => {
    for (const l of listeners) l.kill();
    for (const n of nsNames) spawnSync('ip', ['netns', 'del', n]);
    await d?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function netns(suffix: string): Promise<string> {
    const name = `${tag}-${suffix}`;
    spawnSync('ip', ['netns', 'del', name]); // a leftover of this very pid
    await must('ip', ['netns', 'add', name]);
    nsNames.push(name);
    await must('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    return name;
  }

  d = await startTestDaemon({
    dir,
    pools: [
      { name: 'pods', cidr: '10.99.0.0/24', blockSize: 26 },
      { name: 'pods6', cidr: 'fd00:99::/120', blockSize: 122 },
      { name: 'small', cidr: '10.98.0.0/27', blockSize: 28 },
    ],
    hosts: [
      { name: 'node-a', os: 'linux', labels: {} },
      { name: 'node-b', os: 'linux', labels: {} },
    ],
  });
  const daemon = d;
  const node = await netns('node');

  // A tiny TCP echo listener in a namespace (dual stack), so reachability is checked end to end even where
  // ping(8) is not installed; ping is used as well when it is.
  const port = 7070;
  function listen(ns: string): void {
    const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', 'ip', 'netns', 'exec', ns, process.execPath, '-e',
      `require('net').createServer((s) => s.end('pong')).listen(${port}, '::')`], { stdio: 'ignore' });
    listeners.push({ kill: () => child.kill('SIGKILL') });
  }
  async function tcpReach(fromNs: string, addr: string): Promise<boolean> {
    const code = `const s = require('net').connect({host: ${JSON.stringify(addr)}, port: ${port}}); let got = '';
      s.on('data', (b) => got += b); s.on('end', () => process.exit(got === 'pong' ? 0 : 2)); s.on('error', () => process.exit(3));
      setTimeout(() => process.exit(4), 3000);`;
    return (await run('ip', ['netns', 'exec', fromNs, process.execPath, '-e', code])).code === 0;
  }
  async function ping(fromNs: string, addr: string): Promise<boolean> {
    return (await run('ip', ['netns', 'exec', fromNs, 'ping', '-c', '1', '-W', '2', addr])).code === 0;
  }
  async function reaches(t: Test, fromNs: string, addr: string, what: string): Promise<void> {
    // The listener may still be starting: give it a moment.
    let ok = false;
    for (let i = 0; i < 20 && !ok; i++) {
      ok = await tcpReach(fromNs, addr);
      if (!ok) await new Promise((r) => setTimeout(r, 150));
    }
    t.ok(ok, `${what}: TCP to ${addr}`);
    t.ok(await ping(fromNs, addr), `${what}: ping ${addr}`);
  }
  listen(node);

  function bridgeConf(bridge: string, ipam: Record<string, unknown>): string {
    return JSON.stringify({
      cniVersion: '1.0.0',
      name: 'bsnet',
      type: 'bridge',
      bridge,
      isGateway: true,
      ipMasq: false,
      ipam: { type: 'blockspeaker-cni', socket: daemon.path, ...ipam },
    });
  }
  function bridge(cmd: 'ADD' | 'DEL' | 'CHECK', pod: string, conf: string): Promise<Out> {
    return run('ip', ['netns', 'exec', node, join(cniPath, 'bridge')], {
      env: { CNI_COMMAND: cmd, CNI_CONTAINERID: `ctr-${pod}`, CNI_NETNS: `/var/run/netns/${pod}`, CNI_IFNAME: 'eth0', CNI_PATH: cniPath },
      stdin: conf,
    });
  }
  const handles = async (): Promise<Record<string, string[]>> => {
    const c = new IpcClient(daemon.path);
    try {
      return Object.fromEntries((await c.call('ipam.handles', {})).handles.map((h) => [h.handle, h.ips]));
    } finally {
      await c.close();
    }
  };
  const addrs = async (ns: string, dev: string): Promise<string[]> => {
    const j = JSON.parse(await must('ip', ['-n', ns, '-j', 'addr', 'show', 'dev', dev])) as { addr_info: { local: string; prefixlen: number; scope: string }[] }[];
    return j[0]!.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`);
  };

  await t.test('two pods on one bridge: addresses from IPAM, reachable, DEL releases', async (t) => {
    const conf = bridgeConf('bs0', { num4: 1, num6: 1, pools: ['pods', 'pods6'], routes: [{ dst: '0.0.0.0/0' }] });
    const pods = [await netns('p1'), await netns('p2')];
    const results: { ips: { address: string; gateway: string }[] }[] = [];
    for (const pod of pods) {
      const r = await bridge('ADD', pod, conf);
      t.equal(r.code, 0, `bridge ADD ${pod}: ${r.stdout}${r.stderr}`);
      results.push(JSON.parse(r.stdout) as { ips: { address: string; gateway: string }[] });
      listen(pod);
    }
    const gw4 = results[0]!.ips[0]!.gateway;
    const gw6 = results[0]!.ips[1]!.gateway;
    t.match(results.map((r) => r.ips.map((i) => i.address)), [[/^10\.99\.0\.\d+\/24$/, /^fd00:99::[0-9a-f]+\/120$/], [/^10\.99\.0\.\d+\/24$/, /^fd00:99::[0-9a-f]+\/120$/]]);
    t.equal(results[1]!.ips[0]!.gateway, gw4, 'one gateway for every pod of the node');
    const bridgeAddrs = await addrs(node, 'bs0');
    t.ok(bridgeAddrs.includes(`${gw4}/24`) && bridgeAddrs.includes(`${gw6}/120`), `the bridge holds the node gateway: ${bridgeAddrs.join(' ')}`);
    for (const [i, pod] of pods.entries()) {
      t.same((await addrs(pod, 'eth0')).sort(), results[i]!.ips.map((x) => x.address).sort(), `${pod} has its addresses on eth0`);
    }
    const held = await handles();
    t.same(held[`ctr-${pods[0]}.eth0`]?.length, 2, 'the handle holds the v4 and v6 address');

    const ip = (i: number, fam: number) => results[i]!.ips[fam]!.address.split('/')[0]!;
    await reaches(t, pods[0]!, gw4, 'pod 1 to its gateway');
    await reaches(t, pods[1]!, gw6, 'pod 2 to its IPv6 gateway');
    await reaches(t, pods[0]!, ip(1, 0), 'pod 1 to pod 2');
    await reaches(t, pods[1]!, ip(0, 0), 'pod 2 to pod 1');
    await reaches(t, pods[0]!, ip(1, 1), 'pod 1 to pod 2 over IPv6');
    await reaches(t, node, ip(0, 0), 'the node to pod 1');

    const chk = await bridge('CHECK', pods[0]!, JSON.stringify({ ...JSON.parse(conf), prevResult: results[0] }));
    t.equal(chk.code, 0, `bridge CHECK (IPAM CHECK inside): ${chk.stdout}${chk.stderr}`);

    for (const pod of pods) {
      const r = await bridge('DEL', pod, conf);
      t.equal(r.code, 0, `bridge DEL ${pod}: ${r.stdout}${r.stderr}`);
      const links = await must('ip', ['-n', pod, '-o', 'link']);
      t.notMatch(links, /eth0/, `${pod}'s eth0 is gone`);
    }
    const after = await handles();
    t.notOk(after[`ctr-${pods[0]}.eth0`] || after[`ctr-${pods[1]}.eth0`], 'addresses released');
    t.ok(after['blockspeaker-gateway.node-a.pods'], 'the node gateway stays (it is on the bridge)');
    const again = await bridge('DEL', pods[0]!, conf);
    t.equal(again.code, 0, 'DEL again is fine');
  });

  await t.test('a pod with an address borrowed from another host\'s block still reaches its gateway', async (t) => {
    const conf = bridgeConf('bs1', { num4: 1, pools: ['small'], routes: [{ dst: '0.0.0.0/0' }] });
    // Pool "small" has two /28 blocks: node-b takes one, node-a the other (with its first pod and its gateway).
    await daemon.ipam.autoAssign({ host: 'node-b', num4: 1, handle: 'node-b-pod', pools: ['small'] });
    const q1 = await netns('q1');
    const r1 = await bridge('ADD', q1, conf);
    t.equal(r1.code, 0, `bridge ADD q1: ${r1.stdout}${r1.stderr}`);
    listen(q1);
    const res1 = JSON.parse(r1.stdout) as { ips: { address: string; gateway: string }[] };
    const [blockA] = await daemon.ipam.blocks('node-a').then((bs) => bs.filter((b) => b.pool === 'small'));
    t.ok(blockA, 'node-a claimed a block in pool small');
    // Fill node-a's block, so the next pod must borrow (the pool has no free block left to claim).
    const fill = await daemon.ipam.autoAssign({ host: 'node-a', num4: blockA!.free, handle: 'filler', pools: ['small'] });
    t.equal(fill.ipv4.length, blockA!.free);

    const q2 = await netns('q2');
    const r2 = await bridge('ADD', q2, conf);
    t.equal(r2.code, 0, `bridge ADD q2: ${r2.stdout}${r2.stderr}`);
    const res2 = JSON.parse(r2.stdout) as { ips: { address: string; gateway: string }[] };
    listen(q2);
    const ip2 = res2.ips[0]!.address.split('/')[0]!;
    const owner = (await daemon.ipam.blocks()).find((b) => b.pool === 'small' && b.affinity !== 'node-a');
    t.equal(owner?.affinity, 'node-b');
    const c = new IpcClient(daemon.path);
    const held = (await c.call('ipam.handles', {})).handles.find((h) => h.handle === `ctr-${q2}.eth0`);
    await c.close();
    t.same(held?.ips, [ip2]);
    t.match(owner!.cidr, /^10\.98\.0\.(0|16)\/28$/);
    t.not(owner!.cidr, blockA!.cidr);
    t.match(res2.ips[0]!.address, /\/27$/, 'the pool\'s prefix length, not the block\'s');
    t.equal(res2.ips[0]!.gateway, res1.ips[0]!.gateway, 'the same node gateway as the pod in node-a\'s own block');
    const inB = (await daemon.ipam.blocks('node-b'))[0]!;
    t.ok(ip2.startsWith('10.98.0.') && (inB.cidr === '10.98.0.0/28' ? Number(ip2.split('.')[3]) < 16 : Number(ip2.split('.')[3]) >= 16), `${ip2} is inside node-b's block ${inB.cidr}: borrowed`);

    await reaches(t, q2, res2.ips[0]!.gateway, 'borrowed pod to its gateway');
    await reaches(t, q2, res1.ips[0]!.address.split('/')[0]!, 'borrowed pod to the pod in the node\'s own block');
    await reaches(t, q1, ip2, 'own-block pod to the borrowed pod');

    const del = await bridge('DEL', q2, conf);
    t.equal(del.code, 0, `bridge DEL q2: ${del.stdout}${del.stderr}`);
    t.notOk((await handles())[`ctr-${q2}.eth0`], 'the borrowed address is released');
    await bridge('DEL', q1, conf);
  });

  await t.test('host mode: /32 with a link-scoped route to the gateway, applied as a CNI 1.1 main plugin would', async (t) => {
    // Debian's plugins (1.1.1) predate CNI 1.1's route "scope": their ConfigureIface turns a route without gw into
    // "via <gateway>", which the kernel refuses for a gateway that is not on-link. So the result is applied with
    // ip(8) the way a 1.1-aware ptp-style plugin does: a veth per pod, the gateway on the host side, a host route.
    const node2 = await netns('node2');
    await must('ip', ['netns', 'exec', node2, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    listen(node2);
    const conf = JSON.stringify({ cniVersion: '1.1.0', name: 'bshost', type: 'ptp', ipam: { type: 'blockspeaker-cni', socket: daemon.path, prefix: 'host', pools: ['small'], routes: [{ dst: '0.0.0.0/0' }] } });
    const pods: { ns: string; ip: string; gw: string }[] = [];
    for (const [i, name] of ['h1', 'h2'].entries()) {
      const ns = await netns(name);
      const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: `ctr-${ns}`, CNI_NETNS: `/var/run/netns/${ns}`, CNI_IFNAME: 'eth0', CNI_PATH: cniPath };
      const r = await run(join(cniPath, 'blockspeaker-cni'), [], { env, stdin: conf });
      t.equal(r.code, 0, `IPAM ADD ${ns}: ${r.stdout}${r.stderr}`);
      const res = JSON.parse(r.stdout) as { ips: { address: string; gateway: string }[]; routes: { dst: string; gw?: string; scope?: number }[] };
      const [ip, len] = res.ips[0]!.address.split('/');
      const gw = res.ips[0]!.gateway;
      t.equal(len, '32');
      t.same(res.routes[0], { dst: `${gw}/32`, scope: 253 });
      const hv = `hv${i}`;
      await must('ip', ['-n', node2, 'link', 'add', hv, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      await must('ip', ['-n', node2, 'link', 'set', hv, 'up']);
      await must('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      await must('ip', ['-n', ns, 'addr', 'add', `${ip}/32`, 'dev', 'eth0']);
      for (const rt of res.routes) {
        await must('ip', ['-n', ns, 'route', 'add', rt.dst, ...(rt.gw ? ['via', rt.gw] : []), 'dev', 'eth0', ...(rt.scope === 253 ? ['scope', 'link'] : [])]);
      }
      await must('ip', ['-n', node2, 'addr', 'add', `${gw}/32`, 'dev', hv]);
      await must('ip', ['-n', node2, 'route', 'add', `${ip}/32`, 'dev', hv]);
      listen(ns);
      pods.push({ ns, ip: ip!, gw });
    }
    const bBlock = (await daemon.ipam.blocks('node-b')).find((b) => b.pool === 'small')!;
    const base = Number(bBlock.cidr.split('/')[0]!.split('.')[3]);
    const inB = (ip: string) => Number(ip.split('.')[3]) >= base && Number(ip.split('.')[3]) < base + 16;
    t.ok(pods.some((p) => inB(p.ip)), `a host-mode pod borrowed its address from node-b's block ${bBlock.cidr} (${pods.map((p) => p.ip).join(', ')})`);
    await reaches(t, pods[0]!.ns, pods[0]!.gw, 'host-mode pod 1 to its gateway');
    await reaches(t, pods[1]!.ns, pods[1]!.gw, 'host-mode pod 2 to its gateway');
    await reaches(t, pods[0]!.ns, pods[1]!.ip, 'host-mode pod 1 to pod 2, routed by the node');
    await reaches(t, node2, pods[1]!.ip, 'the node to host-mode pod 2');
    for (const p of pods) {
      const r = await run(join(cniPath, 'blockspeaker-cni'), [], { env: { CNI_COMMAND: 'DEL', CNI_CONTAINERID: `ctr-${p.ns}`, CNI_IFNAME: 'eth0', CNI_PATH: cniPath }, stdin: conf });
      t.equal(r.code, 0, `IPAM DEL ${p.ns}`);
    }
    const left = await handles();
    t.notOk(pods.some((p) => left[`ctr-${p.ns}.eth0`]), 'released');
  });
}

const why = unavailable();
if (why && require_) {
  t.fail(`the bridge plugin test cannot run: ${why} (REQUIRE_PEERS is set, so this is a failure)`);
} else if (why) {
  t.plan(0, `bridge plugin test: ${why}`);
} else {
  await main();
}
