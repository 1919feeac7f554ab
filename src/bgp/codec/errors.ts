// NOTIFICATION error codes and subcodes (RFC 4271 4.5 and 6, RFC 5492, RFC 6608, RFC 4486, RFC 7313, RFC 8538,
// RFC 9234, RFC 9687) and the error values the codec uses.

export const ErrorCode = {
  MESSAGE_HEADER: 1,
  OPEN: 2,
  UPDATE: 3,
  HOLD_TIMER_EXPIRED: 4,
  FSM: 5,
  CEASE: 6,
  ROUTE_REFRESH: 7,
  /** RFC 9687 (subcode 0, no data). */
  SEND_HOLD_TIMER_EXPIRED: 8,
} as const;

export const HeaderSubcode = { UNSPECIFIC: 0, CONNECTION_NOT_SYNCHRONIZED: 1, BAD_MESSAGE_LENGTH: 2, BAD_MESSAGE_TYPE: 3 } as const;

export const OpenSubcode = {
  /** RFC 4271 6.2: a recognised optional parameter that is malformed. */
  UNSPECIFIC: 0,
  UNSUPPORTED_VERSION: 1,
  BAD_PEER_AS: 2,
  BAD_BGP_ID: 3,
  UNSUPPORTED_OPTIONAL_PARAMETER: 4,
  UNACCEPTABLE_HOLD_TIME: 6,
  /** RFC 5492 5. */
  UNSUPPORTED_CAPABILITY: 7,
  /** RFC 9234. */
  ROLE_MISMATCH: 11,
} as const;

export const UpdateSubcode = {
  UNSPECIFIC: 0,
  MALFORMED_ATTRIBUTE_LIST: 1,
  UNRECOGNIZED_WELL_KNOWN: 2,
  MISSING_WELL_KNOWN: 3,
  ATTRIBUTE_FLAGS: 4,
  ATTRIBUTE_LENGTH: 5,
  INVALID_ORIGIN: 6,
  INVALID_NEXT_HOP: 8,
  OPTIONAL_ATTRIBUTE: 9,
  INVALID_NETWORK_FIELD: 10,
  MALFORMED_AS_PATH: 11,
} as const;

/** RFC 6608. */
export const FsmSubcode = { UNSPECIFIED: 0, OPEN_SENT: 1, OPEN_CONFIRM: 2, ESTABLISHED: 3 } as const;

/** RFC 4486, RFC 8538 (hard reset), RFC 9384 (BFD down). */
export const CeaseSubcode = {
  MAX_PREFIXES: 1,
  ADMIN_SHUTDOWN: 2,
  PEER_DECONFIGURED: 3,
  ADMIN_RESET: 4,
  CONNECTION_REJECTED: 5,
  OTHER_CONFIG_CHANGE: 6,
  CONNECTION_COLLISION: 7,
  OUT_OF_RESOURCES: 8,
  HARD_RESET: 9,
  BFD_DOWN: 10,
} as const;

/** RFC 7313 5. */
export const RouteRefreshSubcode = { INVALID_MESSAGE_LENGTH: 1 } as const;

const CODE_NAMES: Record<number, string> = {
  1: 'Message Header Error',
  2: 'OPEN Message Error',
  3: 'UPDATE Message Error',
  4: 'Hold Timer Expired',
  5: 'Finite State Machine Error',
  6: 'Cease',
  7: 'ROUTE-REFRESH Message Error',
  8: 'Send Hold Timer Expired',
};

const SUBCODE_NAMES: Record<number, Record<number, string>> = {
  1: { 0: 'Unspecific', 1: 'Connection Not Synchronized', 2: 'Bad Message Length', 3: 'Bad Message Type' },
  2: {
    0: 'Unspecific', 1: 'Unsupported Version Number', 2: 'Bad Peer AS', 3: 'Bad BGP Identifier',
    4: 'Unsupported Optional Parameter', 6: 'Unacceptable Hold Time', 7: 'Unsupported Capability',
    11: 'Role Mismatch',
  },
  3: {
    0: 'Unspecific', 1: 'Malformed Attribute List', 2: 'Unrecognized Well-known Attribute',
    3: 'Missing Well-known Attribute', 4: 'Attribute Flags Error', 5: 'Attribute Length Error',
    6: 'Invalid ORIGIN Attribute', 8: 'Invalid NEXT_HOP Attribute', 9: 'Optional Attribute Error',
    10: 'Invalid Network Field', 11: 'Malformed AS_PATH',
  },
  5: {
    0: 'Unspecified Error', 1: 'Receive Unexpected Message in OpenSent State',
    2: 'Receive Unexpected Message in OpenConfirm State', 3: 'Receive Unexpected Message in Established State',
  },
  6: {
    1: 'Maximum Number of Prefixes Reached', 2: 'Administrative Shutdown', 3: 'Peer De-configured',
    4: 'Administrative Reset', 5: 'Connection Rejected', 6: 'Other Configuration Change',
    7: 'Connection Collision Resolution', 8: 'Out of Resources', 9: 'Hard Reset', 10: 'BFD Down',
  },
  7: { 1: 'Invalid Message Length' },
};

export function errorCodeName(code: number): string {
  return CODE_NAMES[code] ?? `Unknown error code ${code}`;
}

export function errorSubcodeName(code: number, subcode: number): string {
  return SUBCODE_NAMES[code]?.[subcode] ?? `subcode ${subcode}`;
}

/** The three fields of a NOTIFICATION the codec asks the session to send. */
export interface Notification {
  readonly code: number;
  readonly subcode: number;
  readonly data: Uint8Array;
}

/**
 * Thrown inside the decoder to unwind to its entry point, which turns it into a result; never escapes the
 * decoder. `reason` is for logs.
 */
export class CodecError extends Error {
  override name = 'CodecError';
  constructor(
    readonly code: number,
    readonly subcode: number,
    readonly data: Uint8Array,
    readonly reason: string,
  ) {
    super(`${errorCodeName(code)} / ${errorSubcodeName(code, subcode)}: ${reason}`);
  }
}

/** Bad input to an encoder (a caller bug, not peer input): thrown to the caller. */
export class EncodeError extends Error {
  override name = 'EncodeError';
}

const EMPTY = new Uint8Array(0);

export function notificationError(code: number, subcode: number, reason: string, data: Uint8Array = EMPTY): CodecError {
  return new CodecError(code, subcode, data, reason);
}

/** The data of an Administrative Shutdown/Reset (RFC 9003): a length octet and up to 255 octets of UTF-8. */
export function shutdownData(text: string): Uint8Array {
  let bytes = Buffer.from(text, 'utf8');
  if (bytes.length > 255) {
    // Cut at a character boundary: drop UTF-8 continuation bytes (10xxxxxx) at the cut.
    let n = 255;
    while (n > 0 && (bytes[n] & 0xc0) === 0x80) n--;
    bytes = bytes.subarray(0, n);
  }
  const out = new Uint8Array(1 + bytes.length);
  out[0] = bytes.length;
  out.set(bytes, 1);
  return out;
}

/** The shutdown communication of a Cease/Administrative Shutdown or Reset NOTIFICATION, if it has a valid one. */
export function shutdownMessage(n: Notification): string | undefined {
  if (n.code !== ErrorCode.CEASE || (n.subcode !== CeaseSubcode.ADMIN_SHUTDOWN && n.subcode !== CeaseSubcode.ADMIN_RESET)) {
    return undefined;
  }
  if (n.data.length < 1 || n.data[0] + 1 > n.data.length) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(n.data.subarray(1, 1 + n.data[0]));
  } catch {
    return undefined;
  }
}
