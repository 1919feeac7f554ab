// BFD against real peers in the namespace lab: BIRD's `protocol bfd` with `bfd on`, and FRR's bfdd with
// `neighbor X bfd`. Both sessions come Up on both ends; then the link is cut both ways (blackhole routes, so no
// daemon sees a link event) and, with a 90 s hold time, only BFD can end the sessions within the wait: our BGP
// session must close (counted as bfd-down) and the peer's must too. Then the link heals and all comes back.
// The detection times are printed as comments (bench/bfd-detect.ts measures them), never asserted.
// Needs root, bird2 and frr (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import { gateDecision, interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import type { PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';
import { missingTools } from '../kit/tools.ts';
import { cutLink, ourBfdDownAt, peerBfdState } from '../kit/interop/bfd.ts';

const tools = gateDecision(missingTools(['iptables']));
if (tools.fail) t.fail(`${tools.skip} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
const gate = interopGate(t, ['bird', 'frr']) || tools.skip;
// our defaults (FRR's): tighter intervals flap on a shared 2-core CI machine, for BIRD and FRR as for us
const BFD = { minRx: 300, minTx: 300, multiplier: 3 };

for (const kind of ['bird', 'frr'] as PeerKind[]) {
  t.test(`BFD with ${kind}: Up on both ends, a cut link ends both BGP sessions, healing restores them`, { skip: gate }, async (t) => {
    const link = await createLink({ name: `bfd${kind[0]}`, t });
    const L = link.local;
    const P = link.peer;
    const peer = await startPeer(kind, link, {
      asn: 65002,
      neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 90, bfd: BFD }],
      announce: ['10.71.0.0/24'],
    });
    const us = await startOurs(link, { asn: 65001, peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 90, bfd: BFD }] }, t);
    const peers = [peer];
    const up = await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as { state: string; bfd: { state: string } | null };
      return p.state === 'Established' && p.bfd?.state === 'Up' && (await peerBfdState(peer, L.v4)) === 'Up' && p;
    }, `BGP Established, BFD Up at both ends (${kind})`, { peers, timeoutMs: 30_000 });
    t.match(up, { bfd: { state: 'Up', remoteState: 'Up', detectMult: 3, remoteDetectMult: 3, localPort: Number } });
    t.equal(await peerBfdState(peer, L.v4), 'Up', `${kind} reports its BFD session Up`);
    await us.waitRoute('10.71.0.0/24', { from: P.v4, peers });
    const metrics = String((await us.get('/metrics')).body);
    const esc = P.v4.replace(/\./g, '\\.');
    t.match(metrics, new RegExp(`blockspeaker_bfd_session_state\\{peer="${esc}"\\} 3`), 'BFD Up in the metrics');

    type St = { state: string; errorCounts: Record<string, Record<string, number>>; bfd: { state: string; diag: string; downs: number } };
    // a loaded machine may have flapped BFD already while the sessions came up: count from here
    const before = await us.peer(P.v4) as unknown as St;
    const base = before.errorCounts['bfd-down']?.Established ?? 0;
    const cutAt = Date.now();
    await cutLink(link, true);
    const down = await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as St;
      return p.state !== 'Established' && p.bfd.state === 'Down' && (p.errorCounts['bfd-down']?.Established ?? 0) > base && p;
    }, 'our BGP session closed by BFD', { peers, timeoutMs: 20_000 });
    t.match(down.bfd, { state: 'Down', diag: 'Control Detection Time Expired' });
    t.equal(down.errorCounts['bfd-down'].Established, base + 1, 'counted as bfd-down');
    t.equal(down.bfd.downs, before.bfd.downs + 1, 'one BFD failure');
    const peerDown: number = await waitFor(async () => (await peerBfdState(peer, L.v4)) !== 'Up' ? Date.now() : null, { what: `${kind} BFD not Up (BIRD deletes a session whose BGP went down)`, peers, timeoutMs: 20_000 });
    await waitFor(async () => (await peer.state(L.v4)) !== 'Established', { what: `${kind} BGP session down (hold time is 90 s: only BFD can do this)`, peers, timeoutMs: 20_000 });
    t.pass(`${kind}'s BGP session went down too`);
    const ours = ourBfdDownAt(`${us.dir}/blockspeaker.log`, P.v4, cutAt);
    t.comment(`detection after the cut (configured 3 x 300 ms): ours ${ours === null ? '?' : ours - cutAt} ms, ${kind} <= ${peerDown - cutAt} ms (polled)`);
    t.match(String((await us.get('/metrics')).body), new RegExp(`blockspeaker_bfd_session_downs_total\\{peer="${esc}"\\} [1-9]`), 'the failure in the metrics');

    await cutLink(link, false);
    await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as { state: string; bfd: { state: string } };
      return p.state === 'Established' && p.bfd.state === 'Up' && (await peerBfdState(peer, L.v4)) === 'Up';
    }, 'healed: BGP and BFD back', { peers, timeoutMs: 60_000 });
    t.pass('BGP and BFD back after healing');
  });
}
