// A CNI ADD whose address lies in a freshly claimed block answers only once HNS holds that block's ip-subnet: at the
// moment each result comes back, the fake already has an IpSubnet containing the address (win-bridge can create
// the endpoint at once). Waits are counted. When HNS cannot take the ip-subnet, the ADD fails after the bounded
// wait with CNI code 11 (try again later), the address goes back, and the timeout is counted.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { parseConfig } from '../../src/config/config.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import { subnetsOf } from '../../src/hns/model.ts';
import { runCni } from '../../src/cni/plugin.ts';
import { parseIP, parsePrefix, prefixContainsIP } from '../../src/net/ip.ts';

const dir = mkdtempSync(join(tmpdir(), `bs-hns-wait-${process.pid}-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

async function start(t: { teardown(fn: () => unknown): void }, name: string, fake: FakeHns, waitMs?: number) {
  const sock = join(dir, `${name}.sock`);
  const file = join(dir, `${name}.yaml`);
  const text = `
node: { name: ${name}, os: windows }
ipam:
  store: ${join(dir, `${name}-store`)}
  pools: [{ name: p4, cidr: 10.244.0.0/24, blockSize: 28 }]
dataplane: { kind: hns, mode: l2bridge, network: cbr0, adapter: Ethernet }
status: { listen: "127.0.0.1:0" }
ipc: { path: ${sock} }
`;
  writeFileSync(file, text);
  const d = new Daemon({ file, config: parseConfig(text, file), log: pino({ level: 'silent' }), version: 'test', fakeHns: fake, hnsSubnetWaitMs: waitMs });
  await d.start();
  t.teardown(() => d.stop({ restart: false } as never));
  const add = (id: string) => runCni({
    env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: 'none', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' },
    stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'cbr0', type: 'win-bridge', ipam: { type: 'blockspeaker-cni', socket: sock } }),
  });
  const get = async (path: string) => (await fetch(`http://127.0.0.1:${d.status.address()!.port}${path}`)).text();
  return { d, add, get };
}

t.test('every ADD returns with its ip-subnet already in HNS, across three blocks', async (t) => {
  const fake = new FakeHns();
  const { add, get } = await start(t, 'win-w', fake);
  const blocks = new Set<string>();
  let i = 0;
  while (blocks.size < 3 && i < 48) {
    const out = await add(`pod${i++}`);
    t.equal(out.exitCode, 0, out.stdout);
    const ip = parseIP(JSON.parse(out.stdout).ips[0].address.split('/')[0]);
    const net = fake.networkByName('cbr0');
    const held = net ? subnetsOf(net).flatMap((s) => s.IpSubnets ?? []).map((x) => x.IpAddressPrefix) : [];
    const mine = held.find((p) => prefixContainsIP(parsePrefix(p), ip));
    if (!mine) {
      t.fail(`${ip}: no ip-subnet holds it when the result came back (HNS has ${held.join(', ')})`);
      break;
    }
    blocks.add(mine);
  }
  t.equal(blocks.size, 3, 'three blocks, each programmed before its first pod got its address');
  const w = JSON.parse(await get('/dataplane')).subnetWaits;
  t.ok(w.waited >= 1, `fresh blocks waited (${JSON.stringify(w)})`);
  t.equal(w.waited + w.ready, i, 'every ADD counted once');
  t.equal(w.timeouts, 0);
  t.equal(w.waiting, 0);
  t.match(await get('/metrics'), new RegExp(`blockspeaker_hns_cni_subnet_waits_total ${w.waited}\\b`));
});

t.test('HNS refuses the ip-subnet: the ADD fails with code 11 after the bounded wait, nothing left held', async (t) => {
  const fake = new FakeHns({ faults: { random: () => 0, rate: 1 } }); // every change fails; reads work
  const { d, add, get } = await start(t, 'win-x', fake, 300);
  const out = await add('pod-x');
  t.not(out.exitCode, 0);
  const err = JSON.parse(out.stdout);
  t.equal(err.code, 11, 'try again later');
  t.match(err.msg, /HNS has not programmed the ip-subnet of 10\.244\.0\.\d+ within 300 ms/);
  const ipam = (d as unknown as { ipam: { ds: { handle(h: string): Promise<unknown> } } }).ipam;
  t.equal(await ipam.ds.handle('pod-x.eth0'), undefined, 'the address went back');
  const w = JSON.parse(await get('/dataplane')).subnetWaits;
  t.equal(w.timeouts, 1);
  t.match(await get('/metrics'), /blockspeaker_hns_cni_subnet_wait_timeouts_total 1\b/);
});
