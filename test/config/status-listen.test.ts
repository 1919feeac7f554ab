// status.listen and status.metricsListen: the main listener defaults to loopback, the metrics listener is optional
// and needs both address and port, every bad value names its field, and the two cannot take the same socket.
import t from 'tap';
import { ConfigError, formatConfig, listensOverlap, parseConfig } from '../../src/config/config.ts';

function issues(text: string): { path: string; message: string }[] {
  try {
    parseConfig(text, 'node.yaml');
  } catch (e) {
    if (e instanceof ConfigError) return e.issues.map((i) => ({ path: i.path, message: i.message }));
    throw e;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(text)}`);
}

t.test('defaults: the status listener on loopback, no metrics listener', async (t) => {
  for (const text of ['', 'status: {}', 'status: null', 'status: { listen: ":9179" }']) {
    t.same(parseConfig(text).status, { listen: { address: '127.0.0.1', port: 9179 } }, `${JSON.stringify(text)}: 127.0.0.1:9179, no metricsListen`);
  }
  t.same(parseConfig('status: { listen: ":0" }').status, { listen: { address: '127.0.0.1', port: 0 } }, 'a port alone keeps the loopback address');
  t.equal(parseConfig('status: false').status, false, 'status: false turns both off');
});

t.test('metricsListen forms', async (t) => {
  const m = (v: string) => (parseConfig(`status: { metricsListen: ${v} }`).status as { metricsListen?: unknown }).metricsListen;
  t.same(m('"0.0.0.0:9180"'), { address: '0.0.0.0', port: 9180 });
  t.same(m('"[::]:9180"'), { address: '::', port: 9180 }, 'IPv6 in brackets');
  t.same(m('"[fd00:0::5]:9180"'), { address: 'fd00::5', port: 9180 }, 'canonical address');
  t.same(m('{ address: 10.0.0.5, port: 9180 }'), { address: '10.0.0.5', port: 9180 }, 'mapping form');
  t.same(m('"127.0.0.1:0"'), { address: '127.0.0.1', port: 0 }, 'port 0: any free port');
  const c = parseConfig('status: { listen: "127.0.0.1:9179", metricsListen: "0.0.0.0:9180" }');
  t.same(c.status, { listen: { address: '127.0.0.1', port: 9179 }, metricsListen: { address: '0.0.0.0', port: 9180 } });
  t.same(parseConfig(formatConfig(c)), c, 'round-trips through formatConfig (what --check prints)');
});

t.test('bad metricsListen values name status.metricsListen', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['"nope:x"', 'status.metricsListen', /got "nope:x"/],
    ['"x:9180"', 'status.metricsListen', /an IP address, got "x"/],
    ['"0.0.0.0:70000"', 'status.metricsListen', /0\.\.65535, got 70000/],
    ['"0.0.0.0"', 'status.metricsListen', /both given, got "0\.0\.0\.0"/],
    ['":9180"', 'status.metricsListen', /both given, got ":9180"/],
    ['{ port: 9180 }', 'status.metricsListen.address', /required/],
    ['{ address: 0.0.0.0 }', 'status.metricsListen.port', /required/],
    ['{ address: 0.0.0.0, port: 9180, tls: true }', 'status.metricsListen.tls', /unknown field/],
    ['9180', 'status.metricsListen', /must be a mapping, got 9180/],
    ['true', 'status.metricsListen', /must be a mapping, got true/],
  ];
  for (const [value, path, msg] of cases) {
    const got = issues(`status: { metricsListen: ${value} }`);
    t.equal(got.length, 1, `${value}: one issue (${JSON.stringify(got)})`);
    t.equal(got[0]?.path, path, `${value}: names ${path}`);
    t.match(got[0]?.message, msg, `${value}: says what is wrong`);
  }
  t.match(issues('status: { metricsListn: "0.0.0.0:9180" }'), [{ path: 'status.metricsListn', message: /did you mean metricsListen/ }]);
});

t.test('the same port as status.listen on an overlapping address is refused', async (t) => {
  const clash: [string, string][] = [
    ['127.0.0.1:9179', '127.0.0.1:9179'],
    ['127.0.0.1:9179', '0.0.0.0:9179'],
    ['0.0.0.0:9179', '10.0.0.5:9179'],
    ['127.0.0.1:9179', '[::]:9179'],
    ['[::1]:9179', '[::]:9179'],
    ['[::1]:9179', '[::1]:9179'],
    ['127.0.0.1:9179', '[::ffff:127.0.0.1]:9179'],
  ];
  for (const [l, m] of clash) {
    const got = issues(`status: { listen: "${l}", metricsListen: "${m}" }`);
    t.equal(got.length, 1, `${l} and ${m}: refused`);
    t.equal(got[0]?.path, 'status.metricsListen');
    t.match(got[0]?.message, /overlaps status\.listen .*9179.*give it its own port/);
  }
  t.match(issues('status: { metricsListen: "0.0.0.0:9179" }'), [{ path: 'status.metricsListen', message: /overlaps status\.listen 127\.0\.0\.1:9179/ }],
    'against the default status.listen too');
  const fine: [string, string][] = [
    ['127.0.0.1:9179', '0.0.0.0:9180'],
    ['127.0.0.1:9179', '10.0.0.5:9179'],
    ['127.0.0.1:9179', '[::1]:9179'],
    ['0.0.0.0:9179', '[fd00::5]:9179'],
    ['127.0.0.1:0', '127.0.0.1:0'],
  ];
  for (const [l, m] of fine) {
    t.doesNotThrow(() => parseConfig(`status: { listen: "${l}", metricsListen: "${m}" }`), `${l} and ${m}: accepted`);
  }
  t.equal(listensOverlap({ address: '::', port: 1 }, { address: '10.0.0.1', port: 1 }), true, '"::" is dual-stack');
  t.equal(listensOverlap({ address: '0.0.0.0', port: 1 }, { address: '::1', port: 1 }), false, '0.0.0.0 is IPv4 only');
});
