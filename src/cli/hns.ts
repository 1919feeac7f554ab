// `blockspeaker hns ...`: Windows HNS tools. `plan`: the operations that take an HNS network from its actual state
// (HNS's own JSON) to the desired one, as JSON: what the daemon's executor sends through HCN and IP Helper.
import { readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { ReservationPolicy } from '../ipam/types.ts';
import { DEFAULT_ROUTE_METRIC, type DesiredState, type HnsConfig, type HnsMode, type LocalBlock, type RemoteRoute, buildDesired } from '../hns/desired.ts';
import { FakeHns } from '../hns/fake.ts';
import { type HnsSnapshot, emptySnapshot, normalizeMac, parseSnapshot } from '../hns/model.ts';
import { planHns } from '../hns/planner.ts';
import { HcnExecutor } from '../hns/hcn-executor.ts';
import { HNS_DEFAULT_NETWORK } from '../hns/limits.ts';
import { loadConfig } from '../config/config.ts';
import { hostPlatform, type Platform } from '../platform/platform.ts';
import { parseIP, parsePrefix } from '../net/ip.ts';
import { CliError, intOption, parse, required } from './args.ts';

const HELP = `usage: blockspeaker hns plan [--actual FILE] (--desired FILE | DESIRED FLAGS) [--emit-actual FILE]
       blockspeaker hns teardown -c node.yaml   (uninstall: our network, its endpoints and our routes; --help)

  Prints the operations that take the HNS network from its actual state to the desired one, as a JSON array of
  {"op", "network", "subnet", "body"} (body: HNS's JSON for HcnCreateNetwork / HcnModifyNetwork / HcnCreateEndpoint,
  or the route for CreateIpForwardEntry2 / DeleteIpForwardEntry2). Ops that must wait (an ip-subnet endpoints still use) are reported on stderr.

  --actual FILE          HNS JSON: Get-HnsNetwork output (one network or a list), or {Networks, Endpoints,
                         HostRoutes} as --emit-actual writes it. Absent: nothing exists yet.
  --desired FILE         JSON or YAML: {mode, network, adapter, pools: [{cidr, gateway, reservation}],
                         localBlocks: [CIDR], remoteRoutes: [{prefix, nextHop}], vni, drMac, ...}
  --mode MODE            l2bridge | l2tunnel | overlay
  --network NAME         the HNS network's name
  --pool CIDR=GATEWAY    a pool and the gateway its blocks share (repeatable)
  --micropool CIDR=GATEWAY  a pool whose blocks reserve nothing (ip-subnet Flags 0) (repeatable)
  --local-block CIDR     a block affine to this host (repeatable)
  --remote CIDR=NEXTHOP  a remote block or /32 and its BGP next hop (repeatable)
  --owned CIDR           extra range we own (e.g. the cluster CIDR) for remote routes outside the pools
  --vni N                overlay VNI, 4096..65535
  --dr-mac MAC           overlay distributed router MAC
  --provider-address IP  this node's provider address (overlay)
  --adapter NAME         physical adapter (NetAdapterName; management vNIC "vEthernet (NAME)")
  --mgmt-interface ALIAS management vNIC alias for l2bridge/l2tunnel host routes
  --route-metric N       RouteMetric that marks our host routes (default 271)
  --single-network       one block per host, the block is the network's subnet (kube-proxy)
  --emit-actual FILE     apply the plan to an in-memory HNS and write its resulting JSON to FILE
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (sub === 'plan') return plan(rest);
  if (sub === 'teardown') return teardown(rest);
  throw new CliError(`hns: unknown command "${sub}" (try: plan, teardown)`);
}

const TEARDOWN_HELP = `usage: blockspeaker hns teardown -c node.yaml

  Uninstall (Windows; install.ps1 uninstall runs it with the daemon stopped): removes the HNS network named by
  dataplane.network with every endpoint on it (each taken out of its namespace first), and this node's routes on the
  management vNIC (our route metric, a destination inside a pool or ownedPrefixes). Nothing else is touched. Prints
  what it removed as JSON.
`;

async function teardown(argv: string[], platform: Platform = hostPlatform()): Promise<number> {
  const TCMD = 'hns teardown';
  const { values } = parse(TCMD, argv, { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } });
  if (values.help) {
    process.stdout.write(TEARDOWN_HELP);
    return 0;
  }
  const cfg = loadConfig(required(TCMD, values, 'config'), platform);
  const dp = cfg.dataplane;
  if (dp.kind !== 'hns') throw new CliError(`${TCMD}: the config's dataplane.kind is ${dp.kind}, not hns: nothing of HNS is ours`);
  const apis = await platform.networking().catch((e: Error) => {
    throw new CliError(`${TCMD}: ${e.message}`);
  });
  const configured = dp.interfaceAlias ?? (dp.adapter ? `vEthernet (${dp.adapter})` : undefined);
  const exec: HcnExecutor = new HcnExecutor({ ...apis, network: dp.network ?? HNS_DEFAULT_NETWORK, interfaceAlias: async (): Promise<string | undefined> => configured ?? (await exec.defaultRouteInterface()) });
  const owned = [...(cfg.ipam?.pools ?? []).map((x) => x.cidr), ...(dp.ownedPrefixes ?? [])].map((x) => parsePrefix(x));
  try {
    const r = await exec.teardown(owned, dp.routeMetric ?? DEFAULT_ROUTE_METRIC);
    process.stdout.write(`${JSON.stringify({ network: dp.network ?? HNS_DEFAULT_NETWORK, removed: r })}\n`);
  } catch (e) {
    throw new CliError(`${TCMD}: ${(e as Error).message}`);
  }
  return 0;
}

const CMD = 'hns plan';

function readText(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new CliError(`${CMD}: ${flag} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

function readActual(file: string | undefined): HnsSnapshot {
  if (file === undefined) return emptySnapshot();
  const text = readText('--actual', file).replace(/^\ufeff/, ''); // PowerShell's Out-File writes a BOM
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CliError(`${CMD}: --actual ${file}: not JSON: ${(e as Error).message}`);
  }
  try {
    return parseSnapshot(json);
  } catch (e) {
    throw new CliError(`${CMD}: --actual ${file}: ${(e as Error).message}`);
  }
}

/** "CIDR=VALUE" from a flag; checks both halves and names the flag on error. */
function pair(flag: string, text: string, check: (v: string) => void): [string, string] {
  const eq = text.indexOf('=');
  if (eq <= 0 || eq === text.length - 1) throw new CliError(`${CMD}: --${flag} expects CIDR=${flag === 'remote' ? 'NEXTHOP' : 'GATEWAY'}, got "${text}"`);
  const cidr = text.slice(0, eq).trim();
  const value = text.slice(eq + 1).trim();
  try {
    parsePrefix(cidr);
  } catch (e) {
    throw new CliError(`${CMD}: --${flag} ${text}: ${(e as Error).message}`);
  }
  try {
    check(value);
  } catch (e) {
    throw new CliError(`${CMD}: --${flag} ${text}: ${(e as Error).message}`);
  }
  return [cidr, value];
}

interface Inputs {
  config: HnsConfig;
  localBlocks: (string | LocalBlock)[];
  remoteRoutes: RemoteRoute[];
  /** How to name a remote route in errors (the flag, or the file field). */
  remoteName: (prefix: string) => string;
}

function fromFlags(v: Record<string, string | string[] | boolean | undefined>): Inputs {
  const str = (k: string) => v[k] as string | undefined;
  const list = (k: string) => (v[k] as string[] | undefined) ?? [];
  const mode = str('mode');
  if (mode === undefined) throw new CliError(`${CMD}: --mode is required (l2bridge, l2tunnel or overlay), or give --desired FILE`);
  if (!['l2bridge', 'l2tunnel', 'overlay'].includes(mode)) throw new CliError(`${CMD}: --mode must be l2bridge, l2tunnel or overlay, got "${mode}"`);
  const network = str('network');
  if (!network) throw new CliError(`${CMD}: --network is required`);
  const vni = intOption(CMD, 'vni', str('vni'), 4096, 65535);
  const drMac = str('dr-mac');
  if (drMac !== undefined && normalizeMac(drMac) === null) throw new CliError(`${CMD}: --dr-mac must be a MAC address like 00-15-5D-01-02-03, got "${drMac}"`);
  if (mode === 'overlay' && vni === undefined) throw new CliError(`${CMD}: --mode overlay needs --vni (4096..65535)`);
  if (mode === 'overlay' && drMac === undefined) throw new CliError(`${CMD}: --mode overlay needs --dr-mac`);
  const checkIP = (s: string) => void parseIP(s);
  const pools: HnsConfig['pools'] = [];
  for (const t of list('pool')) {
    const [cidr, gateway] = pair('pool', t, checkIP);
    pools.push({ cidr, gateway });
  }
  const none: ReservationPolicy = { kind: 'none' };
  for (const t of list('micropool')) {
    const [cidr, gateway] = pair('micropool', t, checkIP);
    pools.push({ cidr, gateway, reservation: none });
  }
  const owned = list('owned');
  for (const o of owned) {
    try {
      parsePrefix(o);
    } catch (e) {
      throw new CliError(`${CMD}: --owned ${o}: ${(e as Error).message}`);
    }
  }
  const localBlocks = list('local-block').map((b) => {
    try {
      parsePrefix(b);
    } catch (e) {
      throw new CliError(`${CMD}: --local-block ${b}: ${(e as Error).message}`);
    }
    return b;
  });
  const remoteText = new Map<string, string>();
  const remoteRoutes = list('remote').map((t) => {
    const [prefix, nextHop] = pair('remote', t, checkIP);
    remoteText.set(parsePrefix(prefix).toString(), t);
    return { prefix, nextHop };
  });
  const pa = str('provider-address');
  if (pa !== undefined) {
    try {
      parseIP(pa);
    } catch (e) {
      throw new CliError(`${CMD}: --provider-address: ${(e as Error).message}`);
    }
  }
  return {
    config: {
      mode: mode as HnsMode,
      network,
      adapter: str('adapter'),
      managementInterface: str('mgmt-interface'),
      pools,
      ownedPrefixes: owned,
      vni,
      drMac,
      providerAddress: pa,
      singleNetwork: v['single-network'] === true,
      routeMetric: intOption(CMD, 'route-metric', str('route-metric'), 1, 9999),
    },
    localBlocks,
    remoteRoutes,
    remoteName: (p) => `--remote ${remoteText.get(p) ?? p}`,
  };
}

function fromFile(file: string): Inputs {
  const text = readText('--desired', file);
  let doc: Record<string, unknown>;
  try {
    doc = parseYaml(text) as Record<string, unknown>;
  } catch (e) {
    throw new CliError(`${CMD}: --desired ${file}: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new CliError(`${CMD}: --desired ${file}: expected a mapping`);
  const { localBlocks = [], remoteRoutes = [], ...config } = doc as { localBlocks?: unknown; remoteRoutes?: unknown };
  if (!Array.isArray(localBlocks)) throw new CliError(`${CMD}: --desired ${file}: localBlocks must be a list`);
  if (!Array.isArray(remoteRoutes)) throw new CliError(`${CMD}: --desired ${file}: remoteRoutes must be a list`);
  const routes: RemoteRoute[] = remoteRoutes.map((r, i) => {
    if (typeof r === 'string' && r.includes('=')) {
      const [prefix, nextHop] = r.split('=', 2);
      return { prefix: prefix.trim(), nextHop: nextHop.trim() };
    }
    if (r && typeof r === 'object' && typeof (r as RemoteRoute).prefix === 'string') return r as RemoteRoute;
    throw new CliError(`${CMD}: --desired ${file}: remoteRoutes[${i}] must be {prefix, nextHop} or "CIDR=NEXTHOP"`);
  });
  return {
    config: config as unknown as HnsConfig,
    localBlocks: localBlocks as (string | LocalBlock)[],
    remoteRoutes: routes,
    remoteName: (p) => `--desired ${file}: remote route ${p}`,
  };
}

async function plan(argv: string[]): Promise<number> {
  const { values } = parse(CMD, argv, {
    actual: { type: 'string' },
    desired: { type: 'string' },
    mode: { type: 'string' },
    network: { type: 'string' },
    pool: { type: 'string', multiple: true },
    micropool: { type: 'string', multiple: true },
    'local-block': { type: 'string', multiple: true },
    remote: { type: 'string', multiple: true },
    owned: { type: 'string', multiple: true },
    vni: { type: 'string' },
    'dr-mac': { type: 'string' },
    'provider-address': { type: 'string' },
    adapter: { type: 'string' },
    'mgmt-interface': { type: 'string' },
    'route-metric': { type: 'string' },
    'single-network': { type: 'boolean' },
    'emit-actual': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const desiredFlags = ['mode', 'network', 'pool', 'micropool', 'local-block', 'remote', 'owned', 'vni', 'dr-mac', 'provider-address', 'adapter', 'mgmt-interface', 'route-metric', 'single-network'];
  let inputs: Inputs;
  if (values.desired !== undefined) {
    const mixed = desiredFlags.find((f) => (values as Record<string, unknown>)[f] !== undefined);
    if (mixed) throw new CliError(`${CMD}: give the desired state as --desired FILE or as flags, not both (--${mixed})`);
    inputs = fromFile(values.desired);
  } else inputs = fromFlags(values as Record<string, string | string[] | boolean | undefined>);

  let desired: DesiredState;
  try {
    desired = buildDesired(inputs);
  } catch (e) {
    const err = e as Error;
    if (err.name === 'ConfigError' || err.name === 'AddressError') throw new CliError(`${CMD}: ${err.message}`);
    throw e;
  }
  if (desired.ignored.length > 0) {
    const first = desired.ignored[0];
    const hint = first.reason.startsWith('outside') ? ' (add --owned CIDR, or a pool, that covers it)' : '';
    throw new CliError(`${CMD}: ${inputs.remoteName(first.prefix)}: ${first.reason}${hint}`);
  }

  const actual = readActual(values.actual);
  const result = planHns(actual, desired);
  for (const b of result.blocked) process.stderr.write(`blockspeaker: ${CMD}: blocked ${b.op} ${b.object}: ${b.reason}\n`);

  if (values['emit-actual'] !== undefined) {
    const fake = FakeHns.fromSnapshot(actual);
    const r = fake.applyAll(result.ops);
    if (r.error) {
      throw new CliError(`${CMD}: --emit-actual: the in-memory HNS refused op ${r.applied} (${r.failedOp?.op}): ${r.error.message}`);
    }
    try {
      writeFileSync(values['emit-actual'], JSON.stringify(fake.snapshot(), null, 2) + '\n');
    } catch (e) {
      throw new CliError(`${CMD}: --emit-actual ${values['emit-actual']}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }

  process.stdout.write(JSON.stringify(result.ops, null, 2) + '\n');
  return 0;
}
