// bench/lib/proc.ts readCounts: a process's read system calls and octets from /proc/PID/io, which bench:bgp-ingest
// prints per receiver (how the sender's writes arrived).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readCounts } from '../../bench/lib/proc.ts';

t.test('reads and octets count up as this process reads a file', async (t) => {
  const dir = t.testdir();
  const file = join(dir, 'data');
  writeFileSync(file, Buffer.alloc(256 * 1024, 7));
  const before = readCounts(process.pid);
  t.ok(before, '/proc/PID/io is readable');
  for (let i = 0; i < 4; i++) readFileSync(file);
  const after = readCounts(process.pid)!;
  t.ok(after.reads >= before!.reads + 4, `at least one read per file read (${after.reads - before!.reads})`);
  t.ok(after.bytes - before!.bytes >= 4 * 256 * 1024, 'and at least the file\'s octets four times');
});

t.test('a process that is gone has no counts', async (t) => {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  t.equal(readCounts(Number(child.stdout)), null);
});
