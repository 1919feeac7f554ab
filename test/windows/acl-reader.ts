// Reading owners and DACLs back under wine with a program of its own (the pinned node.exe with koffi, not the code
// under test): GetNamedSecurityInfoW on each path, as SDDL, and the reader's own account (the token user).
import fs from 'node:fs';
import path from 'node:path';
import { runWine, windowsDist, windowsNode, zPath } from '../../packaging/windows/wine.ts';

const READER = `
const m = { exports: {} };
process.dlopen(m, process.argv[2]);
const koffi = m.exports;
const k32 = koffi.load('kernel32.dll'), adv = koffi.load('advapi32.dll');
const GetLastError = k32.func('uint32_t GetLastError()');
const Named = adv.func('uint32_t GetNamedSecurityInfoW(const char16_t *n, int t, uint32_t i, void *o, void *g, void *d, void *s, _Out_ void **sd)');
const ToString = adv.func('int ConvertSecurityDescriptorToStringSecurityDescriptorW(void *sd, uint32_t r, uint32_t i, _Out_ void **s, _Out_ uint32_t *l)');
const OpenProcessToken = adv.func('int OpenProcessToken(void *p, uint32_t a, _Out_ void **h)');
const GetCurrentProcess = k32.func('void *GetCurrentProcess()');
const GetTokenInformation = adv.func('int GetTokenInformation(void *h, int c, void *b, uint32_t l, _Out_ uint32_t *r)');
const SidToString = adv.func('int ConvertSidToStringSidW(void *sid, _Out_ void **s)');
const out = {};
for (const p of process.argv.slice(3)) {
  const sd = [null], str = [null];
  const rc = Named(p, 1 /* SE_FILE_OBJECT */, 5 /* OWNER | DACL */, null, null, null, null, sd);
  out[p] = rc !== 0 ? 'error ' + rc : ToString(sd[0], 1, 5, str, [0]) ? koffi.decode(str[0], 'char16_t', -1) : 'convert error ' + GetLastError();
}
const h = [null], buf = koffi.alloc('uint8_t', 256), s = [null];
OpenProcessToken(GetCurrentProcess(), 8 /* TOKEN_QUERY */, h);
GetTokenInformation(h[0], 1 /* TokenUser */, buf, 256, [0]);
SidToString(koffi.decode(buf, 'void *'), s);
out.user = koffi.decode(s[0], 'char16_t', -1);
console.log(JSON.stringify(out));
`;

/** The owner and DACL (SDDL) of each Windows path, and `user`: the reader's account. `work`: a Linux scratch folder. */
export async function readAcls(work: string, ...paths: string[]): Promise<Record<string, string>> {
  const script = path.join(work, 'acl-reader.cjs');
  if (!fs.existsSync(script)) fs.writeFileSync(script, READER);
  const run = () => runWine(windowsNode(), [zPath(script), zPath(path.join(windowsDist, 'koffi.node')), ...paths], { timeoutMs: 300_000 });
  let r = await run();
  // Wine itself now and then fails to start a process on a loaded machine: exit 1 and not a byte from node.exe
  // (seen once in a CI run). That is the reader not running at all, not an answer about the ACLs: once more.
  for (let i = 0; i < 2 && r.code !== 0 && r.stdout === '' && r.stderr === ''; i++) r = await run();
  try {
    return JSON.parse(r.stdout) as Record<string, string>;
  } catch {
    throw new Error(`the ACL reader printed no JSON: ${JSON.stringify(r)}`);
  }
}
