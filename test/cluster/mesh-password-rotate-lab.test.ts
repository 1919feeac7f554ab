// Rotating bgp.nodeMeshPassword's file under running sessions, with real parts, as root, in namespaces this test
// creates (test/cluster/lab.ts):
//
//   [node-a .1] [node-b .2] [node-c .3: joins later, with only the new password]
//
// node-a and node-b share a real etcd and the mesh password, each from its own file (a mounted Secret). Each file is
// replaced by a new one (a rename over it: what a Secret's symlink swap looks like to a stat), node-a's first. Each
// daemon reads the password again and puts the new TCP-MD5 key on the established session and on its listener. While
// only node-a has the new key, an UPDATE it sends (a block it claims) does not reach node-b: the socket's key really
// changed. Once node-b's file rotates too, the same session (no flap, its uptime goes on) delivers it. node-c, which
// knows only the new password, then gets sessions with both (its SYNs are checked against the listeners' keys).
// Needs root and etcd (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { interopGate } from '../kit/interop/gate.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { etcdGate } from '../kit/etcd-cluster.ts';
import { block28, Lab, meshNodeYaml, status as get, type Daemon, type LabNode } from './lab.ts';

const gate = interopGate(t, []);
const haveEtcd = etcdGate(t);
const OLD_PW = 'mesh-old-s3cret';
const NEW_PW = 'mesh-new-s3cret';

type P = { address: string; state: string; flaps: number; uptime: number; lastError: string | null };

if (!gate && haveEtcd) {
  t.test('mesh password file rotated: keys replaced on the running sessions, which stay up and carry routes', async (t) => {
    const lab = await Lab.start(t, 'mr', ['node-a', 'node-b', 'node-c']);
    const [nsA, nsB, nsC] = lab.nodes as [LabNode, LabNode, LabNode];
    const pw = { a: join(lab.dir, 'a.pw'), b: join(lab.dir, 'b.pw') };
    const yaml = (n: LabNode, file: string) => meshNodeYaml(n, '10.244.0.0/26', `  nodeMeshPassword: { file: ${file} }\n`);
    const A = lab.daemon(t, nsA, yaml(nsA, pw.a), { 'a.pw': `${OLD_PW}\n`, 'b.pw': `${OLD_PW}\n` });
    const B = lab.daemon(t, nsB, yaml(nsB, pw.b));
    const peers = async (d: Daemon): Promise<P[]> => (await get(d.ns, '/peers')) ?? [];
    const peerOf = async (d: Daemon, ip: string) => (await peers(d)).find((p) => p.address === ip);
    const log = (d: Daemon) => readFileSync(d.log, 'utf8');
    const rotate = (file: string) => {
      writeFileSync(`${file}.new`, `${NEW_PW}\n`);
      renameSync(`${file}.new`, file); // a new file renamed over the old one, as a Secret's symlink swap looks
    };
    const rekeyed = (d: Daemon, other: LabNode) => waitFor(() => log(d).includes(`peer ${other.ip}: TCP-MD5 key replaced on the running session`),
      { what: `${d.name}: key replaced on its session to ${other.name}`, timeoutMs: 30_000 });
    const learned = async (d: Daemon, prefix: string) => (await get(d.ns, `/routes?prefix=${encodeURIComponent(prefix)}`))?.prefix === prefix;
    const daemons = [A, B];
    try {
      for (const [d, other] of [[A, nsB], [B, nsA]] as const) {
        await waitFor(async () => (await peerOf(d, other.ip))?.state === 'Established', { what: `${d.name}: mesh session to ${other.name} Established`, timeoutMs: 60_000 });
      }
      const before = { a: (await peerOf(A, nsB.ip))!, b: (await peerOf(B, nsA.ip))! };

      // node-a's file first: its established socket now signs with the new key, which node-b's still rejects, so an
      // UPDATE node-a sends (a block it claims) does not get through...
      rotate(pw.a);
      await rekeyed(A, nsB);
      const ip = (await ipcRequest<AssignReply>(A.sock, 'ipam.assign', { handle: 'after-rotation', num4: 1, pools: ['pods'] })).ips[0]!.ip;
      const block = block28(ip);
      await new Promise((r) => setTimeout(r, 5000));
      t.notOk(await learned(B, block), `node-b did not get ${block} while only node-a had the new key (the socket's key was replaced)`);
      // ... until node-b's file rotates too: TCP retransmits it on the same connection.
      rotate(pw.b);
      await rekeyed(B, nsA);
      await waitFor(() => learned(B, block), { what: `node-b learned ${block} once both had the new key`, timeoutMs: 60_000 });
      t.pass(`node-b learned ${block} over the re-keyed session once both ends had the new key`);

      const after = { a: (await peerOf(A, nsB.ip))!, b: (await peerOf(B, nsA.ip))! };
      for (const k of ['a', 'b'] as const) {
        t.equal(after[k].state, 'Established', `node-${k}: still Established`);
        t.equal(after[k].flaps, before[k].flaps, `node-${k}: no flap`);
        t.ok(after[k].uptime >= before[k].uptime, `node-${k}: the same session (uptime ${before[k].uptime} s -> ${after[k].uptime} s)`);
      }
      for (const d of [A, B]) t.notMatch(log(d), /restarting it|session settings changed/, `${d.name}: no session restarted`);

      // node-c knows only the new password: its SYNs to node-a and node-b are checked against their listeners' keys.
      const C = lab.daemon(t, nsC, yaml(nsC, join(lab.dir, 'c.pw')), { 'c.pw': `${NEW_PW}\n` });
      daemons.push(C);
      for (const other of [nsA, nsB]) {
        await waitFor(async () => (await peerOf(C, other.ip))?.state === 'Established', { what: `node-c: session to ${other.name} with the new password`, timeoutMs: 60_000 });
      }
      t.pass('node-c, with only the new password, is Established with node-a and node-b');
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${lab.logs(daemons)}`);
    }
    for (const d of daemons) t.notMatch(log(d), /mesh-old-s3cret|mesh-new-s3cret/, `${d.name}: no password in the log`);
    for (const d of daemons) {
      const ex = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
      d.child.kill('SIGTERM');
      t.equal(await ex, 0, `${d.name} stopped cleanly`);
    }
  });
}
