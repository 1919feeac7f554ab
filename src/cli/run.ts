// `blockspeaker run -c FILE`: the node daemon's process (arguments, signals, run marker). The parts and their
// wiring live in src/daemon/daemon.ts. SIGTERM/SIGINT stop gracefully (exit 0), SIGHUP reloads the config.
import { mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger as Pino } from 'pino';
import { ConfigError, formatConfig, loadConfig, type Config } from '../config/config.ts';
import { Daemon } from '../daemon/daemon.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker run -c FILE [--check] [--log-level LEVEL] [--run-dir DIR] [--restarted] [--dry-run]

  Runs the node daemon with the config FILE (YAML or JSON; see DESIGN.md "Config file"): IPAM on its store
  (ipam.store; pools and Calico manifests from ipam.calico are added when missing), the BGP speaker with its peers,
  static announcements and this node's IPAM blocks and borrowed addresses, the route programmer (dataplane:
  none | linux | hns), the control socket (ipc.path: CLI and CNI plugin) and the status endpoint (status.listen,
  default 127.0.0.1:9179: /status /peers /peers/ADDR /routes /ipam/pools /ipam/blocks /dataplane /healthz
  /readyz /metrics). Logs are JSON lines (pino) on stderr.

  Signals: SIGTERM          graceful-restart stop: sessions closed without NOTIFICATION, so peers keep our routes
                           (stale) until we are back; routes stay installed; store closed; exit 0
           SIGINT           full stop: Cease to every peer (they drop our routes), store closed, exit 0
           SIGHUP           reload FILE: unchanged peers keep their sessions; a bad file is logged and ignored

  --check            validate FILE, print it with every default filled in, and exit (0 valid, 1 invalid)
  --log-level LEVEL  trace, debug, info (default), warn, error, fatal, silent
  --run-dir DIR      where the running-marker lives (default /run/blockspeaker, else a temp dir). When the
                     daemon finds its marker at start, the last run did not stop cleanly (crash, kill -9), so it
                     restarts as a graceful-restart "restarting speaker": peers keep our routes meanwhile.
  --restarted        restart as a graceful-restart restarting speaker whatever the marker says
  --dry-run          dataplane hns: plan against the in-memory fake HNS even on Windows
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

export async function run(argv: string[]): Promise<number> {
  const { values } = parse('run', argv, {
    config: { type: 'string', short: 'c' },
    check: { type: 'boolean' },
    'log-level': { type: 'string' },
    'run-dir': { type: 'string' },
    restarted: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const file = required('run', values, 'config');
  const level = values['log-level'] ?? 'info';
  if (!LEVELS.includes(level)) throw new CliError(`run: --log-level must be one of ${LEVELS.join(', ')}, got "${level}"`);

  const cfg: Config = loadConfig(file); // a ConfigError ends the command: main prints it, exit 1
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

  const daemon = new Daemon({ file, config: cfg, log, version: ver, restarted, dryRun: !!values['dry-run'], startedAt });

  let stopping = false;
  let done!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (done = resolve));

  const stop = async (why: string, code: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason: why }, 'stopping');
    const timer = setTimeout(() => {
      log.warn({ timeoutMs: STOP_TIMEOUT_MS }, 'stop timed out; exiting anyway');
      if (why !== 'SIGTERM') marker.release();
      done(code);
    }, STOP_TIMEOUT_MS); // not unref'd: it must fire even when nothing else keeps the loop alive
    // SIGTERM is a restart (rolling update, reboot): peers keep our routes under graceful restart, and the marker
    // stays so the next start announces itself as a restarting speaker (R bit). Anything else is a full stop.
    const restart = why === 'SIGTERM';
    await daemon.stop({ restart });
    clearTimeout(timer);
    if (!restart) marker.release();
    log.info('stopped');
    done(code);
  };

  // Reloads run one at a time, in signal order.
  let reloading: Promise<void> = Promise.resolve();
  const reload = async () => {
    if (stopping) return;
    try {
      await daemon.reload();
    } catch (e) {
      const issues = e instanceof ConfigError ? e.issues.map((i) => `${i.path}: ${i.message}`) : [(e as Error).message];
      log.error({ config: file, errors: issues }, 'reload failed: config invalid, keeping the running config');
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
    await daemon.start();
    log.info({ ready: daemon.ready() }, 'started');
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
