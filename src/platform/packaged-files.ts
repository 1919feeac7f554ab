// What the packaged Windows daemon loads from beside its executable, checked before it loads any of it.
// The service runs as LocalSystem, so whoever may change koffi.node or fs-native-extensions.node (native
// code, run in the daemon's process), the .proto files etcd3 parses, or blockspeaker.exe and its folder, runs code
// as SYSTEM. Two checks, in this order:
//   1. integrity: each file's SHA-256 against the one the build recorded inside the executable
//      (packaging/windows/build.ts), before the first native addon is opened. A changed file is refused whoever
//      changed it, and before any of its code runs: the ACL check below needs koffi, a native addon itself;
//   2. access: the executable, each file and their folder by the config files' rule (./file-acl.ts: nobody but
//      SYSTEM, Administrators, TrustedInstaller and the daemon's account may change them), or the start is refused
//      naming the file, the entry and the fix.
// Run from source (tsx, Linux) there is no manifest, and nothing to check here: Node and node_modules are the
// operator's own install.
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { DirReport } from './dir-acl.ts';

/** Set by the Windows build (esbuild define): the files beside the exe, relative with '/', and their SHA-256. */
declare const BLOCKSPEAKER_PACKAGED_FILES: string | undefined;

export type PackagedManifest = Record<string, string>;

/** The manifest compiled into this executable; undefined when running from source. */
export function packagedManifest(): PackagedManifest | undefined {
  return typeof BLOCKSPEAKER_PACKAGED_FILES === 'string' ? (JSON.parse(BLOCKSPEAKER_PACKAGED_FILES) as PackagedManifest) : undefined;
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export class PackagedFileError extends Error {
  override name = 'PackagedFileError';
  constructor(readonly file: string, message: string) {
    super(message);
  }
}

/**
 * Check every file of `manifest` under `dir` against its recorded SHA-256; throws PackagedFileError naming the first
 * file that is missing or differs. Returns the full paths checked (the executable's folder's files).
 */
export function checkPackagedFiles(dir: string, manifest: PackagedManifest, read: (file: string) => Buffer, join: (dir: string, rel: string) => string = path.join): string[] {
  const checked: string[] = [];
  for (const [rel, want] of Object.entries(manifest).sort(([a], [b]) => a.localeCompare(b))) {
    const file = join(dir, rel);
    let bytes: Buffer;
    try {
      bytes = read(file);
    } catch (e) {
      throw new PackagedFileError(file, `${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): this executable was built to load it; reinstall blockspeaker`);
    }
    const got = sha256(bytes);
    if (got !== want) {
      throw new PackagedFileError(file, `${file} is not the file this executable was built with (SHA-256 ${got.slice(0, 16)}…, built with ${want.slice(0, 16)}…): someone changed it; refusing to load it, as LocalSystem would run its code. Reinstall blockspeaker from its release`);
    }
    checked.push(file);
  }
  return checked;
}

/** A file check of the platform (./platform.ts checkFile: the file's and its folder's owner and DACL). */
type CheckFile = (file: string) => Promise<DirReport | undefined>;

/**
 * Both checks for the executable `exe` and the files its build recorded beside it: integrity first (nothing loaded
 * yet), then who may change each (which loads koffi, now known to be the one built with). Throws PackagedFileError
 * or DirAclError naming the file; returns what was checked and the ACL reports.
 */
export async function checkPackagedInstall(exe: string, manifest: PackagedManifest, read: (file: string) => Buffer, checkFile: CheckFile): Promise<{ files: string[]; reports: DirReport[] }> {
  const files = [exe, ...checkPackagedFiles(path.dirname(exe), manifest, read)];
  const reports: DirReport[] = [];
  for (const f of files) {
    const r = await checkFile(f);
    if (r) reports.push(r);
  }
  return { files, reports };
}
