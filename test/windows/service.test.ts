// blockspeaker.exe as a Windows service of its own (no NSSM, no wrapper), under wine's service control manager:
// `sc create` with `run --service NAME`, `sc start` brings the daemon up and the SCM reports RUNNING, `sc stop` stops
// it the graceful-restart way and the SCM reports STOPPED; started by hand, `run --service` refuses with a message
// that says why.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, zPath } from '../../packaging/windows/wine.ts';
import { freePort } from '../kit/wait.ts';
import { exe, windowsReady } from './harness.ts';

async function until<T>(what: string, ms: number, f: () => Promise<T | false | undefined>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The STATE line of `sc query NAME`: "4  RUNNING" -> "RUNNING". */
async function scState(name: string): Promise<string> {
  const r = await runWine('sc', ['query', name], { timeoutMs: 60_000 });
  return /STATE\s*:\s*\d+\s+(\w+)/.exec(r.stdout)?.[1] ?? `unknown (${r.code}: ${r.stdout.trim()} ${r.stderr.trim()})`;
}

if (windowsReady(t)) {
  t.test('sc create / start / stop: the daemon answers the SCM itself', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-svc-'));
    const name = `bs-svc-${process.pid}`;
    const storeName = `bs-svc-store-${process.pid}`;
    const port = await freePort('127.0.0.1');
    t.teardown(async () => {
      await runWine('sc', ['stop', name], { timeoutMs: 60_000 });
      await runWine('sc', ['delete', name], { timeoutMs: 60_000 });
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
    });
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-svc, os: windows }
ipam: { store: 'C:\\${storeName}', pools: [{ name: p4, cidr: 10.244.0.0/16 }] }
dataplane: { kind: none }
status: { listen: "127.0.0.1:${port}" }
ipc: { path: '\\\\.\\pipe\\bs-svc-${process.pid}' }
`);
    const bin = `"${zPath(exe.cli)}" run --service ${name} -c "${zPath(config)}"`;
    const created = await runWine('sc', ['create', name, 'binpath=', bin], { timeoutMs: 60_000 });
    t.equal(created.code, 0, `sc create: ${created.stdout}${created.stderr}`);

    const started = await runWine('sc', ['start', name], { timeoutMs: 120_000 });
    t.equal(started.code, 0, `sc start: ${started.stdout}${started.stderr}`);
    const health = () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
    // Under load, wine's service manager has once left a started service without a process (the daemon never
    // answered in 180 s; alone the test takes 2 s). If the SCM says STOPPED after 90 s, start it once more; any
    // other state, or a second silence, fails with what the SCM said.
    const answered = await until('the daemon to answer', 90_000, health).then(() => true, () => false);
    if (!answered) {
      const state = await scState(name);
      t.comment(`no answer in 90 s; the SCM says ${state}`);
      if (state !== 'STOPPED') throw new Error(`the daemon did not answer in 90 s and the SCM says ${state}`);
      const again = await runWine('sc', ['start', name], { timeoutMs: 120_000 });
      t.equal(again.code, 0, `sc start, again: ${again.stdout}${again.stderr}`);
      await until('the daemon to answer (second start)', 90_000, health);
    }
    t.equal(await until('RUNNING', 60_000, async () => ((await scState(name)) === 'RUNNING' ? 'RUNNING' : false)), 'RUNNING', 'the SCM sees it running');

    const stopped = await runWine('sc', ['stop', name], { timeoutMs: 60_000 });
    t.equal(stopped.code, 0, `sc stop: ${stopped.stdout}${stopped.stderr}`);
    t.equal(await until('STOPPED', 60_000, async () => ((await scState(name)) === 'STOPPED' ? 'STOPPED' : false)), 'STOPPED', 'and stopped');
    t.notOk(await health(), 'the daemon is gone');
  });

  t.test('run --service outside the SCM refuses, saying why', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-nosvc-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(config, `node: { name: win-nosvc, os: windows }\ndataplane: { kind: none }\nstatus: false\nipc: false\n`);
    const r = await runWine(exe.cli, ['run', '--service', 'bs-not-a-service', '-c', zPath(config)], { timeoutMs: 120_000 });
    t.not(r.code, 0, 'exit code');
    t.match(r.stderr + r.stdout, /--service bs-not-a-service: not started by the service control manager/);
  });
}
