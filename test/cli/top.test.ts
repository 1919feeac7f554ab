// `blockspeaker top`: the frame renderer (bars, roles, nothing from the daemon can steer the terminal) and
// `top --once` against a running daemon over its control socket.
import t from 'tap';
import fc from 'fast-check';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { renderFrame, textBar } from '../../src/cli/top.ts';
import type { Overview } from '../../src/daemon/overview.ts';
import { ipcRequest } from '../../src/ipc/client.ts';
import type { AssignReply } from '../../src/ipc/protocol.ts';
import { blockspeakerBin, runCli } from '../kit/cli.ts';
import { toolPath, toolsGate } from '../kit/tools.ts';
import { startTestDaemon } from '../kit/daemon.ts';
import { waitFor } from '../kit/wait.ts';

process.env.BLOCKSPEAKER_FROM_SOURCE = '1'; // the CLI children run the sources under test

const peer = (over: Record<string, unknown>) => ({
  address: '10.0.0.2', port: 179, asn: 65001, type: 'ebgp', state: 'Established', since: 0, lastError: null, uptime: 75, routerId: '10.0.0.2',
  localAddress: null, localPort: null, remotePort: null, holdTime: 90, keepaliveTime: 30,
  capabilities: { families: ['ipv4'], routeRefresh: true, fourOctetAs: true, extendedMessage: false, gracefulRestart: { restartTime: 120, restarting: false, forwarding: [] } },
  prefixes: { received: 12, accepted: 10, sent: 3, stale: 0 }, messages: { received: 1, sent: 1, updatesReceived: 1, updatesSent: 1 },
  errors: { treatAsWithdraw: 0, attributeDiscard: 0 }, flaps: 0, sendQueue: { prefixes: 0, bytes: 0 }, ...over,
}) as unknown as Overview['peers'][number];

const sample: Overview = {
  at: '2026-11-25T15:00:00.000Z',
  node: { name: 'node-a', os: 'windows', asn: 65010, routerId: '10.0.0.1', version: '0.1.0', startedAt: '2026-11-25T14:00:00.000Z', uptime: 3600, ready: false, notReady: ['dataplane'] },
  peers: [
    peer({}),
    peer({ address: '10.0.0.3', state: 'Active', uptime: 0, capabilities: null, mesh: true, lastError: 'evil \x1b[2J\x1b]0;title\x07 text', prefixes: { received: 0, accepted: 0, sent: 0, stale: 4 } }),
  ],
  routes: 13,
  ipam: {
    pools: [{ name: 'pods', cidr: '10.244.0.0/16', blockSize: 26, disabled: false, blocks: 2, size: 128, allocated: 30, free: 90, reserved: 8, utilisation: 0.25 }],
    blocks: [{ cidr: '10.244.1.0/26', pool: 'pods', affinity: 'node-a', os: 'windows', borrowable: false, size: 64, allocated: 30, free: 30, reserved: 4, utilisation: 0.5 }],
    borrowed: [{ address: '10.244.2.7', block: '10.244.2.0/26', from: 'node-b' }],
    announced: ['10.244.1.0/26', '10.244.2.7/32'],
  },
  dataplane: { kind: 'hns', errors: 2, lastSuccess: null, lastPlan: { add: 1 }, lastError: 'HNS said \x1b[31mno' },
  warnings: {
    entries: [
      { key: null, message: 'pool x: \x1b[H differs', count: 1, firstSeen: '2024-01-01T14:00:00.000Z', lastSeen: '2024-01-01T14:00:00.000Z' },
      { key: '/k', message: 'skipping block /k: bad', count: 3, firstSeen: '2024-01-01T14:00:00.000Z', lastSeen: '2024-01-01T14:59:00.000Z' },
    ],
    evicted: 2,
    limit: 256,
  },
};

t.test('one frame: every section, bars, roles; the daemon\'s text cannot move the cursor or recolour', async (t) => {
  const plain = renderFrame(sample, { color: false });
  t.notMatch(plain, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, 'no control characters at all without colour');
  t.match(plain, /blockspeaker node-a {2}windows {2}AS 65010 {2}router-id 10\.0\.0\.1 {2}up 1h0m {2}NOT READY \(waiting for dataplane\) {2}routes 13 {2}15:00:00/);
  t.match(plain, /10\.0\.0\.2 +65001 +Established +1m15s +12 +10 +3 +on \(120 s\) +-/);
  t.match(plain, /10\.0\.0\.3 \[mesh\] +65001 +Active +- +0 +0 +0 +helping: 4 stale +evil \?\[2J\?\]0;title\? text/);
  t.match(plain, /pods +10\.244\.0\.0\/16 +\/26 +2 +30 +90 +8 +\[#####=\.{14}\] 25\.0%/);
  t.match(plain, /10\.244\.1\.0\/26 +pods +\[#########=\.{10}\] +30 +30 +4 +50\.0%/);
  t.match(plain, /BORROWED\n +ADDRESS +BLOCK +FROM\n +10\.244\.2\.7 +10\.244\.2\.0\/26 +node-b/);
  t.match(plain, /DATAPLANE\n {2}kind hns {2}errors 2 {2}lastSuccess -\n {2}last plan \{"add":1\}\n {2}last error HNS said \?\[31mno/);
  t.match(plain, /WARNINGS\n {2}pool x: \?\[H differs\n {2}skipping block \/k: bad \(seen 3 times\)\n {2}\(2 older warnings dropped to keep the list at 256\)/);
  const colour = renderFrame(sample, { color: true });
  t.notMatch(colour.replace(/\x1b\[\d+m/g, ''), /\x1b/, 'with colour: only our own SGR sequences');
  t.match(colour, /\x1b\[32mEstablished\x1b\[0m/, 'Established in green');
  t.equal(colour.replace(/\x1b\[\d+m/g, ''), plain, 'colour changes nothing else (columns stay aligned)');
  const none = renderFrame({ ...sample, peers: [], ipam: null, warnings: { entries: [], evicted: 0, limit: 256 } }, { color: false });
  t.match(none, /no BGP peers configured/);
  t.match(none, /no ipam section in the config/);
  t.match(none, /WARNINGS\n {2}none/);
});

t.test('textBar: always its width, allocated then reserved then free, in proportion', async (t) => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 1 << 16 }), fc.integer({ min: 1, max: 60 }), fc.double({ min: 0, max: 1, noNaN: true }),
    fc.double({ min: 0, max: 1, noNaN: true }), (size, width, fa, fr) => {
      const a = Math.floor(size * fa);
      const r = Math.floor((size - a) * fr);
      const bar = textBar(a, r, size, width);
      const m = /^\[(#*)(=*)(\.*)\]$/.exec(bar);
      return m !== null && bar.length === width + 2 && m[1].length === Math.round((a / size) * width) &&
        Math.abs(m[1].length + m[2].length - ((a + r) / size) * width) <= 1;
    }));
  t.equal(textBar(0, 0, 0, 4), '[    ]', 'an empty block');
  t.equal(textBar(16, 0, 16, 8), '[########]', 'a full block');
});

t.test('top --once against a running daemon; no terminal without --once; a missing daemon in one line', async (t) => {
  const d = await startTestDaemon('bs-top', { name: 'node-top', asn: 65020, routerId: '10.0.0.7', poolCidr: '10.245.0.0/24' }, t);
  const a = await ipcRequest<AssignReply>(d.socket, 'ipam.assign', { handle: 'top-test', num4: 4, pools: ['pods'] });
  const block = a.ips[0]!.block;
  const r = await runCli(['top', '--once', '--socket', d.socket]);
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stdout, /\x1b/, 'no escape sequences when the output is not a terminal');
  t.match(r.stdout, /^blockspeaker node-top {2}linux {2}AS 65020 {2}router-id 10\.0\.0\.7 {2}up \S+ {2}READY/);
  t.match(r.stdout, /127\.0\.0\.9 +65001 +(Idle|Connect|Active)/, 'the configured peer, down');
  t.match(r.stdout, /pods +10\.245\.0\.0\/24 +\/28 +1 +4 +12 +0 +\[#####\.{15}\] 25\.0%/, 'the pool');
  t.match(r.stdout, new RegExp(`${block.replace(/\./g, '\\.').replace('/', '\\/')} +pods +\\[#####\\.{15}\\] +4 +12 +0 +25\\.0%`), 'the block with its bar');
  t.match(r.stdout, /DATAPLANE\n {2}kind none {2}errors 0/);

  const json = await ipcRequest<Overview>(d.socket, 'show.overview', {});
  t.equal(json.node.name, 'node-top', 'show.overview over the socket is the same snapshot as GET /overview');
  t.match((await d.get('/overview')).body, { node: { name: 'node-top' }, ipam: { blocks: [{ cidr: block, allocated: 4 }] } });

  const loop = await runCli(['top', '--socket', d.socket]);
  t.equal(loop.code, 2, 'the redrawing view needs a terminal');
  t.match(loop.stderr, /not a terminal; use --once/);
  const gone = await runCli(['top', '--once', '--socket', join(d.dir, 'nope.sock')]);
  t.equal(gone.code, 1);
  t.match(gone.stderr, /^blockspeaker: .*nope\.sock.*\n$/, `one line: ${gone.stderr.trim()}`);
  const bad = await runCli(['top', '--interval', '0', '--socket', d.socket]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--interval must be between 1 and 3600/);

  // ---- the redrawing view in a pseudo-terminal (util-linux `script`): frames keep coming, q quits and restores
  // util-linux's script(1) gives the loop a real pseudo-terminal.
  if (!toolsGate(t, ['script'])) return;
  const cmd = [process.execPath, blockspeakerBin, 'top', '--socket', d.socket, '--interval', '1'].map((x) => `'${x}'`).join(' ');
  const env = { ...process.env };
  delete env.NO_COLOR; // the test runner may set it; a user's terminal would not
  const child = spawn(toolPath('script')!, ['-q', '-e', '-c', cmd, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'], env });
  let screen = '';
  child.stdout.on('data', (x: Buffer) => (screen += x));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const frames = () => screen.split('\x1b[H\x1b[2J').length - 1;
  await waitFor('three frames of top', () => frames() >= 3, 30_000, 100);
  t.match(screen, /\x1b\[\?1049h/, 'switched to the alternate screen');
  t.match(screen, /\x1b\[1mPEERS\x1b\[0m/, 'with colour on a terminal');
  child.stdin.write('q');
  t.equal(await exited, 0, 'q quits with status 0');
  t.match(screen, /\x1b\[\?25h\x1b\[\?1049l/, 'cursor shown and the screen restored');
});
