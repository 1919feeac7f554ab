// Config check for bgp.peers[].bfd: true (the defaults) or { minRx, minTx, multiplier } in ms; kept apart from
// config.ts so that file only lists the field. src/bfd/manager.ts runs the sessions.
import type { Checker, Path } from './check.ts';
import type { BfdConfig } from './types.ts';

/**
 * FRR bfdd's defaults (300 ms receive and transmit, multiplier 3: 900 ms detection). BIRD's (10 ms receive, 100 ms
 * transmit, multiplier 5) are tighter than a Node event loop on a busy Windows node should promise.
 */
export const BFD_DEFAULTS: BfdConfig = { minRx: 300, minTx: 300, multiplier: 3 };
/** Below 10 ms a timer in Node is not a promise (FRR's minimum is 10 ms too); above a minute is not detection. */
const MIN_MS = 10;
const MAX_MS = 60_000;

/** bfd: true | false | { minRx?, minTx?, multiplier? }: the session parameters, or null for "no BFD". */
export function bfdField(c: Checker, path: Path, v: unknown): BfdConfig | null | undefined {
  if (v === true) return { ...BFD_DEFAULTS };
  if (v === false || v === null) return null;
  const o = c.object(path, v, ['minRx', 'minTx', 'multiplier']);
  if (!o) return undefined;
  const minRx = c.opt(o.minRx, BFD_DEFAULTS.minRx, (x) => c.int([...path, 'minRx'], x, MIN_MS, MAX_MS));
  const minTx = c.opt(o.minTx, BFD_DEFAULTS.minTx, (x) => c.int([...path, 'minTx'], x, MIN_MS, MAX_MS));
  const multiplier = c.opt(o.multiplier, BFD_DEFAULTS.multiplier, (x) => c.int([...path, 'multiplier'], x, 1, 255));
  if (minRx === undefined || minTx === undefined || multiplier === undefined) return undefined;
  return { minRx, minTx, multiplier };
}
