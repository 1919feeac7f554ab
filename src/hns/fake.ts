// An in-memory HNS that keeps HNS's rules and answers with its error codes, for tests and `hns plan --emit-actual`.
//
// Rules enforced (each with the HRESULT HNS uses):
//  - modify/open of an unknown network: 0x803b0001; unknown Subnet (or ip-subnet) ID: 0x803b0005;
//  - a prefix that does not parse, has host bits set, an ip-subnet outside its Subnet, or any two Subnets or two
//    ip-subnets of a network that overlap: 0x803b0030;
//  - a second policy of a kind (a RemoteSubnetRoute for a prefix that has one, a second HostRoute): 0x803b0012;
//  - removing an ip-subnet (or a Subnet holding one) that an endpoint's address is in: 0x803b002C;
//  - several subnets on a network type other than L2Bridge, L2Tunnel, Overlay; an overlay Subnet without a VSID
//    policy; RemoteSubnetRoute on a non-overlay network, IsolationId < 4096: E_INVALIDARG;
//  - New-NetRoute of a route that exists: 0x80071392; Remove-NetRoute of one that does not: 0x80070490.
// A request is all or nothing. With `faults`, any mutating call may fail (injected random source): half of the
// failures happen before the change, half after it (the reply was lost), like a restarting HNS.
import { type IP, type Prefix, parseIP, parsePrefix, prefixContainsIP, prefixContainsPrefix, prefixesOverlap, formatPrefix } from '../net/ip.ts';
import {
  type ApplyResult,
  type HnsEndpoint,
  type HnsExecutor,
  type HnsIpSubnet,
  type HnsNetwork,
  type HnsOp,
  type HnsPolicy,
  type HnsSnapshot,
  type HnsSubnet,
  type ModifyNetworkRequest,
  type NetRoute,
  HCN,
  HcnError,
  applySequential,
  applySequentialSync,
  asArray,
  endpointAddresses,
  endpointNetwork,
  normalizeMac,
  parseSnapshot,
  readIP,
  sameId,
  subnetsOf,
} from './model.ts';

export interface FakeFaults {
  /** A random source in [0, 1); inject a seeded one for reproducible tests. */
  random: () => number;
  /** Chance that a mutating call fails. */
  rate: number;
  /** Chance that read() fails (default 0). */
  readRate?: number;
}

/** One mutating call that reached the fake (whether or not it then failed), for tests. */
export interface FakeCall {
  kind: 'create-network' | 'modify-network' | 'add-route' | 'remove-route' | 'create-endpoint' | 'remove-endpoint';
  networkId?: string;
  request?: unknown;
}

const MULTI_SUBNET_TYPES = new Set(['l2bridge', 'l2tunnel', 'overlay']);
const clone = <T>(v: T): T => structuredClone(v);

function strictPrefix(text: unknown, what: string): Prefix {
  if (typeof text !== 'string') throw new HcnError(HCN.INVALID_PREFIX, `${what}: missing prefix`);
  try {
    return parsePrefix(text);
  } catch (e) {
    throw new HcnError(HCN.INVALID_PREFIX, `${what}: ${(e as Error).message}`);
  }
}

function strictIP(text: unknown, what: string): IP {
  try {
    return parseIP(String(text));
  } catch {
    throw new HcnError(HCN.INVALID_ARG, `${what}: invalid address ${JSON.stringify(text)}`);
  }
}

const routeKey = (r: NetRoute): string =>
  `${formatPrefix(strictPrefix(r.DestinationPrefix, 'route'))}|${readIP(r.NextHop)?.key ?? r.NextHop}|${r.InterfaceAlias}`;

export class FakeHns {
  private networks: HnsNetwork[] = [];
  private endpoints: HnsEndpoint[] = [];
  private routes: NetRoute[] = [];
  private idCounter = 0;
  private readonly ids = new Set<string>();
  /** Every mutating call, in order. */
  readonly calls: FakeCall[] = [];
  faults: FakeFaults | undefined;

  constructor(opts: { faults?: FakeFaults } = {}) {
    this.faults = opts.faults;
  }

  /** A fake holding `snapshot` (HNS JSON); objects without IDs get one. */
  static fromSnapshot(snapshot: HnsSnapshot | unknown, opts: { faults?: FakeFaults } = {}): FakeHns {
    const f = new FakeHns(opts);
    const s = clone(parseSnapshot(snapshot));
    for (const n of s.Networks) {
      if (n.ID) f.ids.add(n.ID.toUpperCase());
      for (const sub of subnetsOf(n)) {
        if (sub.ID) f.ids.add(sub.ID.toUpperCase());
        for (const ip of asArray(sub.IpSubnets)) if (ip.ID) f.ids.add(ip.ID.toUpperCase());
      }
    }
    for (const n of s.Networks) {
      n.ID ??= f.newId();
      for (const sub of subnetsOf(n)) {
        sub.ID ??= f.newId();
        for (const ip of asArray(sub.IpSubnets)) ip.ID ??= f.newId();
      }
    }
    f.networks = s.Networks;
    f.endpoints = s.Endpoints;
    f.routes = s.HostRoutes;
    return f;
  }

  /** Get-HnsNetwork / Get-HnsEndpoint / Get-NetRoute, as one snapshot (a deep copy). */
  snapshot(): HnsSnapshot {
    return clone({ Networks: this.networks, Endpoints: this.endpoints, HostRoutes: this.routes });
  }

  private newId(): string {
    let id: string;
    do {
      this.idCounter++;
      id = `FA4E0000-0000-4000-8000-${this.idCounter.toString(16).toUpperCase().padStart(12, '0')}`;
    } while (this.ids.has(id));
    this.ids.add(id);
    return id;
  }

  /** Before and after every change: maybe fail, as injected. */
  private fault(stage: 'before' | 'after', what: string): void {
    const f = this.faults;
    if (!f || f.rate <= 0) return;
    const r = f.random();
    const half = f.rate / 2;
    if (stage === 'before' ? r < half : r >= half && r < f.rate) {
      throw new HcnError(HCN.UNAVAILABLE, `injected fault ${stage} ${what}`);
    }
  }

  private mutate<T>(what: string, change: () => T): T {
    this.fault('before', what);
    const out = change();
    this.fault('after', what);
    return out;
  }

  private network(id: string): HnsNetwork {
    const n = this.networks.find((x) => sameId(x.ID, id));
    if (!n) throw new HcnError(HCN.NETWORK_NOT_FOUND, `network ${id} not found`);
    return n;
  }

  networkByName(name: string): HnsNetwork | undefined {
    return this.networks.find((n) => n.Name === name);
  }

  // ---- HCN calls ---------------------------------------------------------------------------------------------

  /** HcnCreateNetwork. */
  createNetwork(settings: HnsNetwork): HnsNetwork {
    this.calls.push({ kind: 'create-network', request: clone(settings) });
    if (typeof settings?.Name !== 'string' || !settings.Name) throw new HcnError(HCN.INVALID_ARG, 'network needs a Name');
    if (typeof settings.Type !== 'string') throw new HcnError(HCN.INVALID_ARG, 'network needs a Type');
    const net = clone(settings);
    net.Ipams = asArray(net.Ipams);
    const policies = asArray(net.Policies);
    net.Policies = [];
    for (const p of policies) {
      this.checkPolicy(net, p);
      net.Policies.push(p);
    }
    for (const ipam of net.Ipams) ipam.Subnets = asArray(ipam.Subnets);
    this.checkNetwork(net);
    return this.mutate('create network', () => {
      net.ID = this.newId();
      for (const s of subnetsOf(net)) {
        s.ID = this.newId();
        for (const ip of asArray(s.IpSubnets)) ip.ID = this.newId();
      }
      this.networks.push(net);
      return clone(net);
    });
  }

  /** HcnDeleteNetwork. */
  deleteNetwork(id: string): void {
    const n = this.network(id);
    if (this.endpoints.some((e) => sameId(endpointNetwork(e), n.ID))) {
      throw new HcnError(HCN.ENTITY_HAS_REFERENCES, `network ${n.Name} has endpoints`);
    }
    this.networks = this.networks.filter((x) => x !== n);
  }

  /** HcnModifyNetwork with a ModifyNetworkSettingRequest. All or nothing. */
  modifyNetwork(id: string, request: ModifyNetworkRequest): void {
    this.calls.push({ kind: 'modify-network', networkId: id, request: clone(request) });
    const live = this.network(id);
    const net = clone(live);
    const { ResourceType, RequestType } = request ?? ({} as ModifyNetworkRequest);
    const settings = (request?.Settings ?? {}) as Record<string, unknown>;
    if (ResourceType === 'Subnet' && RequestType === 'Add') {
      if (!net.Ipams?.length) net.Ipams = [{ Type: 'Static', Subnets: [] }];
      const ipam = net.Ipams[0];
      ipam.Subnets = asArray(ipam.Subnets);
      for (const s of asArray(settings.Subnets as HnsSubnet[])) {
        const copy = clone(s);
        delete copy.ID;
        copy.IpSubnets = asArray(copy.IpSubnets).map((ip) => {
          const c = { ...ip };
          delete c.ID;
          return c;
        });
        ipam.Subnets.push(copy);
      }
      this.checkNetwork(net);
    } else if (ResourceType === 'Subnet' && RequestType === 'Remove') {
      for (const ref of asArray(settings.Subnets as HnsSubnet[])) {
        const { ipam, index, subnet } = this.findSubnet(net, ref.ID, ref.IpAddressPrefix);
        const ips = [strictPrefix(subnet.IpAddressPrefix, 'subnet'), ...asArray(subnet.IpSubnets).map((i) => strictPrefix(i.IpAddressPrefix, 'ip-subnet'))];
        for (const p of ips) this.checkUnused(net, p);
        ipam.Subnets!.splice(index, 1);
      }
    } else if (ResourceType === 'IPSubnet' && (RequestType === 'Add' || RequestType === 'Remove')) {
      if (settings.SubnetId === undefined) throw new HcnError(HCN.INVALID_ARG, 'IPSubnet request without SubnetId');
      const { subnet } = this.findSubnet(net, settings.SubnetId as string, undefined);
      subnet.IpSubnets = asArray(subnet.IpSubnets);
      for (const ref of asArray(settings.IpSubnets as HnsIpSubnet[])) {
        if (RequestType === 'Add') {
          const c = { ...ref };
          delete c.ID;
          subnet.IpSubnets.push(c);
        } else {
          const i = subnet.IpSubnets.findIndex((x) =>
            ref.ID !== undefined ? sameId(x.ID, ref.ID) : samePrefixText(x.IpAddressPrefix, ref.IpAddressPrefix),
          );
          if (i < 0) throw new HcnError(HCN.SUBNET_NOT_FOUND, `ip-subnet ${ref.ID ?? ref.IpAddressPrefix} not found`);
          this.checkUnused(net, strictPrefix(subnet.IpSubnets[i].IpAddressPrefix, 'ip-subnet'));
          subnet.IpSubnets.splice(i, 1);
        }
      }
      if (RequestType === 'Add') this.checkNetwork(net);
    } else if (ResourceType === 'Policy' && (RequestType === 'Add' || RequestType === 'Remove')) {
      net.Policies = asArray(net.Policies);
      for (const p of asArray(settings.Policies as HnsPolicy[])) {
        if (RequestType === 'Add') {
          this.checkPolicy(net, p);
          net.Policies.push(clone(p));
        } else {
          const i = net.Policies.findIndex((x) => samePolicy(x, p));
          if (i < 0) throw new HcnError(HCN.ELEMENT_NOT_FOUND, `policy ${p?.Type} ${JSON.stringify(p?.Settings ?? {})} not found`);
          net.Policies.splice(i, 1);
        }
      }
    } else {
      throw new HcnError(HCN.INVALID_ARG, `unsupported request ${RequestType} ${ResourceType}`);
    }
    this.mutate(`${RequestType} ${ResourceType}`, () => {
      // New objects get IDs on commit.
      for (const s of subnetsOf(net)) {
        s.ID ??= this.newId();
        for (const ip of asArray(s.IpSubnets)) ip.ID ??= this.newId();
      }
      this.networks[this.networks.indexOf(live)] = net;
    });
  }

  private findSubnet(net: HnsNetwork, id: string | undefined, prefix: string | undefined) {
    for (const ipam of asArray(net.Ipams)) {
      const subs = asArray(ipam.Subnets);
      for (let index = 0; index < subs.length; index++) {
        const s = subs[index];
        if (id !== undefined ? sameId(s.ID, id) : samePrefixText(s.IpAddressPrefix, prefix)) {
          ipam.Subnets = subs;
          return { ipam, index, subnet: s };
        }
      }
    }
    throw new HcnError(HCN.SUBNET_NOT_FOUND, `subnet ${id ?? prefix} not found`);
  }

  private checkUnused(net: HnsNetwork, p: Prefix): void {
    for (const e of this.endpoints) {
      if (!sameId(endpointNetwork(e), net.ID)) continue;
      for (const ip of endpointAddresses(e)) {
        if (prefixContainsIP(p, ip)) throw new HcnError(HCN.ENTITY_HAS_REFERENCES, `${formatPrefix(p)} is used by endpoint ${e.ID} (${ip})`);
      }
    }
  }

  /** Subnets and ip-subnets of a whole network: valid, inside their Subnet, pairwise disjoint. */
  private checkNetwork(net: HnsNetwork): void {
    const subs = subnetsOf(net);
    if (subs.length > 1 && !MULTI_SUBNET_TYPES.has(net.Type.toLowerCase())) {
      throw new HcnError(HCN.INVALID_ARG, `a ${net.Type} network has one subnet; multiple subnets need L2Bridge, L2Tunnel or Overlay`);
    }
    const sp: Prefix[] = [];
    const ipp: Prefix[] = [];
    for (const s of subs) {
      const p = strictPrefix(s.IpAddressPrefix, 'subnet');
      for (const q of sp) if (prefixesOverlap(p, q)) throw new HcnError(HCN.INVALID_PREFIX, `subnet ${formatPrefix(p)} overlaps ${formatPrefix(q)}`);
      sp.push(p);
      for (const r of asArray(s.Routes)) {
        strictIP(r?.NextHop, `subnet ${formatPrefix(p)} route next hop`);
        if (r?.DestinationPrefix !== '0.0.0.0' && r?.DestinationPrefix !== '::') strictPrefix(r?.DestinationPrefix, 'route');
      }
      if (net.Type.toLowerCase() === 'overlay') {
        const vsid = asArray(s.Policies).find((x) => x?.Type === 'VSID');
        if (!vsid || !(Number(vsid.Settings?.IsolationId) >= 4096)) {
          throw new HcnError(HCN.INVALID_ARG, `overlay subnet ${formatPrefix(p)} needs a VSID policy with IsolationId >= 4096`);
        }
      }
      for (const ip of asArray(s.IpSubnets)) {
        const q = strictPrefix(ip?.IpAddressPrefix, 'ip-subnet');
        if (!prefixContainsPrefix(p, q)) throw new HcnError(HCN.INVALID_PREFIX, `ip-subnet ${formatPrefix(q)} is outside its subnet ${formatPrefix(p)}`);
        for (const o of ipp) if (prefixesOverlap(o, q)) throw new HcnError(HCN.INVALID_PREFIX, `ip-subnet ${formatPrefix(q)} overlaps ${formatPrefix(o)}`);
        const flags = ip.Flags ?? 0;
        if (!Number.isInteger(flags) || flags < 0 || flags > 3) throw new HcnError(HCN.INVALID_ARG, `ip-subnet ${formatPrefix(q)}: bad Flags ${flags}`);
        ipp.push(q);
      }
    }
  }

  private checkPolicy(net: HnsNetwork, p: HnsPolicy): void {
    if (!p || typeof p.Type !== 'string') throw new HcnError(HCN.INVALID_ARG, 'policy without Type');
    const existing = asArray(net.Policies);
    if (p.Type === 'RemoteSubnetRoute') {
      const s = p.Settings ?? {};
      if (net.Type.toLowerCase() !== 'overlay') throw new HcnError(HCN.INVALID_ARG, `RemoteSubnetRoute on a ${net.Type} network`);
      const dest = strictPrefix(s.DestinationPrefix, 'RemoteSubnetRoute');
      const vsid = Number(s.IsolationId);
      if (!Number.isInteger(vsid) || vsid < 4096 || vsid > 65535) throw new HcnError(HCN.INVALID_ARG, `RemoteSubnetRoute: IsolationId ${s.IsolationId}`);
      strictIP(s.ProviderAddress, 'RemoteSubnetRoute ProviderAddress');
      if (normalizeMac(s.DistributedRouterMacAddress) === null) throw new HcnError(HCN.INVALID_ARG, `RemoteSubnetRoute: bad MAC ${s.DistributedRouterMacAddress}`);
      for (const x of existing) {
        if (x?.Type === 'RemoteSubnetRoute' && samePrefixText(x.Settings?.DestinationPrefix as string, formatPrefix(dest))) {
          throw new HcnError(HCN.POLICY_ALREADY_EXISTS, `RemoteSubnetRoute for ${formatPrefix(dest)} already exists`);
        }
      }
      return;
    }
    if (existing.some((x) => x?.Type === p.Type)) throw new HcnError(HCN.POLICY_ALREADY_EXISTS, `${p.Type} policy already exists`);
  }

  // ---- endpoints (tests) -------------------------------------------------------------------------------------

  /** HcnCreateEndpoint (enough of it): the address must be inside an ip-subnet of the network. */
  createEndpoint(networkId: string, ipAddress: string, name = ''): HnsEndpoint {
    const net = this.network(networkId);
    const ip = strictIP(ipAddress, 'endpoint address');
    let len: number | undefined;
    for (const s of subnetsOf(net)) {
      for (const i of asArray(s.IpSubnets)) {
        const p = strictPrefix(i.IpAddressPrefix, 'ip-subnet');
        if (prefixContainsIP(p, ip)) len = p.len;
      }
    }
    if (len === undefined) throw new HcnError(HCN.INVALID_PREFIX, `${ipAddress} is in no ip-subnet of ${net.Name}`);
    const e: HnsEndpoint = { ID: this.newId(), Name: name, HostComputeNetwork: net.ID, IpConfigurations: [{ IpAddress: ipAddress, PrefixLength: len }] };
    this.endpoints.push(e);
    return clone(e);
  }

  deleteEndpoint(id: string): void {
    const i = this.endpoints.findIndex((e) => sameId(e.ID, id));
    if (i < 0) throw new HcnError(HCN.ELEMENT_NOT_FOUND, `endpoint ${id} not found`);
    this.endpoints.splice(i, 1);
  }

  // ---- management vNIC routes ----------------------------------------------------------------------------------

  /** New-NetRoute. */
  addRoute(r: NetRoute): void {
    this.calls.push({ kind: 'add-route', request: clone(r) });
    strictIP(r.NextHop, 'route next hop');
    const key = routeKey(r);
    if (this.routes.some((x) => routeKey(x) === key)) throw new HcnError(HCN.ALREADY_EXISTS, `route ${key} already exists`);
    this.mutate('add route', () => void this.routes.push({ ...r }));
  }

  /** Remove-NetRoute (matches prefix, next hop and interface). */
  removeRoute(r: NetRoute): void {
    this.calls.push({ kind: 'remove-route', request: clone(r) });
    const key = routeKey(r);
    const i = this.routes.findIndex((x) => routeKey(x) === key);
    if (i < 0) throw new HcnError(HCN.ELEMENT_NOT_FOUND, `no matching route ${key}`);
    this.mutate('remove route', () => void this.routes.splice(i, 1));
  }

  /** Routes on the management vNIC vanish now and then (vNIC reset, HNS restart): drop those `pred` picks. */
  loseHostRoutes(pred: (r: NetRoute) => boolean = () => true): number {
    const before = this.routes.length;
    this.routes = this.routes.filter((r) => !pred(r));
    return before - this.routes.length;
  }

  // ---- ops ---------------------------------------------------------------------------------------------------

  /** Apply one planner op the way the Windows executor would: network by name, a new Subnet's ID by prefix. */
  applyOp(op: HnsOp): void {
    switch (op.op) {
      case 'create-network':
        this.createNetwork(op.body as HnsNetwork);
        return;
      case 'add-host-route':
        this.addRoute(op.body as NetRoute);
        return;
      case 'remove-host-route':
        this.removeRoute(op.body as NetRoute);
        return;
      case 'create-endpoint': {
        const net = op.network !== undefined ? this.networkByName(op.network) : undefined;
        if (!net) throw new HcnError(HCN.NETWORK_NOT_FOUND, `network ${op.network} not found`);
        const e = op.body as HnsEndpoint;
        const ip = asArray(e.IpConfigurations)[0]?.IpAddress;
        this.calls.push({ kind: 'create-endpoint', networkId: net.ID, request: clone(e) });
        this.createEndpoint(net.ID!, String(ip), e.Name ?? '');
        return;
      }
      case 'remove-endpoint':
        this.calls.push({ kind: 'remove-endpoint', request: clone(op.body) });
        this.deleteEndpoint((op.body as HnsEndpoint).ID);
        return;
      default: {
        const net = op.network !== undefined ? this.networkByName(op.network) : undefined;
        if (!net) throw new HcnError(HCN.NETWORK_NOT_FOUND, `network ${op.network} not found`);
        const req = clone(op.body as ModifyNetworkRequest);
        if (req.ResourceType === 'IPSubnet') {
          const s = req.Settings as { SubnetId?: string };
          if (s.SubnetId === undefined) s.SubnetId = this.subnetIdByPrefix(net, op.subnet);
        }
        this.modifyNetwork(net.ID!, req);
      }
    }
  }

  private subnetIdByPrefix(net: HnsNetwork, prefix: string | undefined): string {
    const s = subnetsOf(net).find((x) => samePrefixText(x.IpAddressPrefix, prefix));
    if (!s?.ID) throw new HcnError(HCN.SUBNET_NOT_FOUND, `subnet ${prefix} not found`);
    return s.ID;
  }

  /** Apply ops in order, with the executors' rules (applySequential). */
  applyAll(ops: readonly HnsOp[]): ApplyResult {
    return applySequentialSync(ops, (batch) => this.runBatch(batch));
  }

  /** Apply ops until the first failure. */
  runBatch(ops: readonly HnsOp[]): { applied: number; error?: Error } {
    for (let i = 0; i < ops.length; i++) {
      try {
        this.applyOp(ops[i]);
      } catch (e) {
        return { applied: i, error: e as Error };
      }
    }
    return { applied: ops.length };
  }
}

function samePrefixText(a: unknown, b: unknown): boolean {
  if (a === b) return typeof a === 'string';
  const pa = typeof a === 'string' ? safePrefix(a) : null;
  const pb = typeof b === 'string' ? safePrefix(b) : null;
  return pa !== null && pa === pb;
}

function safePrefix(text: string): string | null {
  try {
    return formatPrefix(parsePrefix(text));
  } catch {
    return null;
  }
}

function samePolicy(a: HnsPolicy, b: HnsPolicy): boolean {
  if (!a || !b || a.Type !== b.Type) return false;
  if (a.Type === 'RemoteSubnetRoute') {
    const x = a.Settings ?? {};
    const y = b.Settings ?? {};
    return (
      samePrefixText(x.DestinationPrefix, y.DestinationPrefix) &&
      Number(x.IsolationId) === Number(y.IsolationId) &&
      readIP(x.ProviderAddress)?.key === readIP(y.ProviderAddress)?.key &&
      normalizeMac(x.DistributedRouterMacAddress) === normalizeMac(y.DistributedRouterMacAddress)
    );
  }
  if (a.Type === 'HostRoute') return true;
  return JSON.stringify(a.Settings ?? {}) === JSON.stringify(b.Settings ?? {});
}

/** The fake as an executor (async like the real one); read() can fail too, with a non-NOT_FOUND error. */
export class FakeExecutor implements HnsExecutor {
  constructor(readonly hns: FakeHns) {}

  async read(): Promise<HnsSnapshot> {
    const f = this.hns.faults;
    if (f && (f.readRate ?? 0) > 0 && f.random() < f.readRate!) throw new HcnError(HCN.UNAVAILABLE, 'injected fault on read');
    return this.hns.snapshot();
  }

  apply(ops: readonly HnsOp[]): Promise<ApplyResult> {
    return applySequential(ops, async (batch) => this.hns.runBatch(batch));
  }
}
