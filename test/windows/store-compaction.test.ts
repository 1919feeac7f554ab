// The file store under Windows semantics, for real: Node for Windows (the pinned node.exe the executables are made
// from) runs the compiled store (dist/) under wine, with the store on C:\. A tiny compaction threshold makes it
// compact many times; a second process (a restart) must then read back every write, and no compaction may have
// failed. Windows refuses to rename over a file that is still open (wine reproduces that), which is exactly what a
// compaction does if it replaces the log it holds open.
//
// Needs wine and `tsc` output (npm test and npm run test:windows build it first).
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { driveC, projectRoot, runWine, windowsNode, zPath } from '../../packaging/windows/wine.ts';
import { windowsReady } from './harness.ts';

const KEYS = 100;
const HOT_PER_KEY = 10;
const compiledStore = path.join(projectRoot, 'dist', 'src', 'store', 'file.js');

// Runs in node.exe. Phase "write": unique keys plus a hot key rewritten each time (that is what makes the log
// outgrow the live state); phase "read": a fresh process opens the store and reads everything back.
const script = (storeUrl: string) => `
import { writeFileSync } from 'node:fs';
const { openFileStore } = await import(${JSON.stringify(storeUrl)});
const [phase, dir, out] = process.argv.slice(2);
const store = await openFileStore(dir, { compactMinBytes: 2048, compactRatio: 2 });
const result = { phase };
try {
  if (phase === 'write') {
    for (let i = 0; i < ${KEYS}; i++) {
      const batch = [store.put('key/' + i, 'value-' + i)];
      for (let h = 0; h < ${HOT_PER_KEY}; h++) batch.push(store.put('hot', 'hot-' + i + '-' + h));
      await Promise.all(batch);
    }
    result.stats = store.stats();
  } else {
    const missing = [];
    for (let i = 0; i < ${KEYS}; i++) {
      const kv = await store.get('key/' + i);
      if (kv?.value !== 'value-' + i) missing.push('key/' + i + '=' + kv?.value);
    }
    result.missing = missing;
    result.hot = (await store.get('hot'))?.value;
  }
} catch (e) {
  result.error = String(e && e.stack || e);
}
await store.close();
writeFileSync(out, JSON.stringify(result));
`;

if (windowsReady(t)) {
  t.test('past the compaction threshold many times under Windows Node: every write readable after a restart', async (t) => {
    if (!fs.existsSync(compiledStore)) {
      t.fail(`${compiledStore} missing: run tsc -p tsconfig.json first (npm test does)`);
      return;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-store-'));
    const storeName = `bs-compact-${process.pid}`;
    t.teardown(() => {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
    });
    const file = path.join(dir, 'phase.mjs');
    // The URL Windows Node sees for the compiled store: the same file through drive Z:.
    fs.writeFileSync(file, script(`file:///Z:${pathToFileURL(compiledStore).pathname}`));
    const node = windowsNode();
    const run = async (phase: string) => {
      const out = path.join(dir, `${phase}.json`);
      const r = await runWine(node, [zPath(file), phase, `C:\\${storeName}\\store`, zPath(out)], { timeoutMs: 300_000 });
      t.equal(r.code, 0, `${phase}: ${r.stderr}`);
      return JSON.parse(fs.readFileSync(out, 'utf8')) as Record<string, any>;
    };

    const w = await run('write');
    t.equal(w.error, undefined, 'every write committed');
    t.equal(w.stats?.lastCompactionError, undefined, `no compaction failed (${w.stats?.lastCompactionError})`);
    t.ok(w.stats?.compactions >= 5, `compacted many times (${w.stats?.compactions})`);
    t.ok(w.stats?.logBytes < 16 * 2048, `the log stays small (${w.stats?.logBytes} bytes)`);

    const r = await run('read');
    t.equal(r.error, undefined);
    t.same(r.missing, [], `all ${KEYS} keys read back after the restart`);
    t.equal(r.hot, `hot-${KEYS - 1}-${HOT_PER_KEY - 1}`, 'the last write of the hot key wins');
  });
}
