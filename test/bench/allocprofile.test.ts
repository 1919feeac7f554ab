// bench/lib/allocprofile.ts: a sampling heap profile summed by allocating function.
import t from 'tap';
import fc from 'fast-check';
import { summarizeAllocations, type SamplingNode } from '../../bench/lib/allocprofile.ts';

const node = (functionName: string, url: string, lineNumber: number, selfSize: number, children: SamplingNode[] = []): SamplingNode =>
  ({ callFrame: { functionName, url, lineNumber }, selfSize, children });

t.test('sums self sizes per function wherever it appears in the tree, largest first', async (t) => {
  const capture = (size: number) => node('capture', 'file:///work/main/src/rib/change-feed.ts', 0, size);
  const head = node('(root)', '', 0, 0, [
    node('put', 'file:///work/main/src/rib/path-store.ts', 0, 100, [capture(600)]),
    node('flush', 'file:///work/main/src/rib/change-feed.ts', 10, 50, [capture(400)]),
    node('', 'file:///x/y.js', 0, 0),
    node('(GC)', '', 0, 25),
  ]);
  const s = summarizeAllocations({ head });
  t.equal(s.totalBytes, 1175);
  t.same(s.functions.map((f) => [f.name, f.bytes]), [
    ['capture src/rib/change-feed.ts', 1000],
    ['put src/rib/path-store.ts', 100],
    ['flush src/rib/change-feed.ts:11', 50],
    ['(GC)', 25],
  ]);
  t.equal(s.functions[0].pct, 85.1);
  t.equal(summarizeAllocations({ head }, 2).functions.length, 2, 'top N');
});

t.test('property: the total is every node\'s self size, and each entry the sum over its name', async (t) => {
  const names = ['a', 'b', 'c', 'd'];
  const tree: fc.Memo<SamplingNode> = fc.memo((depth) =>
    fc.record({
      name: fc.constantFrom(...names),
      size: fc.nat({ max: 10_000 }),
      children: depth > 1 ? fc.array(tree(depth - 1), { maxLength: 4 }) : fc.constant<SamplingNode[]>([]),
    }).map(({ name, size, children }) => node(name, `file:///w/src/${name}.ts`, 0, size, children)));
  fc.assert(fc.property(tree(4), (head) => {
    const want = new Map<string, number>();
    let total = 0;
    const walk = (n: SamplingNode) => {
      if (n.selfSize > 0) want.set(n.callFrame.functionName, (want.get(n.callFrame.functionName) ?? 0) + n.selfSize);
      total += n.selfSize;
      n.children.forEach(walk);
    };
    walk(head);
    const s = summarizeAllocations({ head }, 10);
    if (s.totalBytes !== total || s.functions.length !== want.size) return false;
    for (let i = 0; i < s.functions.length; i++) {
      const f = s.functions[i];
      if (f.bytes !== want.get(f.name.split(' ')[0])) return false;
      if (i > 0 && s.functions[i - 1].bytes < f.bytes) return false;
    }
    return true;
  }), { numRuns: 300 });
  t.pass('300 random trees');
});
