// The Windows daemon's config file and the secret files it names: who may change them (and read the secrets) is
// checked from the owner and DACL read back, the file's and its folder's, by the one rule of ./dir-acl.test.ts. The
// check against a plain oracle, and what `run` does through the Windows double: a config Users may modify, an etcd
// password file Everyone may read, or one in a folder Users may add files to, refuses the start with the path, the
// entries in SDDL and the one command that fixes it, before anything is written; a config Users may only read starts
// its checks cleanly.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_ONLY_FILE_SDDL, fileAccessProblem, fixFileCommand, rightsMask } from '../../src/platform/file-acl.ts';
import { Win32Error } from '../../src/platform/pipe-acl.ts';
import { secretFiles } from '../../src/config/secret-files.ts';
import { loadConfig } from '../../src/config/config.ts';
import { fixCommand } from '../../src/platform/dir-acl.ts';
import { ADMIN_ONLY_READ_BACK, PROGRAMDATA_CHILD_SDDL, windowsDouble } from './windows-double.ts';

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-fileacl-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What a file in C:\ProgramData\blockspeaker usually reads back: inherited admin-only, Users read and execute. */
const USERS_READ = 'O:BAD:AI(A;ID;FA;;;SY)(A;ID;FA;;;BA)(A;ID;0x1200a9;;;BU)';
/** After `icacls node.yaml /grant Users:M`: an explicit Modify entry for Users. */
const USERS_MODIFY = 'O:BAD:AI(A;;0x1301bf;;;BU)(A;ID;FA;;;SY)(A;ID;FA;;;BA)';

t.test('SDDL rights as masks: letters, hex, and an unknown letter counted as everything', async (t) => {
  t.equal(rightsMask('FA'), 0x1f01ff);
  t.equal(rightsMask('0x1200a9'), 0x1200a9);
  t.equal(rightsMask('CCDCLC'), 0x7);
  t.equal(rightsMask('GR'), 0x80000000);
  t.equal(rightsMask('ZZ'), 0xffffffff);
});

t.test('who may change (or read) a file', async (t) => {
  t.equal(fileAccessProblem(ADMIN_ONLY_READ_BACK, undefined, true), undefined, 'admin-only');
  t.equal(fileAccessProblem(USERS_READ, undefined, false), undefined, 'Users may read a config: it holds no secret');
  t.equal(fileAccessProblem(USERS_READ, undefined, true), 'entry (A;ID;0x1200a9;;;BU) grants 0x1200a9 (read) to BU (Users), inherited from its folder');
  t.equal(fileAccessProblem(USERS_MODIFY, undefined, false), 'entry (A;;0x1301bf;;;BU) grants 0x1301bf (change) to BU (Users)');
  t.equal(fileAccessProblem(USERS_MODIFY, undefined, true), 'entry (A;;0x1301bf;;;BU) grants 0x1301bf (change and read) to BU (Users)');
  t.equal(fileAccessProblem('O:BAD:(A;;FA;;;SY)(A;;WD;;;AU)', undefined, false), 'entry (A;;WD;;;AU) grants WD (change) to AU (Authenticated Users)', 'WRITE_DAC is change: it can grant the rest');
  t.equal(fileAccessProblem('O:BAD:(A;;FA;;;SY)(A;;SD;;;AU)', undefined, false), 'entry (A;;SD;;;AU) grants SD (change) to AU (Authenticated Users)', 'DELETE is change: the name can then be taken');
  t.equal(fileAccessProblem('O:BAD:(A;;FA;;;SY)(A;;0x100;;;AU)', undefined, false), 'entry (A;;0x100;;;AU) grants 0x100 (change) to AU (Authenticated Users)', 'FILE_WRITE_ATTRIBUTES is change');
  t.equal(fileAccessProblem('O:BAD:(A;;FA;;;SY)(A;;FX;;;AU)', undefined, true), 'entry (A;;FX;;;AU) grants FX (read) to AU (Authenticated Users)', 'FILE_EXECUTE on a secret counts as reading it');
  t.equal(fileAccessProblem('O:BAD:(A;;FA;;;SY)(A;IO;GA;;;CO)(D;;FA;;;WD)', undefined, true), undefined, 'inherit-only entries do not apply to a file; deny entries grant nothing');
  t.equal(fileAccessProblem('O:BUD:P(A;;FA;;;SY)', undefined, false), 'its owner is BU (Users) (an owner may rewrite the DACL)');
  t.equal(fileAccessProblem('O:BAD:NO_ACCESS_CONTROL', undefined, false), 'it has no DACL (everyone has full access)');
  const me = 'S-1-5-21-0-0-0-1000';
  t.equal(fileAccessProblem(`O:${me}D:(A;;FA;;;SY)(A;;FA;;;${me})`, me, true), undefined, 'the daemon\'s own account is no one else');
});

t.test('property: a problem exactly when the owner is someone else, or an entry that applies gives someone else write (or read, for a secret)', async () => {
  const sids = ['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544', 'BU', 'WD', 'AU', 'CO', 'S-1-5-21-9-9-9-1001'];
  const trusted = new Set(['SY', 'S-1-5-18', 'BA', 'S-1-5-32-544']);
  // Each right with what it lets a holder do to the file (by the Windows documentation of the bits, not the masks).
  const rights: Record<string, { read: boolean; write: boolean }> = {
    FA: { read: true, write: true }, GA: { read: true, write: true }, FR: { read: true, write: false }, GR: { read: true, write: false },
    '0x1200a9': { read: true, write: false }, '0x1301bf': { read: true, write: true }, FW: { read: false, write: true },
    GW: { read: false, write: true }, WD: { read: false, write: true }, WO: { read: false, write: true }, RC: { read: false, write: false },
    SD: { read: false, write: true }, FX: { read: true, write: false }, '0x100': { read: false, write: true }, '0x80': { read: false, write: false },
    '0x100000': { read: false, write: false },
  };
  const ace = fc.record({ type: fc.constantFrom('A', 'D'), flags: fc.constantFrom('', 'ID', 'IO', 'OICIIOID'), rights: fc.constantFrom(...Object.keys(rights)), sid: fc.constantFrom(...sids) });
  fc.assert(
    fc.property(fc.option(fc.constantFrom(...sids), { nil: undefined }), fc.array(ace, { maxLength: 6 }), fc.boolean(), (owner, aces, secret) => {
      const sddl = `${owner === undefined ? '' : `O:${owner}`}D:P${aces.map((a) => `(${a.type};${a.flags};${a.rights};;;${a.sid})`).join('')}`;
      const others = (sid: string) => !trusted.has(sid);
      const expectProblem = (owner !== undefined && others(owner)) ||
        aces.some((a) => a.type === 'A' && !a.flags.includes('IO') && others(a.sid) && (rights[a.rights]!.write || (secret && rights[a.rights]!.read)));
      return (fileAccessProblem(sddl, undefined, secret) !== undefined) === expectProblem;
    }),
    { numRuns: 2000 },
  );
});

t.test('the fix is one PowerShell command that sets an admin-only owner and DACL on the file', async (t) => {
  t.equal(
    fixFileCommand("C:\\Program Data\\o'brien.yaml"),
    `powershell -NoProfile -Command "$a = Get-Acl -LiteralPath 'C:\\Program Data\\o''brien.yaml'; $a.SetSecurityDescriptorSddlForm('${ADMIN_ONLY_FILE_SDDL}'); Set-Acl -LiteralPath 'C:\\Program Data\\o''brien.yaml' -AclObject $a"`,
  );
  t.equal(fileAccessProblem(ADMIN_ONLY_FILE_SDDL, undefined, true), undefined, 'what it sets passes the check');
});

t.test('the secret files a config names, by field', async (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'node.yaml');
  fs.writeFileSync(file, `node: { name: n1, os: linux }
ipam:
  store: etcds://127.0.0.1:2379
  etcd: { ca: /e/ca.pem, cert: /e/c.pem, key: /e/c.key, username: u, password: { file: /e/pw } }
  pools: [{ name: p, cidr: 10.244.0.0/16 }]
bgp:
  asn: 65001
  routerId: 10.0.0.1
  nodeMeshPassword: { file: /s/mesh }
  peers:
    - { address: 10.0.0.2, asn: 65002 }
    - { address: 10.0.0.3, asn: 65002, password: { file: /s/p3 } }
    - { address: 10.0.0.4, asn: 65002, password: { env: P4 } }
`);
  t.same(secretFiles(loadConfig(file)), [
    { field: 'ipam.etcd.password.file', file: '/e/pw' },
    { field: 'ipam.etcd.key', file: '/e/c.key' },
    { field: 'bgp.peers[1].password.file', file: '/s/p3' },
    { field: 'bgp.nodeMeshPassword.file', file: '/s/mesh' },
  ], 'files only: an environment variable is not a file');
});

/** A Windows node's config in `dir` on an etcd store whose password is in `pw` (never reached: refused first). */
function windowsConfig(dir: string, pw?: string): string {
  const file = path.join(dir, 'node.yaml');
  const etcd = pw ? `\n  etcd: { username: bs, password: { file: ${pw} }, allowInsecure: true }` : '';
  fs.writeFileSync(file, `node: { name: win-fileacl, os: windows }
ipam:
  store: ${pw ? 'etcd://127.0.0.1:1' : path.join(dir, 'store')}${etcd}
  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
`);
  return file;
}

t.test('run refuses a config file Users may modify, naming it, the entry and the fix, before writing anything', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const file = windowsConfig(dir);
  w.dirSecurity.set(file, USERS_MODIFY);
  const { run } = await import('../../src/cli/run.ts');
  await t.rejects(run(['-c', file, '--log-level', 'silent'], w.platform), {
    name: 'StartError',
    message: `config ${file}: ${file} lets others change it: entry (A;;0x1301bf;;;BU) grants 0x1301bf (change) to BU (Users) (read back: ${USERS_MODIFY}); it must be changeable by SYSTEM, Administrators only (others may read it); refusing to use it. Fix (as Administrator): ${fixFileCommand(file)}`,
  });
  t.same(fs.readdirSync(dir), ['node.yaml'], 'no store, no marker');
  t.same(w.createdDirs, []);
  t.equal(w.dirSecurity.get(file), USERS_MODIFY, 'the ACL is left as it was');
});

t.test('run refuses an etcd password file Users may read, naming the field; the config itself may be read', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const pw = path.join(dir, 'etcd-password');
  fs.writeFileSync(pw, 'secret\n');
  const file = windowsConfig(dir, pw);
  w.dirSecurity.set(file, USERS_READ);
  w.dirSecurity.set(pw, USERS_READ);
  const { run } = await import('../../src/cli/run.ts');
  const err = await run(['-c', file, '--log-level', 'silent'], w.platform).then(() => undefined, (e: Error) => e);
  t.match(err, {
    name: 'StartError',
    message: `config ${file}: ${pw} (ipam.etcd.password.file) holds a secret and lets others read or change it: entry (A;ID;0x1200a9;;;BU) grants 0x1200a9 (read) to BU (Users), inherited from its folder (read back: ${USERS_READ}); it must be readable and changeable by SYSTEM, Administrators only; refusing to use it. Fix (as Administrator): ${fixFileCommand(pw)}`,
  });
  t.notMatch(err?.message ?? '', /secret\n/, 'the password is not in the message');
  t.same(fs.readdirSync(dir).sort(), ['etcd-password', 'node.yaml']);
});

t.test('run refuses a password file, itself admin-only, in a folder Users may add files to, naming the folder', async (t) => {
  const dir = tmpDir(t);
  const w = windowsDouble();
  const secrets = path.join(dir, 'secrets');
  fs.mkdirSync(secrets);
  const pw = path.join(secrets, 'etcd-password');
  fs.writeFileSync(pw, 'secret\n');
  const file = windowsConfig(dir, pw);
  w.dirSecurity.set(secrets, PROGRAMDATA_CHILD_SDDL);
  const { run } = await import('../../src/cli/run.ts');
  await t.rejects(run(['-c', file, '--log-level', 'silent'], w.platform), {
    name: 'StartError',
    message: `config ${file}: ${pw} is in a folder others may change: ${secrets} lets others change it: entry (A;CIID;DCLCRPCR;;;BU) grants DCLCRPCR (change) to BU (Users), inherited from its parent (read back: ${PROGRAMDATA_CHILD_SDDL}); it must be changeable by SYSTEM, Administrators only (others may read it); refusing to use it. Fix (as Administrator): ${fixCommand(secrets)}`,
  });
  // Users may read the folder (not the file): that passes.
  w.dirSecurity.set(secrets, 'O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;CI;0x1200a9;;;BU)');
  t.match(await w.platform.checkFile(pw, { secret: 'ipam.etcd.password.file' }), { enforced: true, what: /its folder .* reads back .*\(change: SYSTEM, Administrators only; others may read\)$/ });
  t.same(fs.readdirSync(dir).sort(), ['node.yaml', 'secrets']);
});

t.test('the platform\'s file check: admin-only passes and says what it read, koffi missing warns, unreadable refuses', async (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'node.yaml');
  fs.writeFileSync(file, 'x');
  const w = windowsDouble();
  t.same(await w.platform.checkFile(file), {
    enforced: true,
    what: `${file}: existing file checked, ${ADMIN_ONLY_READ_BACK} read back (change: SYSTEM, Administrators only; others may read); its folder ${dir} reads back ${ADMIN_ONLY_READ_BACK} (change: SYSTEM, Administrators only; others may read)`,
  });
  w.dirSecurity.set(file, USERS_READ);
  t.match(await w.platform.checkFile(file), { enforced: true }, 'Users may read a file without secrets');
  await t.rejects(w.platform.checkFile(file, { secret: 'ipam.etcd.key' }), { name: 'DirAclError', reason: 'acl', message: /^\S+ \(ipam\.etcd\.key\) holds a secret/ });
  const noKoffi = windowsDouble({ win32Security: async () => { throw new Error('Cannot find module koffi'); } });
  t.same(await noKoffi.platform.checkFile(file), { enforced: false, what: `${file}: file's ACL NOT checked (the Win32 security calls (koffi) do not load: Cannot find module koffi)` });
  const denied = windowsDouble({ win32Security: async () => ({ ...w.win32, readDirSecurity: (p: string) => { throw new Win32Error(`GetNamedSecurityInfoW(${p})`, 5); } }) });
  await t.rejects(denied.platform.checkFile(file), { name: 'DirAclError', reason: 'read', message: new RegExp(`^cannot read the ACL of ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} to check who else may use it: .*; refusing to use it$`) });
});
