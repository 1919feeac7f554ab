// The daemon's side of dataplane.cni: build the containerd network config list (flavor blockspeaker by default:
// blockspeaker as the main plugin, see src/daemon/cni-windows.ts) from the config and the pools the store knows
// (the same list `blockspeaker cni conflist` prints), and write it into the CNI config directory through the
// platform's atomic replace, only when it changed. A failure is reported (log and /dataplane), not fatal: pods
// already running keep working, and the next start tries again.
import path from 'node:path';
import type { HnsCniConfig } from '../config/types.ts';
import { buildConflist } from '../hns/conflist.ts';
import type { Pool } from '../ipam/types.ts';
import { writeFileIfChanged, type WriteOutcome } from '../platform/atomic-file.ts';
import type { Platform } from '../platform/platform.ts';

export interface ConflistStatus {
  path: string;
  flavor: string;
  outcome: WriteOutcome | 'failed';
  error?: string;
  at: string;
}

/**
 * The conflist text (pretty JSON, trailing newline: what an operator would write by hand). `socket`: the daemon's
 * control socket when it is not the default (written for the blockspeaker and win-* flavors; sdnbridge drops it).
 */
export function conflistText(cni: HnsCniConfig, network: string, pools: readonly Pick<Pool, 'cidr' | 'natOutgoing' | 'disabled' | 'allowedUses'>[], opts: { socket?: string } = {}): string {
  const list = buildConflist({
    flavor: cni.flavor,
    network,
    pools: pools.filter((p) => p.allowedUses.includes('Workload')).map((p) => ({ cidr: p.cidr, natOutgoing: p.natOutgoing, disabled: p.disabled })),
    serviceCidr: cni.serviceCidr,
    nodeSubnet: cni.nodeSubnet,
    nodeIP: cni.nodeIP,
    dnsServers: cni.dnsServers,
    dnsSearch: cni.dnsSearch,
    ...(opts.socket ? { socket: opts.socket } : {}),
  });
  return `${JSON.stringify(list, null, 2)}\n`;
}

export function writeConflist(platform: Platform, cni: HnsCniConfig, network: string, pools: readonly Pool[], now = Date.now(), opts: { socket?: string } = {}): ConflistStatus {
  const file = path.join(cni.confDir, cni.fileName);
  const at = new Date(now).toISOString();
  try {
    // Sorted by CIDR, so the store's listing order never makes a changed file out of the same pools.
    const sorted = [...pools].sort((a, b) => (a.cidr < b.cidr ? -1 : a.cidr > b.cidr ? 1 : 0));
    return { path: file, flavor: cni.flavor, outcome: writeFileIfChanged(platform, file, conflistText(cni, network, sorted, opts)), at };
  } catch (e) {
    return { path: file, flavor: cni.flavor, outcome: 'failed', error: (e as Error).message, at };
  }
}
