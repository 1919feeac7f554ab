// Who may change (or, for a file holding a secret, read) a file the Windows daemon starts from: its config file and
// the secret files that config names. Pure logic over an SDDL string, plus the check through the injected Win32
// calls; ./dir-acl.ts does the same for directories (and the config's directory is checked there).
//
// Why the file too: the directory check stops others from adding or replacing files, but a file can carry its own
// explicit entries (`icacls node.yaml /grant Users:M`, or a copy that kept its ACL from elsewhere), and whoever may
// write the config decides what this LocalSystem daemon runs with. Reading the config is harmless: it never holds a
// secret inline (passwords are { file } or { env } references, src/config/peer-hardening.ts), so only the files
// named there are refused when others may read them. As with directories, nothing is tightened for the operator: the
// start is refused with the one command that fixes it.
import { DirAclError, message, othersIn, TRUSTED, who, type DirReport } from './dir-acl.ts';
import type { Win32SecurityApi } from './pipe-acl.ts';

/** Owner Administrators, full control for SYSTEM and Administrators, protected: what the fix command sets. */
export const ADMIN_ONLY_FILE_SDDL = 'O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)';

// SDDL access-right letters (sddl.h) as mask bits; directory-service letters share their bits with file rights.
const RIGHTS: Record<string, number> = {
  GA: 0x1000_0000, GX: 0x2000_0000, GW: 0x4000_0000, GR: 0x8000_0000,
  SD: 0x1_0000, RC: 0x2_0000, WD: 0x4_0000, WO: 0x8_0000,
  CC: 0x1, DC: 0x2, LC: 0x4, SW: 0x8, RP: 0x10, WP: 0x20, DT: 0x40, LO: 0x80, CR: 0x100,
  FA: 0x1f_01ff, FR: 0x12_0089, FW: 0x12_0116, FX: 0x12_00a0,
  KA: 0xf_003f, KR: 0x2_0019, KW: 0x2_0006, KX: 0x2_0019,
};

/** FILE_WRITE_DATA, FILE_APPEND_DATA, WRITE_DAC, WRITE_OWNER, GENERIC_WRITE, GENERIC_ALL: change the contents, or
 * the ACL (and then the contents). Attributes, extended attributes and DELETE do not change what is read. */
const WRITE = 0x2 | 0x4 | 0x4_0000 | 0x8_0000 | 0x4000_0000 | 0x1000_0000;
/** FILE_READ_DATA, GENERIC_READ, GENERIC_ALL. */
const READ = 0x1 | 0x8000_0000 | 0x1000_0000;

/** An SDDL entry's rights as a mask; a letter we do not know counts as every right (refusing is the safe error). */
export function rightsMask(rights: string): number {
  const r = rights.trim().toUpperCase();
  if (/^0X[0-9A-F]+$/.test(r)) return Number.parseInt(r.slice(2), 16) >>> 0;
  let mask = 0;
  for (let i = 0; i < r.length; i += 2) mask |= RIGHTS[r.slice(i, i + 2)] ?? 0xffff_ffff;
  return mask >>> 0;
}

/**
 * What lets anyone but SYSTEM, Administrators and `self` change the file described by `sddl` (owner and DACL), or,
 * when `secret`, read it; undefined when nothing does. Inherit-only entries do not apply to a file; deny entries
 * grant nothing.
 */
export function fileAccessProblem(sddl: string, self: string | undefined, secret: boolean): string | undefined {
  const o = othersIn(sddl, self);
  const problems: string[] = [];
  if (o.owner !== undefined) problems.push(`its owner is ${who(o.owner)} (an owner may rewrite the DACL)`);
  if (o.noDacl) problems.push('it has no DACL (everyone has full access)');
  for (const e of o.entries) {
    if (e.flags.includes('IO')) continue;
    const mask = rightsMask(e.rights);
    const what = [mask & WRITE ? 'write' : '', secret && mask & READ ? 'read' : ''].filter(Boolean).join(' and ');
    if (!what) continue;
    const inherited = e.flags.includes('ID') ? ', inherited from its directory' : '';
    problems.push(`entry (${e.text}) grants ${e.rights} (${what}) to ${who(e.sid)}${inherited}`);
  }
  return problems.length ? problems.join('; ') : undefined;
}

/** The one command (PowerShell, as Administrator) that gives `file` ADMIN_ONLY_FILE_SDDL. */
export function fixFileCommand(file: string): string {
  const q = `'${file.replace(/'/g, "''")}'`;
  return `powershell -NoProfile -Command "$a = Get-Acl -LiteralPath ${q}; $a.SetSecurityDescriptorSddlForm('${ADMIN_ONLY_FILE_SDDL}'); Set-Acl -LiteralPath ${q} -AclObject $a"`;
}

/**
 * Read `file`'s owner and DACL back and refuse (DirAclError 'acl') when others may change it or, with `secret` (the
 * config field that names it), read it; 'read' when the ACL cannot be read. Without koffi: not checked, and the
 * report says so.
 */
export async function checkFileAcl(file: string, win32: () => Promise<Win32SecurityApi>, opts: { secret?: string } = {}): Promise<DirReport> {
  let api: Win32SecurityApi;
  try {
    api = await win32();
  } catch (e) {
    return { enforced: false, what: `${file}: file's ACL NOT checked (the Win32 security calls (koffi) do not load: ${message(e)})` };
  }
  let sd: string;
  let self: string | undefined;
  try {
    sd = api.readDirSecurity(file);
    self = api.userSid();
  } catch (e) {
    throw new DirAclError('read', `cannot read the ACL of ${file} to check who else may use it: ${message(e)}; refusing to use it`);
  }
  const secret = opts.secret !== undefined;
  const whom = `SYSTEM, Administrators${self && !TRUSTED.has(self.toUpperCase()) ? ` and this daemon's account ${self}` : ''} only`;
  const problem = fileAccessProblem(sd, self, secret);
  if (problem) {
    const head = secret ? `${file} (${opts.secret}) holds a secret and lets others read or change it` : `${file} lets others change it`;
    throw new DirAclError('acl', `${head}: ${problem} (read back: ${sd}); it must be ${secret ? 'readable and writable' : 'writable'} by ${whom}; refusing to use it. Fix (as Administrator): ${fixFileCommand(file)}`);
  }
  return { enforced: true, what: `${file}: existing file checked, ${sd} read back (${secret ? 'read and write' : 'write'}: ${whom})` };
}
