// Who may use the Windows control pipe: SYSTEM and Administrators only. Pure logic (the SDDL we set, the check of
// what the OS reads back, the messages); the Win32 calls that apply it live in ./win32-security.ts (koffi, loaded
// only on Windows when a pipe is listened on) behind the Win32SecurityApi below, so tests hand in a double.
//
// Why this route: Node creates the pipe through libuv, which cannot be given a security descriptor, but libuv opens
// every instance with WRITE_DAC and the first with FILE_FLAG_FIRST_PIPE_INSTANCE (src/win/pipe.c: a name another
// process already owns fails the bind, reported as EADDRINUSE). All instances of a pipe share one descriptor, and
// the creator owns it, so the daemon opens its own pipe as a client for READ_CONTROL|WRITE_DAC, sets a protected DACL
// (no inherited entries) and reads it back before it says it is listening.

/** Generic-all for SYSTEM and BUILTIN\Administrators; "P": protected, nothing inherited; nobody else. */
export const ADMIN_ONLY_PIPE_SDDL = 'D:P(A;;GA;;;SY)(A;;GA;;;BA)';

/** The Win32 side (./win32-security.ts), as SDDL strings. */
export interface Win32SecurityApi {
  /** Apply `sddl`'s DACL to the pipe (opened as a client) and return the DACL read back. */
  setDacl(pipe: string, sddl: string): string;
  /** A file's or directory's owner and DACL now, as SDDL ("O:...D:..."). */
  readDirSecurity(dir: string): string;
  /** CreateDirectoryW(dir) with `sddl` as its security descriptor (parent must exist); throws Win32Error. */
  createDir(dir: string, sddl: string): void;
  /** This process's account (the token user), as a SID string. */
  userSid(): string;
  /**
   * Who serves a pipe: its server's process ID (GetNamedPipeServerProcessId), image and account, asked with a handle
   * opened at identification level that sends nothing. For the refusal of a pipe that did not prove itself.
   */
  pipeServer?(pipe: string): PipeServer;
}

/** The process serving a pipe, as far as it can be read. */
export interface PipeServer {
  pid: number;
  image?: string;
  /** DOMAIN\name, or the SID string when the name cannot be looked up. */
  account?: string;
}

/** A pipe's server in words: "process 4242 (C:\x\evil.exe) of NODE\mallory". */
export function describePipeServer(s: PipeServer): string {
  return `process ${s.pid}${s.image ? ` (${s.image})` : ''}${s.account ? ` of ${s.account}` : ''}`;
}

/** A failed Win32 call, by name and error code (what `GetLastError` or the call's return said). */
export class Win32Error extends Error {
  override name = 'Win32Error';
  constructor(readonly call: string, readonly code: number) {
    super(`${call} failed: ${win32ErrorName(code)}`);
  }
}

const ERROR_NAMES: Record<number, string> = {
  2: 'ERROR_FILE_NOT_FOUND',
  3: 'ERROR_PATH_NOT_FOUND',
  5: 'ERROR_ACCESS_DENIED',
  6: 'ERROR_INVALID_HANDLE',
  50: 'ERROR_NOT_SUPPORTED',
  87: 'ERROR_INVALID_PARAMETER',
  120: 'ERROR_CALL_NOT_IMPLEMENTED',
  121: 'ERROR_SEM_TIMEOUT',
  183: 'ERROR_ALREADY_EXISTS',
  231: 'ERROR_PIPE_BUSY',
  1305: 'ERROR_UNKNOWN_REVISION',
  1336: 'ERROR_INVALID_ACL',
  1337: 'ERROR_INVALID_SID',
  1338: 'ERROR_INVALID_SECURITY_DESCR',
};

export function win32ErrorName(code: number): string {
  const name = ERROR_NAMES[code];
  return name ? `${name} (${code})` : `Win32 error ${code}`;
}

/** Thrown when the pipe cannot be restricted: the daemon must not run with a pipe open to more than it says. */
export class PipeAclError extends Error {
  override name = 'PipeAclError';
}

/** The well-known SIDs an SDDL may spell by alias or by number. */
const SYSTEM = new Set(['SY', 'S-1-5-18']);
const ADMINISTRATORS = new Set(['BA', 'S-1-5-32-544']);
/** Full control, as set (GA) or as the object manager stores it after mapping generic rights (FILE_ALL_ACCESS). */
const FULL = new Set(['GA', 'FA', '0X1F01FF']);

/** The DACL part ("D:...") of an SDDL string, or undefined. */
function daclPart(sddl: string): string | undefined {
  const at = sddl.indexOf('D:');
  if (at < 0) return undefined;
  const rest = sddl.slice(at + 2);
  const end = rest.search(/[OGS]:/); // an owner, group or SACL part after the DACL
  return (end < 0 ? rest : rest.slice(0, end)).trim();
}

/**
 * Why `sddl` does not "allow full control to SYSTEM and Administrators, and nothing to anyone else" (undefined when
 * it does). Accepts GA or its mapped form FA/0x1F01FF and either spelling of the SIDs; any other entry (an inherited
 * one included), a deny entry or a missing principal is a problem. The protected flag ("P") is asked for but not
 * required back: a pipe has no parent to inherit from once it exists, so the entries are what counts (and wine
 * returns the entries without the flag).
 */
export function adminOnlyDaclProblem(sddl: string): string | undefined {
  const dacl = daclPart(sddl);
  if (dacl === undefined) return 'no DACL in the descriptor';
  const aces = [...dacl.matchAll(/\(([^)]*)\)/g)].map((m) => m[1]!.split(';'));
  const seen = { system: false, admins: false };
  for (const ace of aces) {
    const [type, , rights, , , sid] = ace.map((f) => f.trim().toUpperCase());
    const text = `(${ace.join(';')})`;
    if (type !== 'A') return `entry ${text} is not an allow entry`;
    const system = SYSTEM.has(sid ?? '');
    if (!system && !ADMINISTRATORS.has(sid ?? '')) return `entry ${text} grants access to ${sid}, who is neither SYSTEM nor Administrators`;
    if (!FULL.has(rights ?? '')) return `entry ${text} grants ${rights}, not full control`;
    if (system) seen.system = true;
    else seen.admins = true;
  }
  if (!seen.system) return 'SYSTEM has no entry';
  if (!seen.admins) return 'Administrators have no entry';
  return undefined;
}

/** What the pipe enforces, in the words the log, /status and the client use. */
export function adminOnlyPipeWhat(pipe: string, readBack: string): string {
  return `named pipe ${pipe}: DACL ${readBack} read back (SYSTEM and Administrators only, others cannot open it); first instance only, a name another process owns fails the start`;
}

/**
 * Restrict `pipe` to SYSTEM and Administrators through `api` and check what the OS kept. Throws PipeAclError naming
 * the pipe and the cause when it cannot be set or reads back different.
 */
export function restrictPipe(pipe: string, api: Win32SecurityApi): { enforced: true; what: string; dacl: string } {
  let back: string;
  try {
    back = api.setDacl(pipe, ADMIN_ONLY_PIPE_SDDL);
  } catch (e) {
    throw new PipeAclError(`cannot restrict the control pipe ${pipe} to SYSTEM and Administrators (${ADMIN_ONLY_PIPE_SDDL}): ${(e as Error)?.message ?? String(e)}; refusing to start`);
  }
  const problem = adminOnlyDaclProblem(back);
  if (problem) {
    throw new PipeAclError(`the control pipe ${pipe} does not keep the DACL ${ADMIN_ONLY_PIPE_SDDL}: it reads back "${back}" (${problem}); refusing to start`);
  }
  return { enforced: true, what: adminOnlyPipeWhat(pipe, back), dacl: back };
}
