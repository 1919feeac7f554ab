// Canonical spellings shared by the three peer kinds: prefixes and addresses as RFC 5952 text (so the daemons'
// spellings compare equal), session states by one name, and the per-neighbour defaults their configs derive.
import ipaddr from 'ipaddr.js';
import type { Announcement, Family, NeighborOptions, SessionState } from './peer-types.ts';

export function familyOf(addr: string): Family {
  return addr.includes(':') ? 'ipv6' : 'ipv4';
}

/** Canonical text of a prefix (RFC 5952 for IPv6), so daemons' spellings compare equal. */
export function canonPrefix(p: string): string {
  try {
    const [addr, len] = ipaddr.parseCIDR(p);
    return `${addr.toString()}/${len}`;
  } catch {
    return p;
  }
}
export function canonAddr(a: string): string {
  try { return ipaddr.parse(a).toString(); } catch { return a; }
}
export function isUnspecified(a: string): boolean {
  return a === '0.0.0.0' || a === '::' || a === '';
}
export function normAnnouncement(a: string | Announcement): Announcement {
  const ann = typeof a === 'string' ? { prefix: a } : { ...a };
  ann.prefix = canonPrefix(ann.prefix);
  return ann;
}
export function neighborFamilies(n: NeighborOptions): Family[] {
  return n.families ?? [familyOf(n.address)];
}
export function grTime(n: NeighborOptions): number | undefined {
  return typeof n.gracefulRestart === 'object' ? n.gracefulRestart.restartTime : undefined;
}
export function keepaliveFor(hold: number): number {
  return hold === 0 ? 0 : Math.max(1, Math.floor(hold / 3));
}
export function tailLines(s: string, n: number): string {
  const lines = s.split('\n');
  return lines.length > n ? `... (${lines.length - n} earlier lines)\n${lines.slice(-n).join('\n')}` : s;
}


export function normState(s: string): SessionState {
  const k = s.toLowerCase().replace(/[^a-z]/g, '');
  const map: Record<string, SessionState> = {
    idle: 'Idle', connect: 'Connect', active: 'Active', opensent: 'OpenSent', openconfirm: 'OpenConfirm',
    established: 'Established', down: 'Down',
    passive: 'Active', // BIRD's name for a passive peer waiting for the neighbour to connect
  };
  return map[k] ?? (k.startsWith('idle') ? 'Idle' : 'Unknown');
}
