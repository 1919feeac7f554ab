<#
.SYNOPSIS
  Installs, upgrades, removes, starts or stops the blockspeaker Windows service.

.DESCRIPTION
  blockspeaker.exe answers the Service Control Manager itself (run --service NAME): no wrapper to install. The
  service runs
      blockspeaker.exe run --service blockspeaker -c C:\ProgramData\blockspeaker\node.yaml
  as LocalSystem, starts at boot, and is restarted by the SCM's failure actions (5 s, 5 s, then 30 s). A service
  stop is a graceful-restart stop: BGP sessions close without a NOTIFICATION, so peers keep this node's routes. To
  take the node away for good (Cease to every peer, routes withdrawn), run `blockspeaker.exe daemon stop --withdraw`.

  install   installs the service, the CNI plugin (blockspeaker.exe install-cni) and an example config; run again on
            an installed node it upgrades in place: stop, replace, start. Windows lets a running executable be
            renamed, never replaced: the service is stopped first, and install-cni moves a plugin that a CNI call
            still runs aside before putting the new one in.
  uninstall removes the service, the CNI plugin and conflist, and the HNS network with its endpoints and our
            routes (blockspeaker.exe hns teardown); the state folder only with -RemoveState.

.EXAMPLE
  .\install.ps1 install
  .\install.ps1 start
#>
[CmdletBinding()]
param(
  [Parameter(Mandatory = $true, Position = 0)]
  [ValidateSet('install', 'uninstall', 'start', 'stop')]
  [string]$Action,
  [string]$ServiceName = 'blockspeaker',
  [string]$Config = 'C:\ProgramData\blockspeaker\node.yaml',
  [string]$CniBinDir = 'C:\Program Files\containerd\cni\bin',
  [string]$CniConfDir = 'C:\etc\cni\net.d',
  [switch]$RemoveState
)
$ErrorActionPreference = 'Stop'

$Here = Split-Path -Parent $MyInvocation.MyCommand.Path
$Exe = Join-Path $Here 'blockspeaker.exe'
$StateDir = Split-Path -Parent $Config

# Runs an external tool and stops on a non-zero exit code (external tools do not throw by themselves).
function Invoke-Tool([string]$Tool, [string[]]$ToolArgs) {
  & $Tool @ToolArgs
  if ($LASTEXITCODE -ne 0) { throw "$Tool $($ToolArgs -join ' ') failed with exit code $LASTEXITCODE" }
}

# Creates a directory whose DACL is SYSTEM and Administrators only, protected from inheritance, at creation.
function New-AdminOnlyDirectory([string]$Path) {
  $sec = New-Object System.Security.AccessControl.DirectorySecurity
  $sec.SetSecurityDescriptorSddlForm('D:P(A;OICI;GA;;;SY)(A;OICI;GA;;;BA)')
  if ($PSVersionTable.PSEdition -eq 'Core') {
    # PowerShell 7 (.NET 6+): the overload moved to FileSystemAclExtensions.
    [System.IO.FileSystemAclExtensions]::CreateDirectory($sec, $Path) | Out-Null
  } else {
    [System.IO.Directory]::CreateDirectory($Path, $sec) | Out-Null
  }
}

function Get-Installed { Get-Service -Name $ServiceName -ErrorAction SilentlyContinue }

function Stop-Installed {
  $svc = Get-Installed
  if ($svc -and $svc.Status -ne 'Stopped') { Stop-Service -Name $ServiceName; $svc.WaitForStatus('Stopped', '00:01:00') }
}

function Install-Blockspeaker {
  if (-not (Test-Path $Exe)) { throw "$Exe not found: run this script from the unpacked dist\windows folder" }
  # State and config: SYSTEM and Administrators only (not the inherited Users read access). A new directory is
  # created with that DACL in one call, so there is no moment when Users could plant an entry in it (the daemon does
  # the same with CreateDirectoryW); an existing one is tightened by icacls, which the admin running this asked for.
  if (-not (Test-Path $StateDir)) { New-AdminOnlyDirectory $StateDir }
  Invoke-Tool 'icacls.exe' @($StateDir, '/inheritance:r', '/grant:r', '*S-1-5-18:(OI)(CI)F', '*S-1-5-32-544:(OI)(CI)F')
  if (-not (Test-Path $Config)) {
    Copy-Item (Join-Path $Here 'node.yaml') $Config
    Write-Warning "wrote an example ${Config}: edit it (ASN, router id, peers, pools) before starting"
  }
  $upgrade = [bool](Get-Installed)
  $wasRunning = $upgrade -and (Get-Installed).Status -eq 'Running'
  # An upgrade replaces files the running service holds: stop it first (a graceful-restart stop).
  if ($upgrade) { Stop-Installed }
  # The CNI plugin under both names (blockspeaker.exe: the main plugin; blockspeaker-cni.exe: as IPAM), into
  # admin-only folders, a running one moved aside the Windows way (docs/guides/deploying.md, "Installing the CNI plugin").
  # The conflist: the daemon writes it at start when the config has dataplane.cni.
  Invoke-Tool $Exe @('install-cni', '--bin-dir', $CniBinDir)
  $bin = "`"$Exe`" run --service $ServiceName -c `"$Config`" --log-file `"$(Join-Path $StateDir 'blockspeaker.log')`""
  if ($upgrade) {
    Invoke-Tool 'sc.exe' @('config', $ServiceName, 'binPath=', $bin, 'start=', 'auto', 'obj=', 'LocalSystem')
  } else {
    Invoke-Tool 'sc.exe' @('create', $ServiceName, 'binPath=', $bin, 'start=', 'auto', 'obj=', 'LocalSystem', 'DisplayName=', 'blockspeaker (IPAM, BGP, HNS routes)')
  }
  # The executable's node flags, the launcher's (bin/blockspeaker.js; docs/reference/footprint.md): the service's environment.
  $key = "HKLM:\SYSTEM\CurrentControlSet\Services\$ServiceName"
  New-ItemProperty -Path $key -Name 'Environment' -PropertyType MultiString -Value @('NODE_OPTIONS=--max-semi-space-size=1 --v8-pool-size=1') -Force | Out-Null
  # A crash or an exit with an error is restarted by the SCM (5 s, 5 s, then 30 s; counter reset after a day).
  Invoke-Tool 'sc.exe' @('failure', $ServiceName, 'reset=', '86400', 'actions=', 'restart/5000/restart/5000/restart/30000')
  Invoke-Tool 'sc.exe' @('failureflag', $ServiceName, '1')
  if ($wasRunning) { Start-Service -Name $ServiceName }
  if ($upgrade) { Write-Host "upgraded service ${ServiceName}: $bin" }
  else { Write-Host "installed service ${ServiceName}: $bin (start it with: .\install.ps1 start)" }
}

function Uninstall-Blockspeaker {
  Stop-Installed
  # The HNS network, its endpoints and our host routes (the daemon's, found by name and by our route metric).
  if (Test-Path $Config) { Invoke-Tool $Exe @('hns', 'teardown', '-c', $Config) }
  if (Get-Installed) { Invoke-Tool 'sc.exe' @('delete', $ServiceName) }
  foreach ($f in @((Join-Path $CniBinDir 'blockspeaker.exe'), (Join-Path $CniBinDir 'blockspeaker-cni.exe'), (Join-Path $CniConfDir '10-blockspeaker.conflist'))) {
    if (Test-Path $f) { Remove-Item -Force $f }
  }
  # Leftovers of upgrades whose old plugin was still running then.
  Get-ChildItem -Path $CniBinDir -Filter 'blockspeaker*.exe.old-*' -ErrorAction SilentlyContinue | Remove-Item -Force -ErrorAction SilentlyContinue
  if ($RemoveState) { Remove-Item -Recurse -Force $StateDir }
  else { Write-Host "kept $StateDir (the store and config): pass -RemoveState to remove it too" }
}

switch ($Action) {
  'install' { Install-Blockspeaker }
  'uninstall' { Uninstall-Blockspeaker }
  'start' { Start-Service -Name $ServiceName }
  'stop' { Stop-Service -Name $ServiceName }
}
