// /metrics reads each shared part of the daemon (peer status, pool and block usage, HNS counters) once per scrape,
// whatever number of metrics use it, and afresh at the next scrape.
import t from 'tap';
import type { PeerStatus } from '../../src/bgp/peer.ts';
import { lazyMetrics, perScrape, type MetricsSource } from '../../src/daemon/metrics.ts';

function peer(i: number, state: string, accepted: number): PeerStatus {
  return {
    address: `10.0.0.${i}`, asn: 65000 + i, state, prefixes: { received: accepted, accepted, sent: 0, stale: 0 },
    messages: { received: 1, sent: 1, updatesReceived: i, updatesSent: 0 }, errorCounts: {}, maxPrefixes: null, bfd: null,
  } as unknown as PeerStatus;
}

function source(peers: () => PeerStatus[]) {
  const calls = { peers: 0, poolUsage: 0, blockUsage: 0, hns: 0 };
  const src: MetricsSource = {
    peers: () => (calls.peers++, peers()),
    ribSize: () => 7,
    poolUsage: async () => (calls.poolUsage++, [{ name: 'p', blocks: 1, allocated: 2, free: 60, reserved: 2 }]),
    announced: () => 1,
    dataplaneErrors: () => 0,
    dataplaneLastSuccess: () => null,
    ready: () => true,
    hns: () => (calls.hns++, { leakedRemoved: 0, orphansReleased: 0, forwardingSet: 0 }),
    blockUsage: async () => (calls.blockUsage++, [{ cidr: '10.1.0.0/26', pool: 'p', allocated: 2, free: 60, reserved: 2 }]),
    nodeInfo: () => ({ node: 'n', os: 'linux', asn: '65010', router_id: '10.0.0.9', version: 'test' }),
  };
  return { src, calls };
}

t.test('perScrape: each shared read once until clear()', async (t) => {
  const { src, calls } = source(() => [peer(1, 'Established', 3)]);
  const s = perScrape(src);
  t.equal(s.peers(), s.peers(), 'the same reading');
  await s.poolUsage();
  await s.poolUsage();
  s.hns();
  s.hns();
  t.same(calls, { peers: 1, poolUsage: 1, blockUsage: 0, hns: 1 });
  s.clear();
  s.peers();
  t.equal(calls.peers, 2, 'read again after clear()');
  t.equal(s.ribSize(), 7, 'other reads pass through');
});

t.test('lazyMetrics: one peer-status read per scrape, values of that scrape', async (t) => {
  let peers = [peer(1, 'Established', 3), peer(2, 'Active', 0)];
  const { src, calls } = source(() => peers);
  const scrape = lazyMetrics(() => src);
  const first = await scrape();
  t.equal(calls.peers, 1, 'the peers are read once for every per-peer metric');
  t.equal(calls.poolUsage, 1);
  t.equal(calls.blockUsage, 1);
  t.equal(calls.hns, 1);
  t.match(first.body, /^blockspeaker_bgp_peer_up\{peer="10\.0\.0\.1"\} 1$/m);
  t.match(first.body, /^blockspeaker_bgp_peer_up\{peer="10\.0\.0\.2"\} 0$/m);
  t.match(first.body, /^blockspeaker_bgp_prefixes\{peer="10\.0\.0\.1",kind="accepted"\} 3$/m);
  t.equal(first.contentType, 'text/plain');
  peers = [peer(1, 'Established', 5), peer(2, 'Established', 4)];
  const second = await scrape();
  t.equal(calls.peers, 2, 'and afresh at the next scrape');
  t.match(second.body, /^blockspeaker_bgp_peer_up\{peer="10\.0\.0\.2"\} 1$/m);
  t.match(second.body, /^blockspeaker_bgp_prefixes\{peer="10\.0\.0\.1",kind="accepted"\} 5$/m);
});
