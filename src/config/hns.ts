// dataplane kind hns: field-by-field validation, and the checks against the rest of the file (node OS, pools) that
// the HNS addressing model needs. Ranges come from src/hns/limits.ts, which the planner uses too.
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../net/ip.ts';
import {
  HNS_FIRST_BLOCK_RESERVED, HNS_MODES, HNS_ROUTE_METRIC_MAX, HNS_ROUTE_METRIC_MIN, HNS_VNI_MAX, HNS_VNI_MIN,
} from '../hns/limits.ts';
import { type Checker, type Path, show } from './check.ts';
import { hnsCniSection } from './hns-cni.ts';
import type { Config, HnsDataplaneConfig, PoolConfig } from './types.ts';

export const HNS_FIELDS = [
  'kind', 'network', 'mode', 'vni', 'adapter', 'interfaceAlias', 'drMac', 'providerAddress', 'module', 'ownedPrefixes',
  'singleNetwork', 'routeMetric', 'endpointGraceSeconds', 'cni',
] as const;

const MAC = /^[0-9A-Fa-f]{2}([-:])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$/;

/** The hns variant of the dataplane section; undefined (with issues recorded) when anything is wrong. */
export function hnsDataplane(c: Checker, P: Path, o: Record<string, unknown>): HnsDataplaneConfig | undefined {
  let ok = true;
  const field = <T>(name: string, fn: (path: Path, x: unknown) => T | undefined): T | undefined => {
    if (o[name] === undefined) return undefined;
    const r = fn([...P, name], o[name]);
    if (r === undefined) ok = false;
    return r;
  };
  const text = (path: Path, x: unknown) => c.string(path, x);
  const mode = c.opt(o.mode, 'l2bridge' as const, (x) => c.oneOf([...P, 'mode'], x, HNS_MODES));
  if (mode === undefined) ok = false;
  const network = field('network', text);
  const vni = field('vni', (p, x) => c.int(p, x, HNS_VNI_MIN, HNS_VNI_MAX));
  const adapter = field('adapter', text);
  const interfaceAlias = field('interfaceAlias', text);
  const drMac = field('drMac', (p, x) =>
    typeof x === 'string' && MAC.test(x) ? x.replace(/[:]/g, '-').toUpperCase() : c.bad(p, 'a MAC address like 00-15-5D-00-00-01', x));
  const providerAddress = field('providerAddress', (p, x) => {
    try {
      if (typeof x === 'string') return formatIP(parseIP(x));
    } catch { /* reported below */ }
    return c.bad(p, 'an IP address', x);
  });
  // The PowerShell module path of the old executor: HNS is programmed through computenetwork.dll now.
  if (o.module !== undefined) ok = c.fail([...P, 'module'], 'no longer used: HNS is programmed through computenetwork.dll, with no PowerShell module; remove it') ?? false;
  const ownedPrefixes = field('ownedPrefixes', (p, x) => {
    if (!Array.isArray(x)) return c.bad(p, 'a list of prefixes', x);
    const out: string[] = [];
    let good = true;
    x.forEach((v, i) => {
      try {
        if (typeof v !== 'string') throw new Error('');
        const pre = parsePrefix(v);
        // Claiming more than a /8 would let the programmer remove routes it never made.
        if (pre.family === 4 && pre.len < 8) good = c.fail([...p, i], `wider than a /8; refusing to claim it, got ${show(v)}`) ?? false;
        else out.push(formatPrefix(pre));
      } catch (e) {
        good = c.bad([...p, i], `a prefix like 10.244.0.0/16${(e as Error).message ? ` (${(e as Error).message})` : ''}`, v) ?? false;
      }
    });
    return good ? out : undefined;
  });
  const singleNetwork = field('singleNetwork', (p, x) => c.bool(p, x));
  const routeMetric = field('routeMetric', (p, x) => c.int(p, x, HNS_ROUTE_METRIC_MIN, HNS_ROUTE_METRIC_MAX));
  const endpointGraceSeconds = field('endpointGraceSeconds', (p, x) => c.int(p, x, 0, 86400));
  const cni = field('cni', (p, x) => hnsCniSection(c, p, x, mode));

  if (mode === 'overlay') {
    if (o.vni === undefined) ok = c.fail([...P, 'vni'], `required for mode overlay (${HNS_VNI_MIN}..${HNS_VNI_MAX})`) ?? false;
    if (o.drMac === undefined) ok = c.fail([...P, 'drMac'], 'required for mode overlay (the distributed router MAC of this node)') ?? false;
  } else if (mode !== undefined) {
    for (const k of ['vni', 'drMac', 'providerAddress'] as const) {
      if (o[k] !== undefined) ok = c.fail([...P, k], `only used with mode overlay, not ${mode}`) ?? false;
    }
  }
  if (!ok || mode === undefined) return undefined;
  const d: HnsDataplaneConfig = { kind: 'hns', mode };
  if (network !== undefined) d.network = network;
  if (vni !== undefined) d.vni = vni;
  if (adapter !== undefined) d.adapter = adapter;
  if (interfaceAlias !== undefined) d.interfaceAlias = interfaceAlias;
  if (drMac !== undefined) d.drMac = drMac;
  if (providerAddress !== undefined) d.providerAddress = providerAddress;
  if (ownedPrefixes !== undefined) d.ownedPrefixes = ownedPrefixes;
  if (singleNetwork !== undefined) d.singleNetwork = singleNetwork;
  if (routeMetric !== undefined) d.routeMetric = routeMetric;
  if (endpointGraceSeconds !== undefined) d.endpointGraceSeconds = endpointGraceSeconds;
  if (cni !== undefined) d.cni = cni;
  return d;
}

/**
 * Why a pool cannot serve the HNS addressing model (gateway at ordinal 1 and host endpoint at ordinal 2 of the node's
 * first block in the pool, both reserved by IPAM), or null when it can. Shared by config load (pools in the file)
 * and the daemon (pools known only from the store).
 */
export function hnsPoolProblem(pool: Pick<PoolConfig, 'cidr' | 'blockSize' | 'reservation'>): string | null {
  const r = pool.reservation;
  const hostBits = (parsePrefix(pool.cidr).family === 4 ? 32 : 128) - pool.blockSize;
  const need = HNS_FIRST_BLOCK_RESERVED;
  if (hostBits < 2) return `blockSize /${pool.blockSize} leaves no room for the HNS gateway (.1) and host endpoint (.2): use blocks of 4 addresses or more`;
  switch (r.kind) {
    case 'auto':
      return null;
    case 'perBlock':
      return r.start >= need ? null : `reservation perBlock start ${r.start} does not reserve the HNS gateway (.1) and host endpoint (.2): use start >= ${need}`;
    case 'perHost':
      return r.count >= need ? null : `reservation perHost count ${r.count} does not reserve the HNS gateway (.1) and host endpoint (.2): use count >= ${need}`;
    case 'perPool':
      return 'reservation perPool reserves addresses once per pool, but every HNS node needs its own gateway and host endpoint: use perHost (count >= 3)';
    case 'none':
      return 'reservation none reserves no address for the HNS gateway and host endpoint: use perHost (count >= 3)';
  }
}

/** Checks of dataplane hns against the node and the pools (run after every section parsed). */
export function checkHnsAgainst(c: Checker, cfg: Config): void {
  const dp = cfg.dataplane;
  if (dp.kind !== 'hns') return;
  if (cfg.node.os !== 'windows') {
    c.fail(['dataplane', 'kind'], `hns needs node.os: windows (IPAM reserves the HNS gateway and host endpoint only in Windows blocks), got node.os ${show(cfg.node.os)}`);
  }
  if (dp.singleNetwork && cfg.ipam && cfg.ipam.maxBlocksPerHost !== 1) {
    c.fail(['dataplane', 'singleNetwork'], `one block per host: set ipam.maxBlocksPerHost: 1, got ${cfg.ipam.maxBlocksPerHost}`);
  }
  for (const [i, p] of (cfg.ipam?.pools ?? []).entries()) {
    if (p.disabled || !p.allowedUses.includes('Workload')) continue; // never hands pod addresses to this node
    const why = hnsPoolProblem(p);
    if (why) c.fail(['ipam', 'pools', i, why.startsWith('blockSize') ? 'blockSize' : 'reservation'], `${why} (dataplane hns)`);
  }
}
