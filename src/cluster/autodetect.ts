// The node's BGP address when node.bgp gives none: the address of the interface that holds the default route, as
// calico-node's "first-found"/"can-reach" autodetection picks in a plain setup. A connected UDP socket asks the
// kernel's routing table which source address it would use toward a global address (no packet is sent), which
// works the same on Linux and Windows; the prefix length comes from the interface list.
import { createSocket } from 'node:dgram';
import { networkInterfaces } from 'node:os';

/** "A.B.C.D/LEN" (or "ADDR/LEN" for IPv6) of the default route's interface, or undefined when there is none. */
export async function detectAddress(family: 4 | 6): Promise<string | undefined> {
  // Documentation addresses (RFC 5737, RFC 3849): routed by the default route, never answered.
  const target = family === 4 ? '192.0.2.1' : '2001:db8::1';
  const local = await new Promise<string | undefined>((resolve) => {
    const sock = createSocket(family === 4 ? 'udp4' : 'udp6');
    sock.on('error', () => {
      sock.close();
      resolve(undefined);
    });
    sock.connect(9, target, () => {
      try {
        resolve(sock.address().address);
      } catch {
        resolve(undefined);
      } finally {
        sock.close();
      }
    });
  });
  if (!local) return undefined;
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.address === local && a.cidr) return a.cidr;
    }
  }
  return `${local}/${family === 4 ? 32 : 128}`;
}
