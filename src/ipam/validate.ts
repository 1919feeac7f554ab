// Checks on what IPAM is given (a pool spec, a host, the settings, an automatic assignment's counts) and, through
// the blockspeaker layout's decoders (layout.ts), on the same records read back from the store. Every error names
// the field.
import { maxLen, parsePrefix, type Prefix } from '../net/ip.ts';
import { parseSelector, SelectorError } from '../calico/selector.ts';
import { IpamError, type AutoAssignArgs, type Host, type IpamConfig, type Pool, type PoolSpec, type ReservationPolicy, type Use } from './types.ts';

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

function invalid(msg: string): never {
  throw new IpamError('INVALID', msg);
}

/** Check a pool spec, fill defaults, and return the pool. Every error names the field. */
export function validatePool(spec: PoolSpec): Pool {
  if (typeof spec.name !== 'string' || !NAME.test(spec.name)) {
    invalid(`pool name ${JSON.stringify(spec.name)} is not valid: lower-case letters, digits, "-" and "."`);
  }
  let cidr: Prefix;
  try {
    cidr = parsePrefix(spec.cidr);
  } catch (e) {
    invalid(`pool ${spec.name}: cidr: ${(e as Error).message}`);
  }
  const v4 = cidr.family === 4;
  const blockSize = spec.blockSize ?? (v4 ? 26 : 122);
  const [lo, hi] = v4 ? [20, 32] : [116, 128];
  if (!Number.isInteger(blockSize) || blockSize < lo || blockSize > hi) {
    invalid(`pool ${spec.name}: blockSize ${blockSize} out of range ${lo}..${hi} for IPv${cidr.family}`);
  }
  if (blockSize < cidr.len) invalid(`pool ${spec.name}: blockSize /${blockSize} is larger than the pool ${cidr}`);
  const nodeSelector = spec.nodeSelector ?? 'all()';
  try {
    parseSelector(nodeSelector);
  } catch (e) {
    invalid(`pool ${spec.name}: nodeSelector: ${(e as SelectorError).message}`);
  }
  const allowedUses = spec.allowedUses ?? ['Workload', 'Tunnel'];
  if (!Array.isArray(allowedUses) || allowedUses.length === 0 || allowedUses.some((u) => u !== 'Workload' && u !== 'Tunnel')) {
    invalid(`pool ${spec.name}: allowedUses must be a non-empty list of Workload, Tunnel; got ${JSON.stringify(allowedUses)}`);
  }
  const reservation: ReservationPolicy = spec.reservation ?? { kind: 'auto' };
  const blockAddrs = 2 ** (maxLen(cidr.family) - blockSize);
  const count = (n: unknown, field: string, max: number): void => {
    if (!Number.isInteger(n) || (n as number) < 0 || (n as number) > max) {
      invalid(`pool ${spec.name}: reservation ${field} must be a whole number from 0 to ${max}, got ${JSON.stringify(n)}`);
    }
  };
  switch (reservation.kind) {
    case 'auto':
    case 'none':
      break;
    case 'perBlock':
      count(reservation.start, 'start', blockAddrs - 1);
      count(reservation.end, 'end', blockAddrs - 1);
      if (reservation.start + reservation.end >= blockAddrs) {
        invalid(`pool ${spec.name}: reservation per-block ${reservation.start}:${reservation.end} leaves no address in a /${blockSize} block`);
      }
      break;
    case 'perHost':
      count(reservation.count, 'count', blockAddrs);
      break;
    case 'perPool':
      count(reservation.count, 'count', Math.min(2 ** (maxLen(cidr.family) - cidr.len) - 1, 4096));
      break;
    default:
      invalid(`pool ${spec.name}: unknown reservation kind ${JSON.stringify((reservation as { kind: unknown }).kind)}`);
  }
  for (const f of ['disabled', 'natOutgoing', 'disableBGPExport'] as const) {
    if (spec[f] !== undefined && typeof spec[f] !== 'boolean') invalid(`pool ${spec.name}: ${f} must be true or false`);
  }
  return {
    name: spec.name,
    cidr: cidr.toString(),
    blockSize,
    nodeSelector,
    disabled: spec.disabled ?? false,
    allowedUses: [...new Set(allowedUses)] as Use[],
    natOutgoing: spec.natOutgoing ?? false,
    disableBGPExport: spec.disableBGPExport ?? false,
    reservation,
  };
}

export function validateHost(host: Host): Host {
  if (typeof host.name !== 'string' || !NAME.test(host.name)) {
    invalid(`host name ${JSON.stringify(host.name)} is not valid: lower-case letters, digits, "-" and "."`);
  }
  if (host.os !== 'linux' && host.os !== 'windows') invalid(`host ${host.name}: os must be linux or windows, got ${JSON.stringify(host.os)}`);
  const labels = host.labels ?? {};
  if (typeof labels !== 'object' || Array.isArray(labels)) invalid(`host ${host.name}: labels must be an object of strings`);
  for (const [k, v] of Object.entries(labels)) {
    if (!/^[A-Za-z0-9_./-]+$/.test(k) || typeof v !== 'string') invalid(`host ${host.name}: bad label ${JSON.stringify(k)}=${JSON.stringify(v)}`);
  }
  return { name: host.name, os: host.os, labels: { ...labels } };
}

export function validateConfig(c: IpamConfig): IpamConfig {
  if (typeof c.strictAffinity !== 'boolean') invalid('strictAffinity must be true or false');
  if (typeof c.autoAllocateBlocks !== 'boolean') invalid('autoAllocateBlocks must be true or false');
  if (!Number.isInteger(c.maxBlocksPerHost) || c.maxBlocksPerHost < 0) invalid('maxBlocksPerHost must be a whole number >= 0 (0 = no limit)');
  if (!Number.isFinite(c.ipCooldownSeconds) || c.ipCooldownSeconds < 0) invalid('ipCooldownSeconds must be >= 0');
  return c;
}

/** Check an automatic assignment's counts and use, before it joins a batch. */
export function validateAutoAssignArgs(args: AutoAssignArgs): void {
  for (const [f, n] of [['num4', args.num4], ['num6', args.num6], ['maxBlocks', args.maxBlocks]] as const) {
    if (n !== undefined && (!Number.isInteger(n) || n < 0)) {
      invalid(`${f} must be a whole number >= 0, got ${n}`);
    }
  }
  if (args.use !== undefined && args.use !== 'Workload' && args.use !== 'Tunnel') {
    invalid(`use must be Workload or Tunnel, got ${JSON.stringify(args.use)}`);
  }
}
