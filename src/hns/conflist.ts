// The containerd CNI network configuration list for a Windows node. Pure: config values in, JSON out.
//
// Flavors (the main plugin the list names):
//  - blockspeaker (default): blockspeaker-cni is the main plugin; the daemon creates each pod's HCN endpoint with
//    the policies below built from its own config (src/hns/endpoint.ts), so the list only names the network and
//    asks for the runtime's portMappings and dns. Fits every HNS mode.
//  - win-bridge (L2Bridge/L2Tunnel) / win-overlay (Overlay), containernetworking/plugins, with blockspeaker-cni as
//    their IPAM: "apiVersion": 2 (HCN, not the V1 HNS path that expects the endpoint to exist), so the endpoint
//    policies below are in HCN V2 shape ({Type, Settings}) as their sample-v2.conf writes them.
//  - sdnbridge (microsoft/windows-container-networking; L2Bridge) with blockspeaker-cni as its IPAM: the same
//    policies under "AdditionalArgs". It re-serialises the ipam section from its own struct (only type, subnet,
//    routes, ... survive) unless enableDualStack is set, so the IPAM plugin must find the daemon at its default pipe.
//
// Endpoint policies for the IPAM-only flavors:
//  - OutBoundNAT: pod traffic leaving the node is NATed to the node's address, except towards the Exceptions: every
//    IPv4 pool (pod to pod is never NATed), the service CIDR and the node's own subnet. One list serves all pools
//    of the node, so per-pool NAT is not expressible: the policy is left out when no pool asks for NAT (the main
//    plugin decides per pod, by the pool of its address).
//  - SDNRoute (NeedEncap): the service CIDR and the node's own address go through the host's vSwitch, where
//    kube-proxy's load balancers and the host live, instead of out of the physical NIC.
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../net/ip.ts';

export const CONFLIST_FLAVORS = ['blockspeaker', 'win-bridge', 'win-overlay', 'sdnbridge'] as const;
export type ConflistFlavor = (typeof CONFLIST_FLAVORS)[number];

/** The HNS modes each flavor's main plugin can attach pods to. */
export const FLAVOR_MODES: Readonly<Record<ConflistFlavor, readonly ('l2bridge' | 'l2tunnel' | 'overlay')[]>> = {
  blockspeaker: ['l2bridge', 'l2tunnel', 'overlay'],
  'win-bridge': ['l2bridge', 'l2tunnel'],
  'win-overlay': ['overlay'],
  sdnbridge: ['l2bridge'],
};

export interface ConflistInput {
  flavor: ConflistFlavor;
  /** The HNS network's name: the conflist's and the main plugin's name. */
  network: string;
  pools: { cidr: string; natOutgoing: boolean; disabled?: boolean }[];
  serviceCidr: string;
  /** The node's own subnet (its physical NIC's). */
  nodeSubnet: string;
  /** The node's address (its /32 is routed through the host). */
  nodeIP?: string;
  dnsServers?: string[];
  dnsSearch?: string[];
  cniVersion?: string;
  /** The daemon's control socket when it is not the default (main flavor only: the others cannot carry it reliably). */
  socket?: string;
}

/** cniVersion per flavor: sdnbridge knows 0.2.0 to 1.0.0 and reads its IPAM result as 0.2.0, so the plainest common one. */
const DEFAULT_VERSION: Record<ConflistFlavor, string> = { blockspeaker: '1.0.0', 'win-bridge': '0.3.1', 'win-overlay': '0.3.1', sdnbridge: '0.4.0' };

export function buildConflist(c: ConflistInput): Record<string, unknown> {
  const pfx = (what: string, text: string) => {
    try {
      return parsePrefix(text);
    } catch (e) {
      throw new Error(`${what}: ${(e as Error).message}`);
    }
  };
  if (!(CONFLIST_FLAVORS as readonly string[]).includes(c.flavor)) throw new Error(`flavor: must be one of ${CONFLIST_FLAVORS.join(', ')}, got ${JSON.stringify(c.flavor)}`);
  const pools = c.pools.filter((p) => !p.disabled);
  const poolPrefixes = pools.map((p, i) => pfx(`pools[${i}].cidr`, p.cidr));
  const service = pfx('serviceCidr', c.serviceCidr);
  const nodeSubnet = pfx('nodeSubnet', c.nodeSubnet);
  let nodeIP;
  try {
    nodeIP = c.nodeIP === undefined ? undefined : parseIP(c.nodeIP);
  } catch (e) {
    throw new Error(`nodeIP: ${(e as Error).message}`);
  }
  const cniVersion = c.cniVersion ?? DEFAULT_VERSION[c.flavor];

  if (c.flavor === 'blockspeaker') {
    const plugin: Record<string, unknown> = { type: 'blockspeaker', name: c.network, capabilities: { portMappings: true, dns: true } };
    if (c.socket) plugin.socket = c.socket;
    if (c.dnsServers?.length || c.dnsSearch?.length) plugin.dns = { nameservers: c.dnsServers ?? [], search: c.dnsSearch ?? [] };
    return { cniVersion, name: c.network, plugins: [plugin] };
  }

  const exceptions = [...new Set([...poolPrefixes, service, nodeSubnet].filter((p) => p.family === 4).map(formatPrefix))];
  const policies: Record<string, unknown>[] = [];
  const policy = (Type: string, Settings: Record<string, unknown>) => policies.push({ Name: 'EndpointPolicy', Value: { Type, Settings } });
  if (pools.some((p) => p.natOutgoing) && exceptions.length) policy('OutBoundNAT', { Exceptions: exceptions });
  policy('SDNRoute', { DestinationPrefix: formatPrefix(service), NeedEncap: true });
  if (nodeIP) policy('SDNRoute', { DestinationPrefix: `${formatIP(nodeIP)}/${nodeIP.family === 4 ? 32 : 128}`, NeedEncap: true });

  const plugin: Record<string, unknown> = { type: c.flavor, name: c.network, capabilities: { portMappings: true, dns: true } };
  if (c.flavor === 'sdnbridge') {
    const dual = poolPrefixes.some((p) => p.family === 4) && poolPrefixes.some((p) => p.family === 6);
    // With enableDualStack sdnbridge hands the IPAM plugin the original config, so num6 reaches it.
    plugin.ipam = dual ? { type: 'blockspeaker-cni', num4: 1, num6: 1 } : { type: 'blockspeaker-cni' };
    if (dual) plugin.optionalFlags = { enableDualStack: true };
    if (c.dnsServers?.length || c.dnsSearch?.length) plugin.dns = { Nameservers: c.dnsServers ?? [], Search: c.dnsSearch ?? [] };
    plugin.AdditionalArgs = policies;
  } else {
    plugin.apiVersion = 2;
    plugin.ipam = c.socket ? { type: 'blockspeaker-cni', socket: c.socket } : { type: 'blockspeaker-cni' };
    if (c.dnsServers?.length || c.dnsSearch?.length) plugin.dns = { nameservers: c.dnsServers ?? [], search: c.dnsSearch ?? [] };
    plugin.policies = policies;
  }
  return { cniVersion, name: c.network, plugins: [plugin] };
}
