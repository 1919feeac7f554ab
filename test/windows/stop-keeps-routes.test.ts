// A service stop on Windows is Ctrl+C (NSSM sends it; wine turns a Linux SIGINT into the same console event), and
// for the BGP peers it must be a restart, not the node going away: the session closes without a NOTIFICATION, so a
// graceful-restart peer keeps this node's routes (RFC 4724) until the daemon is back.
//
// blockspeaker.exe runs under wine with an in-process speaker on Linux as its peer. Ctrl+C maps to a restart through
// the platform module's control mapping (src/platform/platform.ts, used by src/cli/run.ts); were it mapped to the
// node going away, the stop would send Cease and the peer would drop the routes at once, which this test catches.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Speaker } from '../../src/bgp/speaker.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { driveC, startWine, zPath } from '../../packaging/windows/wine.ts';
import { freePort } from '../kit/wait.ts';
import { exe, windowsReady } from './harness.ts';

async function until(what: string, ms: number, ok: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

if (windowsReady(t)) {
  t.test('Ctrl+C (service stop) closes sessions without NOTIFICATION: the peer keeps the routes, stale', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-stop-'));
    const storeName = `bs-stop-${process.pid}`;
    t.teardown(() => {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
    });
    const peerPort = await freePort('127.0.0.3');
    const peer = new Speaker({ asn: 65099, routerId: '127.0.0.3', listen: { address: '127.0.0.3', port: peerPort },
      gracefulRestart: { restartTime: 120 }, peers: [{ address: '127.0.0.1', asn: 65010, passive: true, holdTime: 30 }] });
    await peer.start();
    t.teardown(() => peer.stop());

    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-stop, os: windows }
bgp:
  asn: 65010
  routerId: 127.0.0.1
  listen: false
  gracefulRestart: { restartTime: 120 }
  peers: [{ address: 127.0.0.3, asn: 65099, port: ${peerPort}, holdTime: 30 }]
  announce: [192.0.2.0/24]
ipam:
  store: C:\\${storeName}\\store
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: hns }
status: false
ipc: { path: '\\\\.\\pipe\\bs-stop-${process.pid}' }
`);
    const d = startWine(exe.cli, ['run', '-c', zPath(config), '--dry-run'], { timeoutMs: 300_000 });
    t.teardown(() => d.kill());
    const route = parsePrefix('192.0.2.0/24');
    await until('the peer to learn 192.0.2.0/24 from the Windows daemon', 180_000, () => peer.rib.paths(route).length > 0);
    t.ok(peer.rib.paths(route).every((p) => !p.stale), 'learned, fresh');

    process.kill(d.pid, 'SIGINT'); // wine delivers it to the Windows process as Ctrl+C
    const code = await d.exited;
    t.equal(code, 0, 'the daemon stopped cleanly');
    if (code !== 0) t.comment(d.output().stderr.slice(-2000));
    await until('the peer to see the session go', 30_000, () => peer.peers()[0]?.state !== 'Established');
    await new Promise((r) => setTimeout(r, 500));
    const kept = peer.rib.paths(route);
    t.ok(kept.length > 0, 'the peer still has the route after the stop');
    t.ok(kept.length > 0 && kept.every((p) => p.stale), 'kept as stale, waiting for the restart');
    t.notMatch(d.output().stderr, /sent NOTIFICATION Cease/, 'no Cease sent on Ctrl+C');
  });
}
