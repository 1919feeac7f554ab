// packaging/windows/install.ps1 cannot run here (no PowerShell, no Service Control Manager), so its text is checked:
// a small PowerShell tokenizer proves strings, comments and brackets are well formed and catches "$name:" inside a
// double-quoted string (PowerShell reads that as a scope-qualified variable and refuses the script); then the
// service it installs is the one docs/guides/windows-nodes.md promises: `blockspeaker.exe run --service NAME -c <config>` as
// LocalSystem (the daemon answers the SCM itself), restarted on failure by the SCM; upgrades and uninstalls in place.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../../packaging/windows/wine.ts';
import { requirePeers } from '../kit/etcd-cluster.ts';
import { ADMIN_ONLY_DIR_SDDL } from '../../src/platform/dir-acl.ts';

const scriptPath = path.join(projectRoot, 'packaging', 'windows', 'install.ps1');
const script = fs.readFileSync(scriptPath, 'utf8');

/** Problems found by tokenizing PowerShell: unbalanced brackets, unterminated strings, "$name:" in "...". */
function lint(src: string): string[] {
  const problems: string[] = [];
  const stack: { ch: string; line: number }[] = [];
  const pairs: Record<string, string> = { ')': '(', '}': '{', ']': '[' };
  let line = 1;
  let i = 0;
  const at = () => `line ${line}`;
  while (i < src.length) {
    const c = src[i]!;
    if (c === '\n') line++;
    if (c === '<' && src[i + 1] === '#') {
      const end = src.indexOf('#>', i + 2);
      if (end < 0) return [...problems, `${at()}: unterminated <# comment`];
      line += src.slice(i, end).split('\n').length - 1;
      i = end + 2;
      continue;
    }
    if (c === '#') {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    if (c === "'") {
      let j = i + 1;
      for (;;) {
        if (j >= src.length) return [...problems, `${at()}: unterminated '...' string`];
        if (src[j] === "'" && src[j + 1] === "'") j += 2;
        else if (src[j] === "'") break;
        else j++;
      }
      line += src.slice(i, j).split('\n').length - 1;
      i = j + 1;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      for (;;) {
        if (j >= src.length) return [...problems, `${at()}: unterminated "..." string`];
        if (src[j] === '`') j += 2;
        else if (src[j] === '"') break;
        else j++;
      }
      const body = src.slice(i + 1, j);
      const bad = /\$(\w+):(?![\w{])/.exec(body);
      if (bad && !['env', 'script', 'global', 'local', 'using'].includes(bad[1]!.toLowerCase())) {
        problems.push(`${at()}: "$${bad[1]}:" in a double-quoted string is read as a scope-qualified variable; write \${${bad[1]}}:`);
      }
      line += body.split('\n').length - 1;
      i = j + 1;
      continue;
    }
    if (c === '`') {
      i += 2;
      continue;
    }
    if ('({['.includes(c)) stack.push({ ch: c, line });
    if (')}]'.includes(c)) {
      const open = stack.pop();
      if (!open || open.ch !== pairs[c]) problems.push(`${at()}: "${c}" closes ${open ? `"${open.ch}" of line ${open.line}` : 'nothing'}`);
    }
    i++;
  }
  for (const o of stack) problems.push(`line ${o.line}: "${o.ch}" never closed`);
  return problems;
}

t.test('the checker itself finds what PowerShell would refuse', async (t) => {
  t.same(lint(`param([string]$A = 'x''y')\nWrite-Host "$($A): ok \${A}: ok $env:PATH"\n# { not code\n<# ( #>\n`), []);
  t.match(lint('if ($x) { Write-Host "a"\n'), [/"\{" never closed/]);
  t.match(lint('Write-Host "wrote $Config: done"'), [/"\$Config:" in a double-quoted string/]);
  t.match(lint("Write-Host 'open"), [/unterminated '...' string/]);
  t.match(lint('foo)'), [/"\)" closes nothing/]);
});

t.test('install.ps1 is well formed PowerShell text', async (t) => {
  t.same(lint(script), []);
  t.match(script, /\$ErrorActionPreference = 'Stop'/, 'stops at the first failing cmdlet');
});

t.test('install.ps1 installs the service the Windows nodes guide describes', async (t) => {
  const actions = /\[ValidateSet\(([^)]*)\)\]\s*\[string\]\$Action/.exec(script)?.[1];
  t.same(actions?.split(',').map((s) => s.trim().replace(/'/g, '')), ['install', 'uninstall', 'start', 'stop']);
  for (const a of ['install', 'uninstall', 'start', 'stop']) t.match(script, new RegExp(`\\n  '${a}' \\{`), `switch handles ${a}`);
  t.match(script, /\[string\]\$Config = 'C:\\ProgramData\\blockspeaker\\node\.yaml'/, 'default config path');

  // No wrapper: blockspeaker.exe is the service (run --service, answering the SCM itself; test/windows/service.test.ts
  // runs that under wine's SCM), created with sc.exe, whose option words end in "=" and take their value after.
  t.notMatch(script, /nssm/i, 'no NSSM');
  t.match(script, /\$bin = "`"\$Exe`" run --service \$ServiceName -c `"\$Config`" --log-file `"\$\(Join-Path \$StateDir 'blockspeaker\.log'\)`""/, 'runs: blockspeaker.exe run --service NAME -c <config> --log-file <state>\\blockspeaker.log');
  t.match(script, /Invoke-Tool 'sc\.exe' @\('create', \$ServiceName, 'binPath=', \$bin, 'start=', 'auto', 'obj=', 'LocalSystem'/, 'sc.exe create, auto start, LocalSystem');
  t.match(script, /Invoke-Tool 'sc\.exe' @\('config', \$ServiceName, 'binPath=', \$bin/, 'an installed service is reconfigured in place (upgrade)');
  // Upgrade: the service is stopped before anything it holds is replaced, and started again if it ran.
  const install = script.slice(script.indexOf('function Install-Blockspeaker'), script.indexOf('function Uninstall-Blockspeaker'));
  t.ok(install.indexOf('if ($upgrade) { Stop-Installed }') >= 0 && install.indexOf('if ($upgrade) { Stop-Installed }') < install.indexOf("'install-cni'"), 'stop before replacing files');
  t.match(install, /if \(\$wasRunning\) \{ Start-Service -Name \$ServiceName \}/, 'start again after an upgrade');
  t.match(install, /Invoke-Tool \$Exe @\('install-cni', '--bin-dir', \$CniBinDir\)/, 'the CNI plugin through install-cni (the Windows replace rule)');
  // Uninstall: the service, the CNI files, the HNS network with endpoints and routes; state only on request.
  const uninstall = script.slice(script.indexOf('function Uninstall-Blockspeaker'));
  t.match(uninstall, /Invoke-Tool \$Exe @\('hns', 'teardown', '-c', \$Config\)/, 'HNS network, endpoints and routes (hns teardown)');
  t.match(uninstall, /Invoke-Tool 'sc\.exe' @\('delete', \$ServiceName\)/, 'the service');
  for (const f of ["'blockspeaker.exe'", "'blockspeaker-cni.exe'", "'10-blockspeaker.conflist'"]) t.ok(uninstall.includes(f), `removes ${f}`);
  t.match(uninstall, /if \(\$RemoveState\) \{ Remove-Item -Recurse -Force \$StateDir \}/, 'the state folder only with -RemoveState');

  // sc.exe wants "reset=" and "actions=" as words of their own, followed by their values.
  const failure = /Invoke-Tool 'sc\.exe' @\('failure', \$ServiceName, 'reset=', '(\d+)', 'actions=', '([^']+)'\)/.exec(script);
  t.ok(failure, 'sc.exe failure with reset= and actions=');
  t.match(failure?.[2], /^restart\/\d+(\/restart\/\d+)*$/, 'restart actions with delays');
  t.match(script, /'failureflag', \$ServiceName, '1'/, 'failure actions also on a non-crash error exit');
});

t.test('install.ps1 creates the state directory with the daemon\'s DACL, not open for a moment', async (t) => {
  const fn = /function New-AdminOnlyDirectory\(\[string\]\$Path\) \{([\s\S]*?)\n\}/.exec(script)?.[1] ?? '';
  t.ok(fn, 'New-AdminOnlyDirectory is defined');
  const sddl = /SetSecurityDescriptorSddlForm\('([^']+)'\)/.exec(fn)?.[1];
  t.equal(sddl, ADMIN_ONLY_DIR_SDDL, 'the same protected SDDL the daemon gives CreateDirectoryW');
  // Windows PowerShell 5.1 (.NET Framework) has Directory.CreateDirectory(path, security); PowerShell 7 moved it.
  t.match(fn, /\[System\.IO\.Directory\]::CreateDirectory\(\$Path, \$sec\)/, 'the .NET Framework overload');
  t.match(fn, /\[System\.IO\.FileSystemAclExtensions\]::CreateDirectory\(\$sec, \$Path\)/, 'the .NET 6+ extension');
  const install = script.slice(script.indexOf('function Install-Blockspeaker'));
  const create = install.indexOf('New-AdminOnlyDirectory $StateDir');
  t.ok(create > 0, 'Install creates the state directory through it');
  t.match(install, /if \(-not \(Test-Path \$StateDir\)\) \{ New-AdminOnlyDirectory \$StateDir \}/, 'only when it is missing');
  t.notMatch(install, /New-Item -ItemType Directory[^\n]*\$StateDir/, 'no plain New-Item of the state directory');
  const icacls = install.indexOf("Invoke-Tool 'icacls.exe' @($StateDir");
  t.ok(icacls > create, 'an existing directory is still tightened by icacls, after');
});

t.test('the packaged copy is the source copy', async (t) => {
  const packaged = path.join(projectRoot, 'dist', 'windows', 'install.ps1');
  if (!fs.existsSync(packaged)) {
    // CI builds dist/windows before the tests (.ci/run), so there a missing copy is a failure, not a pass.
    if (requirePeers()) t.fail(`${packaged} is missing: run npm run package:windows first`);
    else t.comment('dist/windows not built yet (npm run package:windows); nothing to compare');
    return;
  }
  t.equal(fs.readFileSync(packaged, 'utf8'), script);
});
