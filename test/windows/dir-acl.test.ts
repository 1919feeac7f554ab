// The packaged daemon's state directories under wine: `blockspeaker.exe run` creates its store directory (and every
// missing parent) with CreateDirectoryW and the admin-only descriptor, and a separate program reading the owner and
// DACL back gets what the daemon logged; an existing directory others may read refuses the start, naming the path,
// the entry and the fix, and nothing is written into it.
//
// What wine does here (wine 8 from Debian, found with these executables): it honours the descriptor given to
// CreateDirectoryW by turning it into the directory's Unix mode (SYSTEM and Administrators only -> 0740), and reads a
// DACL back from the mode: the owner is the user wine runs as (S-1-5-21-0-0-0-1000, also the token user), entries
// for SYSTEM and that user, plus Everyone (WD) read when the mode lets others read. So under wine "only SYSTEM,
// Administrators and the daemon's own account" holds for what we create, and a 0755 directory is one Everyone may
// read, which the daemon must refuse.
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, runWine, startWine, windowsDist, windowsNode, zPath } from '../../packaging/windows/wine.ts';
import { dirAccessProblem, fixCommand } from '../../src/platform/dir-acl.ts';
import { freePort } from '../store/etcd-harness.ts';
import { exe, parseLog, until, windowsReady } from './harness.ts';

/** Reads a directory's owner and DACL, and this process's account, with its own Win32 calls: prints JSON. */
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
for (const dir of process.argv.slice(3)) {
  const sd = [null], str = [null];
  const rc = Named(dir, 1 /* SE_FILE_OBJECT */, 5 /* OWNER | DACL */, null, null, null, null, sd);
  out[dir] = rc !== 0 ? 'error ' + rc : ToString(sd[0], 1, 5, str, [0]) ? koffi.decode(str[0], 'char16_t', -1) : 'convert error ' + GetLastError();
}
const h = [null], buf = koffi.alloc('uint8_t', 256), s = [null];
OpenProcessToken(GetCurrentProcess(), 8 /* TOKEN_QUERY */, h);
GetTokenInformation(h[0], 1 /* TokenUser */, buf, 256, [0]);
SidToString(koffi.decode(buf, 'void *'), s);
out.user = koffi.decode(s[0], 'char16_t', -1);
console.log(JSON.stringify(out));
`;

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-diracl-'));
  const top = `bs-diracl-${process.pid}`;
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), top), { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), `${top}-wide`), { recursive: true, force: true });
  });
  fs.writeFileSync(path.join(dir, 'reader.cjs'), READER);
  const read = async (...dirs: string[]) => {
    const r = await runWine(windowsNode(), [zPath(path.join(dir, 'reader.cjs')), zPath(path.join(windowsDist, 'koffi.node')), ...dirs], { timeoutMs: 300_000 });
    return JSON.parse(r.stdout || '{}') as Record<string, string>;
  };
  /** A node config in `cfgDir` (a Linux directory, seen through Z:) with its store at `store`. */
  const config = (cfgDir: string, store: string, statusPort: number) => {
    const file = path.join(cfgDir, `node-${statusPort}.yaml`);
    fs.writeFileSync(file, `node: { name: win-diracl-1, os: windows }
ipam:
  store: ${store}
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
status: { listen: "127.0.0.1:${statusPort}" }
ipc: { path: '\\\\.\\pipe\\bs-diracl-${statusPort}' }
`);
    return zPath(file);
  };

  t.test('blockspeaker.exe run creates its store directories admin-only, and an independent reader gets that back', async (t) => {
    const store = `C:\\${top}\\state\\store`;
    const port = await freePort();
    const d = startWine(exe.cli, ['run', '-c', config(dir, store, port)], { timeoutMs: 400_000 });
    t.teardown(() => d.kill());
    const lines = await until('the daemon to start', 180_000, () => {
      const l = parseLog(d.output().stderr);
      return (l.some((x) => x.msg === 'started' || x.msg === 'cannot start') || /^blockspeaker: /m.test(d.output().stderr)) && l;
    });
    t.ok(lines.some((l) => l.msg === 'started'), `started: ${d.output().stderr}`);
    const back = await read(`C:\\${top}`, store);
    t.ok(back.user, 'the reader knows its account');
    for (const p of [`C:\\${top}`, store]) {
      t.match(back[p], /^O:/, `${p} read back: ${back[p]}`);
      t.equal(dirAccessProblem(back[p]!, back.user), undefined, `${p}: SYSTEM, Administrators and the daemon's account only`);
    }
    // Wine maps the DACL onto the owner and "other" bits (it leaves the group's read bit: 0740), and Everyone is "other".
    t.equal(fs.statSync(path.join(driveC(), top)).mode & 0o007, 0, 'on the Unix side: no access for others (wine made the mode from the descriptor)');
    const said = lines.find((l) => String(l.msg).startsWith(`C:\\${top}: created with the DACL`));
    t.equal(said?.msg, `C:\\${top}: created with the DACL D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA) in one call (CreateDirectoryW), ${store} reads back ${back[store]} (SYSTEM, Administrators and this daemon's account ${back.user} only)`, 'what the daemon says is what the directory holds');
    t.equal(said?.level, 30);
    const cfgSaid = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`${zPath(dir)}: existing directory checked`));
    t.ok(cfgSaid, 'the config directory was checked too');
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace in the daemon log');
  });

  t.test('an existing store directory Everyone may read: the start is refused, naming it, the entry and the fix', async (t) => {
    const wide = path.join(driveC(), `${top}-wide`);
    fs.mkdirSync(wide, { mode: 0o755 });
    fs.chmodSync(wide, 0o755);
    const store = `C:\\${top}-wide`;
    const port = await freePort();
    const r = await runWine(exe.cli, ['run', '-c', config(dir, store, port)], { timeoutMs: 300_000 });
    t.not(r.code, 0, 'non-zero exit');
    const back = await read(store);
    t.match(back[store], /\(A;OICI;0x1200a9;;;WD\)/, `wine reads Everyone's access back: ${back[store]}`);
    const failed = parseLog(r.stderr).find((l) => l.msg === 'cannot start');
    t.equal(failed?.err, `file:${store}: ${store} lets others in: ${dirAccessProblem(back[store]!, back.user)} (read back: ${back[store]}); it must be usable by SYSTEM, Administrators and this daemon's account ${back.user} only; refusing to use it. Fix (as Administrator): ${fixCommand(store)}`, r.stderr);
    t.same(fs.readdirSync(wide), [], 'nothing written into it');
    t.equal(fs.statSync(wide).mode & 0o777, 0o755, 'its permissions are left as they were');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('a config in a directory Everyone may read: refused before anything is written', async (t) => {
    const cfgDir = path.join(dir, 'wide-config');
    fs.mkdirSync(cfgDir);
    fs.chmodSync(cfgDir, 0o755);
    const port = await freePort();
    const store = `C:\\${top}\\never`;
    const r = await runWine(exe.cli, ['run', '-c', config(cfgDir, store, port)], { timeoutMs: 300_000 });
    t.equal(r.code, 1, 'exit 1');
    t.match(r.stderr, `blockspeaker: config ${zPath(cfgDir)}\\node-${port}.yaml: ${zPath(cfgDir)} lets others in: `);
    t.match(r.stderr, /grants 0x1200a9 to WD \(Everyone\).*refusing to use it\. Fix \(as Administrator\): powershell -NoProfile -Command/);
    t.notOk(fs.existsSync(path.join(driveC(), top, 'never')), 'no store was created');
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });
}
