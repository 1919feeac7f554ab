// Atomic replace-if-changed, on Linux and on the Windows double (a rename over a file someone holds open fails).
import t from 'tap';
import fs from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { linuxPlatform } from '../../src/platform/platform.ts';
import { readTextFile, writeFileIfChanged } from '../../src/platform/atomic-file.ts';
import { windowsDouble } from './windows-double.ts';

const dir = mkdtempSync(join(tmpdir(), `bs-atomic-${process.pid}-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

for (const [name, platform] of [['linux', linuxPlatform()], ['windows double', windowsDouble().platform]] as const) {
  t.test(`${name}: written, then left alone while unchanged, replaced when changed`, async (t) => {
    const file = join(dir, name.replace(' ', '-'), 'net.d', '10-x.conflist');
    t.equal(readTextFile(platform, file), undefined, 'absent');
    t.equal(writeFileIfChanged(platform, file, 'one\n'), 'written', 'directory made, file written');
    const ino = fs.statSync(file).ino;
    t.equal(writeFileIfChanged(platform, file, 'one\n'), 'unchanged');
    t.equal(fs.statSync(file).ino, ino, 'the same file: not rewritten');
    t.equal(writeFileIfChanged(platform, file, 'two\n'), 'written');
    t.equal(fs.readFileSync(file, 'utf8'), 'two\n');
    t.same(fs.readdirSync(join(file, '..')), ['10-x.conflist'], 'no temporary file left');
  });
}

t.test('Windows double: a reader holding the file open makes the replace fail; old file kept, no temp left', async (t) => {
  const w = windowsDouble();
  const file = join(dir, 'held', '10-x.conflist');
  writeFileIfChanged(w.platform, file, 'old\n');
  const fd = w.platform.files.open(file, 'r'); // containerd reading it, forever
  t.throws(() => writeFileIfChanged(w.platform, file, 'new\n'), { code: 'EPERM' });
  t.ok(w.refused.some((r) => r.startsWith('rename')), 'the double refused the rename over an open file');
  t.equal(fs.readFileSync(file, 'utf8'), 'old\n', 'old content intact');
  t.same(fs.readdirSync(join(file, '..')), ['10-x.conflist'], 'temporary file removed');
  w.platform.files.close(fd);
  t.equal(writeFileIfChanged(w.platform, file, 'new\n'), 'written', 'once closed, it goes through');
  t.equal(fs.readFileSync(file, 'utf8'), 'new\n');
});
