// BFD detection time, ours against BIRD's and FRR's, over N cuts of a link in the namespace lab (both ends run BFD
// at the same 300 ms x 3, i.e. a 900 ms detection time). A cut drops every packet arriving at either end
// (iptables INPUT, test/kit/interop/bfd.ts); detection time = first Down after the cut, minus the cut. Ours is read
// from our log's timestamp (ms); the peer's by polling its BFD state (birdc / vtysh, each poll ~5-30 ms, so its
// figure is an upper bound). Prints one JSON line per cut and a final JSON line with the medians.
// Needs root, bird2, frr, iptables.  npm run bench:bfd-detect -- --cuts 5
import { parseArgs } from 'node:util';
import { cleanupAll, createLink } from '../test/kit/interop/netns.ts';
import type { PeerKind } from '../test/kit/interop/peer-types.ts';
import { assertPrereqs } from '../test/kit/interop/prereqs.ts';
import { startPeer } from '../test/kit/interop/start-peer.ts';
import { waitFor } from '../test/kit/interop/wait-for.ts';
import { startOurs } from '../test/kit/interop/our-speaker.ts';
import { cutLink, ourBfdDownAt, peerBfdState } from '../test/kit/interop/bfd.ts';

const { values } = parseArgs({ options: { cuts: { type: 'string', default: '5' }, peers: { type: 'string', default: 'bird,frr' } } });
const CUTS = Number(values.cuts);
const KINDS = values.peers!.split(',') as PeerKind[];
const BFD = { minRx: 300, minTx: 300, multiplier: 3 };
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};

assertPrereqs(KINDS);
const summary: Record<string, unknown> = { bench: 'bfd-detect', configuredMs: BFD.minRx * BFD.multiplier, cuts: CUTS };
try {
  for (const kind of KINDS) {
    const link = await createLink({ name: `bd${kind[0]}` });
    const L = link.local;
    const P = link.peer;
    const peer = await startPeer(kind, link, { asn: 65002, neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 90, bfd: BFD }] });
    const us = await startOurs(link, { asn: 65001, peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 90, bfd: BFD }] });
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let i = 0; i < CUTS; i++) {
      await us.wait(async () => {
        const p = await us.peer(P.v4) as unknown as { state: string; bfd: { state: string } };
        return p.state === 'Established' && p.bfd.state === 'Up' && (await peerBfdState(peer, L.v4)) === 'Up' && (await peer.state(L.v4)) === 'Established';
      }, 'all up', { peers: [peer], timeoutMs: 90_000 });
      await new Promise((r) => setTimeout(r, 2000)); // let both settle at the fast rate
      const cutAt = Date.now();
      await cutLink(link, true);
      const peerAt: number = await waitFor(async () => ((await peerBfdState(peer, L.v4)) !== 'Up' ? Date.now() : null), { what: `${kind} BFD down`, timeoutMs: 30_000 });
      const ourAt: number = await waitFor(() => ourBfdDownAt(`${us.dir}/blockspeaker.log`, P.v4, cutAt), { what: 'our BFD down', timeoutMs: 30_000 });
      ours.push(ourAt - cutAt);
      theirs.push(peerAt - cutAt);
      console.log(JSON.stringify({ peer: kind, cut: i + 1, oursMs: ourAt - cutAt, peerMs: peerAt - cutAt }));
      await cutLink(link, false);
    }
    summary[kind] = { oursMedianMs: median(ours), peerMedianMs: median(theirs), ratio: median(ours)! / median(theirs)!, ours, peer: theirs };
    await us.dispose();
    await link.destroy();
  }
} finally {
  await cleanupAll();
}
console.log(JSON.stringify(summary));
