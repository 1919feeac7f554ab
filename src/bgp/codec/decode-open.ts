// OPEN messages and their capabilities (RFC 4271 4.2 and 6.2, RFC 5492, RFC 9072's extended optional parameters).
// Its own file: read once per session, apart from the UPDATE decoder's hot path.
import { ErrorCode, OpenSubcode, CodecError, notificationError } from './errors.ts';
import { BGP_VERSION, CapCode, PARAM_CAPABILITIES, PARAM_EXTENDED_LENGTH, type Capability, type OpenMessage } from './messages.ts';
import { EMPTY, be16, copy, u16, u32 } from './wire.ts';

const openError = (sub: number, reason: string, data: Uint8Array = EMPTY) => notificationError(ErrorCode.OPEN, sub, reason, data);
const malformedOpen = (reason: string) => openError(OpenSubcode.UNSPECIFIC, reason);

export function decodeOpen(buf: Uint8Array, p: number, end: number): OpenMessage {
  const version = buf[p];
  if (version !== BGP_VERSION) {
    // RFC 4271 6.2: data is the version we support (the largest below theirs, or our smallest), 2 octets.
    throw openError(OpenSubcode.UNSUPPORTED_VERSION, `version ${version}`, be16(BGP_VERSION));
  }
  const myAs = u16(buf, p + 1);
  const holdTime = u16(buf, p + 3);
  const bgpId = u32(buf, p + 5);
  let q = p + 10;
  let optLen = buf[p + 9];
  let extended = false;
  if (optLen === PARAM_EXTENDED_LENGTH && q < end && buf[q] === PARAM_EXTENDED_LENGTH) {
    // RFC 9072: non-extended length 255 followed by a type of 255, then a 2-octet length; parameters then use
    // 2-octet lengths too.
    if (q + 3 > end) throw malformedOpen('extended optional parameters length truncated');
    optLen = u16(buf, q + 1);
    q += 3;
    extended = true;
  }
  // Parameter problems are reported after the fixed-field checks, in RFC 4271 6.2's order.
  let paramError: CodecError | null = null;
  const caps: Capability[] = [];
  if (q + optLen !== end) paramError = malformedOpen(`optional parameters length ${optLen} does not match the message`);
  else {
    const hl = extended ? 3 : 2;
    while (q < end && !paramError) {
      if (q + hl > end) {
        paramError = malformedOpen('optional parameter header truncated');
        break;
      }
      const ptype = buf[q];
      const plen = extended ? u16(buf, q + 1) : buf[q + 1];
      const vs = q + hl;
      const ve = vs + plen;
      if (ve > end) {
        paramError = malformedOpen(`optional parameter ${ptype} overruns the message`);
        break;
      }
      if (ptype !== PARAM_CAPABILITIES) {
        paramError = openError(OpenSubcode.UNSUPPORTED_OPTIONAL_PARAMETER, `optional parameter type ${ptype}`);
        break;
      }
      paramError = decodeCapabilities(buf, vs, ve, caps);
      q = ve;
    }
  }
  // RFC 7607: AS 0 in an OPEN is Bad Peer AS.
  if (myAs === 0) throw openError(OpenSubcode.BAD_PEER_AS, 'My Autonomous System is 0');
  for (const c of caps) if (c.kind === 'four-octet-as' && c.asn === 0) throw openError(OpenSubcode.BAD_PEER_AS, '4-octet AS capability carries AS 0');
  // RFC 4271 6.2: hold times of one or two seconds MUST be rejected.
  if (holdTime === 1 || holdTime === 2) throw openError(OpenSubcode.UNACCEPTABLE_HOLD_TIME, `hold time ${holdTime}`);
  // RFC 6286 2.1: the BGP Identifier is a non-zero 32-bit value.
  if (bgpId === 0) throw openError(OpenSubcode.BAD_BGP_ID, 'BGP Identifier 0');
  if (paramError) throw paramError;
  return { type: 'open', version, myAs, holdTime, bgpId, capabilities: caps };
}

function badCapLength(code: number, len: number): CodecError {
  return malformedOpen(`capability ${code} has a bad length ${len}`);
}

function decodeCapabilities(buf: Uint8Array, p: number, end: number, out: Capability[]): CodecError | null {
  while (p < end) {
    if (p + 2 > end) return malformedOpen('capability header truncated');
    const code = buf[p];
    const len = buf[p + 1];
    const v = p + 2;
    if (v + len > end) return malformedOpen(`capability ${code} overruns its parameter`);
    switch (code) {
      case CapCode.MULTIPROTOCOL:
        if (len !== 4) return badCapLength(code, len);
        out.push({ kind: 'multiprotocol', afi: u16(buf, v), safi: buf[v + 3] });
        break;
      case CapCode.ROUTE_REFRESH:
        if (len !== 0) return badCapLength(code, len);
        out.push({ kind: 'route-refresh' });
        break;
      case CapCode.EXTENDED_MESSAGE:
        if (len !== 0) return badCapLength(code, len);
        out.push({ kind: 'extended-message' });
        break;
      case CapCode.FOUR_OCTET_AS:
        if (len !== 4) return badCapLength(code, len);
        out.push({ kind: 'four-octet-as', asn: u32(buf, v) });
        break;
      case CapCode.GRACEFUL_RESTART: {
        if (len < 2 || (len - 2) % 4 !== 0) return badCapLength(code, len);
        const families = [];
        for (let f = v + 2; f < v + len; f += 4) {
          families.push({ afi: u16(buf, f), safi: buf[f + 2], forwarding: (buf[f + 3] & 0x80) !== 0 });
        }
        out.push({
          kind: 'graceful-restart',
          restarting: (buf[v] & 0x80) !== 0,
          notification: (buf[v] & 0x40) !== 0,
          restartTime: u16(buf, v) & 0x0fff,
          families,
        });
        break;
      }
      default:
        out.push({ kind: 'unknown', code, value: copy(buf, v, v + len) });
    }
    p = v + len;
  }
  return null;
}
