// The Windows state and config directories' access control: the check of an owner and DACL (a property against a
// plain oracle), and what the platform does through the Windows double: every missing directory created admin-only
// by CreateDirectoryW, an existing one open to others refused with the fix, CreateDirectoryW failing, koffi missing.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_ONLY_DIR_SDDL, DirAclError, dirAccessProblem, fixCommand, sddlParts } from '../../src/platform/dir-acl.ts';
import { Win32Error, type Win32SecurityApi } from '../../src/platform/pipe-acl.ts';
import { icaclsArgs } from '../../src/platform/platform.ts';
import { ADMIN_ONLY_READ_BACK, PROGRAMDATA_CHILD_SDDL, windowsDouble } from './windows-double.ts';

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-diracl-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const WINE_USER = 'S-1-5-21-0-0-0-1000';

t.test('SDDL parts: owner and DACL at the top level, whatever the entries hold', async (t) => {
  t.same(sddlParts('O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)'), { owner: 'BA', dacl: 'PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)' });
  t.same(sddlParts(`O:${WINE_USER}G:DUD:(A;;FA;;;SY)S:AI`), { owner: WINE_USER, dacl: '(A;;FA;;;SY)' });
  t.same(sddlParts('D:(A;OICI;FA;;;S-1-5-21-1-2-3-500)'), { owner: undefined, dacl: '(A;OICI;FA;;;S-1-5-21-1-2-3-500)' }, 'a "D:" inside an entry is not a part');
});

t.test('who else a directory lets in', async (t) => {
  t.equal(dirAccessProblem(ADMIN_ONLY_READ_BACK), undefined);
  t.equal(dirAccessProblem('O:SYD:PAI(A;OICI;FA;;;S-1-5-18)(A;OICI;0x1200a9;;;S-1-5-32-544)'), undefined, 'SIDs by number, narrower rights for admins');
  t.equal(dirAccessProblem('O:BAD:PAI(A;OICI;FA;;;SY)(D;OICI;FA;;;WD)'), undefined, 'a deny entry grants nothing');
  t.equal(
    dirAccessProblem(PROGRAMDATA_CHILD_SDDL),
    'entry (A;OICIIOID;GA;;;CO) grants GA to CO (Creator Owner), inherited from its parent; entry (A;OICIID;0x1200a9;;;BU) grants 0x1200a9 to BU (Users), inherited from its parent; entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR to BU (Users), inherited from its parent',
  );
  t.equal(dirAccessProblem('O:BUD:PAI(A;OICI;FA;;;SY)'), 'its owner is BU (Users)', 'an owner may rewrite the DACL');
  t.equal(dirAccessProblem('O:BAD:NO_ACCESS_CONTROL'), 'it has no DACL (everyone has full access)');
  // What wine reads back from a directory it made (from the Unix mode): SYSTEM and the user wine runs as.
  const wine = `O:${WINE_USER}D:(A;OICI;FA;;;SY)(A;OICI;FA;;;${WINE_USER})`;
  t.equal(dirAccessProblem(wine, WINE_USER), undefined, 'the daemon\'s own account is no one else');
  t.match(dirAccessProblem(wine, 'S-1-5-18'), /^its owner is S-1-5-21-0-0-0-1000; entry \(A;OICI;FA;;;S-1-5-21-0-0-0-1000\) grants FA/);
});

t.test('property: a problem exactly when the owner or an allow entry names someone else (plain oracle)', async () => {
  const sids = ['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544', 'BU', 'WD', 'AU', 'CO', WINE_USER, 'S-1-5-21-9-9-9-1001'];
  const trusted = new Set(['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544']);
  const ace = fc.record({ type: fc.constantFrom('A', 'D', 'OA'), flags: fc.constantFrom('', 'OICI', 'OICIID', 'CIIO'), rights: fc.constantFrom('FA', 'GA', '0x1200a9', 'GR'), sid: fc.constantFrom(...sids) });
  fc.assert(
    fc.property(fc.option(fc.constantFrom(...sids), { nil: undefined }), fc.array(ace, { maxLength: 6 }), fc.option(fc.constantFrom(...sids), { nil: undefined }), (owner, aces, self) => {
      const sddl = `${owner === undefined ? '' : `O:${owner}`}D:P${aces.map((a) => `(${a.type};${a.flags};${a.rights};;;${a.sid})`).join('')}`;
      const ok = (sid: string) => trusted.has(sid) || sid === self;
      const expectProblem = (owner !== undefined && !ok(owner)) || aces.some((a) => a.type !== 'D' && !ok(a.sid));
      return (dirAccessProblem(sddl, self) !== undefined) === expectProblem;
    }),
  );
});

t.test('the fix is one PowerShell command that sets the owner and the DACL a new directory gets', async (t) => {
  t.equal(
    fixCommand("C:\\Program Data\\o'brien"),
    `powershell -NoProfile -Command "$a = Get-Acl -LiteralPath 'C:\\Program Data\\o''brien'; $a.SetSecurityDescriptorSddlForm('O:BA${ADMIN_ONLY_DIR_SDDL}'); Set-Acl -LiteralPath 'C:\\Program Data\\o''brien' -AclObject $a"`,
  );
});

t.test('missing directories are created one by one with the admin-only descriptor, and read back', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const target = path.join(dir, 'ProgramData', 'blockspeaker', 'run');
  const r = await w.platform.prepareDir(target);
  t.same(w.createdDirs, [
    { dir: path.join(dir, 'ProgramData'), sddl: ADMIN_ONLY_DIR_SDDL },
    { dir: path.join(dir, 'ProgramData', 'blockspeaker'), sddl: ADMIN_ONLY_DIR_SDDL },
    { dir: target, sddl: ADMIN_ONLY_DIR_SDDL },
  ]);
  t.same(r, {
    created: path.join(dir, 'ProgramData'),
    enforced: true,
    what: `${path.join(dir, 'ProgramData')}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} in one call (CreateDirectoryW), ${target} reads back O:SYD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA) (SYSTEM, Administrators only)`,
  });
  t.equal(w.spawned.length, 0, 'icacls is not run');
  t.ok(fs.statSync(target).isDirectory());
});

t.test('an existing directory that lets Users in refuses, naming the path, the entries and the fix; nothing is changed', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const state = path.join(dir, 'blockspeaker');
  fs.mkdirSync(state);
  w.dirSecurity.set(state, PROGRAMDATA_CHILD_SDDL);
  // A new directory under it gets its own protected DACL: that one is admin-only whatever its parent allows.
  t.match(await w.platform.prepareDir(path.join(state, 'store')), { created: path.join(state, 'store'), enforced: true });
  const existing = await w.platform.prepareDir(state).then(() => undefined, (e: unknown) => e);
  t.match(existing, {
    name: 'DirAclError',
    reason: 'acl',
    message: `${state} lets others in: ${dirAccessProblem(PROGRAMDATA_CHILD_SDDL)} (read back: ${PROGRAMDATA_CHILD_SDDL}); it must be usable by SYSTEM, Administrators only; refusing to use it. Fix (as Administrator): ${fixCommand(state)}`,
  });
  t.equal(w.dirSecurity.get(state), PROGRAMDATA_CHILD_SDDL, 'the ACL is left as it was');
  t.equal(w.spawned.length, 0);

  // Through the store: a StoreError naming the store, and no LOCK or log written.
  const { openFileStore } = await import('../../src/store/file.ts');
  await t.rejects(openFileStore(state, { platform: w.platform }), { name: 'StoreError', message: `file:${state}: ${(existing as Error).message}` });
  t.same(fs.readdirSync(state), ['store'], 'nothing written into it (store/ is the directory made above)');
});

t.test('a directory of ours that reads back wider (the OS did not keep the descriptor) is refused too', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const api = await realApi(w);
  const wider: Win32SecurityApi = { ...api, readDirSecurity: () => PROGRAMDATA_CHILD_SDDL };
  const v = windowsDouble({ win32Security: async () => wider });
  const target = path.join(dir, 'state');
  await t.rejects(v.platform.prepareDir(target), { name: 'DirAclError', reason: 'acl', message: new RegExp(`^${escape(target)} was created with the DACL .* but reads back wider: .*BU \\(Users\\)`) });
});

t.test('CreateDirectoryW failing with ERROR_ACCESS_DENIED: a clear error naming the path', async (t) => {
  const dir = tmpDir(t);
  const api = await realApi(windowsDouble());
  const denied = windowsDouble({
    win32Security: async () => ({ ...api, createDir: (p: string) => { throw new Win32Error(`CreateDirectoryW(${p})`, 5); } }),
  });
  const target = path.join(dir, 'ProgramData', 'blockspeaker');
  await t.rejects(denied.platform.prepareDir(target), {
    name: 'DirAclError',
    reason: 'create',
    message: `cannot create ${path.join(dir, 'ProgramData')} with the DACL ${ADMIN_ONLY_DIR_SDDL} (SYSTEM and Administrators only): CreateDirectoryW(${path.join(dir, 'ProgramData')}) failed: ERROR_ACCESS_DENIED (5)`,
  });
  t.notOk(fs.existsSync(path.join(dir, 'ProgramData')), 'nothing made');
  const { openFileStore } = await import('../../src/store/file.ts');
  await t.rejects(openFileStore(target, { platform: denied.platform }), {
    name: 'StoreError',
    message: `file:${target}: cannot create ${path.join(dir, 'ProgramData')} with the DACL ${ADMIN_ONLY_DIR_SDDL} (SYSTEM and Administrators only): CreateDirectoryW(${path.join(dir, 'ProgramData')}) failed: ERROR_ACCESS_DENIED (5)`,
  });
});

t.test('made by someone else meanwhile (ERROR_ALREADY_EXISTS): checked like any existing directory', async (t) => {
  const dir = tmpDir(t);
  const target = path.join(dir, 'state');
  const base = windowsDouble();
  const api = await realApi(base);
  const racer = windowsDouble({
    win32Security: async () => ({
      ...api,
      createDir: (p: string) => {
        fs.mkdirSync(p); // another process got there first, with its parent's ACL
        base.dirSecurity.set(p, PROGRAMDATA_CHILD_SDDL);
        throw new Win32Error(`CreateDirectoryW(${p})`, 183);
      },
    }),
  });
  await t.rejects(racer.platform.prepareDir(target), { name: 'DirAclError', reason: 'acl', message: new RegExp(`^${escape(target)} lets others in: `) });
});

t.test('koffi missing: mkdir then icacls, and the message says the directory had its parent\'s ACL in between', async (t) => {
  const dir = tmpDir(t);
  const noKoffi = windowsDouble({ win32Security: async () => { throw new Error('Cannot find the native Koffi module'); } });
  const target = path.join(dir, 'ProgramData', 'blockspeaker');
  const r = await noKoffi.platform.prepareDir(target);
  t.same(noKoffi.spawned, [{ cmd: 'icacls', args: icaclsArgs(path.join(dir, 'ProgramData')) }], 'icacls on the topmost directory made (children inherit)');
  t.same(r, {
    created: path.join(dir, 'ProgramData'),
    enforced: true,
    what: `${path.join(dir, 'ProgramData')}: ACL set to SYSTEM and Administrators only by icacls after mkdir (the Win32 security calls (koffi) do not load: Cannot find the native Koffi module), so until icacls ran it had its parent's ACL; not read back`,
  });
  t.match(await noKoffi.platform.prepareDir(target), { enforced: false, what: `${target}: existing directory's ACL NOT checked (the Win32 security calls (koffi) do not load: Cannot find the native Koffi module)` });
  const icaclsFails = windowsDouble({
    win32Security: async () => { throw new Error('Cannot find the native Koffi module'); },
    spawnResult: () => ({ code: 5, stdout: '', stderr: 'Access is denied.\r\n' }),
  });
  t.match(await icaclsFails.platform.prepareDir(path.join(dir, 'other')), { enforced: false, what: /ACL NOT restricted, it inherits its parent's .*icacls failed: Access is denied\.\)$/ });
});

t.test('the config directory is checked, never created', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  t.equal(await w.platform.prepareDir(path.join(dir, 'nope'), { create: false }).then(() => 'made', (e: DirAclError) => e.reason), 'read', 'a directory that is not there cannot be read');
  t.notOk(fs.existsSync(path.join(dir, 'nope')));
  w.dirSecurity.set(dir, 'O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;AU)');
  await t.rejects(w.platform.prepareDir(dir, { create: false }), { reason: 'acl', message: /entry \(A;OICI;FA;;;AU\) grants FA to AU \(Authenticated Users\)/ });
});

t.test('the daemon refuses to start with its config in a directory Users may change, before writing anything', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const file = path.join(dir, 'node.yaml');
  fs.writeFileSync(file, `node: { name: win-acl, os: windows }\nipam:\n  store: ${path.join(dir, 'store')}\n  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]\ndataplane: { kind: none }\n`);
  w.dirSecurity.set(dir, PROGRAMDATA_CHILD_SDDL);
  const { run } = await import('../../src/cli/run.ts');
  await t.rejects(run(['-c', file, '--log-level', 'silent'], w.platform), {
    name: 'StartError',
    message: `config ${file}: ${dir} lets others in: ${dirAccessProblem(PROGRAMDATA_CHILD_SDDL)} (read back: ${PROGRAMDATA_CHILD_SDDL}); it must be usable by SYSTEM, Administrators only; refusing to use it. Fix (as Administrator): ${fixCommand(dir)}`,
  });
  t.same(fs.readdirSync(dir), ['node.yaml'], 'no store, no marker');
  t.same(w.createdDirs, []);
});

/** The double's own Win32 calls (Windows semantics over the double's files). */
async function realApi(w: ReturnType<typeof windowsDouble>): Promise<Win32SecurityApi> {
  return w.win32;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
