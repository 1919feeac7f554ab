// The Windows control pipe's access control: the DACL we ask for, the check of what the OS reads back (a property
// against a plain oracle), and the daemon-side refusals, run on Linux through the Windows double.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_ONLY_PIPE_SDDL, adminOnlyDaclProblem, PipeAclError, restrictPipe, Win32Error, type Win32SecurityApi } from '../../src/platform/pipe-acl.ts';
import { linuxPlatform } from '../../src/platform/platform.ts';
import { IpcStartError, listenError, startIpcServer } from '../../src/ipc/server.ts';
import { IpcClient } from '../../src/ipc/client.ts';
import { windowsDouble } from './windows-double.ts';

const PIPE = '\\\\.\\pipe\\blockspeaker';

/** A Win32 security double from its pipe call (the directory calls are not used here). */
function api(setDacl: Win32SecurityApi['setDacl']): Win32SecurityApi {
  const none = () => {
    throw new Error('not a pipe call');
  };
  return { setDacl, readDirSecurity: none, createDir: none, userSid: none };
}

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-pipeacl-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('the DACL asked for: SYSTEM and Administrators, generic all, protected', async (t) => {
  t.equal(ADMIN_ONLY_PIPE_SDDL, 'D:P(A;;GA;;;SY)(A;;GA;;;BA)');
  t.equal(adminOnlyDaclProblem(ADMIN_ONLY_PIPE_SDDL), undefined);
});

t.test('what the OS reads back: the forms Windows and wine return pass, anything wider or narrower does not', async (t) => {
  for (const ok of [
    'D:P(A;;FA;;;SY)(A;;FA;;;BA)', // Windows maps generic rights to FILE_ALL_ACCESS
    'D:(A;;GA;;;SY)(A;;GA;;;BA)', // wine keeps the entries, drops the protected flag
    'O:BAG:SYD:PAI(A;;0x1f01ff;;;S-1-5-18)(A;;FA;;;S-1-5-32-544)S:NO_ACCESS_CONTROL',
    'D:P(A;;GA;;;BA)(A;;GA;;;SY)(A;;FA;;;SY)',
  ]) t.equal(adminOnlyDaclProblem(ok), undefined, ok);
  const bad: [string, RegExp][] = [
    ['D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GR;;;WD)', /WD, who is neither SYSTEM nor Administrators/],
    ['D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;FA;;;S-1-5-21-1-2-3-1001)', /S-1-5-21-1-2-3-1001/],
    ['D:P(A;;GA;;;SY)(D;;GA;;;BA)', /not an allow entry/],
    ['D:P(A;;GA;;;SY)', /Administrators have no entry/],
    ['D:P(A;;GA;;;BA)', /SYSTEM has no entry/],
    ['D:P(A;;GR;;;SY)(A;;GA;;;BA)', /grants GR, not full control/],
    ['D:P', /SYSTEM has no entry/],
    ['O:BAG:SY', /no DACL/],
  ];
  for (const [sddl, why] of bad) t.match(adminOnlyDaclProblem(sddl), why, sddl);
});

t.test('property: the check accepts exactly the DACLs that give full control to SYSTEM and Administrators only', async (t) => {
  const ace = fc.record({
    type: fc.constantFrom('A', 'D'),
    rights: fc.constantFrom('GA', 'FA', '0x1F01FF', 'GR', 'GW', 'FR'),
    sid: fc.constantFrom('SY', 'S-1-5-18', 'BA', 'S-1-5-32-544', 'WD', 'AU', 'S-1-5-21-7-7-7-500'),
  });
  fc.assert(
    fc.property(fc.array(ace, { maxLength: 5 }), fc.boolean(), (aces, prot) => {
      const sddl = `D:${prot ? 'P' : ''}${aces.map((a) => `(${a.type};;${a.rights};;;${a.sid})`).join('')}`;
      // Oracle: every entry allows full control to SYSTEM or Administrators, and both appear.
      const who = (sid: string) => (sid === 'SY' || sid === 'S-1-5-18' ? 'system' : sid === 'BA' || sid === 'S-1-5-32-544' ? 'admins' : 'other');
      const full = (r: string) => ['GA', 'FA', '0X1F01FF'].includes(r.toUpperCase());
      const expected = aces.every((a) => a.type === 'A' && full(a.rights) && who(a.sid) !== 'other')
        && aces.some((a) => who(a.sid) === 'system') && aces.some((a) => who(a.sid) === 'admins');
      return (adminOnlyDaclProblem(sddl) === undefined) === expected;
    }),
    { numRuns: 2000 },
  );
  t.pass('2000 random DACLs agree with the oracle');
});

t.test('restrictPipe: asks for the admin-only DACL, refuses when it cannot be set or reads back wider', async (t) => {
  const asked: string[] = [];
  const ok = restrictPipe(PIPE, api((p, s) => (asked.push(`${p} ${s}`), 'D:P(A;;FA;;;SY)(A;;FA;;;BA)')));
  t.same(asked, [`${PIPE} ${ADMIN_ONLY_PIPE_SDDL}`]);
  t.match(ok, { enforced: true, dacl: 'D:P(A;;FA;;;SY)(A;;FA;;;BA)', what: /named pipe \\\\\.\\pipe\\blockspeaker: DACL D:P\(A;;FA;;;SY\)\(A;;FA;;;BA\) read back \(SYSTEM and Administrators only/ });

  const denied = api(() => { throw new Win32Error('SetSecurityInfo(\\\\.\\pipe\\blockspeaker, DACL)', 5); });
  t.throws(() => restrictPipe(PIPE, denied), PipeAclError);
  t.throws(() => restrictPipe(PIPE, denied), {
    message: `cannot restrict the control pipe ${PIPE} to SYSTEM and Administrators (${ADMIN_ONLY_PIPE_SDDL}): SetSecurityInfo(${PIPE}, DACL) failed: ERROR_ACCESS_DENIED (5); refusing to start`,
  });
  const wider = api(() => 'D:(A;;GA;;;SY)(A;;GA;;;BA)(A;;GR;;;WD)');
  t.throws(() => restrictPipe(PIPE, wider), { message: /the control pipe .*blockspeaker does not keep the DACL D:P\(A;;GA;;;SY\)\(A;;GA;;;BA\): it reads back "D:\(A;;GA;;;SY\)\(A;;GA;;;BA\)\(A;;GR;;;WD\)" \(entry \(A;;GR;;;WD\) grants access to WD, who is neither SYSTEM nor Administrators\)/ });
  t.equal(new Win32Error('CreateFileW', 4242).message, 'CreateFileW failed: Win32 error 4242', 'an unnamed code is still given');
});

t.test('a Windows daemon\'s pipe: DACL set through the platform before the server is handed back, and said', async (t) => {
  const w = windowsDouble({ pipeDir: tmpDir(t) });
  const server = await startIpcServer({ path: PIPE, platform: w.platform, handlers: { echo: (p) => p } });
  t.teardown(() => server.close());
  t.same(w.pipeDacls, [{ pipe: PIPE, sddl: ADMIN_ONLY_PIPE_SDDL }], 'one call, on the pipe name, with the admin-only SDDL');
  t.equal(server.endpoint, PIPE);
  t.match(server.access, /DACL D:\(A;;GA;;;SY\)\(A;;GA;;;BA\) read back \(SYSTEM and Administrators only/);
  t.notMatch(server.access, /default DACL|0600/);
  const client = new IpcClient(w.platform.ipcListenPath(PIPE));
  t.teardown(() => client.close());
  t.same(await client.request('echo', { x: 1 }), { x: 1 }, 'the server serves once secured');
});

t.test('a pipe whose DACL cannot be set, or koffi that does not load: the start is refused, nothing left listening', async (t) => {
  const dir = tmpDir(t);
  // The pipe-key folder (src/ipc/proof.ts) is made as the double makes folders; only the pipe's DACL is refused.
  const folders = windowsDouble({ pipeDir: dir }).win32;
  const denied = windowsDouble({ pipeDir: dir, win32Security: async () => ({ ...folders, setDacl: () => { throw new Win32Error(`CreateFileW(${PIPE}, READ_CONTROL|WRITE_DAC)`, 5); } }) });
  await t.rejects(startIpcServer({ path: PIPE, platform: denied.platform }), IpcStartError);
  await t.rejects(startIpcServer({ path: PIPE, platform: denied.platform }), {
    message: `cannot restrict the control pipe ${PIPE} to SYSTEM and Administrators (${ADMIN_ONLY_PIPE_SDDL}): CreateFileW(${PIPE}, READ_CONTROL|WRITE_DAC) failed: ERROR_ACCESS_DENIED (5); refusing to start`,
  });
  const sock = denied.platform.ipcListenPath(PIPE);
  const reach = await new Promise<string>((resolve) => {
    const c = net.connect(sock);
    c.once('connect', () => (c.destroy(), resolve('connected')));
    c.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
  });
  t.not(reach, 'connected', 'the server was closed, not left listening with the default DACL');

  const noKoffi = windowsDouble({ pipeDir: dir, win32Security: async () => { throw new Error('Cannot find the native Koffi module'); } });
  await t.rejects(startIpcServer({ path: PIPE, platform: noKoffi.platform }), {
    name: 'IpcStartError',
    // The first thing that needs koffi is the admin-only folder of the pipe's key (made before listening).
    message: /^cannot keep the control pipe's key for .*blockspeaker: .*the Win32 security calls \(koffi\) do not load: Cannot find the native Koffi module.*refusing to start$/,
  });
});

t.test('Linux: the socket stays 0600 and no pipe security is loaded', async (t) => {
  const dir = tmpDir(t);
  let loaded = false;
  const p = linuxPlatform();
  const server = await startIpcServer({ path: path.join(dir, 's.sock'), platform: { ...p, secureIpc: async (e) => ((loaded = true), p.secureIpc(e)) } });
  t.teardown(() => server.close());
  t.ok(loaded);
  t.equal(fs.statSync(path.join(dir, 's.sock')).mode & 0o777, 0o600);
  t.match(server.access, /Unix socket mode 0600/);
});

t.test('a taken pipe name: libuv\'s EADDRINUSE and net-ipc\'s own message both say so', async (t) => {
  const code = Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' });
  const text = new Error(`EADDRINUSE: address already in use - ${PIPE}`);
  for (const e of [code, text]) {
    const err = listenError(PIPE, e);
    t.type(err, IpcStartError);
    t.equal(err.message, `${PIPE} is already owned by another process that does not answer as a blockspeaker daemon (EADDRINUSE); refusing to start`);
  }
});

t.test('a squatter that accepts connections but is no blockspeaker daemon: refused, and said so', async (t) => {
  const dir = tmpDir(t);
  const sock = path.join(dir, 'squat.sock');
  const conns: net.Socket[] = [];
  const squatter = net.createServer((c) => (conns.push(c), c.on('error', () => undefined))); // accepts, never answers
  await new Promise<void>((resolve) => squatter.listen(sock, resolve));
  t.teardown(() => {
    for (const c of conns) c.destroy();
    squatter.close();
  });
  await t.rejects(startIpcServer({ path: sock }), {
    name: 'IpcStartError',
    message: `${sock} is already owned by another process that does not answer as a blockspeaker daemon; refusing to start`,
  });
  t.ok(fs.existsSync(sock), 'the squatter\'s socket is left alone');
});
