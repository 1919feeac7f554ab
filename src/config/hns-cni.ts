// dataplane.cni (with kind hns): the containerd network config list the daemon writes into the CNI config directory
// at start (src/hns/conflist.ts builds it; the same as `blockspeaker cni conflist` prints). Field by field, with
// the path in every error; the flavor must fit the HNS mode (blockspeaker, the default, fits every mode;
// win-bridge L2Bridge/L2Tunnel; win-overlay Overlay; sdnbridge L2Bridge), so the conflist never names a plugin
// that cannot attach to our network.
import { CONFLIST_FLAVORS, FLAVOR_MODES } from '../hns/conflist.ts';
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../net/ip.ts';
import { type Checker, type Path, show } from './check.ts';
import type { HnsCniConfig } from './types.ts';

export const HNS_CNI_FIELDS = ['confDir', 'fileName', 'flavor', 'serviceCidr', 'nodeSubnet', 'nodeIP', 'dnsServers', 'dnsSearch'] as const;
export const DEFAULT_CONFLIST_NAME = '10-blockspeaker.conflist';

export function hnsCniSection(c: Checker, P: Path, v: unknown, mode: 'l2bridge' | 'l2tunnel' | 'overlay' | undefined): HnsCniConfig | undefined {
  const o = c.object(P, v, HNS_CNI_FIELDS, ['confDir', 'serviceCidr', 'nodeSubnet']);
  if (!o) return undefined;
  let ok = true;
  const must = <T>(x: T | undefined): T | undefined => {
    if (x === undefined) ok = false;
    return x;
  };
  const prefix = (name: string): string | undefined => {
    const x = o[name];
    if (x === undefined) return undefined;
    try {
      if (typeof x !== 'string') throw new Error('');
      return formatPrefix(parsePrefix(x));
    } catch (e) {
      return must(c.bad([...P, name], `a prefix like 10.96.0.0/12${(e as Error).message ? ` (${(e as Error).message})` : ''}`, x));
    }
  };
  const ip = (path: Path, x: unknown): string | undefined => {
    try {
      if (typeof x === 'string') return formatIP(parseIP(x));
    } catch { /* reported below */ }
    return must(c.bad(path, 'an IP address', x));
  };
  const confDir = o.confDir === undefined ? undefined : must(c.string([...P, 'confDir'], o.confDir));
  const fileName = o.fileName === undefined ? DEFAULT_CONFLIST_NAME : must(c.string([...P, 'fileName'], o.fileName));
  if (fileName !== undefined && (/[\\/]/.test(fileName) || !/\.(conflist|conf|json)$/.test(fileName))) {
    ok = c.fail([...P, 'fileName'], `a file name (no directory) ending in .conflist, .conf or .json (containerd reads only those), got ${show(fileName)}`) ?? false;
  }
  const flavor = o.flavor === undefined ? 'blockspeaker' : must(c.oneOf([...P, 'flavor'], o.flavor, CONFLIST_FLAVORS));
  if (flavor !== undefined && mode !== undefined && !FLAVOR_MODES[flavor].includes(mode)) {
    const fits = CONFLIST_FLAVORS.filter((f) => FLAVOR_MODES[f].includes(mode));
    ok = c.fail([...P, 'flavor'], `${flavor} does not drive a ${mode} network: use ${fits.join(' or ')} with mode ${mode}`) ?? false;
  }
  const serviceCidr = prefix('serviceCidr');
  const nodeSubnet = prefix('nodeSubnet');
  const nodeIP = o.nodeIP === undefined ? undefined : ip([...P, 'nodeIP'], o.nodeIP);
  const dnsServers = o.dnsServers === undefined ? undefined : c.list([...P, 'dnsServers'], o.dnsServers, (p, x) => ip(p, x));
  if (o.dnsServers !== undefined && !Array.isArray(o.dnsServers)) ok = false;
  const dnsSearch = o.dnsSearch === undefined ? undefined : c.list([...P, 'dnsSearch'], o.dnsSearch, (p, x) => must(c.string(p, x)));
  if (o.dnsSearch !== undefined && !Array.isArray(o.dnsSearch)) ok = false;
  if (!ok || !confDir || !fileName || !flavor || !serviceCidr || !nodeSubnet) return undefined;
  const out: HnsCniConfig = { confDir, fileName, flavor, serviceCidr, nodeSubnet };
  if (nodeIP !== undefined) out.nodeIP = nodeIP;
  if (dnsServers !== undefined) out.dnsServers = dnsServers;
  if (dnsSearch !== undefined) out.dnsSearch = dnsSearch;
  return out;
}
