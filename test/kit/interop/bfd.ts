/**
 * BFD in the interop lab: the peers' view of their BFD sessions (BIRD `show bfd sessions`, FRR bfdd `show bfd
 * peers json`), cutting a link both ways without touching the interfaces (a blackhole route to the other end in
 * each namespace: the daemons see no link event, only BFD can notice), and when each side logged its Down.
 * Used by test/interop/bfd.test.ts and bench/bfd-detect.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { execInNetns, type Link } from './netns.ts';
import type { Peer } from './peer-types.ts';
import { toolPath } from '../tools.ts';

const execFileP = promisify(execFile);

export type BfdPeerState = 'Up' | 'Down' | 'Init' | 'AdminDown' | 'Unknown';

/** The peer's BFD session with `addr`, as the peer reports it. */
export async function peerBfdState(peer: Peer, addr: string): Promise<BfdPeerState> {
  if (peer.kind === 'bird') {
    const r = await execFileP('/usr/sbin/birdc', ['-s', path.join(peer.dir, 'bird.ctl'), 'show', 'bfd', 'sessions']).catch((e) => e as { stdout: string });
    return parseBirdBfd(r.stdout ?? '', addr);
  }
  if (peer.kind === 'frr') {
    const r = await execFileP('/usr/bin/vtysh', ['--vty_socket', path.join(peer.dir, 'frr'), '-d', 'bfdd', '-c', 'show bfd peers json'])
      .catch((e) => e as { stdout: string });
    return parseFrrBfd(r.stdout ?? '', addr);
  }
  return 'Unknown';
}

/** `birdc show bfd sessions`: a row per session, "ADDR IFACE STATE SINCE INTERVAL TIMEOUT". */
export function parseBirdBfd(text: string, addr: string): BfdPeerState {
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === addr) return normState(f[2]);
  }
  return 'Unknown';
}

/** `show bfd peers json`: [{ peer, status: up|down|init|shutdown }]. */
export function parseFrrBfd(text: string, addr: string): BfdPeerState {
  try {
    const list = JSON.parse(text) as { peer?: string; status?: string }[];
    const s = list.find((x) => x.peer === addr);
    return s ? normState(s.status ?? '') : 'Unknown';
  } catch {
    return 'Unknown';
  }
}

function normState(s: string): BfdPeerState {
  const k = (s ?? '').toLowerCase();
  if (k === 'up') return 'Up';
  if (k === 'down') return 'Down';
  if (k === 'init') return 'Init';
  if (k === 'admindown' || k === 'shutdown') return 'AdminDown';
  return 'Unknown';
}

/**
 * Cut (or heal) the link both ways: drop every packet arriving in either namespace (iptables INPUT). Routes are no
 * cut: BIRD's and FRR's single-hop BFD send through the interface directly, past a blackhole route; nor is taking the
 * interface down, which the daemons see and act on without BFD.
 */
export async function cutLink(link: Link, cut: boolean): Promise<void> {
  const op = cut ? '-I' : '-D';
  await Promise.all([link.local.ns, link.peer.ns].map((ns) => execInNetns(ns, IPTABLES, [op, 'INPUT', '-i', ns === link.local.ns ? link.local.ifname : link.peer.ifname, '-j', 'DROP'])));
}

/** Debian's iptables (the nft backend works inside a namespace); .ci/run installs the package. */
export const IPTABLES = toolPath('iptables') ?? '/usr/sbin/iptables';

/** ms since the epoch of the first "BFD down" line logged after `since`, per daemon; null: none yet. */
export function ourBfdDownAt(logFile: string, addr: string, since: number): number | null {
  let text = '';
  try { text = fs.readFileSync(logFile, 'utf8'); } catch { return null; }
  for (const line of text.split('\n')) {
    if (!line.includes(`bfd ${addr}: Up -> Down`)) continue;
    try {
      const j = JSON.parse(line) as { time: number };
      if (j.time >= since) return j.time;
    } catch { /* not json */ }
  }
  return null;
}
