// Who may change (or, for a file holding a secret, read) a file the Windows daemon starts from: its config file and
// the secret files that config names, and the folder each one is in. The rule is dir-acl.ts's accessProblem (one
// rule for files and folders): others may never change these; only a secret is refused for being readable too.
//
// Why the file too: the folder check stops others from adding or replacing files, but a file can carry its own
// explicit entries (`icacls node.yaml /grant Users:M`, or a copy that kept its ACL from elsewhere), and whoever may
// write the config decides what this LocalSystem daemon runs with. Why its folder: whoever may delete or add files
// there (FILE_DELETE_CHILD, FILE_ADD_FILE) can put another file under the name. Reading the config is harmless: it
// never holds a secret inline (passwords are { file } or { env } references, src/config/peer-hardening.ts), so only
// the files named there are refused when others may read them. As with directories, nothing is tightened for the
// operator: the start is refused with the one command that fixes it.
import path from 'node:path';
import { accessProblem, DirAclError, dirRefusal, message, whomText, type DirReport } from './dir-acl.ts';
import type { Win32SecurityApi } from './pipe-acl.ts';

export { rightsMask } from './dir-acl.ts';

/** Owner Administrators, full control for SYSTEM and Administrators, protected: what the fix command sets. */
export const ADMIN_ONLY_FILE_SDDL = 'O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)';

/**
 * What lets anyone but SYSTEM, Administrators and `self` change the file described by `sddl` (owner and DACL), or,
 * when `secret`, read it; undefined when nothing does (dir-acl.ts accessProblem for a file).
 */
export function fileAccessProblem(sddl: string, self: string | undefined, secret: boolean): string | undefined {
  return accessProblem(sddl, self, { secret, folder: false });
}

/** The one command (PowerShell, as Administrator) that gives `file` ADMIN_ONLY_FILE_SDDL. */
export function fixFileCommand(file: string): string {
  const q = `'${file.replace(/'/g, "''")}'`;
  return `powershell -NoProfile -Command "$a = Get-Acl -LiteralPath ${q}; $a.SetSecurityDescriptorSddlForm('${ADMIN_ONLY_FILE_SDDL}'); Set-Acl -LiteralPath ${q} -AclObject $a"`;
}

/**
 * Read `file`'s owner and DACL back, then its folder's, and refuse (DirAclError 'acl') when others may change either
 * or, with `secret` (the config field that names it), read the file; 'read' when an ACL cannot be read. The folder
 * is held to the config-folder rule (others may read it, not change it), whatever the file holds. Without koffi: not
 * checked, and the report says so.
 */
export async function checkFileAcl(file: string, win32: () => Promise<Win32SecurityApi>, opts: { secret?: string } = {}): Promise<DirReport> {
  let api: Win32SecurityApi;
  try {
    api = await win32();
  } catch (e) {
    return { enforced: false, what: `${file}: file's ACL NOT checked (the Win32 security calls (koffi) do not load: ${message(e)})` };
  }
  const read = (p: string): string => {
    try {
      return api.readDirSecurity(p);
    } catch (e) {
      throw new DirAclError('read', `cannot read the ACL of ${p} to check who else may use it: ${message(e)}; refusing to use it`);
    }
  };
  const sd = read(file);
  let self: string | undefined;
  try {
    self = api.userSid();
  } catch (e) {
    throw new DirAclError('read', `cannot tell this daemon's account to check who else may use ${file}: ${message(e)}; refusing to use it`);
  }
  const secret = opts.secret !== undefined;
  const problem = fileAccessProblem(sd, self, secret);
  if (problem) {
    const head = secret ? `${file} (${opts.secret}) holds a secret and lets others read or change it` : `${file} lets others change it`;
    const must = secret ? `it must be readable and changeable by ${whomText(self)}` : `it must be changeable by ${whomText(self)} (others may read it)`;
    throw new DirAclError('acl', `${head}: ${problem} (read back: ${sd}); ${must}; refusing to use it. Fix (as Administrator): ${fixFileCommand(file)}`);
  }
  const dir = path.dirname(path.resolve(file));
  const dirSd = read(dir);
  const dirProblem = accessProblem(dirSd, self, { secret: false, folder: true });
  if (dirProblem) throw new DirAclError('acl', `${file} is in a folder others may change: ${dirRefusal(dir, dirProblem, dirSd, self, false, false)}`);
  const whom = secret ? `read and change: ${whomText(self)}` : `change: ${whomText(self)}; others may read`;
  return { enforced: true, what: `${file}: existing file checked, ${sd} read back (${whom}); its folder ${dir} reads back ${dirSd} (change: ${whomText(self)}; others may read)` };
}
