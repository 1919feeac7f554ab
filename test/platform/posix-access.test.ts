// The one access rule on Linux (src/platform/posix-access.ts): modes and owners against a plain oracle (fast-check),
// the fix commands shown to fix what they are printed for, and real files and folders in a temporary directory with
// chmod and chown (the tests run as root; another owner is uid 65534): the config file and every folder above it
// (others may read, not change; a sticky root-owned folder like /tmp is fine), a secret file (nobody else may read
// it), the store (made 0700, its missing parents 0755; an existing one others may read is refused, and so is anything
// in it others may read: sub-folders, links where they lead, many at once), symbolic links followed, and
// `blockspeaker run` refusing before anything is written.
import t from 'tap';
import fc from 'fast-check';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checkPosixFile, modeText, onReadOnlyMount, posixProblem, realPosixOps, securePosixDir, shellQuote, type PosixStat } from '../../src/platform/posix-access.ts';
import { linuxPlatform } from '../../src/platform/platform.ts';

const ROOT = process.geteuid?.() === 0;
const NOBODY = 65534;
const DIR = 0o040000;
const FILE = 0o100000;

function tmpDir(t: { teardown(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bs-posix-${process.pid}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function rejection(p: Promise<unknown>): Promise<{ name?: string; reason?: string; message: string }> {
  return p.then(() => ({ message: 'resolved' }), (e: { name?: string; reason?: string; message: string }) => e);
}

/** The folders above `p`, with their modes and owners as the report gives them. */
function above(p: string): string {
  const out: string[] = [];
  for (let d = path.dirname(p); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    out.push(`${d} ${modeText(st.mode)} uid ${st.uid}`);
    if (path.dirname(d) === d) break;
  }
  return out.join(', ');
}

t.test('modes in words', async (t) => {
  t.equal(modeText(DIR | 0o1777), '1777 (drwxrwxrwt)');
  t.equal(modeText(DIR | 0o1770), '1770 (drwxrwx--T)');
  t.equal(modeText(FILE | 0o644), '0644 (-rw-r--r--)');
  t.equal(modeText(FILE | 0o4755), '4755 (-rwsr-xr-x)');
  t.equal(shellQuote('/etc/blockspeaker/node.yaml'), '/etc/blockspeaker/node.yaml');
  t.equal(shellQuote("/tmp/o'brien dir"), `'/tmp/o'\\''brien dir'`);
});

t.test('the rule for one path, by example', async (t) => {
  const st = (mode: number, uid = 0): PosixStat => ({ mode, uid });
  t.same(posixProblem('/c/node.yaml', st(FILE | 0o644), 0, false), { problems: [], fixes: [] }, 'a config others may read');
  t.same(posixProblem('/c/node.yaml', st(FILE | 0o664), 0, false), { problems: ['its mode 0664 (-rw-rw-r--) lets its group write'], fixes: ['chmod go-w /c/node.yaml'] });
  t.same(posixProblem('/c', st(DIR | 0o777), 0, false), { problems: ['its mode 0777 (drwxrwxrwx) lets its group and others write'], fixes: ['chmod go-w /c'] });
  t.same(posixProblem('/tmp', st(DIR | 0o1777), 0, false), { problems: [], fixes: [] }, 'sticky and owned by root: only an entry\'s owner may rename it');
  t.same(posixProblem('/tmp', st(DIR | 0o1777, NOBODY), 0, false).fixes, ['chown root /tmp', 'chmod go-w /tmp'], 'sticky but owned by someone else: they may do anything in it');
  t.same(posixProblem('/c/x', st(FILE | 0o1666), 0, false).fixes, ['chmod go-w /c/x'], 'the sticky bit means nothing on a file');
  t.same(posixProblem('/s/pw', st(FILE | 0o640), 0, true), { problems: ['its mode 0640 (-rw-r-----) gives its group r--'], fixes: ['chmod 600 /s/pw'] });
  t.same(posixProblem('/var/lib/bs', st(DIR | 0o755), 0, true), { problems: ['its mode 0755 (drwxr-xr-x) gives its group r-x and others r-x'], fixes: ['chmod 700 /var/lib/bs'] });
  t.same(posixProblem('/s/pw', st(FILE | 0o600, NOBODY), 0, true), { problems: ['its owner is uid 65534, not root (an owner may change its mode)'], fixes: ['chown root /s/pw'] });
  t.same(posixProblem('/s/pw', st(FILE | 0o600, NOBODY), 1000, true).problems, ['its owner is uid 65534, neither root nor this daemon\'s uid 1000 (an owner may change its mode)']);
  t.same(posixProblem('/s/pw', st(FILE | 0o600, 1000), 1000, true), { problems: [], fixes: [] }, 'the daemon\'s own uid is no one else');
  t.same(posixProblem('/s/pw', st(FILE | 0o600, 1000), 1000, true), posixProblem('/s/pw', st(FILE | 0o600, 0), 1000, true), 'nor is root');
});

t.test('property: the rule against a plain oracle, and every fix printed fixes what it is printed for', async () => {
  const self = fc.constantFrom(0, 1000);
  const uid = fc.constantFrom(0, 1000, NOBODY);
  const mode = fc.tuple(fc.constantFrom(DIR, FILE), fc.integer({ min: 0, max: 0o7777 })).map(([type, bits]) => type | bits);
  fc.assert(
    fc.property(mode, uid, self, fc.boolean(), (m, u, me, secret) => {
      const ours = u === 0 || u === me;
      const groupOrOther = (bits: number) => ((m >> 3) & bits) !== 0 || (m & bits) !== 0;
      const sticky = (m & 0o170000) === DIR && (m & 0o1000) !== 0;
      const expected = !ours || (secret ? groupOrOther(0o7) : groupOrOther(0o2) && !(sticky && ours));
      const got = posixProblem('/p', { mode: m, uid: u }, me, secret);
      if ((got.problems.length > 0) !== expected) return false;
      // Apply the printed commands to the mode and owner: nothing is left to complain about.
      let fixed: PosixStat = { mode: m, uid: u };
      for (const fix of got.fixes) {
        const [cmd, arg] = fix.split(' ');
        if (cmd === 'chown') fixed = { ...fixed, uid: arg === 'root' ? 0 : Number(arg) };
        else if (arg === 'go-w') fixed = { ...fixed, mode: fixed.mode & ~0o022 };
        else fixed = { ...fixed, mode: (fixed.mode & ~0o7777) | Number.parseInt(arg!, 8) };
      }
      return posixProblem('/p', fixed, me, secret).problems.length === 0;
    }),
    { numRuns: 5000 },
  );
});

t.test('a config file and the folders above it: others may read, not change', async (t) => {
  const dir = tmpDir(t);
  const cfgDir = path.join(dir, 'etc');
  fs.mkdirSync(cfgDir, { mode: 0o755 });
  fs.chmodSync(cfgDir, 0o755);
  const file = path.join(cfgDir, 'node.yaml');
  fs.writeFileSync(file, 'x');
  fs.chmodSync(file, 0o644);
  const self = process.geteuid?.() ?? 0;
  const whom = `root${self ? ` and this daemon's uid ${self}` : ''} only`;
  t.same(await checkPosixFile(file), {
    enforced: true,
    what: `${file}: existing file checked, 0644 (-rw-r--r--) uid ${self} (change: ${whom}; others may read); folders above it: ${above(file)} (change: ${whom})`,
  });
  t.match(above(file), / \/tmp 1777 \(drwxrwxrwt\) uid 0, \/ /, 'the sticky /tmp is on the way and passes');

  fs.chmodSync(file, 0o666);
  t.same(await rejection(checkPosixFile(file)), {
    name: 'DirAclError',
    reason: 'acl',
    message: `${file} lets others change it: its mode 0666 (-rw-rw-rw-) lets its group and others write; it must be changeable by ${whom} (others may read it); refusing to use it. Fix (as root): chmod go-w ${file}`,
  });
  fs.chmodSync(file, 0o644);

  fs.chmodSync(cfgDir, 0o775);
  const err = await rejection(checkPosixFile(file));
  t.equal(err.message, `${cfgDir}, a folder above ${file}, lets others change it (and so replace what it holds): its mode 0775 (drwxrwxr-x) lets its group write; it must be changeable by ${whom} (others may read it); refusing to use it. Fix (as root): chmod go-w ${cfgDir}`);
  // The config's folder through prepareDir (what run checks first): the same rule, the folder named as itself.
  t.same(await rejection(linuxPlatform().prepareDir(cfgDir, { create: false })), {
    name: 'DirAclError',
    reason: 'acl',
    message: `${cfgDir} lets others change it: its mode 0775 (drwxrwxr-x) lets its group write; it must be changeable by ${whom} (others may read it); refusing to use it. Fix (as root): chmod go-w ${cfgDir}`,
  });
  fs.chmodSync(cfgDir, 0o755);
  t.match(await linuxPlatform().prepareDir(cfgDir, { create: false }), { enforced: true, what: `${cfgDir}: existing directory checked, ${cfgDir} reads back 0755 (drwxr-xr-x) uid ${self} (change: ${whom}; others may read); folders above it: ${above(cfgDir)} (change: ${whom})` });
  t.notOk(fs.existsSync(path.join(dir, 'nope')));
  t.match(await rejection(linuxPlatform().prepareDir(path.join(dir, 'nope'), { create: false })), { reason: 'read', message: /^cannot read the owner and mode of .*nope to check who else may use it: ENOENT/ });
  t.notOk(fs.existsSync(path.join(dir, 'nope')), 'a folder only checked is never made');
});

t.test('owners other than root and the daemon\'s uid, and sticky folders', { skip: !ROOT && 'chown needs root' }, async (t) => {
  const dir = tmpDir(t);
  const cfgDir = path.join(dir, 'etc');
  fs.mkdirSync(cfgDir, { mode: 0o755 });
  const file = path.join(cfgDir, 'node.yaml');
  fs.writeFileSync(file, 'x', { mode: 0o644 });

  fs.chownSync(file, NOBODY, NOBODY);
  t.equal((await rejection(checkPosixFile(file))).message, `${file} lets others change it: its owner is uid ${NOBODY}, not root (an owner may change its mode); it must be changeable by root only (others may read it); refusing to use it. Fix (as root): chown root ${file}`);
  const asDaemon = { ...realPosixOps, uid: () => NOBODY };
  t.match(await checkPosixFile(file, {}, asDaemon), { enforced: true }, 'a daemon running as that uid may use its own file');
  fs.chownSync(file, 0, 0);

  fs.chownSync(cfgDir, NOBODY, NOBODY);
  t.match((await rejection(checkPosixFile(file))).message, new RegExp(`^${cfgDir}, a folder above ${file}, lets others change it \\(and so replace what it holds\\): its owner is uid ${NOBODY}, not root .* Fix \\(as root\\): chown root ${cfgDir}$`));
  fs.chownSync(cfgDir, 0, 0);

  // Several problems at once: every path named, one command line fixing them all.
  fs.chmodSync(cfgDir, 0o777);
  fs.chmodSync(file, 0o646);
  fs.chownSync(file, NOBODY, NOBODY);
  const all = (await rejection(checkPosixFile(file))).message;
  t.match(all, new RegExp(`^${file} lets others change it: its owner is uid ${NOBODY}, not root \\(an owner may change its mode\\); its mode 0646 \\(-rw-r--rw-\\) lets others write; .*; ${cfgDir}, a folder above ${file}, lets others change it`));
  t.match(all, new RegExp(`Fix \\(as root\\): chown root ${file} && chmod go-w ${file} && chmod go-w ${cfgDir}$`));
  fs.chownSync(file, 0, 0);
  fs.chmodSync(file, 0o644);

  // A sticky folder everyone may write (like /tmp): fine while it and the file are root's; not once the file is not.
  fs.chmodSync(cfgDir, 0o1777);
  t.match(await checkPosixFile(file), { enforced: true });
  fs.chownSync(file, NOBODY, NOBODY);
  t.match((await rejection(checkPosixFile(file))).message, new RegExp(`^${file} lets others change it: its owner is uid ${NOBODY}`));
  fs.chownSync(file, 0, 0);
  fs.chownSync(cfgDir, NOBODY, NOBODY);
  t.match((await rejection(checkPosixFile(file))).message, /lets others change it \(and so replace what it holds\): its owner is uid 65534, not root .*; its mode 1777 \(drwxrwxrwt\) lets its group and others write/, 'a sticky folder someone else owns is theirs');
});

t.test('a secret file: nobody else may read it; its folders may be read', async (t) => {
  const dir = tmpDir(t);
  const secrets = path.join(dir, 'pki');
  fs.mkdirSync(secrets, { mode: 0o755 });
  fs.chmodSync(secrets, 0o755);
  const pw = path.join(secrets, 'etcd-password');
  fs.writeFileSync(pw, 'not-this-one\n');
  fs.chmodSync(pw, 0o644);
  const self = process.geteuid?.() ?? 0;
  const whom = `root${self ? ` and this daemon's uid ${self}` : ''} only`;
  const err = await rejection(checkPosixFile(pw, { secret: 'ipam.etcd.password.file' }));
  t.same(err, {
    name: 'DirAclError',
    reason: 'acl',
    message: `${pw} (ipam.etcd.password.file) holds a secret and lets others read or change it: its mode 0644 (-rw-r--r--) gives its group r-- and others r--; it must be readable and changeable by ${whom}; refusing to use it. Fix (as root): chmod 600 ${pw}`,
  });
  t.notMatch(err.message, /not-this-one/, 'the secret is in no message');
  fs.chmodSync(pw, 0o600);
  t.same(await checkPosixFile(pw, { secret: 'ipam.etcd.password.file' }), {
    enforced: true,
    what: `${pw}: existing file checked, 0600 (-rw-------) uid ${self} (read and change: ${whom}); folders above it: ${above(pw)} (change: ${whom})`,
  });
  fs.chmodSync(secrets, 0o757);
  t.match((await rejection(checkPosixFile(pw, { secret: 'bgp.nodeMeshPassword.file' }))).message, new RegExp(`^${secrets}, a folder above ${pw}, lets others change it .*Fix \\(as root\\): chmod go-w ${secrets}$`));
});

t.test('a symbolic link: the folders of the path as given and of where it leads are checked', async (t) => {
  const dir = tmpDir(t);
  const real = path.join(dir, 'real');
  fs.mkdirSync(real, { mode: 0o755 });
  fs.chmodSync(real, 0o777);
  fs.writeFileSync(path.join(real, 'node.yaml'), 'x', { mode: 0o644 });
  const linkDir = path.join(dir, 'etc');
  fs.mkdirSync(linkDir, { mode: 0o755 });
  fs.chmodSync(linkDir, 0o755);
  const link = path.join(linkDir, 'node.yaml');
  fs.symlinkSync(path.join(real, 'node.yaml'), link);
  t.match((await rejection(checkPosixFile(link))).message, new RegExp(`^${real}, a folder above ${link}, lets others change it .*chmod go-w ${real}$`), 'where the link leads is refused');
  fs.chmodSync(real, 0o755);
  fs.chmodSync(linkDir, 0o777);
  t.match((await rejection(checkPosixFile(link))).message, new RegExp(`^${linkDir}, a folder above ${link}, lets others change it`), 'the folder holding the link is refused: others could point it elsewhere');
  fs.chmodSync(linkDir, 0o755);
  const ok = await checkPosixFile(link);
  t.match(ok.what, `${real} 0755`, 'both folders are in the report');
  t.match(ok.what, `${linkDir} 0755`);
});

t.test('the store: made 0700 with missing parents 0755; an existing one others may read or change is refused', async (t) => {
  const dir = tmpDir(t);
  const old = process.umask(0o022);
  t.teardown(() => void process.umask(old));
  const linux = linuxPlatform();
  const store = path.join(dir, 'var', 'lib', 'blockspeaker');
  const self = process.geteuid?.() ?? 0;
  const whom = `root${self ? ` and this daemon's uid ${self}` : ''} only`;
  const r = await linux.prepareDir(store);
  t.same(r, {
    created: path.join(dir, 'var'),
    enforced: true,
    what: `${path.join(dir, 'var')}: created by mkdir with mode 0755, ${store} 0700; ${store} reads back 0700 (drwx------) uid ${self} (read and change: ${whom}); folders above it: ${above(store)} (change: ${whom})`,
  });
  t.equal(fs.statSync(store).mode & 0o7777, 0o700);
  t.equal(fs.statSync(path.join(dir, 'var')).mode & 0o7777, 0o755);
  t.equal(fs.statSync(path.join(dir, 'var', 'lib')).mode & 0o7777, 0o755);
  t.match(await linux.prepareDir(store), { created: undefined, enforced: true, what: `${store}: existing directory checked, ${store} reads back 0700 (drwx------) uid ${self} (read and change: ${whom}); folders above it: ` });

  // Made by a runtime with its defaults (kubelet's DirectoryOrCreate, systemd's StateDirectory=): 0755.
  fs.chmodSync(store, 0o755);
  t.same(await rejection(linux.prepareDir(store)), {
    name: 'DirAclError',
    reason: 'acl',
    message: `${store} lets others read or change it: its mode 0755 (drwxr-xr-x) gives its group r-x and others r-x; it must be readable and changeable by ${whom}; refusing to use it. Fix (as root): chmod 700 ${store}`,
  });
  const { openFileStore } = await import('../../src/store/file.ts');
  await t.rejects(openFileStore(store, { platform: linux }), { name: 'StoreError', message: `file:${store}: ${store} lets others read or change it: its mode 0755 (drwxr-xr-x) gives its group r-x and others r-x; it must be readable and changeable by ${whom}; refusing to use it. Fix (as root): chmod 700 ${store}` });
  t.same(fs.readdirSync(store), [], 'nothing written into it');
  t.equal(fs.statSync(store).mode & 0o7777, 0o755, 'its mode is left as it was');
  fs.chmodSync(store, 0o700);

  // A folder above it others may write: they could rename the store away and put their own in its place.
  fs.chmodSync(path.join(dir, 'var', 'lib'), 0o777);
  t.match((await rejection(linux.prepareDir(store))).message, new RegExp(`^${path.join(dir, 'var', 'lib')}, a folder above ${store}, lets others change it`));
  fs.chmodSync(path.join(dir, 'var', 'lib'), 0o755);

  // A folder others may read (the caller says so: a run dir): made 0755, and an existing 0755 one passes.
  const runDir = path.join(dir, 'run', 'blockspeaker');
  t.match(await linux.prepareDir(runDir, { othersMayRead: true }), { created: path.join(dir, 'run'), what: /created by mkdir with mode 0755; .* \(change: .*; others may read\)/ });
  t.equal(fs.statSync(runDir).mode & 0o7777, 0o755);
  fs.chmodSync(runDir, 0o775);
  t.match((await rejection(linux.prepareDir(runDir, { othersMayRead: true }))).message, /lets others change it: its mode 0775 \(drwxrwxr-x\) lets its group write/);
});

t.test('what the store holds: every file and sub-folder by the secret rule, links where they lead, one fix for all', async (t) => {
  const dir = tmpDir(t);
  const linux = linuxPlatform();
  const store = path.join(dir, 'store');
  await linux.prepareDir(store);
  const self = process.geteuid?.() ?? 0;
  const whom = `root${self ? ` and this daemon's uid ${self}` : ''} only`;
  fs.writeFileSync(path.join(store, 'LOCK'), '', { mode: 0o600 });
  fs.mkdirSync(path.join(store, 'sub'), { mode: 0o700 });
  fs.writeFileSync(path.join(store, 'sub', 'x'), 'x', { mode: 0o600 });
  t.match(await linux.prepareDir(store), { created: undefined, what: new RegExp(`; what it holds \\(read and change: ${whom}\\): LOCK 0600 \\(-rw-------\\) uid ${self}, sub 0700 \\(drwx------\\) uid ${self}, sub/x 0600 \\(-rw-------\\) uid ${self}$`) });

  fs.chmodSync(path.join(store, 'sub', 'x'), 0o640);
  fs.chmodSync(path.join(store, 'sub'), 0o750);
  t.same(await rejection(linux.prepareDir(store)), {
    name: 'DirAclError',
    reason: 'acl',
    message: `${path.join(store, 'sub')}, in ${store}, lets others read or change it: its mode 0750 (drwxr-x---) gives its group r-x; it must be readable and changeable by ${whom}; ` +
      `${path.join(store, 'sub', 'x')}, in ${store}, lets others read or change it: its mode 0640 (-rw-r-----) gives its group r--; it must be readable and changeable by ${whom}; ` +
      `refusing to use it. Fix (as root): chmod 700 ${path.join(store, 'sub')} && chmod 600 ${path.join(store, 'sub', 'x')}`,
  }, 'a sub-folder and what it holds');
  fs.rmSync(path.join(store, 'sub'), { recursive: true });

  // A symbolic link: what it leads to may be opened at its own path, so that is what is checked; a dangling one is skipped.
  const outside = path.join(dir, 'outside');
  fs.writeFileSync(outside, 'x', { mode: 0o644 });
  fs.symlinkSync(outside, path.join(store, 'log'));
  fs.symlinkSync(path.join(dir, 'gone'), path.join(store, 'dangling'));
  t.match((await rejection(linux.prepareDir(store))).message, new RegExp(`^${path.join(store, 'log')}, in ${store}, lets others read or change it: its mode 0644 \\(-rw-r--r--\\) .*Fix \\(as root\\): chmod 600 ${path.join(store, 'log')}$`));
  fs.chmodSync(outside, 0o600);
  t.match(await linux.prepareDir(store), { what: /what it holds .*: LOCK 0600 .*, log 0600 / });

  // Many: the first ten named, one recursive command for all.
  for (let i = 0; i < 12; i++) fs.writeFileSync(path.join(store, `f${String(i).padStart(2, '0')}`), '', { mode: 0o604 });
  const many = (await rejection(linux.prepareDir(store))).message;
  t.equal(many.match(/, in /g)?.length, 10);
  t.match(many, new RegExp(`; and 2 more in ${store} like them; refusing to use it. Fix \\(as root\\): chmod -R go= ${store}$`));
});

t.test('what the store holds: an entry gone between the listing and its stat is skipped (a compaction elsewhere)', async (t) => {
  const dir = tmpDir(t);
  const store = path.join(dir, 'store');
  fs.mkdirSync(store, { mode: 0o700 });
  const ops = { ...realPosixOps, list: () => ['LOCK', 'log.1'], lstat: (p: string) => (p.endsWith('log.1') ? fs.lstatSync(path.join(dir, 'nope')) : realPosixOps.lstat(p)) };
  fs.writeFileSync(path.join(store, 'LOCK'), '', { mode: 0o600 });
  t.match(await securePosixDir(store, {}, ops), { what: /: LOCK 0600 \(-rw-------\) uid \d+$/ });
  const unreadable = { ...realPosixOps, list: () => { throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }); } };
  t.match(await rejection(securePosixDir(store, {}, unreadable)), { reason: 'read', message: `cannot list ${store} to check who else may use what it holds: EIO: i/o error; refusing to use it` });
});

t.test('what the store holds, owned by someone else', { skip: !ROOT && 'chown needs root' }, async (t) => {
  const dir = tmpDir(t);
  const store = path.join(dir, 'store');
  fs.mkdirSync(store, { mode: 0o700 });
  fs.writeFileSync(path.join(store, 'LOCK'), '', { mode: 0o600 });
  fs.chownSync(path.join(store, 'LOCK'), NOBODY, NOBODY);
  t.match((await rejection(linuxPlatform().prepareDir(store))).message, new RegExp(`^${path.join(store, 'LOCK')}, in ${store}, lets others read or change it: its owner is uid ${NOBODY}, not root .*Fix \\(as root\\): chown root ${path.join(store, 'LOCK')}$`));
});

t.test('the store owned by someone else is refused', { skip: !ROOT && 'chown needs root' }, async (t) => {
  const dir = tmpDir(t);
  const store = path.join(dir, 'store');
  fs.mkdirSync(store, { mode: 0o700 });
  fs.chownSync(store, NOBODY, NOBODY);
  t.match((await rejection(linuxPlatform().prepareDir(store))).message, new RegExp(`^${store} lets others read or change it: its owner is uid ${NOBODY}, not root .*Fix \\(as root\\): chown root ${store}$`));
});

/** A Linux node's config in `cfgDir` with its store in `dir`, optionally an etcd store with a password file. */
function linuxConfig(cfgDir: string, store: string, pw?: string): string {
  const file = path.join(cfgDir, 'node.yaml');
  const etcd = pw ? `\n  etcd: { username: bs, password: { file: ${pw} }, allowInsecure: true }` : '';
  fs.writeFileSync(file, `node: { name: lin-acl, os: linux }
ipam:
  store: ${pw ? 'etcd://127.0.0.1:1' : store}${etcd}
  pools: [{ name: p, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: none }
`);
  fs.chmodSync(file, 0o644);
  return file;
}

t.test('run on Linux: a config folder others may change, or a password file others may read, refuses before anything is written', async (t) => {
  const dir = tmpDir(t);
  const cfgDir = path.join(dir, 'config');
  fs.mkdirSync(cfgDir);
  fs.chmodSync(cfgDir, 0o777); // what kubelet makes an emptyDir volume
  const store = path.join(dir, 'store');
  const file = linuxConfig(cfgDir, store);
  const { run } = await import('../../src/cli/run.ts');
  const whom = `root${process.geteuid?.() ? ` and this daemon's uid ${process.geteuid?.()}` : ''} only`;
  await t.rejects(run(['-c', file, '--log-level', 'silent', '--run-dir', path.join(dir, 'run')], linuxPlatform()), {
    name: 'StartError',
    message: `config ${file}: ${cfgDir} lets others change it: its mode 0777 (drwxrwxrwx) lets its group and others write; it must be changeable by ${whom} (others may read it); refusing to use it. Fix (as root): chmod go-w ${cfgDir}`,
  });
  t.same(fs.readdirSync(dir).sort(), ['config'], 'no store, no run dir');

  // Others may read the folder and the config: the checks pass (the run then stops at a run dir under a file).
  fs.chmodSync(cfgDir, 0o755);
  await t.rejects(run(['-c', file, '--log-level', 'silent', '--run-dir', path.join(file, 'run')], linuxPlatform()), { name: 'StartError', message: /^cannot write the running-marker / });

  const pw = path.join(dir, 'etcd-password');
  fs.writeFileSync(pw, 'not-this-one\n');
  fs.chmodSync(pw, 0o644);
  const withPw = linuxConfig(cfgDir, store, pw);
  const err = await rejection(run(['-c', withPw, '--log-level', 'silent', '--run-dir', path.join(dir, 'run')], linuxPlatform()));
  t.equal(err.name, 'StartError');
  t.equal(err.message, `config ${withPw}: ${pw} (ipam.etcd.password.file) holds a secret and lets others read or change it: its mode 0644 (-rw-r--r--) gives its group r-- and others r--; it must be readable and changeable by ${whom}; refusing to use it. Fix (as root): chmod 600 ${pw}`);
  t.notMatch(err.message, /not-this-one/);
  t.same(fs.readdirSync(dir).sort(), ['config', 'etcd-password'], 'nothing written');
});

t.test('a folder on a read-only mount cannot be changed through it: it passes whatever its mode (ConfigMap volumes)', async (t) => {
  const info = [
    '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
    '30 22 0:40 / /etc/blockspeaker/config ro,relatime - tmpfs tmpfs rw',
    '31 22 0:41 / /etc/blockspeaker/config\\040x rw,relatime - tmpfs tmpfs rw',
    '32 30 0:42 / /etc/blockspeaker/config/sub rw,relatime - tmpfs tmpfs rw',
  ].join('\n');
  t.equal(onReadOnlyMount('/etc/blockspeaker/config', info), true);
  t.equal(onReadOnlyMount('/etc/blockspeaker/config/node.yaml', info), true);
  t.equal(onReadOnlyMount('/etc/blockspeaker/config x/node.yaml', info), false, 'octal escapes in mount points, no prefix confusion');
  t.equal(onReadOnlyMount('/etc/blockspeaker/configs/x', info), false, 'a prefix must end at a path boundary');
  t.equal(onReadOnlyMount('/etc/blockspeaker/config/sub/x', info), false, 'the deepest mount decides');
  t.equal(onReadOnlyMount('/var/lib', info), false);
  const folder = { mode: 0o040777, uid: 0 };
  t.ok(posixProblem('/etc/blockspeaker/config', folder, 0, false).problems.length, 'world-writable: refused');
  t.same(posixProblem('/etc/blockspeaker/config', { ...folder, readOnlyMount: true }, 0, false).problems, [], 'on a read-only mount: passes');
  t.ok(posixProblem('/s', { mode: 0o100644, uid: 0, readOnlyMount: true }, 0, true).problems.length, 'a secret others may read is refused, read-only mount or not');
});
