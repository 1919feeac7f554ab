<#
.SYNOPSIS
  Installs, removes, starts or stops the blockspeaker Windows service.

.DESCRIPTION
  blockspeaker.exe is a Node.js program and cannot answer the Service Control Manager itself, so the service is
  hosted by NSSM (the Non-Sucking Service Manager, nssm.exe), the wrapper Windows Kubernetes nodes commonly already
  use for kubelet, kube-proxy and Calico. NSSM runs
      blockspeaker.exe run -c C:\ProgramData\blockspeaker\node.yaml
  as LocalSystem, and on a service stop sends the program Ctrl+C, which blockspeaker is to treat as a restart: BGP
  sessions close without a NOTIFICATION so graceful-restart peers keep this node's routes. To take the node away
  for good (Cease to every peer, routes withdrawn), run `blockspeaker.exe daemon stop --withdraw` before stopping.
  A crash or unexpected exit is restarted by NSSM, and by the SCM's failure actions if NSSM itself dies.

.EXAMPLE
  .\install.ps1 install -Nssm C:\k\nssm.exe
  .\install.ps1 start
#>
[CmdletBinding()]
param(
  [Parameter(Mandatory = $true, Position = 0)]
  [ValidateSet('install', 'uninstall', 'start', 'stop')]
  [string]$Action,
  [string]$ServiceName = 'blockspeaker',
  [string]$Config = 'C:\ProgramData\blockspeaker\node.yaml',
  [string]$Nssm = '',
  [string]$CniBinDir = 'C:\Program Files\containerd\cni\bin'
)
$ErrorActionPreference = 'Stop'

$Here = Split-Path -Parent $MyInvocation.MyCommand.Path
$Exe = Join-Path $Here 'blockspeaker.exe'
$StateDir = Split-Path -Parent $Config

function Find-Nssm {
  if ($Nssm) { return $Nssm }
  $beside = Join-Path $Here 'nssm.exe'
  if (Test-Path $beside) { return $beside }
  $onPath = Get-Command nssm.exe -ErrorAction SilentlyContinue
  if ($onPath) { return $onPath.Source }
  throw "nssm.exe not found: pass -Nssm C:\path\to\nssm.exe, put it beside this script or on PATH"
}

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

function Install-Blockspeaker {
  if (-not (Test-Path $Exe)) { throw "$Exe not found: run this script from the unpacked dist\windows folder" }
  $nssmExe = Find-Nssm
  # State and config: SYSTEM and Administrators only (not the inherited Users read access). A new directory is
  # created with that DACL in one call, so there is no moment when Users could plant an entry in it (the daemon does
  # the same with CreateDirectoryW); an existing one is tightened by icacls, which the admin running this asked for.
  if (-not (Test-Path $StateDir)) { New-AdminOnlyDirectory $StateDir }
  Invoke-Tool 'icacls.exe' @($StateDir, '/inheritance:r', '/grant:r', '*S-1-5-18:(OI)(CI)F', '*S-1-5-32-544:(OI)(CI)F')
  if (-not (Test-Path $Config)) {
    Copy-Item (Join-Path $Here 'node.yaml') $Config
    Write-Warning "wrote an example ${Config}: edit it (ASN, router id, peers, pools) before starting"
  }
  # containerd runs a CNI plugin as <type>.exe from its bin directory: blockspeaker.exe for the main plugin
  # ("type": "blockspeaker"), blockspeaker-cni.exe as another plugin's IPAM. The same executable under both names.
  if (Test-Path $CniBinDir) {
    Copy-Item (Join-Path $Here 'blockspeaker-cni.exe') $CniBinDir -Force
    Copy-Item (Join-Path $Here 'blockspeaker-cni.exe') (Join-Path $CniBinDir 'blockspeaker.exe') -Force
    Copy-Item (Join-Path $Here 'fs-native-extensions.node') $CniBinDir -Force
  } else {
    Write-Warning "$CniBinDir not found: copy blockspeaker-cni.exe into containerd's CNI bin directory yourself"
  }
  Invoke-Tool $nssmExe @('install', $ServiceName, $Exe)
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppParameters', "run -c `"$Config`"")
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppDirectory', $Here)
  # The executable's node flags, the launcher's (bin/blockspeaker.js; README "Footprint").
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppEnvironmentExtra', 'NODE_OPTIONS=--max-semi-space-size=1')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'DisplayName', 'blockspeaker (IPAM, BGP, HNS routes)')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'ObjectName', 'LocalSystem')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'Start', 'SERVICE_AUTO_START')
  # Stop = Ctrl+C, then up to 10 s to close sessions and flush the store before anything harsher.
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppStopMethodConsole', '10000')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppExit', 'Default', 'Restart')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppRestartDelay', '5000')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppStdout', (Join-Path $StateDir 'blockspeaker.log'))
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppStderr', (Join-Path $StateDir 'blockspeaker.log'))
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppRotateFiles', '1')
  Invoke-Tool $nssmExe @('set', $ServiceName, 'AppRotateBytes', '10485760')
  # If the wrapper itself dies, the SCM restarts the service (5 s, 5 s, then 30 s; counter reset after a day).
  Invoke-Tool 'sc.exe' @('failure', $ServiceName, 'reset=', '86400', 'actions=', 'restart/5000/restart/5000/restart/30000')
  Invoke-Tool 'sc.exe' @('failureflag', $ServiceName, '1')
  Write-Host "installed service ${ServiceName}: $Exe run -c $Config (start it with: .\install.ps1 start)"
}

switch ($Action) {
  'install' { Install-Blockspeaker }
  'uninstall' {
    $nssmExe = Find-Nssm
    if ((Get-Service -Name $ServiceName -ErrorAction SilentlyContinue).Status -eq 'Running') { Stop-Service -Name $ServiceName }
    Invoke-Tool $nssmExe @('remove', $ServiceName, 'confirm')
  }
  'start' { Start-Service -Name $ServiceName }
  'stop' { Stop-Service -Name $ServiceName }
}
