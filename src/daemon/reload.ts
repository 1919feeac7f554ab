// Applying the config file to a running daemon: the settings only a restart can change are kept as they run (each a
// warning), the config's pools are added to the store when it lacks them (at start too), and the status listeners
// whose address moved are reopened. Its own file so Daemon.reload reads as the order in which it applies the rest.
import type { Logger as Pino } from 'pino';
import type { Config, ListenAddress, PoolConfig } from '../config/config.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { Pool } from '../ipam/types.ts';
import type { Listener, StatusServer } from '../status/http.ts';

const sameListen = (a: ListenAddress | undefined, b: ListenAddress | undefined) =>
  a?.address === b?.address && a?.port === b?.port;

/** Where c puts one of the status server's listeners; undefined: not opened. */
export const listenOf = (c: Config, which: Listener): ListenAddress | undefined =>
  !c.status ? undefined : which === 'status' ? c.status.listen : c.status.metricsListen;

/** `next` with node.name, ipam.store, dataplane and ipc as they run in `cfg`: changing them needs a restart. */
export function keepRestartSettings(next: Config, cfg: Config, log: Pino): Config {
  if (next.node.name !== cfg.node.name) log.warn({ from: cfg.node.name, to: next.node.name }, 'node.name changes need a restart; ignored');
  next = { ...next, node: { ...next.node, name: cfg.node.name } };
  if (JSON.stringify(next.ipam?.store) !== JSON.stringify(cfg.ipam?.store) || !!next.ipam !== !!cfg.ipam) {
    log.warn('ipam.store changes need a restart; ignored');
    next = { ...next, ipam: next.ipam && cfg.ipam ? { ...next.ipam, store: cfg.ipam.store } : cfg.ipam };
  }
  if (JSON.stringify(next.dataplane) !== JSON.stringify(cfg.dataplane)) {
    log.warn('dataplane changes need a restart; ignored');
    next = { ...next, dataplane: cfg.dataplane };
  }
  if (JSON.stringify(next.ipc) !== JSON.stringify(cfg.ipc)) {
    log.warn('ipc changes need a restart; ignored');
    next = { ...next, ipc: cfg.ipc };
  }
  return next;
}

const poolKey = (p: Pick<Pool, 'cidr' | 'blockSize' | 'nodeSelector' | 'disabled' | 'natOutgoing' | 'disableBGPExport'>) =>
  JSON.stringify([p.cidr, p.blockSize, p.nodeSelector, p.disabled, p.natOutgoing, p.disableBGPExport]);

/** Add the config's pools the store lacks; a pool the store has with other settings is the store's (a warning). */
export async function ensurePools(ipam: Ipam, pools: readonly PoolConfig[], log: Pino, warn: (msg: string) => void): Promise<void> {
  const have = new Map((await ipam.listPools()).map((p) => [p.name, p]));
  for (const p of pools) {
    const cur = have.get(p.name);
    if (!cur) {
      try {
        await ipam.addPool(p);
        log.info({ pool: p.name, cidr: p.cidr }, 'pool added');
      } catch (e) {
        // Another node may add it at the same moment (same settings: fine), or it overlaps a pool of another name.
        const now = (await ipam.listPools()).find((x) => x.name === p.name);
        if (!now) warn(`pool ${p.name}: not added: ${(e as Error).message}`);
        else if (poolKey(now) !== poolKey(p)) warn(`pool ${p.name}: the store's settings differ from the config's; the store's are used`);
      }
    } else if (poolKey(cur) !== poolKey(p)) {
      warn(`pool ${p.name}: the store has ${cur.cidr} /${cur.blockSize} (disabled ${cur.disabled}), the config ${p.cidr} /${p.blockSize} (disabled ${p.disabled}); the store's settings are used`);
    }
  }
}

/**
 * Reopen the status server's listeners whose address differs between `cfg` and `next` (`open` opens one). False:
 * they could not move and serve where they were, so the reload keeps `cfg`'s status section.
 */
export async function moveListeners(
  status: StatusServer,
  cfg: Config,
  next: Config,
  open: (which: Listener, l: ListenAddress | undefined) => Promise<void>,
  log: Pino,
): Promise<boolean> {
  // Only a listener whose address changed is reopened; all moved ones close first, so two may swap ports.
  const moved = (['status', 'metrics'] as const).filter((w) => !sameListen(listenOf(cfg, w), listenOf(next, w)));
  if (moved.length) {
    // Where they are bound now (port 0 in the config got a real port), to go back to exactly that.
    const bound = new Map(moved.map((w) => [w, (w === 'status' ? status.address() : status.metricsAddress()) ?? undefined]));
    for (const w of moved) await status.close(w);
    try {
      for (const w of moved) await open(w, listenOf(next, w));
    } catch (e) {
      // e.g. a new port is taken: keep serving where we were.
      log.error({ err: (e as Error).message, listen: next.status ? next.status : false },
        'status endpoint: cannot move; staying on the old addresses');
      for (const w of moved) await status.close(w);
      for (const w of moved) await open(w, bound.get(w));
      return false;
    }
  }
  return true;
}
