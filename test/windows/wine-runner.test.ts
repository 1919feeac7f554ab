// The wine runner (packaging/windows/wine.ts) when wine's client loses its wineserver: a start that printed only
// "wine client error" is made again; anything the program said, or a clean exit, is left as it was. And the
// harness's wait on a daemon, which stops at the daemon's exit and says what it printed. No wine needed here. A stand-in
// `wine` first on PATH (wineBinary() looks there first) plays the wine client: it fails its first N calls the way
// wine does and then runs like a program.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isWineServerLost, runWine, startWine } from '../../packaging/windows/wine.ts';
import { untilDaemon } from './harness.ts';

const LOST = 'wine client error:0: recvmsg: Connection reset by peer\n';

function fakeWine(t: Test, failFirst: number, then: string): { calls: () => number } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-fake-wine-'));
  const count = path.join(dir, 'calls');
  fs.writeFileSync(count, '');
  fs.writeFileSync(path.join(dir, 'wine'), `#!/bin/sh
echo x >> '${count}'
n=$(wc -l < '${count}')
if [ "$n" -le ${failFirst} ]; then printf '%s' '${LOST.trim()}' >&2; echo >&2; exit 1; fi
${then}
`, { mode: 0o755 });
  const before = process.env.PATH;
  process.env.PATH = `${dir}${path.delimiter}${before}`;
  t.teardown(() => {
    process.env.PATH = before;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { calls: () => fs.readFileSync(count, 'utf8').split('\n').filter(Boolean).length };
}

t.test('isWineServerLost: only a run that printed nothing but wine client errors', async (t) => {
  t.ok(isWineServerLost(1, '', LOST), 'the wineserver race');
  t.ok(isWineServerLost(1, '', `${LOST}wine client error:0: write: Bad file descriptor\n`), 'more than one such line');
  t.notOk(isWineServerLost(0, '', LOST), 'a clean exit is the program\'s');
  t.notOk(isWineServerLost(1, 'out', LOST), 'the program wrote something');
  t.notOk(isWineServerLost(1, '', `blockspeaker: config: bad\n${LOST}`), 'the program said something');
  t.notOk(isWineServerLost(1, '', ''), 'a silent failure is the program\'s');
});

t.test('a start that lost the wineserver is made again, and the program\'s own output is what comes back', async (t) => {
  const w = fakeWine(t, 2, 'echo "ran $*"; echo "its stderr" >&2; exit 3');
  const r = await runWine('C:\\prog.exe', ['a', 'b'], { timeoutMs: 10_000 });
  t.equal(w.calls(), 3, 'two lost starts, then the program');
  t.same(r, { code: 3, stdout: 'ran C:\\prog.exe a b\n', stderr: 'its stderr\n' }, 'the third attempt\'s exit and output');
});

t.test('a daemon: pid, output and kill follow the current attempt', async (t) => {
  const w = fakeWine(t, 1, 'echo started >&2; exec sleep 30');
  const d = startWine('C:\\daemon.exe', [], { timeoutMs: 60_000 });
  const end = Date.now() + 10_000;
  while (!d.output().stderr.includes('started') && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  t.equal(d.output().stderr, 'started\n', 'output() reads the running attempt');
  t.equal(w.calls(), 2);
  d.kill();
  t.equal(await d.exited, 128, 'killed: exit by signal, and no further attempt');
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(w.calls(), 2, 'nothing started after the kill');
});

t.test('a program that fails on its own is run once; the race is tried 4 times at most', async (t) => {
  const own = fakeWine(t, 0, 'echo "blockspeaker: refusing" >&2; exit 1');
  const r = await runWine('C:\\prog.exe', [], { timeoutMs: 10_000 });
  t.equal(r.code, 1);
  t.equal(own.calls(), 1, 'not retried');
});

t.test('the race every time: given up after 4 attempts, with wine\'s message', async (t) => {
  const w = fakeWine(t, 100, 'exit 0');
  const r = await runWine('C:\\prog.exe', [], { timeoutMs: 10_000 });
  t.equal(w.calls(), 4);
  t.equal(r.code, 1);
  t.match(r.stderr, /wine client error/);
});

t.test('untilDaemon: a daemon that exits is not waited for, and its stderr is in the error', async (t) => {
  fakeWine(t, 0, 'echo "blockspeaker.exe: cannot load koffi.node" >&2; exit 2');
  const d = startWine('C:\\daemon.exe', [], { timeoutMs: 60_000 });
  await t.rejects(untilDaemon('the daemon to start', 600_000, d, () => false), /gave up waiting for the daemon to start: the daemon exited \(2\); its stderr ends: blockspeaker\.exe: cannot load koffi\.node/);
  const e = startWine('C:\\daemon.exe', [], { timeoutMs: 60_000 });
  t.equal(await untilDaemon('its message', 60_000, e, () => e.output().stderr.includes('koffi') && 'seen'), 'seen', 'a value before the exit is returned');
});
