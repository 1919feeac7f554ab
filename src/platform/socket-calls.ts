// The native socket calls the per-peer socket options need, as an interface: ./sockopt.ts builds the options and
// loads ./sockopt-koffi.ts (socket(2) and setsockopt(2) through koffi) only when a peer asks for one; unit tests
// hand in a fake.

/** One setsockopt(2) call. `what` names it for errors and logs; it never holds the key. */
export interface SockOpt {
  level: number;
  name: number;
  value: Buffer;
  what: string;
}

/** The native calls (./sockopt-koffi.ts on Linux; a fake in unit tests). Errors name the option and errno text. */
export interface SocketCalls {
  /** A new TCP socket of the family (the caller hands it to net.Socket({ fd }) or closes it). */
  socket(family: 4 | 6): number;
  setsockopt(fd: number, opt: SockOpt): void;
  close(fd: number): void;
}
