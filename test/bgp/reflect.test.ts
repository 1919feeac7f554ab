// Route reflection (RFC 4456): the pure rules, and our speakers on loopback as a reflector with two clients and a
// non-client: routes flow client -> client and client <-> non-client with ORIGINATOR_ID and CLUSTER_LIST, a
// route carrying our cluster ID is dropped, and without a cluster ID nothing is reflected.
import t from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerConfig, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { clusterLoop, reflectedAttrs, reflects } from '../../src/bgp/reflect.ts';
import { formatIP, parsePrefix } from '../../src/net/ip.ts';
import { makeAttrs } from '../../src/rib/attrs.ts';
import { waitFor } from './raw-peer.ts';
import { loopbackSpeakers } from './loopback.ts';

const u32 = (ip: string) => ip.split('.').reduce((n, x) => n * 256 + Number(x), 0);

t.test('pure rules', async (t) => {
  t.same([reflects(true, true), reflects(true, false), reflects(false, true), reflects(false, false)], [true, true, true, false],
    'from a client to all; from a non-client to clients only');
  const a = makeAttrs({ origin: 0, asPath: [], nextHop: null, clusterList: [u32('1.1.1.1')] } as never);
  const r = reflectedAttrs(a, u32('10.0.0.2'), u32('244.0.0.1'));
  t.equal(r.originatorId, u32('10.0.0.2'), 'ORIGINATOR_ID: the router ID of the peer it came from');
  t.same(r.clusterList, [u32('244.0.0.1'), u32('1.1.1.1')], 'our cluster ID prepended');
  t.equal(reflectedAttrs(r, u32('10.0.0.9'), u32('244.0.0.2')).originatorId, u32('10.0.0.2'), 'an ORIGINATOR_ID already there is kept');
  t.equal(clusterLoop(r, u32('244.0.0.1')), true);
  t.equal(clusterLoop(r, u32('244.0.0.9')), false);
  t.equal(clusterLoop(r, undefined), false);
  // Memoised per record: every client gets the same object; another source or cluster ID is built afresh.
  t.equal(reflectedAttrs(a, u32('10.0.0.2'), u32('244.0.0.1')), r, 'the same record for the same input');
  const other = reflectedAttrs(a, u32('10.0.0.3'), u32('244.0.0.1'));
  t.equal(other.originatorId, u32('10.0.0.3'), 'another source: its own ORIGINATOR_ID');
  const cid = reflectedAttrs(a, u32('10.0.0.3'), u32('244.0.0.7'));
  t.same(cid.clusterList, [u32('244.0.0.7'), u32('1.1.1.1')], 'another cluster ID: its own CLUSTER_LIST');
  t.same(reflectedAttrs(a, u32('10.0.0.2'), u32('244.0.0.1')).clusterList, r.clusterList, 'and back: still right');
});

const lo = loopbackSpeakers(t);
const mk = (n: number, peers: SpeakerPeerConfig[], extra: Partial<SpeakerConfig> = {}): Speaker => lo.mk(n, 64512, peers, extra);
const peer = (n: number, extra: Partial<SpeakerPeerConfig> = {}): SpeakerPeerConfig => lo.peer(n, 64512, extra);

t.test('a reflector with two clients and a non-client, over real sessions', async (t) => {
  const rr = mk(1, [peer(2, { routeReflectorClient: true }), peer(3, { routeReflectorClient: true }), peer(4)], { clusterId: '244.0.0.1' });
  const a = mk(2, [peer(1)]);
  const b = mk(3, [peer(1)]);
  const d = mk(4, [peer(1)]);
  a.announce('10.2.0.0/24');
  d.announce('10.4.0.0/24');
  await Promise.all([rr, a, b, d].map((s) => s.start()));
  const best = (s: Speaker, p: string) => s.rib.best(parsePrefix(p));
  await waitFor(() => best(b, '10.2.0.0/24') && best(d, '10.2.0.0/24') && best(a, '10.4.0.0/24') && best(b, '10.4.0.0/24'), 'reflected routes arrive');
  const at = best(b, '10.2.0.0/24')!.attrs;
  t.equal(formatIP({ family: 4, w0: at.originatorId!, w1: 0, w2: 0, w3: 0 } as never), '10.0.0.2', "client -> client: ORIGINATOR_ID is client a's router ID");
  t.same(at.clusterList, [u32('244.0.0.1')], 'CLUSTER_LIST holds the reflector\'s cluster ID');
  t.equal(formatIP(at.nextHop!), '127.0.0.2', 'the next hop is left alone (client a)');
  t.ok(best(d, '10.2.0.0/24'), 'client -> non-client');
  t.same(best(a, '10.4.0.0/24')!.attrs.clusterList, [u32('244.0.0.1')], 'non-client -> client');
  t.same(rr.peers().map((p) => [p.address, p.routeReflectorClient, p.restartTime]),
    [['127.0.0.2', true, null], ['127.0.0.3', true, null], ['127.0.0.4', false, null]], '/peers shows which peers are clients (and the GR time, off here)');
  t.equal(mk(9, [peer(1, { gracefulRestart: { restartTime: 77 } })]).peers()[0]!.restartTime, 77, '/peers shows the restart time (Calico maxRestartTime)');

  // The same reflector without a cluster ID reflects nothing: plain iBGP split horizon.
  const plainRr = mk(5, [peer(6)]);
  const c1 = mk(6, [peer(5), peer(7)]);
  const c2 = mk(7, [peer(6)]);
  c2.announce('10.7.0.0/24');
  await Promise.all([plainRr, c1, c2].map((s) => s.start()));
  await waitFor(() => best(c1, '10.7.0.0/24') && plainRr.peers().every((p) => p.state === 'Established'), 'c1 has c2\'s route');
  t.equal(best(plainRr, '10.7.0.0/24'), undefined, 'without a cluster ID an iBGP-learned route is not passed to iBGP peers');
});
