// The folders a program is installed into for another, more privileged one to run (the CNI bin and conf folders:
// containerd runs what is there, and reads the network config there, as SYSTEM or root). Made here, such a folder
// and its missing parents are only ever writable by administrators:
//   - Windows: each missing component is created by the platform's prepareDir (./dir-acl.ts: CreateDirectoryW with
//     SYSTEM and Administrators only, protected, in the same call), never inheriting C:\'s entries that let Users
//     create files and folders; the ACL is read back.
//   - Linux: each missing component is made 0755 (chmod after mkdir: the umask does not decide), owned by the
//     installing user (root in the DaemonSet).
// A folder that exists is not changed (the operator, or the runtime's installer, made it: its ACL may be there on
// purpose), but one that lets others add or replace files gets a warning with the command that fixes it: whoever
// may write there chooses what the runtime runs.
import fs from 'node:fs';
import path from 'node:path';
import { accessProblem, fixCommand, message } from './dir-acl.ts';
import type { Platform } from './platform.ts';

export interface InstallDirReport {
  dir: string;
  /** The topmost directory made now (undefined: it existed). */
  created?: string;
  /** What was made or checked, in words. */
  what?: string;
  /** Others may add or replace files here, or the ACL could not be made or checked: said, not fatal. */
  warning?: string;
}

/**
 * What lets anyone but SYSTEM, Administrators and `self` change the folder described by `sddl` or what it holds (add,
 * delete or replace files, rewrite its ACL): the daemon's one access rule (./dir-acl.ts accessProblem) for a folder
 * others may read. Reading and running what is there are fine. Undefined when nothing does.
 */
export function dirWriteProblem(sddl: string, self?: string): string | undefined {
  return accessProblem(sddl, self, { secret: false, folder: true });
}

/** Each missing component of `dir`, topmost first. */
function missingOf(dir: string): string[] {
  const missing: string[] = [];
  for (let p = path.resolve(dir); !fs.existsSync(p); p = path.dirname(p)) {
    missing.unshift(p);
    if (path.dirname(p) === p) break;
  }
  return missing;
}

/** Linux: make each missing component 0755 whatever the umask; the topmost one made. */
export function mkdirs0755(dir: string): string | undefined {
  const missing = missingOf(dir);
  for (const p of missing) {
    try {
      fs.mkdirSync(p, { mode: 0o755 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      continue; // made meanwhile by someone else: not ours to chmod
    }
    fs.chmodSync(p, 0o755);
  }
  return missing[0];
}

/** Make `dir` (and its missing parents) writable by administrators only, or check the existing one (see the head). */
export async function prepareInstallDir(p: Platform, dir: string): Promise<InstallDirReport> {
  if (p.id === 'linux') {
    const created = mkdirs0755(dir);
    if (created !== undefined) return { dir, created, what: `${dir}: created, mode 0755${created === path.resolve(dir) ? '' : ` (and its missing parents from ${created})`}` };
    const st = fs.statSync(dir);
    if (!st.isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
    const problems: string[] = [];
    if (st.mode & 0o022) problems.push(`its mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')} lets ${st.mode & 0o002 ? 'everyone' : 'its group'} write`);
    const me = process.getuid?.();
    if (st.uid !== 0 && st.uid !== me) problems.push(`its owner is uid ${st.uid}`);
    if (!problems.length) return { dir };
    return { dir, warning: `${dir} lets others add or replace files: ${problems.join('; ')}; the container runtime runs what is there as root. Fix: chown root:root ${dir} && chmod 0755 ${dir}` };
  }
  if (!fs.existsSync(dir)) {
    // Windows: every missing component created admin-only in one call each, the leaf read back (throws DirAclError).
    const r = await p.prepareDir(dir);
    const out: InstallDirReport = { dir, created: r?.created, what: r?.what };
    if (r && !r.enforced) out.warning = r.what;
    return out;
  }
  let sd: { sddl: string; self?: string };
  try {
    sd = await p.readSecurity(dir);
  } catch (e) {
    return { dir, warning: `${dir}: existing folder's ACL NOT checked (${message(e)})` };
  }
  const problem = dirWriteProblem(sd.sddl, sd.self);
  if (!problem) return { dir };
  return {
    dir,
    warning: `${dir} lets others add or replace files: ${problem} (read back: ${sd.sddl}); the container runtime runs what is there as SYSTEM. Fix (as Administrator): ${fixCommand(dir)}`,
  };
}
