// The few Calico v3 resources IPAM needs, as IPAM's own records:
//   /calico/resources/v3/projectcalico.org/ippools/<name>   IPPool (spec.cidr, blockSize, nodeSelector, ...) as a Pool
//   /calico/resources/v3/projectcalico.org/nodes/<name>     Node (IPAM needs only the name and labels: the OS is
//                                                           the kubernetes.io/os label) as a Host
// Their JSON is read and written in src/calico/ (ippool.ts, node.ts); the full Node and BGP kinds belong to the
// cluster layer; this maps only what the allocator uses.
import { familyOfText } from '../../net/ip.ts';
import { validatePool } from '../validate.ts';
import { IpamError, type Host, type Pool, type PoolSpec } from '../types.ts';
import { CalicoDecodeError } from '../../calico/ipam-model.ts';
import { readIPPool, writeIPPool } from '../../calico/ippool.ts';
import { decodeCalicoNode } from '../../calico/node.ts';

/** An IPPool resource as our Pool. Calico reserves addresses only in Windows IPv4 blocks: IPv6 pools reserve none. */
export function decodeIPPool(key: string, text: string): Pool {
  const { name, cidr, fields } = readIPPool(key, text);
  const ps: PoolSpec = { name, cidr, ...(fields as Partial<Pool>) };
  ps.reservation = familyOfText(cidr.split('/')[0]) === 4 ? { kind: 'auto' } : { kind: 'none' };
  try {
    return validatePool(ps);
  } catch (e) {
    throw new CalicoDecodeError(`${key}: ${(e as Error).message}`);
  }
}

export function encodeIPPool(p: Pool, now: () => number): string {
  const v4 = familyOfText(p.cidr.split('/')[0]) === 4;
  if (p.reservation.kind !== 'auto' && !(p.reservation.kind === 'none' && !v4)) {
    throw new IpamError('INVALID', `pool ${p.name}: the calico layout cannot keep a ${p.reservation.kind} reservation (Calico reserves only Windows IPv4 blocks' 0, 1, 2 and last)`);
  }
  return writeIPPool(p, now);
}

/** A Calico Node as an IPAM host: its name, labels, and OS from the kubernetes.io/os label (src/calico/node.ts reads it). */
export function decodeNode(key: string, text: string): Host {
  try {
    const n = decodeCalicoNode(key, text);
    return { name: n.name, os: n.os, labels: n.labels };
  } catch (e) {
    throw new CalicoDecodeError((e as Error).message);
  }
}
