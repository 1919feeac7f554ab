// The Windows state and config directories' access control: the one access rule over an owner and DACL (properties
// against a plain oracle: others may never change; only the store, a secret folder, is refused for being readable),
// and what the platform does through the Windows double: every missing directory created admin-only by
// CreateDirectoryW, an existing store open to others refused with the fix, a config folder others may read accepted
// and one they may change refused, CreateDirectoryW failing, koffi missing.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { accessProblem, ADMIN_ONLY_DIR_SDDL, CHANGE_RIGHTS, DirAclError, dirAccessProblem, fixCommand, READ_RIGHTS, sddlParts } from '../../src/platform/dir-acl.ts';
import { Win32Error, type Win32SecurityApi } from '../../src/platform/pipe-acl.ts';
import { icaclsArgs, type Platform } from '../../src/platform/platform.ts';
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

/** What a config folder others may only read usually reads back: Users and Everyone read and execute (0x1200a9). */
const OTHERS_READ_DIR = 'O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;BU)(A;OICI;0x1200a9;;;WD)';

t.test('who else may read or change a directory: the store (secret) and a config folder (others may read)', async (t) => {
  t.equal(dirAccessProblem(ADMIN_ONLY_READ_BACK), undefined);
  t.equal(dirAccessProblem('O:SYD:PAI(A;OICI;FA;;;S-1-5-18)(A;OICI;0x1200a9;;;S-1-5-32-544)'), undefined, 'SIDs by number, narrower rights for admins');
  t.equal(dirAccessProblem('O:BAD:PAI(A;OICI;FA;;;SY)(D;OICI;FA;;;WD)'), undefined, 'a deny entry grants nothing');
  t.equal(
    dirAccessProblem(PROGRAMDATA_CHILD_SDDL),
    'entry (A;OICIIOID;GA;;;CO) grants GA (change and read, for what it will hold) to CO (Creator Owner), inherited from its parent; entry (A;OICIID;0x1200a9;;;BU) grants 0x1200a9 (read) to BU (Users), inherited from its parent; entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR (change) to BU (Users), inherited from its parent',
  );
  t.equal(
    dirAccessProblem(PROGRAMDATA_CHILD_SDDL, undefined, false),
    'entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR (change) to BU (Users), inherited from its parent',
    'a config folder: reading is fine, adding files (DC, LC) and writing attributes (RP, CR) is not; inherit-only entries do not apply to it',
  );
  t.equal(dirAccessProblem(OTHERS_READ_DIR, undefined, false), undefined, 'a config folder Users and Everyone may read');
  t.equal(
    dirAccessProblem(OTHERS_READ_DIR),
    'entry (A;OICI;0x1200a9;;;BU) grants 0x1200a9 (read) to BU (Users); entry (A;OICI;0x1200a9;;;WD) grants 0x1200a9 (read) to WD (Everyone)',
    'the same folder as the store',
  );
  t.equal(dirAccessProblem('O:BAD:PAI(A;OICI;FA;;;SY)(A;;0x40;;;BU)', undefined, false), 'entry (A;;0x40;;;BU) grants 0x40 (change) to BU (Users)', 'FILE_DELETE_CHILD: replace what it holds');
  t.equal(dirAccessProblem('O:BAD:PAI(A;OICI;FA;;;SY)(A;;SD;;;BU)', undefined, false), 'entry (A;;SD;;;BU) grants SD (change) to BU (Users)', 'DELETE: rename it away');
  t.equal(dirAccessProblem('O:BAD:PAI(A;OICI;FA;;;SY)(A;;0x120080;;;BU)(A;;RC;;;WD)'), undefined, 'read attributes, read control, synchronize: neither read nor change, even for the store');
  t.equal(dirAccessProblem('O:BUD:PAI(A;OICI;FA;;;SY)'), 'its owner is BU (Users) (an owner may rewrite the DACL)');
  t.equal(dirAccessProblem('O:BUD:PAI(A;OICI;FA;;;SY)', undefined, false), 'its owner is BU (Users) (an owner may rewrite the DACL)', 'an owner refuses a config folder too');
  t.equal(dirAccessProblem('O:BAD:NO_ACCESS_CONTROL', undefined, false), 'it has no DACL (everyone has full access)');
  // What wine reads back from a directory it made (from the Unix mode): SYSTEM and the user wine runs as.
  const wine = `O:${WINE_USER}D:(A;OICI;FA;;;SY)(A;OICI;FA;;;${WINE_USER})`;
  t.equal(dirAccessProblem(wine, WINE_USER), undefined, 'the daemon\'s own account is no one else');
  t.match(dirAccessProblem(wine, 'S-1-5-18'), /^its owner is S-1-5-21-0-0-0-1000 \(an owner may rewrite the DACL\); entry \(A;OICI;FA;;;S-1-5-21-0-0-0-1000\) grants FA \(change and read\)/);
  // Wine's reading of a 0777 (or 1777) folder: Everyone may add, delete and replace files.
  t.match(dirAccessProblem(`O:${WINE_USER}D:(A;OICI;FA;;;SY)(A;OICI;FA;;;${WINE_USER})(A;OICI;0x1301ff;;;WD)`, WINE_USER, false), /^entry \(A;OICI;0x1301ff;;;WD\) grants 0x1301ff \(change\) to WD \(Everyone\)$/);
});

const SIDS = ['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544', 'BU', 'WD', 'AU', 'CO', WINE_USER, 'S-1-5-21-9-9-9-1001'];
const TRUSTED_SIDS = new Set(['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544']);
/** Each right with what it lets a holder do (by the Windows documentation of the bits, not by the rule's masks). */
const RIGHT_MEANS: Record<string, { read: boolean; change: boolean }> = {
  FA: { read: true, change: true }, GA: { read: true, change: true }, '0x1301bf': { read: true, change: true },
  '0x1200a9': { read: true, change: false }, FR: { read: true, change: false }, GR: { read: true, change: false },
  FX: { read: true, change: false }, GX: { read: true, change: false }, '0x1': { read: true, change: false }, '0x20': { read: true, change: false },
  FW: { read: false, change: true }, GW: { read: false, change: true }, WD: { read: false, change: true }, WO: { read: false, change: true },
  SD: { read: false, change: true }, DCLCRPCR: { read: false, change: true }, '0x2': { read: false, change: true },
  '0x4': { read: false, change: true }, '0x40': { read: false, change: true }, '0x100': { read: false, change: true },
  RC: { read: false, change: false }, '0x100000': { read: false, change: false }, '0x80': { read: false, change: false },
};

t.test('property: a problem exactly when the owner is someone else, or an entry that applies gives someone else a change right, or (store) a read right (plain oracle)', async () => {
  const ace = fc.record({ type: fc.constantFrom('A', 'D', 'OA'), flags: fc.constantFrom('', 'OICI', 'OICIID', 'CIIO', 'OICIIOID'), rights: fc.constantFrom(...Object.keys(RIGHT_MEANS)), sid: fc.constantFrom(...SIDS) });
  fc.assert(
    fc.property(fc.option(fc.constantFrom(...SIDS), { nil: undefined }), fc.array(ace, { maxLength: 6 }), fc.option(fc.constantFrom(...SIDS), { nil: undefined }), fc.boolean(), (owner, aces, self, secret) => {
      const sddl = `${owner === undefined ? '' : `O:${owner}`}D:P${aces.map((a) => `(${a.type};${a.flags};${a.rights};;;${a.sid})`).join('')}`;
      const ok = (sid: string) => TRUSTED_SIDS.has(sid) || sid === self;
      const applies = (flags: string) => secret || !flags.includes('IO'); // inherit-only: only the store's count
      const expectProblem = (owner !== undefined && !ok(owner)) ||
        aces.some((a) => a.type !== 'D' && !ok(a.sid) && applies(a.flags) && (RIGHT_MEANS[a.rights]!.change || (secret && RIGHT_MEANS[a.rights]!.read)));
      return (dirAccessProblem(sddl, self ?? undefined, secret) !== undefined) === expectProblem;
    }),
    { numRuns: 2000 },
  );
});

t.test('property: any right that changes, given to anyone else, is refused for every file and folder; read-only rights only for secrets and the store', async () => {
  const mask = fc.integer({ min: 0, max: 0xffffffff });
  const other = fc.constantFrom('BU', 'WD', 'AU', 'IU', 'S-1-5-21-9-9-9-1001');
  const subject = fc.record({ secret: fc.boolean(), folder: fc.boolean() });
  fc.assert(
    fc.property(mask, other, subject, fc.constantFrom('', 'ID'), (m, sid, subj, flags) => {
      const sddl = `O:BAD:P(A;;FA;;;SY)(A;${flags};0x${m.toString(16)};;;${sid})`;
      const problem = accessProblem(sddl, undefined, subj);
      if (m & CHANGE_RIGHTS) return problem !== undefined && problem.includes(`(change`);
      if (m & READ_RIGHTS) return subj.secret ? problem !== undefined && problem.includes('(read') : problem === undefined;
      return problem === undefined;
    }),
    { numRuns: 3000 },
  );
  // The same grants to SYSTEM, Administrators or the daemon's own account: never a problem.
  fc.assert(
    fc.property(mask, fc.constantFrom('SY', 'BA', 'S-1-5-18', 'S-1-5-32-544', WINE_USER), subject, (m, sid, subj) =>
      accessProblem(`O:BAD:P(A;OICI;0x${m.toString(16)};;;${sid})`, WINE_USER, subj) === undefined),
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
    what: `${path.join(dir, 'ProgramData')}: created with the DACL ${ADMIN_ONLY_DIR_SDDL} in one call (CreateDirectoryW), ${target} reads back O:SYD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA) (read and change: SYSTEM, Administrators only)`,
  });
  t.equal(w.spawned.length, 0, 'icacls is not run');
  t.ok(fs.statSync(target).isDirectory());
});

t.test('an existing store directory Users may read or change refuses, naming the path, the entries and the fix; nothing is changed', async (t) => {
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
    message: `${state} lets others read or change it: ${dirAccessProblem(PROGRAMDATA_CHILD_SDDL)} (read back: ${PROGRAMDATA_CHILD_SDDL}); it must be readable and changeable by SYSTEM, Administrators only; refusing to use it. Fix (as Administrator): ${fixCommand(state)}`,
  });
  t.equal(w.dirSecurity.get(state), PROGRAMDATA_CHILD_SDDL, 'the ACL is left as it was');
  t.equal(w.spawned.length, 0);

  // Through the store: a StoreError naming the store, and no LOCK or log written.
  const { openFileStore } = await import('../../src/store/file.ts');
  await t.rejects(openFileStore(state, { platform: w.platform }), { name: 'StoreError', message: `file:${state}: ${(existing as Error).message}` });
  t.same(fs.readdirSync(state), ['store'], 'nothing written into it (store/ is the directory made above)');

  // Others may only read it: still refused for a store (it holds the IPAM state), with the entry named.
  w.dirSecurity.set(state, OTHERS_READ_DIR);
  await t.rejects(openFileStore(state, { platform: w.platform }), {
    name: 'StoreError',
    message: `file:${state}: ${state} lets others read or change it: entry (A;OICI;0x1200a9;;;BU) grants 0x1200a9 (read) to BU (Users); entry (A;OICI;0x1200a9;;;WD) grants 0x1200a9 (read) to WD (Everyone) (read back: ${OTHERS_READ_DIR}); it must be readable and changeable by SYSTEM, Administrators only; refusing to use it. Fix (as Administrator): ${fixCommand(state)}`,
  });
  // A folder others may read that the caller says is not secret (a run dir): accepted.
  t.match(await w.platform.prepareDir(state, { othersMayRead: true }), { enforced: true, what: `${state}: existing directory checked, ${OTHERS_READ_DIR} read back (change: SYSTEM, Administrators only; others may read)` });
});

t.test('a directory of ours that reads back wider (the OS did not keep the descriptor) is refused too', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const api = await realApi(w);
  const wider: Win32SecurityApi = { ...api, readDirSecurity: () => PROGRAMDATA_CHILD_SDDL };
  const v = windowsDouble({ win32Security: async () => wider });
  const target = path.join(dir, 'state');
  await t.rejects(v.platform.prepareDir(target), { name: 'DirAclError', reason: 'acl', message: new RegExp(`^${escape(target)} was created with the DACL .* but reads back wider: it lets others read or change it: .*BU \\(Users\\)`) });
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
  await t.rejects(racer.platform.prepareDir(target), { name: 'DirAclError', reason: 'acl', message: new RegExp(`^${escape(target)} lets others read or change it: `) });
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

t.test('the config directory is checked, never created: others may read it, not change it', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  t.equal(await w.platform.prepareDir(path.join(dir, 'nope'), { create: false }).then(() => 'made', (e: DirAclError) => e.reason), 'read', 'a directory that is not there cannot be read');
  t.notOk(fs.existsSync(path.join(dir, 'nope')));
  w.dirSecurity.set(dir, OTHERS_READ_DIR);
  t.same(await w.platform.prepareDir(dir, { create: false }), { enforced: true, what: `${dir}: existing directory checked, ${OTHERS_READ_DIR} read back (change: SYSTEM, Administrators only; others may read)` });
  w.dirSecurity.set(dir, 'O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;AU)');
  await t.rejects(w.platform.prepareDir(dir, { create: false }), {
    reason: 'acl',
    message: `${dir} lets others change it: entry (A;OICI;FA;;;AU) grants FA (change) to AU (Authenticated Users) (read back: O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;AU)); it must be changeable by SYSTEM, Administrators only (others may read it); refusing to use it. Fix (as Administrator): ${fixCommand(dir)}`,
  });
  t.equal(w.createdDirs.length, 0);
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
    message: `config ${file}: ${dir} lets others change it: entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR (change) to BU (Users), inherited from its parent (read back: ${PROGRAMDATA_CHILD_SDDL}); it must be changeable by SYSTEM, Administrators only (others may read it); refusing to use it. Fix (as Administrator): ${fixCommand(dir)}`,
  });
  t.same(fs.readdirSync(dir), ['node.yaml'], 'no store, no marker');
  t.same(w.createdDirs, []);
});

t.test('a config in a folder others may only read gets past the config checks (run then stops at its run dir)', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const file = path.join(dir, 'node.yaml');
  fs.writeFileSync(file, `node: { name: win-acl, os: windows }\nipam:\n  store: ${path.join(dir, 'store')}\n  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]\ndataplane: { kind: none }\n`);
  w.dirSecurity.set(dir, OTHERS_READ_DIR);
  w.dirSecurity.set(file, 'O:BAD:AI(A;ID;FA;;;SY)(A;ID;FA;;;BA)(A;ID;0x1200a9;;;BU)(A;ID;0x1200a9;;;WD)');
  const checked: string[] = [];
  const platform: Platform = { ...w.platform, prepareDir: (d, o) => w.platform.prepareDir(d, o).then((r) => (checked.push(r!.what), r)) };
  const { run } = await import('../../src/cli/run.ts');
  // A run dir under a file: the marker cannot be written, which ends the start right after the config checks.
  await t.rejects(run(['-c', file, '--log-level', 'silent', '--run-dir', path.join(file, 'run')], platform), { name: 'StartError', message: /^cannot write the running-marker / });
  t.same(checked, [`${dir}: existing directory checked, ${OTHERS_READ_DIR} read back (change: SYSTEM, Administrators only; others may read)`], 'the config folder passed');
  t.same(fs.readdirSync(dir), ['node.yaml'], 'no store');
});

/** The double's own Win32 calls (Windows semantics over the double's files). */
async function realApi(w: ReturnType<typeof windowsDouble>): Promise<Win32SecurityApi> {
  return w.win32;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
