// The Win32 calls behind Win32SecurityApi (./pipe-acl.ts), through koffi. Imported only on Windows when the daemon
// listens on its pipe (never by the CNI plugin, the CLI's client commands or Linux), so neither koffi's load time nor
// its memory is paid elsewhere. In the Windows executable, 'koffi' resolves to the koffi.node shipped beside it
// (packaging/windows/build.ts).
import { Win32Error, type PipeServer, type Win32SecurityApi } from './pipe-acl.ts';

// winnt.h / winbase.h / accctrl.h / sddl.h
const READ_CONTROL = 0x0002_0000;
const WRITE_DAC = 0x0004_0000;
const OPEN_EXISTING = 3;
const ERROR_PIPE_BUSY = 231;
const SE_FILE_OBJECT = 1;
const SE_KERNEL_OBJECT = 6;
const OWNER_SECURITY_INFORMATION = 0x0000_0001;
const DACL_SECURITY_INFORMATION = 0x0000_0004;
const TOKEN_QUERY = 0x0008;
const TOKEN_USER = 1;
const PROTECTED_DACL_SECURITY_INFORMATION = 0x8000_0000;
const SDDL_REVISION_1 = 1;
const INVALID_HANDLE = 0xffff_ffff_ffff_ffffn;
const FILE_READ_ATTRIBUTES = 0x0080;
// CreateFileW's flags: ask for SQOS, at identification level (the server may learn who we are, never act as us).
const SECURITY_SQOS_PRESENT = 0x0010_0000;
const SECURITY_IDENTIFICATION = 0x0001_0000;
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;

type Fn = (...args: unknown[]) => any;

interface KoffiLike {
  load(path: string): { func(definition: string): Fn };
  address(p: unknown): bigint;
  decode(p: unknown, type: string, len?: number): any;
  struct(name: string, def: Record<string, string>): unknown;
  sizeof(type: unknown): number;
  alloc(type: string, len: number): unknown;
  free(p: unknown): void;
}

/** koffi's API from its ESM wrapper, its CommonJS module, or the executable's shim (all shapes seen in bundles). */
async function loadKoffi(): Promise<KoffiLike> {
  const mod = (await import('koffi')) as unknown as { default?: KoffiLike } & KoffiLike;
  return typeof mod.load === 'function' ? mod : (mod.default as KoffiLike);
}

let loaded: Promise<Win32SecurityApi> | undefined;

/** The calls, bound once per process (koffi type names such as SECURITY_ATTRIBUTES are process-wide). */
export function win32Security(): Promise<Win32SecurityApi> {
  loaded ??= bind();
  loaded.catch(() => (loaded = undefined)); // a failed load may be retried
  return loaded;
}

async function bind(): Promise<Win32SecurityApi> {
  const koffi = await loadKoffi();
  const kernel32 = koffi.load('kernel32.dll');
  const advapi32 = koffi.load('advapi32.dll');
  const CreateFileW = kernel32.func('void *CreateFileW(const char16_t *name, uint32_t access, uint32_t share, void *sa, uint32_t disposition, uint32_t flags, void *tmpl)');
  const WaitNamedPipeW = kernel32.func('int WaitNamedPipeW(const char16_t *name, uint32_t timeoutMs)');
  const CloseHandle = kernel32.func('int CloseHandle(void *h)');
  const GetLastError = kernel32.func('uint32_t GetLastError()');
  const LocalFree = kernel32.func('void *LocalFree(void *p)');
  const SddlToSd = advapi32.func('int ConvertStringSecurityDescriptorToSecurityDescriptorW(const char16_t *sddl, uint32_t rev, _Out_ void **sd, _Out_ uint32_t *size)');
  const GetSecurityDescriptorDacl = advapi32.func('int GetSecurityDescriptorDacl(void *sd, _Out_ int *present, _Out_ void **dacl, _Out_ int *defaulted)');
  const SetSecurityInfo = advapi32.func('uint32_t SetSecurityInfo(void *h, int type, uint32_t info, void *owner, void *group, void *dacl, void *sacl)');
  const GetSecurityInfo = advapi32.func('uint32_t GetSecurityInfo(void *h, int type, uint32_t info, void *owner, void *group, _Out_ void **dacl, void *sacl, _Out_ void **sd)');
  const GetNamedSecurityInfoW = advapi32.func('uint32_t GetNamedSecurityInfoW(const char16_t *name, int type, uint32_t info, void *owner, void *group, _Out_ void **dacl, void *sacl, _Out_ void **sd)');
  const SECURITY_ATTRIBUTES = koffi.struct('SECURITY_ATTRIBUTES', { nLength: 'uint32_t', lpSecurityDescriptor: 'void *', bInheritHandle: 'int' });
  const CreateDirectoryW = kernel32.func('int CreateDirectoryW(const char16_t *path, SECURITY_ATTRIBUTES *sa)');
  const GetCurrentProcess = kernel32.func('void *GetCurrentProcess()');
  const OpenProcessToken = advapi32.func('int OpenProcessToken(void *process, uint32_t access, _Out_ void **token)');
  const GetTokenInformation = advapi32.func('int GetTokenInformation(void *token, int cls, void *buf, uint32_t len, _Out_ uint32_t *needed)');
  const ConvertSidToStringSidW = advapi32.func('int ConvertSidToStringSidW(void *sid, _Out_ void **str)');
  const GetNamedPipeServerProcessId = kernel32.func('int GetNamedPipeServerProcessId(void *pipe, _Out_ uint32_t *pid)');
  const OpenProcess = kernel32.func('void *OpenProcess(uint32_t access, int inherit, uint32_t pid)');
  const QueryFullProcessImageNameW = kernel32.func('int QueryFullProcessImageNameW(void *process, uint32_t flags, void *name, _Inout_ uint32_t *size)');
  const LookupAccountSidW = advapi32.func('int LookupAccountSidW(const char16_t *system, void *sid, void *name, _Inout_ uint32_t *nameLen, void *domain, _Inout_ uint32_t *domainLen, _Out_ int *use)');
  const SdToSddl = advapi32.func('int ConvertSecurityDescriptorToStringSecurityDescriptorW(void *sd, uint32_t rev, uint32_t info, _Out_ void **sddl, _Out_ uint32_t *len)');

  const invalid = (h: unknown) => h === null || koffi.address(h) === INVALID_HANDLE;

  /** Our own pipe, as a client that may read and write its DACL (the creator owns it; a busy pipe is waited for). */
  function openPipe(pipe: string): unknown {
    for (let attempt = 0; ; attempt++) {
      const h = CreateFileW(pipe, READ_CONTROL | WRITE_DAC, 0, null, OPEN_EXISTING, 0, null);
      if (!invalid(h)) return h;
      const err = GetLastError() as number;
      // Every instance is taken by a connecting client: wait for one, a few times.
      if (err === ERROR_PIPE_BUSY && attempt < 5 && WaitNamedPipeW(pipe, 2000)) continue;
      throw new Win32Error(`CreateFileW(${pipe}, READ_CONTROL|WRITE_DAC)`, err);
    }
  }

  function descriptor(sddl: string): unknown {
    const sd: unknown[] = [null];
    if (!SddlToSd(sddl, SDDL_REVISION_1, sd, [0])) throw new Win32Error(`ConvertStringSecurityDescriptorToSecurityDescriptorW(${sddl})`, GetLastError());
    return sd[0];
  }

  /** The parts `info` of a descriptor that GetSecurityInfo or GetNamedSecurityInfoW returned in `sd` (freed here). */
  function daclString(sd: unknown[], info = DACL_SECURITY_INFORMATION): string {
    try {
      const str: unknown[] = [null];
      if (!SdToSddl(sd[0], SDDL_REVISION_1, info, str, [0])) {
        throw new Win32Error('ConvertSecurityDescriptorToStringSecurityDescriptorW', GetLastError());
      }
      try {
        return koffi.decode(str[0], 'char16_t', -1);
      } finally {
        LocalFree(str[0]);
      }
    } finally {
      LocalFree(sd[0]);
    }
  }

  function readDacl(h: unknown): string {
    const sd: unknown[] = [null];
    const rc = GetSecurityInfo(h, SE_KERNEL_OBJECT, DACL_SECURITY_INFORMATION, null, null, [null], null, sd) as number;
    if (rc !== 0) throw new Win32Error('GetSecurityInfo', rc);
    return daclString(sd);
  }

  /** The account a process token runs as: its SID string, and DOMAIN\\name when that can be looked up. */
  function tokenUser(token: unknown): { sid: string; name?: string } {
    // TOKEN_USER is a SID pointer into the same buffer, followed by the SID: the buffer must outlive the read.
    const buf = koffi.alloc('uint8_t', 256);
    try {
      if (!GetTokenInformation(token, TOKEN_USER, buf, 256, [0])) throw new Win32Error('GetTokenInformation(TokenUser)', GetLastError());
      const sid = koffi.decode(buf, 'void *');
      const str: unknown[] = [null];
      if (!ConvertSidToStringSidW(sid, str)) throw new Win32Error('ConvertSidToStringSidW', GetLastError());
      let sidString: string;
      try {
        sidString = koffi.decode(str[0], 'char16_t', -1) as string;
      } finally {
        LocalFree(str[0]);
      }
      const name = Buffer.alloc(512);
      const domain = Buffer.alloc(512);
      const nameLen = [256];
      const domainLen = [256];
      const found = LookupAccountSidW(null, sid, name, nameLen, domain, domainLen, [0]);
      const text = (b: Buffer, n: number) => b.toString('utf16le', 0, n * 2);
      return found ? { sid: sidString, name: `${text(domain, domainLen[0]!)}\\${text(name, nameLen[0]!)}` } : { sid: sidString };
    } finally {
      koffi.free(buf);
    }
  }

  let user: string | undefined;

  return {
    readDirSecurity(dir) {
      const sd: unknown[] = [null];
      const info = OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
      const rc = GetNamedSecurityInfoW(dir, SE_FILE_OBJECT, info, null, null, [null], null, sd) as number;
      if (rc !== 0) throw new Win32Error(`GetNamedSecurityInfoW(${dir})`, rc);
      return daclString(sd, info);
    },
    createDir(dir, sddl) {
      // The descriptor is given at creation: there is no moment the directory has its parent's ACL.
      const sd = descriptor(sddl);
      try {
        const sa = { nLength: koffi.sizeof(SECURITY_ATTRIBUTES), lpSecurityDescriptor: sd, bInheritHandle: 0 };
        if (!CreateDirectoryW(dir, sa)) throw new Win32Error(`CreateDirectoryW(${dir})`, GetLastError());
      } finally {
        LocalFree(sd);
      }
    },
    userSid() {
      if (user) return user;
      const token: unknown[] = [null];
      if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, token)) throw new Win32Error('OpenProcessToken', GetLastError());
      try {
        return (user = tokenUser(token[0]).sid);
      } finally {
        CloseHandle(token[0]);
      }
    },
    pipeServer(pipe) {
      // Attributes only, at identification level: this handle sends nothing and lends the server nothing to act with.
      const h = CreateFileW(pipe, FILE_READ_ATTRIBUTES, 0, null, OPEN_EXISTING, SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, null);
      if (invalid(h)) throw new Win32Error(`CreateFileW(${pipe}, FILE_READ_ATTRIBUTES, SECURITY_IDENTIFICATION)`, GetLastError());
      try {
        const pid = [0];
        if (!GetNamedPipeServerProcessId(h, pid)) throw new Win32Error(`GetNamedPipeServerProcessId(${pipe})`, GetLastError());
        const out: PipeServer = { pid: pid[0]! };
        const proc = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, out.pid);
        if (proc === null || koffi.address(proc) === 0n) return out; // another account's process: the PID is what we get
        try {
          const name = Buffer.alloc(2 * 1024);
          const size = [1024];
          if (QueryFullProcessImageNameW(proc, 0, name, size)) out.image = name.toString('utf16le', 0, size[0]! * 2);
          const token: unknown[] = [null];
          if (OpenProcessToken(proc, TOKEN_QUERY, token)) {
            try {
              const u = tokenUser(token[0]);
              out.account = u.name ?? u.sid;
            } catch {
              /* the PID and image still say who */
            } finally {
              CloseHandle(token[0]);
            }
          }
          return out;
        } finally {
          CloseHandle(proc);
        }
      } finally {
        CloseHandle(h);
      }
    },
    setDacl(pipe, sddl) {
      const sd = descriptor(sddl);
      try {
        const present = [0];
        const dacl: unknown[] = [null];
        if (!GetSecurityDescriptorDacl(sd, present, dacl, [0]) || !present[0]) {
          throw new Win32Error(`GetSecurityDescriptorDacl(${sddl})`, GetLastError());
        }
        const h = openPipe(pipe);
        try {
          const rc = SetSecurityInfo(h, SE_KERNEL_OBJECT, (DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION) >>> 0, null, null, dacl[0], null) as number;
          if (rc !== 0) throw new Win32Error(`SetSecurityInfo(${pipe}, DACL)`, rc);
          return readDacl(h);
        } finally {
          CloseHandle(h);
        }
      } finally {
        LocalFree(sd);
      }
    },
  };
}
