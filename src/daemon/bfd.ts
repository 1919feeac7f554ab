// The daemon's BFD: one manager for the node, its sessions following bgp.peers[].bfd across reloads; the speaker
// subscribes to its failures (src/bgp/speaker.ts onBfdDown).
import { BfdManager, type BfdPeerConfig } from '../bfd/manager.ts';
import type { Config } from '../config/types.ts';

/** The BFD sessions a config asks for. */
export function bfdPeers(cfg: Config): BfdPeerConfig[] {
  return (cfg.bgp?.peers ?? []).flatMap((p) => (p.bfd ? [{ address: p.address, ...p.bfd }] : []));
}

/** A manager logging through the daemon's logger; no socket is opened until a peer asks for BFD. */
export function newBfdManager(log: { info(o: object, msg: string): void; warn(o: object, msg: string): void }): BfdManager {
  return new BfdManager({
    logger: { info: (m) => log.info({ component: 'bfd' }, m), warn: (m) => log.warn({ component: 'bfd' }, m) },
  });
}
