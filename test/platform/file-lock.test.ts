// The store's whole-file lock loaded straight from fs-native-extensions' prebuild (src/platform/file-lock.ts), and
// through the package's own loader when there is no prebuild for the host: the same semantics either way, checked
// against a real second process holding the lock.
import t from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadFileLocks } from '../../src/platform/file-lock.ts';

// A child that takes the lock through the package's own entry (the reference), says "locked", and holds it until
// its stdin closes.
function holder(file: string): Promise<{ release: () => Promise<void> }> {
  const code = `const fsx = require('fs-native-extensions'); const fd = require('fs').openSync(${JSON.stringify(file)}, 'a+');
if (!fsx.tryLock(fd)) { console.log('busy'); process.exit(1); }
console.log('locked'); process.stdin.on('end', () => process.exit(0)); process.stdin.resume();`;
  const c = spawn(process.execPath, ['-e', code], { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    c.stdout!.once('data', (d) => {
      if (String(d).trim() !== 'locked') return reject(new Error(`holder: ${d}`));
      resolve({ release: () => new Promise<void>((r) => { c.once('exit', () => r()); c.stdin!.end(); }) });
    });
    c.once('error', reject);
  });
}

for (const [name, host, source] of [['prebuild', undefined, 'prebuild'], ['no prebuild for the host', 'nowhere-x64', 'package']] as const) {
  t.test(`${name}: tryLock, waitForLock and unlock against another process`, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'file-lock-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'lock');
    const loaded = loadFileLocks(host);
    t.equal(loaded.source, source, `loaded from the ${source}`);
    const { ops } = loaded;
    const fd = fs.openSync(file, 'a+');
    t.teardown(() => fs.closeSync(fd));

    t.equal(ops.tryLock(fd), true, 'free: taken');
    ops.unlock(fd);

    const h = await holder(file);
    t.equal(ops.tryLock(fd), false, 'held by another process: not taken, no throw');
    let granted = false;
    const waiting = ops.waitForLock(fd).then(() => (granted = true));
    await new Promise((r) => setTimeout(r, 100));
    t.equal(granted, false, 'still waiting while the other process holds it');
    await h.release();
    await waiting;
    t.equal(granted, true, 'granted once the other process is gone');
    ops.unlock(fd);
    const h2 = await holder(file); // the unlock really let go
    await h2.release();
  });
}

t.test('an invalid descriptor is an error, not "held elsewhere"', async (t) => {
  const { ops } = loadFileLocks();
  t.throws(() => ops.tryLock(987654), /EBADF|bad file/i);
});

t.test('the single executable (no module URL) loads the addon beside the executable', async (t) => {
  const beside = path.join(path.dirname(process.execPath), 'fs-native-extensions.node');
  let message = '';
  try {
    loadFileLocks(undefined, '');
  } catch (err) {
    message = (err as Error).message;
  }
  t.match(message, beside, 'no addon there on this machine: the error names the path it tried');
});
