// The native half of ./sockopt.ts: socket(2), setsockopt(2) and close(2) from the C library through koffi (FFI with
// prebuilt binaries, no compiler at install). Loaded only by socketOptionsHost().load(), with a dynamic import, when
// a peer has a password or ttlSecurity: the idle daemon never maps it.
import type { SockOpt, SocketCalls } from './socket-calls.ts';

const SOCK_STREAM = 1;
const SOCK_CLOEXEC = 0o2000000; // the fd must not leak into the processes we spawn (ip, PowerShell workers)
const IPPROTO_TCP = 6;

export async function loadSocketCalls(): Promise<SocketCalls> {
  const koffi = (await import('koffi')).default;
  // null: the running process, whose global symbols include the C library it links (glibc or musl alike).
  const libc = koffi.load(null);
  const socket = libc.func('int socket(int domain, int type, int protocol)');
  const setsockopt = libc.func('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)');
  const close = libc.func('int close(int fd)');
  const strerror = libc.func('const char *strerror(int errnum)');
  const why = () => {
    const e = koffi.errno();
    return `${String(strerror(e))} (errno ${e})`;
  };
  return {
    socket(family) {
      const fd = socket(family === 4 ? 2 : 10, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP) as number;
      if (fd < 0) throw new Error(`socket(): ${why()}`);
      return fd;
    },
    setsockopt(fd: number, o: SockOpt) {
      if ((setsockopt(fd, o.level, o.name, o.value, o.value.length) as number) !== 0) throw new Error(`setsockopt ${o.what}: ${why()}`);
    },
    close(fd) {
      close(fd);
    },
  };
}
