// `blockspeaker daemon stop [--withdraw]` and `blockspeaker daemon reload`: control the running daemon over its
// control socket, the same on every OS (Windows has no SIGTERM or SIGHUP to send).
import { IpcError, ipcRequest } from '../ipc/client.ts';
import { DEFAULT_SOCKET } from '../ipc/protocol.ts';
import { CliError } from './args.ts';
import { ask, common } from './show.ts';

const HELP = `usage: blockspeaker daemon [--socket PATH | -c FILE] [--json] <command>

  stop              graceful-restart stop: BGP sessions closed without NOTIFICATION, so graceful-restart peers
                    keep this node's routes (stale) until it is back; installed routes stay (RFC 4724)
  stop --withdraw   the node goes away: Cease to every peer, which drop its routes at once
  reload            re-read the daemon's config file; an invalid file is refused with its errors (exit 1) and the
                    running config stays

  stop waits (up to --timeout SECONDS, default 15) until the daemon no longer answers.
  The socket is --socket PATH, else the ipc.path of -c FILE, else $BLOCKSPEAKER_SOCKET, else ${DEFAULT_SOCKET}.
`;

async function gone(socket: string, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      await ipcRequest(socket, 'status', {});
    } catch (e) {
      if (e instanceof IpcError && e.code === 'NOT_RUNNING') return true;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

export async function run(argv: string[]): Promise<number> {
  const c = common(argv);
  let withdraw = false;
  let timeout = 15;
  const rest: string[] = [];
  for (let i = 0; i < c.rest.length; i++) {
    const a = c.rest[i]!;
    if (a === '--withdraw') withdraw = true;
    else if (a === '--timeout') {
      const v = c.rest[++i];
      if (!v || !/^\d+$/.test(v)) throw new CliError(`daemon: --timeout must be a whole number of seconds, got "${v ?? ''}"`);
      timeout = Number(v);
    } else rest.push(a);
  }
  const [cmd, ...extra] = rest;
  if (c.help || !cmd) {
    process.stdout.write(HELP);
    return c.help ? 0 : 2;
  }
  if (extra.length) throw new CliError(`daemon ${cmd}: unexpected arguments: ${extra.join(' ')}`);
  if (withdraw && cmd !== 'stop') throw new CliError('daemon: --withdraw goes with stop');
  if (cmd === 'stop') {
    const r = await ask<{ stopping: boolean; withdraw: boolean }>(c.socket, 'daemon.stop', { withdraw });
    const stopped = await gone(c.socket, timeout * 1000);
    if (c.json) process.stdout.write(`${JSON.stringify({ ...r, stopped })}\n`);
    else process.stdout.write(`${stopped ? 'stopped' : `still answering after ${timeout} s`} (${withdraw ? 'withdrawn: Cease sent to every peer' : 'graceful-restart stop: peers keep our routes'})\n`);
    return stopped ? 0 : 1;
  }
  if (cmd === 'reload') {
    const r = await ask<{ reloaded: boolean }>(c.socket, 'daemon.reload', {});
    process.stdout.write(c.json ? `${JSON.stringify(r)}\n` : 'config reloaded\n');
    return 0;
  }
  throw new CliError(`daemon: unknown command "${cmd}" (try: stop, stop --withdraw, reload)`);
}
