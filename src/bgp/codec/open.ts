// Checks of a received OPEN against the local configuration (RFC 4271 6.2, RFC 6286, RFC 5492 5). The decoder
// already refuses what is wrong whatever the configuration (version, AS 0, hold time 1-2, identifier 0,
// malformed or unsupported parameters); this is the part that needs to know who we are and whom we expect.
import { encodeCapability } from './encode.ts';
import { ErrorCode, OpenSubcode } from './errors.ts';
import type { NotificationResult } from './decode.ts';
import { MsgType, peerAsOf, type Capability, type OpenMessage } from './messages.ts';

export interface OpenExpectations {
  /** The configured peer AS (compared with the 4-octet AS capability when present, else My Autonomous System). */
  peerAs?: number;
  /** Our BGP Identifier: an internal peer may not use the same one (RFC 6286 2.2). */
  localBgpId?: number;
  /** The peer is in our AS. */
  internal?: boolean;
  /** Local policy: refuse hold times below this (0, "no keepalives", stays allowed). */
  minHoldTime?: number;
  /** Capabilities the session cannot run without, e.g. a multiprotocol family (RFC 5492 5). */
  required?: readonly Capability[];
}

const EMPTY = new Uint8Array(0);

function fail(subcode: number, reason: string, data: Uint8Array = EMPTY): NotificationResult {
  return { action: 'notification', code: ErrorCode.OPEN, subcode, data, reason, msgType: MsgType.OPEN };
}

function sameCap(a: Capability, b: Capability): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'multiprotocol' && b.kind === 'multiprotocol') return a.afi === b.afi && a.safi === b.safi;
  if (a.kind === 'unknown' && b.kind === 'unknown') return a.code === b.code;
  return true;
}

/** Null when the OPEN is acceptable, else the NOTIFICATION to send. */
export function validateOpen(open: OpenMessage, exp: OpenExpectations): NotificationResult | null {
  const peerAs = peerAsOf(open);
  if (exp.peerAs !== undefined && peerAs !== exp.peerAs) {
    return fail(OpenSubcode.BAD_PEER_AS, `peer AS ${peerAs}, expected ${exp.peerAs}`);
  }
  if (exp.minHoldTime !== undefined && open.holdTime !== 0 && open.holdTime < exp.minHoldTime) {
    return fail(OpenSubcode.UNACCEPTABLE_HOLD_TIME, `hold time ${open.holdTime} < ${exp.minHoldTime}`);
  }
  if (exp.internal && exp.localBgpId !== undefined && open.bgpId === exp.localBgpId) {
    return fail(OpenSubcode.BAD_BGP_ID, 'internal peer uses our BGP Identifier');
  }
  const missing = (exp.required ?? []).filter((r) => !open.capabilities.some((c) => sameCap(c, r)));
  if (missing.length > 0) {
    // RFC 5492 5: the data lists the capabilities we need and the peer did not offer.
    const parts = missing.map(encodeCapability);
    const data = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let p = 0;
    for (const x of parts) {
      data.set(x, p);
      p += x.length;
    }
    return fail(OpenSubcode.UNSUPPORTED_CAPABILITY, `missing capabilities: ${missing.map((m) => m.kind).join(', ')}`, data);
  }
  return null;
}
