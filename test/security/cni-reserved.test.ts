// CNI input cannot name the node's own addresses: a container ID in the reserved namespace (blockspeaker-*, the
// handles of the HNS gateway and the parked pool edges) is refused by the plugin, by the IPAM handlers and by the
// Windows CNI handlers, so no pod's DEL releases the node's gateway.
import t from 'tap';
import fc from 'fast-check';
import { runCni } from '../../src/cni/plugin.ts';
import { windowsCniHandlers } from '../../src/daemon/cni-windows.ts';
import { Ipam } from '../../src/ipam/ipam.ts';
import { ipamHandlers } from '../../src/ipc/ipam.ts';
import { RESERVED_HANDLE_PREFIX, isReservedContainerId } from '../../src/ipc/protocol.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { HcnDouble } from '../daemon/hcn-double.ts';

const HOST = 'win-1';

t.test('the plugin refuses a reserved container ID for every command that carries one, before reaching the daemon', async (t) => {
  for (const cmd of ['ADD', 'DEL', 'CHECK']) {
    const out = await runCni({
      env: { CNI_COMMAND: cmd, CNI_CONTAINERID: `blockspeaker-gateway.${HOST}`, CNI_IFNAME: 'p4', CNI_NETNS: 'none', CNI_PATH: '/opt/cni/bin' },
      // A socket nobody listens on: the refusal must come first.
      stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'pods', type: 'bridge', ipam: { type: 'blockspeaker-cni', socket: '/nonexistent/bs.sock' }, prevResult: { ips: [] } }),
    });
    t.equal(out.exitCode, 1, `${cmd} fails`);
    const err = JSON.parse(out.stdout);
    t.equal(err.code, 4, `${cmd}: invalid environment`);
    t.match(err.msg, /starts with blockspeaker-, which names the node's own addresses/);
  }
});

t.test('the IPAM and Windows CNI handlers refuse it too, and assign nothing', async (t) => {
  const ipam = new Ipam(new MemoryStore());
  await ipam.addPool({ name: 'p4', cidr: '10.244.0.0/16', blockSize: 26 });
  await ipam.setHost({ name: HOST, os: 'windows', labels: {} });
  const h = ipamHandlers(ipam, HOST);
  await t.rejects(Promise.resolve().then(() => h['ipam.assign']!({ containerId: 'Blockspeaker-gateway', ifname: 'eth0', num4: 1 }, { connectionId: 't' })), { code: 'INVALID', message: /names the node's own addresses/ });
  const hcn = new HcnDouble();
  const netId = hcn.addNetwork('cbr0');
  const w = windowsCniHandlers({ hcn, ipam: h, network: async () => ({ id: netId, name: 'cbr0' }), pools: async () => [{ name: 'p4', cidr: '10.244.0.0/16', natOutgoing: false }] });
  await t.rejects(Promise.resolve().then(() => w['cni.del']!({ containerId: 'blockspeaker-reserved', ifname: 'eth0', network: 'cbr0' }, { connectionId: 't' })), /names the node's own addresses/);
  t.same((await h['ipam.handles']!({}, { connectionId: 't' }) as { handles: unknown[] }).handles, [], 'nothing assigned');
});

t.test('property: exactly the IDs with the reserved prefix (any case) are reserved', async (t) => {
  fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 40 }), (id) => isReservedContainerId(id) === id.toLowerCase().startsWith(RESERVED_HANDLE_PREFIX)));
  fc.assert(fc.property(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$/), (tail) => isReservedContainerId(`blockspeaker-${tail}`)));
  t.pass('holds');
});
