// Overlay remote routes from the datastore: every other node's block becomes exactly one RemoteSubnetRoute policy
// carrying that node's published provider address and its own DR MAC; nodes that published nothing get none and are
// reported; our own blocks are never remote; a second plan from the applied state is empty. Oracle: a plain loop
// over the generated blocks.
import t from 'tap';
import fc from 'fast-check';
import { buildDesired } from '../../src/hns/desired.ts';
import { FakeHns } from '../../src/hns/fake.ts';
import { planHns } from '../../src/hns/planner.ts';
import { type HnsNetwork, emptySnapshot } from '../../src/hns/model.ts';
import { mergeOverlay, overlayRoutes, type OverlayBlock, type OverlayFacts } from '../../src/hns/overlay.ts';
import { config } from './helpers.ts';

const SELF = 'win-0';

/** Up to 8 nodes (win-0 is us), each with facts or not; blocks: distinct /26s of 10.0.0.0/16 spread over them. */
const world = fc.record({
  nodes: fc.array(fc.record({ facts: fc.boolean(), pa: fc.integer({ min: 1, max: 250 }), mac: fc.integer({ min: 0, max: 0xffff }) }), { minLength: 1, maxLength: 8 }),
  blocks: fc.uniqueArray(fc.integer({ min: 0, max: 1022 }), { maxLength: 60 }),
  owners: fc.array(fc.nat(), { minLength: 60, maxLength: 60 }),
});

interface World { nodes: { facts: boolean; pa: number; mac: number }[]; blocks: number[]; owners: number[] }

function materialise(w: World) {
  const facts = new Map<string, OverlayFacts>();
  w.nodes.forEach((n, i) => {
    const hex = n.mac.toString(16).toUpperCase().padStart(4, '0');
    if (n.facts) facts.set(`win-${i}`, { providerAddress: `192.168.${i}.${n.pa}`, drMac: `00-15-5D-00-${hex.slice(0, 2)}-${hex.slice(2)}` });
  });
  // Our first block (the network exists only once this node has one: HNS wants a subnet), then the generated ones.
  const blocks: OverlayBlock[] = [{ cidr: '10.0.255.192/26', host: SELF }, ...w.blocks.map((b, j) => ({
    cidr: `10.0.${b >> 2}.${(b & 3) * 64}/26`,
    host: `win-${w.owners[j] % w.nodes.length}`,
  }))];
  return { facts, blocks };
}

t.test('property: every remote block -> exactly one RemoteSubnetRoute with its node\'s PA and MAC', async (t) => {
  fc.assert(
    fc.property(world, (w) => {
      const { facts, blocks } = materialise(w);
      const own = blocks.filter((b) => b.host === SELF).map((b) => b.cidr);
      const store = overlayRoutes(blocks, facts, SELF);
      const d = buildDesired({
        config: config('overlay', { pools: [{ cidr: '10.0.0.0/16', gateway: '10.0.255.193' }], providerAddress: facts.get(SELF)?.providerAddress }),
        localBlocks: own,
        remoteRoutes: mergeOverlay(store, blocks, SELF, []),
      });
      const fake = new FakeHns();
      const r = fake.applyAll(planHns(emptySnapshot(), d).ops);
      if (r.error) throw new Error(`apply failed: ${JSON.stringify(r)}`);
      const net = fake.snapshot().Networks.find((n: HnsNetwork) => n.Name === 'pods')!;
      const rsr = (net.Policies ?? []).filter((p) => p.Type === 'RemoteSubnetRoute').map((p) => p.Settings as Record<string, unknown>);
      // Oracle.
      for (const b of blocks) {
        const mine = rsr.filter((s) => s.DestinationPrefix === b.cidr);
        const f = facts.get(b.host);
        if (b.host === SELF || !f) {
          if (mine.length !== 0) throw new Error(`${b.cidr} of ${b.host}: expected no policy, got ${JSON.stringify(mine)}`);
          continue;
        }
        if (mine.length !== 1) throw new Error(`${b.cidr}: expected one policy, got ${mine.length}`);
        const s = mine[0];
        if (s.ProviderAddress !== f.providerAddress || s.DistributedRouterMacAddress !== f.drMac || s.IsolationId !== 4096) {
          throw new Error(`${b.cidr} of ${b.host}: ${JSON.stringify(s)} but facts ${JSON.stringify(f)}`);
        }
      }
      const expected = blocks.filter((b) => b.host !== SELF && facts.has(b.host)).length;
      if (rsr.length !== expected) throw new Error(`${rsr.length} policies for ${expected} routable remote blocks`);
      // Missing: exactly the other nodes with blocks and no facts, each with all its blocks.
      const want = new Map<string, string[]>();
      for (const b of blocks) if (b.host !== SELF && !facts.has(b.host)) want.set(b.host, [...(want.get(b.host) ?? []), b.cidr]);
      const got = new Map(store.missing.map((m) => [m.node, m.blocks]));
      if (got.size !== want.size) throw new Error(`missing ${JSON.stringify(store.missing)}`);
      for (const [n, list] of want) if (JSON.stringify([...list].sort()) !== JSON.stringify(got.get(n))) throw new Error(`missing for ${n}`);
      // Steady state: planning again from what HNS holds does nothing.
      const again = planHns(fake.snapshot(), d).ops;
      if (again.length !== 0) throw new Error(`second plan: ${JSON.stringify(again)}`);
    }),
    { numRuns: 150 },
  );
  t.pass('150 worlds');
});

t.test('a node publishing a new MAC or PA: its policies are replaced, nobody else\'s touched', async (t) => {
  const blocks: OverlayBlock[] = [{ cidr: '10.0.1.0/26', host: 'win-1' }, { cidr: '10.0.2.0/26', host: 'win-2' }, { cidr: '10.0.3.0/26', host: SELF }];
  const facts = new Map<string, OverlayFacts>([
    ['win-1', { providerAddress: '192.168.0.11', drMac: '00-15-5D-00-00-11' }],
    ['win-2', { providerAddress: '192.168.0.12', drMac: '00-15-5D-00-00-12' }],
  ]);
  const cfg = config('overlay', { pools: [{ cidr: '10.0.0.0/16', gateway: '10.0.3.1' }] });
  const build = () => buildDesired({ config: cfg, localBlocks: ['10.0.3.0/26'], remoteRoutes: mergeOverlay(overlayRoutes(blocks, facts, SELF), blocks, SELF, []) });
  const fake = new FakeHns();
  fake.applyAll(planHns(fake.snapshot(), build()).ops);
  facts.set('win-2', { providerAddress: '192.168.0.22', drMac: '00-15-5D-00-00-22' });
  const ops = planHns(fake.snapshot(), build()).ops;
  const touched = ops.flatMap((o) => JSON.stringify(o.body).match(/10\.0\.\d\.0\/26/g) ?? []);
  t.same([...new Set(touched)], ['10.0.2.0/26'], 'only win-2\'s block is re-sent');
  fake.applyAll(ops);
  const rsr = fake.snapshot().Networks[0].Policies!.filter((p) => p.Type === 'RemoteSubnetRoute').map((p) => p.Settings);
  t.same(rsr.find((s: any) => s.DestinationPrefix === '10.0.2.0/26'),
    { DestinationPrefix: '10.0.2.0/26', IsolationId: 4096, ProviderAddress: '192.168.0.22', DistributedRouterMacAddress: '00-15-5D-00-00-22' });
});

t.test('RIB routes: kept outside the store\'s blocks, dropped over them (the store routes those, or nobody)', async (t) => {
  const blocks: OverlayBlock[] = [{ cidr: '10.0.1.0/26', host: 'win-1' }, { cidr: '10.0.2.0/26', host: 'linux-1' }];
  const facts = new Map([['win-1', { providerAddress: '192.168.0.11', drMac: '00-15-5D-00-00-11' }]]);
  const store = overlayRoutes(blocks, facts, SELF);
  t.same(store.missing, [{ node: 'linux-1', blocks: ['10.0.2.0/26'], reason: 'no provider address and DR MAC published for this node' }]);
  const merged = mergeOverlay(store, blocks, SELF, [
    { prefix: '10.0.2.0/26', nextHop: '192.168.0.99' },
    { prefix: '10.0.1.5/32', nextHop: '192.168.0.99' },
    { prefix: '10.7.0.0/26', nextHop: '192.168.0.77' },
  ]);
  t.same(merged.map((r) => `${r.prefix} ${r.nextHop} ${r.drMac ?? '-'}`), ['10.0.1.0/26 192.168.0.11 00-15-5D-00-00-11', '10.7.0.0/26 192.168.0.77 -']);
});

t.test('a remote route with a bad DR MAC is ignored with the reason, not thrown on', async (t) => {
  const d = buildDesired({ config: config('overlay'), localBlocks: [], remoteRoutes: [{ prefix: '10.0.5.0/26', nextHop: '192.168.0.5', drMac: 'zz' }] });
  t.same(d.remoteSubnetRoutes, []);
  t.same(d.ignored, [{ prefix: '10.0.5.0/26', reason: 'DR MAC "zz" is not a MAC address' }]);
});
