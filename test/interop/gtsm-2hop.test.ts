// GTSM (RFC 5082) across a router: three namespaces, us -- router (ip_forward) -- peer, so every packet arrives
// with TTL 254. ttlSecurity 2 on both sides (BIRD `ttl security on; multihop 2`, which is what Calico's confd
// renders for BGPPeer ttlSecurity 2 in bird.cfg.template; FRR `ttl-security hops 2`)
// comes up Established with routes; ttlSecurity 1 on our side (we accept only TTL 255) never does, and /peers says
// why. Needs root, bird2 and frr (REQUIRE_PEERS=1: fails without them).
import t, { type Test } from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink, execInNetns, type Link } from '../kit/interop/netns.ts';
import type { PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, ['bird', 'frr']);

/** us -- R -- peer: `a` is us/R, `b` is R/peer; routes across R both ways, R forwarding. */
async function twoHops(t: Test, name: string): Promise<{ a: Link; b: Link }> {
  const a = await createLink({ name: `${name}a`, t });
  const b = await createLink({ name: `${name}b`, local: a.peer.ns, t });
  await execInNetns(a.peer.ns, '/usr/sbin/sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  await execInNetns(a.local.ns, '/usr/sbin/ip', ['route', 'add', `${b.peer.v4}/32`, 'via', a.peer.v4]);
  await execInNetns(b.peer.ns, '/usr/sbin/ip', ['route', 'add', `${a.local.v4}/32`, 'via', b.local.v4]);
  return { a, b };
}

let n = 0;
for (const kind of ['bird', 'frr'] as PeerKind[]) {
  for (const ours of [2, 1]) {
    const i = ++n;
    const title = ours === 2
      ? `GTSM two hops away with ${kind}, ttlSecurity 2 on both sides: Established, routes both ways`
      : `GTSM two hops away with ${kind}, ttlSecurity 1 on our side: never Established, and /peers says why`;
    t.test(title, { skip: gate }, async (t) => {
      const { a, b } = await twoHops(t, `g2${kind[0]}${ours}`);
      const us = a.local.v4;
      const them = b.peer.v4;
      const theirRoute = `10.${90 + i}.1.0/24`;
      const ourRoute = `10.${90 + i}.2.0/24`;
      // they wait, we connect: our SYN and their SYN-ACK each cross the router once
      const peer = await startPeer(kind, b, {
        asn: 65002,
        neighbors: [{ address: us, asn: 65001, families: ['ipv4'], holdTime: 9, passive: true, ttlSecurity: 2 }],
        announce: [theirRoute],
      });
      const ourSide = await startOurs(a, {
        asn: 65001,
        peers: [{ address: them, asn: 65002, families: ['ipv4'], holdTime: 9, ttlSecurity: ours }],
        announce: [ourRoute],
      }, t);
      if (ours === 2) {
        const st = await ourSide.waitPeer(them, 'Established', { peers: [peer], timeoutMs: 90_000 }) as unknown as Record<string, unknown>;
        t.match(st, { ttlSecurity: 2, refused: null });
        await ourSide.waitRoute(theirRoute, { from: them, peers: [peer] });
        t.ok(await peer.waitRoute('ipv4', ourRoute, { from: us }), `${kind} has our route`);
      } else {
        // their SYN-ACK arrives at TTL 254, below our minimum of 255: dropped by our kernel, attempt after attempt
        const st = await ourSide.wait(async () => {
          const p = await ourSide.peer(them) as unknown as { connectAttempts?: number; lastError: string | null; state: string; flaps: number };
          return (p.connectAttempts ?? 0) >= 2 && p.lastError !== null && p;
        }, 'two unanswered connection attempts', { peers: [peer], timeoutMs: 90_000 });
        t.not(st.state, 'Established');
        t.equal(st.flaps, 0, 'never was Established');
        t.match(st.lastError, /with GTSM \(ttlSecurity 1\), a segment arriving with TTL below 255 .* is dropped without an answer/);
        t.not(await peer.state(us), 'Established', `${kind} has no session either`);
      }
    });
  }
}
