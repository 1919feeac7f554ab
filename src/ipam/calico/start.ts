// What a node does when it starts on Calico's layout. Calico's IPAM settings (/calico/ipam/v2/config) belong to
// the whole cluster, so the config file's values are not written over them; the one exception is turning
// strict_affinity on, which a Windows node needs and which the file may ask for explicitly.
import type { Ipam } from '../ipam.ts';
import { IpamError, type OS } from '../types.ts';
import { calicoKeys } from '../../calico/keys.ts';

export async function startCalicoLayout(ipam: Ipam, node: { name: string; os: OS }, wanted: { strictAffinity: boolean }): Promise<void> {
  const cfg = await ipam.getConfig();
  if (cfg.strictAffinity) return;
  if (wanted.strictAffinity) {
    await ipam.setConfig({ strictAffinity: true });
    return;
  }
  if (node.os === 'windows') {
    throw new IpamError(
      'INVALID',
      `ipam.layout calico: Windows node ${node.name} needs strict_affinity: true in ${calicoKeys.config}, and it is false. ` +
        'Set it with calicoctl ipam configure --strictaffinity=true, or set ipam.strictAffinity: true in this config to let blockspeaker set it ' +
        '(then no Linux node borrows addresses from another node\'s block either)',
    );
  }
}
