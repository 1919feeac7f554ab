// BIRD 2 as an interop peer: its config (static routes for the announcements, one `protocol bgp` per neighbour),
// birdc queries, and the parsers of birdc's text (sessions, graceful-restart state, routes).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BasePeer } from './base-peer.ts';
import { exec } from './netns.ts';
import { canonAddr, canonPrefix, familyOf, grTime, keepaliveFor, neighborFamilies, normAnnouncement, normState } from './normalise.ts';
import { bfdOf, type Announcement, type Family, type NeighborStatus, type Route, type SessionState } from './peer-types.ts';
import { BIN } from './prereqs.ts';

// BIRD 2
//
// Command line: ip netns exec NS bird -f -c DIR/bird.conf -s DIR/bird.ctl -P DIR/bird.pid [-R]
//  - -f keeps it in the foreground (the child is the daemon); -s gives a private control socket, so birdc never
//    talks to a system instance: birdc -s DIR/bird.ctl <command> (no netns exec needed, it is a unix socket).
//  - bird 2 needs explicit import/export in every eBGP channel (else nothing passes); `protocol device` is needed
//    for interface/address discovery (direct eBGP checks the neighbour is on a connected network).
//  - defaults are slow for tests: connect delay 5 s, connect retry 120 s, error wait 60-300 s after any error.
//  - no `protocol kernel`: nothing is written to the namespace's kernel table.
//  - reconfiguration (announce/withdraw) is `birdc configure`: static routes are in the config.
//  - iBGP: gateway recursive (the default) needs IGP routes to resolve next hops; we use `gateway direct`.
//  - BIRD cannot have two protocols to the same neighbour address at once.
//  - a bgp_med set on a static route is not sent to eBGP neighbours (communities and large communities are).
//  - `show route` has no stale flag: routes of a protocol whose neighbour is in graceful restart ("Neighbor
//    graceful restart active" in `show protocols all`) are reported stale until its End-of-RIB.
//  - `bird -R` (restart({ gracefulRestart: true })) sets the R bit and holds back its own route selection until
//    the neighbours' End-of-RIBs (or `graceful restart wait`, 240 s) — the peer must send End-of-RIB.

export class BirdPeer extends BasePeer {
  readonly kind = 'bird' as const;
  private get conf() { return path.join(this.dir, 'bird.conf'); }
  private get ctl() { return path.join(this.dir, 'bird.ctl'); }
  private protoName(addr: string): string {
    const i = this.options.neighbors.findIndex((n) => canonAddr(n.address) === canonAddr(addr));
    if (i < 0) throw new Error(`bird ${this.name}: no neighbour ${addr} configured`);
    return `nb${i + 1}`;
  }

  private config(): string {
    const o = this.options;
    const out: string[] = [
      `log "${path.join(this.dir, 'bird.log')}" all;`,
      `router id ${o.routerId};`,
      'protocol device { scan time 1; }',
    ];
    const bfdN = o.neighbors.map(bfdOf).find((b) => b);
    if (bfdN) {
      out.push('protocol bfd {', '  interface "*" {', `    min rx interval ${bfdN.minRx} ms;`, `    min tx interval ${bfdN.minTx} ms;`,
        `    multiplier ${bfdN.multiplier};`, '  };', '}');
    }
    for (const fam of ['ipv4', 'ipv6'] as const) {
      out.push(`protocol static static${fam === 'ipv4' ? 4 : 6} {`, `  ${fam};`);
      for (const a of this.announced.values()) {
        if (familyOf(a.prefix) !== fam) continue;
        const attrs: string[] = [];
        for (const c of a.communities ?? []) attrs.push(`bgp_community.add((${c.split(':').join(',')}));`);
        for (const c of a.largeCommunities ?? []) attrs.push(`bgp_large_community.add((${c.split(':').join(',')}));`);
        if (a.med !== undefined) attrs.push(`bgp_med = ${a.med};`);
        out.push(`  route ${a.prefix} blackhole${attrs.length ? ` { ${attrs.join(' ')} }` : ''};`);
      }
      out.push('}');
    }
    o.neighbors.forEach((n, i) => {
      const ibgp = n.asn === o.asn;
      out.push(`protocol bgp nb${i + 1} {`,
        `  description "${n.address}";`,
        `  local as ${o.asn};`,
        `  neighbor ${n.address}${n.port ? ` port ${n.port}` : ''} as ${n.asn};`,
        '  connect delay time 1;', '  connect retry time 2;', '  error wait time 1, 5;', '  error forget time 10;');
      if (n.passive) out.push('  passive on;');
      if (n.password !== undefined) out.push(`  password "${n.password}";`);
      if (n.ttlSecurity !== undefined) out.push('  ttl security on;', ...(n.ttlSecurity > 1 ? [`  multihop ${n.ttlSecurity};`] : []));
      if (bfdOf(n)) out.push('  bfd on;');
      if (n.holdTime !== undefined) {
        out.push(`  hold time ${n.holdTime};`);
        if (n.holdTime > 0) out.push(`  keepalive time ${keepaliveFor(n.holdTime)};`);
      }
      if (n.gracefulRestart !== undefined) {
        out.push(`  graceful restart ${n.gracefulRestart ? 'on' : 'off'};`);
        const t = grTime(n);
        if (t !== undefined) out.push(`  graceful restart time ${t};`);
      }
      for (const fam of neighborFamilies(n)) {
        out.push(`  ${fam} { import all; export all;${ibgp ? ' gateway direct; next hop self;' : ''} };`);
      }
      out.push('}');
    });
    return `${out.join('\n')}\n`;
  }

  protected logFiles(): string[] {
    return [path.join(this.dir, 'bird.out'), path.join(this.dir, 'bird.log')];
  }

  async start(recovery = false): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    fs.rmSync(this.ctl, { force: true });
    const args = ['-f', '-c', this.conf, '-s', this.ctl, '-P', path.join(this.dir, 'bird.pid')];
    if (recovery) args.push('-R');
    this.spawnDaemon('bird', BIN.bird, args, path.join(this.dir, 'bird.out'));
    await this.waitReady(`bird ${this.name}`, async () =>
      fs.existsSync(this.ctl) && (await this.birdc(['show', 'status'], false)).includes('Daemon is up'));
  }

  async birdc(args: string[], check = true): Promise<string> {
    const r = await exec(BIN.birdc, ['-s', this.ctl, ...args], { check: false });
    const text = r.stdout + r.stderr;
    if (check && (r.code !== 0 || /^(syntax error|Unable to connect)/m.test(text))) {
      throw new Error(`birdc ${args.join(' ')}: ${text.trim()}`);
    }
    return text;
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const text = await this.birdc(['show', 'protocols', 'all', this.protoName(addr)]);
    return parseBirdProtocol(text);
  }

  async routes(family: Family): Promise<Route[]> {
    const table = family === 'ipv4' ? 'master4' : 'master6';
    const text = await this.birdc(['show', 'route', 'all', 'table', table]);
    const byProto = new Map(this.options.neighbors.map((n, i) => [`nb${i + 1}`, canonAddr(n.address)]));
    // BIRD does not flag stale routes in `show route`; a protocol in GR helper mode ("Neighbor graceful restart
    // active", until the End-of-RIB) has all its routes stale, which is what we report.
    const grActive = parseBirdGrActive(await this.birdc(['show', 'protocols', 'all']));
    return parseBirdRoutes(text, byProto).map((r) => {
      const proto = [...byProto].find(([, a]) => a === r.from)?.[0];
      return proto && grActive.has(proto) ? { ...r, stale: true } : r;
    });
  }

  async routeCount(family: Family): Promise<number> {
    const text = await this.birdc(['show', 'route', 'table', family === 'ipv4' ? 'master4' : 'master6', 'count']);
    const m = /(\d+) of \d+ routes for (\d+) networks/.exec(text);
    return m ? Number(m[2]) : 0;
  }

  private async reconfigure(): Promise<void> {
    fs.writeFileSync(this.conf, this.config());
    if (!this.running) return;
    const out = await this.birdc(['configure']);
    if (!/Reconfigur|Reconfiguration in progress/.test(out)) throw new Error(`bird configure: ${out.trim()}`);
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    this.announced.set(ann.prefix, ann);
    await this.reconfigure();
  }

  async withdraw(prefix: string): Promise<void> {
    this.announced.delete(canonPrefix(prefix));
    await this.reconfigure();
  }

  protected async status(): Promise<string> {
    return this.birdc(['show', 'protocols', 'all'], false);
  }
}

/** Parses `birdc show protocols all NAME`. */
export function parseBirdProtocol(text: string): NeighborStatus {
  const m = /BGP state:\s+(\S+)/.exec(text);
  const err = /Last error:\s+(.+)/.exec(text);
  let state: SessionState = 'Unknown';
  if (m) state = normState(m[1]);
  else if (/^\S+\s+BGP\s+\S+\s+(down|start)\b/m.test(text)) state = 'Idle';
  return { state, lastError: err ? err[1].trim() : null, raw: text };
}

/** Names of BGP protocols in `birdc show protocols all` whose neighbour is in graceful restart (we are helper). */
export function parseBirdGrActive(text: string): Set<string> {
  const out = new Set<string>();
  let cur = '';
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s+BGP\s/.exec(line);
    if (m) cur = m[1];
    else if (cur && /Neighbor graceful restart active/.test(line)) out.add(cur);
  }
  return out;
}

/**
 * Parses `birdc show route all [table T]`. protoToNeighbor maps BGP protocol names to neighbour addresses;
 * routes of other protocols (static) have from = null.
 */
export function parseBirdRoutes(text: string, protoToNeighbor: Map<string, string> = new Map()): Route[] {
  const routes: Route[] = [];
  let prefix = '';
  let cur: (Route & { proto: string }) | null = null;
  const header = /^(\S+)?\s+(unicast|blackhole|unreachable|prohibit|multicast|recursive)?\s*\[(\S+)\s+[^\]]*?(?:\s+from\s+(\S+))?\]\s*(\*)?/;
  for (const line of text.split('\n')) {
    if (!line.trim() || /^(BIRD|Table)\b/.test(line)) continue;
    if (line.startsWith('\t')) {
      if (!cur) continue;
      const l = line.trim();
      let m: RegExpExecArray | null;
      if ((m = /^via\s+(\S+)/.exec(l))) cur.nexthops.push(canonAddr(m[1]));
      else if ((m = /^BGP\.origin:\s+(\S+)/.exec(l))) cur.origin = m[1].toLowerCase() as Route['origin'];
      else if ((m = /^BGP\.as_path:\s*(.*)$/.exec(l))) cur.asPath = (m[1].match(/\d+/g) ?? []).map(Number);
      else if ((m = /^BGP\.next_hop:\s+(.+)$/.exec(l))) {
        const hops = m[1].trim().split(/\s+/).map(canonAddr);
        if (!cur.nexthops.length) cur.nexthops.push(...hops);
        else for (const h of hops) if (!cur.nexthops.includes(h)) cur.nexthops.push(h);
        cur.nexthop = hops[0] ?? null;
      } else if ((m = /^BGP\.med:\s+(\d+)/.exec(l))) cur.med = Number(m[1]);
      else if ((m = /^BGP\.local_pref:\s+(\d+)/.exec(l))) cur.localPref = Number(m[1]);
      else if ((m = /^BGP\.community:\s+(.*)$/.exec(l))) {
        cur.communities = [...m[1].matchAll(/\((\d+),\s*(\d+)\)/g)].map((x) => `${x[1]}:${x[2]}`);
      } else if ((m = /^BGP\.large_community:\s+(.*)$/.exec(l))) {
        cur.largeCommunities = [...m[1].matchAll(/\((\d+),\s*(\d+),\s*(\d+)\)/g)].map((x) => `${x[1]}:${x[2]}:${x[3]}`);
      }
      continue;
    }
    const m = header.exec(line);
    if (!m) continue;
    if (m[1]) prefix = canonPrefix(m[1]);
    const proto = m[3];
    cur = {
      prefix, nexthop: null, nexthops: [], asPath: [], origin: null, med: null, localPref: null, communities: [],
      largeCommunities: [], from: protoToNeighbor.get(proto) ?? (m[4] ? canonAddr(m[4]) : null), best: m[5] === '*',
      stale: /\bstale\b/i.test(line), proto,
    };
    routes.push(cur);
  }
  return routes.map((x) => {
    const { proto: _p, ...r } = x as Route & { proto?: string };
    if (r.nexthop === null && r.nexthops.length) r.nexthop = r.nexthops[0];
    return r;
  });
}
