// The Windows executor: planner ops as HCN calls (computenetwork.dll), the host endpoint's attach as HNS's host
// attach (vmcompute.dll), and the management vNIC's routes through IP Helper, all behind the interfaces of
// hcn-api.ts, so this file does no native work itself and tests hand it doubles.
//
//   create-network            HcnCreateNetwork (all-zero GUID: HCN assigns the ID)
//   add/remove-subnet         HcnModifyNetwork {ResourceType: Subnet,   RequestType: Add|Remove, Settings: {Subnets}}
//   add/remove-ip-subnet      HcnModifyNetwork {ResourceType: IPSubnet, RequestType: Add|Remove, Settings: {SubnetId, IpSubnets}}
//   add/remove-policy         HcnModifyNetwork {ResourceType: Policy,   RequestType: Add|Remove, Settings: {Policies}}
//   create-endpoint           HcnCreateEndpoint in the network, then the host attach (compartment 1)
//   remove-endpoint           detach from its namespace (if any), HcnDeleteEndpoint
//   add/remove-host-route     CreateIpForwardEntry2 / DeleteIpForwardEntry2 on the management vNIC, protocol NETMGMT,
//                             our route metric (the marker that tells our routes from others' after a restart)
//
// IDs the planner could not know (a Subnet added earlier in the same plan, an ip-subnet to remove) are looked up by
// prefix in the network's properties at apply time. Only HCN's NOT_FOUND codes read as "absent" (model.ts).
import { type Prefix, formatIP, parseIP } from '../net/ip.ts';
import { type HcnApi, type HnsHostAttach, type IpHelperApi, type IpInterface, RouteProtocol, hcnQuery } from '../platform/windows-net-api.ts';
import {
  type ApplyResult,
  type HnsEndpoint,
  type HnsExecutor,
  type HnsIpSubnet,
  type HnsNetwork,
  type HnsOp,
  type HnsSnapshot,
  type HnsSubnet,
  type ModifyNetworkRequest,
  type NetRoute,
  HCN,
  HcnError,
  OwnedPrefixReader,
  applySequential,
  endpointNetwork,
  isOnLinkNextHop,
  parseSnapshot,
  readPrefix,
  sameId,
  subnetsOf,
} from './model.ts';

export interface HcnExecutorOptions {
  hcn: HcnApi;
  hns: HnsHostAttach;
  ipHelper: IpHelperApi;
  /** The HNS network's name. */
  network: string;
  /**
   * Alias of the management vNIC whose routes are read and written (l2bridge / l2tunnel); a function so the
   * dataplane can find it once the vNIC exists. Undefined: no host routes are read.
   */
  interfaceAlias?: () => string | undefined | Promise<string | undefined>;
}

/** The host compartment: where the host endpoint's vNIC goes (HNS's HostAttach). */
export const HOST_COMPARTMENT = 1;

export class HcnExecutor implements HnsExecutor {
  private readonly aliases = new Map<string, IpInterface>();
  private readonly luids = new Map<bigint, string>();

  constructor(private readonly o: HcnExecutorOptions) {}

  async read(): Promise<HnsSnapshot> {
    const { hcn } = this.o;
    const netIds = await hcn.enumerate('Network', hcnQuery({ Name: this.o.network }));
    const Networks: HnsNetwork[] = [];
    for (const id of netIds) {
      const n = await queryOrNull(hcn, 'Network', id);
      if (n && n.Name === this.o.network) Networks.push(n as unknown as HnsNetwork);
    }
    const Endpoints: HnsEndpoint[] = [];
    if (Networks.length > 0) {
      for (const id of await hcn.enumerate('Endpoint', hcnQuery())) {
        const e = await queryOrNull(hcn, 'Endpoint', id);
        if (e) Endpoints.push(e as unknown as HnsEndpoint);
      }
    }
    return parseSnapshot({ Networks, Endpoints, HostRoutes: await this.readRoutes() });
  }

  /** Every route on the management vNIC (ours and others': a foreign route with our key would refuse our add). */
  private async readRoutes(): Promise<NetRoute[]> {
    const alias = await this.o.interfaceAlias?.();
    if (alias === undefined) return [];
    let nic: IpInterface;
    try {
      nic = await this.iface(alias);
    } catch (e) {
      if (e instanceof HcnError && e.notFound) return []; // no vNIC yet: no routes on it
      throw e;
    }
    const out: NetRoute[] = [];
    for (const r of await this.o.ipHelper.routes(0)) {
      if (r.interfaceLuid !== nic.luid) continue;
      out.push({ DestinationPrefix: r.destination, NextHop: r.nextHop, InterfaceAlias: alias, RouteMetric: r.metric });
    }
    return out;
  }

  /** An interface by alias, cached (the vNIC's LUID is stable while it exists; a miss is asked again). */
  async iface(alias: string): Promise<IpInterface> {
    const hit = this.aliases.get(alias);
    if (hit) return hit;
    const nic = await this.o.ipHelper.interfaceByAlias(alias);
    this.aliases.set(alias, nic);
    this.luids.set(nic.luid, alias);
    return nic;
  }

  /**
   * The management vNIC when the config names none: the interface of the host's IPv4 default route (lowest metric).
   * On an l2bridge node the physical NIC is bound to the vSwitch, so that route is on the management vNIC.
   */
  async defaultRouteInterface(): Promise<string | undefined> {
    let best: { luid: bigint; metric: number } | undefined;
    for (const r of await this.o.ipHelper.routes(4)) {
      if (r.destination !== '0.0.0.0/0') continue;
      if (!best || r.metric < best.metric) best = { luid: r.interfaceLuid, metric: r.metric };
    }
    if (!best) return undefined;
    const known = this.luids.get(best.luid);
    if (known !== undefined) return known;
    const nic = await this.o.ipHelper.interfaceByLuid(best.luid);
    this.aliases.set(nic.alias, nic);
    this.luids.set(nic.luid, nic.alias);
    return nic.alias;
  }

  /**
   * Forwarding on, per family, on each interface (the management vNIC and the host endpoint's vNIC), as Calico's
   * enableForwarding and flannel do: else the host drops pod traffic it should route to other nodes. Only an
   * interface that has it off is written. Returns what was switched on; an interface not there yet is skipped.
   */
  async ensureForwarding(aliases: readonly string[], families: readonly (4 | 6)[]): Promise<{ alias: string; family: 4 | 6 }[]> {
    const changed: { alias: string; family: 4 | 6 }[] = [];
    for (const alias of aliases) {
      let nic: IpInterface;
      try {
        nic = await this.iface(alias);
      } catch (e) {
        if (e instanceof HcnError && e.notFound) continue;
        throw e;
      }
      for (const family of families) {
        if (await this.o.ipHelper.forwarding(nic.luid, family)) continue;
        await this.o.ipHelper.setForwarding(nic.luid, family, true);
        changed.push({ alias, family });
      }
    }
    return changed;
  }

  /**
   * Uninstall: every endpoint on our network (detached from its namespace first), the network itself, and our
   * routes on the management vNIC (our metric, destination inside `owned`: the pools and ownedPrefixes). Others'
   * networks, endpoints and routes are never named. What is already gone counts as done.
   */
  async teardown(owned: readonly Prefix[], routeMetric: number): Promise<{ endpoints: number; networks: number; routes: number }> {
    const actual = await this.read();
    const done = { endpoints: 0, networks: 0, routes: 0 };
    const gone = async (f: () => Promise<void>): Promise<boolean> => {
      try {
        await f();
        return true;
      } catch (e) {
        if (e instanceof HcnError && e.notFound) return false;
        throw e;
      }
    };
    for (const net of actual.Networks) {
      for (const e of actual.Endpoints) {
        if (!sameId(endpointNetwork(e), net.ID)) continue;
        const ns = (e as Record<string, unknown>).HostComputeNamespace;
        if (typeof ns === 'string' && ns !== '') await detach(this.o.hcn, ns, e.ID);
        if (await gone(() => this.o.hcn.remove('Endpoint', e.ID))) done.endpoints++;
      }
      if (await gone(() => this.o.hcn.remove('Network', net.ID!))) done.networks++;
    }
    const reader = new OwnedPrefixReader(owned);
    for (const r of actual.HostRoutes) {
      if (Number(r.RouteMetric) !== routeMetric || isOnLinkNextHop(r.NextHop) || reader.ownedKey(r.DestinationPrefix) === null) continue;
      const nic = await this.iface(r.InterfaceAlias);
      const p = readPrefix(r.DestinationPrefix)!;
      const row = { family: p.prefix.family, interfaceLuid: nic.luid, interfaceIndex: nic.index, destination: p.key, nextHop: formatIP(parseIP(r.NextHop)), metric: routeMetric, protocol: RouteProtocol.NETMGMT };
      if (await gone(() => this.o.ipHelper.deleteRoute(row))) done.routes++;
    }
    return done;
  }

  apply(ops: readonly HnsOp[]): Promise<ApplyResult> {
    return applySequential(ops, async (batch) => {
      let net: HnsNetwork | null = null; // the network's properties, re-read after a change that adds IDs
      for (let i = 0; i < batch.length; i++) {
        try {
          net = await this.applyOp(batch[i], net);
        } catch (e) {
          if (e instanceof HcnError && e.code === HCN.INVALID_ARG) this.aliases.clear(); // a vNIC that went away
          return { applied: i, error: e as Error };
        }
      }
      return { applied: batch.length };
    });
  }

  private async network(cached: HnsNetwork | null): Promise<HnsNetwork> {
    if (cached) return cached;
    const ids = await this.o.hcn.enumerate('Network', hcnQuery({ Name: this.o.network }));
    if (ids.length === 0) throw new HcnError(HCN.NETWORK_NOT_FOUND, `network ${this.o.network} not found`);
    return parseSnapshot([await this.o.hcn.query('Network', ids[0], hcnQuery())]).Networks[0];
  }

  /** One op; returns the network properties still valid after it (null when they must be re-read). */
  private async applyOp(op: HnsOp, cached: HnsNetwork | null): Promise<HnsNetwork | null> {
    const { hcn } = this.o;
    switch (op.op) {
      case 'create-network':
        await hcn.create('Network', JSON.stringify(op.body));
        return null;
      case 'add-host-route':
      case 'remove-host-route': {
        const r = op.body as NetRoute;
        const nic = await this.iface(r.InterfaceAlias);
        const p = readPrefix(r.DestinationPrefix);
        if (!p) throw new HcnError(HCN.INVALID_PREFIX, `host route: ${JSON.stringify(r.DestinationPrefix)} is not a prefix`);
        const row = {
          family: p.prefix.family, interfaceLuid: nic.luid, interfaceIndex: nic.index, destination: p.key,
          nextHop: formatIP(parseIP(r.NextHop)), metric: Number(r.RouteMetric ?? 0), protocol: RouteProtocol.NETMGMT,
        };
        if (op.op === 'add-host-route') await this.o.ipHelper.createRoute(row);
        else await this.o.ipHelper.deleteRoute(row);
        return cached;
      }
      case 'create-endpoint': {
        const net = await this.network(cached);
        const body = { ...(op.body as HnsEndpoint), HostComputeNetwork: net.ID } as Record<string, unknown>;
        delete body.ID; // HCN assigns it
        const made = await hcn.create('Endpoint', JSON.stringify(body), net.ID);
        await this.o.hns.hostAttach(String(made.ID), HOST_COMPARTMENT);
        return net;
      }
      case 'remove-endpoint': {
        const id = (op.body as HnsEndpoint).ID;
        const props = await hcn.query('Endpoint', id);
        const ns = props.HostComputeNamespace;
        if (typeof ns === 'string' && ns !== '') await detach(hcn, ns, id);
        await hcn.remove('Endpoint', id);
        return cached;
      }
    }
    const net = await this.network(cached);
    const req = structuredClone(op.body as ModifyNetworkRequest);
    if (req.ResourceType === 'IPSubnet') {
      const s = req.Settings as { SubnetId?: string; IpSubnets: HnsIpSubnet[] };
      const parent = s.SubnetId !== undefined ? subnetsOf(net).find((x) => x.ID === s.SubnetId) : subnetByPrefix(net, op.subnet);
      if (s.SubnetId === undefined) s.SubnetId = parent?.ID ?? missing(`subnet ${op.subnet}`);
      if (req.RequestType === 'Remove') {
        for (const ip of s.IpSubnets) ip.ID ??= (parent?.IpSubnets ?? []).find((x) => samePrefix(x.IpAddressPrefix, ip.IpAddressPrefix))?.ID ?? missing(`ip-subnet ${ip.IpAddressPrefix}`);
      }
    } else if (req.ResourceType === 'Subnet' && req.RequestType === 'Remove') {
      for (const s of (req.Settings as { Subnets: HnsSubnet[] }).Subnets) s.ID ??= subnetByPrefix(net, s.IpAddressPrefix)?.ID ?? missing(`subnet ${s.IpAddressPrefix}`);
    }
    await hcn.modify('Network', net.ID!, JSON.stringify(req));
    // Adds give new objects IDs the next op may need; removes only take away what the next op will not name.
    return req.RequestType === 'Add' && req.ResourceType !== 'Policy' ? null : net;
  }
}

const missing = (what: string): never => {
  throw new HcnError(HCN.SUBNET_NOT_FOUND, `${what} not found`);
};

const samePrefix = (a: unknown, b: unknown): boolean => {
  const x = readPrefix(a);
  return x !== null && x.key === readPrefix(b)?.key;
};

const subnetByPrefix = (net: HnsNetwork, prefix: string | undefined): HnsSubnet | undefined =>
  subnetsOf(net).find((s) => samePrefix(s.IpAddressPrefix, prefix));

/** An object's properties, or null when it went away between the enumeration and the query. */
async function queryOrNull(hcn: HcnApi, kind: 'Network' | 'Endpoint', id: string): Promise<Record<string, unknown> | null> {
  try {
    return await hcn.query(kind, id, hcnQuery());
  } catch (e) {
    if (e instanceof HcnError && e.notFound) return null;
    throw e;
  }
}

/** HcnModifyNamespace: take an endpoint out of its namespace; already out (or the namespace gone) is done. */
export async function detach(hcn: HcnApi, namespace: string, endpoint: string): Promise<void> {
  try {
    await hcn.modify('Namespace', namespace, JSON.stringify({ ResourceType: 'Endpoint', RequestType: 'Remove', Settings: { EndpointId: endpoint } }));
  } catch (e) {
    if (!(e instanceof HcnError && e.notFound)) throw e;
  }
}

/** HcnModifyNamespace: put an endpoint into a namespace (containerd's pod namespace, CNI_NETNS). */
export async function attach(hcn: HcnApi, namespace: string, endpoint: string): Promise<void> {
  await hcn.modify('Namespace', namespace, JSON.stringify({ ResourceType: 'Endpoint', RequestType: 'Add', Settings: { EndpointId: endpoint } }));
}
