// `blockspeaker install-cni`: put the CNI plugin and the network config list on the host, what the DaemonSets' init
// containers do (and a node's installer may run by hand). Every file is written only when its bytes change; a
// plugin executable that is running is replaced the way the OS allows (src/platform/replace-exe.ts); a folder made
// here is writable by administrators only from its first instant (src/platform/install-dir.ts).
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../config/config.ts';
import { conflistText } from '../daemon/conflist.ts';
import { HNS_DEFAULT_NETWORK } from '../hns/limits.ts';
import { writeFileIfChanged } from '../platform/atomic-file.ts';
import { mkdirs0755, prepareInstallDir } from '../platform/install-dir.ts';
import { hostPlatform, type Platform } from '../platform/platform.ts';
import { replaceExecutable, type ReplaceOutcome, type Source } from '../platform/replace-exe.ts';
import { sandboxPath, sandboxRoot, SANDBOX_ENV } from '../platform/sandbox.ts';
import { CliError, parse } from './args.ts';

const CMD = 'install-cni';

export const DEFAULTS = {
  linux: { binDir: '/opt/cni/bin', confDir: '/etc/cni/net.d' },
  win32: { binDir: 'C:\\opt\\cni\\bin', confDir: 'C:\\etc\\cni\\net.d' },
} as const;

/** The Windows plugin executable in the package, and the names it is installed under in the CNI bin folder. */
export const WINDOWS_PLUGIN = 'blockspeaker-cni.exe';
/** blockspeaker.exe: the main plugin ("type": "blockspeaker"); blockspeaker-cni.exe: another plugin's IPAM. */
export const WINDOWS_NAMES = ['blockspeaker.exe', 'blockspeaker-cni.exe'] as const;
/** Linux: the plugin's files in the app folder (besides the compiled plugin under dist/src, found from its entry). */
export const LINUX_APP_FILES = ['package.json', 'bin/blockspeaker-cni', 'bin/blockspeaker-cni-shim'] as const;
export const LINUX_PLUGIN_ENTRY = 'dist/src/cni/main.js';
/** Linux: the folder beside the launcher holding node and the plugin's files (found from the launcher's own path). */
export const LINUX_LIB = 'blockspeaker-cni-lib';

const HELP = `usage: blockspeaker install-cni [-c FILE | --conflist FILE] [--bin-dir DIR] [--conf-dir DIR] [--from DIR]

  Installs the CNI plugin into the host's CNI bin folder and the network config list into its conf folder (what
  the DaemonSets' install-cni init containers run; safe to run at every start). A file is written only when its
  bytes differ; each line of output names a path and what happened to it (created, installed, replaced,
  unchanged, written, removed, kept).

  Windows: blockspeaker-cni.exe (self-contained: nothing beside it) is installed as blockspeaker.exe (the main
    plugin, "type": "blockspeaker") and as blockspeaker-cni.exe (the IPAM plugin name). A running plugin cannot be
    replaced or deleted on Windows, only renamed: the new file is copied beside and renamed in; when the old one is
    in use it is first moved aside to NAME.old-PID-TIME, and a CNI call running it carries on. Each NAME.old-*
    nothing runs any more is removed (one still running is kept, and removed by a later install-cni).
  Linux: a launcher blockspeaker-cni into the bin folder, and beside it ${LINUX_LIB}/ with node (this
    process's runtime) and the plugin's files: the launcher runs the Perl shim (app/bin/blockspeaker-cni-shim,
    forwarding to the daemon) with /usr/bin/perl, else the Node.js plugin; it finds them from its own path, so the
    bin folder may be mounted anywhere in this container. Each file is renamed over the old one (atomic; a running
    one carries on).
  A bin or conf folder that is missing is created, with its missing parents, writable by administrators only:
    Windows: SYSTEM and Administrators only (protected, in the same call as the folder is made, never inheriting
    C:\\'s entries that let Users create files); Linux: 0755. An existing folder is left as it is, with a warning on
    stderr (and the command that fixes it) when others may add or replace files in it.

  -c, --config FILE  the node config: the list is built from dataplane.cni and dataplane.network (kind hns) and the
                     config's pools, as the daemon writes it (blockspeaker cni conflist); written into
                     dataplane.cni.confDir as dataplane.cni.fileName
  --conflist FILE    the network config list to install as it is (a .conflist, .conf or .json file; its name is kept)
                     (neither: only the plugin is installed)
  --bin-dir DIR      the host's CNI bin folder (default /opt/cni/bin; Windows C:\\opt\\cni\\bin)
  --conf-dir DIR     the host's CNI conf folder (default /etc/cni/net.d; Windows C:\\etc\\cni\\net.d; with -c:
                     dataplane.cni.confDir, and another DIR is refused)
  --from DIR         where the plugin is taken from. Windows: the folder holding blockspeaker-cni.exe (default: this
                     executable's folder, else %${SANDBOX_ENV}% in a HostProcess container); Linux: the
                     app folder holding bin/ and dist/ (default: the one this blockspeaker runs from)

  In a Windows HostProcess container, -c, --conflist and --from paths that start with \\ or / and have no drive are
  the container's (read under %${SANDBOX_ENV}%); the bin and conf folders are the host's.
  Exit status: 0 installed (warnings or not), 1 a file or folder could not be written, 2 bad arguments.
`;

/** Installing failed after the arguments were accepted (printed as one line by main, exit 1). */
export class InstallCniError extends Error {
  override name = 'InstallCniError';
}

export interface InstallContext {
  platform: Platform;
  /** This process's executable (Windows: blockspeaker.exe; Linux: node). */
  execPath: string;
  /** The script it runs (Linux: bin/blockspeaker.js of the app), process.argv[1]. */
  script?: string;
}

export interface InstallFile {
  source: Source;
  target: string;
  /** Linux mode (default: the source's). */
  mode?: number;
}

/** Everything install-cni will do, decided from the flags before anything is written. */
export interface InstallPlan {
  platform: Platform;
  /** Folders made admin-only when missing, or checked (warned about) when they exist. */
  dirs: string[];
  /** In order: what the launcher or the conflist needs comes first. */
  files: InstallFile[];
  conflist?: { target: string; text: string };
}

const bad = (msg: string): never => {
  throw new CliError(`${CMD}: ${msg}`);
};

function dirFlag(values: Record<string, unknown>, name: string, p: Platform): string | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.trim() === '') bad(`--${name} must not be empty`);
  const s = (v as string).trim();
  if (!path.isAbsolute(s)) bad(`--${name} must be an absolute path, got "${s}"`);
  return s;
}

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function readFlagFile(flag: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (e as Error).message;
    return bad(`${flag} ${file}: cannot read it: ${why}`);
  }
}

/**
 * The compiled plugin's files under `app`, relative: its entry and every module it imports, followed through relative
 * specifiers. The plugin uses node builtins only (src/cni/plugin.ts); a package import would need node_modules.
 */
export function pluginClosure(app: string, entry = LINUX_PLUGIN_ENTRY): string[] {
  const seen = new Set<string>();
  const todo = [path.join(app, entry)];
  while (todo.length) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = fs.readFileSync(file, 'utf8');
    const specs = [
      ...text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s*(["'])([^"']+)\1/gm),
      ...text.matchAll(/^\s*import\s*(["'])([^"']+)\1/gm),
      ...text.matchAll(/\bimport\(\s*(["'])([^"']+)\1\s*\)/g),
    ].map((m) => m[2]!);
    for (const s of specs) {
      if (s.startsWith('node:')) continue;
      if (!s.startsWith('./') && !s.startsWith('../')) {
        throw new Error(`${path.relative(app, file)} imports "${s}": the CNI plugin must use node builtins only, nothing from node_modules`);
      }
      const dep = path.resolve(path.dirname(file), s);
      if (!isFile(dep)) throw new Error(`${path.relative(app, file)} imports "${s}", which is not at ${dep}`);
      todo.push(dep);
    }
  }
  return [...seen].map((f) => path.relative(app, f)).sort();
}

/**
 * The Linux launcher in the CNI bin folder. It finds ${LINUX_LIB} beside itself ($0 is the path the runtime ran: a
 * full one), so it works wherever the installer saw the folder (the DaemonSet mounts it at /host/opt/cni/bin).
 */
export const LINUX_LAUNCHER = `#!/bin/sh
# blockspeaker-cni, installed by \`blockspeaker install-cni\`: the Perl shim, or the Node.js plugin without perl,
# both from ${LINUX_LIB} beside this file.
case $0 in */*) lib=\${0%/*}/${LINUX_LIB} ;; *) lib=./${LINUX_LIB} ;; esac
[ -x /usr/bin/perl ] && exec /usr/bin/perl "$lib/app/bin/blockspeaker-cni-shim" "$@"
exec "$lib/node" "$lib/app/bin/blockspeaker-cni" "$@"
`;

/** The app folder this blockspeaker runs from (bin/blockspeaker.js's parent), or undefined. */
function appOfScript(script: string | undefined): string | undefined {
  if (!script) return undefined;
  let real: string;
  try {
    real = fs.realpathSync(script);
  } catch {
    return undefined;
  }
  return path.basename(real) === 'blockspeaker.js' && path.basename(path.dirname(real)) === 'bin' ? path.dirname(path.dirname(real)) : undefined;
}

/** Check the flags and decide everything (CliError naming the flag when one is wrong). */
export function planInstall(values: Record<string, unknown>, ctx: InstallContext): InstallPlan {
  const p = ctx.platform;
  const pp = path; // the OS's own rules (the Windows double: Linux paths)
  const windows = p.id === 'win32';
  const input = (x: string) => sandboxPath(p.id, p.env, x); // -c, --conflist, --from: the container's when rooted
  for (const f of ['config', 'conflist', 'from'] as const) {
    if (values[f] !== undefined && String(values[f]).trim() === '') bad(`--${f} must not be empty`);
  }
  if (values.config !== undefined && values.conflist !== undefined) bad('-c (--config) and --conflist: give one of them, the network config list comes from either');
  const binDir = dirFlag(values, 'bin-dir', p) ?? (windows ? DEFAULTS.win32.binDir : DEFAULTS.linux.binDir);
  const confFlag = dirFlag(values, 'conf-dir', p);
  const dirs = [binDir];
  const files: InstallFile[] = [];

  if (windows) {
    let from: string;
    if (values.from !== undefined) {
      from = input(String(values.from).trim());
      if (!isFile(pp.join(from, WINDOWS_PLUGIN))) bad(`--from ${from}: no ${WINDOWS_PLUGIN} there`);
    } else {
      const candidates = [pp.dirname(ctx.execPath), sandboxRoot(p.id, p.env)].filter((x): x is string => !!x);
      const found = candidates.find((d) => isFile(pp.join(d, WINDOWS_PLUGIN)));
      if (!found) bad(`no ${WINDOWS_PLUGIN} in ${candidates.join(' nor in ')}: pass --from DIR (the folder of the package)`);
      from = found!;
    }
    for (const name of WINDOWS_NAMES) files.push({ source: pp.join(from, WINDOWS_PLUGIN), target: pp.join(binDir, name) });
  } else {
    const lib = path.join(binDir, LINUX_LIB);
    let app: string;
    if (values.from !== undefined) app = path.resolve(String(values.from).trim());
    else {
      const found = appOfScript(ctx.script);
      if (!found) bad(`cannot tell which app folder this blockspeaker runs from (${ctx.script ?? 'no script'} is not a bin/blockspeaker.js): pass --from DIR`);
      app = found!;
    }
    const flag = values.from !== undefined ? `--from ${app}` : `the app folder ${app} (pass --from DIR for another)`;
    for (const rel of [...LINUX_APP_FILES, LINUX_PLUGIN_ENTRY]) {
      if (!isFile(path.join(app, rel))) bad(`${flag}: no ${rel}${rel === LINUX_PLUGIN_ENTRY ? ' (the compiled plugin: npm run build)' : ''}`);
    }
    let closure: string[];
    try {
      closure = pluginClosure(app);
    } catch (e) {
      return bad(`${flag}: ${(e as Error).message}`);
    }
    // The runtime first, then the plugin's modules, its entry scripts, and the launcher that runs them last.
    files.push({ source: ctx.execPath, target: path.join(lib, 'node'), mode: 0o755 });
    for (const rel of closure) files.push({ source: path.join(app, rel), target: path.join(lib, 'app', rel), mode: 0o644 });
    for (const rel of LINUX_APP_FILES) files.push({ source: path.join(app, rel), target: path.join(lib, 'app', rel), mode: rel.startsWith('bin/') ? 0o755 : 0o644 });
    files.push({ source: { bytes: Buffer.from(LINUX_LAUNCHER) }, target: path.join(binDir, 'blockspeaker-cni'), mode: 0o755 });
  }

  let conflist: InstallPlan['conflist'];
  if (values.conflist !== undefined) {
    const file = input(String(values.conflist).trim());
    const name = pp.basename(file);
    if (!/\.(conflist|conf|json)$/.test(name)) bad(`--conflist ${file}: the name must end in .conflist, .conf or .json (containerd reads only those)`);
    const text = readFlagFile('--conflist', file);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      bad(`--conflist ${file}: not JSON (${(e as Error).message})`);
    }
    if (!json || typeof json !== 'object' || Array.isArray(json)) bad(`--conflist ${file}: not a JSON object`);
    const o = json as Record<string, unknown>;
    if (name.endsWith('.conflist') && !(Array.isArray(o.plugins) && o.plugins.length > 0)) bad(`--conflist ${file}: a .conflist needs a non-empty "plugins" list`);
    if (typeof o.name !== 'string' || o.name === '') bad(`--conflist ${file}: no "name" (the network's)`);
    const confHost = confFlag ?? (windows ? DEFAULTS.win32.confDir : DEFAULTS.linux.confDir);
    conflist = { target: pp.join(confHost, name), text };
  } else if (values.config !== undefined) {
    const file = input(String(values.config).trim());
    const cfg = loadConfig(file, p); // a ConfigError names the file and each problem
    const dp = cfg.dataplane;
    const cni = dp.kind === 'hns' ? dp.cni : undefined;
    if (!cni) bad(`-c ${file}: the config has no dataplane.cni (dataplane kind hns), which the network config list is built from: add it, or pass --conflist FILE`);
    const same = (a: string, b: string) => (windows ? pp.resolve(a).toLowerCase() === pp.resolve(b).toLowerCase() : pp.resolve(a) === pp.resolve(b));
    if (confFlag !== undefined && !same(confFlag, cni!.confDir)) {
      bad(`--conf-dir ${confFlag} is not dataplane.cni.confDir ${cni!.confDir} of ${file}, where the daemon writes the list: leave --conf-dir out, or change the config`);
    }
    const network = dp.kind === 'hns' ? dp.network ?? HNS_DEFAULT_NETWORK : HNS_DEFAULT_NETWORK;
    // As the daemon writes it (src/daemon/hns.ts): pools sorted by CIDR, the socket when it is not the default.
    const pools = [...(cfg.ipam?.pools ?? [])].sort((a, b) => (a.cidr < b.cidr ? -1 : a.cidr > b.cidr ? 1 : 0));
    const socket = cfg.ipc && cfg.ipc.path !== p.paths.ipcPath ? cfg.ipc.path : undefined;
    conflist = { target: pp.join(cni!.confDir, cni!.fileName), text: conflistText(cni!, network, pools, { socket }) };
  } else if (confFlag !== undefined) {
    bad('--conf-dir without -c or --conflist: there is no network config list to write there');
  }
  if (conflist) dirs.push(pp.dirname(conflist.target));
  return { platform: p, dirs, files, conflist };
}

export interface InstallResult {
  /** One line per path: what happened to it. */
  lines: string[];
  /** Said on stderr; the install went on. */
  warnings: string[];
  outcomes: ReplaceOutcome[];
  conflist?: 'written' | 'unchanged';
}

function describe(o: ReplaceOutcome): string[] {
  const lines = [`${o.target}: ${o.outcome}${o.movedAside ? ` (the old one is in use: moved aside to ${o.movedAside})` : ''}`];
  for (const r of o.removed) lines.push(`${r}: removed (replaced earlier, no longer in use)`);
  for (const k of o.kept) lines.push(`${k.path}: kept, still in use (${k.code}); a later install-cni removes it`);
  return lines;
}

/** Do it. Throws InstallCniError (what was done so far is in its message's lines) when a step fails. */
export async function installCni(plan: InstallPlan, opts: { now?: () => number } = {}): Promise<InstallResult> {
  const p = plan.platform;
  const out: InstallResult = { lines: [], warnings: [], outcomes: [] };
  let step = '';
  try {
    for (const dir of plan.dirs) {
      step = `cannot prepare the folder ${dir}`;
      const r = await prepareInstallDir(p, dir);
      if (r.what) out.lines.push(r.what);
      if (r.warning) out.warnings.push(r.warning);
    }
    for (const f of plan.files) {
      step = `cannot install ${f.target}`;
      if (p.id === 'linux') mkdirs0755(path.dirname(f.target)); // the lib folder's own subfolders
      const o = replaceExecutable(p, f.source, f.target, { mode: f.mode, now: opts.now });
      out.outcomes.push(o);
      out.lines.push(...describe(o));
    }
    if (plan.conflist) {
      step = `cannot write ${plan.conflist.target}`;
      out.conflist = writeFileIfChanged(p, plan.conflist.target, plan.conflist.text);
      out.lines.push(`${plan.conflist.target}: ${out.conflist}`);
    }
  } catch (e) {
    const done = out.lines.length ? ` (done before: ${out.lines.join('; ')})` : '';
    throw new InstallCniError(`${CMD}: ${step}: ${(e as Error)?.message ?? String(e)}${done}`);
  }
  return out;
}

export async function run(argv: string[], ctx: InstallContext = { platform: hostPlatform(), execPath: process.execPath, script: process.argv[1] }): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(HELP);
    return 0;
  }
  const { values } = parse(CMD, argv, {
    config: { type: 'string', short: 'c' },
    conflist: { type: 'string' },
    'bin-dir': { type: 'string' },
    'conf-dir': { type: 'string' },
    from: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  const plan = planInstall(values, ctx);
  const r = await installCni(plan);
  for (const w of r.warnings) process.stderr.write(`${CMD}: warning: ${w}\n`);
  process.stdout.write(r.lines.map((l) => `${l}\n`).join(''));
  return 0;
}
