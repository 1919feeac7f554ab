// Proves the interop harness against the real daemons: BIRD <-> GoBGP and FRR <-> BIRD in namespaces joined by
// veth. Skips without root/packages unless REQUIRE_PEERS=1 (CI), where that is a failure.
import t from 'tap';
import { parseBirdRoutes, parseBirdProtocol } from '../kit/interop/bird-peer.ts';
import { normalizeFrrRoutes } from '../kit/interop/frr-peer.ts';
import { interopGate, gateDecision } from '../kit/interop/gate.ts';
import { isDialTimeout, normalizeGobgpRib, retryDialTimeouts } from '../kit/interop/gobgp-peer.ts';
import { createLink, exec } from '../kit/interop/netns.ts';
import { BIN } from '../kit/interop/prereqs.ts';
import { startPeer } from '../kit/interop/start-peer.ts';
import { waitFor } from '../kit/interop/wait-for.ts';

t.test('parsers and gate (no daemons)', async (t) => {
  const bird = [
    'BIRD 2.0.12 ready.',
    'Table master4:',
    '10.2.0.0/24          unicast [nb1 18:59:49.524] * (100) [AS65002?]',
    '\tvia 10.255.1.2 on eth9',
    '\tType: BGP univ',
    '\tBGP.origin: Incomplete',
    '\tBGP.as_path: 65002 4200000001',
    '\tBGP.next_hop: 10.255.1.2',
    '\tBGP.med: 5',
    '\tBGP.local_pref: 100',
    '\tBGP.community: (65002,7) (65002,8)',
    '\tBGP.large_community: (65002, 1, 2)',
    '                     unicast [nb2 18:59:50.000] (100) [AS65003i]',
    '\tvia 10.255.2.2 on eth8',
    '\tBGP.as_path: 65003',
    '10.1.0.0/24          blackhole [static4 18:59:43.128] * (200)',
    '\tType: static univ',
  ].join('\n');
  const rs = parseBirdRoutes(bird, new Map([['nb1', '10.255.1.2'], ['nb2', '10.255.2.2']]));
  t.equal(rs.length, 3);
  t.match(rs[0], {
    prefix: '10.2.0.0/24', nexthop: '10.255.1.2', asPath: [65002, 4200000001], origin: 'incomplete', med: 5,
    localPref: 100, communities: ['65002:7', '65002:8'], largeCommunities: ['65002:1:2'], from: '10.255.1.2', best: true,
  });
  t.match(rs[1], { prefix: '10.2.0.0/24', from: '10.255.2.2', best: false, asPath: [65003], nexthop: '10.255.2.2' });
  t.match(rs[2], { prefix: '10.1.0.0/24', from: null, best: true, asPath: [] });
  t.match(parseBirdProtocol('nb1  BGP  ---  start  18:59  Active\n  BGP state:          Active\n    Last error:       Bad peer AS\n'),
    { state: 'Active', lastError: 'Bad peer AS' });

  const g = normalizeGobgpRib({
    '10.1.0.0/24': [{ nlri: { prefix: '10.1.0.0/24' }, best: true, 'neighbor-ip': '10.255.1.1', attrs: [
      { type: 1, value: 0 }, { type: 2, as_paths: [{ segment_type: 2, num: 1, asns: [65001] }] },
      { type: 3, nexthop: '10.255.1.1' }, { type: 8, communities: [4259971079] }] }],
    '10.2.0.0/24': [{ nlri: { prefix: '10.2.0.0/24' }, best: true, attrs: [{ type: 3, nexthop: '0.0.0.0' }] }],
  });
  t.match(g, [
    { prefix: '10.1.0.0/24', from: '10.255.1.1', asPath: [65001], nexthop: '10.255.1.1', communities: ['65002:7'], origin: 'igp' },
    { prefix: '10.2.0.0/24', from: null, nexthop: null },
  ]);

  const f = normalizeFrrRoutes({ routes: {
    'fd10:1::/48': [{ prefix: 'fd10:1::/48' } as never, {
      aspath: { string: '65001', segments: [{ type: 'as-sequence', list: [65001] }] }, origin: 'IGP', valid: true,
      bestpath: { overall: true }, community: { string: '65001:1 no-export' },
      nexthops: [{ ip: 'FD00:255:1::1', scope: 'global' }, { ip: 'fe80::1', scope: 'link-local' }],
      peer: { peerId: 'fd00:255:1::1' } }],
  } });
  t.match(f, [{ prefix: 'fd10:1::/48', nexthop: 'fd00:255:1::1', from: 'fd00:255:1::1', asPath: [65001],
    communities: ['65001:1'], best: true }]);

  t.match(gateDecision(['bird not found: apt-get install bird2'], true), { fail: true, skip: /bird not found: apt-get install bird2/ });
  t.match(gateDecision(['bird not found: apt-get install bird2'], false), { fail: false, skip: /apt-get install bird2/ });
  t.match(gateDecision([]), { fail: false, skip: false });
});

t.test('gobgp CLI: a failed dial is retried, any other answer is not (no daemons)', async (t) => {
  const deadline = { code: 1, stdout: '{"error":"context deadline exceeded"}\n', stderr: '' };
  const refused = { code: 1, stdout: '', stderr: 'rpc error: code = NotFound desc = not found neighbor 10.0.0.9' };
  const ok = { code: 0, stdout: '[]', stderr: '' };
  t.ok(isDialTimeout(deadline) && isDialTimeout({ code: 1, stdout: '', stderr: 'context deadline exceeded\n' }));
  t.notOk(isDialTimeout(refused), 'an answer from gobgpd is not a dial failure');
  t.notOk(isDialTimeout({ ...deadline, code: 0 }), 'a command that succeeded is never run again');
  const script = (answers: typeof ok[]) => {
    let calls = 0;
    return { run: async () => answers[Math.min(calls++, answers.length - 1)], calls: () => calls };
  };
  let s = script([deadline, deadline, ok]);
  t.match(await retryDialTimeouts(s.run, 5, 1), { code: 0, stdout: '[]', attempts: 3 });
  t.equal(s.calls(), 3, 'run until gobgpd answers');
  s = script([refused, ok]);
  t.match(await retryDialTimeouts(s.run, 5, 1), { code: 1, attempts: 1 });
  t.equal(s.calls(), 1, "gobgpd's own error is the answer");
  s = script([deadline]);
  t.match(await retryDialTimeouts(s.run, 4, 1), { code: 1, attempts: 4 });
  t.equal(s.calls(), 4, 'gives up after the attempts it was given');
});

const gate = interopGate(t, ['bird', 'gobgp', 'frr']);

t.test('gobgp CLI with no gobgpd behind the port: the failure the retry is for', { skip: gate }, async (t) => {
  // The classifier must match what this CLI prints, not what we think it prints: ask a port nothing listens on.
  for (const json of [false, true]) {
    const r = await exec(BIN.gobgp, ['-u', '127.0.0.1', '-p', '1', ...(json ? ['neighbor', '-j'] : ['global'])], { check: false, timeoutMs: 10_000 });
    t.not(r.code, 0, `exits non-zero${json ? ' (-j)' : ''}`);
    t.ok(isDialTimeout(r), `read as a dial failure: ${JSON.stringify((r.stderr || r.stdout).trim())}`);
  }
});

t.test('BIRD <-> GoBGP over veth: session, routes both ways, withdrawals', { skip: gate }, async (t) => {
  const link = await createLink({ name: 'bg', t });
  const [bird, gobgp] = await Promise.all([
    startPeer('bird', link, {
      asn: 65001, neighbors: [{ address: link.local.v4, asn: 65002, holdTime: 9 }], announce: ['10.1.0.0/24'],
    }),
    startPeer('gobgp', link, {
      side: 'local', asn: 65002, neighbors: [{ address: link.peer.v4, asn: 65001, holdTime: 9 }],
      announce: [{ prefix: '10.2.0.0/24', communities: ['65002:7'], med: 20 }],
    }),
  ]);
  await Promise.all([bird.waitEstablished(link.local.v4), gobgp.waitEstablished(link.peer.v4)]);
  t.equal(await bird.state(link.local.v4), 'Established');
  t.equal(await gobgp.state(link.peer.v4), 'Established');

  const atBird = await bird.waitRoute('ipv4', '10.2.0.0/24', { from: link.local.v4 });
  t.match(atBird, { asPath: [65002], nexthop: link.local.v4, communities: ['65002:7'], med: 20 }, 'GoBGP route in BIRD');
  const atGobgp = await gobgp.waitRoute('ipv4', '10.1.0.0/24', { from: link.peer.v4 });
  t.match(atGobgp, { asPath: [65001], nexthop: link.peer.v4 }, 'BIRD route in GoBGP');

  await Promise.all([gobgp.announce('10.2.1.0/24'), bird.announce('10.1.1.0/24')]);
  await Promise.all([
    bird.waitRoute('ipv4', '10.2.1.0/24', { from: link.local.v4 }),
    gobgp.waitRoute('ipv4', '10.1.1.0/24', { from: link.peer.v4 }),
  ]);
  t.pass('announcements made at run time propagate');

  await Promise.all([gobgp.withdraw('10.2.0.0/24'), bird.withdraw('10.1.0.0/24')]);
  await Promise.all([
    bird.waitRoute('ipv4', '10.2.0.0/24', { present: false }),
    gobgp.waitRoute('ipv4', '10.1.0.0/24', { present: false }),
  ]);
  t.ok((await bird.routes('ipv4')).some((r) => r.prefix === '10.2.1.0/24'), 'the other route stays');
  t.pass('withdrawals propagate both ways');
});

t.test('FRR <-> BIRD: IPv4 and IPv6 sessions, 4-octet ASN', { skip: gate }, async (t) => {
  const link = await createLink({ name: 'fb', t });
  const [frr, bird] = await Promise.all([
    startPeer('frr', link, {
      asn: 4200000003,
      neighbors: [{ address: link.local.v4, asn: 65001, holdTime: 9, gracefulRestart: { restartTime: 30 } },
        { address: link.local.v6, asn: 65001, holdTime: 9 }],
      announce: ['10.3.0.0/24', 'fd10:3::/48'],
    }),
    startPeer('bird', link, {
      side: 'local', asn: 65001,
      neighbors: [{ address: link.peer.v4, asn: 4200000003, holdTime: 9, gracefulRestart: true },
        { address: link.peer.v6, asn: 4200000003, holdTime: 9 }],
      announce: ['10.1.0.0/24', 'fd10:1::/48'],
    }),
  ]);
  await Promise.all([
    frr.waitEstablished(link.local.v4), frr.waitEstablished(link.local.v6),
    bird.waitEstablished(link.peer.v4), bird.waitEstablished(link.peer.v6),
  ]);
  t.pass('both sessions Established on both sides');

  const [b4, b6, f4, f6] = await Promise.all([
    bird.waitRoute('ipv4', '10.3.0.0/24', { from: link.peer.v4 }),
    bird.waitRoute('ipv6', 'fd10:3::/48', { from: link.peer.v6 }),
    frr.waitRoute('ipv4', '10.1.0.0/24', { from: link.local.v4 }),
    frr.waitRoute('ipv6', 'fd10:1::/48', { from: link.local.v6 }),
  ]);
  t.match(b4, { asPath: [4200000003], nexthop: link.peer.v4 });
  t.match(b6, { asPath: [4200000003], nexthop: link.peer.v6 });
  t.match(f4, { asPath: [65001], nexthop: link.local.v4, best: true });
  t.match(f6, { asPath: [65001], nexthop: link.local.v6, best: true });

  await frr.withdraw('fd10:3::/48');
  await bird.waitRoute('ipv6', 'fd10:3::/48', { present: false });
  t.pass('FRR IPv6 withdrawal reaches BIRD');

  // kill -9 FRR's bgpd: BIRD (GR helper) keeps its IPv4 route as stale until bgpd is back
  await frr.kill();
  await waitFor(async () => (await bird.state(link.peer.v4)) !== 'Established', { what: 'BIRD notices bgpd is gone', peers: [bird] });
  t.match(await bird.waitRoute('ipv4', '10.3.0.0/24'), { stale: true }, 'kept as stale while FRR restarts');
  await frr.restart();
  await bird.waitEstablished(link.peer.v4);
  await waitFor(async () => (await bird.routes('ipv4')).find((r) => r.prefix === '10.3.0.0/24' && !r.stale),
    { what: 'FRR route fresh again after End-of-RIB', peers: [bird, frr] });
  t.pass('graceful restart: route refreshed after FRR is back');

  // waitFor's timeout message carries the peers' state and logs
  const err = await waitFor(() => false, { what: 'never', timeoutMs: 300, peers: [frr] }).catch((e: Error) => e);
  t.match(err, { message: /waiting for: never/, details: /frr[\s\S]*bgpd\.log/ });
});
