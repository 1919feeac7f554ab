// TCP-MD5 (RFC 2385) and GTSM (RFC 5082) against real BIRD and FRR in the netns lab: the same password gives an
// Established session with routes both ways, with us connecting (the peer passive) and with the peer connecting
// (us passive); a wrong password gives no session and /peers says why; GTSM with hops 1 on both sides comes up,
// GTSM on one side only does not. Needs root, bird2 and frr (REQUIRE_PEERS=1: fails without them).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink } from '../kit/interop/netns.ts';
import type { NeighborOptions, PeerKind } from '../kit/interop/peer-types.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { startOurs, type OurPeer } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, ['bird', 'frr']);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-md5-interop-${process.pid}-`));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
function passwordFile(name: string, text: string): { file: string } {
  const f = path.join(dir, name);
  fs.writeFileSync(f, `${text}\n`, { mode: 0o600 });
  return { file: f };
}

interface Case {
  kind: PeerKind;
  name: string;
  /** who opens the TCP connection */
  connector: 'us' | 'peer';
  theirs: Partial<NeighborOptions>;
  ours: Partial<OurPeer>;
}

/** Link, peer and our speaker for one case; resolves once both sides are configured and started. */
async function lab(t: { teardown(fn: () => unknown): unknown }, c: Case, n: number) {
  const link = await createLink({ name: c.name, t });
  const L = link.local;
  const P = link.peer;
  const theirRoute = `10.${70 + n}.1.0/24`;
  const ourRoute = `10.${70 + n}.2.0/24`;
  const peer = await startPeer(c.kind, link, {
    asn: 65002,
    neighbors: [{ address: L.v4, asn: 65001, families: ['ipv4'], holdTime: 9, passive: c.connector === 'us', ...c.theirs }],
    announce: [theirRoute],
  });
  const us = await startOurs(link, {
    asn: 65001,
    peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], holdTime: 9, passive: c.connector === 'peer', ...c.ours }],
    announce: [ourRoute],
  }, t);
  return { link, L, P, peer, us, theirRoute, ourRoute };
}

// Six cases of about 30 s each (the daemon's start dominates). GTSM rides along with TCP-MD5, as deployed: with
// BIRD when we connect (our connecting socket), with FRR when it connects (our listener's TTL 255 for the
// SYN-ACK and the minimum TTL on the accepted socket).
const CASES: Array<{ kind: PeerKind; connector: 'us' | 'peer'; gtsm: boolean }> = [
  { kind: 'bird', connector: 'us', gtsm: true },
  { kind: 'bird', connector: 'peer', gtsm: false },
  { kind: 'frr', connector: 'us', gtsm: false },
  { kind: 'frr', connector: 'peer', gtsm: true },
];
let n = 0;
for (const { kind, connector, gtsm } of CASES) {
  const i = ++n;
  const who = connector === 'us' ? 'we connect' : `${kind} connects`;
  t.test(`TCP-MD5${gtsm ? ' and GTSM (hops 1)' : ''} with ${kind}, ${who}: Established, routes both ways`, { skip: gate }, async (t) => {
    const secret = `s3cret-${kind}-${i}`;
    const ttl = gtsm ? { ttlSecurity: 1 } : {};
    const { L, P, peer, us, theirRoute, ourRoute } = await lab(t, {
      kind, name: `md5${kind[0]}${i}`, connector, theirs: { password: secret, ...ttl }, ours: { password: passwordFile(`pw${i}`, secret), ...ttl },
    }, i);
    const st = await us.waitPeer(P.v4, 'Established', { peers: [peer], timeoutMs: 90_000 }) as unknown as Record<string, unknown>;
    t.match(st, { md5: true, refused: null, ttlSecurity: gtsm ? 1 : null });
    t.equal(st.remotePort === 179, connector === 'us', `the connection is ${connector === 'us' ? 'ours (to port 179)' : 'theirs'}`);
    t.notMatch(JSON.stringify(await us.peers()), new RegExp(secret), 'the password is not in /peers');
    t.notMatch(us.logs(100_000), new RegExp(secret), 'nor in our log');
    await us.waitRoute(theirRoute, { from: P.v4, peers: [peer] });
    t.ok(await peer.waitRoute('ipv4', ourRoute, { from: L.v4 }), `${kind} has our route`);
  });
}

{
  const i = ++n;
  t.test('TCP-MD5 with bird, wrong password: no session, /peers says why', { skip: gate }, async (t) => {
    const { L, P, peer, us } = await lab(t, {
      kind: 'bird', name: `md5w${i}`, connector: 'us', theirs: { password: 'the right one' }, ours: { password: passwordFile(`pw${i}`, 'a wrong one') },
    }, i);
    const st = await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as { connectAttempts?: number; lastError: string | null; state: string };
      return (p.connectAttempts ?? 0) >= 2 && p;
    }, 'two unanswered connection attempts', { peers: [peer], timeoutMs: 60_000 });
    t.not(st.state, 'Established');
    t.match(st.lastError, /with TCP-MD5, a wrong or missing password on either side drops the SYN without an answer/);
    t.not(await peer.state(L.v4), 'Established', 'bird has no session either');
  });
}

{
  const i = ++n;
  t.test('GTSM on one side only (FRR hops 1, we send at the default TTL): no lasting session', { skip: gate }, async (t) => {
    const { L, P, peer, us } = await lab(t, { kind: 'frr', name: `gtsmx${i}`, connector: 'us', theirs: { ttlSecurity: 1 }, ours: {} }, i);
    // FRR drops what we send below TTL 255: our connection attempts or OPENs go unanswered until they fail.
    const st = await us.wait(async () => {
      const p = await us.peer(P.v4) as unknown as { connectAttempts?: number; lastError: string | null; state: string; flaps: number };
      return ((p.connectAttempts ?? 0) >= 2 || p.lastError !== null) && p;
    }, 'an attempt failed', { peers: [peer], timeoutMs: 60_000 });
    t.not(st.state, 'Established');
    // FRR puts its minimum TTL on an accepted connection's socket after accepting it, so now and then (CI saw it
    // at load 2) our first segments get through and a session comes up before FRR starts dropping them: what holds
    // is that no session lasts, not that none ever forms (our side sets its minimum TTL before connecting, so
    // test/interop/gtsm-2hop's one-sided case, GTSM on ours, does check that none ever forms).
    t.comment(`flaps before the check: ${st.flaps}`);
    t.not(await peer.state(L.v4), 'Established');
  });
}

