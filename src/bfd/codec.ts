// BFD Control packets (RFC 5880 section 4.1): a pure encoder/decoder and the reception checks of section 6.8.6
// that need no session state. The checks that need a session (Your Discriminator lookup, authentication in use)
// are made by the caller with the decoded packet (see checkForSession).

/** bfd.SessionState values as on the wire (RFC 5880 4.1, "Sta"). */
export const BfdState = { AdminDown: 0, Down: 1, Init: 2, Up: 3 } as const;
export type BfdState = (typeof BfdState)[keyof typeof BfdState];

export const STATE_NAMES = ['AdminDown', 'Down', 'Init', 'Up'] as const;
export type BfdStateName = (typeof STATE_NAMES)[number];

/** Diagnostic codes (RFC 5880 4.1, "Diag"). */
export const Diag = {
  None: 0,
  ControlDetectionTimeExpired: 1,
  EchoFunctionFailed: 2,
  NeighborSignaledSessionDown: 3,
  ForwardingPlaneReset: 4,
  PathDown: 5,
  ConcatenatedPathDown: 6,
  AdministrativelyDown: 7,
  ReverseConcatenatedPathDown: 8,
} as const;

export const DIAG_NAMES: Record<number, string> = {
  0: 'No Diagnostic', 1: 'Control Detection Time Expired', 2: 'Echo Function Failed',
  3: 'Neighbor Signaled Session Down', 4: 'Forwarding Plane Reset', 5: 'Path Down', 6: 'Concatenated Path Down',
  7: 'Administratively Down', 8: 'Reverse Concatenated Path Down',
};

export interface ControlPacket {
  version: number;
  diag: number;
  state: BfdState;
  poll: boolean;
  final: boolean;
  /** C: the forwarding plane is independent of the control plane. */
  controlPlaneIndependent: boolean;
  /** A: an authentication section follows. */
  authPresent: boolean;
  demand: boolean;
  multipoint: boolean;
  detectMult: number;
  /** the Length field (octets) */
  length: number;
  myDiscriminator: number;
  yourDiscriminator: number;
  /** microseconds */
  desiredMinTxInterval: number;
  requiredMinRxInterval: number;
  requiredMinEchoRxInterval: number;
  /** the authentication section as received (type, len, data), when A is set */
  auth: Uint8Array | null;
}

/** Without authentication section (RFC 5880 4.1). */
export const MIN_LENGTH = 24;
/** With authentication: the mandatory part plus Auth Type and Auth Len. */
export const MIN_LENGTH_AUTH = 26;

export type EncodeInput = Partial<Omit<ControlPacket, 'length' | 'auth' | 'authPresent'>> &
  Pick<ControlPacket, 'state' | 'detectMult' | 'myDiscriminator' | 'desiredMinTxInterval' | 'requiredMinRxInterval'>;

const u32 = (n: number, what: string): number => {
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new RangeError(`${what} must be 0..4294967295, got ${n}`);
  return n;
};

/** Encodes a packet without authentication (24 octets). Throws RangeError on an out-of-range field. */
export function encode(p: EncodeInput): Buffer {
  const b = Buffer.alloc(MIN_LENGTH);
  const version = p.version ?? 1;
  const diag = p.diag ?? 0;
  if (!Number.isInteger(version) || version < 0 || version > 7) throw new RangeError(`version must be 0..7, got ${version}`);
  if (!Number.isInteger(diag) || diag < 0 || diag > 31) throw new RangeError(`diag must be 0..31, got ${diag}`);
  if (!Number.isInteger(p.state) || p.state < 0 || p.state > 3) throw new RangeError(`state must be 0..3, got ${p.state}`);
  if (!Number.isInteger(p.detectMult) || p.detectMult < 0 || p.detectMult > 255) throw new RangeError(`detectMult must be 0..255, got ${p.detectMult}`);
  b[0] = (version << 5) | diag;
  b[1] = (p.state << 6) | (p.poll ? 0x20 : 0) | (p.final ? 0x10 : 0) | (p.controlPlaneIndependent ? 0x08 : 0) |
    (p.demand ? 0x02 : 0) | (p.multipoint ? 0x01 : 0);
  b[2] = p.detectMult;
  b[3] = MIN_LENGTH;
  b.writeUInt32BE(u32(p.myDiscriminator, 'myDiscriminator'), 4);
  b.writeUInt32BE(u32(p.yourDiscriminator ?? 0, 'yourDiscriminator'), 8);
  b.writeUInt32BE(u32(p.desiredMinTxInterval, 'desiredMinTxInterval'), 12);
  b.writeUInt32BE(u32(p.requiredMinRxInterval, 'requiredMinRxInterval'), 16);
  b.writeUInt32BE(u32(p.requiredMinEchoRxInterval ?? 0, 'requiredMinEchoRxInterval'), 20);
  return b;
}

export type DecodeResult = { ok: true; packet: ControlPacket } | { ok: false; reason: string };

/**
 * Decodes one datagram and applies the packet-only reception checks of RFC 5880 6.8.6, in its order: version,
 * Length minimum, Length against the datagram, Detect Mult, Multipoint, My Discriminator, and Your Discriminator
 * zero with a State other than Down/AdminDown. A failed check gives the reason (the packet MUST be discarded).
 */
export function decode(buf: Uint8Array): DecodeResult {
  if (buf.length < 4) return { ok: false, reason: `truncated: ${buf.length} octets` };
  const version = buf[0] >> 5;
  if (version !== 1) return { ok: false, reason: `version ${version}, not 1` };
  const authPresent = (buf[1] & 0x04) !== 0;
  const length = buf[3];
  const min = authPresent ? MIN_LENGTH_AUTH : MIN_LENGTH;
  if (length < min) return { ok: false, reason: `Length ${length} below ${min}${authPresent ? ' (A bit set)' : ''}` };
  if (length > buf.length) return { ok: false, reason: `Length ${length} beyond the ${buf.length}-octet payload` };
  const detectMult = buf[2];
  if (detectMult === 0) return { ok: false, reason: 'Detect Mult is zero' };
  const multipoint = (buf[1] & 0x01) !== 0;
  if (multipoint) return { ok: false, reason: 'Multipoint (M) bit set' };
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const myDiscriminator = dv.getUint32(4);
  if (myDiscriminator === 0) return { ok: false, reason: 'My Discriminator is zero' };
  const yourDiscriminator = dv.getUint32(8);
  const state = (buf[1] >> 6) as BfdState;
  if (yourDiscriminator === 0 && state !== BfdState.Down && state !== BfdState.AdminDown) {
    return { ok: false, reason: `Your Discriminator is zero in state ${STATE_NAMES[state]}` };
  }
  let auth: Uint8Array | null = null;
  if (authPresent) {
    const authLen = buf[MIN_LENGTH + 1];
    if (authLen < 2 || MIN_LENGTH + authLen > length) return { ok: false, reason: `Auth Len ${authLen} does not fit Length ${length}` };
    auth = Uint8Array.prototype.slice.call(buf, MIN_LENGTH, MIN_LENGTH + authLen);
  }
  return {
    ok: true,
    packet: {
      version,
      diag: buf[0] & 0x1f,
      state,
      poll: (buf[1] & 0x20) !== 0,
      final: (buf[1] & 0x10) !== 0,
      controlPlaneIndependent: (buf[1] & 0x08) !== 0,
      authPresent,
      demand: (buf[1] & 0x02) !== 0,
      multipoint,
      detectMult,
      length,
      myDiscriminator,
      yourDiscriminator,
      desiredMinTxInterval: dv.getUint32(12),
      requiredMinRxInterval: dv.getUint32(16),
      requiredMinEchoRxInterval: dv.getUint32(20),
      auth,
    },
  };
}

/**
 * The session-dependent checks of RFC 5880 6.8.6: a non-zero Your Discriminator must name the session, and the
 * A bit must match whether authentication is in use (we support none, so any A bit is a discard).
 */
export function checkForSession(p: ControlPacket, localDiscriminator: number | null, authInUse = false): string | null {
  if (p.yourDiscriminator !== 0 && p.yourDiscriminator !== localDiscriminator) {
    return `Your Discriminator ${p.yourDiscriminator} names no session`;
  }
  if (p.authPresent && !authInUse) return 'Authentication (A) bit set, but no authentication is configured';
  if (!p.authPresent && authInUse) return 'Authentication (A) bit clear, but authentication is configured';
  return null;
}
