// Graceful restart measured (RFC 4724, we are the restarting speaker): our daemon announces N routes to BIRD,
// GoBGP and FRR at once (one namespace of ours, three peer namespaces), is killed with SIGKILL and started again
// with the same config. Each peer's table is polled throughout: routes of ours lost at each peer (goal 0), whether
// they were held stale, and the time from our restart until every route is fresh again (stale replaced) at each
// peer, in all and from when our status endpoint answered (the process start itself is most of it on a loaded
// machine). Root and bird2, gobgpd, frr.
//
//   npm run bench:bgp-gr -- [--routes 500] [--rounds 3] [--poll-ms 200]
//
// Prints one JSON line per round and a final JSON line with the medians.
import { parseArgs } from 'node:util';
import { cleanupAll, createLink } from '../test/kit/interop/netns.ts';
import type { Peer, PeerKind } from '../test/kit/interop/peer-types.ts';
import { assertPrereqs } from '../test/kit/interop/prereqs.ts';
import { startPeer } from '../test/kit/interop/start-peer.ts';
import { startOurs } from '../test/kit/interop/our-speaker.ts';

const { values } = parseArgs({ options: { routes: { type: 'string', default: '500' }, rounds: { type: 'string', default: '3' }, 'poll-ms': { type: 'string', default: '200' } } });
const N = Number(values.routes);
const ROUNDS = Number(values.rounds);
const POLL = Number(values['poll-ms']);
const OUR_AS = 65001;
const KINDS: PeerKind[] = ['bird', 'gobgp', 'frr'];

const ours = Array.from({ length: N }, (_, i) => `10.${150 + (i >> 8)}.${i & 255}.0/24`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};

async function main(): Promise<void> {
  assertPrereqs(KINDS);
  const first = await createLink({ name: 'grb' });
  const links = [first, await createLink({ name: 'grg', local: first.local.ns }), await createLink({ name: 'grf', local: first.local.ns })];
  const peers: Peer[] = [];
  for (const [i, kind] of KINDS.entries()) {
    const l = links[i];
    peers.push(await startPeer(kind, l, { asn: 65010 + i, neighbors: [{ address: l.local.v4, asn: OUR_AS, families: ['ipv4'], holdTime: 9, gracefulRestart: { restartTime: 120 } }] }));
  }
  const us = await startOurs(first, {
    asn: OUR_AS,
    gracefulRestart: { restartTime: 120 },
    peers: KINDS.map((_, i) => ({ address: links[i].peer.v4, asn: 65010 + i, families: ['ipv4'] as ('ipv4' | 'ipv6')[], holdTime: 9 })),
    announce: ours,
  });
  const mine = async (i: number) => {
    const rs = await peers[i].routes('ipv4').catch(() => null);
    if (!rs) return null;
    const set = new Set(ours);
    const held = rs.filter((r) => set.has(r.prefix) && r.from === links[i].local.v4);
    return { held: held.length, fresh: held.filter((r) => !r.stale).length, stale: held.filter((r) => r.stale).length };
  };
  const waitAll = async (what: string, pred: (c: { held: number; fresh: number }) => boolean, ms = 120_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const cs = await Promise.all(KINDS.map((_, i) => mine(i)));
      if (cs.every((c) => c && pred(c))) return;
      if (Date.now() > end) throw new Error(`${what}: ${JSON.stringify(cs)}\n${us.logs(30)}`);
      await sleep(POLL);
    }
  };
  await waitAll('every peer has our routes', (c) => c.fresh === N);

  type Result = { lost: number; staleSeen: number; freshAfterMs: number; freshAfterUpMs: number };
  const rounds: Record<string, Result>[] = [];
  const upMs: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const res: Record<string, Result> = {};
    let restartAt = 0;
    let upAt = 0;
    const watchers = KINDS.map(async (kind, i) => {
      let minHeld = N;
      let staleMax = 0;
      for (;;) {
        const c = await mine(i);
        if (c) {
          minHeld = Math.min(minHeld, c.held);
          staleMax = Math.max(staleMax, c.stale);
          if (restartAt > 0 && c.fresh === N) {
            const now = Date.now();
            res[kind] = { lost: N - minHeld, staleSeen: staleMax, freshAfterMs: now - restartAt, freshAfterUpMs: upAt > 0 ? now - upAt : 0 };
            return;
          }
        }
        await sleep(POLL);
      }
    });
    await us.kill();
    // Down long enough for every peer to notice (hold 9 s, or the TCP reset) before coming back.
    for (const [i] of KINDS.entries()) {
      const l = links[i];
      const end = Date.now() + 30_000;
      while ((await peers[i].state(l.local.v4)) === 'Established' && Date.now() < end) await sleep(POLL);
    }
    await sleep(1000);
    restartAt = Date.now();
    await us.start();
    upAt = Date.now();
    upMs.push(upAt - restartAt);
    await Promise.race([Promise.all(watchers), sleep(180_000).then(() => {
      throw new Error(`round ${round}: routes not fresh at every peer within 180 s: ${JSON.stringify(res)}`);
    })]);
    console.log(JSON.stringify({ round, routes: N, statusUpAfterMs: upAt - restartAt, ...res }));
    rounds.push(res);
    await sleep(2000);
  }
  const summary: Record<string, unknown> = { bench: 'bgp-gr-restart', routes: N, rounds: ROUNDS, pollMs: POLL, statusUpAfterMsMedian: median(upMs) };
  for (const kind of KINDS) {
    summary[kind] = {
      lostMax: Math.max(...rounds.map((r) => r[kind].lost)),
      staleSeenMedian: median(rounds.map((r) => r[kind].staleSeen)),
      freshAfterMsMedian: median(rounds.map((r) => r[kind].freshAfterMs)),
      // 0: the routes were fresh before our status endpoint answered.
      freshAfterUpMsMedian: median(rounds.map((r) => r[kind].freshAfterUpMs)),
    };
  }
  await us.dispose();
  await cleanupAll();
  console.log(JSON.stringify(summary));
}

main().catch(async (e) => {
  console.error(e);
  await cleanupAll();
  process.exit(1);
});
