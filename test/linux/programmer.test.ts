// The Linux programmer against the real kernel, inside network namespaces this test creates (bs-linux-<pid>-<n>).
// Needs root and iproute2: skipped with the reason otherwise, a failure with REQUIRE_PEERS=1 (CI).
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { type IP, type Prefix, parseIP, parsePrefix } from '../../src/net/ip.ts';
import { type RemoteRoute, desiredRoutes, type LinuxRouteConfig } from '../../src/linux/desired.ts';
import { IpRouteProgrammer, IpCommandError } from '../../src/linux/programmer.ts';
import { LinuxReconciler } from '../../src/linux/reconcile.ts';
import { createNetns, netnsUnavailable, requireNetns, type TestNetns } from './netns.ts';

const P = parsePrefix;
const ip = parseIP;
const TABLE = 200;
const PROTO = 181;

/** A mutable scenario: own blocks and remote routes, turned into desired routes on every run. */
class Scenario {
  local: Prefix[] = [];
  remote: RemoteRoute[] = [];
  constructor(readonly cfg: LinuxRouteConfig) {}
  desired = () => desiredRoutes({ localBlocks: this.local, remote: this.remote }, this.cfg);
  via(prefix: string, nextHop: string, extra: Partial<RemoteRoute> = {}): this {
    this.remote = this.remote.filter((r) => r.prefix.toString() !== prefix);
    this.remote.push({ prefix: P(prefix), nextHop: ip(nextHop), ...extra });
    return this;
  }
}

function setup(t: Test, cfg: LinuxRouteConfig = {}): { ns: TestNetns; sc: Scenario; loop: LinuxReconciler; prog: IpRouteProgrammer } {
  const ns = createNetns();
  t.teardown(() => ns.remove());
  const full = { table: TABLE, protocol: PROTO, ...cfg };
  const prog = new IpRouteProgrammer({ table: full.table, protocol: full.protocol, netns: ns.name });
  const sc = new Scenario(full);
  // No start(): tests drive runs by hand; the loop's timing is covered in reconcile.test.ts.
  const loop = new LinuxReconciler({ programmer: prog, desired: sc.desired });
  return { ns, sc, loop, prog };
}

let fences = 0;

/** Netlink route events in the namespace while `fn` runs, fenced by two fresh sentinel routes in table 250. */
async function routeEventsDuring(ns: TestNetns, fn: () => Promise<unknown>): Promise<string[]> {
  const mon = spawn('ip', ['-n', ns.name, 'monitor', 'route'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  mon.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const fence = (): string => {
    const n = fences++;
    return `203.0.${113 + (n >> 8)}.${n & 255}`;
  };
  const waitFor = async (s: string): Promise<void> => {
    for (let i = 0; i < 200 && !out.includes(`${s} `); i++) await new Promise((r) => setTimeout(r, 10));
    if (!out.includes(`${s} `)) throw new Error(`ip monitor never showed ${s}`);
  };
  try {
    // The monitor subscribes asynchronously: add fences until it reports one.
    let first = '';
    for (let i = 0; i < 50 && (first === '' || !out.includes(`${first} `)); i++) {
      first = fence();
      ns.ip('route', 'add', first, 'dev', ns.dev, 'table', '250');
      await new Promise((r) => setTimeout(r, 20));
    }
    await waitFor(first);
    const start = out.indexOf(`${first} `);
    await fn();
    const last = fence();
    ns.ip('route', 'add', last, 'dev', ns.dev, 'table', '250');
    await waitFor(last);
    const between = out.slice(start, out.indexOf(`${last} `));
    return between.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.includes('table 250'));
  } finally {
    mon.kill();
  }
}

function run(): void {
  t.test('own blocks become blackholes, remote blocks and borrowed /32s go via their next hop', async (t) => {
    const { ns, sc, loop } = setup(t);
    sc.local = [P('10.0.123.0/26'), P('10.0.200.0/26'), P('10.0.77.9/32'), P('fd00:10::/64'), P('fd00:10:1::7/128')];
    sc.via('10.0.1.0/26', '192.0.2.9').via('10.0.123.9/32', '192.0.2.10')
      .via('fd00:11::/64', '2001:db8::9').via('fd00:12::5/128', '2001:db8::a');
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? "ok");
    t.same(r.planned, { add: 7, replace: 0, delete: 0 });
    t.same(ns.routes(TABLE), [
      '10.0.1.0/26 via 192.0.2.9 dev bs0 proto 181',
      '10.0.123.9 via 192.0.2.10 dev bs0 proto 181',
      'blackhole 10.0.123.0/26 proto 181',
      'blackhole 10.0.200.0/26 proto 181',
    ], 'IPv4: no blackhole for the /32 block; the borrowed /32 inside our block goes to its holder');
    t.same(ns.routes(TABLE, 6), [
      'blackhole fd00:10::/64 dev lo proto 181 metric 1024 pref medium',
      'fd00:11::/64 via 2001:db8::9 dev bs0 proto 181 metric 1024 pref medium',
      'fd00:12::5 via 2001:db8::a dev bs0 proto 181 metric 1024 pref medium',
    ]);
    t.same(ns.routes('main'), [
      '192.0.2.0/24 dev bs0 proto kernel scope link src 192.0.2.1',
    ], 'the main table is untouched');

    // A second run plans nothing and the kernel sees no route message at all: nothing was re-sent.
    let again: Awaited<ReturnType<typeof loop.runOnce>> | undefined;
    const events = await routeEventsDuring(ns, async () => (again = await loop.runOnce()));
    t.ok(again!.ok);
    t.same(again!.planned, { add: 0, replace: 0, delete: 0 });
    t.equal(again!.unchanged, 7);
    t.same(events, [], 'no netlink route events during the no-op run');
    // Control: the same fence does see a real change.
    sc.via('10.0.1.0/26', '192.0.2.20');
    const seen = await routeEventsDuring(ns, () => loop.runOnce());
    t.same(seen, ['10.0.1.0/26 via 192.0.2.20 dev bs0 table 200 proto 181'], 'a replace is one route message');
  });

  t.test('removals remove only ours: foreign protocol, same-key conflicts and other tables survive', async (t) => {
    const { ns, sc, loop } = setup(t);
    // Foreign: another protocol in our table, one of them on a key we will want; our protocol in another table.
    ns.ip('route', 'add', '10.9.0.0/24', 'dev', ns.dev, 'table', String(TABLE), 'proto', 'static');
    ns.ip('route', 'add', '10.0.5.0/26', 'via', '192.0.2.50', 'table', String(TABLE), 'proto', 'bird');
    ns.ip('-6', 'route', 'add', 'fd00:99::/64', 'via', '2001:db8::50', 'table', String(TABLE), 'proto', '186');
    ns.ip('route', 'add', 'blackhole', '10.0.6.0/26', 'table', '201', 'proto', String(PROTO));
    sc.local = [P('10.0.4.0/26'), P('fd00:10::/64')];
    sc.via('10.0.5.0/26', '192.0.2.9').via('10.0.7.0/26', '192.0.2.9').via('fd00:99::/64', '2001:db8::9');
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? "ok");
    t.equal(r.conflictCount, 2, 'two desired keys are held by foreign routes');
    t.match(r.conflicts.join('\n'), /10\.0\.5\.0\/26 via 192\.0\.2\.9 .*key held by 10\.0\.5\.0\/26 via 192\.0\.2\.50 .*proto 12/);
    t.same(ns.routes(TABLE), [
      '10.0.5.0/26 via 192.0.2.50 dev bs0 proto bird',
      '10.0.7.0/26 via 192.0.2.9 dev bs0 proto 181',
      '10.9.0.0/24 dev bs0 proto static scope link',
      'blackhole 10.0.4.0/26 proto 181',
    ]);

    // Everything goes away: ours are deleted, nothing else is.
    sc.local = [];
    sc.remote = [];
    const gone = await loop.runOnce();
    t.ok(gone.ok, gone.error ?? "ok");
    t.same(gone.planned, { add: 0, replace: 0, delete: 3 });
    t.same(ns.routes(TABLE), [
      '10.0.5.0/26 via 192.0.2.50 dev bs0 proto bird',
      '10.9.0.0/24 dev bs0 proto static scope link',
    ]);
    t.same(ns.routes(TABLE, 6), ['fd00:99::/64 via 2001:db8::50 dev bs0 proto bgp metric 1024 pref medium']);
    t.same(ns.routes(201), ['blackhole 10.0.6.0/26 proto 181'], 'our protocol in another table is not ours');
  });

  t.test('a remote block moving to another next hop is replaced in place; a block changing hands too', async (t) => {
    const { ns, sc, loop } = setup(t);
    sc.local = [P('10.0.8.0/26'), P('fd00:8::/64')];
    sc.via('10.0.9.0/26', '192.0.2.9').via('fd00:9::/64', '2001:db8::9');
    t.ok((await loop.runOnce()).ok);
    sc.via('10.0.9.0/26', '192.0.2.10').via('fd00:9::/64', '2001:db8::10');
    // The block 10.0.8.0/26 was released by us and claimed by another host; fd00:8::/64 likewise.
    sc.local = [];
    sc.via('10.0.8.0/26', '192.0.2.11').via('fd00:8::/64', '2001:db8::11');
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? "ok");
    t.same(r.planned, { add: 0, replace: 4, delete: 0 }, 'one replace per changed route, no delete+add gap');
    t.same(ns.routes(TABLE), ['10.0.8.0/26 via 192.0.2.11 dev bs0 proto 181', '10.0.9.0/26 via 192.0.2.10 dev bs0 proto 181']);
    t.same(ns.routes(TABLE, 6), [
      'fd00:8::/64 via 2001:db8::11 dev bs0 proto 181 metric 1024 pref medium',
      'fd00:9::/64 via 2001:db8::10 dev bs0 proto 181 metric 1024 pref medium',
    ]);
  });

  t.test('devices, onlink, link-local and RFC 8950 next hops; metric', async (t) => {
    const { ns, sc, loop } = setup(t, { metric: 50 });
    sc.via('10.1.0.0/26', '198.51.100.1', { dev: 'bs0', onlink: true });
    sc.via('10.1.1.0/26', '192.0.2.9', { dev: 'bs0' });
    sc.via('fd00:20::/64', 'fe80::1', { dev: 'bs0' });
    sc.via('10.1.2.0/26', '2001:db8::9');
    sc.via('fd00:21::/64', 'fe80::2'); // no device: skipped, not an error
    sc.local = [P('10.1.3.0/26')];
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? "ok");
    t.equal(r.skippedCount, 1);
    t.match(r.skipped[0], /fd00:21::\/64 via fe80::2: a link-local next hop needs a device/);
    t.same(ns.routes(TABLE), [
      '10.1.0.0/26 via 198.51.100.1 dev bs0 proto 181 metric 50 onlink',
      '10.1.1.0/26 via 192.0.2.9 dev bs0 proto 181 metric 50',
      '10.1.2.0/26 via inet6 2001:db8::9 dev bs0 proto 181 metric 50',
      'blackhole 10.1.3.0/26 proto 181 metric 50',
    ]);
    t.same(ns.routes(TABLE, 6), ['fd00:20::/64 via fe80::1 dev bs0 proto 181 metric 50 pref medium']);
    t.same((await loop.runOnce()).planned, { add: 0, replace: 0, delete: 0 }, 'stable with all the options');
  });

  t.test('a refused route is reported by name and the rest of the batch still goes in', async (t) => {
    const { ns, sc, loop } = setup(t);
    sc.via('10.2.0.0/26', '192.0.2.9');
    sc.via('10.2.1.0/26', '198.51.100.1'); // not on a connected subnet and not onlink: the kernel refuses it
    sc.via('10.2.2.0/26', '192.0.2.9');
    sc.via('fd00:30::/64', '2001:db8:ffff::1'); // unreachable IPv6 gateway
    const r = await loop.runOnce();
    t.notOk(r.ok);
    t.equal(r.failedCount, 2);
    t.match(r.failed[0], /^add 10\.2\.1\.0\/26 via 198\.51\.100\.1 table 200 proto 181 metric 0: .*(invalid gateway|unreachable)/i);
    t.match(r.failed[1], /^add fd00:30::\/64 via 2001:db8:ffff::1 .*: /);
    t.match(r.error, /2 of 4 route ops failed/);
    t.same(ns.routes(TABLE), ['10.2.0.0/26 via 192.0.2.9 dev bs0 proto 181', '10.2.2.0/26 via 192.0.2.9 dev bs0 proto 181']);
    t.equal(loop.status().consecutiveFailures, 1);
    t.match(loop.status().lastError, { message: /10\.2\.1\.0\/26/ });

    // Fixed (onlink via the device) and the IPv6 one withdrawn: the next run succeeds.
    sc.via('10.2.1.0/26', '198.51.100.1', { dev: 'bs0', onlink: true });
    sc.remote = sc.remote.filter((x) => x.prefix.family === 4);
    const ok = await loop.runOnce();
    t.ok(ok.ok, ok.error ?? "ok");
    t.same(ok.planned, { add: 1, replace: 0, delete: 0 });
    t.equal(loop.status().consecutiveFailures, 0);
  });

  t.test('drift: routes removed or changed behind our back are repaired and recorded', async (t) => {
    const { ns, sc, loop } = setup(t);
    sc.local = [P('10.3.0.0/26')];
    sc.via('10.3.1.0/26', '192.0.2.9').via('fd00:40::/64', '2001:db8::9');
    t.ok((await loop.runOnce()).ok);
    ns.ip('route', 'del', '10.3.0.0/26', 'table', String(TABLE));
    ns.ip('route', 'replace', '10.3.1.0/26', 'via', '192.0.2.66', 'table', String(TABLE), 'proto', String(PROTO));
    ns.ip('-6', 'route', 'flush', 'table', String(TABLE));
    const r = await loop.runOnce('interval');
    t.ok(r.ok, r.error ?? "ok");
    t.equal(r.drift, 3);
    t.same(r.planned, { add: 2, replace: 1, delete: 0 });
    t.match(loop.status(), { driftRepairs: 1, lastDrift: { ops: 3 } });
    t.same(ns.routes(TABLE), ['10.3.1.0/26 via 192.0.2.9 dev bs0 proto 181', 'blackhole 10.3.0.0/26 proto 181']);
  });

  t.test('policy rules for a dedicated table: pod routes in main win, our routes beat main\'s default', async (t) => {
    const ns = createNetns();
    t.teardown(() => ns.remove());
    const prog = new IpRouteProgrammer({ table: TABLE, protocol: PROTO, netns: ns.name, rulePriority: 1000 });
    const sc = new Scenario({ table: TABLE, protocol: PROTO });
    const loop = new LinuxReconciler({ programmer: prog, desired: sc.desired });
    ns.ip('route', 'add', 'default', 'via', '192.0.2.254');
    ns.ip('route', 'add', '10.0.123.5/32', 'dev', 'bs1'); // a pod in our block, as CNI adds it
    ns.ip('rule', 'add', 'pref', '1000', 'lookup', '123'); // foreign rule at our priority
    ns.ip('rule', 'add', 'pref', '500', 'lookup', '77', 'proto', String(PROTO)); // ours, stale
    sc.local = [P('10.0.123.0/26')];
    sc.via('10.0.1.0/26', '192.0.2.9');
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? 'ok');
    const rules = (fam: 4 | 6) => ns.ip(`-${fam}`, 'rule', 'show').split('\n').map((l) => l.trim()).filter(Boolean);
    t.same(rules(4), [
      '0:\tfrom all lookup local',
      '1000:\tfrom all lookup 123',
      '1000:\tfrom all lookup main suppress_prefixlength 0 proto 181',
      '1001:\tfrom all lookup 200 proto 181',
      '32766:\tfrom all lookup main',
      '32767:\tfrom all lookup default',
    ], 'ours added, the stale one of ours removed, the foreign one kept');
    t.same(rules(6), [
      '0:\tfrom all lookup local',
      '1000:\tfrom all lookup main suppress_prefixlength 0 proto 181',
      '1001:\tfrom all lookup 200 proto 181',
      '32766:\tfrom all lookup main',
    ]);
    t.same(await prog.ensureRules(), [], 'idempotent');
    ns.ip('rule', 'del', 'pref', '1000', 'lookup', '123');
    const get = (a: string): string => {
      try {
        return ns.ip('route', 'get', a).split('\n')[0].trim();
      } catch (err) {
        return (err as Error).message.replace(/^.*: /, '');
      }
    };
    t.match(get('10.0.123.5'), /^10\.0\.123\.5 dev bs1 /, 'the pod route in main beats our blackhole');
    t.match(get('10.0.123.6'), /Invalid argument/, 'a free address in our block is blackholed');
    t.match(get('10.0.1.1'), /^10\.0\.1\.1 via 192\.0\.2\.9 dev bs0 table 200 /, 'a remote block beats main\'s default');
    t.match(get('8.8.8.8'), /^8\.8\.8\.8 via 192\.0\.2\.254 /);
    ns.ip('-6', 'rule', 'del', 'pref', '1001', 'lookup', '200');
    const again = await loop.runOnce('interval');
    t.ok(again.ok);
    t.same(rules(6).filter((l) => l.startsWith('1001:')), ['1001:\tfrom all lookup 200 proto 181'], 'a lost rule is re-added');
    t.throws(() => new IpRouteProgrammer({ table: 254, protocol: PROTO, rulePriority: 1000 }), /other than main/);
    t.throws(() => new IpRouteProgrammer({ table: TABLE, protocol: PROTO, rulePriority: 32765 }), RangeError);
  });

  t.test('ip failures (no such namespace) fail the run with the reason, no routes are assumed', async (t) => {
    const prog = new IpRouteProgrammer({ table: TABLE, protocol: PROTO, netns: `bs-linux-${process.pid}-missing` });
    await t.rejects(prog.read(), IpCommandError);
    const loop = new LinuxReconciler({ programmer: prog, desired: () => ({ routes: [], skipped: [] }) });
    const r = await loop.runOnce();
    t.notOk(r.ok);
    t.match(r.error, /bs-linux-\d+-missing/);
  });

  t.test('many routes in one batch (3,000 per family) and a clean withdrawal', async (t) => {
    const { ns, sc, loop } = setup(t);
    const nh: IP = ip('192.0.2.9');
    for (let i = 0; i < 3000; i++) {
      sc.remote.push({ prefix: P(`10.${64 + (i >> 8)}.${i & 255}.0/24`), nextHop: nh });
      sc.remote.push({ prefix: P(`fd00:50:${i.toString(16)}::/64`), nextHop: ip('2001:db8::9') });
    }
    const r = await loop.runOnce();
    t.ok(r.ok, r.error ?? "ok");
    t.equal(r.planned.add, 6000);
    t.equal(ns.routes(TABLE).length, 3000);
    t.equal(ns.routes(TABLE, 6).length, 3000);
    t.same((await loop.runOnce()).planned, { add: 0, replace: 0, delete: 0 });
    sc.remote = [];
    const w = await loop.runOnce();
    t.equal(w.planned.delete, 6000);
    t.same(ns.routes(TABLE), []);
    t.same(ns.routes(TABLE, 6), []);
  });
}

const why = netnsUnavailable();
if (why) {
  if (requireNetns()) t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else t.plan(0, `skipping: ${why} (set REQUIRE_PEERS=1 to make this a failure)`);
} else {
  run();
}
