// What the interop lab needs on this machine: the daemons' binaries (found at their Debian paths or on PATH) and
// root. Its own file so that the gate, the namespaces and every peer kind can read the binaries' paths.
//
// `missingPrereqs(kinds)` gives the list of what is missing; `assertPrereqs(kinds)` throws it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PeerKind } from './peer-types.ts';

export const BIN = {
  ip: '/usr/sbin/ip',
  bird: '/usr/sbin/bird',
  birdc: '/usr/sbin/birdc',
  gobgpd: '/usr/bin/gobgpd',
  gobgp: '/usr/bin/gobgp',
  zebra: '/usr/lib/frr/zebra',
  bgpd: '/usr/lib/frr/bgpd',
  bfdd: '/usr/lib/frr/bfdd',
  vtysh: '/usr/bin/vtysh',
};

function findBin(name: string, fallback: string): string | null {
  if (fs.existsSync(fallback)) return fallback;
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin', '/usr/bin'])) {
    const p = path.join(dir, name);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

/** Human-readable list of what is missing to run the given peer kinds; empty when all is there. */
export function missingPrereqs(kinds: PeerKind[] = []): string[] {
  const missing: string[] = [];
  if (process.platform !== 'linux') return [`network namespaces need Linux (this is ${process.platform})`];
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    missing.push('not root: network namespaces and BGP port 179 need root (run the interop tests as root)');
  }
  const need = (name: keyof typeof BIN, pkg: string) => {
    const found = findBin(path.basename(BIN[name]), BIN[name]);
    if (found) BIN[name] = found;
    else missing.push(`${path.basename(BIN[name])} not found: apt-get install ${pkg}`);
  };
  need('ip', 'iproute2');
  const set = new Set(kinds);
  if (set.has('bird')) { need('bird', 'bird2'); need('birdc', 'bird2'); }
  if (set.has('gobgp')) { need('gobgpd', 'gobgpd'); need('gobgp', 'gobgpd'); }
  if (set.has('frr')) {
    need('zebra', 'frr'); need('bgpd', 'frr'); need('vtysh', 'frr'); need('bfdd', 'frr');
    if (!missing.some((m) => m.includes('frr')) && frrUser() === null) missing.push('user frr not found: apt-get install frr');
  }
  return missing;
}

export function assertPrereqs(kinds: PeerKind[] = []): void {
  const missing = missingPrereqs(kinds);
  if (missing.length) throw new Error(`interop harness cannot run: ${missing.join('; ')}`);
}

/** The frr user and group (FRR's daemons run as frr), or null when there is none. */
export function frrUser(): { uid: number; gid: number } | null {
  try {
    const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('frr:'));
    if (!line) return null;
    const f = line.split(':');
    return { uid: Number(f[2]), gid: Number(f[3]) };
  } catch {
    return null;
  }
}
