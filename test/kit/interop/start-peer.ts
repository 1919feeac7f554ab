// Starting a real BGP peer (BIRD 2, GoBGP or FRR) on one side of a link, in its own private temp dir (config,
// control socket, pid file and logs); none of the system's daemon instances is touched.
//
// ## Peers
//   const bird = await startPeer('bird', link, {
//     asn: 65001,                         // routerId defaults to the side's IPv4 address
//     neighbors: [{ address: link.local.v4, asn: 65000, families: ['ipv4'], passive?, holdTime?, port?,
//                   gracefulRestart?: true | { restartTime } }],
//     announce: ['10.1.0.0/24'],           // or { prefix, communities?, largeCommunities?, med? }
//     side: 'peer',                        // default; 'local' runs it in link.local.ns
//   });
// kind is 'bird' | 'gobgp' | 'frr'. families default to the neighbour address's family. Every peer accepts
// everything and exports everything it has (its announcements and, like a router, what it learned) to every
// neighbour; eBGP policy gates (FRR's ebgp-requires-policy, BIRD's mandatory filters) are opened. Timers are made
// test-friendly (connect retry 1-2 s, BIRD error wait 1-5 s, FRR MRAI 0).
// A Peer has:
//   state(addr)            -> 'Idle'|'Connect'|'Active'|'OpenSent'|'OpenConfirm'|'Established'|'Down'|'Unknown'
//   neighbor(addr)         -> { state, lastError, raw }
//   routes(family)         -> Route[] { prefix, nexthop, nexthops, asPath, origin, med, localPref, communities,
//                             largeCommunities, from (neighbour address, null = originated here), best, stale }
//   routeCount(family)     -> number of prefixes in the peer's table (cheap; for big tables)
//   announce(prefix | spec), withdraw(prefix)   (kept across restart())
//   stop() graceful (SIGTERM, Cease sent), kill() SIGKILL (FRR: bgpd only, zebra keeps running),
//   restart({ gracefulRestart }) stop if running, then start again; gracefulRestart=true starts BIRD with -R and
//                             gobgpd with -r (restarting-speaker R bit); FRR sets the R bit on every start anyway.
//   With gracefulRestart on a neighbour, FRR also gets `preserve-fw-state` (F bit), else a helper flushes its
//   routes when bgpd dies.
//   logs(lines?)           -> tail of the daemon's logs; describe() -> logs plus the daemon's own status dump
//   waitEstablished(addr, timeoutMs?), waitRoute(family, prefix, { from?, present?, timeoutMs? })
//
// Quirks worth knowing (found on Debian 12: bird 2.0.12, gobgpd 3.10, frr 8.4.4): see the per-kind files
// (bird-peer.ts, gobgp-peer.ts, frr-peer.ts).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BirdPeer } from './bird-peer.ts';
import { FrrPeer } from './frr-peer.ts';
import { GobgpPeer } from './gobgp-peer.ts';
import { registry, TMP_PREFIX, type Link } from './netns.ts';
import { normAnnouncement } from './normalise.ts';
import type { Peer, PeerKind, PeerOptions } from './peer-types.ts';
import { assertPrereqs } from './prereqs.ts';
import { HarnessError } from './wait-for.ts';

let peerCounter = 0;

export async function startPeer(kind: PeerKind, link: Link, opts: PeerOptions): Promise<Peer> {
  assertPrereqs([kind]);
  const side = opts.side === 'local' ? link.local : link.peer;
  const name = opts.name ?? `${kind}${++peerCounter}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}${process.pid}-${name}-`));
  registry.dirs.add(dir);
  fs.chmodSync(dir, 0o755); // FRR's daemons run as user frr and must reach DIR/frr
  const full: PeerOptions = {
    ...opts,
    routerId: opts.routerId ?? side.v4,
    announce: (opts.announce ?? []).map(normAnnouncement),
  };
  const Ctor = kind === 'bird' ? BirdPeer : kind === 'gobgp' ? GobgpPeer : FrrPeer;
  const peer = new Ctor(name, side.ns, dir, full);
  (link as Link & { peers?: Set<{ dispose(): Promise<void> }> }).peers?.add(peer);
  try {
    await peer.start();
  } catch (e) {
    const logs = peer.logs(40);
    await peer.dispose();
    throw new HarnessError(`starting ${kind} ${name} in ${side.ns.name} failed: ${(e as Error).message}`, logs);
  }
  return peer;
}
