// The ip(8) adapter with a scripted runner (no root needed): the exact commands, stdin, and error mapping.
import t from 'tap';
import { parseIP, parsePrefix } from '../../src/net/ip.ts';
import { type CommandResult, IpCommandError, IpRouteProgrammer } from '../../src/linux/programmer.ts';
import type { RouteOp } from '../../src/linux/planner.ts';
import type { KernelRoute } from '../../src/linux/route.ts';

type Call = { file: string; args: readonly string[]; stdin?: string };

function scripted(reply: (c: Call) => Partial<CommandResult>) {
  const calls: Call[] = [];
  const runner = async (file: string, args: readonly string[], stdin?: string): Promise<CommandResult> => {
    const c = { file, args, stdin };
    calls.push(c);
    return { code: 0, signal: null, stdout: '', stderr: '', ...reply(c) };
  };
  return { calls, runner };
}

const via = (dst: string, nh: string): KernelRoute =>
  ({ dst: parsePrefix(dst), metric: 0, kind: 'via', via: parseIP(nh), onlink: false, table: 200, protocol: 181 });

t.test('read: both families, numeric output, inside the namespace; a never-used table is empty', async (t) => {
  const { calls, runner } = scripted((c) => c.args.includes('-4')
    ? { code: 2, stderr: 'Error: ipv4: FIB table does not exist.\nDump terminated\n' }
    : { stdout: '[{"type":"6","dst":"fd00::/64","dev":"lo","protocol":"181","metric":1024,"flags":[]}]' });
  const p = new IpRouteProgrammer({ table: 200, protocol: 181, netns: 'ns1', ip: '/sbin/ip', runner });
  const r = await p.read();
  t.same(calls.map((c) => [c.file, ...c.args].join(' ')).sort(), [
    '/sbin/ip -n ns1 -N -j -4 route show table 200',
    '/sbin/ip -n ns1 -N -j -6 route show table 200',
  ]);
  t.equal(r.routes.length, 1);
  t.equal(r.routes[0].kind, 'blackhole');
});

t.test('read: other ip failures and garbage output throw IpCommandError', async (t) => {
  const bad = new IpRouteProgrammer({ table: 200, protocol: 181, runner: scripted(() => ({ code: 1, stderr: 'Cannot open network namespace "x": No such file or directory' })).runner });
  await t.rejects(bad.read(), { name: 'IpCommandError', message: /Cannot open network namespace/ });
  const junk = new IpRouteProgrammer({ table: 200, protocol: 181, runner: scripted(() => ({ stdout: 'not json' })).runner });
  await t.rejects(junk.read(), /unreadable output/);
  const missing = new IpRouteProgrammer({ table: 200, protocol: 181, runner: async () => { throw new Error('spawn ip ENOENT'); } });
  await t.rejects(missing.read(), IpCommandError);
});

t.test('apply: one -force -batch process, one line per op, failures mapped back to their ops', async (t) => {
  const ops: RouteOp[] = [
    { op: 'delete', route: via('10.0.0.0/26', '192.0.2.1') },
    { op: 'replace', route: via('10.0.1.0/26', '192.0.2.2'), was: via('10.0.1.0/26', '192.0.2.1') },
    { op: 'add', route: via('10.0.2.0/26', '198.51.100.1') },
    { op: 'add', route: via('10.0.3.0/26', '192.0.2.2') },
  ];
  const { calls, runner } = scripted(() => ({
    code: 1, stderr: 'Error: Nexthop has invalid gateway.\nCommand failed -:3\n',
  }));
  const p = new IpRouteProgrammer({ table: 200, protocol: 181, runner });
  const res = await p.apply(ops);
  t.same(calls[0].args, ['-force', '-batch', '-']);
  t.equal(calls[0].stdin, [
    'route del 10.0.0.0/26 table 200 proto 181 metric 0',
    'route replace 10.0.1.0/26 via 192.0.2.2 table 200 proto 181 metric 0',
    'route add 10.0.2.0/26 via 198.51.100.1 table 200 proto 181 metric 0',
    'route add 10.0.3.0/26 via 192.0.2.2 table 200 proto 181 metric 0',
    '',
  ].join('\n'));
  t.equal(res.attempted, 4);
  t.equal(res.failed.length, 1);
  t.equal(res.failed[0].op, ops[2]);
  t.equal(res.failed[0].error, 'Error: Nexthop has invalid gateway.');
  t.same(await p.apply([]), { attempted: 0, failed: [] }, 'nothing to do runs nothing');
  t.equal(calls.length, 1);
});

t.test('apply: a killed or unexplained failing ip fails the whole run', async (t) => {
  const op: RouteOp = { op: 'add', route: via('10.0.2.0/26', '192.0.2.1') };
  const killed = new IpRouteProgrammer({ table: 200, protocol: 181, runner: scripted(() => ({ code: null, signal: 'SIGTERM', stderr: 'Error: x\nCommand failed -:1\n' })).runner });
  await t.rejects(killed.apply([op]), /killed by SIGTERM/);
  const odd = new IpRouteProgrammer({ table: 200, protocol: 181, runner: scripted(() => ({ code: 255, stderr: 'Object "rout" is unknown' })).runner });
  await t.rejects(odd.apply([op]), /exit 255: Object "rout" is unknown/);
});
