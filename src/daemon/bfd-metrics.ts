// Prometheus metrics of the BFD sessions, read from the speaker's peer status (PeerStatus.bfd) at scrape time.
import type { Registry } from 'prom-client';
import type { PeerStatus } from '../bgp/peer.ts';

/** RFC 5880 4.1 state numbers. */
const STATE: Record<string, number> = { AdminDown: 0, Down: 1, Init: 2, Up: 3 };

/** prom-client is passed in, not imported, so the daemon loads it only on the first scrape (src/daemon/metrics.ts). */
export function registerBfdMetrics(prom: typeof import('prom-client'), reg: Registry, peers: () => PeerStatus[]): void {
  const { Counter, Gauge } = prom;
  const withBfd = () => peers().filter((p) => p.bfd).map((p) => ({ peer: p.address, bfd: p.bfd! }));
  new Gauge({ name: 'blockspeaker_bfd_session_state', help: 'BFD session state per peer: 0 AdminDown, 1 Down, 2 Init, 3 Up (RFC 5880)',
    labelNames: ['peer'], registers: [reg],
    collect() {
      this.reset();
      for (const { peer, bfd } of withBfd()) this.set({ peer }, STATE[bfd.state]);
    } });
  new Counter({ name: 'blockspeaker_bfd_session_downs_total', help: 'BFD Up -> Down failures per peer (the remote going AdminDown is not counted)',
    labelNames: ['peer'], registers: [reg],
    collect() {
      this.reset();
      for (const { peer, bfd } of withBfd()) this.inc({ peer }, bfd.downs);
    } });
  new Gauge({ name: 'blockspeaker_bfd_detection_time_seconds', help: 'BFD detection time in use per peer (remote multiplier x agreed interval)',
    labelNames: ['peer'], registers: [reg],
    collect() {
      this.reset();
      for (const { peer, bfd } of withBfd()) if (bfd.detectionTime !== null) this.set({ peer }, bfd.detectionTime / 1000);
    } });
  new Counter({ name: 'blockspeaker_bfd_packets_total', help: 'BFD Control packets per peer: direction in (accepted), out, discarded (failed a reception check)',
    labelNames: ['peer', 'direction'], registers: [reg],
    collect() {
      this.reset();
      for (const { peer, bfd } of withBfd()) {
        this.inc({ peer, direction: 'in' }, bfd.packetsIn);
        this.inc({ peer, direction: 'out' }, bfd.packetsOut);
        this.inc({ peer, direction: 'discarded' }, bfd.discarded);
      }
    } });
}
