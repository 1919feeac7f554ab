// The containerd CNI network configuration list for a Windows node (seed 003): Microsoft's win-bridge (L2Bridge) or
// win-overlay (Overlay) as the main plugin, blockspeaker-cni as its IPAM. Pure: config values in, JSON out.
//
// Endpoint policies (the HNS v1 form these plugins pass through to each pod's endpoint):
//  - OutBoundNAT: traffic leaving the node is NATed to the node's address, except towards the ExceptionList: every
//    pool (pod to pod is never NATed), the service CIDR and the node's own subnet. Pools whose natOutgoing is false
//    must not be NATed at all: their CIDRs are in the list like every pool's, and when no pool asks for NAT the
//    policy is left out (one list serves all pools of the node, so per-pool NAT beyond that is not expressible).
//  - ROUTE (NeedEncap): the service CIDR and the node's own address go through the host's vSwitch, where kube-proxy's
//    load balancers and the host live, instead of out of the physical NIC.
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../net/ip.ts';

export type ConflistFlavor = 'win-bridge' | 'win-overlay';

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
}

export function buildConflist(c: ConflistInput): Record<string, unknown> {
  const pfx = (what: string, text: string) => {
    try {
      return formatPrefix(parsePrefix(text));
    } catch (e) {
      throw new Error(`${what}: ${(e as Error).message}`);
    }
  };
  if (c.flavor !== 'win-bridge' && c.flavor !== 'win-overlay') throw new Error(`flavor: must be win-bridge or win-overlay, got ${JSON.stringify(c.flavor)}`);
  const pools = c.pools.filter((p) => !p.disabled);
  const service = pfx('serviceCidr', c.serviceCidr);
  const nodeSubnet = pfx('nodeSubnet', c.nodeSubnet);
  const exceptions = [...new Set([...pools.map((p, i) => pfx(`pools[${i}].cidr`, p.cidr)), service, nodeSubnet])];
  const policies: Record<string, unknown>[] = [];
  if (pools.some((p) => p.natOutgoing)) policies.push({ Name: 'EndpointPolicy', Value: { Type: 'OutBoundNAT', ExceptionList: exceptions } });
  policies.push({ Name: 'EndpointPolicy', Value: { Type: 'ROUTE', DestinationPrefix: service, NeedEncap: true } });
  if (c.nodeIP !== undefined) {
    const ip = parseIP(c.nodeIP);
    policies.push({ Name: 'EndpointPolicy', Value: { Type: 'ROUTE', DestinationPrefix: `${formatIP(ip)}/${ip.family === 4 ? 32 : 128}`, NeedEncap: true } });
  }
  const plugin: Record<string, unknown> = {
    type: c.flavor,
    name: c.network,
    capabilities: { portMappings: true, dns: true },
    ipam: { type: 'blockspeaker-cni' },
    policies,
  };
  if (c.dnsServers?.length || c.dnsSearch?.length) plugin.dns = { Nameservers: c.dnsServers ?? [], Search: c.dnsSearch ?? [] };
  return { cniVersion: c.cniVersion ?? '0.3.1', name: c.network, plugins: [plugin] };
}
