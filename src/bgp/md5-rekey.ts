// Replacing a peer's TCP-MD5 key on its running session (a rotated password file, a reload with a new password)
// instead of restarting the session. Linux takes a new TCP_MD5SIG for the peer's address on an established socket:
// from then on the socket signs with the new key and accepts only it. RFC 2385 keys have no overlap period (TCP-AO,
// RFC 5925, has one), so segments in flight while the two ends change keys are dropped and retransmitted, which TCP
// absorbs as long as both ends change within the retransmission and hold times: the session is not dropped. Only a
// key that changed is replaced this way; adding or removing TCP-MD5 still restarts the session (the peer would
// otherwise see unsigned or signed segments it does not expect for as long as its own side is unchanged).
import type { PeerSecurity } from './peer-security.ts';

/** a and b differ only in their TCP-MD5 key, and both have one: `same` compares everything that makes a session. */
export function onlyKeyChanged<T extends { security: PeerSecurity }>(a: T, b: T, same: (x: T, y: T) => boolean): boolean {
  const ka = a.security.md5Key;
  const kb = b.security.md5Key;
  if (!ka || !kb || ka.fingerprint === kb.fingerprint || a.security.problem || b.security.problem) return false;
  return same({ ...a, security: { ...a.security, md5Key: kb } }, b);
}
