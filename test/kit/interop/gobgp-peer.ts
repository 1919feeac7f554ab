// GoBGP as an interop peer: its TOML config, the gobgp CLI run inside the namespace (its gRPC API listens there),
// and the normalisation of its JSON (neighbours, RIB).
import * as path from 'node:path';
import * as fs from 'node:fs';
import { BasePeer } from './base-peer.ts';
import { canonAddr, canonPrefix, familyOf, grTime, isUnspecified, keepaliveFor, neighborFamilies, normAnnouncement, normState } from './normalise.ts';
import type { Announcement, Family, NeighborStatus, Route, SessionState } from './peer-types.ts';
import { BIN } from './prereqs.ts';

// GoBGP
//
// Command line: ip netns exec NS gobgpd -f DIR/gobgpd.toml -t toml --api-hosts 127.0.0.1:PORT -p --pprof-disable [-r]
//  - the gRPC API listens inside the namespace, so the CLI must run there too:
//    ip netns exec NS gobgp -u 127.0.0.1 -p PORT neighbor -j | global rib -a ipv4 -j | global rib add -a ipv4 P
//  - --pprof-disable, else it binds localhost:6060; -p gives plain-text logs.
//  - routes live only in gobgpd's memory (no static routes in the TOML): announcements are re-added after each
//    (re)start; `global rib add` with the default next hop 0.0.0.0/:: is rewritten to the session address on eBGP.
//  - defaults are slow for tests: connect-retry 120 s, idle-hold-time-after-reset 30 s.
//  - `neighbor -j` gives state.session_state as a number (6 = established) in 3.x; older versions use strings.
//  - after any session drop gobgpd sits in Idle for a fixed 5 s and closes incoming connections (the configured
//    idle-hold-time-after-reset only applies to `gobgp neighbor X reset`), and its own first connect attempt comes
//    5-10 s later (connect-retry is clamped to >= 5 s): re-establishing with GoBGP takes ~5-10 s. Let the other
//    side connect actively when you can.

let grpcPortCounter = 0;

/**
 * Whether a gobgp CLI run failed at its own connect: it gives gobgpd's gRPC API a fixed 1 s to accept (newClient in
 * GoBGP's cmd/gobgp/common.go: a dial with grpc.WithBlock under context.WithTimeout(ctx, time.Second)) and prints
 * "context deadline exceeded" (as {"error": ...} with -j). On a machine running the whole CI at once, a gobgpd
 * just restarted after kill -9 missed that second and the test read it as gobgpd's answer. The dial comes before the
 * request, so a command that failed this way was never sent and is safe to run again.
 */
export function isDialTimeout(r: { code: number; stdout: string; stderr: string }): boolean {
  return r.code !== 0 && /context deadline exceeded/i.test(`${r.stderr}\n${r.stdout}`);
}

/** Runs `run` again (up to `attempts` in all, `pauseMs` apart) while it fails on the CLI's dial deadline. */
export async function retryDialTimeouts<R extends { code: number; stdout: string; stderr: string }>(
  run: () => Promise<R>, attempts = 5, pauseMs = 200,
): Promise<R & { attempts: number }> {
  for (let n = 1; ; n++) {
    const r = await run();
    if (n >= attempts || !isDialTimeout(r)) return { ...r, attempts: n };
    await new Promise((res) => setTimeout(res, pauseMs));
  }
}

export class GobgpPeer extends BasePeer {
  readonly kind = 'gobgp' as const;
  private readonly port = 50051 + (++grpcPortCounter % 1000);
  private get conf() { return path.join(this.dir, 'gobgpd.toml'); }

  private config(): string {
    const o = this.options;
    const out: string[] = ['[global.config]', `  as = ${o.asn}`, `  router-id = "${o.routerId}"`, '  port = 179', ''];
    for (const n of o.neighbors) {
      out.push('[[neighbors]]', '  [neighbors.config]', `    neighbor-address = "${n.address}"`, `    peer-as = ${n.asn}`);
      out.push('  [neighbors.timers.config]', '    connect-retry = 2', '    idle-hold-time-after-reset = 1');
      if (n.holdTime !== undefined) out.push(`    hold-time = ${n.holdTime}`, `    keepalive-interval = ${keepaliveFor(n.holdTime)}`);
      if (n.passive || n.port) {
        out.push('  [neighbors.transport.config]');
        if (n.passive) out.push('    passive-mode = true');
        if (n.port) out.push(`    remote-port = ${n.port}`);
      }
      const gr = !!n.gracefulRestart;
      if (gr) {
        out.push('  [neighbors.graceful-restart.config]', '    enabled = true', `    restart-time = ${grTime(n) ?? 120}`);
      }
      for (const fam of neighborFamilies(n)) {
        out.push('  [[neighbors.afi-safis]]', '    [neighbors.afi-safis.config]', `      afi-safi-name = "${fam}-unicast"`);
        if (gr) out.push('    [neighbors.afi-safis.mp-graceful-restart.config]', '      enabled = true');
      }
      out.push('');
    }
    return `${out.join('\n')}\n`;
  }

  protected logFiles(): string[] {
    return [path.join(this.dir, 'gobgpd.log')];
  }

  async gobgp(args: string[], check = true): Promise<string> {
    const r = await retryDialTimeouts(() => this.ns.exec(BIN.gobgp, ['-u', '127.0.0.1', '-p', String(this.port), ...args], { check: false }));
    if (check && r.code !== 0) {
      const also = r.attempts > 1 ? ` (${r.attempts} attempts: the CLI's 1 s dial deadline each time)` : '';
      throw new Error(`gobgp ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}${also}`);
    }
    return r.stdout;
  }

  async start(recovery = false): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    const args = ['-f', this.conf, '-t', 'toml', '--api-hosts', `127.0.0.1:${this.port}`, '-p', '--pprof-disable'];
    if (recovery) args.push('-r');
    this.spawnDaemon('gobgpd', BIN.gobgpd, args, path.join(this.dir, 'gobgpd.log'));
    await this.waitReady(`gobgpd ${this.name}`, async () => {
      const r = await this.ns.exec(BIN.gobgp, ['-u', '127.0.0.1', '-p', String(this.port), 'global'], { check: false, timeoutMs: 3000 });
      return r.code === 0 && /AS/.test(r.stdout);
    });
    for (const a of this.announced.values()) await this.ribAdd(a);
  }

  private async ribAdd(a: Announcement): Promise<void> {
    const args = ['global', 'rib', 'add', '-a', familyOf(a.prefix), a.prefix];
    if (a.communities?.length) args.push('community', a.communities.join(','));
    if (a.largeCommunities?.length) args.push('large-community', a.largeCommunities.join(','));
    if (a.med !== undefined) args.push('med', String(a.med));
    if (a.asPath?.length) args.push('aspath', a.asPath.join(' '));
    await this.gobgp(args);
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const list = JSON.parse((await this.gobgp(['neighbor', '-j'])) || '[]') as GobgpNeighbor[];
    const want = canonAddr(addr);
    const nb = (list ?? []).find((n) => canonAddr(n.conf?.neighbor_address ?? n.state?.neighbor_address ?? '') === want);
    if (!nb) return { state: 'Unknown', lastError: `neighbour ${addr} not configured`, raw: list };
    return { state: gobgpState(nb.state?.session_state), lastError: null, raw: nb };
  }

  async routes(family: Family): Promise<Route[]> {
    const text = (await this.gobgp(['global', 'rib', '-a', family, '-j'])).trim();
    return normalizeGobgpRib(text ? JSON.parse(text) : {});
  }

  async routeCount(family: Family): Promise<number> {
    const text = await this.gobgp(['global', 'rib', 'summary', '-a', family]);
    const m = /Destination:\s*(\d+)/.exec(text);
    return m ? Number(m[1]) : 0;
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    if (this.announced.has(ann.prefix) && this.running) await this.gobgp(['global', 'rib', 'del', '-a', familyOf(ann.prefix), ann.prefix]);
    this.announced.set(ann.prefix, ann);
    if (this.running) await this.ribAdd(ann);
  }

  async withdraw(prefix: string): Promise<void> {
    const p = canonPrefix(prefix);
    this.announced.delete(p);
    if (this.running) await this.gobgp(['global', 'rib', 'del', '-a', familyOf(p), p]);
  }

  protected async status(): Promise<string> {
    return `${await this.gobgp(['neighbor'], false)}\n${await this.gobgp(['global', 'rib', '-a', 'ipv4'], false)}`;
  }
}

interface GobgpNeighbor {
  conf?: { neighbor_address?: string; peer_asn?: number };
  state?: { neighbor_address?: string; session_state?: number | string };
}

function gobgpState(s: number | string | undefined): SessionState {
  if (typeof s === 'number') {
    return (['Unknown', 'Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] as const)[s] ?? 'Unknown';
  }
  if (typeof s === 'string') return normState(s.replace(/^BGP_FSM_|^SESSION_STATE_/i, ''));
  return 'Unknown';
}

interface GobgpPath {
  nlri?: { prefix?: string };
  best?: boolean;
  stale?: boolean;
  'neighbor-ip'?: string;
  attrs?: { type: number; [k: string]: unknown }[];
}

/** Normalises `gobgp global rib -a FAMILY -j` (a map prefix -> paths). */
export function normalizeGobgpRib(rib: Record<string, GobgpPath[]> | null): Route[] {
  const out: Route[] = [];
  for (const [pfx, paths] of Object.entries(rib ?? {})) {
    for (const p of paths ?? []) {
      const r: Route = {
        prefix: canonPrefix(p.nlri?.prefix ?? pfx), nexthop: null, nexthops: [], asPath: [], origin: null, med: null,
        localPref: null, communities: [], largeCommunities: [],
        from: p['neighbor-ip'] && !isUnspecified(p['neighbor-ip']) ? canonAddr(p['neighbor-ip']) : null,
        best: !!p.best, stale: !!p.stale,
      };
      for (const a of p.attrs ?? []) {
        switch (a.type) {
          case 1: r.origin = (['igp', 'egp', 'incomplete'] as const)[a.value as number] ?? null; break;
          case 2:
            for (const seg of (a.as_paths as { asns?: number[] }[] | undefined) ?? []) r.asPath.push(...(seg.asns ?? []));
            break;
          case 3: if (!isUnspecified(String(a.nexthop))) r.nexthops.push(canonAddr(String(a.nexthop))); break;
          case 4: r.med = Number(a.metric ?? a.value ?? 0); break;
          case 5: r.localPref = Number(a.value ?? 0); break;
          case 8:
            r.communities = ((a.communities as number[] | undefined) ?? []).map((c) => `${c >>> 16}:${c & 0xffff}`);
            break;
          case 14: {
            const hops = (a.nexthop ? [a.nexthop] : []).concat((a.nexthops as string[] | undefined) ?? []);
            for (const h of hops.map(String)) if (!isUnspecified(h) && !r.nexthops.includes(canonAddr(h))) r.nexthops.push(canonAddr(h));
            break;
          }
          case 32:
            r.largeCommunities = ((a.value as { ASN?: number; LocalData1?: number; LocalData2?: number }[] | undefined) ??
              (a.values as { ASN?: number; LocalData1?: number; LocalData2?: number }[] | undefined) ?? [])
              .map((c) => `${c.ASN ?? 0}:${c.LocalData1 ?? 0}:${c.LocalData2 ?? 0}`);
            break;
        }
      }
      r.nexthop = r.nexthops[0] ?? null;
      out.push(r);
    }
  }
  return out;
}
