import t from 'tap';
import fc from 'fast-check';
import { parseIP } from '../../src/net/ip.ts';
import { Origin, asSequence, asSet, makeAttrs, type AttrsInit } from '../../src/rib/attrs.ts';
import { selectBest, type Path, type PeerInfo, type PeerType } from '../../src/rib/bestpath.ts';

type T = Parameters<Parameters<typeof t.test>[0]>[0];

let n = 0;
function path(source: string, attrs: AttrsInit, peer: Partial<PeerInfo> = {}): Path {
  n++;
  return {
    source,
    attrs: makeAttrs({ nextHop: parseIP('192.0.2.1'), ...attrs }),
    peer: { type: 'ebgp', routerId: 0x0a000000 + n, address: parseIP(`192.0.2.${n % 250}`), asn: 65000, ...peer },
    stale: false,
  };
}

// Each step test builds two paths equal on every earlier step, differing on the step under test in favour of `win`,
// and differing on every later step in favour of `lose`, so only that step can have picked `win`.
function decides(t: T, step: string, win: Path, lose: Path): void {
  for (const order of [[win, lose], [lose, win]]) {
    const s = selectBest(order)!;
    t.equal(s.best.source, win.source, `${step} picks ${win.source}`);
    t.equal(s.decidedBy, step);
  }
}

const rid = (x: number) => ({ routerId: x });
const addr = (s: string) => ({ address: parseIP(s) });

t.test('step: local routes beat learned ones', async (t) => {
  decides(t, 'local',
    path('ipam', { localPref: 50, asPath: [asSequence(1, 2, 3)], origin: Origin.INCOMPLETE, med: 9 }, { type: 'local', routerId: 9, address: null }),
    path('peer', { localPref: 500, asPath: [] }, { routerId: 1, ...addr('10.0.0.1') }),
  );
});

t.test('step: highest LOCAL_PREF (absent = 100)', async (t) => {
  decides(t, 'localPref',
    path('a', { localPref: 200, asPath: [asSequence(1, 2, 3)], origin: Origin.INCOMPLETE }, { type: 'ibgp', ...rid(9) }),
    path('b', { asPath: [asSequence(1)] }, { type: 'ebgp', ...rid(1) }),
  );
  decides(t, 'localPref',
    path('a', { asPath: [asSequence(1, 2, 3)] }, rid(9)), // default 100
    path('b', { localPref: 99, asPath: [asSequence(1)] }, rid(1)),
  );
});

t.test('step: shortest AS_PATH (AS_SET counts one)', async (t) => {
  decides(t, 'asPathLength',
    path('a', { asPath: [asSequence(5, 6), asSet(7, 8, 9)], origin: Origin.INCOMPLETE }, rid(9)),
    path('b', { asPath: [asSequence(5, 6, 7, 8)], origin: Origin.IGP }, rid(1)),
  );
});

t.test('step: lowest ORIGIN', async (t) => {
  decides(t, 'origin',
    path('a', { asPath: [asSequence(5)], origin: Origin.EGP, med: 50 }, { type: 'ibgp', ...rid(9) }),
    path('b', { asPath: [asSequence(5)], origin: Origin.INCOMPLETE, med: 1 }, { type: 'ebgp', ...rid(1) }),
  );
});

t.test('step: lowest MED from the same neighbour AS (absent = 0)', async (t) => {
  decides(t, 'med',
    path('a', { asPath: [asSequence(5, 1)], med: 10 }, { type: 'ibgp', ...rid(9) }),
    path('b', { asPath: [asSequence(5, 2)], med: 20 }, { type: 'ebgp', ...rid(1) }),
  );
  decides(t, 'med',
    path('a', { asPath: [asSequence(5, 1)] }, rid(9)),
    path('b', { asPath: [asSequence(5, 2)], med: 1 }, rid(1)),
  );
  // Different neighbour AS: MED is not compared, a later step decides.
  const a = path('a', { asPath: [asSequence(5, 1)], med: 10 }, rid(9));
  const b = path('b', { asPath: [asSequence(6, 1)], med: 20 }, rid(1));
  t.equal(selectBest([a, b])!.best.source, 'b');
  t.equal(selectBest([a, b])!.decidedBy, 'routerId');
  t.equal(selectBest([a, b], { alwaysCompareMed: true })!.best.source, 'a', 'always-compare-med');
});

t.test('step: eBGP over iBGP', async (t) => {
  decides(t, 'ebgp',
    path('a', { asPath: [asSequence(5)] }, { type: 'ebgp', ...rid(9), ...addr('10.0.0.9') }),
    path('b', { asPath: [asSequence(5)] }, { type: 'ibgp', ...rid(1), ...addr('10.0.0.1') }),
  );
});

t.test('step: lowest router ID, ORIGINATOR_ID standing in for it', async (t) => {
  decides(t, 'routerId',
    path('a', { asPath: [asSequence(5)], clusterList: [1, 2, 3] }, { ...rid(1), ...addr('10.0.0.9') }),
    path('b', { asPath: [asSequence(5)] }, { ...rid(2), ...addr('10.0.0.1') }),
  );
  decides(t, 'routerId',
    path('a', { asPath: [asSequence(5)], originatorId: 3, clusterList: [1, 2] }, { type: 'ibgp', ...rid(50) }),
    path('b', { asPath: [asSequence(5)], originatorId: 4, clusterList: [1] }, { type: 'ibgp', ...rid(2) }),
  );
});

t.test('step: shorter CLUSTER_LIST', async (t) => {
  decides(t, 'clusterList',
    path('a', { asPath: [asSequence(5)], originatorId: 7, clusterList: [1] }, { type: 'ibgp', ...rid(1), ...addr('10.0.0.9') }),
    path('b', { asPath: [asSequence(5)], originatorId: 7, clusterList: [1, 2] }, { type: 'ibgp', ...rid(1), ...addr('10.0.0.1') }),
  );
});

t.test('step: lowest peer address, then source name', async (t) => {
  decides(t, 'peerAddress',
    path('z', { asPath: [asSequence(5)] }, { ...rid(1), ...addr('10.0.0.1') }),
    path('a', { asPath: [asSequence(5)] }, { ...rid(1), ...addr('10.0.0.2') }),
  );
  decides(t, 'source',
    path('ipam', {}, { type: 'local', routerId: 1, address: null }),
    path('static', {}, { type: 'local', routerId: 1, address: null }),
  );
});

t.test('no candidates, one candidate', async (t) => {
  t.equal(selectBest([]), undefined);
  const p = path('a', {});
  t.same(selectBest([p]), { best: p, multipath: [p], decidedBy: 'only' });
});

t.test('MED is not transitive: selection eliminates within neighbour AS first', async (t) => {
  // Pairwise: A beats B (same AS 1, lower MED); B beats C (different AS, lower router ID); C beats A (router ID).
  const A = path('A', { asPath: [asSequence(1, 9)], med: 10 }, rid(3));
  const B = path('B', { asPath: [asSequence(1, 9)], med: 20 }, rid(1));
  const C = path('C', { asPath: [asSequence(2, 9)], med: 5 }, rid(2));
  // RFC 4271 9.1.2.2 c: B is removed by A inside AS 1; of the survivors A and C, C has the lower router ID.
  const perms = [[A, B, C], [A, C, B], [B, A, C], [B, C, A], [C, A, B], [C, B, A]];
  for (const p of perms) t.equal(selectBest(p)!.best.source, 'C', p.map((x) => x.source).join(''));
  // A naive pairwise "better than" cannot be a sort key: it has a cycle.
  t.equal(selectBest([A, B])!.best.source, 'A');
  t.equal(selectBest([B, C])!.best.source, 'B');
  t.equal(selectBest([C, A])!.best.source, 'C');
});

t.test('ECMP: multipath set is the paths equal through the eBGP/iBGP step', async (t) => {
  const a = path('a', { asPath: [asSequence(1, 9)], med: 5 }, rid(4));
  const b = path('b', { asPath: [asSequence(2, 9)], med: 50 }, rid(2));
  const c = path('c', { asPath: [asSequence(3, 9)] }, rid(3));
  const worseMed = path('d', { asPath: [asSequence(1, 8)], med: 6 }, rid(1));
  const longer = path('e', { asPath: [asSequence(4, 5, 9)] }, rid(1));
  const ibgp = path('f', { asPath: [asSequence(5, 9)] }, { type: 'ibgp', ...rid(1) });
  const all = [a, b, c, worseMed, longer, ibgp];
  const s = selectBest(all, { maxPaths: 8 })!;
  t.equal(s.best.source, 'b');
  t.same(s.multipath.map((p) => p.source), ['b', 'c', 'a'], 'ordered by tie-break, losers excluded');
  t.same(selectBest(all, { maxPaths: 2 })!.multipath.map((p) => p.source), ['b', 'c'], 'capped at maxPaths');
  t.same(selectBest(all)!.multipath.map((p) => p.source), ['b'], 'default: no ECMP');
  // iBGP-only paths can be multipath among themselves.
  const i1 = path('i1', { asPath: [asSequence(5)] }, { type: 'ibgp', ...rid(7) });
  const i2 = path('i2', { asPath: [asSequence(6)] }, { type: 'ibgp', ...rid(6) });
  t.same(selectBest([i1, i2], { maxPaths: 4 })!.multipath.map((p) => p.source), ['i2', 'i1']);
});

// ---- property: any permutation gives the same result ---------------------------------------------------------

const arbPath = (source: string): fc.Arbitrary<Path> =>
  fc
    .record({
      type: fc.constantFrom<PeerType>('local', 'ibgp', 'ebgp', 'ebgp'),
      routerId: fc.integer({ min: 1, max: 3 }),
      addr: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
      localPref: fc.option(fc.constantFrom(90, 100, 110), { nil: undefined }),
      asPath: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 3 }),
      origin: fc.constantFrom(Origin.IGP, Origin.EGP, Origin.INCOMPLETE),
      med: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
      originatorId: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      clusterList: fc.array(fc.constant(1), { maxLength: 2 }),
    })
    .map((r) => ({
      source,
      stale: false,
      peer: { type: r.type, routerId: r.routerId, address: r.addr === null ? null : parseIP(`10.0.0.${r.addr}`), asn: 1 },
      attrs: makeAttrs({
        localPref: r.localPref, asPath: r.asPath.length ? [asSequence(...r.asPath)] : [], origin: r.origin,
        med: r.med, originatorId: r.originatorId, clusterList: r.clusterList,
      }),
    }));

const arbPaths = fc.integer({ min: 1, max: 7 }).chain((k) =>
  fc.tuple(...Array.from({ length: k }, (_, i) => arbPath(`s${i}`))));

t.test('property: best and multipath do not depend on input order', async (t) => {
  fc.assert(
    fc.property(arbPaths, fc.array(fc.nat(), { minLength: 7, maxLength: 7 }), fc.boolean(), (paths, keys, always) => {
      const shuffled = paths.map((p, i) => [keys[i], p] as const).sort((a, b) => a[0] - b[0]).map((x) => x[1]);
      const opts = { maxPaths: 3, alwaysCompareMed: always };
      const x = selectBest(paths, opts)!;
      const y = selectBest(shuffled, opts)!;
      return x.best === y.best && x.multipath.length === y.multipath.length &&
        x.multipath.every((p, i) => p === y.multipath[i]) && x.decidedBy === y.decidedBy;
    }),
    { numRuns: 5000 },
  );
  t.pass('property holds');
});

t.test('property: the best is never beaten by any single other path it shares a neighbour AS with', async (t) => {
  // Within one neighbour AS the steps form a total preorder, so pairwise comparison must agree with selection.
  fc.assert(
    fc.property(arbPaths, (paths) => {
      const best = selectBest(paths)!.best;
      const nb = (p: Path) => p.attrs.asPath[0]?.asns[0] ?? 0;
      return paths.every((p) => p === best || nb(p) !== nb(best) || selectBest([p, best])!.best === best);
    }),
    { numRuns: 3000 },
  );
  t.pass('property holds');
});
