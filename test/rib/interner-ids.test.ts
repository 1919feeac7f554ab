// The interner by id, against a plain model: a Map from content to its reference count. Ids, reference counts and
// rows live in segments of 8,192 sets (src/rib/interner.ts), so the runs go past a segment's end, free ids in
// several segments and reuse them.
import t from 'tap';
import fc from 'fast-check';
import { parseIP } from '../../src/net/ip.ts';
import { AttrRecord, asSequence, attrsEqual, makeAttrs, type AttrsInit } from '../../src/rib/attrs.ts';
import { AttrInterner } from '../../src/rib/interner.ts';

const nh = parseIP('192.0.2.1');
// Content number k: a path, a MED and, for odd k, a community (the row's numbers and pointers both vary).
const content = (k: number): AttrsInit => ({
  asPath: [asSequence(65000 + (k % 7), 64512 + (k % 1000))],
  nextHop: nh,
  med: k,
  ...(k % 2 === 1 ? { communities: [(k * 2654435761) >>> 0] } : {}),
});

type Op = { kind: 'intern' | 'retain' | 'release'; k: number; n: number };

function check(ops: Op[], universe: number): void {
  const it = new AttrInterner();
  const model = new Map<number, number>(); // content number -> references
  const idOf = new Map<number, number>(); // content number -> its id while held
  for (const op of ops) {
    const k = op.k % universe;
    const held = model.get(k) ?? 0;
    if (op.kind === 'intern') {
      const id = it.internId(makeAttrs(content(k)));
      if (held > 0 && idOf.get(k) !== id) throw new Error(`content ${k} came back as id ${id}, held as ${idOf.get(k)}`);
      idOf.set(k, id);
      model.set(k, held + 1);
    } else if (held === 0) {
      continue; // retain and release are for held sets only
    } else if (op.kind === 'retain') {
      it.retainIdN(idOf.get(k)!, op.n);
      model.set(k, held + op.n);
    } else {
      it.releaseId(idOf.get(k)!);
      if (held === 1) {
        model.delete(k);
        idOf.delete(k);
      } else model.set(k, held - 1);
    }
  }
  if (it.size !== model.size) throw new Error(`size ${it.size}, model ${model.size}`);
  const ids = new Set<number>();
  for (const [k, refs] of model) {
    const id = idOf.get(k)!;
    if (ids.has(id)) throw new Error(`id ${id} held by two contents`);
    ids.add(id);
    const rec = it.get(id);
    if (!attrsEqual(rec, makeAttrs(content(k)))) throw new Error(`id ${id} reads back another content than ${k}`);
    if (it.refCount(rec) !== refs) throw new Error(`content ${k}: ${it.refCount(rec)} references, model ${refs}`);
  }
}

t.test('property: ids, reference counts and contents agree with a model, over segment boundaries', async (t) => {
  const op = fc.record({
    kind: fc.constantFrom<Op['kind']>('intern', 'intern', 'retain', 'release', 'release'),
    k: fc.nat(),
    n: fc.integer({ min: 1, max: 3 }),
  });
  t.doesNotThrow(() => fc.assert(fc.property(fc.array(op, { maxLength: 300 }), fc.integer({ min: 1, max: 40 }), check), { numRuns: 200 }));
});

t.test('20,000 sets: every third let go, then taken again into the freed ids of three segments', async (t) => {
  const it = new AttrInterner();
  const N = 20_000;
  const ids = Array.from({ length: N }, (_, k) => it.internId(makeAttrs(content(k))));
  t.equal(new Set(ids).size, N, 'one id per content');
  t.ok(Math.max(...ids) >= 16_384, 'the ids reach a third segment');
  for (let k = 0; k < N; k += 3) it.retainId(ids[k]);
  for (let k = 0; k < N; k += 3) {
    it.releaseId(ids[k]);
    it.releaseId(ids[k]);
  }
  const freed = new Set(ids.filter((_, k) => k % 3 === 0));
  t.equal(it.size, N - freed.size, 'the released sets are gone');
  t.throws(() => it.retainId(ids[0]), /retain of unknown attribute id/, 'a freed id cannot be retained');
  let reused = 0;
  for (let k = N; k < N + freed.size; k++) {
    const id = it.internId(makeAttrs(content(k)));
    if (freed.has(id)) reused++;
  }
  t.equal(reused, freed.size, 'new contents take the freed ids');
  let wrong = 0;
  for (let k = 1; k < N + freed.size; k++) {
    if (k < N && k % 3 === 0) continue;
    const rec = it.lookup(makeAttrs(content(k)));
    if (!rec || it.refCount(rec) !== 1) wrong++;
  }
  t.equal(wrong, 0, 'every held set has its one reference, old and new alike');
});

t.test('a set read back by id is the record makeAttrs makes: a lone community of 2^31 and up stays an int32', async (t) => {
  const it = new AttrInterner();
  const init: AttrsInit = { asPath: [asSequence(65001)], nextHop: nh, communities: [(65535 << 16 | 666) >>> 0] };
  const rec = it.get(it.internId(makeAttrs(init))) as AttrRecord;
  const fresh = makeAttrs(init) as AttrRecord;
  t.ok(rec instanceof AttrRecord && fresh instanceof AttrRecord, 'both are records');
  t.equal(rec.comm, fresh.comm, 'the same number as a fresh record holds');
  t.ok(attrsEqual(rec, fresh), 'and equal to it');
  t.same(rec.communities, [4294902426], 'read as the community it is');
});

t.test('sets whose hashes share an index slot and its 7-bit tag, but not the rest, are told apart', async (t) => {
  // The index keeps 7 bits of each set's hash beside its id (the row has the whole hash): find two contents that
  // start their probes at the same slot of the first 1,024-slot index with the same tag, and different hashes.
  const seen = new Map<number, { k: number; hash: number }>();
  let pair: [number, number] | null = null;
  for (let k = 0; pair === null && k < 200_000; k++) {
    const h = makeAttrs(content(k)).hash;
    const key = ((h >>> 25) << 10) | (h & 1023);
    const other = seen.get(key);
    if (other !== undefined && other.hash !== h) pair = [other.k, k];
    else seen.set(key, { k, hash: h });
  }
  t.ok(pair, 'two such contents found');
  const [x, y] = pair!;
  const it = new AttrInterner();
  const ix = it.internId(makeAttrs(content(x)));
  const iy = it.internId(makeAttrs(content(y)));
  t.not(ix, iy, 'two ids');
  t.equal(it.internId(makeAttrs(content(y))), iy, 'the second found again past the first');
  it.releaseId(ix);
  t.equal(it.lookup(makeAttrs(content(x))), undefined, 'the first gone');
  t.ok(attrsEqual(it.lookup(makeAttrs(content(y)))!, makeAttrs(content(y))), 'the second still found past the tombstone');
  t.equal(it.internId(makeAttrs(content(x))), ix, 'the first back in its freed id');
  t.equal(it.size, 2);
});
