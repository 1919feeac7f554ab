// The stand-in server: the state and the rules behind the test-only computenetwork.dll, vmcompute.dll and
// bs-iphlpapi.dll (see build.ts). Each DLL export sends one JSON line over TCP to 127.0.0.1:%BS_STANDIN_PORT%:
//   {"fn":"HcnCreateNetwork","pid":1234,"args":{...}}
// and gets back text lines: the result code (HRESULT or Win32 error, unsigned decimal), then optional
//   "O <string>" (an out-string: properties, IDs, HNS response, alias), "E <error record>", "I <id>" (the object a
//   handle is opened on), "R <tab-separated fields>" (rows for IP Helper).
// The server holds HCN's networks, endpoints and namespaces, the host's interfaces and route table, and refuses what
// Windows refuses, with its codes. Every call is recorded (`calls`, and a JSON-lines file with `log`).
//
// Codes chosen where Windows' own answer is not documented (so the product must not depend on them):
//  - creating an object with an ID that exists: NETWORK_ALREADY_EXISTS for networks, HRESULT_FROM_WIN32
//    (ERROR_ALREADY_EXISTS) for endpoints and namespaces;
//  - several Subnets on a single-subnet network type, an overlay Subnet without VSID, a bad RemoteSubnetRoute:
//    E_INVALIDARG (as src/hns/fake.ts); removing a policy that is not there: POLICY_NOT_FOUND;
//  - IP Helper, per the SDK docs: ConvertInterfaceAliasToLuid of an unknown alias and ConvertInterfaceLuidToIndex /
//    ...ToAlias of an unknown LUID: ERROR_INVALID_PARAMETER (87) ("the InterfaceAlias/InterfaceLuid parameter was
//    invalid"; Windows may answer ERROR_FILE_NOT_FOUND (2) for the LUID ones, as it does for an unknown index:
//    treat both as "no such interface"); Get/SetIpInterfaceEntry of an unknown LUID or index: ERROR_FILE_NOT_FOUND,
//    of an interface without that family: ERROR_NOT_FOUND; Create/DeleteIpForwardEntry2 naming no interface:
//    ERROR_NOT_FOUND (1168), and a Delete of a route that is not there: ERROR_NOT_FOUND too.
//  - GetIpInterfaceEntry reports SitePrefixLength 64 for both families, so a caller that passes the row back for
//    IPv4 unchanged gets ERROR_INVALID_PARAMETER, as on Windows.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import type { IpForwardRow, IpInterface } from '../../../src/platform/windows-net-api.ts';
import { HCN, type HnsEndpoint, type HnsNetwork, hresultText, normalizeMac } from '../../../src/hns/model.ts';
import {
  type Family, type IP, type Prefix, formatIP, formatPrefix, maxLen, parseIP, parsePrefix, prefixContainsIP, prefixContainsPrefix,
  prefixOf, prefixesOverlap,
} from '../../../src/net/ip.ts';

/** Win32 errors IP Helper returns. */
export const WIN32 = {
  SUCCESS: 0,
  FILE_NOT_FOUND: 2,
  NOT_ENOUGH_MEMORY: 8,
  INVALID_PARAMETER: 87,
  NOT_FOUND: 1168,
  OBJECT_ALREADY_EXISTS: 5010,
} as const;

/** HRESULTs the stand-in uses beyond model.ts's HCN table. */
export const HR = {
  E_HANDLE: 0x80070006,
  E_POINTER: 0x80004003,
  E_UNEXPECTED: 0x8000ffff,
  ALREADY_EXISTS: 0x800700b7,
} as const;

/** MIB_IPPROTO_* / NL_ROUTE_ORIGIN values the stand-in writes. */
const PROTO_LOCAL = 2;
const PROTO_NETMGMT = 3;
const ORIGIN_MANUAL = 0;
const ORIGIN_WELL_KNOWN = 1;

export interface StandinCall {
  fn: string;
  /** The Windows process id of the caller. */
  pid?: number;
  args: Record<string, unknown>;
  /** The result: an HRESULT for HCN and HNSCall, a Win32 error for IP Helper (0 = success). */
  hr: number;
  /** Date.now() when it was answered. */
  at: number;
}

export interface StandinInterface extends IpInterface {
  ipv4Forwarding: boolean;
  ipv6Forwarding: boolean;
  /** The IP families bound to the interface. */
  families: Family[];
  metric: number;
  mtu: number;
  /** Set for the vNIC a host attach made. */
  endpoint?: string;
}

export interface StandinRoute extends IpForwardRow {
  /** NL_ROUTE_ORIGIN: 0 manual, 1 well-known (the stack's connected routes). */
  origin: number;
}

export interface StandinEndpoint {
  ID: string;
  network: string;
  namespace?: string;
  /** The compartment of a host attach. */
  hostCompartment?: number;
  /** The endpoint's properties, as HcnQueryEndpointProperties returns them. */
  properties: HnsEndpoint;
}

export interface StandinNamespace {
  ID: string;
  endpoints: string[];
  properties: Record<string, unknown>;
}

export interface StandinState {
  /** Networks as HcnQueryNetworkProperties returns them. */
  readonly networks: HnsNetwork[];
  readonly endpoints: StandinEndpoint[];
  readonly namespaces: StandinNamespace[];
  readonly routes: StandinRoute[];
  readonly interfaces: StandinInterface[];
}

export interface SeedRoute {
  destination: string;
  nextHop: string;
  metric?: number;
  protocol?: number;
  origin?: number;
}

export interface Standin {
  port: number;
  /** Every call, in order. */
  readonly calls: StandinCall[];
  /** Deep copies of the current state. */
  readonly state: StandinState;
  /** A namespace as containerd makes one for a pod sandbox (Type HostDefault); its ID. */
  addNamespace(type?: string): string;
  /** A host interface; its LUID and index are made up unless given. Routes are put on it. */
  addInterface(
    alias: string,
    opts?: { ipv4Forwarding?: boolean; ipv6Forwarding?: boolean; luid?: bigint; index?: number; families?: Family[]; metric?: number; mtu?: number },
    routes?: SeedRoute[],
  ): StandinInterface;
  /** A route of the host (connected or default), on an interface named by LUID, index or alias. */
  addRoute(row: SeedRoute & { interfaceLuid?: bigint; interfaceIndex?: number; interfaceAlias?: string }): StandinRoute;
  /** A network made as HcnCreateNetwork would (e.g. one that exists before the daemon starts); its ID. */
  addNetwork(settings: Record<string, unknown>): string;
  /**
   * Hold back the next call of `fn` whose arguments `match`: the server acts on it (as HCN would, whoever waits for
   * the answer) only once released. `reached` resolves when the call has arrived.
   */
  hold(fn: string, match?: (args: Record<string, unknown>) => boolean): { reached: Promise<void>; release(): void };
  close(): Promise<void>;
}

// ---- wire ------------------------------------------------------------------------------------------------------

interface Reply {
  code: number;
  out?: string;
  err?: string;
  id?: string;
  rows?: string[];
}

class Refusal extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const refuse = (code: number, message: string): never => {
  throw new Refusal(code, message);
};

const oneLine = (s: string): string => s.replace(/[\r\n]/g, ' ');

function encode(r: Reply): string {
  let s = `${r.code >>> 0}\n`;
  if (r.out !== undefined) s += `O ${oneLine(r.out)}\n`;
  if (r.err !== undefined) s += `E ${oneLine(r.err)}\n`;
  if (r.id !== undefined) s += `I ${r.id}\n`;
  for (const row of r.rows ?? []) s += `R ${oneLine(row)}\n`;
  return s;
}

const bigintJson = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

// ---- HCN documents ---------------------------------------------------------------------------------------------

type Doc = Record<string, unknown>;

/** Top-level fields HCN accepts (hcsshim's HostComputeNetwork, HostComputeEndpoint, HostComputeNamespace). */
const FIELDS = {
  Network: ['ID', 'Name', 'Type', 'Policies', 'MacPool', 'Dns', 'Ipams', 'Flags', 'Health', 'SchemaVersion'],
  Endpoint: [
    'ID', 'Name', 'HostComputeNetwork', 'HostComputeNamespace', 'Policies', 'IpConfigurations', 'Dns', 'Routes', 'MacAddress',
    'Flags', 'Health', 'SchemaVersion',
  ],
  Namespace: ['ID', 'IsDefault', 'NamespaceId', 'Type', 'Resources', 'SchemaVersion'],
  Modify: ['ResourceType', 'RequestType', 'Settings'],
} as const;

const NETWORK_TYPES = ['NAT', 'ICS', 'Transparent', 'L2Bridge', 'L2Tunnel', 'Overlay', 'Private', 'Internal', 'Mirrored'];
const MULTI_SUBNET_TYPES = new Set(['l2bridge', 'l2tunnel', 'overlay']);
const NAMESPACE_TYPES = ['Host', 'HostDefault', 'Guest', 'GuestDefault'];
const SCHEMA = { Major: 2, Minor: 0 };
const ZERO_GUID = '00000000-0000-0000-0000-000000000000';
const GUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const clone = <T>(v: T): T => structuredClone(v);
const isObj = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A GUID as HCN prints it: lower case, no braces; null when the text is not a GUID. */
function normId(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = v.trim().replace(/^\{(.*)\}$/, '$1').toLowerCase();
  return GUID_RE.test(s) ? s : null;
}

function parseDoc(text: unknown, what: string): Doc {
  if (typeof text !== 'string') return refuse(HCN.INVALID_JSON, `${what}: no document`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return refuse(HCN.INVALID_JSON, `${what}: invalid JSON (${(e as Error).message})`);
  }
  if (!isObj(v)) return refuse(HCN.INVALID_JSON, `${what}: not a JSON object`);
  return v;
}

function onlyFields(doc: Doc, allowed: readonly string[], what: string): void {
  for (const k of Object.keys(doc)) if (!allowed.includes(k)) refuse(HCN.INVALID_JSON, `${what}: unknown field "${k}"`);
}

function list(doc: Doc, key: string, what: string): unknown[] {
  const v = doc[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return refuse(HCN.INVALID_JSON, `${what}: ${key} must be an array`);
  return v;
}

function hcnPrefix(text: unknown, what: string): Prefix {
  try {
    return parsePrefix(String(text));
  } catch (e) {
    return refuse(HCN.INVALID_PREFIX, `${what}: ${typeof text === 'string' ? (e as Error).message : 'missing prefix'}`);
  }
}

function hcnIP(text: unknown, code: number, what: string): IP {
  try {
    return parseIP(String(text));
  } catch {
    return refuse(code, `${what}: invalid address ${JSON.stringify(text)}`);
  }
}

/** Subnets of a network document, over all its Ipams (validated as arrays of objects). */
function subnetsOf(doc: Doc): Doc[] {
  const out: Doc[] = [];
  for (const ipam of list(doc, 'Ipams', 'network')) {
    if (!isObj(ipam)) refuse(HCN.INVALID_JSON, 'network: an Ipams entry is not an object');
    for (const s of list(ipam as Doc, 'Subnets', 'Ipam')) {
      if (!isObj(s)) refuse(HCN.INVALID_JSON, 'network: a Subnets entry is not an object');
      out.push(s as Doc);
    }
  }
  return out;
}

function ipSubnetsOf(subnet: Doc): Doc[] {
  return list(subnet, 'IpSubnets', 'Subnet').map((x) => (isObj(x) ? x : refuse(HCN.INVALID_JSON, 'Subnet: an IpSubnets entry is not an object')));
}

/** Values equal for an enumerate filter: GUIDs without regard to case or braces, the rest as JSON. */
function sameValue(a: unknown, b: unknown): boolean {
  const x = normId(a);
  if (x !== null && x === normId(b)) return true;
  return JSON.stringify(a) === JSON.stringify(b);
}

function samePolicy(a: Doc, b: Doc): boolean {
  if (a.Type !== b.Type) return false;
  if (a.Type === 'RemoteSubnetRoute') {
    const p = (x: Doc) => (isObj(x.Settings) ? String(x.Settings.DestinationPrefix) : '');
    try {
      return formatPrefix(parsePrefix(p(a))) === formatPrefix(parsePrefix(p(b)));
    } catch {
      return p(a) === p(b);
    }
  }
  return JSON.stringify(a.Settings ?? {}) === JSON.stringify(b.Settings ?? {});
}

const prefixKey = (text: unknown): string | null => {
  try {
    return formatPrefix(parsePrefix(String(text)));
  } catch {
    return null;
  }
};

// ---- the server ------------------------------------------------------------------------------------------------

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

type Kind = 'Network' | 'Endpoint' | 'Namespace';
const NOT_FOUND: Record<Kind, number> = { Network: HCN.NETWORK_NOT_FOUND, Endpoint: HCN.ENDPOINT_NOT_FOUND, Namespace: HCN.ELEMENT_NOT_FOUND };

class StandinServer {
  readonly calls: StandinCall[] = [];
  private readonly networks = new Map<string, Doc>();
  private readonly endpoints = new Map<string, EndpointRec>();
  private readonly namespaces = new Map<string, NamespaceRec>();
  private readonly interfaces: StandinInterface[] = [];
  private routes: StandinRoute[] = [];
  private nextIndex = 10;
  private nextLuidIndex = 1;
  private nextCompartment = 2;
  private nextMac = 1;

  constructor(private readonly log?: string) {}

  // ---- dispatch ----

  handle(line: string): string {
    let req: { fn?: unknown; pid?: unknown; args?: unknown };
    try {
      req = JSON.parse(line);
    } catch {
      return encode({ code: HR.E_UNEXPECTED, err: 'stand-in: request is not JSON' });
    }
    const fn = typeof req.fn === 'string' ? req.fn : '?';
    const args = isObj(req.args) ? req.args : {};
    const hcnStyle = fn.startsWith('Hcn');
    let reply: Reply;
    try {
      if (typeof args.local === 'number') refuse(args.local, String(args.why ?? 'refused by the DLL'));
      reply = this.call(fn, args);
    } catch (e) {
      if (!(e instanceof Refusal)) {
        // A bug here (or a request the DLLs never send): answered and recorded, so the failing test shows it.
        e = new Refusal(HR.E_UNEXPECTED, `stand-in failed: ${(e as Error).stack ?? e}`);
      }
      const r = e as Refusal;
      if (hcnStyle) {
        reply = { code: r.code, err: JSON.stringify({ Success: false, Error: r.message, ErrorCode: r.code >>> 0 }) };
      } else if (fn === 'HNSCall') {
        reply = { code: r.code, out: JSON.stringify({ Success: false, Error: `${r.message} (${hresultText(r.code)})` }) };
      } else {
        reply = { code: r.code };
      }
    }
    const call: StandinCall = { fn, args, hr: reply.code >>> 0, at: Date.now() };
    if (typeof req.pid === 'number') call.pid = req.pid;
    this.calls.push(call);
    if (this.log) fs.appendFileSync(this.log, `${JSON.stringify(call, bigintJson)}\n`);
    return encode(reply);
  }

  private call(fn: string, a: Doc): Reply {
    const hcn = /^Hcn(Enumerate|Create|Open|Modify|Query|Delete|Close)(Network|Endpoint|Namespace)(s|Properties)?$/.exec(fn);
    if (hcn) {
      const kind = hcn[2] as Kind;
      switch (hcn[1]) {
        case 'Enumerate':
          return this.enumerate(kind, a.query);
        case 'Create':
          return this.create(kind, a);
        case 'Open':
          return { code: 0, id: this.existing(kind, a.id) };
        case 'Modify':
          this.modify(kind, this.existing(kind, a.handle), a.settings);
          return { code: 0 };
        case 'Query':
          return { code: 0, out: JSON.stringify(this.query(kind, a)) };
        case 'Delete':
          this.remove(kind, this.existing(kind, a.id));
          return { code: 0 };
        case 'Close':
          return { code: 0 };
      }
    }
    switch (fn) {
      case 'HNSCall':
        return this.hnsCall(a);
      case 'InitializeIpForwardEntry':
      case 'InitializeIpInterfaceEntry':
      case 'FreeMibTable':
        return { code: 0 };
      case 'CreateIpForwardEntry2':
        return this.createRoute(a);
      case 'DeleteIpForwardEntry2':
        return this.deleteRoute(a);
      case 'GetIpForwardTable2':
        return this.routeTable(a);
      case 'GetIpInterfaceEntry':
        return this.getInterface(a);
      case 'SetIpInterfaceEntry':
        return this.setInterface(a);
      case 'ConvertInterfaceAliasToLuid': {
        const alias = String(a.alias).toLowerCase();
        const i = this.interfaces.find((x) => x.alias.toLowerCase() === alias) ?? refuse(WIN32.INVALID_PARAMETER, `no interface "${a.alias}"`);
        return { code: 0, rows: [i.luid.toString()] };
      }
      case 'ConvertInterfaceLuidToAlias': {
        const i = this.byLuid(a.luid) ?? refuse(WIN32.INVALID_PARAMETER, `no interface with LUID ${a.luid}`);
        if (Number(a.length) < i.alias.length + 1) refuse(WIN32.NOT_ENOUGH_MEMORY, `alias needs ${i.alias.length + 1} characters`);
        return { code: 0, out: i.alias };
      }
      case 'ConvertInterfaceLuidToIndex': {
        const i = this.byLuid(a.luid) ?? refuse(WIN32.INVALID_PARAMETER, `no interface with LUID ${a.luid}`);
        return { code: 0, rows: [String(i.index)] };
      }
    }
    return refuse(HR.E_UNEXPECTED, `stand-in has no function ${fn}`);
  }

  // ---- HCN ----

  private store(kind: Kind): Map<string, unknown> {
    return kind === 'Network' ? this.networks : kind === 'Endpoint' ? this.endpoints : this.namespaces;
  }

  /** The ID of an object that exists, else the kind's NOT_FOUND. */
  private existing(kind: Kind, id: unknown): string {
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

  private view(kind: Kind, id: string): Doc {
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

  private enumerate(kind: Kind, query: unknown): Reply {
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

  private query(kind: Kind, a: Doc): Doc {
    const id = this.existing(kind, a.handle);
    if (a.query !== null && a.query !== undefined) parseDoc(a.query, 'query');
    return this.view(kind, id);
  }

  private create(kind: Kind, a: Doc): Reply {
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

  private modify(kind: Kind, id: string, settings: unknown): void {
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

  private remove(kind: Kind, id: string): void {
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

  private hnsCall(a: Doc): Reply {
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

  // ---- IP Helper ----

  newInterface(alias: string, o: Parameters<Standin['addInterface']>[1] & object): StandinInterface {
    const luid = o.luid ?? ((6n << 48n) | (BigInt(this.nextLuidIndex++) << 24n)); // IfType 6 (ethernet), NetLuidIndex
    const i: StandinInterface = {
      alias, luid, index: o.index ?? this.nextIndex++, ipv4Forwarding: o.ipv4Forwarding ?? false, ipv6Forwarding: o.ipv6Forwarding ?? false,
      families: o.families ?? [4, 6], metric: o.metric ?? 15, mtu: o.mtu ?? 1500,
    };
    if (this.interfaces.some((x) => x.luid === i.luid || x.index === i.index || x.alias.toLowerCase() === alias.toLowerCase())) {
      throw new Error(`stand-in: interface ${alias} (LUID ${i.luid}, index ${i.index}) clashes with an existing one`);
    }
    this.interfaces.push(i);
    return i;
  }

  private byLuid(v: unknown): StandinInterface | undefined {
    let luid: bigint;
    try {
      luid = BigInt(String(v));
    } catch {
      return undefined;
    }
    return this.interfaces.find((i) => i.luid === luid);
  }

  /** The interface a row names: by LUID when it is set, else by index. */
  private rowInterface(a: Doc, notFound: number): StandinInterface {
    const luid = BigInt(String(a.luid ?? '0'));
    const index = Number(a.index ?? 0);
    if (luid === 0n && index === 0) refuse(WIN32.INVALID_PARAMETER, 'neither InterfaceLuid nor InterfaceIndex is set');
    const i = luid !== 0n ? this.interfaces.find((x) => x.luid === luid) : this.interfaces.find((x) => x.index === index);
    return i ?? refuse(notFound, `no interface with ${luid !== 0n ? `LUID ${luid}` : `index ${index}`}`);
  }

  private routeRow(a: Doc): { family: Family; destination: string; nextHop: string; iface: StandinInterface } {
    const family = a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `DestinationPrefix family ${a.family}`);
    const len = Number(a.prefixLength);
    if (!Number.isInteger(len) || len < 0 || len > maxLen(family)) refuse(WIN32.INVALID_PARAMETER, `prefix length ${a.prefixLength}`);
    let dest: IP;
    try {
      dest = parseIP(String(a.destination));
    } catch {
      return refuse(WIN32.INVALID_PARAMETER, `destination ${a.destination}`);
    }
    const prefix = prefixOf(dest, len);
    if (formatIP(prefix.ip) !== formatIP(dest)) refuse(WIN32.INVALID_PARAMETER, `${formatIP(dest)}/${len} has host bits set`);
    if (a.nextHopFamily !== a.family) refuse(WIN32.INVALID_PARAMETER, 'NextHop is not specified (its family is not the destination\'s)');
    let nextHop: IP;
    try {
      nextHop = parseIP(String(a.nextHop));
    } catch {
      return refuse(WIN32.INVALID_PARAMETER, `next hop ${a.nextHop}`);
    }
    const site = Number(a.sitePrefixLength ?? 255);
    if (site !== 255 && site > len) refuse(WIN32.INVALID_PARAMETER, `SitePrefixLength ${site} is longer than the prefix`);
    if (Number(a.preferredLifetime ?? 0) > Number(a.validLifetime ?? 0xffffffff)) refuse(WIN32.INVALID_PARAMETER, 'PreferredLifetime > ValidLifetime');
    const iface = this.rowInterface(a, WIN32.NOT_FOUND);
    if (!iface.families.includes(family)) refuse(WIN32.NOT_FOUND, `interface ${iface.alias} has no IPv${family}`);
    return { family, destination: formatPrefix(prefix), nextHop: formatIP(nextHop), iface };
  }

  private findRoute(family: Family, destination: string, nextHop: string, luid: bigint): number {
    return this.routes.findIndex((r) => r.family === family && r.destination === destination && r.nextHop === nextHop && r.interfaceLuid === luid);
  }

  private createRoute(a: Doc): Reply {
    const { family, destination, nextHop, iface } = this.routeRow(a);
    if (this.findRoute(family, destination, nextHop, iface.luid) >= 0) {
      refuse(WIN32.OBJECT_ALREADY_EXISTS, `route ${destination} via ${nextHop} on ${iface.alias} exists`);
    }
    // InitializeIpForwardEntry's "illegal" metric and protocol mean: not given.
    const metric = Number(a.metric);
    const protocol = Number(a.protocol);
    this.routes.push({
      family, interfaceLuid: iface.luid, interfaceIndex: iface.index, destination, nextHop,
      metric: metric === 0xffffffff ? 0 : metric, protocol: protocol === -1 ? PROTO_NETMGMT : protocol, origin: ORIGIN_MANUAL,
    });
    return { code: 0 };
  }

  private deleteRoute(a: Doc): Reply {
    const { family, destination, nextHop, iface } = this.routeRow(a);
    const i = this.findRoute(family, destination, nextHop, iface.luid);
    if (i < 0) refuse(WIN32.NOT_FOUND, `no route ${destination} via ${nextHop} on ${iface.alias}`);
    this.routes.splice(i, 1);
    return { code: 0 };
  }

  private routeTable(a: Doc): Reply {
    const f = a.family === 0 ? 0 : a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `family ${a.family}`);
    const hex = (text: string) => {
      const ip = parseIP(text);
      const words = ip.family === 4 ? [ip.w0] : [ip.w0, ip.w1, ip.w2, ip.w3];
      return words.map((w) => w.toString(16).padStart(8, '0')).join('');
    };
    // IPv4 rows first, as Windows lists them.
    const rows = [...this.routes]
      .sort((x, y) => x.family - y.family)
      .filter((r) => f === 0 || r.family === f)
      .map((r) => {
        const [addr, len] = r.destination.split('/');
        return [r.family === 4 ? 2 : 23, r.interfaceLuid, r.interfaceIndex, hex(addr), len, hex(r.nextHop), r.metric, r.protocol, r.origin].join('\t');
      });
    return { code: 0, rows };
  }

  private interfaceRow(a: Doc): { family: Family; iface: StandinInterface } {
    const family = a.family === 2 ? 4 : a.family === 23 ? 6 : refuse(WIN32.INVALID_PARAMETER, `Family ${a.family}`);
    const iface = this.rowInterface(a, WIN32.FILE_NOT_FOUND);
    if (!iface.families.includes(family)) refuse(WIN32.NOT_FOUND, `interface ${iface.alias} has no IPv${family}`);
    return { family, iface };
  }

  private getInterface(a: Doc): Reply {
    const { family, iface } = this.interfaceRow(a);
    const fwd = family === 4 ? iface.ipv4Forwarding : iface.ipv6Forwarding;
    return { code: 0, rows: [[iface.luid, iface.index, fwd ? 1 : 0, 64, iface.metric, iface.mtu].join('\t')] };
  }

  private setInterface(a: Doc): Reply {
    const { family, iface } = this.interfaceRow(a);
    if (family === 4 && Number(a.sitePrefixLength) !== 0) refuse(WIN32.INVALID_PARAMETER, `SitePrefixLength ${a.sitePrefixLength} for IPv4 (must be 0)`);
    if (family === 4) iface.ipv4Forwarding = Number(a.forwarding) !== 0;
    else iface.ipv6Forwarding = Number(a.forwarding) !== 0;
    return { code: 0, rows: [[iface.luid, iface.index].join('\t')] };
  }

  // ---- seeding and state ----

  addNamespace(type = 'HostDefault'): string {
    const id = randomUUID();
    this.namespaces.set(id, { doc: { Type: type, NamespaceId: this.nextCompartment++ }, endpoints: [] });
    return id;
  }

  addNetwork(settings: Doc): string {
    try {
      return this.create('Network', { id: ZERO_GUID, settings: JSON.stringify(settings) }).id!;
    } catch (e) {
      if (e instanceof Refusal) throw new Error(`stand-in: network refused: ${e.message} (${hresultText(e.code)})`);
      throw e;
    }
  }

  addRoute(row: Parameters<Standin['addRoute']>[0], on?: StandinInterface): StandinRoute {
    const iface =
      on ??
      this.interfaces.find((i) =>
        row.interfaceLuid !== undefined ? i.luid === row.interfaceLuid : row.interfaceIndex !== undefined ? i.index === row.interfaceIndex : i.alias === row.interfaceAlias,
      );
    if (!iface) throw new Error(`stand-in: no interface for route ${row.destination}`);
    const p = parsePrefix(row.destination);
    const r: StandinRoute = {
      family: p.family, interfaceLuid: iface.luid, interfaceIndex: iface.index, destination: formatPrefix(p), nextHop: formatIP(parseIP(row.nextHop)),
      metric: row.metric ?? 0, protocol: row.protocol ?? PROTO_NETMGMT, origin: row.origin ?? ORIGIN_MANUAL,
    };
    if (this.findRoute(r.family, r.destination, r.nextHop, r.interfaceLuid) >= 0) throw new Error(`stand-in: route ${r.destination} exists`);
    this.routes.push(r);
    return clone(r);
  }

  state(): StandinState {
    return {
      networks: [...this.networks.keys()].map((id) => this.view('Network', id) as HnsNetwork),
      endpoints: [...this.endpoints].map(([id, e]) => ({
        ID: id, network: e.network, ...(e.namespace ? { namespace: e.namespace } : {}),
        ...(e.hostCompartment !== undefined ? { hostCompartment: e.hostCompartment } : {}), properties: this.view('Endpoint', id) as HnsEndpoint,
      })),
      namespaces: [...this.namespaces].map(([id, ns]) => ({ ID: id, endpoints: [...ns.endpoints], properties: this.view('Namespace', id) })),
      routes: clone(this.routes),
      interfaces: clone(this.interfaces),
    };
  }
}

/** Starts the stand-in server on 127.0.0.1 (a free port); with `log`, every call is also appended there as JSON. */
export async function startStandin(opts: { log?: string } = {}): Promise<Standin> {
  const s = new StandinServer(opts.log);
  const sockets = new Set<net.Socket>();
  // Calls held back before the server acts on them (a test kills the caller meanwhile); released in order.
  const holds: { fn: string; match: (args: Record<string, unknown>) => boolean; reached: () => void; gate: Promise<void> }[] = [];
  const held = async (line: string): Promise<void> => {
    let req: { fn?: unknown; args?: unknown };
    try {
      req = JSON.parse(line);
    } catch {
      return;
    }
    const args = isObj(req.args) ? req.args : {};
    const h = holds.find((x) => x.fn === req.fn && x.match(args));
    if (!h) return;
    holds.splice(holds.indexOf(h), 1);
    h.reached();
    await h.gate;
  };
  const server = net.createServer((sock) => {
    sockets.add(sock);
    let buf = '';
    let done = false;
    sock.setEncoding('utf8');
    const answer = async () => {
      if (done) return;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      done = true;
      await held(buf.slice(0, nl));
      let out: string;
      try {
        out = s.handle(buf.slice(0, nl));
      } catch (e) {
        out = encode({ code: HR.E_UNEXPECTED, err: `stand-in crashed: ${(e as Error).stack}` });
      }
      sock.end(out);
    };
    sock.on('data', (d: string) => {
      buf += d;
      void answer();
    });
    sock.on('end', () => {
      if (!done) sock.end();
    });
    sock.on('error', () => {});
    sock.on('close', () => sockets.delete(sock));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    calls: s.calls,
    get state() {
      return s.state();
    },
    addNamespace: (type) => s.addNamespace(type),
    addInterface: (alias, o = {}, routes = []) => {
      const i = s.newInterface(alias, o);
      for (const r of routes) s.addRoute(r, i);
      return clone(i);
    },
    addRoute: (row) => s.addRoute(row),
    addNetwork: (settings) => s.addNetwork(settings),
    hold(fn, match = () => true) {
      let reached!: () => void;
      let release!: () => void;
      const seen = new Promise<void>((r) => (reached = r));
      const gate = new Promise<void>((r) => (release = r));
      holds.push({ fn, match, reached, gate });
      return { reached: seen, release };
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const sock of sockets) sock.destroy();
        server.close(() => resolve());
      }),
  };
}
