// What the packaged daemon loads, through the Windows double: what the packaged daemon (LocalSystem) loads from beside its
// executable is checked before any of it is loaded: every file's SHA-256 against the build's record (so a changed
// koffi.node is refused before its code could run), then who may change the executable, each file and their folder,
// by the config files' rule. ./packaged-files-wine.test.ts does the same with the real blockspeaker.exe under wine.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DirAclError } from '../../src/platform/dir-acl.ts';
import { checkPackagedFiles, checkPackagedInstall, PackagedFileError, packagedManifest, sha256 } from '../../src/platform/packaged-files.ts';
import { PROGRAMDATA_CHILD_SDDL, windowsDouble } from '../platform/windows-double.ts';

/** Users may modify: an explicit entry on a file (icacls f /grant Users:M). */
const USERS_MODIFY = 'O:BAD:AI(A;;0x1301bf;;;BU)(A;ID;FA;;;SY)(A;ID;FA;;;BA)';
/** What a folder made under C:\Program Files reads back: TrustedInstaller and SYSTEM/Administrators may change it. */
const PROGRAM_FILES_CHILD = 'O:BAD:AI(A;ID;FA;;;S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464)(A;CIIOID;GA;;;S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464)(A;ID;FA;;;SY)(A;OICIIOID;GA;;;SY)(A;ID;FA;;;BA)(A;OICIIOID;GA;;;BA)(A;ID;0x1200a9;;;BU)(A;OICIIOID;GA;;;CO)(A;ID;0x1200a9;;;AC)';

/** An install folder: the exe, two addons and a proto file, and the manifest a build would record for them. */
function install(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-sec-packaged-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files: Record<string, Buffer> = {
    'koffi.node': Buffer.from('MZ koffi'.repeat(500)),
    'fs-native-extensions.node': Buffer.from('MZ fsx'.repeat(300)),
    'proto/rpc.proto': Buffer.from('syntax = "proto3";\n'),
  };
  fs.mkdirSync(path.join(dir, 'proto'));
  for (const [rel, b] of Object.entries(files)) fs.writeFileSync(path.join(dir, rel), b);
  const exe = path.join(dir, 'blockspeaker.exe');
  fs.writeFileSync(exe, 'MZ exe');
  const manifest = Object.fromEntries(Object.entries(files).map(([rel, b]) => [rel, sha256(b)]));
  return { dir, exe, manifest, files };
}

t.test('from source there is no manifest, so nothing to check', async (t) => {
  t.equal(packagedManifest(), undefined);
});

t.test('as built: every file matches, and the executable, the files and their folders are checked for who may change them', async (t) => {
  const { exe, manifest, dir } = install(t);
  const w = windowsDouble();
  const seen: string[] = [];
  const r = await checkPackagedInstall(exe, manifest, (f) => fs.readFileSync(f), (f) => (seen.push(f), w.platform.checkFile(f)));
  t.same(r.files, [exe, path.join(dir, 'fs-native-extensions.node'), path.join(dir, 'koffi.node'), path.join(dir, 'proto/rpc.proto')]);
  t.same(seen, r.files, 'each one through the platform\'s file check (the file and its folder)');
  t.equal(r.reports.length, 4);
  t.ok(r.reports.every((x) => x.enforced));
});

t.test('a changed, truncated or missing file is refused naming it, before anything is loaded or its ACL read', async (t) => {
  const { exe, manifest, dir } = install(t);
  const koffi = path.join(dir, 'koffi.node');
  let aclReads = 0;
  const check = (f: string) => (aclReads++, windowsDouble().platform.checkFile(f));
  fs.appendFileSync(koffi, 'x');
  await t.rejects(checkPackagedInstall(exe, manifest, (f) => fs.readFileSync(f), check), {
    name: 'PackagedFileError',
    file: koffi,
    message: new RegExp(`^${koffi.replace(/[.\\]/g, '\\$&')} is not the file this executable was built with \\(SHA-256 [0-9a-f]{16}…, built with [0-9a-f]{16}…\\): someone changed it; refusing to load it`),
  });
  t.equal(aclReads, 0, 'refused before the ACL check, which would load koffi');
  fs.rmSync(koffi);
  t.throws(() => checkPackagedFiles(dir, manifest, (f) => fs.readFileSync(f)), { name: 'PackagedFileError', message: /koffi\.node cannot be read \(ENOENT\): this executable was built to load it/ });
});

t.test('who may change them: a file Users may modify, or a folder Users may write, refuses naming it; TrustedInstaller passes', async (t) => {
  const { exe, manifest, dir } = install(t);
  const w = windowsDouble();
  const check = (f: string) => w.platform.checkFile(f);
  const read = (f: string) => fs.readFileSync(f);
  const fsx = path.join(dir, 'fs-native-extensions.node');
  w.dirSecurity.set(fsx, USERS_MODIFY);
  const e = await checkPackagedInstall(exe, manifest, read, check).then(() => undefined, (x) => x as DirAclError);
  t.ok(e instanceof DirAclError, 'a DirAclError');
  t.match(e?.message, fsx, 'names the file');
  t.match(e?.message, /Users/, 'and who may change it');
  w.dirSecurity.delete(fsx);
  w.dirSecurity.set(exe, USERS_MODIFY);
  await t.rejects(checkPackagedInstall(exe, manifest, read, check), { message: new RegExp(exe.replace(/[.\\]/g, '\\$&')) }, 'the executable itself');
  w.dirSecurity.delete(exe);
  w.dirSecurity.set(dir, PROGRAMDATA_CHILD_SDDL);
  await t.rejects(checkPackagedInstall(exe, manifest, read, check), { message: new RegExp(`${dir.replace(/[.\\]/g, '\\$&')}`) }, 'a folder Users may add files to (a ProgramData child)');
  w.dirSecurity.set(dir, PROGRAM_FILES_CHILD);
  const ok = await checkPackagedInstall(exe, manifest, read, check);
  t.equal(ok.files.length, 4, 'under C:\\Program Files: TrustedInstaller may change it, as it may change Windows itself; Users only read');
});

t.test('property: any change to any byte of any file is refused, naming that file', async (t) => {
  const { exe, manifest, dir, files } = install(t);
  const names = Object.keys(files);
  fc.assert(
    fc.property(fc.constantFrom(...names), fc.nat(), fc.integer({ min: 1, max: 255 }), (rel, at, xor) => {
      const bytes = Buffer.from(files[rel]!);
      bytes[at % bytes.length]! ^= xor;
      const file = path.join(dir, rel);
      const read = (f: string) => (f === file ? bytes : fs.readFileSync(f));
      try {
        checkPackagedFiles(dir, manifest, read);
        return false;
      } catch (e) {
        return e instanceof PackagedFileError && e.file === file;
      }
    }),
    { numRuns: 300 },
  );
  t.ok(checkPackagedFiles(dir, manifest, (f) => fs.readFileSync(f)).length === 3, 'and the untouched files pass');
  t.ok(fs.existsSync(exe));
});
