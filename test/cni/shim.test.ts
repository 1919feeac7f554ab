// bin/blockspeaker-cni-shim (Perl; forwards an invocation to the daemon's `cni.invoke`) answers exactly as the
// Node.js plugin executable does, over a real Ipam on a file store; and says what is wrong when it cannot.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { cniInvoke } from '../../src/daemon/cni-invoke.ts';
import { SUPPORTED_VERSIONS } from '../../src/cni/plugin.ts';
import { startTestDaemon } from '../ipc/fixture.ts';
import { IpcClient } from '../../src/ipc/client.ts';
import { runPlugin } from './helpers.ts';

const shim = new URL('../../bin/blockspeaker-cni-shim', import.meta.url).pathname;
if (spawnSync('perl', ['-e', '1']).status !== 0) throw new Error('perl is missing (Debian: perl-base, which every Debian host has)');

const env = (cmd: string, id = 'c1', extra: Record<string, string> = {}) => ({ CNI_COMMAND: cmd, CNI_CONTAINERID: id, CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin', ...extra });

t.test('shim and plugin answer alike: VERSION, ADD (idempotent), CHECK, DEL, bad input', async (t) => {
  const d = await startTestDaemon({ handlers: { 'cni.invoke': cniInvoke } });
  t.teardown(() => d.close());
  // Quotes, a backslash and non-ASCII in the config, ';' and '=' in CNI_ARGS: the escaping both ways.
  const conf = { cniVersion: '1.0.0', name: 'k8s "pod" net \\ ü', type: 'blockspeaker-cni', ipam: { type: 'blockspeaker-cni', socket: d.path } };
  const both = async (e: Record<string, string>, stdin: string | object) => {
    const [s, p] = [await runPlugin(e, stdin, { bin: shim }), await runPlugin(e, stdin)];
    return { s, p };
  };

  let r = await both(env('VERSION'), { cniVersion: '0.4.0' });
  t.same(r.s.json, r.p.json, 'VERSION');
  t.same(r.s.json.supportedVersions, SUPPORTED_VERSIONS, "the shim's list is the plugin's");
  r = await both(env('VERSION'), '');
  t.same(r.s.json, r.p.json, 'VERSION without a config');

  const add = await runPlugin(env('ADD', 'c1', { CNI_ARGS: 'K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0' }), conf, { bin: shim });
  t.equal(add.code, 0, add.stdout);
  t.match(add.json, { cniVersion: '1.0.0', ips: [{ address: /^10\.99\.0\.\d+\/24$/ }] });
  const again = await runPlugin(env('ADD', 'c1', { CNI_ARGS: 'K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0' }), conf);
  t.same(again.json, add.json, 'the Node.js plugin gets the same address for the same container (one handle)');

  const check = await runPlugin(env('CHECK'), { ...conf, prevResult: add.json }, { bin: shim });
  t.equal(check.code, 0, check.stdout);
  t.equal(check.stdout, '');

  r = await both(env('ADD', ''), conf);
  t.equal(r.s.code, 1);
  t.same(r.s.json, r.p.json, 'the same CNI error for a missing CNI_CONTAINERID');
  // A config that is not JSON names no socket: the shim asks the default one (nobody there in this test).
  const notJson = await runPlugin(env('ADD'), '{not json', { bin: shim });
  t.equal(notJson.code, 1);
  t.match(notJson.json, { code: Number, msg: String }, 'still a CNI error object');

  const del = await runPlugin(env('DEL'), conf, { bin: shim });
  t.equal(del.code, 0, del.stdout);
  const c = new IpcClient(d.path);
  t.same((await c.call('ipam.handles', {})).handles.filter((h) => h.handle === 'c1.eth0'), [], 'released');
  await c.close();
  t.same(d.errors.filter((e) => e.method === 'cni.invoke'), [], 'no failed cni.invoke');
});

t.test('shim: a daemon that is not running, or one without cni.invoke, is a CNI error that says so', async (t) => {
  const d = await startTestDaemon(); // an older daemon: no cni.invoke
  t.teardown(() => d.close());
  const conf = { cniVersion: '1.0.0', name: 'k8s', type: 'blockspeaker-cni', ipam: { type: 'blockspeaker-cni', socket: d.path } };
  const old = await runPlugin(env('ADD'), conf, { bin: shim });
  t.equal(old.code, 1);
  t.match(old.json, { cniVersion: '1.0.0', code: 999, msg: /cannot run the plugin: unknown method "cni.invoke"/ });
  const gone = join(d.dir, 'nobody.sock');
  const down = await runPlugin(env('ADD'), { ...conf, ipam: { ...conf.ipam, socket: gone } }, { bin: shim });
  t.equal(down.code, 1);
  t.same(down.json, { cniVersion: '1.0.0', code: 11, msg: `the blockspeaker daemon is not running (no socket at ${gone})` });
});

t.test('cni.invoke refuses params that are not an invocation', async (t) => {
  await t.rejects(cniInvoke({ env: 'x', stdin: '' }), { code: 'BAD_REQUEST', message: /params.env must be an object/ });
  await t.rejects(cniInvoke({ env: {}, stdin: 3 }), { code: 'BAD_REQUEST', message: /params.stdin must be/ });
  // Only CNI_* variables reach the plugin: an unset CNI_COMMAND is the plugin's own error.
  t.match(await cniInvoke({ env: { COMMAND: 'ADD', PATH: '/bin' }, stdin: '' }), { exitCode: 1, stdout: /CNI_COMMAND is not set/ });
});
