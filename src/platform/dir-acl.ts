// Who may use the Windows state and config directories: SYSTEM, Administrators and the daemon's own account. Pure
// logic (the SDDL a new directory is created with, the one access rule over an owner and DACL, the messages) over
// injected operations; the Win32 calls are ./win32-security.ts (koffi), the icacls fallback is the platform's spawn.
//
// The one access rule (files too, ./file-acl.ts; Linux modes, ./posix-access.ts): "others" are every SID but SYSTEM,
// Administrators and the daemon's own account. Others may never CHANGE what the daemon starts from (the config, the
// secret files it names, the folders holding them, the store, the run dir): an owner among them, or an allow entry
// giving them a right in CHANGE_RIGHTS, refuses. Others may not READ (READ_RIGHTS) a secret or the store either; the
// config and its folders they may read (the config holds no secret: passwords are files of their own).
//
// Why each missing path component is created with the DACL (not only the last one): the store or run directory is
// often the first thing on its path (C:\ProgramData\blockspeaker\run, D:\blockspeaker\store), so a parent created
// "normally" inherits the drive's ACL (on C:\ Authenticated Users may create folders) and a non-admin could plant the
// next name in it before we make it. Created protected, every directory we make is admin-only from its first
// instant, and nothing we did not make is ever changed.
//
// Why an existing directory that lets others in refuses the start instead of being tightened: the daemon runs as
// LocalSystem and may be pointed at any folder (D:\, a share, kubelet's C:\k); rewriting the ACL of a folder an
// operator chose can break other programs, and the entries that are too wide may be there on purpose. Like OpenSSH
// on Windows with a host key others can read, it stops and prints the one command that fixes it.
import path from 'node:path';
import { Win32Error, type Win32SecurityApi } from './pipe-acl.ts';

/** Full control for SYSTEM and Administrators, inherited by files and subdirectories; protected (P): nothing else. */
export const ADMIN_ONLY_DIR_SDDL = 'D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA)';

const ERROR_ALREADY_EXISTS = 183;

/** NT SERVICE\TrustedInstaller: Windows' own servicing account, which may change what is under C:\Program Files. */
const TRUSTED_INSTALLER = 'S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464';

/**
 * Principals a state directory (or a file the daemon loads) may hold: by SDDL alias or by number. TrustedInstaller
 * replaces system files already; a folder made under C:\Program Files inherits its full control.
 */
export const TRUSTED = new Set(['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544', TRUSTED_INSTALLER]);

/** Names for the SIDs a too-wide directory usually shows (message text only). */
const NAMES: Record<string, string> = {
  WD: 'Everyone',
  'S-1-1-0': 'Everyone',
  BU: 'Users',
  'S-1-5-32-545': 'Users',
  AU: 'Authenticated Users',
  'S-1-5-11': 'Authenticated Users',
  IU: 'Interactive',
  CO: 'Creator Owner',
  'S-1-3-0': 'Creator Owner',
  OW: 'Owner Rights',
  BG: 'Guests',
  AN: 'Anonymous',
  NS: 'Network Service',
  LS: 'Local Service',
};

/** Thrown when a state or config directory cannot be made admin-only or is wider: the daemon must not use it. */
export class DirAclError extends Error {
  override name = 'DirAclError';
  /** 'create': the directory could not be made; 'acl': it exists (or came out) open to others; 'read': unreadable ACL. */
  constructor(readonly reason: 'create' | 'acl' | 'read', message: string) {
    super(message);
  }
}

/** An SDDL string's owner and DACL parts (top level, outside the entries' parentheses). */
export function sddlParts(sddl: string): { owner?: string; dacl?: string } {
  const parts: Record<string, string> = {};
  let depth = 0;
  let key: string | undefined;
  let start = 0;
  for (let i = 0; i < sddl.length; i++) {
    const c = sddl[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0 && sddl[i + 1] === ':' && 'OGDS'.includes(c!)) {
      if (key) parts[key] = sddl.slice(start, i);
      key = c;
      start = i + 2;
      i++;
    }
  }
  if (key) parts[key] = sddl.slice(start);
  return { owner: parts.O?.trim(), dacl: parts.D?.trim() };
}

/** A SID with its well-known name, for messages. */
export function who(sid: string): string {
  const name = NAMES[sid.toUpperCase()];
  return name ? `${sid} (${name})` : sid;
}

/** An allow entry of a DACL, split into its fields. */
export interface AllowEntry {
  /** The entry as written, without its parentheses. */
  text: string;
  flags: string;
  rights: string;
  sid: string;
}

/**
 * What in `sddl` names anyone but SYSTEM, Administrators and `self`: an owner outside them (who may always rewrite
 * the DACL), no DACL at all, and the allow entries for others (deny entries grant nothing).
 */
export function othersIn(sddl: string, self?: string): { owner?: string; noDacl: boolean; entries: AllowEntry[] } {
  const ok = (sid: string) => TRUSTED.has(sid.toUpperCase()) || (!!self && sid.toUpperCase() === self.toUpperCase());
  const { owner, dacl } = sddlParts(sddl);
  const out: { owner?: string; noDacl: boolean; entries: AllowEntry[] } = { noDacl: dacl === undefined || /^[A-Z]*NO_ACCESS_CONTROL/.test(dacl), entries: [] };
  if (owner !== undefined && !ok(owner)) out.owner = owner;
  if (out.noDacl) return out;
  for (const m of dacl!.matchAll(/\(([^)]*)\)/g)) {
    const f = m[1]!.split(';').map((x) => x.trim());
    const type = (f[0] ?? '').toUpperCase();
    if (type === 'D' || type === 'OD' || type === 'XD') continue;
    const sid = f[5] ?? '';
    if (!ok(sid)) out.entries.push({ text: m[1]!, flags: (f[1] ?? '').toUpperCase(), rights: f[2] ?? '', sid });
  }
  return out;
}

// SDDL access-right letters (sddl.h) as mask bits; directory-service letters share their bits with file rights.
const RIGHTS: Record<string, number> = {
  GA: 0x1000_0000, GX: 0x2000_0000, GW: 0x4000_0000, GR: 0x8000_0000,
  SD: 0x1_0000, RC: 0x2_0000, WD: 0x4_0000, WO: 0x8_0000,
  CC: 0x1, DC: 0x2, LC: 0x4, SW: 0x8, RP: 0x10, WP: 0x20, DT: 0x40, LO: 0x80, CR: 0x100,
  FA: 0x1f_01ff, FR: 0x12_0089, FW: 0x12_0116, FX: 0x12_00a0,
  KA: 0xf_003f, KR: 0x2_0019, KW: 0x2_0006, KX: 0x2_0019,
};

/** An SDDL entry's rights as a mask; a letter we do not know counts as every right (refusing is the safe error). */
export function rightsMask(rights: string): number {
  const r = rights.trim().toUpperCase();
  if (/^0X[0-9A-F]+$/.test(r)) return Number.parseInt(r.slice(2), 16) >>> 0;
  let mask = 0;
  for (let i = 0; i < r.length; i += 2) mask |= RIGHTS[r.slice(i, i + 2)] ?? 0xffff_ffff;
  return mask >>> 0;
}

/**
 * Rights that change a file or folder, or what a folder holds: FILE_WRITE_DATA (add file), FILE_APPEND_DATA (add
 * subdirectory), FILE_WRITE_EA, FILE_DELETE_CHILD, FILE_WRITE_ATTRIBUTES, DELETE, WRITE_DAC, WRITE_OWNER,
 * GENERIC_WRITE, GENERIC_ALL. Attributes and extended attributes count: nothing the daemon uses needs others to have
 * them, and write access to attributes is what turns a folder or file into a reparse point.
 */
export const CHANGE_RIGHTS = (0x2 | 0x4 | 0x10 | 0x40 | 0x100 | 0x1_0000 | 0x4_0000 | 0x8_0000 | 0x4000_0000 | 0x1000_0000) >>> 0;
/** Rights that read a file or list a folder: FILE_READ_DATA (list), FILE_READ_EA, FILE_EXECUTE (traverse), GENERIC_READ, GENERIC_EXECUTE, GENERIC_ALL. */
export const READ_RIGHTS = (0x1 | 0x8 | 0x20 | 0x8000_0000 | 0x2000_0000 | 0x1000_0000) >>> 0;

/** What the rule is applied to. */
export interface AccessSubject {
  /** Others may not read it either: a secret file, the store (and the run dir unless its caller says otherwise). */
  secret: boolean;
  /** A folder (its inheritable entries shape what it will hold) or a file. */
  folder: boolean;
}

/**
 * The one access rule over `sddl` (owner and DACL): what lets anyone but SYSTEM, Administrators and `self` change the
 * object or, when `secret`, read it; undefined when nothing does. An owner among the others refuses (an owner may
 * always rewrite the DACL), and so does a missing DACL; deny entries grant nothing. Inherit-only entries do not
 * apply to the object itself: they count only on a secret folder (the store), where they give others access to what
 * the daemon will write into it; on a config folder only those who may add files (refused) could make use of them.
 */
export function accessProblem(sddl: string, self: string | undefined, subject: AccessSubject): string | undefined {
  const o = othersIn(sddl, self);
  const problems: string[] = [];
  if (o.owner !== undefined) problems.push(`its owner is ${who(o.owner)} (an owner may rewrite the DACL)`);
  if (o.noDacl) problems.push('it has no DACL (everyone has full access)');
  for (const e of o.entries) {
    if (e.flags.includes('IO') && !(subject.secret && subject.folder)) continue;
    const mask = rightsMask(e.rights);
    const what = [mask & CHANGE_RIGHTS ? 'change' : '', subject.secret && mask & READ_RIGHTS ? 'read' : ''].filter(Boolean).join(' and ');
    if (!what) continue;
    const inherited = e.flags.includes('ID') ? `, inherited from its ${subject.folder ? 'parent' : 'folder'}` : '';
    const only = e.flags.includes('IO') ? ', for what it will hold' : '';
    problems.push(`entry (${e.text}) grants ${e.rights} (${what}${only}) to ${who(e.sid)}${inherited}`);
  }
  return problems.length ? problems.join('; ') : undefined;
}

/** accessProblem for a folder: `secret` (the default, the store) or a config folder others may read. */
export function dirAccessProblem(sddl: string, self?: string, secret = true): string | undefined {
  return accessProblem(sddl, self, { secret, folder: true });
}

/** Who may, in words: "SYSTEM, Administrators[ and this daemon's account S-...] only". */
export function whomText(self: string | undefined): string {
  return `SYSTEM, Administrators${self && !TRUSTED.has(self.toUpperCase()) ? ` and this daemon's account ${self}` : ''} only`;
}

/** The refusal of a folder, as the daemon prints it: the path, each entry, what was read back, the fix. */
export function dirRefusal(dir: string, problem: string, sd: string, self: string | undefined, secret: boolean, made: boolean): string {
  const lets = secret ? 'lets others read or change it' : 'lets others change it';
  const state = made ? `was created with the DACL ${ADMIN_ONLY_DIR_SDDL} but reads back wider: it ${lets}` : lets;
  const must = secret ? `it must be readable and changeable by ${whomText(self)}` : `it must be changeable by ${whomText(self)} (others may read it)`;
  return `${dir} ${state}: ${problem} (read back: ${sd}); ${must}; refusing to use it. Fix (as Administrator): ${fixCommand(dir)}`;
}

/** The one command (PowerShell, as Administrator) that gives `dir` the owner and DACL a new state directory gets. */
export function fixCommand(dir: string): string {
  const q = `'${dir.replace(/'/g, "''")}'`;
  return `powershell -NoProfile -Command "$a = Get-Acl -LiteralPath ${q}; $a.SetSecurityDescriptorSddlForm('O:BA${ADMIN_ONLY_DIR_SDDL}'); Set-Acl -LiteralPath ${q} -AclObject $a"`;
}

export interface DirReport {
  /** The topmost directory made here (undefined: it existed). */
  created?: string;
  enforced: boolean;
  what: string;
}

/** What secureStateDir needs from the OS (the platform supplies the real ones, tests a double). */
export interface DirOps {
  exists(p: string): boolean;
  /** The Win32 security calls; rejects when koffi cannot load. */
  win32(): Promise<Win32SecurityApi>;
  /** Plain recursive mkdir (the fallback); the first directory it made. */
  mkdirp(p: string): string | undefined;
  /** icacls with icaclsArgs(dir) (the fallback): undefined on success, else why it failed. */
  icacls(dir: string): Promise<string | undefined>;
}

/** An error's message (anything thrown). */
export function message(e: unknown): string {
  return (e as Error)?.message ?? String(e);
}

/** How prepareDir treats a directory. */
export interface DirOptions {
  /** Make it and its missing parents (default true); false: only check an existing one (the config file's folder). */
  create?: boolean;
  /** Others may read it (never change it). Default: true for a folder only checked, false for one made (the store). */
  othersMayRead?: boolean;
}

/**
 * Make `dir` (when `create`) and check it: every missing component created admin-only by CreateDirectoryW with
 * ADMIN_ONLY_DIR_SDDL, then the directory's owner and DACL read back; an existing directory is checked the same way,
 * by the one access rule (accessProblem): others may never change it, nor read it unless `othersMayRead`. Throws
 * DirAclError naming the path when it cannot be made, or (reads back) open to others. Without koffi it falls back to
 * mkdir then icacls, and says so: the directory has its parent's ACL until icacls runs. Only `dir` is read, not the
 * folders above it (docs/reference/file-access.md, "State and config directory access").
 */
export async function secureStateDir(dir: string, ops: DirOps, opts: DirOptions = {}): Promise<DirReport> {
  const create = opts.create ?? true;
  const secret = !(opts.othersMayRead ?? !create);
  const missing: string[] = [];
  for (let p = dir; create && !ops.exists(p); p = path.dirname(p)) {
    missing.unshift(p);
    if (path.dirname(p) === p) break;
  }
  let api: Win32SecurityApi;
  try {
    api = await ops.win32();
  } catch (e) {
    const why = `the Win32 security calls (koffi) do not load: ${message(e)}`;
    if (missing.length === 0) return { enforced: false, what: `${dir}: existing directory's ACL NOT checked (${why})` };
    const created = ops.mkdirp(dir);
    const failed = created === undefined ? undefined : await ops.icacls(created);
    if (failed !== undefined) return { created, enforced: false, what: `${created}: ACL NOT restricted, it inherits its parent's (${why}; icacls failed: ${failed})` };
    return {
      created,
      enforced: true,
      what: `${created}: ACL set to SYSTEM and Administrators only by icacls after mkdir (${why}), so until icacls ran it had its parent's ACL; not read back`,
    };
  }
  let made: string | undefined;
  for (const p of missing) {
    try {
      api.createDir(p, ADMIN_ONLY_DIR_SDDL);
      made ??= p;
    } catch (e) {
      // Made by someone else meanwhile: checked below like any existing directory.
      if (e instanceof Win32Error && e.code === ERROR_ALREADY_EXISTS) continue;
      throw new DirAclError('create', `cannot create ${p} with the DACL ${ADMIN_ONLY_DIR_SDDL} (SYSTEM and Administrators only): ${message(e)}`);
    }
  }
  let sd: string;
  let self: string | undefined;
  try {
    sd = api.readDirSecurity(dir);
    self = api.userSid();
  } catch (e) {
    if (made === undefined) throw new DirAclError('read', `cannot read the ACL of ${dir} to check who else may use it: ${message(e)}; refusing to use it`);
    return { created: made, enforced: true, what: `${dir}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} by CreateDirectoryW (not read back: ${message(e)})` };
  }
  const problem = dirAccessProblem(sd, self, secret);
  if (problem) throw new DirAclError('acl', dirRefusal(dir, problem, sd, self, secret, made !== undefined));
  const whom = secret ? `read and change: ${whomText(self)}` : `change: ${whomText(self)}; others may read`;
  if (made === undefined) return { enforced: true, what: `${dir}: existing directory checked, ${sd} read back (${whom})` };
  return { created: made, enforced: true, what: `${made}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} in one call (CreateDirectoryW), ${dir} reads back ${sd} (${whom})` };
}
