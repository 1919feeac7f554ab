// The native half of ./udp-ttl.ts: setsockopt(SO_ATTACH_FILTER) from the C library through koffi, loaded with a
// dynamic import only when a BFD session needs its listener (the idle daemon never maps it).
import { encodeFprog, SO_ATTACH_FILTER, SOL_SOCKET } from './bpf-ttl.ts';

export interface FilterCalls {
  /** Attach the encoded program (8 octets per instruction) to the socket; throws with the errno text. */
  attachFilter(fd: number, program: Buffer): void;
}

export async function loadFilterCalls(): Promise<FilterCalls> {
  const koffi = (await import('koffi')).default;
  const libc = koffi.load(null);
  const setsockopt = libc.func('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)');
  const strerror = libc.func('const char *strerror(int errnum)');
  return {
    attachFilter(fd, program) {
      // the kernel copies the program during the call, so the buffer need only live until it returns
      const fprog = encodeFprog(program.length / 8, BigInt(koffi.address(program) as bigint));
      if ((setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, fprog, fprog.length) as number) !== 0) {
        const e = koffi.errno();
        throw new Error(`setsockopt SO_ATTACH_FILTER: ${String(strerror(e))} (errno ${e})`);
      }
    },
  };
}
