// bgp.nodeMeshPassword with real parts, as root, in namespaces this test creates (test/cluster/lab.ts):
//
//   [node-a .1] [calico-d .2: BIRD as confd renders a mesh with a password] [node-b .3] [node-c .4: another password]
//
// node-a and node-b share a real etcd and the mesh password (a file, as a mounted Secret); calico-d's BIRD has a
// `Mesh_<ip>` protocol per node with `password "..."`, as confd renders BGPConfiguration nodeMeshPassword. node-a,
// node-b and BIRD come up Established with each other, TCP-MD5 signed; node-c, with a different password, gets no
// session with anyone, and its /peers says why. Needs root, bird2, etcd (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { interopGate } from '../kit/interop/gate.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { etcdGate } from '../kit/etcd-cluster.ts';
import { birdPeer, Lab, meshNodeYaml, status as get, type LabNode } from './lab.ts';

const gate = interopGate(t, ['bird']);
const haveEtcd = etcdGate(t);
const MESH_PW = 'mesh-s3cret';

if (!gate && haveEtcd) {
  t.test('mesh with a TCP-MD5 password: two blockspeakers and calico-node BIRD Established; a node with another password is not', async (t) => {
    const lab = await Lab.start(t, 'mp', ['node-a', 'calico-d', 'node-b', 'node-c']);
    const [nsA, nsD, nsB, nsC] = lab.nodes as [LabNode, LabNode, LabNode, LabNode];
    await lab.etcdctl('put', '/blockspeaker/cluster/v1/nodes/calico-d',
      JSON.stringify({ name: 'calico-d', labels: { 'kubernetes.io/os': 'linux' }, ipv4Address: `${nsD.ip}/24` }));
    const birdc = lab.bird(t, nsD, [nsA, nsB, nsC].map((n) => birdPeer(`Mesh_${n.ip.replace(/\./g, '_')}`, nsD, n, [`  password "${MESH_PW}";`])));
    const yaml = (n: LabNode, pwFile: string) => meshNodeYaml(n, '10.244.0.0/26', `  nodeMeshPassword: { file: ${join(lab.dir, pwFile)} }\n`);
    const A = lab.daemon(t, nsA, yaml(nsA, 'mesh.pw'), { 'mesh.pw': `${MESH_PW}\n` });
    const B = lab.daemon(t, nsB, yaml(nsB, 'mesh.pw'));
    const C = lab.daemon(t, nsC, yaml(nsC, 'other.pw'), { 'other.pw': 'not-the-mesh-one\n' });
    type P = { address: string; state: string; lastError: string | null; flaps?: number };
    const peers = async (d: typeof A): Promise<P[]> => (await get(d.ns, '/peers')) ?? [];
    const established = async (d: typeof A) => (await peers(d)).filter((p) => p.state === 'Established').map((p) => p.address).sort();
    try {
      await waitFor(async () => {
        const protos = await birdc('show', 'protocols');
        return [A, B].every((d) => new RegExp(`Mesh_${d.ip.replace(/\./g, '_')}\\s+BGP.*Established`).test(protos));
      }, { what: 'BIRD: Mesh_ sessions to node-a and node-b Established', timeoutMs: 60_000 });
      for (const d of [A, B]) {
        const want = [nsA.ip, nsD.ip, nsB.ip].filter((ip) => ip !== d.ip).sort();
        await waitFor(async () => JSON.stringify(await established(d)) === JSON.stringify(want), { what: `${d.name}: mesh Established to ${want}`, timeoutMs: 60_000 });
      }
      // node-c (.4, the highest address) opens every session itself: each attempt must fail for want of a signed answer
      await waitFor(async () => {
        const ps = await peers(C);
        return ps.length === 3 && ps.every((p) => /TCP-MD5, a wrong or missing password/.test(p.lastError ?? ''));
      }, { what: 'node-c: every mesh peer failing on TCP-MD5', timeoutMs: 60_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await birdc('show', 'protocols')}\n${lab.logs([A, B, C])}`);
    }
    t.pass('node-a, node-b and BIRD Established with each other over TCP-MD5');
    t.same(await established(C), [], 'node-c, with another password, has no session');
    const cPeers = await peers(C);
    t.match(cPeers[0], { lastError: /with TCP-MD5, a wrong or missing password on either side drops the SYN without an answer/ }, '/peers says why');
    for (const d of [A, B]) {
      const toC = (await peers(d)).find((p) => p.address === nsC.ip);
      t.not(toC?.state, 'Established', `${d.name} has no session with node-c`);
    }
    t.notMatch(await birdc('show', 'protocols'), new RegExp(`Mesh_${nsC.ip.replace(/\./g, '_')}\\s+BGP.*Established`), 'BIRD has none with node-c');
    // the password never shows
    for (const d of [A, C]) t.notMatch(JSON.stringify(await peers(d)), /mesh-s3cret|not-the-mesh-one/, `${d.name}'s /peers does not carry a password`);
    for (const d of [A, B, C]) t.notMatch(readFileSync(d.log, 'utf8'), /mesh-s3cret|not-the-mesh-one/, `nor ${d.name}'s log`);
    for (const d of [A, B, C]) {
      const ex = new Promise<number | null>((r) => d.child.once('exit', (code) => r(code)));
      d.child.kill('SIGTERM');
      t.equal(await ex, 0, `${d.name} stopped cleanly`);
    }
  });
}
