// The two Windows APIs the HNS dataplane calls, as the rest of the program sees them: HCN (computenetwork.dll, the
// Host Compute Network service's own client library, as hcsshim's `hcn` package calls it) and IP Helper
// (iphlpapi.dll: the host's route table and per-interface forwarding). Types only: the koffi bindings beside it
// (hcn-koffi.ts, iphlpapi-koffi.ts; src/platform owns every native library) implement them, the HNS executor and the
// CNI endpoint code above take them, and tests hand in doubles.
//
// Every call is asynchronous: the bindings run the native call on a worker thread (koffi's async calls), so a slow
// HNS (100 ms and more per call on a busy node) never stalls BGP keepalives on the event loop.
//
// Errors: a failed call throws HcnError (./hresult.ts) with the HRESULT and the message of HCN's error record
// (or the Win32 error of IP Helper as HRESULT_FROM_WIN32), so the planner's NOT_FOUND rules apply unchanged.

/** HCN's three object kinds the dataplane uses. */
export type HcnKind = 'Network' | 'Endpoint' | 'Namespace';

/**
 * computenetwork.dll, one method per Hcn*<Kind> call family. Handles never leave the binding: each method opens what
 * it needs by ID, calls, and closes, as hcsshim does. IDs are GUID strings without braces, any case.
 */
export interface HcnApi {
  /** HcnEnumerate<Kind>s: the IDs matching `query` (an HCN query document, see hcnQuery()). */
  enumerate(kind: HcnKind, query: string): Promise<string[]>;
  /**
   * HcnCreate<Kind> with the all-zero GUID (HCN assigns the ID), then HcnQuery<Kind>Properties: the new object's
   * properties JSON (parsed). Endpoints need the network's ID (`network`), the others ignore it.
   */
  create(kind: HcnKind, settings: string, network?: string): Promise<Record<string, unknown>>;
  /** HcnOpen<Kind> + HcnQuery<Kind>Properties(query) + HcnClose<Kind>: the properties (parsed). */
  query(kind: HcnKind, id: string, query?: string): Promise<Record<string, unknown>>;
  /** HcnOpen<Kind> + HcnModify<Kind>(settings) + HcnClose<Kind>. */
  modify(kind: HcnKind, id: string, settings: string): Promise<void>;
  /** HcnDelete<Kind>. */
  remove(kind: HcnKind, id: string): Promise<void>;
}

/** The HCN query document: schema 2.0, flags 0, and the filter as a JSON string inside it. */
export function hcnQuery(filter: Record<string, unknown> = {}): string {
  return JSON.stringify({ SchemaVersion: { Major: 2, Minor: 0 }, Flags: 0, Filter: JSON.stringify(filter) });
}

/**
 * HNS's host attach (vmcompute.dll HNSCall, the call hcsshim's HNSEndpoint.HostAttach makes): puts an endpoint's
 * vNIC into the host's compartment, which gives the host its leg on the pod network (the host endpoint).
 */
export interface HnsHostAttach {
  /** HNSCall("POST", "/endpoints/<id>/attach", {"SystemType":"Host","CompartmentId":compartment}). */
  hostAttach(endpointId: string, compartment: number): Promise<void>;
}

/** NL_ROUTE_PROTOCOL values we read or write (MIB_IPPROTO_*). */
export const RouteProtocol = { OTHER: 1, LOCAL: 2, NETMGMT: 3 } as const;

/** One MIB_IPFORWARD_ROW2, the fields the programmer reads and writes. */
export interface IpForwardRow {
  family: 4 | 6;
  /** NET_LUID as a 64-bit value. */
  interfaceLuid: bigint;
  interfaceIndex: number;
  /** Canonical prefix text, e.g. "10.244.1.0/26". */
  destination: string;
  /** Canonical address text; "0.0.0.0" / "::" for on-link. */
  nextHop: string;
  /** The route's own metric (the interface metric is added by the stack). */
  metric: number;
  protocol: number;
}

export interface IpInterface {
  alias: string;
  luid: bigint;
  index: number;
}

/** iphlpapi.dll, the calls the route programmer makes. */
export interface IpHelperApi {
  /** GetIpForwardTable2(family) (+ FreeMibTable). family 0 = both. */
  routes(family: 0 | 4 | 6): Promise<IpForwardRow[]>;
  /** InitializeIpForwardEntry + CreateIpForwardEntry2. Exists already: HcnError 0x80071392. */
  createRoute(row: Omit<IpForwardRow, 'interfaceIndex'> & { interfaceIndex?: number }): Promise<void>;
  /** DeleteIpForwardEntry2. Absent: HcnError 0x80070490 (ERROR_NOT_FOUND). */
  deleteRoute(row: IpForwardRow): Promise<void>;
  /** ConvertInterfaceAliasToLuid + ConvertInterfaceLuidToIndex. Unknown alias: HcnError 0x80070490. */
  interfaceByAlias(alias: string): Promise<IpInterface>;
  /** ConvertInterfaceLuidToAlias (+ index) for a route's interface. */
  interfaceByLuid(luid: bigint): Promise<IpInterface>;
  /** GetIpInterfaceEntry(family, luid).ForwardingEnabled. */
  forwarding(luid: bigint, family: 4 | 6): Promise<boolean>;
  /** GetIpInterfaceEntry, ForwardingEnabled = on, SitePrefixLength 0 for IPv4 (Windows refuses it otherwise), SetIpInterfaceEntry. */
  setForwarding(luid: bigint, family: 4 | 6, on: boolean): Promise<void>;
}

/** What the Windows dataplane gets from the platform: the three native APIs, loaded from System32 by full path. */
export interface WindowsNetworkingApis {
  hcn: HcnApi;
  hns: HnsHostAttach;
  ipHelper: IpHelperApi;
}
