// The one access rule (./dir-acl.ts) on Linux, from POSIX modes and owners: "others" are every uid but root and the
// daemon's own, and every group or other permission bit. Pure logic over an injected stat, plus the Linux platform's
// prepareDir and checkFile.
//
//   - Others may never CHANGE what the daemon starts from or writes its state into: the config file, the secret
//     files it names, the store, the run dir, and every folder above each of them up to /. An owner that is neither
//     root nor the daemon's uid refuses (an owner may chmod), and so does a group or other write bit (mode & 022):
//     whoever may write a folder may rename what is in it and put another file under the name. Except a sticky
//     folder (1777, like /tmp) owned by root or the daemon's uid: there only an entry's owner may rename or remove it,
//     and the entry on our path is itself held to "owned by root or the daemon's uid".
//   - Others may not READ a secret file or the store either: any group or other bit on it refuses (mode & 077), and
//     so does one on anything in it, down every sub-folder (a symbolic link: where it leads): the store and the run
//     dir are made 0700 and what they hold is created 0600 (./atomic-file.ts createFile), so a wider entry was made
//     by someone or something else (an older version, a copy, a restore) and may be opened at its own path wherever
//     it leads, or by anyone the folder lets in once its mode is loosened. A shared lock taken on the store's LOCK by
//     another uid stalls every writer: with the folder 0700 and LOCK 0600 nobody else can open it at all.
//   - The config file and the folders holding it (and holding the secrets) others may read.
//   - What lies on a read-only mount cannot be changed through it whatever its mode bits: kubelet mounts a ConfigMap
//     volume (a 0777 folder) read-only, so a config read straight from one passes.
//
// As OpenSSH's StrictModes does for ~/.ssh (auth.c safe_path: each component owned by root or the user, none group-
// or world-writable), every folder from the path up to / is checked, the path as given and, when it goes through a
// symbolic link, the path it resolves to. POSIX ACLs need no reading of their own: a named entry shows in the
// group bits (the ACL mask). Nothing is tightened for the operator: the start is refused with the command that fixes
// it, as on Windows.
import fs from 'node:fs';
import path from 'node:path';
import { DirAclError, message, type DirOptions, type DirReport } from './dir-acl.ts';

/** What is read of a path (stat, following symbolic links). */
export interface PosixStat {
  mode: number;
  uid: number;
  dev?: number;
  ino?: number;
  /** On a read-only mount: nobody can change it through this path, whatever its mode (a ConfigMap volume). */
  readOnlyMount?: boolean;
}

/** The file system calls the checks make (the real ones by default; tests may hand in others). */
export interface PosixOps {
  stat(p: string): PosixStat;
  /** Like stat, without following a symbolic link (what a folder's entry is). */
  lstat(p: string): PosixStat;
  /** The names in a folder. */
  list(p: string): string[];
  realpath(p: string): string;
  exists(p: string): boolean;
  /** mkdir without parents: throws EEXIST when the name is taken. */
  mkdir(p: string, mode: number): void;
  /** The daemon's effective uid. */
  uid(): number;
  /** Whether `p` (resolved) lies on a read-only mount. */
  readOnlyMount(p: string): boolean;
}

/**
 * Whether `p` lies on a read-only mount, from /proc/self/mountinfo: the mount whose mount point is the longest
 * prefix of the resolved path, and "ro" among its per-mount options. False when it cannot be told.
 */
export function onReadOnlyMount(p: string, mountinfo: string): boolean {
  let best = '';
  let ro = false;
  for (const line of mountinfo.split('\n')) {
    const f = line.split(' ');
    if (f.length < 6) continue;
    const point = f[4]!.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    const inside = point === '/' || p === point || p.startsWith(`${point}/`);
    // Equal length: the later line is the mount on top.
    if (inside && point.length >= best.length) {
      best = point;
      ro = f[5]!.split(',').includes('ro');
    }
  }
  return ro;
}

export const realPosixOps: PosixOps = {
  stat: (p) => fs.statSync(p),
  lstat: (p) => fs.lstatSync(p),
  list: (p) => fs.readdirSync(p),
  realpath: (p) => fs.realpathSync.native(p),
  exists: (p) => fs.existsSync(p),
  mkdir: (p, mode) => void fs.mkdirSync(p, { mode }),
  uid: () => process.geteuid?.() ?? 0,
  readOnlyMount(p) {
    try {
      return onReadOnlyMount(fs.realpathSync.native(p), fs.readFileSync('/proc/self/mountinfo', 'utf8'));
    } catch {
      return false;
    }
  },
};

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const S_ISVTX = 0o1000;

function isDir(mode: number): boolean {
  return (mode & S_IFMT) === S_IFDIR;
}

/** "0755 (drwxr-xr-x)". */
export function modeText(mode: number): string {
  const type = isDir(mode) ? 'd' : (mode & S_IFMT) === 0o120000 ? 'l' : '-';
  let bits = '';
  for (const shift of [6, 3, 0]) {
    const b = (mode >> shift) & 7;
    bits += (b & 4 ? 'r' : '-') + (b & 2 ? 'w' : '-') + (b & 1 ? 'x' : '-');
  }
  const special = [[0o4000, 2, 's', 'S'], [0o2000, 5, 's', 'S'], [S_ISVTX, 8, 't', 'T']] as const;
  for (const [bit, at, withX, without] of special) {
    if (mode & bit) bits = bits.slice(0, at) + (bits[at] === 'x' ? withX : without) + bits.slice(at + 1);
  }
  return `${(mode & 0o7777).toString(8).padStart(4, '0')} (${type}${bits})`;
}

/** A path as one shell word. */
export function shellQuote(p: string): string {
  if (/^[A-Za-z0-9_./:@%+=,-]+$/.test(p)) return p;
  const quote = "'";
  return quote + p.split(quote).join(`${quote}\\${quote}${quote}`) + quote;
}

/** Who may, in words: "root only", "root and this daemon's uid 1000 only". */
export function posixWhom(self: number): string {
  return `root${self !== 0 ? ` and this daemon's uid ${self}` : ''} only`;
}

/** What the rule finds wrong with one path, and the commands that fix it; empty when nothing. */
export interface PosixProblem {
  problems: string[];
  fixes: string[];
}

/**
 * The rule for one path read as `st`: `secret` (a secret file, the store: others may neither read nor change it) or
 * not (others may read, not change; a sticky folder owned by root or `self` may be writable by others).
 */
export function posixProblem(p: string, st: PosixStat, self: number, secret: boolean): PosixProblem {
  const out: PosixProblem = { problems: [], fixes: [] };
  const q = shellQuote(p);
  if (st.uid !== 0 && st.uid !== self) {
    out.problems.push(`its owner is uid ${st.uid}, ${self === 0 ? 'not root' : `neither root nor this daemon's uid ${self}`} (an owner may change its mode)`);
    out.fixes.push(`chown ${self === 0 ? 'root' : self} ${q}`);
  }
  const group = (st.mode >> 3) & 7;
  const other = st.mode & 7;
  if (secret && (group || other)) {
    const rwx = (b: number) => (b & 4 ? 'r' : '-') + (b & 2 ? 'w' : '-') + (b & 1 ? 'x' : '-');
    const whom = [group ? `its group ${rwx(group)}` : '', other ? `others ${rwx(other)}` : ''].filter(Boolean).join(' and ');
    out.problems.push(`its mode ${modeText(st.mode)} gives ${whom}`);
    out.fixes.push(`chmod ${isDir(st.mode) ? '700' : '600'} ${q}`);
  } else if (!secret && st.mode & 0o022) {
    const stickyOk = isDir(st.mode) && st.mode & S_ISVTX && (st.uid === 0 || st.uid === self);
    // A read-only mount (kubelet's ConfigMap volume: a 0777 folder, mounted read-only) cannot be changed through it.
    if (!stickyOk && !st.readOnlyMount) {
      const whom = [group & 2 ? 'its group' : '', other & 2 ? 'others' : ''].filter(Boolean).join(' and ');
      out.problems.push(`its mode ${modeText(st.mode)} lets ${whom} write`);
      out.fixes.push(`chmod go-w ${q}`);
    }
  }
  return out;
}

/** The folders above `abs` up to /, nearest first. */
function foldersAbove(abs: string): string[] {
  const out: string[] = [];
  for (let p = path.dirname(abs); ; p = path.dirname(p)) {
    if (p !== abs) out.push(p);
    if (path.dirname(p) === p) break;
  }
  return out;
}

function readStat(ops: PosixOps, p: string): PosixStat {
  try {
    const st = ops.stat(p);
    // Only a writable-looking path needs the mount table read.
    return st.mode & 0o022 ? { mode: st.mode, uid: st.uid, dev: st.dev, ino: st.ino, readOnlyMount: ops.readOnlyMount(p) } : st;
  } catch (e) {
    throw new DirAclError('read', `cannot read the owner and mode of ${p} to check who else may use it: ${message(e)}; refusing to use it`);
  }
}

/** A path as checked: "0644 (-rw-r--r--) uid 0". */
function stateText(st: PosixStat): string {
  return `${modeText(st.mode)} uid ${st.uid}`;
}

interface Subject {
  /** The path as given, absolute. */
  abs: string;
  /** How the path is named in messages (a secret file: with its config field). */
  label: string;
  secret: boolean;
  folder: boolean;
  /** A private folder (the store, the run dir): what it holds is checked too, by the secret rule (readInside). */
  inside?: boolean;
}

/** What a private folder holds, as read: each entry under it, down every sub-folder. */
interface Entry {
  p: string;
  st: PosixStat;
}

/** At most this many entries are read under a private folder (the store holds a handful): a bound, not a limit. */
export const INSIDE_MAX = 10_000;
/** At most this many wrong entries are named one by one; past it one recursive command fixes them all. */
const INSIDE_NAMED = 10;

/**
 * Every entry under the private folder `abs`, depth first, by name: each as stat reads it, a symbolic link as where
 * it leads (not descended into; one leading nowhere is skipped). An entry gone between the listing and its stat
 * (another process's compaction removed an old log) is skipped. Stops after INSIDE_MAX entries.
 */
function readInside(abs: string, ops: PosixOps, out: Entry[] = []): Entry[] {
  let names: string[];
  try {
    names = ops.list(abs).sort();
  } catch (e) {
    throw new DirAclError('read', `cannot list ${abs} to check who else may use what it holds: ${message(e)}; refusing to use it`);
  }
  for (const name of names) {
    if (out.length >= INSIDE_MAX) break;
    const p = path.join(abs, name);
    let st: PosixStat;
    let link = false;
    try {
      st = ops.lstat(p);
      if ((st.mode & S_IFMT) === S_IFLNK) {
        link = true;
        st = ops.stat(p);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException)?.code === 'ENOENT') continue;
      throw new DirAclError('read', `cannot read the owner and mode of ${p} to check who else may use it: ${message(e)}; refusing to use it`);
    }
    out.push({ p, st });
    if (isDir(st.mode) && !link) readInside(p, ops, out);
  }
  return out;
}

/** The refusal's clauses and fixes for what a private folder holds (`abs`: the folder). */
function insideProblems(abs: string, entries: Entry[], self: number): { clauses: string[]; fixes: string[] } {
  const wrong = entries.map((e) => ({ ...e, pr: posixProblem(e.p, e.st, self, true) })).filter((e) => e.pr.problems.length);
  const must = `it must be readable and changeable by ${posixWhom(self)}`;
  const clauses = wrong.slice(0, INSIDE_NAMED).map((e) => `${e.p}, in ${abs}, lets others read or change it: ${e.pr.problems.join('; ')}; ${must}`);
  if (wrong.length <= INSIDE_NAMED) return { clauses, fixes: wrong.flatMap((e) => e.pr.fixes) };
  clauses.push(`and ${wrong.length - INSIDE_NAMED} more in ${abs} like them`);
  const q = shellQuote(abs);
  const fixes = [`chmod -R go= ${q}`];
  if (wrong.some((e) => e.st.uid !== 0 && e.st.uid !== self)) fixes.unshift(`chown -R ${self === 0 ? 'root' : self} ${q}`);
  return { clauses, fixes };
}

/** "what it holds (read and change: root only): LOCK 0600 (-rw-------) uid 0, log 0600 (-rw-------) uid 0". */
function insideText(abs: string, entries: Entry[], self: number): string {
  if (!entries.length) return 'it holds nothing yet';
  const shown = entries.slice(0, 8).map((e) => `${path.relative(abs, e.p)} ${stateText(e.st)}`).join(', ');
  const more = entries.length > 8 ? `, and ${entries.length - 8} more${entries.length >= INSIDE_MAX ? ' (not read further)' : ''}` : '';
  return `what it holds (read and change: ${posixWhom(self)}): ${shown}${more}`;
}

/**
 * Check `s` and every folder above it (the path as given, and the one it resolves to); throws DirAclError listing
 * each path that breaks the rule, with one command line that fixes them all. Returns what was read, for the report.
 */
function checkChain(s: Subject, ops: PosixOps): { self: number; target: PosixStat; folders: { p: string; st: PosixStat }[]; inside: Entry[] } {
  const self = ops.uid();
  const target = readStat(ops, s.abs);
  let real = s.abs;
  try {
    real = ops.realpath(s.abs);
  } catch (e) {
    throw new DirAclError('read', `cannot resolve ${s.abs} to check who else may use it: ${message(e)}; refusing to use it`);
  }
  const seen = new Set<string>();
  const key = (p: string, st: PosixStat) => (st.ino !== undefined && st.dev !== undefined ? `${st.dev}:${st.ino}` : p);
  seen.add(key(s.abs, target));
  const folders: { p: string; st: PosixStat }[] = [];
  for (const p of [...foldersAbove(s.abs), ...(real === s.abs ? [] : foldersAbove(real))]) {
    const st = readStat(ops, p);
    const k = key(p, st);
    if (seen.has(k)) continue;
    seen.add(k);
    folders.push({ p, st });
  }
  const clauses: string[] = [];
  const fixes: string[] = [];
  const whom = posixWhom(self);
  const own = posixProblem(s.abs, target, self, s.secret);
  if (own.problems.length) {
    const lets = s.secret ? `${s.folder ? '' : 'holds a secret and '}lets others read or change it` : 'lets others change it';
    const must = s.secret ? `it must be readable and changeable by ${whom}` : `it must be changeable by ${whom} (others may read it)`;
    clauses.push(`${s.label} ${lets}: ${own.problems.join('; ')}; ${must}`);
    fixes.push(...own.fixes);
  }
  for (const f of folders) {
    const pr = posixProblem(f.p, f.st, self, false);
    if (!pr.problems.length) continue;
    clauses.push(`${f.p}, a folder above ${s.abs}, lets others change it (and so replace what it holds): ${pr.problems.join('; ')}; it must be changeable by ${whom} (others may read it)`);
    fixes.push(...pr.fixes);
  }
  const inside = s.inside && isDir(target.mode) ? readInside(s.abs, ops) : [];
  const ins = insideProblems(s.abs, inside, self);
  clauses.push(...ins.clauses);
  fixes.push(...ins.fixes);
  if (clauses.length) throw new DirAclError('acl', `${clauses.join('; ')}; refusing to use it. Fix (as root): ${fixes.join(' && ')}`);
  return { self, target, folders, inside };
}

function foldersText(folders: { p: string; st: PosixStat }[]): string {
  return folders.map((f) => `${f.p} ${stateText(f.st)}`).join(', ');
}

/**
 * The Linux prepareDir: make `dir` (when `create`) with each missing folder above it 0755 and `dir` itself 0700 (or
 * 0755 when others may read it), by mkdir with that mode (the umask may only narrow it), then check it and every
 * folder above it by the rule, and, for a private one (the store, the run dir), everything in it by the secret rule
 * (no group or other bit; owned by root or the daemon's uid). A folder made by someone else meanwhile is checked
 * like any existing one. A mkdir that fails throws its own error (as mkdir -p did); a folder, or an entry in a
 * private one, that breaks the rule throws DirAclError naming each path, its mode and owner, and the fix.
 */
export async function securePosixDir(dir: string, opts: DirOptions = {}, ops: PosixOps = realPosixOps): Promise<DirReport> {
  const create = opts.create ?? true;
  const secret = !(opts.othersMayRead ?? !create);
  const abs = path.resolve(dir);
  const mode = secret ? 0o700 : 0o755;
  let made: string | undefined;
  if (create) {
    const missing: string[] = [];
    for (let p = abs; !ops.exists(p); p = path.dirname(p)) {
      missing.unshift(p);
      if (path.dirname(p) === p) break;
    }
    for (const p of missing) {
      try {
        ops.mkdir(p, p === abs ? mode : 0o755);
        made ??= p;
      } catch (e) {
        if ((e as NodeJS.ErrnoException)?.code !== 'EEXIST') throw e;
      }
    }
  }
  // A private folder's content too (the store's LOCK and logs, the run dir's markers).
  const c = checkChain({ abs, label: abs, secret, folder: true, inside: secret }, ops);
  const whom = secret ? `read and change: ${posixWhom(c.self)}` : `change: ${posixWhom(c.self)}; others may read`;
  const checked = `${abs} reads back ${stateText(c.target)} (${whom}); folders above it: ${foldersText(c.folders)} (change: ${posixWhom(c.self)})`;
  if (made === undefined) return { enforced: true, what: `${abs}: existing directory checked, ${checked}${secret ? `; ${insideText(abs, c.inside, c.self)}` : ''}` };
  const how = made === abs ? (mode === 0o700 ? '0700' : '0755') : `0755${secret ? `, ${abs} 0700` : ''}`;
  return { created: made, enforced: true, what: `${made}: created by mkdir with mode ${how}; ${checked}` };
}

/** The Linux checkFile: the file (a secret: `secret` is its config field) and every folder above it, by the rule. */
export async function checkPosixFile(file: string, opts: { secret?: string } = {}, ops: PosixOps = realPosixOps): Promise<DirReport> {
  const abs = path.resolve(file);
  const secret = opts.secret !== undefined;
  const c = checkChain({ abs, label: secret ? `${abs} (${opts.secret})` : abs, secret, folder: false }, ops);
  const whom = secret ? `read and change: ${posixWhom(c.self)}` : `change: ${posixWhom(c.self)}; others may read`;
  return { enforced: true, what: `${abs}: existing file checked, ${stateText(c.target)} (${whom}); folders above it: ${foldersText(c.folders)} (change: ${posixWhom(c.self)})` };
}
