// The Linux route planner against a model of a kernel routing table (fast-check) and by example.
import t from 'tap';
import fc from 'fast-check';
import { parseIP, parsePrefix } from '../../src/net/ip.ts';
import { type RouteOp, PlanError, countOps, planRoutes } from '../../src/linux/planner.ts';
import { type KernelRoute, type Owner, type RouteKey, routeKey, routeKeyText, routeSatisfies } from '../../src/linux/route.ts';

const OWNER: Owner = { table: 200, protocol: 181 };

// ---- a model of the kernel's table semantics ----------------------------------------------------------------

class KernelError extends Error {}

/**
 * Apply ops the way the kernel does: add refuses an existing key (any protocol), replace overwrites the first route
 * at the key whatever its protocol (and creates one if none), delete with a protocol removes the first route at the
 * key with that protocol or fails. Records every route an op overwrote or removed.
 */
function applyModel(table: KernelRoute[], ops: readonly RouteOp[]): { table: KernelRoute[]; touched: KernelRoute[] } {
  const out = [...table];
  const touched: KernelRoute[] = [];
  const at = (r: KernelRoute, proto?: number): number =>
    out.findIndex((x) => x.table === r.table && routeKey(x) === routeKey(r) && (proto === undefined || x.protocol === proto));
  for (const o of ops) {
    const i = at(o.route, o.op === 'delete' ? o.route.protocol : undefined);
    if (o.op === 'add') {
      if (i >= 0) throw new KernelError(`EEXIST ${routeKey(o.route)}`);
      out.push(o.route);
    } else if (o.op === 'replace') {
      if (i >= 0) {
        touched.push(out[i]);
        out[i] = o.route;
      } else out.push(o.route);
    } else {
      if (i < 0) throw new KernelError(`ESRCH ${routeKey(o.route)}`);
      touched.push(out[i]);
      out.splice(i, 1);
    }
  }
  return { table: out, touched };
}

const ours = (r: KernelRoute): boolean => r.table === OWNER.table && r.protocol === OWNER.protocol;

// ---- arbitraries: a small universe so keys collide often ----------------------------------------------------

const DSTS = [
  ...['10.0.0.0/26', '10.0.0.64/26', '10.0.1.0/26', '10.0.1.5/32', '10.0.2.0/24'].map((s) => parsePrefix(s)),
  ...['fd00::/64', 'fd00:1::/64', 'fd00:2::5/128'].map((s) => parsePrefix(s)),
];
const VIA4 = ['192.0.2.1', '192.0.2.2', '2001:db8::1'].map((s) => parseIP(s));
const VIA6 = ['2001:db8::1', '2001:db8::2', 'fe80::1'].map((s) => parseIP(s));

const routeArb = (opts: { table?: fc.Arbitrary<number>; protocol?: fc.Arbitrary<number>; other: boolean }) =>
  fc.record({
    dst: fc.constantFrom(...DSTS),
    metricBump: fc.constantFrom(0, 0, 0, 7),
    kind: opts.other ? fc.constantFrom('blackhole', 'via', 'via', 'other') : fc.constantFrom('blackhole', 'via', 'via'),
    viaIdx: fc.nat(2),
    dev: fc.constantFrom(undefined, undefined, 'eth0', 'eth1'),
    onlink: fc.boolean(),
    table: opts.table ?? fc.constant(OWNER.table),
    protocol: opts.protocol ?? fc.constant(OWNER.protocol),
  }).map((g): KernelRoute => {
    const r: KernelRoute = {
      dst: g.dst, metric: (g.dst.family === 4 ? 0 : 1024) + g.metricBump, kind: g.kind as KernelRoute['kind'],
      onlink: false, table: g.table, protocol: g.protocol,
    };
    if (g.kind === 'via') {
      r.via = (g.dst.family === 4 ? VIA4 : VIA6)[g.viaIdx];
      if (g.dev !== undefined) r.dev = g.dev;
      r.onlink = g.onlink && g.dev !== undefined;
    }
    if (g.kind === 'other') r.note = 'device route';
    return r;
  });

const desiredArb = fc.uniqueArray(routeArb({ other: false }), { selector: routeKey, maxLength: 12 });
// Actual tables: ours (possibly several on one key, as `ip route append` allows), foreign protocols in our table,
// and our protocol in another table.
const actualArb = fc.array(
  routeArb({ other: true, table: fc.constantFrom(200, 200, 200, 201), protocol: fc.constantFrom(181, 181, 12, 186) }),
  { maxLength: 14 },
);

/** What the table must hold after a plan: the foreign routes as they were, plus every desired route whose key they
 * do not hold. */
function checkConverged(t: Tap, before: KernelRoute[], after: KernelRoute[], desired: KernelRoute[]): void {
  const foreignBefore = before.filter((r) => !ours(r));
  const foreignAfter = after.filter((r) => !ours(r));
  t.same(foreignAfter, foreignBefore, 'foreign routes (other protocol or other table) unchanged');
  const foreignKeys = new Set(foreignBefore.filter((r) => r.table === OWNER.table).map(routeKey));
  const mine = after.filter(ours);
  const expected = desired.filter((d) => !foreignKeys.has(routeKey(d)));
  t.equal(mine.length, expected.length, 'one route of ours per desired, non-conflicting key');
  for (const d of expected) {
    const got = mine.filter((r) => routeKey(r) === routeKey(d));
    t.ok(got.length === 1 && routeSatisfies(got[0], d), `desired ${routeKeyText(d)} in place`);
  }
}

interface Tap {
  same(a: unknown, b: unknown, m?: string): unknown;
  equal(a: unknown, b: unknown, m?: string): unknown;
  ok(v: unknown, m?: string): unknown;
}

// Assertion helpers collect into a flag so fast-check sees a boolean and tap output stays short.
function collector(): Tap & { failures: string[] } {
  const failures: string[] = [];
  const rec = (ok: boolean, msg?: string): boolean => {
    if (!ok) failures.push(msg ?? 'assertion');
    return ok;
  };
  return {
    failures,
    same: (a: unknown, b: unknown, m?: string) => rec(JSON.stringify(a) === JSON.stringify(b), m),
    equal: (a: unknown, b: unknown, m?: string) => rec(a === b, `${m}: ${String(a)} !== ${String(b)}`),
    ok: (v: unknown, m?: string) => rec(Boolean(v), m),
  };
}

t.test('property: applying the plan gives exactly desired ∪ foreign, and touches nothing foreign', async (t) => {
  fc.assert(
    fc.property(actualArb, desiredArb, (actual, desired) => {
      const plan = planRoutes(actual, desired, OWNER);
      const { table, touched } = applyModel(actual, plan.ops); // throws on EEXIST/ESRCH: a wrong plan
      const c = collector();
      checkConverged(c, actual, table, desired);
      c.ok(touched.every(ours), 'every route an op replaced or deleted was ours');
      c.ok(plan.ops.every((o) => ours(o.route)), 'every op names our table and protocol');
      const foreignKeys = new Set(actual.filter((r) => r.table === OWNER.table && !ours(r)).map(routeKey));
      c.equal(plan.conflicts.length, desired.filter((d) => foreignKeys.has(routeKey(d))).length, 'conflicts');
      c.equal(planRoutes(table, desired, OWNER).ops.length, 0, 'a second plan is empty');
      if (c.failures.length) throw new Error(c.failures.join('; '));
    }),
    { numRuns: 2000 },
  );
});

t.test('property: no unchanged route is re-sent; ops are minimal', async (t) => {
  fc.assert(
    fc.property(actualArb, desiredArb, (actual, desired) => {
      const plan = planRoutes(actual, desired, OWNER);
      const oursAt = new Map<RouteKey, KernelRoute[]>();
      for (const r of actual.filter(ours)) oursAt.set(routeKey(r), [...(oursAt.get(routeKey(r)) ?? []), r]);
      const foreignKeys = new Set(actual.filter((r) => r.table === OWNER.table && !ours(r)).map(routeKey));
      let expectedOps = 0;
      for (const d of desired) {
        const m = oursAt.get(routeKey(d)) ?? [];
        if (foreignKeys.has(routeKey(d))) expectedOps += m.length; // ours beside a foreign one: deleted
        else if (m.length === 0) expectedOps += 1;
        else if (m.length === 1) expectedOps += routeSatisfies(m[0], d) ? 0 : 1;
        else expectedOps += m.length + 1;
      }
      const wanted = new Set(desired.map(routeKey));
      for (const [k, m] of oursAt) if (!wanted.has(k)) expectedOps += m.length;
      if (plan.ops.length !== expectedOps) return false;
      // An unchanged, undisputed, single route of ours is never the target of an op.
      for (const o of plan.ops) {
        const k = routeKey(o.route);
        const m = oursAt.get(k) ?? [];
        const d = desired.find((x) => routeKey(x) === k);
        if (d && m.length === 1 && routeSatisfies(m[0], d) && !foreignKeys.has(k)) return false;
      }
      const first = (op: RouteOp['op']) => plan.ops.findIndex((o) => o.op === op);
      const last = (op: RouteOp['op']) => plan.ops.map((o) => o.op).lastIndexOf(op);
      // Deletes first, then replaces, then adds.
      if (first('replace') >= 0 && last('delete') > first('replace')) return false;
      if (first('add') >= 0 && (last('delete') > first('add') || last('replace') > first('add'))) return false;
      return true;
    }),
    { numRuns: 2000 },
  );
});

t.test('property: a sequence of desired states with drift and foreign churn in between always converges', async (t) => {
  const driftArb = fc.oneof(
    fc.record({ kind: fc.constant('remove' as const), idx: fc.nat() }),
    fc.record({ kind: fc.constant('foreign' as const), route: routeArb({ other: true, protocol: fc.constantFrom(12, 186) }) }),
    fc.constant({ kind: 'none' as const }),
  );
  fc.assert(
    fc.property(actualArb, fc.array(fc.tuple(desiredArb, driftArb), { minLength: 1, maxLength: 8 }), (start, steps) => {
      let table = start;
      for (const [desired, drift] of steps) {
        if (drift.kind === 'remove' && table.length) table = table.filter((_, i) => i !== drift.idx % table.length);
        if (drift.kind === 'foreign') {
          const r = drift.route;
          // Foreign daemons add with their own add semantics: refused on an existing key.
          if (!table.some((x) => x.table === r.table && routeKey(x) === routeKey(r))) table = [...table, r];
        }
        const before = table;
        const plan = planRoutes(before, desired, OWNER);
        const res = applyModel(before, plan.ops);
        const c = collector();
        checkConverged(c, before, res.table, desired);
        c.ok(res.touched.every(ours), 'only ours touched');
        if (c.failures.length) throw new Error(c.failures.join('; '));
        table = res.table;
      }
      return true;
    }),
    { numRuns: 500 },
  );
});

// ---- examples -----------------------------------------------------------------------------------------------

const R = (dst: string, extra: Partial<KernelRoute> = {}): KernelRoute => {
  const p = parsePrefix(dst);
  return {
    dst: p, metric: p.family === 4 ? 0 : 1024, kind: 'blackhole', onlink: false, table: 200, protocol: 181, ...extra,
  };
};
const V = (dst: string, via: string, extra: Partial<KernelRoute> = {}) => R(dst, { kind: 'via', via: parseIP(via), ...extra });

t.test('examples: add, replace, delete, unchanged, order', async (t) => {
  const actual = [
    R('10.0.0.0/26'),
    V('10.0.1.0/26', '192.0.2.1', { dev: 'eth0' }), // kernel reports the device it resolved
    V('10.0.2.0/26', '192.0.2.1'),
    V('10.0.3.0/26', '192.0.2.1'), // stale
    V('10.0.9.0/24', '192.0.2.1', { protocol: 12 }), // BIRD's
  ];
  const desired = [
    R('10.0.0.0/26'),
    V('10.0.1.0/26', '192.0.2.1'), // no device asked: eth0 is fine
    V('10.0.2.0/26', '192.0.2.2'), // moved
    V('10.0.4.0/26', '192.0.2.1'), // new
    V('10.0.9.0/24', '192.0.2.1'), // held by BIRD
  ];
  const plan = planRoutes(actual, desired, OWNER);
  t.same(plan.ops.map((o) => `${o.op} ${routeKeyText(o.route)}`), [
    'delete 10.0.3.0/26 metric 0', 'replace 10.0.2.0/26 metric 0', 'add 10.0.4.0/26 metric 0',
  ]);
  t.equal(plan.unchanged, 2);
  t.equal(plan.conflicts.length, 1);
  t.equal(plan.conflicts[0].holder.protocol, 12);
  t.same(countOps(plan.ops), { add: 1, replace: 1, delete: 1 });
});

t.test('examples: device, onlink, metric and type changes are replacements or new keys', async (t) => {
  const base = V('10.0.1.0/26', '192.0.2.1', { dev: 'eth0' });
  const cases: [KernelRoute, string][] = [
    [V('10.0.1.0/26', '192.0.2.1', { dev: 'eth1' }), 'replace'],
    [V('10.0.1.0/26', '192.0.2.1', { dev: 'eth0', onlink: true }), 'replace'],
    [R('10.0.1.0/26'), 'replace'],
    [V('10.0.1.0/26', '192.0.2.1', { metric: 5 }), 'delete,add'],
  ];
  for (const [d, ops] of cases) t.equal(planRoutes([base], [d], OWNER).ops.map((o) => o.op).join(','), ops);
  t.equal(planRoutes([R('fd00::/64', { dev: 'lo' })], [R('fd00::/64')], OWNER).ops.length, 0, 'v6 blackhole reports dev lo');
  t.equal(planRoutes([R('10.0.1.0/26', { kind: 'other', note: 'multipath' })], [R('10.0.1.0/26')], OWNER).ops[0].op,
    'replace', 'an odd route of ours on a desired key is replaced');
});

t.test('examples: duplicates of ours on one key are all deleted, then added once', async (t) => {
  const plan = planRoutes([R('10.0.0.0/26'), R('10.0.0.0/26')], [R('10.0.0.0/26')], OWNER);
  t.same(plan.ops.map((o) => o.op), ['delete', 'delete', 'add']);
});

t.test('examples: refuses desired routes outside our table or protocol, or twice', async (t) => {
  t.throws(() => planRoutes([], [R('10.0.0.0/26', { table: 254 })], OWNER), PlanError);
  t.throws(() => planRoutes([], [R('10.0.0.0/26', { protocol: 12 })], OWNER), PlanError);
  t.throws(() => planRoutes([], [R('10.0.0.0/26'), V('10.0.0.0/26', '192.0.2.1')], OWNER), /twice/);
});
