// The mesh's cheap path for a node event: the cluster keeps the objects of unchanged peers and freezes them
// (keepUnchanged), and the speaker skips a frozen peer config it already runs with (Speaker.normPeerMemo).
import fc from 'fast-check';
import t from 'tap';
import type { PeerConfig } from '../../src/config/types.ts';
import { keepUnchanged } from '../../src/daemon/cluster.ts';
import { loopbackSpeakers } from '../bgp/loopback.ts';
import { waitFor } from '../kit/interop/wait-for.ts';

const peerArb = fc.record({
  address: fc.constantFrom('10.0.0.1', '10.0.0.2', '10.0.0.3', 'fd00::1'),
  asn: fc.constantFrom(64512, 64513),
  families: fc.constantFrom(['ipv4'], ['ipv6']),
  holdTime: fc.constantFrom(90, 30),
  passive: fc.boolean(),
}, { requiredKeys: ['address', 'asn', 'families'] }) as unknown as fc.Arbitrary<PeerConfig>;

// Oracle: a peer keeps its old object exactly when an old peer of the same address and families has the same
// fields; every other one is the new object, frozen.
const canon = (p: PeerConfig) => JSON.stringify(Object.keys(p).sort().map((k) => [k, (p as unknown as Record<string, unknown>)[k]]));

t.test('keepUnchanged: equal peers keep their old objects, the others are the new ones frozen', async (t) => {
  fc.assert(fc.property(fc.array(peerArb, { maxLength: 6 }), fc.array(peerArb, { maxLength: 6 }), (prev, next) => {
    const copies = next.map((p) => ({ ...p, families: [...p.families!] }));
    const out = keepUnchanged(prev, copies);
    if (out.length !== next.length) return false;
    const last = new Map(prev.map((p) => [`${p.address}/${p.families!.join(',')}`, p]));
    return out.every((o, i) => {
      if (canon(o) !== canon(next[i]!)) return false;
      const old = last.get(`${next[i]!.address}/${next[i]!.families!.join(',')}`);
      const same = old !== undefined && canon(old) === canon(next[i]!);
      return same ? o === old : o === copies[i] && Object.isFrozen(o);
    });
  }));
  t.pass('property held');
});

const lb = loopbackSpeakers(t);

t.test('speaker: a frozen peer config passed again keeps its session; a changed one restarts it', async (t) => {
  const b = lb.mk(2, 65002, [lb.peer(1, 65001)]);
  const toB = Object.freeze(lb.peer(2, 65002));
  const aCfg = lb.cfgOf(1, 65001, [toB]);
  const a = lb.mk(1, 65001, [toB]);
  await Promise.all([a.start(), b.start()]);
  const peerB = () => a.peers().find((p) => p.address === '127.0.0.2')!;
  await waitFor(async () => peerB().state === 'Established', { what: 'A-B Established', timeoutMs: 20_000 });
  const since = peerB().since;
  // The same frozen object with a new peer beside it (nobody listens there): B's session is left alone.
  await a.reconfigure({ ...aCfg, peers: [toB, Object.freeze(lb.peer(3, 65003, { passive: true }))] });
  t.equal(peerB().state, 'Established', 'still Established');
  t.equal(peerB().since, since, 'not restarted');
  t.equal(a.peers().length, 2, 'the new peer was added');
  // An equal but distinct frozen object goes through the full comparison: still unchanged.
  await a.reconfigure({ ...aCfg, peers: [Object.freeze({ ...toB })] });
  t.equal(peerB().since, since, 'an equal copy does not restart it either');
  t.equal(a.peers().length, 1, 'the extra peer was removed');
  // A changed hold time restarts the session.
  await a.reconfigure({ ...aCfg, peers: [Object.freeze({ ...toB, holdTime: 30 })] });
  await waitFor(async () => peerB().state === 'Established' && peerB().since !== since, { what: 'A-B re-established', timeoutMs: 20_000 });
  t.equal(peerB().holdTime, 30, 'the new hold time is in effect');
});
