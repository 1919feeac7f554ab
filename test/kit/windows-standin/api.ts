// What a test or a bench sees of the Windows stand-in: the Standin handle startStandin returns, the shapes of its
// recorded calls and state, and the result codes (Win32 errors, HRESULTs) a test checks the DLLs' answers against.
// Its own file so the server's parts and the tests share one set of names.
import type { IpForwardRow, IpInterface } from '../../../src/platform/windows-net-api.ts';
import type { HnsEndpoint, HnsNetwork } from '../../../src/hns/model.ts';
import type { Family } from '../../../src/net/ip.ts';

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
