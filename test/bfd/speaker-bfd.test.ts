// BFD under BGP, our own on both ends over loopback (real TCP and UDP on 127.0.0.1 and 127.0.0.2): the sessions
// come up together, /peers shows BFD Up; when one side's BFD stops (as a crash of its BFD would), the other closes
// the Established BGP session with Cease as soon as BFD declares the path down, counts it as bfd-down, and BGP
// comes back while BFD stays Down (BFD gates nothing but failure). The remote going AdminDown closes nothing.
import t, { type Test } from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { BfdManager } from '../../src/bfd/manager.ts';
import { freePort, waitFor } from '../bgp/raw-peer.ts';
import { parsePrefix } from '../../src/net/ip.ts';

async function setup(t: Test) {
  const port = await freePort();
  const [bfdA, bfdB] = [new BfdManager({ port: 0 }), new BfdManager({ port: 0 })];
  await bfdA.configure([{ address: '127.0.0.2', minRx: 100, minTx: 100, multiplier: 3, localAddress: '127.0.0.1' }]);
  await bfdB.configure([{ address: '127.0.0.1', minRx: 100, minTx: 100, multiplier: 3, localAddress: '127.0.0.2' }]);
  (bfdA as unknown as { opts: { peerPort: number } }).opts.peerPort = bfdB.listeningPort()!;
  (bfdB as unknown as { opts: { peerPort: number } }).opts.peerPort = bfdA.listeningPort()!;
  const peer = (n: number, asn: number): SpeakerPeerConfig => ({ address: `127.0.0.${n}`, asn, port, holdTime: 90, idleHold: 0.1, connectRetry: 0.2 } as SpeakerPeerConfig);
  const a = new Speaker({ asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port }, peers: [peer(2, 65002)], announce: ['10.1.0.0/24'] }, { random: () => 0.5, bfd: bfdA });
  const b = new Speaker({ asn: 65002, routerId: '10.0.0.2', listen: { address: '127.0.0.2', port }, peers: [peer(1, 65001)], announce: ['10.2.0.0/24'] }, { random: () => 0.5, bfd: bfdB });
  t.teardown(async () => {
    await Promise.all([a.stop({ graceful: false }), b.stop({ graceful: false })]);
    await Promise.all([bfdA.close({ silent: true }), bfdB.close({ silent: true })]);
  });
  await Promise.all([a.start(), b.start()]);
  return { a, b, bfdA, bfdB };
}

t.test('a BFD failure closes the Established BGP session at once', async (t) => {
  const { a, b, bfdB } = await setup(t);
  const st = await waitFor(() => {
    const p = a.peers()[0];
    return p.state === 'Established' && p.bfd?.state === 'Up' && b.peers()[0].state === 'Established' && a.rib.best(parsePrefix('10.2.0.0/24')) && p;
  }, 'BGP Established, BFD Up, the route from b', 15_000);
  t.match(st.bfd, { state: 'Up', remoteState: 'Up', detectMult: 3 });
  const downs: string[] = [];
  a.on('peer', (p) => { if (p.state !== 'Established') downs.push(p.state); });
  // a loaded machine may have flapped BFD already: count from here
  const before = { bgp: a.peers()[0].errorCounts['bfd-down']?.Established ?? 0, bfd: a.peers()[0].bfd!.downs, cease: a.peers()[0].errorCounts['notification-sent']?.['6/0'] ?? 0 };
  await bfdB.close({ silent: true }); // b's BFD goes silent; its BGP (TCP) is untouched
  const down = await waitFor(() => {
    const p = a.peers()[0];
    return p.bfd?.state === 'Down' && (p.errorCounts['bfd-down']?.Established ?? 0) > before.bgp && p;
  }, 'a closes the session on BFD down', 10_000);
  t.equal(down.errorCounts['bfd-down']!.Established, before.bgp + 1, 'counted as bfd-down');
  t.equal(down.errorCounts['notification-sent']!['6/0'], before.cease + 1, 'Cease sent, as BIRD does');
  t.notOk(a.rib.best(parsePrefix('10.2.0.0/24'))?.source === '127.0.0.2' && a.peers()[0].state !== 'Established', "b's routes went with the session");
  t.match(down.bfd, { state: 'Down', diag: 'Control Detection Time Expired', downs: before.bfd + 1 });
  t.ok(downs.length > 0, 'the session left Established');
  // BFD Down does not hold BGP back: the TCP path works, so the session comes back (as with BIRD and FRR).
  await waitFor(() => a.peers()[0].state === 'Established', 'BGP back', 15_000);
  t.equal(a.peers()[0].bfd?.state, 'Down', 'BFD still Down');
});

t.test('the remote BFD going AdminDown does not close BGP (RFC 5882 3.2)', async (t) => {
  const { a, b, bfdB } = await setup(t);
  await waitFor(() => a.peers()[0].state === 'Established' && a.peers()[0].bfd?.state === 'Up' && b.peers()[0].state === 'Established', 'up', 15_000);
  await bfdB.configure([]);
  await waitFor(() => a.peers()[0].bfd?.state === 'Down', 'BFD Down', 10_000);
  t.match(a.peers()[0].bfd, { remoteState: 'AdminDown', downs: 0 });
  t.equal(a.peers()[0].state, 'Established', 'BGP stays up');
  t.equal(a.peers()[0].errorCounts['bfd-down'], undefined);
});
