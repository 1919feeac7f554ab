// `blockspeaker bgp decode`: the real command on hand-made messages, from arguments, files (hex and binary) and
// stdin; malformed input prints the NOTIFICATION or RFC 7606 action and exits 1.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runCli } from '../kit/cli.ts';

const lines = (s: string) => s.trimEnd().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);

const M = 'ff'.repeat(16);
const KEEPALIVE = `${M}001304`;
// OPEN: AS 65001, hold 90, id 10.0.0.1, capabilities multiprotocol ipv4/unicast and 4-octet AS 65001.
const OPEN = `${M}002d0104fde9005a0a000001100206010400010001020641040000fde9`;
// UPDATE: ORIGIN IGP, AS_PATH 65001 (4-octet), NEXT_HOP 10.0.0.1, NLRI 10.1.0.0/24.
const UPDATE = `${M}002f02000000144001010040020602010000fde94003040a000001180a0100`;
// The same with ORIGIN 5: RFC 7606 7.1 treat-as-withdraw.
const BAD_ORIGIN = UPDATE.replace('40010100', '40010105');
// Same AS_PATH read as 2-octet: segment of 1 ASN whose length disagrees -> malformed AS_PATH.
const NOTIFICATION = `${M}0015030602`; // Cease / Administrative Shutdown (no data)
const ROUTE_REFRESH = `${M}00170500010001`;

t.test('messages from arguments', async (t) => {
  const r = await runCli(['bgp', 'decode', KEEPALIVE, OPEN, UPDATE, NOTIFICATION, ROUTE_REFRESH]);
  t.equal(r.code, 0, r.stderr);
  t.same(lines(r.stdout), [
    { action: 'ok', message: { type: 'KEEPALIVE' } },
    {
      action: 'ok',
      message: {
        type: 'OPEN', version: 4, myAs: 65001, holdTime: 90, bgpId: '10.0.0.1',
        capabilities: [{ capability: 'multiprotocol', family: 'ipv4/unicast' }, { capability: 'four-octet-as', asn: 65001 }],
      },
    },
    { action: 'ok', message: { type: 'UPDATE', attributes: { ORIGIN: 'IGP', AS_PATH: '65001', NEXT_HOP: '10.0.0.1' }, nlri: ['10.1.0.0/24'] } },
    { action: 'ok', message: { type: 'NOTIFICATION', code: 6, subcode: 2, error: 'Cease / Administrative Shutdown', data: '' } },
    { action: 'ok', message: { type: 'ROUTE-REFRESH', family: 'ipv4/unicast', subtype: 0 } },
  ]);
});

t.test('a file of hex (whitespace, newlines, comments, 0x) and the same as raw binary', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bgp-decode-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const spaced = (h: string) => h.replace(/(..)/g, '$1 ').replace(/((?:.. ){16})/g, '$1\n');
  writeFileSync(join(dir, 'msgs.hex'), `# a capture\n${spaced(OPEN)}\n\n0x${KEEPALIVE}\n${UPDATE.toUpperCase()}  # the route\n`);
  writeFileSync(join(dir, 'msgs.bin'), Buffer.from(OPEN + KEEPALIVE + UPDATE, 'hex'));
  const fromHex = await runCli(['bgp', 'decode', '--file', join(dir, 'msgs.hex')]);
  t.equal(fromHex.code, 0, fromHex.stderr);
  t.same(lines(fromHex.stdout).map((m) => (m.message as { type: string }).type), ['OPEN', 'KEEPALIVE', 'UPDATE']);
  const fromBin = await runCli(['bgp', 'decode', '--binary', '--file', join(dir, 'msgs.bin')]);
  t.equal(fromBin.code, 0, fromBin.stderr);
  t.equal(fromBin.stdout, fromHex.stdout, 'binary and hex decode alike');
  const fromStdin = await runCli(['bgp', 'decode'], `${OPEN}\n${KEEPALIVE}\n${UPDATE}\n`);
  t.equal(fromStdin.stdout, fromHex.stdout, 'stdin (hex)');
  const fromStdinBin = await runCli(['bgp', 'decode', '--binary', '-'], Buffer.from(OPEN + KEEPALIVE + UPDATE, 'hex'));
  t.equal(fromStdinBin.code, 0);
  t.equal(fromStdinBin.stdout.split('\n').length, 4, 'stdin (binary)');
  const pretty = await runCli(['bgp', 'decode', '--pretty', KEEPALIVE]);
  t.equal(pretty.stdout, '{\n  "action": "ok",\n  "message": {\n    "type": "KEEPALIVE"\n  }\n}\n');
});

t.test('malformed input is printed as its decode result, exit 1', async (t) => {
  const tw = await runCli(['bgp', 'decode', KEEPALIVE, BAD_ORIGIN]);
  t.equal(tw.code, 1);
  const [ka, bad] = lines(tw.stdout);
  t.same(ka, { action: 'ok', message: { type: 'KEEPALIVE' } });
  t.match(bad, {
    action: 'treat-as-withdraw',
    message: { type: 'UPDATE', nlri: ['10.1.0.0/24'] },
    problems: [{ attribute: 1, action: 'withdraw', error: 'UPDATE Message Error / Invalid ORIGIN Attribute' }],
  });

  const badLen = await runCli(['bgp', 'decode', `${M}001204`, KEEPALIVE]);
  t.equal(badLen.code, 1);
  t.same(lines(badLen.stdout), [{
    action: 'notification', code: 1, subcode: 2, error: 'Message Header Error / Bad Message Length', data: '0012',
    reason: 'length 18 outside 19..4096',
  }], 'a header error ends the stream');

  const badMarker = await runCli(['bgp', 'decode', `${'ff'.repeat(15)}fe001304`]);
  t.equal(badMarker.code, 1);
  t.match(lines(badMarker.stdout), [{ action: 'notification', code: 1, subcode: 1, error: /Connection Not Synchronized/ }]);

  const badType = await runCli(['bgp', 'decode', `${M}001309`]);
  t.match(lines(badType.stdout), [{ action: 'notification', code: 1, subcode: 3, error: /Bad Message Type/, data: '09' }]);

  const badOpen = await runCli(['bgp', 'decode', OPEN.replace('0104fde9', '0103fde9')]);
  t.equal(badOpen.code, 1);
  t.match(lines(badOpen.stdout), [{ action: 'notification', code: 2, subcode: 1, error: /Unsupported Version Number/ }]);

  const truncated = await runCli(['bgp', 'decode', UPDATE.slice(0, -6)]);
  t.equal(truncated.code, 1);
  t.same(lines(truncated.stdout), [{ action: 'truncated', octets: 44 }]);

  // A 4-octet AS_PATH read by a 2-octet session: the segment length no longer fits, RFC 7606 treat-as-withdraw.
  const twoOctet = await runCli(['bgp', 'decode', '--two-octet-as', UPDATE]);
  t.equal(twoOctet.code, 1);
  t.match(lines(twoOctet.stdout), [{ action: 'treat-as-withdraw', problems: [{ attribute: 2, error: /Malformed AS_PATH/ }] }]);
});

t.test('eBGP: LOCAL_PREF is discarded without being an error', async (t) => {
  // UPDATE with LOCAL_PREF 100 added (attrs length 0x14 + 7 = 0x1b, message length 0x2f + 7 = 0x36).
  const withLp = `${M}003602` + '0000001b' + '40010100' + '40020602010000fde9' + '4003040a000001' + '40050400000064' + '180a0100';
  const ibgp = await runCli(['bgp', 'decode', withLp]);
  t.equal(ibgp.code, 0, ibgp.stdout);
  t.match(lines(ibgp.stdout), [{ action: 'ok', message: { attributes: { LOCAL_PREF: 100 } } }]);
  const ebgp = await runCli(['bgp', 'decode', '--ebgp', withLp]);
  t.equal(ebgp.code, 0, ebgp.stdout);
  t.match(lines(ebgp.stdout), [{ action: 'attribute-discard', problems: [{ attribute: 5, action: 'discard' }] }]);
});

t.test('bad usage: exit 2 with one line on stderr', async (t) => {
  const notHex = await runCli(['bgp', 'decode', 'ffzz']);
  t.equal(notHex.code, 2);
  t.match(notHex.stderr, /^blockspeaker: bgp decode: argument 1 is not hex \(unexpected character "z"\); use --binary/);
  const odd = await runCli(['bgp', 'decode', 'fff']);
  t.match(odd.stderr, /odd number of hex digits/);
  const missing = await runCli(['bgp', 'decode', '--file', '/nonexistent/x.hex']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /cannot read \/nonexistent\/x\.hex: ENOENT/);
  const empty = await runCli(['bgp', 'decode'], '');
  t.equal(empty.code, 2);
  t.match(empty.stderr, /no input/);
  const both = await runCli(['bgp', 'decode', '--file', 'x', KEEPALIVE]);
  t.match(both.stderr, /not both/);
  const sub = await runCli(['bgp', 'encode']);
  t.equal(sub.code, 2);
  t.match(sub.stderr, /unknown command "encode" \(try: decode\)/);
  const help = await runCli(['bgp', 'decode', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /usage: blockspeaker bgp decode/);
});
