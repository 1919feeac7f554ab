// The parts of re-keying a rotated BGP password that need no namespace (the lab test is
// test/cluster/mesh-password-rotate-lab.test.ts): which config changes are "only the key" (replaced on the running
// session) and which restart it, and the file watch that notices a rotation (a rename over the file, an in-place
// rewrite) on the real file system and lets a burst of writes settle into one refresh.
import t from 'tap';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onlyKeyChanged } from '../../src/bgp/md5-rekey.ts';
import { PeerKey, type PeerSecurity } from '../../src/bgp/peer-security.ts';
import { PasswordWatch } from '../../src/daemon/password-watch.ts';
import { bgpPasswordFiles } from '../../src/config/secret-files.ts';
import type { Config } from '../../src/config/types.ts';

type Peer = { address: string; holdTime: number; security: PeerSecurity };
const sec = (key: string | null, extra: Partial<PeerSecurity> = {}): PeerSecurity => ({ md5Key: key === null ? null : new PeerKey(Buffer.from(key)), ttlSecurity: null, problem: null, ...extra });
const peer = (s: PeerSecurity, holdTime = 90): Peer => ({ address: '10.0.0.1', holdTime, security: s });
const same = (a: Peer, b: Peer) => JSON.stringify(a) === JSON.stringify(b); // as Speaker's sameSession compares

t.test('only the key changed: replaced in place; anything else, or TCP-MD5 turned on or off, restarts', async (t) => {
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec('new')), same), true, 'a new key, nothing else');
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec('old')), same), false, 'the same key: nothing to replace');
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec('new'), 30), same), false, 'a new key and a new hold time: restart');
  t.equal(onlyKeyChanged(peer(sec(null)), peer(sec('new')), same), false, 'TCP-MD5 turned on: restart');
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec(null)), same), false, 'TCP-MD5 turned off: restart');
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec('new', { ttlSecurity: 1 })), same), false, 'GTSM changed too: restart');
  t.equal(onlyKeyChanged(peer(sec('old')), peer(sec('new', { problem: 'password: file /x is empty' })), same), false, 'an unreadable password: not a key to set');
});

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the watch: a rename over the file and an in-place rewrite each give one refresh; unwatched files none', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), `bs-pwwatch-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const a = join(dir, 'a.pw');
  const b = join(dir, 'b.pw');
  writeFileSync(a, 'one\n');
  writeFileSync(b, 'one\n');
  let refreshes = 0;
  const w = new PasswordWatch(() => refreshes++, { intervalMs: 20, settleMs: 100 });
  t.teardown(() => w.close());
  w.set([a]);
  await tick(100);
  t.equal(refreshes, 0, 'nothing changed: no refresh');

  writeFileSync(`${a}.new`, 'two\n');
  renameSync(`${a}.new`, a);
  const until = async (n: number) => { for (let i = 0; i < 500 && refreshes < n; i++) await tick(20); };
  await until(1);
  t.equal(refreshes, 1, 'a rename over the file: one refresh');

  // A burst (truncate, then the new content, written in pieces): one refresh once it is quiet.
  writeFileSync(a, '');
  await tick(30);
  writeFileSync(a, 'thr');
  await tick(30);
  writeFileSync(a, 'three-and-longer\n');
  await until(2);
  await tick(300);
  t.equal(refreshes, 2, 'a burst of in-place writes: one refresh');

  writeFileSync(b, 'changed but not watched\n');
  await tick(300);
  t.equal(refreshes, 2, 'a file not watched: no refresh');

  w.set([b]);
  t.same(w.watched, [b], 'a reload may swap the files watched');
  writeFileSync(a, 'four\n');
  await tick(300);
  t.equal(refreshes, 2, 'the file no longer watched: no refresh');
  writeFileSync(b, 'five, now watched\n');
  await until(3);
  t.equal(refreshes, 3, 'the newly watched file: a refresh');
});

t.test('the BGP password files of a config: peers, the mesh and selector peers, each once; not etcd\'s', async (t) => {
  const cfg = {
    node: { name: 'n', os: 'linux', labels: {} },
    bgp: {
      peers: [{ address: '10.0.0.2', asn: 1, password: { file: '/s/p' } }, { address: '10.0.0.3', asn: 1, password: { env: 'P' } }],
      nodeMeshPassword: { file: '/s/mesh' },
      selectorPeers: [{ password: { file: '/s/p' } }],
    },
    ipam: { etcd: { username: 'u', password: { file: '/e/pw' }, key: '/e/k' } },
  } as unknown as Config;
  t.same(bgpPasswordFiles(cfg), ['/s/p', '/s/mesh']);
});
