// bgp.peers[].bfd in node.yaml: true gives the defaults (FRR's 300 ms x 3), an object may set each field, false or
// absent means none, and every bad value is named by its field path; the daemon's BFD list follows the peers.
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/config.ts';
import { bfdPeers } from '../../src/daemon/bfd.ts';

const cfg = (bfd: string) => `bgp: { asn: 65001, routerId: 192.0.2.1, peers: [{ address: 192.0.2.2, asn: 65002, bfd: ${bfd} }] }\n`;

t.test('true, partial objects, false', async (t) => {
  t.same(parseConfig(cfg('true')).bgp!.peers[0].bfd, { minRx: 300, minTx: 300, multiplier: 3 });
  t.same(parseConfig(cfg('{ minTx: 100 }')).bgp!.peers[0].bfd, { minRx: 300, minTx: 100, multiplier: 3 });
  t.same(parseConfig(cfg('{ minRx: 50, minTx: 50, multiplier: 5 }')).bgp!.peers[0].bfd, { minRx: 50, minTx: 50, multiplier: 5 });
  t.equal(parseConfig(cfg('false')).bgp!.peers[0].bfd, undefined);
  t.equal(parseConfig('bgp: { asn: 65001, routerId: 192.0.2.1, peers: [{ address: 192.0.2.2, asn: 65002 }] }\n').bgp!.peers[0].bfd, undefined);
});

t.test('bad values name the field', async (t) => {
  const cases: [string, RegExp][] = [
    ['{ minRx: 5 }', /bgp\.peers\[0\]\.bfd\.minRx: must be 10\.\.60000, got 5/],
    ['{ minTx: 1.5 }', /bgp\.peers\[0\]\.bfd\.minTx: must be 10\.\.60000, got 1\.5/],
    ['{ multiplier: 0 }', /bgp\.peers\[0\]\.bfd\.multiplier: must be 1\.\.255, got 0/],
    ['{ interval: 300 }', /bgp\.peers\[0\]\.bfd\.interval: unknown field/],
    ['"yes"', /bgp\.peers\[0\]\.bfd: must be a mapping, got "yes"/],
  ];
  for (const [v, re] of cases) {
    t.throws(() => parseConfig(cfg(v)), ConfigError, v);
    try { parseConfig(cfg(v)); } catch (e) { t.match((e as Error).message, re, v); }
  }
});

t.test('the daemon runs BFD for exactly the peers that ask', async (t) => {
  const c = parseConfig('bgp: { asn: 65001, routerId: 192.0.2.1, peers: [{ address: 192.0.2.2, asn: 65002, bfd: true }, { address: 192.0.2.3, asn: 65003 }] }\n');
  t.same(bfdPeers(c), [{ address: '192.0.2.2', minRx: 300, minTx: 300, multiplier: 3 }]);
});
