// The Windows executor: renders planner ops as PowerShell over HNS.V2.psm1 (New-HnsNetwork -JsonString,
// New-HnsSubnet, New-HnsIPSubnet, Remove-HnsIPSubnet, Remove-HnsSubnet, New-HnsNetworkPolicy,
// Remove-HnsNetworkPolicy: each an HcnModifyNetwork request with ResourceType Subnet / IPSubnet / Policy) and the
// NetTCPIP cmdlets (New-NetRoute / Remove-NetRoute on the management vNIC), runs the script through a runner and
// reads the state back with Get-HnsNetwork / Get-HnsEndpoint / Get-NetRoute | ConvertTo-Json.
//
// The script reports each op on stdout as "##blockspeaker ok N" or "##blockspeaker fail N 0x803B0012 message" and
// stops at the first failure; the HRESULT is taken from the error text (HNS.V2.psm1 reports HCN's hr in it), else
// from the exception. Only NOT_FOUND codes read as "absent" (model.ts), and only for removes.
// Nothing here runs PowerShell in tests: the runner is an interface; processRunner() is for Windows hosts.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ApplyResult,
  type HnsEndpoint,
  type HnsExecutor,
  type HnsIpSubnet,
  type HnsNetwork,
  type HnsOp,
  type HnsSnapshot,
  type HnsSubnet,
  type ModifyNetworkRequest,
  type NetRoute,
  HcnError,
  applySequential,
  findHresult,
  parseHresult,
  parseSnapshot,
} from './model.ts';

export interface PowerShellResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a PowerShell script; the executor never spawns anything itself. */
export interface PowerShellRunner {
  run(script: string): Promise<PowerShellResult>;
}

export interface ScriptOptions {
  /** The HNS network's name. */
  network: string;
  /** Path of HNS.V2.psm1 on the host. */
  module?: string;
}

export const DEFAULT_MODULE = 'C:\\k\\hns.v2.psm1';
const MARK = '##blockspeaker';

// ---- rendering -----------------------------------------------------------------------------------------------

/** A PowerShell single-quoted string (PowerShell also takes the typographic quotes as quotes: double them too). */
export function psString(s: string): string {
  return `'${s.replace(/['\u2018\u2019\u201a\u201b]/g, (q) => q + q)}'`;
}

/** JSON value -> PowerShell literal (hashtables, arrays, strings, numbers), on one line. */
export function psValue(v: unknown): string {
  if (v === null || v === undefined) return '$null';
  if (typeof v === 'string') return psString(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`cannot render ${v} for PowerShell`);
    return String(v);
  }
  if (typeof v === 'boolean') return v ? '$true' : '$false';
  if (Array.isArray(v)) return `@(${v.map(psValue).join(', ')})`;
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    if (entries.length === 0) return '@{}';
    return `@{ ${entries.map(([k, x]) => `${/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : psString(k)} = ${psValue(x)}`).join('; ')} }`;
  }
  throw new Error(`cannot render ${typeof v} for PowerShell`);
}

function prelude(opts: ScriptOptions, what: string): string[] {
  return [
    `# blockspeaker hns: ${what} for network ${psString(opts.network)}. Generated; do not edit.`,
    `$ErrorActionPreference = 'Stop'`,
    `Import-Module ${psString(opts.module ?? DEFAULT_MODULE)} -DisableNameChecking`,
    `$bsNetworkName = ${psString(opts.network)}`,
    `function Get-BsNetwork { @(Get-HnsNetwork -ErrorAction Stop | Where-Object { $_.Name -eq $bsNetworkName })[0] }`,
  ];
}

const HELPERS = [
  `function Assert-BsNetwork { if (-not $script:net) { throw "network '$bsNetworkName' not found (0x803B0001)" } }`,
  `function Get-BsSubnet([string] $Prefix) {`,
  `    Assert-BsNetwork`,
  `    $s = @((Get-HnsNetwork -Id $script:net.ID -ErrorAction Stop).Ipams | ForEach-Object { $_.Subnets } | Where-Object { $_.IpAddressPrefix -eq $Prefix })[0]`,
  `    if (-not $s) { throw "subnet $Prefix not found (0x803B0005)" }`,
  `    $s`,
  `}`,
  `function Get-BsIpSubnetId([string] $Subnet, [string] $Prefix) {`,
  `    $i = @((Get-BsSubnet $Subnet).IpSubnets | Where-Object { $_.IpAddressPrefix -eq $Prefix })[0]`,
  `    if (-not $i) { throw "ip-subnet $Prefix not found (0x803B0005)" }`,
  `    $i.ID`,
  `}`,
  `function Write-BsResult([int] $Index, $ErrorRecord) {`,
  `    if ($null -eq $ErrorRecord) { Write-Output "${MARK} ok $Index"; return }`,
  `    $text = (($ErrorRecord | Out-String) -replace '\\s+', ' ').Trim()`,
  `    if ($text -match 'No matching MSFT_NetRoute') { $hr = '0x80070490' }`,
  `    else { $hr = '0x{0:X8}' -f $ErrorRecord.Exception.HResult }`,
  `    Write-Output "${MARK} fail $Index $hr $text"`,
  `}`,
  `$net = Get-BsNetwork`,
];

/** The subnet ID for an ip-subnet op: the known one, else looked up by the parent's prefix at run time. */
function subnetIdExpr(op: HnsOp, settings: { SubnetId?: string }): string {
  if (settings.SubnetId !== undefined) return psString(settings.SubnetId);
  if (!op.subnet) throw new Error(`${op.op}: neither Settings.SubnetId nor the subnet's prefix is known`);
  return `(Get-BsSubnet ${psString(op.subnet)}).ID`;
}

function describe(op: HnsOp): string {
  const b = op.body as unknown as Record<string, unknown>;
  if (op.op === 'create-network') return (b as unknown as HnsNetwork).Name;
  if (op.op.endsWith('-endpoint')) return `${(b as unknown as HnsEndpoint).Name ?? ''} ${(b as unknown as HnsEndpoint).ID ?? ''}`.trim();
  if (op.op.endsWith('host-route')) {
    const r = b as unknown as NetRoute;
    return `${r.DestinationPrefix} via ${r.NextHop}`;
  }
  const s = (b as unknown as ModifyNetworkRequest).Settings as Record<string, unknown>;
  const first = (s.Subnets ?? s.IpSubnets ?? s.Policies) as Record<string, unknown>[] | undefined;
  const o = first?.[0] ?? {};
  const settings = (o.Settings ?? {}) as Record<string, unknown>;
  return String(o.IpAddressPrefix ?? settings.DestinationPrefix ?? o.Type ?? '');
}

/** The PowerShell for one op (without the try/catch around it). */
export function renderOp(op: HnsOp): string[] {
  const b = op.body;
  switch (op.op) {
    case 'create-network':
      return [`$net = New-HnsNetwork -JsonString ${psString(JSON.stringify(b))} -ErrorAction Stop`];
    case 'add-host-route': {
      const r = b as NetRoute;
      const metric = r.RouteMetric !== undefined ? ` -RouteMetric ${r.RouteMetric}` : '';
      // ActiveStore: a reboot clears them, and the reconcile loop puts back what is still wanted.
      return [
        `New-NetRoute -DestinationPrefix ${psString(r.DestinationPrefix)} -NextHop ${psString(r.NextHop)} -InterfaceAlias ${psString(r.InterfaceAlias)}${metric} -PolicyStore ActiveStore -ErrorAction Stop | Out-Null`,
      ];
    }
    case 'remove-host-route': {
      const r = b as NetRoute;
      return [
        `Remove-NetRoute -DestinationPrefix ${psString(r.DestinationPrefix)} -NextHop ${psString(r.NextHop)} -InterfaceAlias ${psString(r.InterfaceAlias)} -Confirm:$false -ErrorAction Stop`,
      ];
    }
    case 'create-endpoint': {
      // HNS.V2.psm1: New-HnsEndpoint (HcnCreateEndpoint) then Attach-HnsHostEndpoint into the host's compartment (1),
      // which gives the host its path to the pods.
      const e = b as HnsEndpoint;
      const ipc = e.IpConfigurations?.[0];
      const v6 = (ipc?.IpAddress ?? '').includes(':');
      const addr = v6 ? `-IPv6Address ${psString(ipc!.IpAddress)} -IPv6PrefixLength ${ipc!.PrefixLength}` : `-IPAddress ${psString(ipc!.IpAddress)} -PrefixLength ${ipc!.PrefixLength}`;
      return [
        'Assert-BsNetwork',
        `$ep = New-HnsEndpoint -NetworkId $net.ID -Name ${psString(e.Name ?? '')} ${addr} -ErrorAction Stop`,
        `Attach-HnsHostEndpoint -EndpointID $ep.ID -CompartmentID 1 -ErrorAction Stop | Out-Null`,
      ];
    }
    case 'remove-endpoint':
      return [`Get-HnsEndpoint -Id ${psString((b as HnsEndpoint).ID)} -ErrorAction Stop | Remove-HnsEndpoint -ErrorAction Stop | Out-Null`];
  }
  const req = b as ModifyNetworkRequest;
  const lines = ['Assert-BsNetwork'];
  switch (op.op) {
    case 'add-subnet':
      lines.push(`New-HnsSubnet -NetworkId $net.ID -Subnets ${psValue((req.Settings as { Subnets: HnsSubnet[] }).Subnets)} -ErrorAction Stop | Out-Null`);
      break;
    case 'remove-subnet': {
      const subs = (req.Settings as { Subnets: HnsSubnet[] }).Subnets.map((s) =>
        s.ID !== undefined ? s : { ...s, ID: { ps: `(Get-BsSubnet ${psString(s.IpAddressPrefix)}).ID` } },
      );
      lines.push(`Remove-HnsSubnet -NetworkId $net.ID -Subnets ${psWithExprs(subs)} -ErrorAction Stop | Out-Null`);
      break;
    }
    case 'add-ip-subnet': {
      const s = req.Settings as { SubnetId?: string; IpSubnets: HnsIpSubnet[] };
      lines.push(`New-HnsIPSubnet -NetworkId $net.ID -SubnetId ${subnetIdExpr(op, s)} -IPSubnets ${psValue(s.IpSubnets)} -ErrorAction Stop | Out-Null`);
      break;
    }
    case 'remove-ip-subnet': {
      const s = req.Settings as { SubnetId?: string; IpSubnets: HnsIpSubnet[] };
      const ips = s.IpSubnets.map((i) =>
        i.ID !== undefined ? i : { ...i, ID: { ps: `(Get-BsIpSubnetId ${psString(op.subnet ?? '')} ${psString(i.IpAddressPrefix)})` } },
      );
      lines.push(`Remove-HnsIPSubnet -NetworkId $net.ID -SubnetId ${subnetIdExpr(op, s)} -IPSubnets ${psWithExprs(ips)} -ErrorAction Stop | Out-Null`);
      break;
    }
    case 'add-policy':
      lines.push(`New-HnsNetworkPolicy -NetworkId $net.ID -Policies ${psValue((req.Settings as { Policies: unknown[] }).Policies)} -ErrorAction Stop | Out-Null`);
      break;
    case 'remove-policy':
      lines.push(`Remove-HnsNetworkPolicy -NetworkId $net.ID -Policies ${psValue((req.Settings as { Policies: unknown[] }).Policies)} -ErrorAction Stop | Out-Null`);
      break;
  }
  return lines;
}

/** psValue, where a value {ps: "..."} is a PowerShell expression written as is. */
function psWithExprs(v: unknown): string {
  if (v && typeof v === 'object' && !Array.isArray(v) && 'ps' in v && Object.keys(v).length === 1) return (v as { ps: string }).ps;
  if (Array.isArray(v)) return `@(${v.map(psWithExprs).join(', ')})`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    return `@{ ${entries.map(([k, x]) => `${k} = ${psWithExprs(x)}`).join('; ')} }`;
  }
  return psValue(v);
}

/** The whole script that applies `ops` in order, reporting each and stopping at the first failure. */
export function renderApplyScript(ops: readonly HnsOp[], opts: ScriptOptions): string {
  const out = [...prelude(opts, `${ops.length} operation(s)`), ...HELPERS];
  ops.forEach((op, i) => {
    out.push('', `# [${i}] ${op.op} ${describe(op)}`, 'try {');
    for (const l of renderOp(op)) out.push(`    ${l}`);
    out.push(`    Write-BsResult ${i} $null`, `} catch { Write-BsResult ${i} $_; exit 3 }`);
  });
  return out.join('\r\n') + '\r\n';
}

/** The script that prints the actual state: our network(s) by name, all endpoints, the management vNIC's routes. */
export function renderReadScript(opts: ScriptOptions & { interfaceAlias?: string }): string {
  const out = [...prelude(opts, 'read state')];
  out.push(`$networks = @(Get-HnsNetwork -ErrorAction Stop | Where-Object { $_.Name -eq $bsNetworkName })`);
  out.push(`$endpoints = @(Get-HnsEndpoint -ErrorAction Stop)`);
  out.push(`$routes = @()`);
  if (opts.interfaceAlias !== undefined) {
    // A missing vNIC means no routes on it (ObjectNotFound); any other failure is a failed read.
    out.push(
      `try { $routes = @(Get-NetRoute -InterfaceAlias ${psString(opts.interfaceAlias)} -ErrorAction Stop | Select-Object DestinationPrefix, NextHop, InterfaceAlias, RouteMetric) }`,
      `catch { if ($_.CategoryInfo.Category -ne 'ObjectNotFound') { throw } }`,
    );
  }
  out.push(`Write-Output ('${MARK} state ' + (ConvertTo-Json -InputObject @{ Networks = $networks; Endpoints = $endpoints; HostRoutes = $routes } -Depth 10 -Compress))`);
  return out.join('\r\n') + '\r\n';
}

// ---- results -------------------------------------------------------------------------------------------------

/** Parse an apply script's report: how many ops finished, and the first failure. */
export function parseApplyOutput(res: PowerShellResult, count: number): { applied: number; error?: Error } {
  let applied = 0;
  for (const line of res.stdout.split(/\r?\n/)) {
    if (!line.startsWith(MARK + ' ')) continue;
    const m = /^##blockspeaker (ok|fail) (\d+)(?: (\S+) ?(.*))?$/.exec(line);
    if (!m) continue;
    const i = Number(m[2]);
    if (m[1] === 'ok') {
      if (i === applied) applied++;
      continue;
    }
    // HNS.V2.psm1 puts HCN's hr in the message, in hex or (ReportErrors) in decimal: it beats the exception's own.
    const code = findHresult(m[4] ?? '') ?? parseHresult(m[3] ?? '') ?? 0x80004005;
    return { applied, error: new HcnError(code, (m[4] || 'PowerShell error').trim()) };
  }
  if (applied >= count) return { applied: count };
  const why = (res.stderr.trim() || res.stdout.trim()).split(/\r?\n/).slice(-3).join(' ');
  return { applied, error: new Error(`PowerShell stopped after ${applied} of ${count} op(s) (exit ${res.code}): ${why}`) };
}

export function parseReadOutput(res: PowerShellResult): HnsSnapshot {
  const line = res.stdout.split(/\r?\n/).find((l) => l.startsWith(`${MARK} state `));
  if (res.code !== 0 || !line) {
    const text = (res.stderr.trim() || res.stdout.trim()).replace(/\s+/g, ' ');
    const hr = findHresult(text);
    const msg = `reading HNS state failed (exit ${res.code}): ${text.slice(0, 500)}`;
    // A failed read is never "nothing exists", whatever the code says: the caller must not plan from it.
    throw hr !== null ? new HcnError(hr, msg) : new Error(msg);
  }
  return parseSnapshot(JSON.parse(line.slice(MARK.length + 7)));
}

// ---- executor ------------------------------------------------------------------------------------------------

export interface PowerShellExecutorOptions extends ScriptOptions {
  runner: PowerShellRunner;
  /** Alias of the management vNIC whose routes are read back (l2bridge / l2tunnel). */
  interfaceAlias?: string;
  /** Ops per script (one PowerShell start each); default 500. */
  batchSize?: number;
}

export class PowerShellExecutor implements HnsExecutor {
  constructor(private readonly opts: PowerShellExecutorOptions) {}

  async read(): Promise<HnsSnapshot> {
    return parseReadOutput(await this.opts.runner.run(renderReadScript(this.opts)));
  }

  apply(ops: readonly HnsOp[]): Promise<ApplyResult> {
    return applySequential(ops, async (batch) => {
      const size = this.opts.batchSize ?? 500;
      let applied = 0;
      for (let i = 0; i < batch.length; i += size) {
        const chunk = batch.slice(i, i + size);
        const r = parseApplyOutput(await this.opts.runner.run(renderApplyScript(chunk, this.opts)), chunk.length);
        applied += r.applied;
        if (r.error) return { applied, error: r.error };
      }
      return { applied };
    });
  }
}

/** Runs scripts with powershell.exe -File (Windows only): a temp .ps1 in UTF-8 with BOM, as Windows PowerShell wants. */
export function processRunner(opts: { exe?: string; dir?: string; spawn?: (cmd: string, args: string[]) => Promise<PowerShellResult> } = {}): PowerShellRunner {
  return {
    async run(script: string): Promise<PowerShellResult> {
      const file = join(opts.dir ?? tmpdir(), `blockspeaker-hns-${process.pid}-${randomBytes(4).toString('hex')}.ps1`);
      await fs.writeFile(file, '\ufeff' + script, 'utf8');
      const exe = opts.exe ?? 'powershell.exe';
      const args = ['-NoProfile', '-NonInteractive', '-ExecutionPolicy', 'Bypass', '-File', file];
      try {
        // The daemon hands in its platform's spawner (src/platform), so process spawning has one owner.
        if (opts.spawn) return await opts.spawn(exe, args);
        return await new Promise<PowerShellResult>((resolve, reject) => {
          const child = spawn(exe, args, {
            stdio: ['ignore', 'pipe', 'pipe'],
            windowsHide: true,
          });
          let stdout = '';
          let stderr = '';
          child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
          child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
          child.on('error', reject);
          child.on('close', (code) => resolve({ code, stdout, stderr }));
        });
      } finally {
        await fs.rm(file, { force: true });
      }
    },
  };
}
