// HRESULTs as the Windows networking APIs report them: HCN's own HCN_E_* codes, the Win32 ones HNS and IP Helper
// report, and the error that carries one. Under the native bindings (hcn-koffi.ts, iphlpapi-koffi.ts) that throw it,
// and re-exported by src/hns/model.ts, whose planner rules read only NOT_FOUND codes as "absent".

/**
 * HCN's own errors (hcsshim hcn/hcnerrors.go and computenetwork's HCN_E_* codes, facility 0x3B) and the Win32 ones HNS
 * and the NetTCPIP cmdlets report. Names follow HCN_E_<NAME>.
 */
export const HCN = {
  NETWORK_NOT_FOUND: 0x803b0001,
  ENDPOINT_NOT_FOUND: 0x803b0002,
  LAYER_NOT_FOUND: 0x803b0003,
  SWITCH_NOT_FOUND: 0x803b0004,
  SUBNET_NOT_FOUND: 0x803b0005,
  ADAPTER_NOT_FOUND: 0x803b0006,
  PORT_NOT_FOUND: 0x803b0007,
  POLICY_NOT_FOUND: 0x803b0008,
  VFP_PORTSETTING_NOT_FOUND: 0x803b0009,
  INVALID_NETWORK: 0x803b000a,
  INVALID_NETWORK_TYPE: 0x803b000b,
  INVALID_ENDPOINT: 0x803b000c,
  INVALID_POLICY: 0x803b000d,
  INVALID_POLICY_TYPE: 0x803b000e,
  INVALID_REMOTE_ENDPOINT_OPERATION: 0x803b000f,
  NETWORK_ALREADY_EXISTS: 0x803b0010,
  LAYER_ALREADY_EXISTS: 0x803b0011,
  POLICY_ALREADY_EXISTS: 0x803b0012,
  PORT_ALREADY_EXISTS: 0x803b0013,
  ENDPOINT_ALREADY_ATTACHED: 0x803b0014,
  REQUEST_UNSUPPORTED: 0x803b0015,
  MAPPING_NOT_SUPPORTED: 0x803b0016,
  DEGRADED_OPERATION: 0x803b0017,
  SHARED_SWITCH_MODIFICATION: 0x803b0018,
  GUID_CONVERSION_FAILURE: 0x803b0019,
  REGKEY_FAILURE: 0x803b001a,
  INVALID_JSON: 0x803b001b,
  INVALID_JSON_REFERENCE: 0x803b001c,
  ENDPOINT_SHARING_DISABLED: 0x803b001d,
  INVALID_IP: 0x803b001e,
  SWITCH_EXTENSION_NOT_FOUND: 0x803b001f,
  MANAGER_STOPPED: 0x803b0020,
  ENTITY_HAS_REFERENCES: 0x803b002c,
  INVALID_PREFIX: 0x803b0030,
  /** HRESULT_FROM_WIN32(ERROR_NOT_FOUND): hcsshim's IsNotFoundError; also what IP Helper's ERROR_NOT_FOUND maps to. */
  ELEMENT_NOT_FOUND: 0x80070490,
  /** HRESULT_FROM_WIN32(ERROR_OBJECT_ALREADY_EXISTS): CreateIpForwardEntry2 of a route that exists. */
  ALREADY_EXISTS: 0x80071392,
  INVALID_ARG: 0x80070057,
  /** RPC server unavailable: what a restarting HNS answers; the fake uses it for injected faults. */
  UNAVAILABLE: 0x800706ba,
} as const;

/** The codes that mean "that object is not there" (what a remove may take as done). */
const NOT_FOUND_CODES = new Set<number>([
  HCN.NETWORK_NOT_FOUND, HCN.ENDPOINT_NOT_FOUND, HCN.SUBNET_NOT_FOUND, HCN.POLICY_NOT_FOUND, HCN.ELEMENT_NOT_FOUND,
]);

export const hresultText = (code: number): string => `0x${(code >>> 0).toString(16).toUpperCase().padStart(8, '0')}`;

/** An error from HNS (or the fake), with its HRESULT. Only `notFound` errors may be read as "the object is absent". */
export class HcnError extends Error {
  override name = 'HcnError';
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(`${message} (${hresultText(code)})`);
  }
  get notFound(): boolean {
    return NOT_FOUND_CODES.has(this.code >>> 0);
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof HcnError && e.notFound;
