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
import { DirAclError, hostPlatform, system32Dir, type ControlAction, type DirReport, type Platform } from '../platform/platform.ts';
import type { ServiceHost } from '../platform/service-koffi.ts';
import { checkPackagedInstall, PackagedFileError, packagedManifest } from '../platform/packaged-files.ts';
import { markerSubject, RunMarker, RunMarkerError } from '../platform/runmarker.ts';
import { sandboxPath, sandboxRoot } from '../platform/sandbox.ts';
import { NODE_IP_ENV } from '../config/pod-env.ts';
import { secretFiles } from '../config/secret-files.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker run -c FILE [--check] [--log-level LEVEL] [--log-file FILE] [--run-dir DIR] [--restarted] [--dry-run]
                        [--service NAME]

  Runs the node daemon with the config FILE (YAML or JSON; docs/configuration.md lists every field): IPAM on its store
  (ipam.store; pools and Calico manifests from ipam.calico are added when missing), the BGP speaker with its peers,
  static announcements and this node's IPAM blocks and borrowed addresses, the route programmer (dataplane:
  none | linux | hns), the control socket (ipc.path: CLI and CNI plugin) and the status endpoint (status.listen,
  default 127.0.0.1:9179: /status /peers /peers/ADDR /routes /ipam/pools /ipam/blocks /dataplane /healthz
  /readyz /metrics; status.metricsListen, if set, a second listener with /metrics /healthz /readyz only).
  Logs are JSON lines (pino) on stderr.

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
  --log-file FILE    append the log there instead of stderr (a Windows service has no stderr)
  --run-dir DIR      where the running-marker lives (default /run/blockspeaker, Windows
                     C:\\ProgramData\\blockspeaker\\run; else a temp dir). The marker is keyed by the store and
                     records the boot: found at start from this boot, the last run did not stop for good (crash,
                     kill -9, restart-stop), so it restarts as a graceful-restart "restarting speaker"; a live
                     daemon on the same store makes start fail.
  --restarted        restart as a graceful-restart restarting speaker whatever the marker says
  --dry-run          dataplane hns: plan against the in-memory fake HNS even on Windows
  --service NAME     Windows: run as the service NAME, answering the service control manager itself (no wrapper):
                     sc.exe create NAME binPath= "...\\blockspeaker.exe run --service NAME -c FILE"; a service stop
                     or the machine's shutdown is a graceful-restart stop. Refused when the SCM did not start us

  From the environment (what the DaemonSets set, so one config serves every node; a value in FILE always wins):
    NODE_NAME (or NODENAME)  node.name (else the lower-cased host name)
    NODE_IP                  bgp.routerId (an IPv4 address), and the node's address as registered in the cluster,
                             node.bgp.ipv4Address or ipv6Address, with the length of the interface that holds it
    CONTAINER_SANDBOX_MOUNT_POINT  (Windows HostProcess container) FILE, --run-dir and the file paths in FILE that
                             start with / or \ and have no drive are the container's: read under this folder
  ipam.store may be { file: PATH }: the store is that file's content (the etcd endpoints, e.g. from a Secret).
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

/**
 * The run dir; directories made here (Windows: C:\\ProgramData\\blockspeaker first) get the platform's ACL. Private
 * like the store (Linux: made 0700, what it holds 0600; an existing one, or a marker in it, others may read refuses).
 */
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

/** What the pod's environment gave the config (src/config/pod-env.ts), said once at start. */
function logPodEnv(platform: Platform, cfg: Config, log: Pino): void {
  const env = platform.env;
  const given: Record<string, string> = {};
  for (const k of ['NODE_NAME', 'NODENAME', NODE_IP_ENV]) if (env[k]?.trim()) given[k] = env[k]!.trim();
  const sandbox = sandboxRoot(platform.id, env);
  if (sandbox) given.CONTAINER_SANDBOX_MOUNT_POINT = sandbox;
  if (!Object.keys(given).length) return;
  log.info({ env: given, name: cfg.node.name, routerId: cfg.bgp?.routerId, address: cfg.node.bgp?.ipv4Address ?? cfg.node.bgp?.ipv6Address },
    'node identity (the config first, then the environment)');
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

/**
 * The packaged executable: what it loads from beside itself is the build's (SHA-256) and nobody else may change it,
 * nor the executable; otherwise the start is refused naming the file (src/platform/packaged-files.ts). From source:
 * nothing to check.
 */
async function checkPackaged(platform: Platform, log: Pino, manifest = packagedManifest()): Promise<void> {
  if (!manifest) return;
  const exe = process.execPath;
  let r;
  try {
    r = await checkPackagedInstall(exe, manifest, (f) => readFileSync(f), (f) => platform.checkFile(f));
  } catch (e) {
    if (e instanceof PackagedFileError || e instanceof DirAclError) throw new StartError(e.message);
    throw e;
  }
  const unchecked = r.reports.filter((x) => !x.enforced);
  log.info({ dir: dirname(exe), files: r.files.length }, 'the executable and the files it loads: as built (SHA-256), and only SYSTEM and Administrators may change them');
  for (const u of unchecked) log.warn({ dir: dirname(exe) }, u.what);
}

export async function run(argv: string[], platform: Platform = hostPlatform()): Promise<number> {
  const { values } = parse('run', argv, {
    config: { type: 'string', short: 'c' },
    check: { type: 'boolean' },
    'log-level': { type: 'string' },
    'log-file': { type: 'string' },
    'run-dir': { type: 'string' },
    restarted: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    service: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  // In a Windows HostProcess container, /etc/blockspeaker/node.yaml is the ConfigMap's mount, not C:\etc\...
  const file = sandboxPath(platform.id, platform.env, required('run', values, 'config'));
  const runDir = values['run-dir'] === undefined ? undefined : sandboxPath(platform.id, platform.env, values['run-dir']);
  const level = values['log-level'] ?? 'info';
  if (!LEVELS.includes(level)) throw new CliError(`run: --log-level must be one of ${LEVELS.join(', ')}, got "${level}"`);

  const cfg: Config = loadConfig(file, platform); // a ConfigError ends the command: main prints it, exit 1
  if (values.check) {
    process.stdout.write(formatConfig(cfg));
    return 0;
  }

  // Synchronous writes: the last lines before an exit (or a crash) are not lost in a buffer.
  // A service has no stderr: --log-file appends the same JSON lines to a file (created 0600 / admin-only folder).
  const logFile = values['log-file'] === undefined ? undefined : sandboxPath(platform.id, platform.env, values['log-file']);
  const log = pino({ level, base: { node: cfg.node.name } }, pino.destination(logFile ? { dest: logFile, sync: true, append: true, mkdir: false, mode: 0o600 } : { dest: 2, sync: true }));
  const startedAt = Date.now();
  const ver = version();
  log.info({ config: file, version: ver, pid: process.pid }, 'starting');
  logPodEnv(platform, cfg, log);
  await checkPackaged(platform, log);
  await checkConfigDir(platform, file, log);
  await checkConfigFiles(platform, file, cfg, log);

  const subject = markerSubject(cfg.ipam?.store, cfg.node.name, file);
  const marker = new RunMarker(runDir ?? (await defaultRunDir(platform, log)), cfg.node.name, subject, platform);
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

  // Windows service: connect to the SCM before the (possibly long) start, which it sees as START_PENDING.
  let service: ServiceHost | undefined;
  if (values.service !== undefined) {
    if (platform.id !== 'win32') throw new StartError('--service: Windows only (on Linux, systemd runs the daemon: deploy/systemd)');
    try {
      const { connectService } = await import('../platform/service-koffi.ts');
      service = await connectService({
        name: values.service,
        advapi32: `${system32Dir(platform.env)}\\advapi32.dll`,
        onControl: (c) => void reloading.then(() => stop(`service ${c}`, 0, true)),
      });
    } catch (e) {
      throw new StartError(`--service ${values.service}: ${(e as Error).message}`);
    }
    log.info({ service: values.service }, 'running as a Windows service');
  }

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
    service?.running();
    log.info({ ready: daemon.ready() }, 'started');
  } catch (e) {
    log.fatal({ err: (e as Error).message }, 'cannot start');
    // Nothing of ours is announced or installed yet: a full stop, and the marker goes.
    await stop('start failed', 1, false);
  }

  const code = await finished;
  for (const sig of actions.keys()) process.off(sig, onSignal);
  await service?.stopped(code);
  // Anything still holding the event loop (a retry timer, a half-open socket) must not delay the exit. Not
  // unref'd: an unref'd immediate does not wake a loop that is blocked waiting for a timer.
  setImmediate(() => process.exit(code));
  return code;
}
