// Who may use the Windows state and config directories: SYSTEM, Administrators and the daemon's own account. Pure
// logic (the SDDL a new directory is created with, the check of an existing one, the messages) over injected
// operations; the Win32 calls are ./win32-security.ts (koffi), the icacls fallback is the platform's spawn.
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

/** Principals a state directory may hold: by SDDL alias or by number. */
export const TRUSTED = new Set(['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544']);

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

/** What makes `sddl` (owner and DACL) wider than SYSTEM, Administrators and `self`; undefined when it is not. */
export function dirAccessProblem(sddl: string, self?: string): string | undefined {
  const o = othersIn(sddl, self);
  const problems: string[] = [];
  if (o.owner !== undefined) problems.push(`its owner is ${who(o.owner)}`);
  if (o.noDacl) problems.push('it has no DACL (everyone has full access)');
  for (const e of o.entries) {
    const inherited = e.flags.includes('ID') ? ', inherited from its parent' : '';
    problems.push(`entry (${e.text}) grants ${e.rights} to ${who(e.sid)}${inherited}`);
  }
  return problems.length ? problems.join('; ') : undefined;
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

/**
 * Make `dir` (when `create`) and check it: every missing component created admin-only by CreateDirectoryW with
 * ADMIN_ONLY_DIR_SDDL, then the directory's owner and DACL read back; an existing directory is checked the same way.
 * Throws DirAclError naming the path when it cannot be made, or is (or reads back) open to anyone else. Without koffi
 * it falls back to mkdir then icacls, and says so: the directory has its parent's ACL until icacls runs.
 */
export async function secureStateDir(dir: string, ops: DirOps, create = true): Promise<DirReport> {
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
  const problem = dirAccessProblem(sd, self);
  const whom = `SYSTEM, Administrators${self && !TRUSTED.has(self.toUpperCase()) ? ` and this daemon's account ${self}` : ''} only`;
  if (problem) {
    const state = made === undefined ? 'lets others in' : `was created with the DACL ${ADMIN_ONLY_DIR_SDDL} but reads back wider`;
    throw new DirAclError('acl', `${dir} ${state}: ${problem} (read back: ${sd}); it must be usable by ${whom}; refusing to use it. Fix (as Administrator): ${fixCommand(dir)}`);
  }
  if (made === undefined) return { enforced: true, what: `${dir}: existing directory checked, ${sd} read back (${whom})` };
  return { created: made, enforced: true, what: `${made}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} in one call (CreateDirectoryW), ${dir} reads back ${sd} (${whom})` };
}
