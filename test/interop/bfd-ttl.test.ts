// RFC 5881 5 on the wire: a single-hop BFD speaker in the peer's namespace (our BfdManager in a child process,
// test/interop/bfd-sender.ts) sending otherwise valid Control packets with TTL 254 never brings our daemon's session
// Up, and every such packet is counted as a TTL discard in /peers; the same speaker sending with TTL 255 does.
// Needs root (REQUIRE_PEERS=1: fails without).
import t from 'tap';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { interopGate } from '../kit/interop/gate.ts';
import { createLink, runNodeInNetns } from '../kit/interop/netns.ts';
import { startOurs } from '../kit/interop/our-speaker.ts';

const gate = interopGate(t, []);
const SENDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bfd-sender.ts');
type Bfd = { state: string; discarded: number; packetsIn: number; lastDiscard: string | null; ttlCheck: { enforced: boolean } };

t.test('BFD packets received with TTL 254 bring no session up, with 255 they do', { skip: gate }, async (t) => {
  const link = await createLink({ name: 'bfdttl', t });
  const L = link.local;
  const P = link.peer;
  const us = await startOurs(link, { asn: 65001, peers: [{ address: P.v4, asn: 65002, families: ['ipv4'], bfd: { minRx: 300, minTx: 300, multiplier: 3 } }] }, t);
  const bfd = async () => (await us.peer(P.v4) as unknown as { bfd: Bfd }).bfd;

  const low = runNodeInNetns(P.ns, SENDER, [L.v4, '254'], { logFile: path.join(us.dir, 'sender-254.log') });
  t.teardown(() => low.kill());
  // counted, not timed: ten TTL-254 packets in a row, and the session Down at every look
  const st = await us.wait(async () => {
    const b = await bfd();
    if (b.state === 'Up' || b.packetsIn > 0) throw new Error(`a TTL-254 packet was taken: ${JSON.stringify(b)}`);
    return b.discarded >= 10 && b;
  }, 'ten TTL-254 packets discarded', { timeoutMs: 30_000 });
  t.match(st, { state: 'Down', packetsIn: 0, ttlCheck: { enforced: true }, lastDiscard: 'received with a TTL / Hop Limit other than 255 (RFC 5881 5)' });
  low.kill();
  await new Promise((r) => low.once('exit', r));

  const base = (await bfd()).discarded;
  const ok = runNodeInNetns(P.ns, SENDER, [L.v4, '255'], { logFile: path.join(us.dir, 'sender-255.log') });
  t.teardown(() => ok.kill());
  const up = await us.wait(async () => { const b = await bfd(); return b.state === 'Up' && b; }, 'BFD Up with TTL 255', { timeoutMs: 30_000 });
  t.ok(up.packetsIn > 0, 'packets taken');
  t.equal(up.discarded, base, 'none discarded at TTL 255');
});
