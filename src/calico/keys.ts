// Where Calico keeps its records in etcd v3: the v3 resources (/calico/resources/v3/projectcalico.org/<plural>/<name>)
// and IPAM's v2 records (/calico/ipam/v2/...). One file for every key we read or write, so the roots have one name.
// The records' JSON lives beside it (node.ts, ippool.ts, ipam-model.ts).

export const CALICO_V3_ROOT = '/calico/resources/v3/projectcalico.org/';
export const CALICO_NODES = `${CALICO_V3_ROOT}nodes/`;

/** The v3 resources IPAM reads: pools, nodes (as hosts) and the IPAMConfiguration resource. */
export const resourceKeys = {
  ippools: `${CALICO_V3_ROOT}ippools/`,
  ippool: (name: string) => `${CALICO_V3_ROOT}ippools/${name}`,
  nodes: CALICO_NODES,
  node: (name: string) => `${CALICO_V3_ROOT}nodes/${name}`,
  ipamConfiguration: `${CALICO_V3_ROOT}ipamconfigurations/default`,
};

export const CALICO_IPAM = '/calico/ipam/v2/';

const dashed = (cidr: string): string => cidr.replace('/', '-');
const family = (cidr: string): string => (cidr.includes(':') ? '6' : '4');

/** IPAM's v2 records: settings, blocks, host affinities and handles (their JSON: ipam-model.ts). */
export const calicoKeys = {
  config: `${CALICO_IPAM}config`,
  blocks: `${CALICO_IPAM}assignment/`,
  block: (cidr: string) => `${CALICO_IPAM}assignment/ipv${family(cidr)}/block/${dashed(cidr)}`,
  allHostAffinities: `${CALICO_IPAM}host/`,
  hostAffinities: (host: string) => `${CALICO_IPAM}host/${host}/`,
  affinity: (host: string, cidr: string) => `${CALICO_IPAM}host/${host}/ipv${family(cidr)}/block/${dashed(cidr)}`,
  handles: `${CALICO_IPAM}handle/`,
  handle: (id: string) => `${CALICO_IPAM}handle/${id}`,
};
