// Prometheus metrics of the BGP hardening features, read from the speaker's peer status at scrape time:
// errors per peer and kind (RFC 7606 actions, NOTIFICATIONs, max-prefix trips) and the max-prefix limits.
import type { Registry } from 'prom-client';
import type { PeerStatus } from '../bgp/peer.ts';

/** prom-client is passed in, not imported, so the daemon loads it only on the first scrape (src/daemon/metrics.ts). */
export function registerBgpHardeningMetrics(prom: typeof import('prom-client'), reg: Registry, peers: () => PeerStatus[]): void {
  const { Counter, Gauge } = prom;
  new Counter({
    name: 'blockspeaker_bgp_errors_total',
    help: 'BGP errors per peer since start: kind treat-as-withdraw/attribute-discard (detail: attribute), notification-sent/notification-received (detail: code/subcode), max-prefix (detail: family)',
    labelNames: ['peer', 'kind', 'detail'], registers: [reg],
    collect() {
      this.reset();
      for (const p of peers()) {
        for (const [kind, details] of Object.entries(p.errorCounts)) {
          for (const [detail, n] of Object.entries(details ?? {})) this.inc({ peer: p.address, kind, detail }, n);
        }
      }
    },
  });
  new Gauge({
    name: 'blockspeaker_bgp_max_prefixes',
    help: 'Max-prefix limit per peer and family (absent: no limit)',
    labelNames: ['peer', 'family'], registers: [reg],
    collect() {
      this.reset();
      for (const p of peers()) {
        const m = p.maxPrefixes;
        if (!m) continue;
        for (const f of ['ipv4', 'ipv6'] as const) if (m.limits[f] !== null) this.set({ peer: p.address, family: f }, m.limits[f]!);
      }
    },
  });
  new Gauge({
    name: 'blockspeaker_bgp_max_prefix_exceeded_timestamp_seconds',
    help: 'When the max-prefix limit last closed the session with the peer (absent: never)',
    labelNames: ['peer', 'family'], registers: [reg],
    collect() {
      this.reset();
      for (const p of peers()) {
        const e = p.maxPrefixes?.exceeded;
        if (e) this.set({ peer: p.address, family: e.family }, e.at / 1000);
      }
    },
  });
}
