// Max-prefix per peer and family (RFC 4486 Cease subcode 1 with AFI/SAFI/limit in the data), the warning
// threshold, the restart timer, /peers status and per-kind error counts; plus the config checks. A raw peer sends
// the exact UPDATEs; the interop test (test/interop/maxprefix.test.ts) does the same against BIRD.
import t, { type Test } from 'tap';
import { Speaker } from '../../src/bgp/speaker.ts';
import type { Logger, SpeakerPeerConfig } from '../../src/bgp/speaker-config.ts';
import { MaxPrefixGuard, maxPrefixData, normMaxPrefixes } from '../../src/bgp/maxprefix.ts';
import { ConfigError, parseConfig } from '../../src/config/config.ts';
import { parsePrefix } from '../../src/net/ip.ts';
import { RawServer, defaultCaps, freePort, rawUpdate, waitFor } from './raw-peer.ts';

let PORT = 0;
t.before(async () => {
  PORT = await freePort();
});

const update = (attrs: number[], nlri: number[], mpReach: number[] = []): Buffer => rawUpdate([], [...mpReach, ...attrs], nlri);
const ATTRS = [0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xea, 0x40, 3, 4, 127, 0, 0, 2];
const v4 = (...thirds: number[]) => thirds.flatMap((c) => [24, 10, 5, c]);
/** MP_REACH_NLRI IPv6 with next hop ::ffff:127.0.0.2 and /48s fd00:<n>::/48. */
const mp6 = (...ns: number[]) => {
  const nlri = ns.flatMap((n) => [48, 0xfd, 0, n >> 8, n & 255, 0, 0]);
  const v = [0, 2, 1, 16, ...new Array(10).fill(0), 0xff, 0xff, 127, 0, 0, 2, 0, ...nlri];
  return [0x80, 14, v.length, ...v];
};

function capture(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const put = (level: string) => (msg: string) => void lines.push(`${level} ${msg}`);
  return { lines, log: { debug: () => {}, info: put('info'), warn: put('warn'), error: put('error') } };
}

async function setup(t: Test, extra: Partial<SpeakerPeerConfig>, log?: Logger) {
  const srv = await RawServer.listen('127.0.0.2', PORT);
  const s = new Speaker(
    { asn: 65001, routerId: '10.0.0.1', listen: { address: '127.0.0.1', port: PORT }, peers: [{ address: '127.0.0.2', asn: 65002, port: PORT, idleHold: 1, ...extra }] },
    { random: () => 0.5, logger: log },
  );
  t.teardown(async () => {
    await s.stop({ graceful: false });
    await srv.close();
  });
  await s.start();
  return { s, srv };
}

t.test('pure parts: limits normalised, RFC 4486 4 data, threshold once per session', async (t) => {
  t.same(normMaxPrefixes(100), { ipv4: 100, ipv6: 100, warningPercent: 75, restart: 60 }, 'a number: that limit for each family');
  t.same(normMaxPrefixes({ ipv6: 10, restart: 0 }), { ipv4: null, ipv6: 10, warningPercent: 75, restart: 0 });
  t.equal(normMaxPrefixes(undefined), null);
  t.throws(() => normMaxPrefixes(0), /maxPrefixes: must be an integer 1\.\.4294967295, got 0/);
  t.throws(() => normMaxPrefixes({ warningPercent: 50 }), /give ipv4 and\/or ipv6/);
  t.throws(() => normMaxPrefixes({ ipv4: 5, warningPercent: 150 }), /maxPrefixes\.warningPercent: must be 1\.\.100/);
  t.same([...maxPrefixData('ipv4', 1000)], [0, 1, 1, 0, 0, 3, 0xe8], 'AFI 1, SAFI 1, 4-octet limit');
  t.same([...maxPrefixData('ipv6', 0xfffffffe)], [0, 2, 1, 0xff, 0xff, 0xff, 0xfe]);

  const g = new MaxPrefixGuard(normMaxPrefixes({ ipv4: 10, warningPercent: 50 })!);
  const warnings: string[] = [];
  const w = (m: string) => void warnings.push(m);
  t.equal(g.check({ ipv4: 4, ipv6: 1000 }, ['ipv4', 'ipv6'], w), null, 'under the limit; ipv6 has none');
  t.equal(warnings.length, 0);
  t.equal(g.check({ ipv4: 5, ipv6: 0 }, ['ipv4'], w), null);
  t.equal(g.check({ ipv4: 9, ipv6: 0 }, ['ipv4'], w), null);
  t.equal(warnings.length, 1, 'warned once at 50%');
  t.equal(g.check({ ipv4: 10, ipv6: 0 }, ['ipv4'], w), null, 'at the limit is allowed');
  t.match(g.check({ ipv4: 11, ipv6: 0 }, ['ipv4'], w), { family: 'ipv4', limit: 10, count: 11, notification: { code: 6, subcode: 1 } });
  g.reset();
  g.check({ ipv4: 6, ipv6: 0 }, ['ipv4'], w);
  t.equal(warnings.length, 2, 'a new session warns again');
});

t.test('config: maxPrefixes accepted in both forms, bad values named by path', async (t) => {
  const cfg = (mp: string) => `bgp: { asn: 65001, routerId: 10.0.0.1, peers: [ { address: 10.0.0.2, asn: 65002, maxPrefixes: ${mp} } ] }`;
  t.equal(parseConfig(cfg('1000')).bgp!.peers[0].maxPrefixes, 1000);
  t.same(parseConfig(cfg('{ ipv4: 1000, ipv6: 50, warningPercent: 90, restart: 0 }')).bgp!.peers[0].maxPrefixes, { ipv4: 1000, ipv6: 50, warningPercent: 90, restart: 0 });
  t.equal(parseConfig('bgp: { asn: 65001, routerId: 10.0.0.1, peers: [ { address: 10.0.0.2, asn: 65002 } ] }').bgp!.peers[0].maxPrefixes, undefined);
  const issues = (mp: string) => {
    try {
      parseConfig(cfg(mp));
    } catch (e) {
      if (e instanceof ConfigError) return e.issues.map((i) => `${i.path}: ${i.message}`).join('\n');
      throw e;
    }
    return 'parsed';
  };
  t.match(issues('0'), /^bgp\.peers\[0\]\.maxPrefixes: /);
  t.match(issues('{ ipv4: -1 }'), /^bgp\.peers\[0\]\.maxPrefixes\.ipv4: /);
  t.match(issues('{ ipv4: 10, warningPercent: 0 }'), /^bgp\.peers\[0\]\.maxPrefixes\.warningPercent: /);
  t.match(issues('{ ipv4: 10, restart: 1.5 }'), /^bgp\.peers\[0\]\.maxPrefixes\.restart: /);
  t.match(issues('{ restart: 5 }'), /^bgp\.peers\[0\]\.maxPrefixes: give a limit for ipv4 and\/or ipv6/);
  t.match(issues('{ ipv4: 10, ipv5: 3 }'), /^bgp\.peers\[0\]\.maxPrefixes\.ipv5: /);
});

t.test('over the IPv4 limit: Cease/1 with AFI, SAFI, limit; routes dropped; restart after the timer', async (t) => {
  const { log, lines } = capture();
  const { s, srv } = await setup(t, { maxPrefixes: { ipv4: 4, warningPercent: 50, restart: 1 } }, log);
  const p = await srv.accepted(0);
  await p.establish({ asn: 65002, capabilities: defaultCaps(65002, ['ipv4']) });
  await waitFor(() => s.peers()[0].state === 'Established', 'Established');
  t.match(s.peers()[0].maxPrefixes, { limits: { ipv4: 4, ipv6: null }, warningPercent: 50, restart: 1, exceeded: null });

  p.send(update(ATTRS, v4(1, 2)));
  await waitFor(() => s.peers()[0].prefixes.received === 2, 'two routes');
  t.ok(lines.some((l) => l.startsWith('warn') && l.includes('2 ipv4 prefixes received, 50% warning threshold of the limit 4')), 'warning at 50%');
  p.send(update(ATTRS, v4(3, 4)));
  await waitFor(() => s.peers()[0].prefixes.received === 4, 'four routes: at the limit, still up');
  t.equal(s.peers()[0].state, 'Established');

  p.send(update(ATTRS, v4(5)));
  t.same(await p.notification(), { code: 6, subcode: 1, data: '00010100000004' }, 'Cease / Maximum Number of Prefixes Reached, AFI 1 SAFI 1 limit 4');
  await waitFor(() => s.peers()[0].state === 'Idle', 'session down');
  const st = s.peers()[0];
  t.equal(st.prefixes.received, 0, 'the peer\'s routes are dropped');
  t.notOk(s.rib.best(parsePrefix('10.5.1.0/24')));
  t.match(st.maxPrefixes?.exceeded, { family: 'ipv4', limit: 4, count: 5 });
  t.ok(st.maxPrefixes!.exceeded!.restartAt! > st.maxPrefixes!.exceeded!.at, 'restart time announced');
  t.match(st.lastError, /Maximum Number of Prefixes Reached/);
  t.same(st.errorCounts['max-prefix'], { ipv4: 1 });
  t.same(st.errorCounts['notification-sent'], { '6/1': 1 });

  // Held down: a connection from the peer meanwhile is refused; after 1 s the speaker connects again.
  const again = await srv.accepted(1, 10000);
  await again.establish({ asn: 65002, capabilities: defaultCaps(65002, ['ipv4']) });
  await waitFor(() => s.peers()[0].state === 'Established', 'Established again after the restart time');
  again.send(update(ATTRS, v4(1, 2, 3)));
  await waitFor(() => s.peers()[0].prefixes.received === 3, 'routes learned again');
  t.same(s.peers()[0].errorCounts['max-prefix'], { ipv4: 1 }, 'counts kept across sessions');
});

t.test('per family: the IPv6 limit counts only IPv6; restart 0 holds the session down', async (t) => {
  const { s, srv } = await setup(t, { families: ['ipv4', 'ipv6'], maxPrefixes: { ipv6: 2, restart: 0 } });
  const p = await srv.accepted(0);
  await p.establish({ asn: 65002 });
  await waitFor(() => s.peers()[0].state === 'Established', 'Established');
  p.send(update(ATTRS, v4(1, 2, 3, 4, 5, 6)));
  p.send(update(ATTRS.slice(0, 13), [], mp6(1, 2)));
  await waitFor(() => s.peers()[0].prefixes.received === 8, 'six IPv4 (no limit) and two IPv6 routes');
  t.equal(s.peers()[0].state, 'Established');
  p.send(update(ATTRS.slice(0, 13), [], mp6(3)));
  t.same(await p.notification(), { code: 6, subcode: 1, data: '00020100000002' }, 'AFI 2 SAFI 1 limit 2');
  await waitFor(() => s.peers()[0].state === 'Idle', 'down');
  t.match(s.peers()[0].maxPrefixes?.exceeded, { family: 'ipv6', limit: 2, count: 3, restartAt: null });
  t.same(s.peers()[0].errorCounts['max-prefix'], { ipv6: 1 });
});

t.test('per-kind error counts: RFC 7606 actions by attribute and NOTIFICATIONs received', async (t) => {
  const { s, srv } = await setup(t, {});
  const p = await srv.accepted(0);
  await p.establish({ asn: 65002, capabilities: defaultCaps(65002, ['ipv4']) });
  await waitFor(() => s.peers()[0].state === 'Established', 'Established');
  const badOrigin = [0x40, 1, 1, 7, ...ATTRS.slice(4)];
  const badAggregator = [...ATTRS, 0xc0, 7, 3, 0, 0, 0]; // length 3: attribute discard (RFC 7606 7.7)
  p.send(update(badOrigin, v4(1)), update(badOrigin, v4(2)), update(badAggregator, v4(3)));
  await waitFor(() => s.peers()[0].prefixes.received === 1, 'the AGGREGATOR route is used');
  t.same(s.peers()[0].errorCounts, { 'treat-as-withdraw': { ORIGIN: 2 }, 'attribute-discard': { AGGREGATOR: 1 } });
  p.send(Buffer.from([...new Array(16).fill(0xff), 0, 21, 3, 6, 4])); // NOTIFICATION Cease / Administrative Reset
  await waitFor(() => s.peers()[0].state !== 'Established', 'down');
  t.same(s.peers()[0].errorCounts['notification-received'], { '6/4': 1 });
});
