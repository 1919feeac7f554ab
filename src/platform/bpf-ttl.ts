// The received-TTL check of single-hop BFD (RFC 5881 5: a Control packet is discarded unless it arrived with
// TTL / Hop Limit 255, so it cannot have come from beyond the link) as a classic BPF socket filter. Node's dgram
// cannot read a datagram's TTL (that takes IP_RECVTTL and recvmsg ancillary data), and Linux's IP_MINTTL is a TCP
// option: it is accepted on a UDP socket but not enforced there (checked on kernel 6.18: a TTL-254 datagram still
// arrives). A filter attached with SO_ATTACH_FILTER runs in the kernel on every datagram before it is queued, with
// the IP header reachable through the SKF_NET_OFF negative offset.
//
// This file is pure: the program and its encoding. ./udp-ttl.ts attaches it. A rejected datagram is not dropped
// but cut to its 8-octet UDP header (a filter's return value is the length to keep, never less than the header for
// UDP): it reaches the socket as an empty message, which no valid BFD packet is (24 octets at least), so the
// receiver can count it as a TTL discard where a drop would be invisible.

/** One classic BPF instruction (struct sock_filter, linux/filter.h). */
export interface BpfInsn {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

// linux/bpf_common.h and linux/filter.h
export const BPF_LD = 0x00;
export const BPF_JMP = 0x05;
export const BPF_RET = 0x06;
export const BPF_B = 0x10;
export const BPF_ABS = 0x20;
export const BPF_JEQ = 0x10;
export const BPF_K = 0x00;
/** Loads at SKF_NET_OFF + n read octet n of the network (IP) header. */
export const SKF_NET_OFF = -0x100000;
/** asm-generic/socket.h */
export const SOL_SOCKET = 1;
export const SO_ATTACH_FILTER = 26;

/** Offset of the TTL in an IPv4 header, of the Hop Limit in an IPv6 header. */
export const TTL_OFFSET: Record<4 | 6, number> = { 4: 8, 6: 7 };
/** What the filter keeps of an accepted datagram: all of it. */
export const KEEP_ALL = 0xffffffff;
/** What it keeps of a rejected one: the UDP header only, so it arrives as an empty message. */
export const KEEP_HEADER = 8;

/** Accept a datagram in full only when its IPv4 TTL / IPv6 Hop Limit is `ttl`; cut any other to an empty one. */
export function ttlFilterProgram(family: 4 | 6, ttl = 255): BpfInsn[] {
  if (!Number.isInteger(ttl) || ttl < 0 || ttl > 255) throw new Error(`TTL must be 0..255, got ${ttl}`);
  return [
    { code: BPF_LD | BPF_B | BPF_ABS, jt: 0, jf: 0, k: (SKF_NET_OFF + TTL_OFFSET[family]) >>> 0 },
    { code: BPF_JMP | BPF_JEQ | BPF_K, jt: 0, jf: 1, k: ttl },
    { code: BPF_RET | BPF_K, jt: 0, jf: 0, k: KEEP_ALL },
    { code: BPF_RET | BPF_K, jt: 0, jf: 0, k: KEEP_HEADER },
  ];
}

/** The instructions as the kernel reads them: 8 octets each, host order (little-endian on x86 and arm). */
export function encodeProgram(prog: BpfInsn[]): Buffer {
  const b = Buffer.alloc(prog.length * 8);
  prog.forEach((p, i) => {
    b.writeUInt16LE(p.code, i * 8);
    b[i * 8 + 2] = p.jt;
    b[i * 8 + 3] = p.jf;
    b.writeUInt32LE(p.k >>> 0, i * 8 + 4);
  });
  return b;
}

/** struct sock_fprog { unsigned short len; struct sock_filter *filter; } on a 64-bit host: 16 octets. */
export function encodeFprog(count: number, address: bigint): Buffer {
  const b = Buffer.alloc(16);
  b.writeUInt16LE(count, 0);
  b.writeBigUInt64LE(address, 8);
  return b;
}
