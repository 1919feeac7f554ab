// FRR as an interop peer: zebra, bgpd and (for BFD) bfdd in the namespace as user frr, their configs, vtysh
// queries, and the normalisation of bgpd's JSON routes.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { alive, BasePeer } from './base-peer.ts';
import { exec } from './netns.ts';
import { canonAddr, canonPrefix, familyOf, grTime, isUnspecified, keepaliveFor, neighborFamilies, normAnnouncement, normState } from './normalise.ts';
import { bfdOf, type Announcement, type Family, type NeighborOptions, type NeighborStatus, type Route } from './peer-types.ts';
import { BIN, frrUser } from './prereqs.ts';

// FRR
//
// Command lines (all inside the namespace, foreground, private paths; DIR owned by user frr):
//   ip netns exec NS /usr/lib/frr/zebra -f DIR/zebra.conf -i DIR/zebra.pid -z DIR/zserv.api --vty_socket DIR
//        -A 127.0.0.1 -P 0 --log file:DIR/zebra.log --limit-fds 1024
//   ip netns exec NS /usr/lib/frr/bgpd  -f DIR/bgpd.conf  -i DIR/bgpd.pid  -z DIR/zserv.api --vty_socket DIR
//        -A 127.0.0.1 -P 0 --log file:DIR/bgpd.log --limit-fds 1024
//   vtysh --vty_socket DIR -d bgpd -c 'show bgp summary json'      (unix socket: no netns exec needed)
//  - `-u root -g root` fails: "privs_init: user(root) is not part of vty group specified(frrvty)"; so the daemons
//    keep their default user frr and DIR is chowned to frr.
//  - bgpd wants zebra: without it (-Z) it knows no interfaces, so direct eBGP neighbours fail the connected check.
//  - FRR 8 defaults that block a plain test: `bgp ebgp-requires-policy` (nothing is sent or accepted on eBGP
//    without route-maps) and `bgp network import-check` (a `network` must exist in the RIB); both turned off, and
//    `no bgp default ipv4-unicast` so every neighbour gets only the families it is given.
//  - `show bgp ipv4 unicast json detail` gives per-path attributes (communities, aspath segments); the first
//    element of each prefix's array is a header, not a path.
//  - -P 0 stops the TCP vty listeners (2601/2605); --limit-fds keeps it from sizing tables by a huge ulimit.
//  - a SIGKILLed daemon leaves /var/tmp/frr/<daemon>.<pid>/ behind; it is removed here.

export class FrrPeer extends BasePeer {
  readonly kind = 'frr' as const;
  private get frrDir() { return path.join(this.dir, 'frr'); }

  private bgpdConfig(): string {
    const o = this.options;
    const out: string[] = ['frr defaults traditional', `hostname ${this.name}`, '!', `router bgp ${o.asn}`,
      ` bgp router-id ${o.routerId}`, ' no bgp ebgp-requires-policy', ' no bgp default ipv4-unicast',
      ' no bgp network import-check'];
    const grNeighbors = o.neighbors.filter((n) => n.gracefulRestart);
    if (grNeighbors.length) {
      // preserve-fw-state sets the F bit; without it a helper (BIRD) flushes our routes when bgpd dies
      out.push(' bgp graceful-restart', ' bgp graceful-restart preserve-fw-state');
      const t = grNeighbors.map(grTime).find((x) => x !== undefined);
      if (t !== undefined) out.push(` bgp graceful-restart restart-time ${t}`);
    }
    for (const n of o.neighbors) {
      const a = n.address;
      out.push(` neighbor ${a} remote-as ${n.asn}`, ` neighbor ${a} timers connect 1`, ` neighbor ${a} advertisement-interval 0`);
      if (n.holdTime !== undefined) out.push(` neighbor ${a} timers ${keepaliveFor(n.holdTime)} ${n.holdTime}`);
      if (n.passive) out.push(` neighbor ${a} passive`);
      if (n.port) out.push(` neighbor ${a} port ${n.port}`);
      if (n.password !== undefined) out.push(` neighbor ${a} password ${n.password}`);
      if (n.ttlSecurity !== undefined) out.push(` neighbor ${a} ttl-security hops ${n.ttlSecurity}`);
      if (n.gracefulRestart === false) out.push(` neighbor ${a} graceful-restart-disable`);
      if (bfdOf(n)) out.push(` neighbor ${a} bfd`, ` neighbor ${a} bfd profile ${this.bfdProfile(n)}`);
    }
    for (const fam of ['ipv4', 'ipv6'] as const) {
      out.push(` address-family ${fam} unicast`);
      for (const a of this.announced.values()) {
        if (familyOf(a.prefix) === fam) out.push(`  network ${a.prefix}${this.hasAttrs(a) ? ` route-map ${this.rmName(a.prefix)}` : ''}`);
      }
      for (const n of o.neighbors) if (neighborFamilies(n).includes(fam)) out.push(`  neighbor ${n.address} activate`);
      out.push(' exit-address-family');
    }
    out.push('!');
    for (const a of this.announced.values()) if (this.hasAttrs(a)) out.push(...this.routeMap(a), '!');
    return `${out.join('\n')}\n`;
  }

  private bfdProfile(n: NeighborOptions): string {
    const b = bfdOf(n)!;
    return `bs-${b.minRx}-${b.minTx}-${b.multiplier}`;
  }

  /** bfdd's profiles, one per distinct parameter set of the neighbours. */
  private bfddConfig(): string {
    const out = ['frr defaults traditional', `hostname ${this.name}`, '!', 'bfd'];
    const seen = new Set<string>();
    for (const n of this.options.neighbors) {
      const b = bfdOf(n);
      if (!b || seen.has(this.bfdProfile(n))) continue;
      seen.add(this.bfdProfile(n));
      out.push(` profile ${this.bfdProfile(n)}`, `  receive-interval ${b.minRx}`, `  transmit-interval ${b.minTx}`,
        `  detect-multiplier ${b.multiplier}`, ' !');
    }
    out.push('!');
    return `${out.join('\n')}\n`;
  }

  private get wantsBfd(): boolean {
    return this.options.neighbors.some((n) => bfdOf(n));
  }

  private hasAttrs(a: Announcement): boolean {
    return !!(a.communities?.length || a.largeCommunities?.length || a.med !== undefined);
  }
  private rmName(prefix: string): string {
    return `bs-ann-${prefix.replace(/[^0-9a-f]/gi, '-')}`;
  }
  private routeMap(a: Announcement): string[] {
    const out = [`route-map ${this.rmName(a.prefix)} permit 10`];
    if (a.communities?.length) out.push(` set community ${a.communities.join(' ')}`);
    if (a.largeCommunities?.length) out.push(` set large-community ${a.largeCommunities.join(' ')}`);
    if (a.med !== undefined) out.push(` set metric ${a.med}`);
    return out;
  }

  protected logFiles(): string[] {
    return ['zebra.out', 'zebra.log', 'bgpd.out', 'bgpd.log', ...(this.wantsBfd ? ['bfdd.out', 'bfdd.log'] : [])].map((f) => path.join(this.frrDir, f));
  }

  private daemonArgs(d: 'zebra' | 'bgpd' | 'bfdd'): string[] {
    const D = this.frrDir;
    return ['-f', path.join(D, `${d}.conf`), '-i', path.join(D, `${d}.pid`), '-z', path.join(D, 'zserv.api'),
      '--vty_socket', D, '-A', '127.0.0.1', '-P', '0', '--log', `file:${path.join(D, `${d}.log`)}`, '--limit-fds', '1024'];
  }

  async start(_recovery = false): Promise<void> {
    const D = this.frrDir;
    const user = frrUser();
    if (!user) throw new Error('user frr not found: apt-get install frr');
    fs.mkdirSync(D, { recursive: true });
    fs.writeFileSync(path.join(D, 'bgpd.conf'), this.bgpdConfig());
    if (!fs.existsSync(path.join(D, 'zebra.conf'))) fs.writeFileSync(path.join(D, 'zebra.conf'), `hostname ${this.name}\n!\n`);
    for (const f of ['zebra.log', 'bgpd.log', 'zebra.out', 'bgpd.out']) fs.appendFileSync(path.join(D, f), '');
    for (const f of ['', ...fs.readdirSync(D)]) fs.chownSync(path.join(D, f), user.uid, user.gid);
    const zebra = this.procs.get('zebra');
    if (!zebra || !alive(zebra)) {
      fs.rmSync(path.join(D, 'zserv.api'), { force: true });
      this.spawnDaemon('zebra', BIN.zebra, this.daemonArgs('zebra'), path.join(D, 'zebra.out'));
      await this.waitReady(`zebra ${this.name}`, async () => fs.existsSync(path.join(D, 'zserv.api')));
    }
    const bfdd = this.procs.get('bfdd');
    if (this.wantsBfd && (!bfdd || !alive(bfdd))) {
      // bfdd before bgpd: bgpd registers its BFD sessions through zebra, bfdd must be there to take them
      fs.writeFileSync(path.join(D, 'bfdd.conf'), this.bfddConfig());
      for (const f of ['bfdd.conf', 'bfdd.log', 'bfdd.out']) {
        fs.appendFileSync(path.join(D, f), '');
        fs.chownSync(path.join(D, f), user.uid, user.gid);
      }
      fs.rmSync(path.join(D, 'bfdd.vty'), { force: true });
      this.spawnDaemon('bfdd', BIN.bfdd, [...this.daemonArgs('bfdd'), '--bfdctl', path.join(D, 'bfdd.sock')], path.join(D, 'bfdd.out'));
      await this.waitReady(`bfdd ${this.name}`, async () => fs.existsSync(path.join(D, 'bfdd.vty')));
    }
    fs.rmSync(path.join(D, 'bgpd.vty'), { force: true });
    this.spawnDaemon('bgpd', BIN.bgpd, this.daemonArgs('bgpd'), path.join(D, 'bgpd.out'));
    await this.waitReady(`bgpd ${this.name}`, async () =>
      fs.existsSync(path.join(D, 'bgpd.vty')) && (await this.vtysh(['show bgp summary json'], false)).includes('{'));
  }

  /** Runs vtysh commands against this instance's bgpd; throws on an error line ("% ...") when check is set. */
  async vtysh(cmds: string[], check = true): Promise<string> {
    const args = ['--vty_socket', this.frrDir, '-d', 'bgpd'];
    for (const c of cmds) args.push('-c', c);
    const r = await exec(BIN.vtysh, args, { check: false });
    const text = r.stdout + r.stderr;
    if (check && (r.code !== 0 || /^%/m.test(text))) throw new Error(`vtysh ${cmds.join(' ; ')}: ${text.trim()}`);
    return r.stdout;
  }

  async neighbor(addr: string): Promise<NeighborStatus> {
    const j = JSON.parse(await this.vtysh([`show bgp neighbors ${addr} json`])) as Record<string, FrrNeighbor>;
    const nb = j[addr] ?? Object.values(j).find((v) => typeof v === 'object' && v && 'bgpState' in v);
    if (!nb) return { state: 'Unknown', lastError: `neighbour ${addr} not configured`, raw: j };
    return {
      state: normState(nb.bgpState ?? ''),
      lastError: nb.lastNotificationReason ?? nb.lastResetDueTo ?? null,
      raw: nb,
    };
  }

  async routes(family: Family): Promise<Route[]> {
    const text = await this.vtysh([`show bgp ${family} unicast json detail`]);
    return normalizeFrrRoutes(JSON.parse(text || '{}'));
  }

  async routeCount(family: Family): Promise<number> {
    const j = JSON.parse(await this.vtysh([`show bgp ${family} unicast summary json`]) || '{}') as Record<string, unknown>;
    if (typeof j.ribCount === 'number') return j.ribCount;
    const inner = Object.values(j).find((v) => typeof v === 'object' && v !== null && 'ribCount' in v) as { ribCount?: number } | undefined;
    return inner?.ribCount ?? 0;
  }

  private async configure(lines: string[]): Promise<void> {
    fs.writeFileSync(path.join(this.frrDir, 'bgpd.conf'), this.bgpdConfig());
    if (this.procs.get('bgpd') && alive(this.procs.get('bgpd')!)) await this.vtysh(['configure terminal', ...lines]);
  }

  async announce(a: string | Announcement): Promise<void> {
    const ann = normAnnouncement(a);
    this.announced.set(ann.prefix, ann);
    const lines = this.hasAttrs(ann) ? [...this.routeMap(ann), 'exit'] : [];
    lines.push(`router bgp ${this.options.asn}`, `address-family ${familyOf(ann.prefix)} unicast`,
      `network ${ann.prefix}${this.hasAttrs(ann) ? ` route-map ${this.rmName(ann.prefix)}` : ''}`);
    await this.configure(lines);
  }

  async withdraw(prefix: string): Promise<void> {
    const p = canonPrefix(prefix);
    this.announced.delete(p);
    await this.configure([`router bgp ${this.options.asn}`, `address-family ${familyOf(p)} unicast`, `no network ${p}`]);
  }

  /** kill(): SIGKILL bgpd only; zebra stays (like a crashed bgpd on a real router). stop() stops both. */
  override async kill(): Promise<void> {
    await this.stopProc('bgpd', 'SIGKILL');
  }

  override async dispose(): Promise<void> {
    await this.stopProc('bgpd', 'SIGKILL');
    await this.stopProc('bfdd', 'SIGKILL');
    await this.stopProc('zebra', 'SIGKILL');
  }

  override get running(): boolean {
    const b = this.procs.get('bgpd');
    return !!b && alive(b);
  }

  protected override afterExit(key: string, pid: number | undefined): void {
    if (pid) fs.rmSync(`/var/tmp/frr/${key}.${pid}`, { recursive: true, force: true });
  }

  protected async status(): Promise<string> {
    return this.vtysh(['show bgp summary', 'show bgp ipv4 unicast', 'show bgp ipv6 unicast'], false);
  }
}

interface FrrNeighbor {
  bgpState?: string;
  lastNotificationReason?: string;
  lastResetDueTo?: string;
}

interface FrrPath {
  aspath?: { string?: string; segments?: { type: string; list: number[] }[] };
  origin?: string;
  med?: number;
  metric?: number;
  locPrf?: number;
  localpref?: number;
  community?: { string?: string; list?: string[] };
  largeCommunity?: { string?: string; list?: string[] };
  valid?: boolean;
  bestpath?: { overall?: boolean } | boolean;
  stale?: boolean;
  local?: boolean;
  sourced?: boolean;
  nexthops?: { ip?: string; scope?: string; used?: boolean }[];
  peer?: { peerId?: string };
  peerId?: string;
}

/** Normalises `show bgp FAMILY unicast json detail` (also accepts the non-detail form). */
export function normalizeFrrRoutes(j: { routes?: Record<string, FrrPath[]> }): Route[] {
  const out: Route[] = [];
  for (const [pfx, entries] of Object.entries(j.routes ?? {})) {
    for (const p of entries ?? []) {
      if (!p || !('nexthops' in p || 'aspath' in p || 'path' in p)) continue; // the per-prefix header
      const peerId = p.peer?.peerId ?? p.peerId;
      const local = !!(p.local || p.sourced) || !peerId || peerId === '(unspec)' || isUnspecified(peerId);
      const nexthops = (p.nexthops ?? []).map((n) => n.ip ?? '').filter((ip) => !isUnspecified(ip)).map(canonAddr);
      const segs = p.aspath?.segments;
      const asPath = segs
        ? segs.flatMap((s) => s.list)
        : ((p.aspath?.string ?? (p as { path?: string }).path ?? '').match(/\d+/g) ?? []).map(Number);
      const comm = p.community?.string ?? '';
      const large = p.largeCommunity?.string ?? '';
      const origin = (p.origin ?? '').toLowerCase();
      out.push({
        prefix: canonPrefix(pfx),
        nexthop: nexthops[0] ?? null,
        nexthops,
        asPath,
        origin: origin === 'igp' || origin === 'egp' || origin === 'incomplete' ? origin : null,
        med: p.metric ?? p.med ?? null,
        localPref: p.locPrf ?? p.localpref ?? null,
        communities: comm ? comm.split(/\s+/).filter((c) => /^\d+:\d+$/.test(c)) : [],
        largeCommunities: large ? large.split(/\s+/).filter(Boolean) : [],
        from: local ? null : canonAddr(peerId!),
        best: typeof p.bestpath === 'object' ? !!p.bestpath.overall : !!p.bestpath,
        stale: !!p.stale,
      });
    }
  }
  return out;
}
