// The HCN half of the stand-in's state: networks, endpoints and namespaces, their create, open, modify, query and
// delete with HCN's rules and codes, and HNSCall's host attach (which adds a vNIC to the IP Helper half).
import { randomUUID } from 'node:crypto';
import { HCN, normalizeMac } from '../../../src/hns/model.ts';
import { type IP, type Prefix, formatIP, formatPrefix, maxLen, parseIP, prefixContainsIP, prefixContainsPrefix, prefixOf, prefixesOverlap } from '../../../src/net/ip.ts';
import { HR } from './api.ts';
import {
  FIELDS, MULTI_SUBNET_TYPES, NAMESPACE_TYPES, NETWORK_TYPES, SCHEMA, ZERO_GUID, clone, type Doc, hcnIP, hcnPrefix, ipSubnetsOf, isObj, list,
  normId, onlyFields, parseDoc, prefixKey, samePolicy, sameValue, subnetsOf,
} from './hcn-documents.ts';
import { IpHelperState, ORIGIN_WELL_KNOWN, PROTO_LOCAL } from './ip-helper-state.ts';
import { refuse, type Reply } from './wire.ts';

interface EndpointRec {
  doc: Doc;
  network: string;
  namespace?: string;
  hostCompartment?: number;
}

interface NamespaceRec {
  doc: Doc;
  endpoints: string[];
}

export type Kind = 'Network' | 'Endpoint' | 'Namespace';
const NOT_FOUND: Record<Kind, number> = { Network: HCN.NETWORK_NOT_FOUND, Endpoint: HCN.ENDPOINT_NOT_FOUND, Namespace: HCN.ELEMENT_NOT_FOUND };

export class HcnState extends IpHelperState {
  protected readonly networks = new Map<string, Doc>();
  protected readonly endpoints = new Map<string, EndpointRec>();
  protected readonly namespaces = new Map<string, NamespaceRec>();
  protected nextCompartment = 2;
  private nextMac = 1;


  private store(kind: Kind): Map<string, unknown> {
    return kind === 'Network' ? this.networks : kind === 'Endpoint' ? this.endpoints : this.namespaces;
  }

  /** The ID of an object that exists, else the kind's NOT_FOUND. */
  protected existing(kind: Kind, id: unknown): string {
    const n = normId(id);
    if (n === null || !this.store(kind).has(n)) refuse(NOT_FOUND[kind], `${kind.toLowerCase()} ${id} not found`);
    return n as string;
  }

  private newId(kind: Kind, requested: unknown): string {
    const n = normId(requested) ?? refuse(HCN.GUID_CONVERSION_FAILURE, `bad ID ${requested}`);
    if (n === ZERO_GUID) return randomUUID();
    if (this.store(kind).has(n)) refuse(kind === 'Network' ? HCN.NETWORK_ALREADY_EXISTS : HR.ALREADY_EXISTS, `${kind.toLowerCase()} ${n} already exists`);
    return n;
  }

  protected view(kind: Kind, id: string): Doc {
    if (kind === 'Network') return { ID: id, ...clone(this.networks.get(id)!), SchemaVersion: this.networks.get(id)!.SchemaVersion ?? SCHEMA };
    if (kind === 'Endpoint') {
      const e = this.endpoints.get(id)!;
      const v: Doc = { ID: id, ...clone(e.doc), HostComputeNetwork: e.network };
      if (e.namespace) v.HostComputeNamespace = e.namespace;
      v.SchemaVersion = e.doc.SchemaVersion ?? SCHEMA;
      return v;
    }
    const ns = this.namespaces.get(id)!;
    return {
      ID: id,
      ...clone(ns.doc),
      Resources: ns.endpoints.map((e) => ({ Type: 'Endpoint', Data: { ID: e } })),
      SchemaVersion: ns.doc.SchemaVersion ?? SCHEMA,
    };
  }

  protected enumerate(kind: Kind, query: unknown): Reply {
    let filter: Doc = {};
    if (query !== null && query !== undefined) {
      const q = parseDoc(query, 'query');
      if (q.Filter !== undefined && q.Filter !== null && q.Filter !== '') {
        if (typeof q.Filter !== 'string') refuse(HCN.INVALID_JSON, 'query: Filter must be a JSON string');
        filter = parseDoc(q.Filter, 'query Filter');
      }
    }
    const ids = [...this.store(kind).keys()].filter((id) => {
      const v = this.view(kind, id);
      return Object.entries(filter).every(([k, want]) => k in v && sameValue(v[k], want));
    });
    return { code: 0, out: JSON.stringify(ids) };
  }

  protected query(kind: Kind, a: Doc): Doc {
    const id = this.existing(kind, a.handle);
    if (a.query !== null && a.query !== undefined) parseDoc(a.query, 'query');
    return this.view(kind, id);
  }

  protected create(kind: Kind, a: Doc): Reply {
    const doc = parseDoc(a.settings, 'settings');
    if (kind === 'Network') {
      onlyFields(doc, FIELDS.Network, 'HostComputeNetwork');
      const net = clone(doc);
      delete net.ID;
      const policies = list(net, 'Policies', 'network');
      net.Policies = [];
      for (const p of policies) (net.Policies as Doc[]).push(this.checkPolicy(net, p));
      this.checkNetwork(net);
      const id = this.newId(kind, a.id);
      for (const s of subnetsOf(net)) {
        s.ID = randomUUID();
        for (const ip of ipSubnetsOf(s)) ip.ID = randomUUID();
      }
      this.networks.set(id, net);
      return { code: 0, id };
    }
    if (kind === 'Endpoint') return { code: 0, id: this.createEndpoint(doc, a) };
    onlyFields(doc, FIELDS.Namespace, 'HostComputeNamespace');
    if (doc.Type !== undefined && !NAMESPACE_TYPES.includes(doc.Type as string)) refuse(HCN.INVALID_ARG, `namespace Type ${JSON.stringify(doc.Type)}`);
    const resources = list(doc, 'Resources', 'namespace');
    const attach: string[] = [];
    for (const r of resources) {
      if (!isObj(r) || r.Type !== 'Endpoint' || !isObj(r.Data)) refuse(HCN.INVALID_ARG, 'namespace Resources: expected {"Type":"Endpoint","Data":{"ID":..}}');
      const ep = this.existing('Endpoint', (r as { Data: Doc }).Data.ID);
      this.checkAttachable(ep);
      attach.push(ep);
    }
    const id = this.newId(kind, a.id);
    const stored = clone(doc);
    delete stored.ID;
    delete stored.Resources;
    stored.Type ??= 'HostDefault';
    stored.NamespaceId ??= this.nextCompartment++;
    this.namespaces.set(id, { doc: stored, endpoints: attach });
    for (const ep of attach) this.endpoints.get(ep)!.namespace = id;
    return { code: 0, id };
  }

  private createEndpoint(doc: Doc, a: Doc): string {
    onlyFields(doc, FIELDS.Endpoint, 'HostComputeEndpoint');
    const network = this.existing('Network', a.network);
    if (doc.HostComputeNetwork !== undefined) {
      const named = this.existing('Network', doc.HostComputeNetwork);
      if (named !== network) refuse(HCN.INVALID_ARG, `HostComputeNetwork ${named} is not the network of the handle (${network})`);
    }
    const net = this.networks.get(network)!;
    const ipSubnets = subnetsOf(net).flatMap((s) => ipSubnetsOf(s).map((i) => hcnPrefix(i.IpAddressPrefix, 'ip-subnet')));
    const held = new Set<string>();
    for (const e of this.endpoints.values()) if (e.network === network) for (const ip of this.addresses(e)) held.add(formatIP(ip));
    for (const c of list(doc, 'IpConfigurations', 'endpoint')) {
      if (!isObj(c)) refuse(HCN.INVALID_JSON, 'endpoint: an IpConfigurations entry is not an object');
      const cfg = c as Doc;
      if (cfg.IpAddress === undefined) refuse(HCN.INVALID_IP, 'endpoint: an IpConfiguration without IpAddress (the stand-in does not allocate)');
      const ip = hcnIP(cfg.IpAddress, HCN.INVALID_IP, 'endpoint IpAddress');
      if (!ipSubnets.some((p) => prefixContainsIP(p, ip))) refuse(HCN.INVALID_IP, `${formatIP(ip)} is in no ip-subnet of network ${network}`);
      if (held.has(formatIP(ip))) refuse(HCN.INVALID_IP, `${formatIP(ip)}: address already in use`);
      held.add(formatIP(ip));
      if (cfg.PrefixLength !== undefined && !(Number.isInteger(cfg.PrefixLength) && (cfg.PrefixLength as number) >= 0 && (cfg.PrefixLength as number) <= maxLen(ip.family))) {
        refuse(HCN.INVALID_ARG, `endpoint PrefixLength ${JSON.stringify(cfg.PrefixLength)}`);
      }
    }
    for (const p of list(doc, 'Policies', 'endpoint')) if (!isObj(p) || typeof p.Type !== 'string') refuse(HCN.INVALID_ARG, 'endpoint policy without Type');
    if (doc.MacAddress !== undefined && normalizeMac(doc.MacAddress) === null) refuse(HCN.INVALID_ARG, `endpoint MacAddress ${JSON.stringify(doc.MacAddress)}`);
    let namespace: string | undefined;
    if (doc.HostComputeNamespace !== undefined) namespace = this.existing('Namespace', doc.HostComputeNamespace);
    const id = this.newId('Endpoint', a.id);
    const stored = clone(doc);
    delete stored.ID;
    delete stored.HostComputeNetwork;
    delete stored.HostComputeNamespace;
    if (stored.MacAddress === undefined) {
      const n = this.nextMac++;
      stored.MacAddress = `00-15-5D-${[n >> 16, n >> 8, n].map((b) => (b & 255).toString(16).toUpperCase().padStart(2, '0')).join('-')}`;
    }
    this.endpoints.set(id, { doc: stored, network, namespace });
    if (namespace) this.namespaces.get(namespace)!.endpoints.push(id);
    return id;
  }

  private addresses(e: EndpointRec): IP[] {
    const out: IP[] = [];
    for (const c of list(e.doc, 'IpConfigurations', 'endpoint')) {
      try {
        out.push(parseIP(String((c as Doc).IpAddress)));
      } catch {
        /* validated on create */
      }
    }
    return out;
  }

  protected modify(kind: Kind, id: string, settings: unknown): void {
    const req = parseDoc(settings, 'settings');
    onlyFields(req, FIELDS.Modify, `Modify${kind}SettingRequest`);
    const { ResourceType, RequestType } = req;
    const s = isObj(req.Settings) ? req.Settings : refuse(HCN.INVALID_ARG, 'request without Settings object');
    if (!['Add', 'Remove', 'Update', 'Refresh'].includes(RequestType as string)) refuse(HCN.INVALID_ARG, `RequestType ${JSON.stringify(RequestType)}`);
    if (RequestType === 'Update' || RequestType === 'Refresh') refuse(HCN.REQUEST_UNSUPPORTED, `the stand-in does not do ${RequestType} requests`);
    const add = RequestType === 'Add';
    if (kind === 'Network') return this.modifyNetwork(id, ResourceType, add, s);
    if (kind === 'Endpoint') {
      if (ResourceType !== 'Policy') refuse(HCN.REQUEST_UNSUPPORTED, `endpoint ResourceType ${JSON.stringify(ResourceType)}`);
      const e = this.endpoints.get(id)!;
      const policies = clone(list(e.doc, 'Policies', 'endpoint')) as Doc[];
      for (const p of list(s, 'Policies', 'request')) {
        if (!isObj(p) || typeof p.Type !== 'string') refuse(HCN.INVALID_ARG, 'policy without Type');
        const i = policies.findIndex((x) => samePolicy(x, p as Doc));
        if (add) policies.push(clone(p as Doc));
        else if (i < 0) refuse(HCN.POLICY_NOT_FOUND, `endpoint policy ${(p as Doc).Type} not found`);
        else policies.splice(i, 1);
      }
      e.doc.Policies = policies;
      return;
    }
    if (ResourceType !== 'Endpoint') refuse(HCN.REQUEST_UNSUPPORTED, `namespace ResourceType ${JSON.stringify(ResourceType)}`);
    const ep = this.existing('Endpoint', s.EndpointId);
    const ns = this.namespaces.get(id)!;
    const e = this.endpoints.get(ep)!;
    if (add) {
      this.checkAttachable(ep);
      e.namespace = id;
      ns.endpoints.push(ep);
    } else {
      if (e.namespace !== id) refuse(HCN.ELEMENT_NOT_FOUND, `endpoint ${ep} is not attached to namespace ${id}`);
      e.namespace = undefined;
      ns.endpoints = ns.endpoints.filter((x) => x !== ep);
    }
  }

  private checkAttachable(ep: string): void {
    const e = this.endpoints.get(ep)!;
    if (e.namespace) refuse(HCN.ENDPOINT_ALREADY_ATTACHED, `endpoint ${ep} is already attached to namespace ${e.namespace}`);
    if (e.hostCompartment !== undefined) refuse(HCN.ENDPOINT_ALREADY_ATTACHED, `endpoint ${ep} is attached to the host`);
  }

  /** HcnModifyNetwork: one request, all or nothing (works on a copy, committed at the end). */
  private modifyNetwork(id: string, resource: unknown, add: boolean, s: Doc): void {
    const net = clone(this.networks.get(id)!);
    const fresh: Doc[] = [];
    if (resource === 'Subnet') {
      const items = list(s, 'Subnets', 'request');
      if (add) {
        if (!Array.isArray(net.Ipams) || !net.Ipams.length) net.Ipams = [{ Type: 'Static', Subnets: [] }];
        const ipam = (net.Ipams as Doc[])[0];
        if (!Array.isArray(ipam.Subnets)) ipam.Subnets = [];
        for (const item of items) {
          if (!isObj(item)) refuse(HCN.INVALID_JSON, 'a Subnets entry is not an object');
          const copy = clone(item as Doc);
          copy.IpSubnets = list(copy, 'IpSubnets', 'Subnet').map((x) => (isObj(x) ? { ...x } : refuse(HCN.INVALID_JSON, 'an IpSubnets entry is not an object')));
          fresh.push(copy, ...(copy.IpSubnets as Doc[]));
          (ipam.Subnets as Doc[]).push(copy);
        }
        this.checkNetwork(net);
      } else {
        for (const item of items) {
          const ref = isObj(item) ? item : refuse(HCN.INVALID_JSON, 'a Subnets entry is not an object');
          const { owner, index, subnet } = this.findSubnet(net, ref.ID, ref.IpAddressPrefix);
          this.checkUnused(id, hcnPrefix(subnet.IpAddressPrefix, 'subnet'));
          owner.splice(index, 1);
        }
      }
    } else if (resource === 'IPSubnet') {
      if (s.SubnetId === undefined) refuse(HCN.INVALID_ARG, 'IPSubnet request without SubnetId');
      const { subnet } = this.findSubnet(net, s.SubnetId, undefined);
      subnet.IpSubnets = ipSubnetsOf(subnet);
      for (const item of list(s, 'IpSubnets', 'request')) {
        const ref = isObj(item) ? item : refuse(HCN.INVALID_JSON, 'an IpSubnets entry is not an object');
        if (add) {
          const copy = clone(ref);
          fresh.push(copy);
          (subnet.IpSubnets as Doc[]).push(copy);
        } else {
          const ips = subnet.IpSubnets as Doc[];
          const key = prefixKey(ref.IpAddressPrefix);
          const i = ips.findIndex((x) => (ref.ID !== undefined ? normId(x.ID) === normId(ref.ID) : key !== null && prefixKey(x.IpAddressPrefix) === key));
          if (i < 0) refuse(HCN.SUBNET_NOT_FOUND, `ip-subnet ${ref.ID ?? ref.IpAddressPrefix} not found`);
          this.checkUnused(id, hcnPrefix(ips[i].IpAddressPrefix, 'ip-subnet'));
          ips.splice(i, 1);
        }
      }
      if (add) this.checkNetwork(net);
    } else if (resource === 'Policy') {
      const policies = list(net, 'Policies', 'network') as Doc[];
      net.Policies = policies;
      for (const p of list(s, 'Policies', 'request')) {
        if (add) policies.push(this.checkPolicy(net, p));
        else {
          const i = isObj(p) ? policies.findIndex((x) => samePolicy(x, p)) : -1;
          if (i < 0) refuse(HCN.POLICY_NOT_FOUND, `policy ${JSON.stringify(p)} not found`);
          policies.splice(i, 1);
        }
      }
    } else if (resource === 'DNS' || resource === 'Extension') {
      refuse(HCN.REQUEST_UNSUPPORTED, `the stand-in does not modify ${resource}`);
    } else {
      refuse(HCN.INVALID_ARG, `ResourceType ${JSON.stringify(resource)}`);
    }
    // Committed: what was added gets its IDs (HCN assigns them; any given are ignored).
    for (const o of fresh) o.ID = randomUUID();
    this.networks.set(id, net);
  }

  private findSubnet(net: Doc, id: unknown, prefix: unknown): { owner: Doc[]; index: number; subnet: Doc } {
    const key = prefix === undefined ? null : prefixKey(prefix);
    for (const ipam of list(net, 'Ipams', 'network') as Doc[]) {
      const subs = list(ipam, 'Subnets', 'Ipam') as Doc[];
      for (let index = 0; index < subs.length; index++) {
        const s = subs[index];
        if (id !== undefined ? normId(s.ID) !== null && normId(s.ID) === normId(id) : key !== null && prefixKey(s.IpAddressPrefix) === key) {
          return { owner: subs, index, subnet: s };
        }
      }
    }
    return refuse(HCN.SUBNET_NOT_FOUND, `subnet ${id ?? prefix} not found`);
  }

  private checkUnused(network: string, p: Prefix): void {
    for (const [id, e] of this.endpoints) {
      if (e.network !== network) continue;
      for (const ip of this.addresses(e)) {
        if (prefixContainsIP(p, ip)) refuse(HCN.ENTITY_HAS_REFERENCES, `${formatPrefix(p)} holds the address ${formatIP(ip)} of endpoint ${id}`);
      }
    }
  }

  /** A whole network: known type, subnet count, valid disjoint Subnets, ip-subnets inside their Subnet and disjoint. */
  private checkNetwork(net: Doc): void {
    const type = typeof net.Type === 'string' ? NETWORK_TYPES.find((t) => t.toLowerCase() === (net.Type as string).toLowerCase()) : undefined;
    if (!type) refuse(HCN.INVALID_NETWORK_TYPE, `network Type ${JSON.stringify(net.Type)}`);
    if (net.Name !== undefined && typeof net.Name !== 'string') refuse(HCN.INVALID_JSON, 'network Name must be a string');
    const subs = subnetsOf(net);
    if (subs.length > 1 && !MULTI_SUBNET_TYPES.has(type!.toLowerCase())) refuse(HCN.INVALID_ARG, `a ${type} network has at most one Subnet`);
    const seen: Prefix[] = [];
    const seenIp: Prefix[] = [];
    for (const s of subs) {
      const p = hcnPrefix(s.IpAddressPrefix, 'Subnet');
      for (const q of seen) if (prefixesOverlap(p, q)) refuse(HCN.INVALID_PREFIX, `Subnet ${formatPrefix(p)} overlaps ${formatPrefix(q)}`);
      seen.push(p);
      for (const r of list(s, 'Routes', 'Subnet')) {
        if (!isObj(r)) refuse(HCN.INVALID_JSON, 'a Routes entry is not an object');
        hcnIP((r as Doc).NextHop, HCN.INVALID_ARG, `Subnet ${formatPrefix(p)} route NextHop`);
        hcnPrefix((r as Doc).DestinationPrefix, `Subnet ${formatPrefix(p)} route`);
      }
      if (type === 'Overlay') {
        const vsid = list(s, 'Policies', 'Subnet').find((x) => isObj(x) && x.Type === 'VSID') as Doc | undefined;
        const iso = isObj(vsid?.Settings) ? Number(vsid.Settings.IsolationId) : NaN;
        if (!(Number.isInteger(iso) && iso >= 4096)) refuse(HCN.INVALID_ARG, `overlay Subnet ${formatPrefix(p)} needs a VSID policy with IsolationId >= 4096`);
      }
      for (const ip of ipSubnetsOf(s)) {
        const q = hcnPrefix(ip.IpAddressPrefix, 'ip-subnet');
        if (!prefixContainsPrefix(p, q)) refuse(HCN.INVALID_PREFIX, `ip-subnet ${formatPrefix(q)} is outside its Subnet ${formatPrefix(p)}`);
        for (const o of seenIp) if (prefixesOverlap(o, q)) refuse(HCN.INVALID_PREFIX, `ip-subnet ${formatPrefix(q)} overlaps ${formatPrefix(o)}`);
        const flags = ip.Flags ?? 0;
        if (!Number.isInteger(flags) || (flags as number) < 0 || (flags as number) > 3) refuse(HCN.INVALID_ARG, `ip-subnet ${formatPrefix(q)}: Flags ${flags}`);
        seenIp.push(q);
      }
    }
  }

  /** A network policy against those the network has (and those added before it in the same request). */
  private checkPolicy(net: Doc, p: unknown): Doc {
    if (!isObj(p) || typeof p.Type !== 'string') return refuse(HCN.INVALID_ARG, 'policy without Type');
    const existing = list(net, 'Policies', 'network') as Doc[];
    if (p.Type === 'RemoteSubnetRoute') {
      const s = isObj(p.Settings) ? p.Settings : {};
      if (String(net.Type).toLowerCase() !== 'overlay') refuse(HCN.INVALID_ARG, `RemoteSubnetRoute on a ${net.Type} network`);
      const dest = hcnPrefix(s.DestinationPrefix, 'RemoteSubnetRoute');
      const vsid = Number(s.IsolationId);
      if (!Number.isInteger(vsid) || vsid < 4096 || vsid > 65535) refuse(HCN.INVALID_ARG, `RemoteSubnetRoute IsolationId ${s.IsolationId}`);
      hcnIP(s.ProviderAddress, HCN.INVALID_ARG, 'RemoteSubnetRoute ProviderAddress');
      if (normalizeMac(s.DistributedRouterMacAddress) === null) refuse(HCN.INVALID_ARG, `RemoteSubnetRoute DistributedRouterMacAddress ${s.DistributedRouterMacAddress}`);
      if (existing.some((x) => x.Type === 'RemoteSubnetRoute' && samePolicy(x, p))) {
        refuse(HCN.POLICY_ALREADY_EXISTS, `a RemoteSubnetRoute for ${formatPrefix(dest)} exists`);
      }
      return clone(p);
    }
    if (existing.some((x) => x.Type === p.Type)) refuse(HCN.POLICY_ALREADY_EXISTS, `the network has a ${p.Type} policy`);
    return clone(p);
  }

  protected remove(kind: Kind, id: string): void {
    if (kind === 'Network') {
      const users = [...this.endpoints.values()].filter((e) => e.network === id).length;
      if (users) refuse(HCN.ENTITY_HAS_REFERENCES, `network ${id} has ${users} endpoint(s)`);
      this.networks.delete(id);
    } else if (kind === 'Endpoint') {
      const e = this.endpoints.get(id)!;
      if (e.namespace) refuse(HCN.ENTITY_HAS_REFERENCES, `endpoint ${id} is attached to namespace ${e.namespace}`);
      // A host-attached endpoint takes its vNIC (and the vNIC's routes) with it.
      const nic = this.interfaces.findIndex((i) => i.endpoint === id);
      if (nic >= 0) {
        const [gone] = this.interfaces.splice(nic, 1);
        this.routes = this.routes.filter((r) => r.interfaceLuid !== gone.luid);
      }
      this.endpoints.delete(id);
    } else {
      for (const ep of this.namespaces.get(id)!.endpoints) this.endpoints.get(ep)!.namespace = undefined;
      this.namespaces.delete(id);
    }
  }

  // ---- HNSCall (host attach only) ----

  protected hnsCall(a: Doc): Reply {
    const m = /^\/endpoints\/([^/]+)\/attach$/i.exec(String(a.path ?? ''));
    if (String(a.method).toUpperCase() !== 'POST' || !m) {
      refuse(HCN.REQUEST_UNSUPPORTED, `the stand-in does only POST /endpoints/<id>/attach, not ${a.method} ${a.path}`);
    }
    const id = this.existing('Endpoint', m![1]);
    const req = parseDoc(a.request, 'request');
    if (req.SystemType !== 'Host') refuse(HCN.INVALID_ARG, `SystemType ${JSON.stringify(req.SystemType)} (the stand-in attaches to the host only)`);
    const compartment = req.CompartmentId ?? 0;
    if (!Number.isInteger(compartment) || (compartment as number) < 0) refuse(HCN.INVALID_ARG, `CompartmentId ${JSON.stringify(req.CompartmentId)}`);
    this.checkAttachable(id);
    const e = this.endpoints.get(id)!;
    e.hostCompartment = compartment as number;
    const base = `vEthernet (${typeof e.doc.Name === 'string' && e.doc.Name ? e.doc.Name : id})`;
    let alias = base;
    for (let n = 2; this.interfaces.some((i) => i.alias.toLowerCase() === alias.toLowerCase()); n++) alias = `${base} ${n}`;
    const nic = this.newInterface(alias, {});
    nic.endpoint = id;
    // The stack's connected routes for the vNIC's addresses: the subnet (when the prefix length is known) and the host.
    for (const c of list(e.doc, 'IpConfigurations', 'endpoint') as Doc[]) {
      const ip = parseIP(String(c.IpAddress));
      const onLink = ip.family === 4 ? '0.0.0.0' : '::';
      const lens = typeof c.PrefixLength === 'number' && c.PrefixLength < maxLen(ip.family) ? [c.PrefixLength, maxLen(ip.family)] : [maxLen(ip.family)];
      for (const len of lens) {
        this.routes.push({
          family: ip.family, interfaceLuid: nic.luid, interfaceIndex: nic.index, destination: formatPrefix(prefixOf(ip, len)), nextHop: onLink,
          metric: 256, protocol: PROTO_LOCAL, origin: ORIGIN_WELL_KNOWN,
        });
      }
    }
    return { code: 0, out: JSON.stringify({ Success: true }) };
  }
}
