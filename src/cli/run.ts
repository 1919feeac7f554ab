// `blockspeaker run -c FILE`: the node daemon's process (arguments, signals and service controls, run marker). The
// parts and their wiring live in src/daemon/daemon.ts. Which signal means what is the platform's (Linux: SIGTERM
// restart-stop, SIGINT withdraw-stop, SIGHUP reload; Windows: Ctrl+C/Ctrl+Break/console close restart-stop); on
// every OS `blockspeaker daemon stop [--withdraw]` and `daemon reload` do the same over the control socket.
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pino, type Logger as Pino } from 'pino';
import { ConfigError, formatConfig, loadConfig, type Config } from '../config/config.ts';
import { Daemon } from '../daemon/daemon.ts';
import { DirAclError, hostPlatform, type ControlAction, type DirReport, type Platform } from '../platform/platform.ts';
import { markerSubject, RunMarker, RunMarkerError } from '../platform/runmarker.ts';
import { secretFiles } from '../config/secret-files.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker run -c FILE [--check] [--log-level LEVEL] [--run-dir DIR] [--restarted] [--dry-run]

  Runs the node daemon with the config FILE (YAML or JSON; see DESIGN.md "Config file"): IPAM on its store
  (ipam.store; pools and Calico manifests from ipam.calico are added when missing), the BGP speaker with its peers,
  static announcements and this node's IPAM blocks and borrowed addresses, the route programmer (dataplane:
  none | linux | hns), the control socket (ipc.path: CLI and CNI plugin) and the status endpoint (status.listen,
  default 127.0.0.1:9179: /status /peers /peers/ADDR /routes /ipam/pools /ipam/blocks /dataplane /healthz
  /readyz /metrics). Logs are JSON lines (pino) on stderr.

  Stopping and reloading (every OS, over the control socket):
    blockspeaker daemon stop             graceful-restart stop: sessions closed without NOTIFICATION, so peers keep
                                         our routes (stale) until we are back; routes stay installed; exit 0
    blockspeaker daemon stop --withdraw  the node goes away: Cease to every peer (they drop our routes), exit 0
    blockspeaker daemon reload           re-read FILE: unchanged peers keep their sessions; a bad file is refused
  Signals, Linux:   SIGTERM graceful-restart stop   SIGINT withdraw   SIGHUP reload
  Signals, Windows: Ctrl+C (SIGINT), Ctrl+Break (SIGBREAK), console closed (SIGHUP): graceful-restart stop
                    (there is no SIGTERM; a service stop arrives as one of these)

  --check            validate FILE, print it with every default filled in, and exit (0 valid, 1 invalid)
  --log-level LEVEL  trace, debug, info (default), warn, error, fatal, silent
  --run-dir DIR      where the running-marker lives (default /run/blockspeaker, Windows
                     C:\\ProgramData\\blockspeaker\\run; else a temp dir). The marker is keyed by the store and
                     records the boot: found at start from this boot, the last run did not stop for good (crash,
                     kill -9, restart-stop), so it restarts as a graceful-restart "restarting speaker"; a live
                     daemon on the same store makes start fail.
  --restarted        restart as a graceful-restart restarting speaker whatever the marker says
  --dry-run          dataplane hns: plan against the in-memory fake HNS even on Windows
`;

/** Start refused before anything was written (printed as one line by main, exit 1). */
class StartError extends Error {
  override name = 'StartError';
}

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

/** The run dir; directories made here (Windows: C:\\ProgramData\\blockspeaker first) get the platform's ACL. */
async function defaultRunDir(platform: Platform, log: Pino): Promise<string> {
  let r;
  try {
    r = await platform.prepareDir(platform.paths.runDir);
  } catch (e) {
    // An existing run dir open to others is refused (DirAclError 'acl'/'read'); one we cannot make is not ours to use.
    if (e instanceof DirAclError && e.reason !== 'create') throw new StartError(e.message);
    return join(tmpdir(), 'blockspeaker'); // not root / not an administrator
  }
  if (r) {
    if (r.enforced) log.info({ dir: r.created ?? platform.paths.runDir }, r.what);
    else log.warn({ dir: r.created ?? platform.paths.runDir }, r.what);
  }
  return platform.paths.runDir;
}

/** Run one of the config's access checks: a refusal is a StartError naming the config; what was checked is logged. */
async function configCheck(file: string, log: Pino, check: () => Promise<DirReport | undefined>): Promise<void> {
  let r;
  try {
    r = await check();
  } catch (e) {
    if (e instanceof DirAclError) throw new StartError(`config ${file}: ${e.message}`);
    throw e;
  }
  if (r) {
    if (r.enforced) log.info({ config: file }, r.what);
    else log.warn({ config: file }, r.what);
  }
}

/** The config file's directory: whoever may write there may change what this daemon (LocalSystem) runs with. */
async function checkConfigDir(platform: Platform, file: string, log: Pino): Promise<void> {
  await configCheck(file, log, () => platform.prepareDir(dirname(resolve(file)), { create: false }));
}

/**
 * The config file itself (others must not change it) and the secret files it names (nor read them). A secret file
 * that is not there is left to its reader, which says so where it is read.
 */
async function checkConfigFiles(platform: Platform, file: string, cfg: Config, log: Pino): Promise<void> {
  await configCheck(file, log, () => platform.checkFile(file));
  for (const s of secretFiles(cfg)) {
    if (existsSync(s.file)) await configCheck(file, log, () => platform.checkFile(s.file, { secret: s.field }));
  }
}

export async function run(argv: string[], platform: Platform = hostPlatform()): Promise<number> {
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

  const cfg: Config = loadConfig(file, platform); // a ConfigError ends the command: main prints it, exit 1
  if (values.check) {
    process.stdout.write(formatConfig(cfg));
    return 0;
  }

  // Synchronous writes: the last lines before an exit (or a crash) are not lost in a buffer.
  const log = pino({ level, base: { node: cfg.node.name } }, pino.destination({ dest: 2, sync: true }));
  const startedAt = Date.now();
  const ver = version();
  log.info({ config: file, version: ver, pid: process.pid }, 'starting');
  await checkConfigDir(platform, file, log);
  await checkConfigFiles(platform, file, cfg, log);

  const subject = markerSubject(cfg.ipam?.store, cfg.node.name, file);
  const marker = new RunMarker(values['run-dir'] ?? (await defaultRunDir(platform, log)), cfg.node.name, subject, platform);
  let claim;
  try {
    claim = marker.claim();
  } catch (e) {
    // A second daemon on the same store: nothing was written; main prints the message, exit 1.
    if (e instanceof RunMarkerError) throw new StartError(e.message);
    throw new StartError(`cannot write the running-marker ${marker.path}: ${(e as Error).message}`);
  }
  if (claim.note && !claim.restarted) log.info({ marker: marker.path }, claim.note);
  const restarted = claim.restarted || !!values.restarted;
  if (restarted) log.info({ marker: marker.path, why: claim.note ?? '--restarted' }, 'restarting speaker (graceful restart R bit)');

  const controls = {
    stop: (withdraw: boolean) => void reloading.then(() => stop(withdraw ? 'daemon stop --withdraw' : 'daemon stop', 0, !withdraw)),
    reload: (): Promise<void> => {
      const r: Promise<void> = reloading.then(() => (stopping ? undefined : daemon.reload()));
      reloading = r.catch(() => {});
      return r;
    },
  };
  const daemon = new Daemon({ file, config: cfg, log, version: ver, restarted, dryRun: !!values['dry-run'], startedAt, platform, controls });

  let stopping = false;
  let done!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (done = resolve));

  const stop = async (why: string, code: number, restart: boolean) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason: why, restart }, 'stopping');
    const timer = setTimeout(() => {
      log.warn({ timeoutMs: STOP_TIMEOUT_MS }, 'stop timed out; exiting anyway');
      if (!restart) marker.release();
      done(code);
    }, STOP_TIMEOUT_MS); // not unref'd: it must fire even when nothing else keeps the loop alive
    // A restart-stop (rolling update, reboot, service stop): peers keep our routes under graceful restart, and the
    // marker stays so the next start announces itself as a restarting speaker (R bit). Withdraw is a full stop.
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

  const actions = new Map<string, ControlAction>(platform.controls.map((c) => [c.signal, c.action]));
  const onSignal = (sig: NodeJS.Signals) => {
    const action = actions.get(sig);
    if (action === 'reload') {
      log.info({ signal: sig }, 'reloading config');
      reloading = reloading.then(reload);
    } else if (stopping) {
      log.warn({ signal: sig }, 'second stop signal: exiting now');
      marker.release();
      done(sig === 'SIGINT' ? 130 : 143);
    } else void reloading.then(() => stop(sig, 0, action === 'restart'));
  };
  for (const sig of actions.keys()) process.on(sig, onSignal);

  try {
    await daemon.start();
    log.info({ ready: daemon.ready() }, 'started');
  } catch (e) {
    log.fatal({ err: (e as Error).message }, 'cannot start');
    // Nothing of ours is announced or installed yet: a full stop, and the marker goes.
    await stop('start failed', 1, false);
  }

  const code = await finished;
  for (const sig of actions.keys()) process.off(sig, onSignal);
  // Anything still holding the event loop (a retry timer, a half-open socket) must not delay the exit. Not
  // unref'd: an unref'd immediate does not wake a loop that is blocked waiting for a timer.
  setImmediate(() => process.exit(code));
  return code;
}
