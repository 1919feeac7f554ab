// bench/socket-reads: what a read costs a Node.js receiver when the sender writes in small pieces, as BIRD does when
// it walks its table and the receiver keeps up (the reason sessions pause 1 ms after a short read of UPDATEs:
// src/bgp/session.ts, GATHER_BELOW). A child process writes --mb MB over loopback TCP in --chunk octet writes,
// spinning --gap-us between them; receivers in other child processes take it three ways, interleaved --rounds
// times: 'data' events (what a session does), a static `onread` buffer, and 'data' with a 1 ms pause after each
// read under 16 KB (what a session does now). Each receiver reports its read system calls (/proc/self/io) and its
// user and system CPU. Linux only.
//
//   npm run bench:socket-reads -- [--mb N] (64) [--chunk N] (2300) [--gap-us N] (40) [--rounds N] (3)
//
// Prints one line per run, then a JSON line with the medians per way and each way's CPU over the plain receiver's.
import { spawn } from 'node:child_process';
import { createServer, connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/kit/wait.ts';
import { median } from './lib/compare.ts';
import { readCounts } from './lib/proc.ts';

const MODES = ['data', 'onread', 'gather'] as const;
type Mode = (typeof MODES)[number];
interface Run { mode: Mode; reads: number; userMs: number; sysMs: number; mb: number }

/** Child: serve one connection, write `mb` MB in `chunk`-octet writes `gapUs` apart, then end. */
function send(port: number, mb: number, chunk: number, gapUs: number): void {
  const buf = Buffer.alloc(chunk, 7);
  const total = mb * 1024 * 1024;
  const srv = createServer((s) => {
    s.setNoDelay(true);
    let sent = 0;
    const gap = BigInt(gapUs * 1000);
    const pump = (): void => {
      s.write(buf);
      sent += buf.length;
      const t = process.hrtime.bigint();
      while (process.hrtime.bigint() - t < gap); // a sender busy elsewhere between writes
      if (sent < total) setImmediate(pump);
      else {
        s.end();
        srv.close();
      }
    };
    pump();
  });
  srv.listen(port, '127.0.0.1', () => process.send?.('ready'));
}

/** Child: connect, read everything one way, print a Run as JSON. */
function receive(mode: Mode, port: number): void {
  const io = (): number => readCounts(process.pid)!.reads;
  let bytes = 0;
  const cpu0 = process.cpuUsage();
  const io0 = io();
  const done = (): void => {
    const c = process.cpuUsage(cpu0);
    const run: Run = { mode, reads: io() - io0, userMs: Math.round(c.user / 1000), sysMs: Math.round(c.system / 1000), mb: Math.round(bytes / 2 ** 20) };
    process.stdout.write(JSON.stringify(run) + '\n', () => process.exit(0));
  };
  let s: Socket;
  if (mode === 'onread') {
    s = connect({ port, host: '127.0.0.1', onread: { buffer: Buffer.alloc(65536), callback: (n: number) => { bytes += n; return true; } } });
  } else {
    s = connect({ port, host: '127.0.0.1' });
    let paused = false;
    s.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (mode === 'gather' && chunk.length < 16 * 1024 && !paused) {
        paused = true;
        s.pause();
        setTimeout(() => {
          paused = false;
          s.resume();
        }, 1);
      }
    });
  }
  s.on('end', done);
}

async function once(mode: Mode, mb: number, chunk: number, gapUs: number): Promise<Run> {
  const self = fileURLToPath(import.meta.url);
  const port = await freePort('127.0.0.1');
  const sender = spawn(process.execPath, [...process.execArgv, self, 'send', String(port), String(mb), String(chunk), String(gapUs)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => {
    sender.once('message', () => resolve());
    sender.once('exit', (code) => reject(new Error(`sender exited (${code}) before listening`)));
  });
  const recv = spawn(process.execPath, [...process.execArgv, self, 'recv', mode, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  recv.stdout.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => recv.on('exit', resolve));
  await new Promise((resolve) => (sender.exitCode === null ? sender.on('exit', resolve) : resolve(null)));
  if (code !== 0) throw new Error(`receiver ${mode} exited with ${code}`);
  const run = JSON.parse(out) as Run;
  if (run.mb !== mb) throw new Error(`receiver ${mode} got ${run.mb} MB of ${mb}`);
  return run;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { mb: { type: 'string', default: '64' }, chunk: { type: 'string', default: '2300' }, 'gap-us': { type: 'string', default: '40' }, rounds: { type: 'string', default: '3' } },
  });
  const mb = Number(values.mb), chunk = Number(values.chunk), gapUs = Number(values['gap-us']), rounds = Number(values.rounds);
  for (const [k, v] of Object.entries({ mb, chunk, 'gap-us': gapUs, rounds })) if (!(Number.isInteger(v) && v > 0)) throw new Error(`--${k} must be a positive integer`);
  const runs: Run[] = [];
  for (let r = 1; r <= rounds; r++) {
    for (const mode of MODES) {
      const run = await once(mode, mb, chunk, gapUs);
      runs.push(run);
      console.log(`round ${r} ${mode.padEnd(6)}: ${run.reads} reads, ${run.userMs} ms user + ${run.sysMs} ms system`);
    }
  }
  const summary = (m: Mode) => {
    const rs = runs.filter((x) => x.mode === m);
    const cpuMs = median(rs.map((x) => x.userMs + x.sysMs))!;
    const reads = median(rs.map((x) => x.reads))!;
    return { reads, userMs: median(rs.map((x) => x.userMs)), sysMs: median(rs.map((x) => x.sysMs)), cpuMs, usPerRead: +((cpuMs * 1000) / reads).toFixed(1) };
  };
  const by = { data: summary('data'), onread: summary('onread'), gather: summary('gather') };
  const ratios = { onreadCpuVsData: +(by.onread.cpuMs / by.data.cpuMs).toFixed(2), gatherCpuVsData: +(by.gather.cpuMs / by.data.cpuMs).toFixed(2) };
  console.log(JSON.stringify({ bench: 'socket-reads', date: new Date().toISOString(), node: process.version, mb, chunk, gapUs, rounds, modes: by, ratios }));
}

const role = process.argv[2];
if (role === 'send') send(Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6]));
else if (role === 'recv') receive(process.argv[3] as Mode, Number(process.argv[4]));
else await main();
