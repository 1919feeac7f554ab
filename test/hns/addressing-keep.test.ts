// Calico's layout records no hostReservation, so every Windows block there reserves 0, 1, 2 and last and "the
// first block" would be the lowest one: a lower block claimed later (the claim walk wraps) would move the gateway
// under running pods. With the gateways HNS holds passed as `keep`, the block holding one stays first.
import t from 'tap';
import fc from 'fast-check';
import { hnsAddressing, type AddressingBlock } from '../../src/hns/addressing.ts';

const pool = { name: 'p', cidr: '10.244.0.0/24' };
const calicoBlock = (i: number): AddressingBlock => ({ cidr: `10.244.0.${i * 16}/28`, pool: 'p', reserved: [0, 1, 2, 15] });

t.test('a lower block claimed later does not move the gateway in force', async (t) => {
  const before = hnsAddressing([pool], [calicoBlock(8)]);
  t.equal(before.pools[0].gateway, '10.244.0.129');
  const after = [calicoBlock(8), calicoBlock(2)];
  t.equal(hnsAddressing([pool], after).pools[0].gateway, '10.244.0.33', 'without keep: the lowest block');
  const kept = hnsAddressing([pool], after, false, new Set([before.pools[0].gateway]));
  t.equal(kept.pools[0].gateway, '10.244.0.129', 'with keep: the block already holding the gateway');
  t.equal(kept.pools[0].hostEndpoint, '10.244.0.130');
  t.equal(kept.pools[0].firstBlock, '10.244.0.128/28');
  t.same(kept.pools[0].blocks, ['10.244.0.32/28', '10.244.0.128/28']);
  t.equal(hnsAddressing([pool], after, false, new Set(['10.9.9.9'])).pools[0].gateway, '10.244.0.33', 'a gateway in no block of ours is ignored');
  const marked = [{ ...calicoBlock(2), hostReservation: true }, calicoBlock(8)];
  t.equal(hnsAddressing([pool], marked, false, new Set(['10.244.0.129'])).pools[0].gateway, '10.244.0.33', 'our own layout\'s marked first block wins');
});

t.test('property: the kept gateway\'s block is first, whatever blocks come and in what order', async (t) => {
  fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 0, max: 15 }), { minLength: 1, maxLength: 8 }), fc.nat(), (idx, pick) => {
    const blocks = idx.map(calicoBlock);
    const chosen = idx[pick % idx.length];
    const gw = `10.244.0.${chosen * 16 + 1}`;
    const r = hnsAddressing([pool], blocks, false, new Set([gw]));
    // Oracle: the kept block, by construction; without keep, the lowest index.
    const lowest = Math.min(...idx);
    return r.pools[0].gateway === gw && hnsAddressing([pool], blocks).pools[0].gateway === `10.244.0.${lowest * 16 + 1}`;
  }), { numRuns: 300 });
  t.pass('held for 300 runs');
});
