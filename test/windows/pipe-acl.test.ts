// The packaged daemon's control pipe under wine: koffi loads from beside blockspeaker.exe, the DACL the daemon sets
// (SYSTEM and Administrators only) is what an independent reader gets back from the pipe, what the daemon says about
// its new store directory is what that directory holds, and a pipe name another process already holds refuses the
// start with a message that says so.
//
// What wine does and does not do (found with these executables, wine 8 from Debian): it stores a pipe's DACL and
// returns its entries (without the protected flag, and with generic rights unmapped), but it does not check a
// client's access against that DACL, and it lets a second server create a pipe name that exists
// (FILE_FLAG_FIRST_PIPE_INSTANCE is not enforced); its icacls is a stub that succeeds, and a directory's DACL is made
// from its Unix mode (SetNamedSecurityInfoW succeeds and changes nothing). Access enforcement itself is Windows' job; the squatter is caught
// here by the daemon's own probe before it listens, which works the same on Windows. (Directories: ./dir-acl.test.ts.)
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, windowsDist, windowsNode, zPath } from '../../packaging/windows/wine.ts';
import { adminOnlyDaclProblem } from '../../src/platform/pipe-acl.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, parseLog, until, windowsReady, untilDaemon } from './harness.ts';

/** Reads a pipe's DACL with its own Win32 calls (not blockspeaker's): prints {sddl} or {error}. */
const READER = `
const path = require('node:path');
const m = { exports: {} };
process.dlopen(m, process.argv[2]);
const koffi = m.exports;
const k32 = koffi.load('kernel32.dll'), adv = koffi.load('advapi32.dll');
const CreateFileW = k32.func('void *CreateFileW(const char16_t *n, uint32_t a, uint32_t s, void *sa, uint32_t d, uint32_t f, void *t)');
const GetLastError = k32.func('uint32_t GetLastError()');
const CloseHandle = k32.func('int CloseHandle(void *h)');
const GetSecurityInfo = adv.func('uint32_t GetSecurityInfo(void *h, int t, uint32_t i, void *o, void *g, _Out_ void **d, void *s, _Out_ void **sd)');
const ToString = adv.func('int ConvertSecurityDescriptorToStringSecurityDescriptorW(void *sd, uint32_t r, uint32_t i, _Out_ void **s, _Out_ uint32_t *l)');
const dacl = [null], sd = [null], str = [null];
const h = CreateFileW(process.argv[4], 0x20000 /* READ_CONTROL */, 0, null, 3 /* OPEN_EXISTING */, 0, null);
if (h === null || koffi.address(h) === 0xffffffffffffffffn) { console.log(JSON.stringify({ error: 'CreateFileW ' + GetLastError() })); process.exit(0); }
const rc = GetSecurityInfo(h, 6 /* SE_KERNEL_OBJECT */, 4 /* DACL_SECURITY_INFORMATION */, null, null, dacl, null, sd);
if (rc !== 0) { console.log(JSON.stringify({ error: 'GetSecurityInfo ' + rc })); process.exit(0); }
if (!ToString(sd[0], 1, 4, str, [0])) { console.log(JSON.stringify({ error: 'Convert ' + GetLastError() })); process.exit(0); }
console.log(JSON.stringify({ sddl: koffi.decode(str[0], 'char16_t', -1) }));
CloseHandle(h);
`;

/** A pipe server that is not blockspeaker: accepts connections and never answers. */
const SQUATTER = `
const pipe = process.argv[2];
require('node:net').createServer((c) => c.on('error', () => {})).listen(pipe, () => console.log('squatting ' + pipe));
setTimeout(() => process.exit(0), 300000);
`;

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-acl-'));
  const storeName = `bs-acl-${process.pid}`;
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
  });
  const config = (pipe: string, statusPort: number) => {
    const file = path.join(dir, `node-${statusPort}.yaml`);
    fs.writeFileSync(file, `node: { name: win-acl-1, os: windows }
ipam:
  store: C:\\${storeName}\\store-${statusPort}
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '${pipe}' }
`);
    return zPath(file);
  };
  for (const [name, text] of [['reader.cjs', READER], ['squatter.cjs', SQUATTER]]) fs.writeFileSync(path.join(dir, name), text);

  t.test('the packaged daemon sets the pipe DACL to SYSTEM and Administrators, and an independent reader gets it back', async (t) => {
    const pipe = `\\\\.\\pipe\\bs-acl-${process.pid}`;
    const port = await freePort();
    const d = startWine(exe.cli, ['run', '-c', config(pipe, port)], { timeoutMs: 400_000 });
    t.teardown(() => d.kill());
    const lines = await untilDaemon('the daemon to start', 180_000, d, () => {
      const l = parseLog(d.output().stderr);
      return l.some((x) => x.msg === 'started') && l;
    });
    const listening = lines.find((l) => l.msg === 'control socket listening');
    t.match(listening, { path: pipe, access: /^named pipe .*bs-acl-\d+: DACL D:P?\(A;;(GA|FA);;;SY\)\(A;;(GA|FA);;;BA\) read back \(SYSTEM and Administrators only/ },
      'koffi loaded from beside the exe, the DACL set and read back before "listening"');
    const status = (await (await fetch(`http://127.0.0.1:${port}/status`)).json()) as { control?: { endpoint: string; access: string } };
    t.same(status.control, { endpoint: pipe, access: listening?.access }, '/status says the same');

    const reader = (kind: 'pipe', target: string) =>
      runWine(windowsNode(), [zPath(path.join(dir, 'reader.cjs')), zPath(path.join(windowsDist, 'koffi.node')), kind, target]);
    const read = await reader('pipe', pipe);
    const back = JSON.parse(read.stdout || '{}') as { sddl?: string; error?: string };
    t.notOk(back.error, `the reader opened the pipe: ${read.stdout}${read.stderr}`);
    t.equal(adminOnlyDaclProblem(back.sddl ?? ''), undefined, `read back independently: ${back.sddl}`);
    t.match(String(listening?.access), `DACL ${back.sddl} read back`, 'what the daemon says is what the pipe holds');
    // The store's new directory is made admin-only by CreateDirectoryW (read back independently in ./dir-acl.test.ts).
    const said = lines.find((l) => String(l.msg).startsWith(`C:\\${storeName}: `));
    t.match(said, { level: 30, msg: `C:\\${storeName}: created with the DACL D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA) in one call (CreateDirectoryW)` });
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace in the daemon log');
  });

  t.test('a pipe name another process holds: the daemon refuses to start, naming the pipe, and writes nothing', async (t) => {
    const pipe = `\\\\.\\pipe\\bs-squat-${process.pid}`;
    const squatter = startWine(windowsNode(), [zPath(path.join(dir, 'squatter.cjs')), pipe], { timeoutMs: 400_000 });
    t.teardown(() => squatter.kill());
    await until('the squatter to listen', 120_000, () => squatter.output().stdout.includes('squatting'));
    const port = await freePort();
    const r = await runWine(exe.cli, ['run', '-c', config(pipe, port)], { timeoutMs: 300_000 });
    t.not(r.code, 0, 'non-zero exit');
    const failed = parseLog(r.stderr).find((l) => l.msg === 'cannot start');
    t.equal(failed?.err, `${pipe} is already owned by another process that does not answer as a blockspeaker daemon; refusing to start`, r.stderr);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.notOk(fs.existsSync(path.join(driveC(), storeName, `store-${port}`)), 'no store was created: the pipe is checked first');
  });
}
