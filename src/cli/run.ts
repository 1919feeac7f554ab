// `blockspeaker run -c FILE`: the daemon. For now: the BGP speaker (with the config's static announcements) and
// the JSON status endpoint. SIGTERM/SIGINT stop gracefully (exit 0), SIGHUP reloads the config.
import { mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger as Pino } from 'pino';
import { Speaker, type Logger, type PeerStatus } from '../bgp/speaker.ts';
import { ConfigError, formatConfig, loadConfig, type Config, type ListenAddress } from '../config/config.ts';
import { StatusServer } from '../status/http.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker run -c FILE [--check] [--log-level LEVEL] [--run-dir DIR] [--restarted]

  Runs the node daemon with the config FILE (YAML or JSON; see DESIGN.md "Config file"): the BGP speaker with its
  peers and static announcements (bgp.announce), and the JSON status endpoint (status.listen, default
  127.0.0.1:9179: /status /peers /peers/ADDR /routes /healthz). Logs are JSON lines (pino) on stderr.

  Signals: SIGTERM, SIGINT  stop: Cease to every peer, then exit 0
           SIGHUP           reload FILE: unchanged peers keep their sessions; a bad file is logged and ignored

  --check            validate FILE, print it with every default filled in, and exit (0 valid, 1 invalid)
  --log-level LEVEL  trace, debug, info (default), warn, error, fatal, silent
  --run-dir DIR      where the running-marker lives (default /run/blockspeaker, else a temp dir). When the
                     daemon finds its marker at start, the last run did not stop cleanly (crash, kill -9), so it
                     restarts as a graceful-restart "restarting speaker": peers keep our routes meanwhile.
  --restarted        restart as a graceful-restart restarting speaker whatever the marker says
`;

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
const STOP_TIMEOUT_MS = 5000;

function version(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      /* try the next layout (sources vs dist/) */
    }
  }
  return 'unknown';
}

function defaultRunDir(): string {
  if (process.platform === 'linux') {
    try {
      mkdirSync('/run/blockspeaker', { recursive: true });
      return '/run/blockspeaker';
    } catch {
      /* not root */
    }
  }
  return join(tmpdir(), 'blockspeaker');
}

/** The speaker's Logger on top of pino (pino takes the fields first). */
function speakerLogger(log: Pino): Logger {
  return {
    debug: (msg, f) => log.debug(f ?? {}, msg),
    info: (msg, f) => log.info(f ?? {}, msg),
    warn: (msg, f) => log.warn(f ?? {}, msg),
    error: (msg, f) => log.error(f ?? {}, msg),
  };
}

/**
 * The running-marker: present while a daemon runs, removed on a clean stop. Found at start = the previous run
 * died, and (on Linux /run, a tmpfs) the host did not reboot since, so its routes are still installed.
 */
class RunMarker {
  constructor(readonly path: string) {}

  /** true when a previous run left its marker behind. */
  claim(log: Pino): boolean {
    let found = false;
    if (existsSync(this.path)) {
      const pid = Number(readFileSync(this.path, 'utf8').trim());
      let alive = false;
      try {
        if (pid > 0 && pid !== process.pid) alive = process.kill(pid, 0);
      } catch {
        alive = false;
      }
      if (alive) log.warn({ pid, marker: this.path }, 'another blockspeaker seems to run with this node name');
      found = !alive;
    }
    mkdirSync(join(this.path, '..'), { recursive: true });
    writeFileSync(this.path, `${process.pid}\n`);
    return found;
  }

  release(): void {
    rmSync(this.path, { force: true });
  }
}

const sameListen = (a: ListenAddress | undefined, b: ListenAddress | undefined) =>
  a?.address === b?.address && a?.port === b?.port;

export async function run(argv: string[]): Promise<number> {
  const { values } = parse('run', argv, {
    config: { type: 'string', short: 'c' },
    check: { type: 'boolean' },
    'log-level': { type: 'string' },
    'run-dir': { type: 'string' },
    restarted: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const file = required('run', values, 'config');
  const level = values['log-level'] ?? 'info';
  if (!LEVELS.includes(level)) throw new CliError(`run: --log-level must be one of ${LEVELS.join(', ')}, got "${level}"`);

  let cfg: Config = loadConfig(file); // a ConfigError ends the command: main prints it, exit 1
  if (values.check) {
    process.stdout.write(formatConfig(cfg));
    return 0;
  }

  // Synchronous writes: the last lines before an exit (or a crash) are not lost in a buffer.
  const log = pino({ level, base: { node: cfg.node.name } }, pino.destination({ dest: 2, sync: true }));
  const startedAt = Date.now();
  const ver = version();
  log.info({ config: file, version: ver, pid: process.pid }, 'starting');

  const marker = new RunMarker(join(values['run-dir'] ?? defaultRunDir(), `${cfg.node.name}.running`));
  const restarted = marker.claim(log) || !!values.restarted;
  if (restarted) log.info({ marker: marker.path }, 'previous run did not stop cleanly: restarting speaker (graceful restart R bit)');

  let speaker: Speaker | null = null;
  const peerStates = new Map<string, string>();
  const newSpeaker = (bgp: NonNullable<Config['bgp']>, isRestart: boolean): Speaker => {
    const s = new Speaker(bgp, { logger: speakerLogger(log.child({ component: 'bgp' })), restarted: isRestart });
    s.on('peer', (p: PeerStatus) => {
      if (peerStates.get(p.address) === p.state) return;
      peerStates.set(p.address, p.state);
      log.info({ peer: p.address, asn: p.asn, state: p.state, lastError: p.lastError }, `peer ${p.address} ${p.state}`);
    });
    return s;
  };

  const status = new StatusServer({
    version: ver,
    startedAt,
    node: () => cfg.node,
    bgp: () => (cfg.bgp ? { asn: cfg.bgp.asn, routerId: cfg.bgp.routerId } : null),
    peers: () => speaker?.peers() ?? [],
    rib: () => speaker?.rib ?? null,
  });
  const startStatus = async (c: Config) => {
    if (!c.status) return;
    const a = await status.listen(c.status.listen.address, c.status.listen.port);
    log.info({ address: a.address, port: a.port }, `status endpoint on http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}/status`);
  };

  let stopping = false;
  let done!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (done = resolve));

  const stop = async (why: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason: why }, 'stopping');
    const timer = setTimeout(() => {
      log.warn({ timeoutMs: STOP_TIMEOUT_MS }, 'stop timed out; exiting anyway');
      marker.release();
      done(code);
    }, STOP_TIMEOUT_MS); // not unref'd: it must fire even when nothing else keeps the loop alive
    try {
      await Promise.all([
        status.close().then(() => log.debug('status endpoint closed')),
        speaker?.stop({ graceful: true }).then(() => log.debug('speaker stopped')),
      ]);
    } catch (e) {
      log.error({ err: (e as Error).message }, 'error while stopping');
    }
    clearTimeout(timer);
    marker.release();
    log.info('stopped');
    done(code);
  };

  // Reloads run one at a time, in signal order.
  let reloading: Promise<void> = Promise.resolve();
  const reload = async () => {
    if (stopping) return;
    let next: Config;
    try {
      next = loadConfig(file);
    } catch (e) {
      const issues = e instanceof ConfigError ? e.issues.map((i) => `${i.path}: ${i.message}`) : [(e as Error).message];
      log.error({ config: file, errors: issues }, 'reload failed: config invalid, keeping the running config');
      return;
    }
    if (next.node.name !== cfg.node.name) log.warn({ from: cfg.node.name, to: next.node.name }, 'node.name changes need a restart; ignored');
    next = { ...next, node: { ...next.node, name: cfg.node.name } };
    try {
      if (speaker && next.bgp) await speaker.reconfigure(next.bgp);
      else if (speaker && !next.bgp) {
        await speaker.stop({ graceful: true });
        speaker = null;
        peerStates.clear();
      } else if (!speaker && next.bgp) {
        speaker = newSpeaker(next.bgp, false);
        await speaker.start();
      }
      const was = cfg.status ? cfg.status.listen : undefined;
      const now = next.status ? next.status.listen : undefined;
      if (!sameListen(was, now)) {
        await status.close();
        try {
          await startStatus(next);
        } catch (e) {
          // e.g. the new port is taken: keep serving where we were.
          log.error({ err: (e as Error).message, listen: now }, 'status endpoint: cannot move; staying on the old address');
          await startStatus(cfg);
          next = { ...next, status: cfg.status };
        }
      }
      cfg = next;
      log.info({ config: file }, 'config reloaded');
    } catch (e) {
      cfg = next;
      log.error({ err: (e as Error).message }, 'reload partly applied');
    }
  };

  const onSignal = (sig: NodeJS.Signals) => {
    if (sig === 'SIGHUP') {
      log.info('SIGHUP: reloading config');
      reloading = reloading.then(reload);
    } else if (stopping) {
      log.warn({ signal: sig }, 'second stop signal: exiting now');
      marker.release();
      done(sig === 'SIGINT' ? 130 : 143);
    } else void reloading.then(() => stop(sig, 0));
  };
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, onSignal);

  try {
    if (cfg.bgp) {
      speaker = newSpeaker(cfg.bgp, restarted);
      await speaker.start();
      const l = speaker.listening();
      log.info({ asn: cfg.bgp.asn, routerId: cfg.bgp.routerId, listen: l, peers: cfg.bgp.peers.length, announce: cfg.bgp.announce.length },
        'bgp started');
    } else log.warn('no bgp section: the speaker does not run');
    await startStatus(cfg);
  } catch (e) {
    log.fatal({ err: (e as Error).message }, 'cannot start');
    await stop('start failed', 1);
  }

  const code = await finished;
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.off(sig, onSignal);
  // Anything still holding the event loop (a retry timer, a half-open socket) must not delay the exit. Not
  // unref'd: an unref'd immediate does not wake a loop that is blocked waiting for a timer.
  setImmediate(() => process.exit(code));
  return code;
}
