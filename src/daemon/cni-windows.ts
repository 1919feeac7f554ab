// The daemon's side of blockspeaker as the node's main CNI plugin on Windows (`"type": "blockspeaker"`): the plugin
// (src/cni/plugin.ts) stays a thin client and sends cni.add / cni.del / cni.check / cni.gc here, where the HCN work
// is done through the HcnApi the dataplane already has (one owner of computenetwork.dll, calls off the event loop).
//
//  - ADD: one address per family this node has a usable pool of (ipam.assign with gateway auto, so the gateway is
//    HNS's shared gateway of the pool's Subnet and the prefix length the Subnet's; ipam.assign also waits for the
//    block's ip-subnet when the daemon wires dataplaneReady), one endpoint named `<containerId>_<ifname>` holding
//    them (src/hns/endpoint.ts), attached to the pod's namespace (CNI_NETNS is its GUID). A retried ADD finds the
//    endpoint by name and returns the same result. A failure after the assign removes the endpoint and releases
//    the addresses, so a failed ADD leaves nothing behind.
//  - DEL: detach and delete the endpoint (found by name, on our network only), release the handle. Absent things
//    are done things: a second DEL succeeds.
//  - CHECK: the endpoint exists on our network, holds exactly the handle's (and prevResult's) addresses, and is in
//    the namespace.
//  - GC: endpoints on our network named like an attachment that is not in the runtime's valid list are deleted
//    (never the host endpoints `<network>_ep*`, never remote endpoints, never other networks'), and this network's
//    IPAM handles not in the list are released.
// Calls for one attachment run one after another (a retried ADD overlapping a slow first one, or GC meeting an ADD).
import { RESERVED_HANDLE_PREFIX, isReservedContainerId } from '../ipc/protocol.ts';
import { keyedSerial } from '../ipc/serial.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { parseSelector } from '../calico/selector.ts';
import { IpamError } from '../ipam/types.ts';
import { type Family, parsePrefix } from '../net/ip.ts';
import { type HcnApi, hcnQuery } from '../platform/windows-net-api.ts';
import {
  ENDPOINT_FLAG_REMOTE, EndpointSpecError, type ParsedEndpoint, bareGuid, buildEndpoint, checkContainerId, checkIfname, effectiveDns,
  endpointMatches, endpointName, isAttachmentName, isGuid, namespaceEndpointRequest, namespaceEndpoints, parseConfDns, parseEndpoint,
  parsePortMappings, parseRuntimeDns, type DnsSettings,
} from '../hns/endpoint.ts';
import { HCN, HcnError, isNotFound, sameId } from '../hns/model.ts';
import type { IpcHandler } from '../ipc/server.ts';
import type {
  AssignReply, CheckReply, CniAddParams, CniAddReply, CniCheckParams, CniCheckReply, CniDelParams, CniDelReply, CniDns, CniGcParams,
  CniGcReply, CniIP, CniRoute, HandleInfo, ReleaseReply,
} from '../ipc/protocol.ts';

/** A pool as the handlers need it. */
export interface CniPool {
  name: string;
  cidr: string;
  natOutgoing: boolean;
  /** A pod on this node may get an address from it (enabled, Workload use, node selector matches). Default true. */
  usable?: boolean;
}

/** The node's HNS network. */
export interface CniNetwork {
  /** HCN's ID (GUID). */
  id: string;
  /** Its Name: the conflist's and every request's network name. */
  name: string;
}

export interface WindowsCniOptions {
  hcn: HcnApi;
  /**
   * The IPAM handlers (what ipamHandlers() returns, the same map the daemon serves): ipam.assign, ipam.release,
   * ipam.check and ipam.handles are called in-process, so their per-handle ordering and the dataplane hooks apply.
   */
  ipam: Record<string, IpcHandler>;
  /** The node's HNS network, looked up by name (networkByName()); null while it does not exist. */
  network(): Promise<CniNetwork | null>;
  /** Every pool the store knows (all are NAT exceptions), with `usable` for this node. */
  pools(): Promise<CniPool[]>;
  /** Service CIDR(s): SDNRoute policies and NAT exceptions. */
  serviceCidr?: string | readonly string[];
  /** More NAT exceptions: cluster CIDRs, the node's subnet. */
  exceptions?: readonly string[];
  /** The node's address: an SDNRoute for its /32 (/128). */
  nodeIP?: string;
  /** DNS when neither runtimeConfig nor the network config gives it. */
  dns?: { servers?: string[]; search?: string[] };
  /** False when the network cannot carry IPv6 (Windows overlay): IPv6 pools are left out of ADD. Default true. */
  ipv6?: boolean;
  /** Overlay: endpoint MACs are this prefix + the IPv4 address (e.g. "0E-2A"). */
  macPrefix?: string;
  log?: { info(o: object, m: string): void; warn(o: object, m: string): void };
}

/** An error with the code the plugin maps to a CNI error code (src/cni/plugin.ts daemonError). */
export class CniHandlerError extends Error {
  override name = 'CniHandlerError';
  constructor(
    /** INVALID (7), NO_NETWORK (11), HCN_UNAVAILABLE (11), UNKNOWN_NETNS (3), CHECK_MISMATCH (101), NO_POOL (100), HCN (999). */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const invalid = (msg: string): never => {
  throw new CniHandlerError('INVALID', msg);
};

/**
 * Map a failure to an error the IPC server reports with a string code. Messages carry no command name: the plugin
 * puts "ADD: " (etc.) in front. `context` says what was being done, for HCN's errors.
 */
function wrap(e: unknown, context?: string): Error {
  if (e instanceof CniHandlerError || e instanceof IpamError) return e;
  if (e instanceof EndpointSpecError) return new CniHandlerError('INVALID', e.message);
  const msg = (m: string) => (context ? `${context}: ${m}` : m);
  if (e instanceof HcnError) return new CniHandlerError(e.code >>> 0 === HCN.UNAVAILABLE ? 'HCN_UNAVAILABLE' : 'HCN', msg(`HNS: ${e.message}`));
  return e instanceof Error ? e : new Error(String(e));
}

const familyOf = (cidr: string): Family => parsePrefix(cidr).family;

/** The node's network by name, as WindowsCniOptions.network wants it (one HCN enumerate and one query per call). */
export function networkByName(hcn: HcnApi, name: string): () => Promise<CniNetwork | null> {
  return async () => {
    const ids = await hcn.enumerate('Network', hcnQuery({ Name: name }));
    for (const id of ids) {
      try {
        const props = await hcn.query('Network', id);
        if (typeof props.Name === 'string' && props.Name.toLowerCase() !== name.toLowerCase()) continue;
        return { id: bareGuid(typeof props.ID === 'string' ? props.ID : id), name };
      } catch (e) {
        if (!isNotFound(e)) throw e; // deleted between the two calls: look at the next
      }
    }
    return null;
  };
}

/** Every pool of the store, `usable` as ipam.available judges it for this host (WindowsCniOptions.pools). */
export function ipamPools(ipam: Ipam, host: string): () => Promise<CniPool[]> {
  return async () => {
    const [pools, h] = await Promise.all([ipam.listPools(), ipam.getHost(host)]);
    const labels = h?.labels ?? {};
    return pools.map((p) => ({
      name: p.name,
      cidr: p.cidr,
      natOutgoing: p.natOutgoing,
      usable: !p.disabled && p.allowedUses.includes('Workload') && parseSelector(p.nodeSelector)(labels),
    }));
  };
}

/** The attachment a request names, checked as the plugin checks CNI_CONTAINERID and CNI_IFNAME. */
function attachment(p: { containerId?: unknown; ifname?: unknown }): { containerId: string; ifname: string } {
  try {
    const containerId = checkContainerId(p.containerId);
    if (isReservedContainerId(containerId)) invalid(`containerId "${containerId}" starts with ${RESERVED_HANDLE_PREFIX}, which names the node's own addresses`);
    return { containerId, ifname: checkIfname(p.ifname) };
  } catch (e) {
    throw wrap(e);
  }
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string' || v === '') invalid(`${field} must be a non-empty string`);
  return v as string;
}

function guid(v: unknown, field: string): string {
  if (!isGuid(v)) invalid(`${field} must be the pod's HCN namespace ID (a GUID, as containerd passes CNI_NETNS on Windows), got ${JSON.stringify(v)}`);
  return bareGuid(v as string);
}

function attrMap(v: unknown): Record<string, string> {
  if (v === undefined) return {};
  if (!v || typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) invalid('attrs must be an object of strings');
  return v as Record<string, string>;
}

function familyCount(v: unknown, field: string): number | undefined {
  if (v === undefined) return undefined;
  if (v !== 0 && v !== 1) invalid(`${field} must be 0 or 1 (an endpoint holds one address per family)`);
  return v as number;
}

export function windowsCniHandlers(o: WindowsCniOptions): Record<string, IpcHandler> {
  for (const m of ['ipam.assign', 'ipam.release', 'ipam.check', 'ipam.handles']) {
    if (typeof o.ipam[m] !== 'function') throw new Error(`windowsCniHandlers: the ipam handlers lack ${m}`);
  }
  const hcn = o.hcn;
  const log = o.log ?? { info: () => undefined, warn: () => undefined };
  const ipamCall = async <T>(method: string, params: unknown): Promise<T> => (await o.ipam[method]!(params, { connectionId: 'cni-windows' })) as T;
  const fallbackDns: DnsSettings = { ...(o.dns?.servers ? { servers: o.dns.servers } : {}), ...(o.dns?.search ? { search: o.dns.search } : {}) };

  // Per-attachment serialisation (keyed by endpoint name).
  const serial = keyedSerial();

  async function ourNetwork(requested: string): Promise<CniNetwork | null> {
    let net: CniNetwork | null;
    try {
      net = await o.network();
    } catch (e) {
      if (!isNotFound(e)) throw wrap(e, `looking up HNS network ${requested}`);
      net = null;
    }
    if (net && net.name.toLowerCase() !== requested.toLowerCase()) {
      invalid(`the network config's name "${requested}" is not this node's HNS network "${net.name}" (name the conflist after dataplane.network)`);
    }
    return net;
  }

  /** The endpoints an HCN query names, parsed; one deleted between the enumeration and its query is skipped. */
  async function endpointsOf(query: string): Promise<ParsedEndpoint[]> {
    const out: ParsedEndpoint[] = [];
    for (const id of await hcn.enumerate('Endpoint', query)) {
      try {
        out.push(parseEndpoint(await hcn.query('Endpoint', id)));
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
    return out;
  }

  /** Our endpoints with this name on this network (HCN does not keep names unique, so all of them). */
  async function endpointsNamed(name: string, net: CniNetwork): Promise<ParsedEndpoint[]> {
    return (await endpointsOf(hcnQuery({ Name: name }))).filter((ep) => ep.name === name && sameId(ep.network, net.id));
  }

  /** Whether the namespace lists the endpoint; null when the namespace does not exist. */
  async function attachedTo(netns: string, endpointId: string): Promise<boolean | null> {
    try {
      return namespaceEndpoints(await hcn.query('Namespace', netns)).some((id) => sameId(id, endpointId));
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  async function attach(netns: string, endpointId: string, fresh: boolean): Promise<void> {
    // A fresh endpoint is in no namespace yet: one call less on the ADD's path.
    if (!fresh) {
      const listed = await attachedTo(netns, endpointId);
      if (listed === null) throw new CniHandlerError('UNKNOWN_NETNS', `namespace ${netns} does not exist (containerd creates it before the ADD)`);
      if (listed) return;
    }
    try {
      await hcn.modify('Namespace', netns, namespaceEndpointRequest(endpointId, 'Add'));
    } catch (e) {
      if (e instanceof HcnError && e.code >>> 0 === HCN.ELEMENT_NOT_FOUND) {
        throw new CniHandlerError('UNKNOWN_NETNS', `namespace ${netns} does not exist (containerd creates it before the ADD)`);
      }
      // Already attached: fine if to this namespace (a race with ourselves), an error otherwise.
      if (e instanceof HcnError && e.code >>> 0 === HCN.ENDPOINT_ALREADY_ATTACHED && (await attachedTo(netns, endpointId))) return;
      throw e;
    }
  }

  /** Detach an endpoint from every namespace we know it may be in; absent namespaces and endpoints are fine. */
  async function detach(ep: ParsedEndpoint, netnsHint?: string): Promise<void> {
    const candidates = [...new Set([ep.namespace, netnsHint].filter((x): x is string => !!x).map(bareGuid))];
    for (const ns of candidates) {
      if (!(await attachedTo(ns, ep.id))) continue;
      try {
        await hcn.modify('Namespace', ns, namespaceEndpointRequest(ep.id, 'Remove'));
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
  }

  async function removeEndpoint(ep: ParsedEndpoint, netnsHint?: string): Promise<boolean> {
    await detach(ep, netnsHint);
    try {
      await hcn.remove('Endpoint', ep.id);
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  }

  async function teardown(name: string, net: CniNetwork, netnsHint?: string): Promise<string[]> {
    const removed: string[] = [];
    for (const ep of await endpointsNamed(name, net)) if (await removeEndpoint(ep, netnsHint)) removed.push(ep.id);
    return removed;
  }

  function confDns(p: CniAddParams): DnsSettings | undefined {
    return parseConfDns(p.dns, 'dns');
  }

  const add = async (p: CniAddParams): Promise<CniAddReply> => {
    if (!p || typeof p !== 'object') invalid('params must be an object');
    const { containerId, ifname } = attachment(p);
    const netns = guid(p.netns, 'netns');
    const network = str(p.network, 'network');
    const attrs = attrMap(p.attrs);
    const num4 = familyCount(p.num4, 'num4');
    const num6 = familyCount(p.num6, 'num6');
    if (p.pools !== undefined && (!Array.isArray(p.pools) || p.pools.some((x) => typeof x !== 'string'))) invalid('pools must be a list of pool names or CIDRs');
    if (p.runtimeConfig !== undefined && (typeof p.runtimeConfig !== 'object' || p.runtimeConfig === null || Array.isArray(p.runtimeConfig))) invalid('runtimeConfig must be an object');
    // Everything the caller sent is checked before an address is assigned.
    let portMappings: ReturnType<typeof parsePortMappings>;
    let runtimeDns: ReturnType<typeof parseRuntimeDns>;
    let dns: DnsSettings | undefined;
    try {
      portMappings = parsePortMappings(p.runtimeConfig?.portMappings);
      runtimeDns = parseRuntimeDns(p.runtimeConfig?.dns);
      dns = confDns(p);
    } catch (e) {
      throw wrap(e);
    }
    const name = endpointName(containerId, ifname);
    const handle = `${containerId}.${ifname}`;
    return serial(name, async () => {
      // Checked before an address is assigned: a config naming another network is refused at once.
      let net = await ourNetwork(network);
      const all = await o.pools();
      const wanted = p.pools?.length ? all.filter((x) => p.pools!.includes(x.name) || p.pools!.includes(x.cidr)) : all.filter((x) => x.usable !== false);
      const has = (f: Family) => wanted.some((x) => familyOf(x.cidr) === f);
      const want4 = num4 ?? (has(4) ? 1 : 0);
      const want6 = num6 ?? (has(6) && o.ipv6 !== false ? 1 : 0);
      if (want6 > 0 && o.ipv6 === false) invalid('num6: this node\'s HNS network has no IPv6 (Windows overlay networks are IPv4 only)');
      if (want4 + want6 === 0) throw new IpamError('NO_POOL', `no usable pool for this node${p.pools?.length ? ` among ${p.pools.join(', ')}` : ''}`);
      const reply = await ipamCall<AssignReply>('ipam.assign', {
        containerId,
        ifname,
        num4: want4,
        num6: want6,
        pools: p.pools,
        attrs: { ...attrs, 'cni.network': network, 'cni.containerID': containerId, 'cni.ifname': ifname },
        addressing: { prefix: 'pool', gateway: 'auto', poolRoutes: false },
      });
      // The network after the assign: a node's first address claims its first block, and the pass that programs the
      // block's ip-subnet (which the assign waits for) is the one that creates the network.
      try {
        net ??= await ourNetwork(network);
        if (!net) throw new CniHandlerError('NO_NETWORK', `HNS network ${network} does not exist yet (the daemon creates it with the node's first block); try again`);
        const ips: CniIP[] = reply.cni?.ips ?? [];
        const addresses = ips.map((x) => {
          const slash = x.address.indexOf('/');
          return { ip: x.address.slice(0, slash), prefixLen: Number(x.address.slice(slash + 1)), gateway: x.gateway, family: x.family };
        });
        const request = buildEndpoint({
          containerId, ifname, network: net.id, addresses, dns: dns ?? fallbackDns, runtimeDns, pools: all, serviceCidr: o.serviceCidr,
          exceptions: o.exceptions, nodeIP: o.nodeIP, portMappings, macPrefix: o.macPrefix,
        });
        // A retried ADD: the endpoint made last time, if it holds exactly these addresses and is in no other
        // namespace. Anything else under our name is stale (an earlier attempt with other addresses): removed.
        let ep: ParsedEndpoint | undefined;
        for (const old of await endpointsNamed(name, net)) {
          const same = !ep && endpointMatches(old, { network: net.id, addresses: addresses.map((a) => a.ip), namespace: netns }).length === 0;
          if (same) ep = old;
          else {
            log.warn({ endpoint: old.id, name, addresses: old.addresses.map((a) => a.ip) }, 'cni: removing a stale endpoint of this attachment');
            await removeEndpoint(old, netns);
          }
        }
        const fresh = !ep;
        if (!ep) ep = parseEndpoint(await hcn.create('Endpoint', JSON.stringify(request), net.id));
        await attach(netns, ep.id, fresh);
        if (fresh) log.info({ name, endpoint: ep.id, netns, ips: addresses.map((a) => a.ip) }, 'cni: endpoint created and attached');
        const routes: CniRoute[] = request.Routes.map((r) => ({ dst: r.DestinationPrefix, gw: r.NextHop }));
        const d = request.Dns;
        const outDns: CniDns = {};
        if (d?.ServerList) outDns.nameservers = d.ServerList;
        if (d?.Domain) outDns.domain = d.Domain;
        if (d?.Search) outDns.search = d.Search;
        if (d?.Options) outDns.options = d.Options;
        const mac = ep.mac ?? request.MacAddress;
        return {
          endpoint: { id: ep.id, name },
          existing: !fresh,
          interface: mac ? { name: ifname, mac, sandbox: netns } : { name: ifname, sandbox: netns },
          ips,
          routes,
          dns: outDns,
        };
      } catch (e) {
        // Nothing half-applied: whatever endpoint this attachment has goes, and so do its addresses (the runtime
        // calls DEL after a failed ADD anyway; this makes it so even when it does not).
        try {
          if (net) await teardown(name, net, netns);
        } catch (e2) {
          log.warn({ name, err: String(e2) }, 'cni: could not remove the endpoint of a failed ADD (GC or the next DEL will)');
        }
        try {
          await ipamCall<ReleaseReply>('ipam.release', { handle });
        } catch (e2) {
          log.warn({ handle, err: String(e2) }, 'cni: could not release the addresses of a failed ADD');
        }
        throw wrap(e);
      }
    });
  };

  const del = async (p: CniDelParams): Promise<CniDelReply> => {
    if (!p || typeof p !== 'object') invalid('params must be an object');
    const { containerId, ifname } = attachment(p);
    const network = str(p.network, 'network');
    // DEL may come without a namespace, or with one that is gone: a hint only.
    const netns = isGuid(p.netns) ? bareGuid(p.netns) : undefined;
    const name = endpointName(containerId, ifname);
    return serial(name, async () => {
      try {
        const net = await ourNetwork(network);
        // No network: no endpoint of it can exist; the addresses still go.
        const removed = net ? await teardown(name, net, netns) : [];
        const { released } = await ipamCall<ReleaseReply>('ipam.release', { handle: `${containerId}.${ifname}` });
        if (removed.length || released.length) log.info({ name, removed, released }, 'cni: attachment deleted');
        return { removed, released };
      } catch (e) {
        throw wrap(e);
      }
    });
  };

  const check = async (p: CniCheckParams): Promise<CniCheckReply> => {
    if (!p || typeof p !== 'object') invalid('params must be an object');
    const { containerId, ifname } = attachment(p);
    const netns = guid(p.netns, 'netns');
    const network = str(p.network, 'network');
    if (p.ips !== undefined && (!Array.isArray(p.ips) || p.ips.some((x) => typeof x !== 'string'))) invalid('ips must be a list of addresses');
    const name = endpointName(containerId, ifname);
    const handle = `${containerId}.${ifname}`;
    const mismatch = (why: string): never => {
      throw new CniHandlerError('CHECK_MISMATCH', `CHECK ${name}: ${why}`);
    };
    return serial(name, async () => {
      try {
        const net = await ourNetwork(network);
        if (!net) return mismatch(`HNS network ${network} does not exist`);
        const eps = await endpointsNamed(name, net);
        if (eps.length === 0) return mismatch(`no endpoint named ${name} on network ${net.name}`);
        if (eps.length > 1) return mismatch(`${eps.length} endpoints are named ${name} on network ${net.name}`);
        const ep = eps[0]!;
        const diffs: string[] = [];
        const held = await ipamCall<CheckReply>('ipam.check', { handle, ips: ep.addresses.map((a) => a.ip) });
        if (!held.ok) {
          if (held.missing.length) diffs.push(`the endpoint holds ${held.missing.join(', ')}, which IPAM handle ${handle} does not`);
          if (held.extra.length) diffs.push(`IPAM handle ${handle} holds ${held.extra.join(', ')}, which the endpoint does not`);
        }
        if (p.ips) diffs.push(...endpointMatches(ep, { addresses: p.ips }).map((d) => `compared with prevResult, ${d}`));
        const listed = await attachedTo(netns, ep.id);
        if (listed === null) diffs.push(`namespace ${netns} does not exist`);
        else if (!listed) diffs.push(`the endpoint is not attached to namespace ${netns}`);
        if (diffs.length) mismatch(diffs.join('; '));
        return { ok: true, endpoint: ep.id };
      } catch (e) {
        throw wrap(e);
      }
    });
  };

  const gc = async (p: CniGcParams): Promise<CniGcReply> => {
    if (!p || typeof p !== 'object') invalid('params must be an object');
    const network = str(p.network, 'network');
    const list = p.validAttachments ?? [];
    if (!Array.isArray(list)) invalid('validAttachments must be a list of {containerID, ifname}');
    const validNames = new Set<string>();
    const validHandles = new Set<string>();
    list.forEach((a, i) => {
      if (!a || typeof a.containerID !== 'string' || typeof a.ifname !== 'string') invalid(`validAttachments[${i}] must be {containerID, ifname}`);
      validNames.add(endpointName(a.containerID, a.ifname).toLowerCase());
      validHandles.add(`${a.containerID}.${a.ifname}`);
    });
    try {
      const net = await ourNetwork(network);
      const endpointsRemoved: string[] = [];
      if (net) {
        const host = `${net.name}_ep`.toLowerCase();
        // All endpoints, each one's network read from its properties: hcsshim lists a network's endpoints with the
        // V1 field name (a VirtualNetwork filter, "until query can convert schema"), which we do not depend on.
        for (const ep of await endpointsOf(hcnQuery())) {
          const n = ep.name;
          if (!sameId(ep.network, net.id) || !isAttachmentName(n) || (ep.flags & ENDPOINT_FLAG_REMOTE) !== 0) continue;
          const lower = n.toLowerCase();
          if (lower === host || lower.startsWith(`${host}_`) || validNames.has(lower)) continue;
          // Through the attachment's queue: an ADD in flight for it finishes first.
          const gone = await serial(n, async () => {
            const still = (await endpointsNamed(n, net)).find((x) => x.id === ep.id);
            return still ? removeEndpoint(still) : false;
          });
          if (gone) endpointsRemoved.push(n);
        }
      }
      const { handles } = await ipamCall<{ handles: HandleInfo[] }>('ipam.handles', { attrs: { 'cni.network': net?.name ?? network } });
      const stale = handles.filter((h) => !validHandles.has(h.handle));
      const handlesReleased: string[] = [];
      for (const h of stale) {
        const cid = h.attrs['cni.containerID'];
        const ifn = h.attrs['cni.ifname'];
        const key = cid && ifn ? endpointName(cid, ifn) : `handle:${h.handle}`;
        const r = await serial(key, () => ipamCall<ReleaseReply>('ipam.release', { handle: h.handle }));
        if (r.released.length) handlesReleased.push(h.handle);
      }
      if (endpointsRemoved.length || handlesReleased.length) log.info({ endpointsRemoved, handlesReleased }, 'cni: GC removed attachments the runtime no longer knows');
      return { endpointsRemoved, handlesReleased };
    } catch (e) {
      throw wrap(e);
    }
  };

  return { 'cni.add': add, 'cni.del': del, 'cni.check': check, 'cni.gc': gc };
}
