// `blockspeaker cni conflist`: the containerd network config list for this Windows node, from the node config.
import { loadConfig } from '../config/config.ts';
import { CONFLIST_FLAVORS, buildConflist, type ConflistFlavor } from '../hns/conflist.ts';
import { HNS_DEFAULT_NETWORK } from '../hns/limits.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker cni conflist --flavor blockspeaker|win-bridge|win-overlay|sdnbridge -c node.yaml --service-cidr CIDR
                                --node-subnet CIDR [--node-ip IP] [--dns-server IP]... [--dns-search DOMAIN]...
Prints the CNI network config list (JSON) for containerd, named after dataplane.network: blockspeaker as the main
plugin (the daemon makes each pod's endpoint), or win-bridge/win-overlay/sdnbridge with ipam blockspeaker-cni, an
OutBoundNAT policy excepting every pool, the service CIDR and the node's subnet, and the SDNRoute policies
kube-proxy needs (service CIDR, the node's own address).
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (sub !== 'conflist') throw new CliError(`cni: unknown command "${sub}" (try: conflist)`);
  const CMD = 'cni conflist';
  const { values } = parse(CMD, rest, {
    flavor: { type: 'string' }, config: { type: 'string', short: 'c' }, 'service-cidr': { type: 'string' },
    'node-subnet': { type: 'string' }, 'node-ip': { type: 'string' }, 'dns-server': { type: 'string', multiple: true },
    'dns-search': { type: 'string', multiple: true },
  });
  const flavor = required(CMD, values, 'flavor');
  if (!(CONFLIST_FLAVORS as readonly string[]).includes(flavor)) throw new CliError(`${CMD}: --flavor must be ${CONFLIST_FLAVORS.join(', ')}, got "${flavor}"`);
  const cfg = loadConfig(required(CMD, values, 'config'));
  const dp = cfg.dataplane;
  try {
    const out = buildConflist({
      flavor: flavor as ConflistFlavor,
      network: dp.kind === 'hns' ? dp.network ?? HNS_DEFAULT_NETWORK : HNS_DEFAULT_NETWORK,
      pools: (cfg.ipam?.pools ?? []).filter((p) => p.allowedUses.includes('Workload')),
      serviceCidr: required(CMD, values, 'service-cidr'),
      nodeSubnet: required(CMD, values, 'node-subnet'),
      nodeIP: values['node-ip'] as string | undefined,
      dnsServers: values['dns-server'] as string[] | undefined,
      dnsSearch: values['dns-search'] as string[] | undefined,
    });
    process.stdout.write(JSON.stringify(out, null, 2) + '\n');
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(`${CMD}: ${(e as Error).message}`);
  }
  return 0;
}
