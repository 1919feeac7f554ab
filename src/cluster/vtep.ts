// Overlay tunnel facts each node publishes in the datastore, beside its block affinities, so every other node can
// turn that node's blocks into RemoteSubnetRoute policies: the provider address (PA: the node's own address, where
// VXLAN packets for its pods go) and its distributed router MAC (what the encapsulated frames are addressed to).
//
// Two layouts, as for nodes (node.ts):
//  - ours: /blockspeaker/ipam/v1/vteps/<node> = {"providerAddress": "192.0.2.7", "drMac": "00-15-5D-01-02-03"};
//  - Calico's: the v3 Node resource, where Calico for Windows keeps them too: spec.vxlanTunnelMACAddr (the MAC) and
//    spec.bgp.ipv4Address (felix's windows VXLAN manager uses the node's IPv4 address as ProviderAddress). Only
//    vxlanTunnelMACAddr is written: the BGP address is the node registry's; a PA that differs from it cannot be
//    expressed there, and the publisher says so. The Node's JSON is read and written by src/calico/node.ts.
import type { Store } from '../store/types.ts';
import { formatIP, parseIP } from '../net/ip.ts';
import { CALICO_NODES } from '../calico/keys.ts';
import { readCalicoNodeVxlan, writeCalicoNodeVxlanMac } from '../calico/node.ts';
import { nodeIP } from './node.ts';

export interface VtepFacts {
  /** The node's provider address, canonical text. */
  providerAddress: string;
  /** Windows form, upper case: 00-15-5D-01-02-03. */
  drMac: string;
}

export class VtepError extends Error {
  override name = 'VtepError';
}

const MAC = /^[0-9A-Fa-f]{2}([-:])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$/;

/** A MAC in HNS's form (dashes, upper case), or undefined. */
export function windowsMac(text: unknown): string | undefined {
  return typeof text === 'string' && MAC.test(text) ? text.replace(/:/g, '-').toUpperCase() : undefined;
}

function canonicalIP(text: unknown): string | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    return formatIP(parseIP(text));
  } catch {
    return undefined;
  }
}

export interface VtepLayout {
  readonly name: 'blockspeaker' | 'calico';
  readonly prefix: string;
  key(node: string): string;
  /** The node name a key names, or null for keys that are not a node's. */
  nodeOf(key: string): string | null;
  /** The facts in a stored value; null when the value holds none (or not both). Never throws. */
  decode(value: string): Partial<VtepFacts> | null;
  /** The value to store, keeping what others wrote in `previous`. */
  encode(facts: VtepFacts, previous: string | undefined): string;
}

const OUR_ROOT = '/blockspeaker/ipam/v1/vteps/';

export const ourVtepLayout: VtepLayout = {
  name: 'blockspeaker',
  prefix: OUR_ROOT,
  key: (node) => `${OUR_ROOT}${encodeURIComponent(node)}`,
  nodeOf(key) {
    const rest = key.slice(OUR_ROOT.length);
    return key.startsWith(OUR_ROOT) && rest !== '' && !rest.includes('/') ? decodeURIComponent(rest) : null;
  },
  decode(value) {
    try {
      const o = JSON.parse(value) as Record<string, unknown>;
      return { providerAddress: canonicalIP(o.providerAddress), drMac: windowsMac(o.drMac) };
    } catch {
      return null;
    }
  },
  encode: (f) => JSON.stringify({ providerAddress: f.providerAddress, drMac: f.drMac }),
};

export const calicoVtepLayout: VtepLayout = {
  name: 'calico',
  prefix: CALICO_NODES,
  key: (node) => `${CALICO_NODES}${node}`,
  nodeOf(key) {
    const rest = key.slice(CALICO_NODES.length);
    return key.startsWith(CALICO_NODES) && rest !== '' && !rest.includes('/') ? rest : null;
  },
  decode(value) {
    try {
      const n = readCalicoNodeVxlan(JSON.parse(value));
      // an address that is not a string throws in nodeIP: the value then holds no facts, as any malformed one
      return { providerAddress: canonicalIP(nodeIP(n.ipv4Address as string | undefined)), drMac: windowsMac(n.vxlanTunnelMACAddr) };
    } catch {
      return null;
    }
  },
  encode(f, previous) {
    let prev: Record<string, any> = {};
    try {
      prev = previous === undefined ? {} : (JSON.parse(previous) as Record<string, any>);
    } catch { /* a malformed resource is replaced by a minimal one */ }
    return JSON.stringify(writeCalicoNodeVxlanMac(f.drMac, prev));
  },
};

export function vtepLayoutFor(layout: 'blockspeaker' | 'calico' | undefined): VtepLayout {
  return layout === 'calico' ? calicoVtepLayout : ourVtepLayout;
}

/** Check facts from the config (field names as in dataplane). */
export function checkFacts(providerAddress: unknown, drMac: unknown): VtepFacts {
  const pa = canonicalIP(providerAddress);
  if (!pa) throw new VtepError(`dataplane.providerAddress: an IP address is needed to publish this node's overlay facts, got ${JSON.stringify(providerAddress)}`);
  const mac = windowsMac(drMac);
  if (!mac) throw new VtepError(`dataplane.drMac: a MAC address like 00-15-5D-00-00-01, got ${JSON.stringify(drMac)}`);
  return { providerAddress: pa, drMac: mac };
}

/**
 * Write this node's facts (a compare-and-swap on what was read, retried), only when they differ. Returns a warning
 * when the layout stores a different PA than ours (Calico's Node keeps the BGP address, which others will use).
 */
export async function publishVtep(store: Store, layout: VtepLayout, node: string, facts: VtepFacts): Promise<{ written: boolean; warning?: string }> {
  const key = layout.key(node);
  for (let attempt = 0; attempt < 10; attempt++) {
    const kv = await store.get(key);
    const have = kv ? layout.decode(kv.value) : null;
    const warning = have?.providerAddress && have.providerAddress !== facts.providerAddress
      ? `node ${node}: ${key} says provider address ${have.providerAddress} (spec.bgp.ipv4Address), dataplane.providerAddress is ${facts.providerAddress}; other nodes use the former`
      : undefined;
    const sameMac = have?.drMac === facts.drMac;
    const samePa = layout.name === 'calico' || have?.providerAddress === facts.providerAddress;
    if (sameMac && samePa) return { written: false, warning };
    const r = await store.txn([{ key, modRevision: kv?.modRevision ?? 0 }], [{ type: 'put', key, value: layout.encode(facts, kv?.value) }]);
    if (r.succeeded) return { written: true, warning };
  }
  throw new VtepError(`node ${node}: publishing the overlay facts kept racing with other writes to ${key}; try again`);
}

/** Every node's published facts (complete ones only), by node name. */
export async function listVteps(store: Store, layout: VtepLayout): Promise<Map<string, VtepFacts>> {
  const out = new Map<string, VtepFacts>();
  for (const kv of await store.list(layout.prefix)) {
    const node = layout.nodeOf(kv.key);
    const f = node === null ? null : layout.decode(kv.value);
    if (node !== null && f?.providerAddress && f.drMac) out.set(node, { providerAddress: f.providerAddress, drMac: f.drMac });
  }
  return out;
}
