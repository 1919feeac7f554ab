// The daemon proves itself before a Windows client sends a byte.
//
// Why: a named pipe belongs to whoever creates its first instance. While the daemon is down (restart, upgrade, boot)
// any local user may create \\.\pipe\blockspeaker and wait for the CNI plugin (SYSTEM) or the CLI (an administrator)
// to connect. Two things then matter:
//   - impersonation: libuv dials with Windows' default level (SecurityImpersonation), and Node cannot ask for less.
//     But ImpersonateNamedPipeClient works only once the server has read from the pipe (ERROR_CANNOT_IMPERSONATE,
//     1368, before that), so a client that writes nothing until the server is proven cannot be impersonated;
//   - forged answers: the client must know it talks to the daemon before it trusts (or sends) anything.
// So the daemon writes one proof frame on every connection before reading: an HMAC-SHA256, under a key only the
// daemon's account, SYSTEM and Administrators can read (a file in an admin-only folder the daemon makes at start, a
// new key each start, one key per pipe), over a timestamp and a nonce. Whoever cannot read the key cannot make one;
// a user who cannot connect to the real pipe (its DACL is SYSTEM and Administrators) never sees one to replay, and
// the timestamp bounds a replay by anyone who could. Pure node:crypto: the CNI plugin stays free of native code.
//
// The frame: "BSP1", 8 bytes of Unix time in ms (big-endian), a 16-byte nonce, the 32-byte MAC: 60 bytes. A client
// that does not check (Linux, where the socket lives in root's /run) skips it; no net-ipc packet starts with "BSP1"
// (a packet starts with its length tag, and the server's first packet is a short one, one byte with the high bit).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';

export const PROOF_MAGIC = 'BSP1';
export const PROOF_BYTES = 4 + 8 + 16 + 32;
/** How old (or how far in the future) a proof may be. The clocks are the same machine's; this only bounds replay. */
export const PROOF_MAX_SKEW_MS = 30_000;
export const PIPE_KEY_BYTES = 32;

const LABEL = Buffer.from('blockspeaker ipc server proof v1\0');

function mac(key: Buffer, head: Buffer): Buffer {
  return createHmac('sha256', key).update(LABEL).update(head).digest();
}

/** The proof frame the server writes first on each connection (the key is the pipe's own). */
export function makeProof(key: Buffer, nowMs: number, nonce: Buffer = randomBytes(16)): Buffer {
  const head = Buffer.alloc(4 + 8 + 16);
  head.write(PROOF_MAGIC, 0, 'latin1');
  head.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(nowMs))), 4);
  nonce.copy(head, 12, 0, 16);
  return Buffer.concat([head, mac(key, head)]);
}

/** Whether `buf` (PROOF_BYTES long) proves knowledge of `key` now; otherwise why not, in words. */
export function checkProof(key: Buffer, buf: Buffer, nowMs: number): { ok: true } | { ok: false; why: string } {
  if (buf.length < PROOF_BYTES || buf.subarray(0, 4).toString('latin1') !== PROOF_MAGIC) {
    return { ok: false, why: 'it sent no proof frame (it does not speak as the blockspeaker daemon does)' };
  }
  const head = buf.subarray(0, 28);
  const want = mac(key, head);
  if (!timingSafeEqual(want, buf.subarray(28, PROOF_BYTES))) {
    return { ok: false, why: 'its proof was not made with the key this daemon wrote (it cannot read the key)' };
  }
  const ts = Number(head.readBigUInt64BE(4));
  if (Math.abs(nowMs - ts) > PROOF_MAX_SKEW_MS) {
    return { ok: false, why: `its proof is ${Math.round((nowMs - ts) / 1000)} s old (a replay)` };
  }
  return { ok: true };
}

/** Whether the first bytes received may be a proof frame (a client that does not check skips one). */
export function startsLikeProof(buf: Buffer): boolean {
  const n = Math.min(buf.length, 4);
  return buf.subarray(0, n).toString('latin1') === PROOF_MAGIC.slice(0, n);
}

export class PipeKeyError extends Error {
  override name = 'PipeKeyError';
  constructor(readonly code: string | undefined, message: string) {
    super(message);
  }
}

/** Read the key a client checks proofs with; PipeKeyError says why it cannot (ENOENT, EACCES, a wrong size). */
export function readPipeKey(file: string): Buffer {
  let key: Buffer;
  try {
    key = fs.readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new PipeKeyError(code, code === 'ENOENT'
      ? `there is no pipe key at ${file}: the daemon writes one each time it starts`
      : code === 'EACCES' || code === 'EPERM'
        ? `cannot read the pipe key ${file} (${code}): only SYSTEM, Administrators and the daemon's account may; run elevated`
        : `cannot read the pipe key ${file}: ${(e as Error).message}`);
  }
  if (key.length !== PIPE_KEY_BYTES) throw new PipeKeyError('EINVAL', `the pipe key ${file} is ${key.length} bytes, not ${PIPE_KEY_BYTES}`);
  return key;
}
