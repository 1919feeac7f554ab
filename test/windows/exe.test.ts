// The packaged Windows executables (dist/windows, `npm run package:windows`) under wine, used the way a Windows node
// uses them: the CLI's help; the daemon with a Windows node config (store under C:\, the default named pipe, the HNS
// dataplane on its in-memory fake via --dry-run); address assignment and release over the pipe from the CLI; and
// blockspeaker-cni.exe called as containerd calls it (CNI_* in the environment, the network config on stdin).
//
// Needs wine (Debian wine64 + wine); with REQUIRE_PEERS=1 (CI) its absence is a failure. Each wine start costs
// seconds, so independent calls run side by side.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { driveC, projectRoot, runWine, startWine, windowsNode, zPath, type WineChild, type WineResult } from '../../packaging/windows/wine.ts';
import { launcher } from '../kit/launcher.ts';
import { freePort } from '../kit/etcd-cluster.ts';
import { exe, parseLog, windowsReady } from './harness.ts';

const NET = 'k8s-pod-network';

function netConf(extra: Record<string, unknown> = {}): string {
  // What containerd hands a plugin on Windows: the main plugin's network config with our IPAM section.
  return JSON.stringify({ cniVersion: '1.1.0', name: NET, type: 'sdnbridge', ipam: { type: 'blockspeaker-cni' }, ...extra });
}

function cni(command: string, containerId: string, stdin: string): Promise<WineResult> {
  return runWine(exe.cni, [], {
    stdin,
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: 'c2b1f0de-7a0b-4b8e-9a57-3f4c7d1e2a10', // a Windows compartment/namespace GUID
      CNI_IFNAME: 'eth0',
      CNI_PATH: 'C:\\Program Files\\containerd\\cni\\bin',
    },
  });
}

/** The one JSON object a CNI call or --json command prints, with the call's output in the failure message. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function json(t: Test, r: WineResult): any {
  try {
    return JSON.parse(r.stdout);
  } catch {
    t.fail(`not JSON: stdout=${r.stdout} stderr=${r.stderr}`);
    return {};
  }
}

async function waitForLog(d: WineChild, msg: string, ms: number): Promise<Record<string, unknown>[]> {
  const until = Date.now() + ms;
  for (;;) {
    const lines = parseLog(d.output().stderr);
    if (lines.some((l) => l.msg === msg)) return lines;
    if (Date.now() > until) throw new Error(`daemon never logged "${msg}": ${JSON.stringify(d.output())}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

if (windowsReady(t)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bs-windows-exe-'));
  // The store lives on C:\ inside the wine prefix, as on a real node.
  const storeName = `bs-test-${process.pid}`;
  t.teardown(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(driveC(), storeName), { recursive: true, force: true });
  });

  t.test('CLI help, CNI VERSION; a CNI ADD with no daemon and a missing config are clear errors, not stack traces', async (t) => {
    const [help, version, noDaemon, noConfig] = await Promise.all([
      runWine(exe.cli, ['--help']),
      cni('VERSION', '', JSON.stringify({ cniVersion: '1.0.0' })),
      cni('ADD', 'nodaemon1', netConf({ ipam: { type: 'blockspeaker-cni', socket: `\\\\.\\pipe\\bs-none-${process.pid}` } })),
      runWine(exe.cli, ['run', '-c', `C:\\bs-missing-${process.pid}.yaml`]),
    ]);
    t.equal(help.code, 0, help.stderr);
    t.match(help.stdout, /^usage: blockspeaker <command>/);
    for (const cmd of ['ipam', 'run', 'show', 'hns']) t.match(help.stdout, new RegExp(`\\n  ${cmd} `), `help lists ${cmd}`);

    t.equal(version.code, 0, version.stderr);
    t.same(json(t, version), { cniVersion: '1.0.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });

    t.not(noDaemon.code, 0, 'ADD without a daemon fails');
    const err = json(t, noDaemon);
    t.match(err, { cniVersion: '1.1.0', code: Number, msg: String });
    t.match(err.msg, /bs-none-/, 'the error names the pipe it could not reach');
    t.notMatch(noDaemon.stdout + noDaemon.stderr, /\n\s+at /, 'no stack trace');

    t.not(noConfig.code, 0, 'a missing config file: non-zero exit');
    t.match(noConfig.stderr, new RegExp(`^blockspeaker: .*bs-missing-${process.pid}\\.yaml`), 'one line naming the file');
    t.notMatch(noConfig.stderr, /\n\s+at /, 'no stack trace');
  });

  t.test('daemon on a Windows node config: IPAM over the default pipe, CNI ADD/CHECK/DEL/GC', async (t) => {
    const statusPort = await freePort();
    const config = path.join(dir, 'node.yaml');
    fs.writeFileSync(
      config,
      `node: { name: win-node-1, os: windows }
bgp: { asn: 65010, routerId: 10.0.0.21, listen: false }
ipam:
  store: C:\\${storeName}\\store
  pools: [{ name: pods-v4, cidr: 10.244.0.0/16, blockSize: 26 }]
dataplane: { kind: hns }
status: { listen: "127.0.0.1:${statusPort}" }
`,
    );
    // With the node flags the Windows service and DaemonSet give it (NODE_OPTIONS: a SEA takes no command-line flags).
    const nodeOptions = launcher(projectRoot).flags.join(' ');
    const d = startWine(exe.cli, ['run', '-c', zPath(config), '--dry-run'], { timeoutMs: 400_000, env: { NODE_OPTIONS: nodeOptions } });
    t.teardown(() => d.kill());
    const lines = await waitForLog(d, 'started', 180_000);
    t.ok(lines.some((l) => l.msg === 'control socket listening' && l.path === '\\\\.\\pipe\\blockspeaker'), 'the default named pipe');
    t.ok(lines.some((l) => l.msg === 'store open' && String(l.store).includes(storeName)), 'the store under C:\\');
    t.ok(fs.existsSync(path.join(driveC(), storeName, 'store')), 'store directory made on drive C: of the prefix');
    const status = (await (await fetch(`http://127.0.0.1:${statusPort}/status`)).json()) as Record<string, unknown>;
    t.match(status, { node: 'win-node-1', asn: 65010 }, 'status endpoint answers from the Windows process');
    // The flags reached V8: the heap limit counts 3 semi-spaces, so it is the one the same flags give node here
    // less the semi-space difference, whatever the old generation's size; compare with node.exe's own answer.
    t.match(status.runtime, { nodeOptions, heapSizeLimitMB: Number }, 'the executable runs with the launchers\' NODE_OPTIONS');
    const plain = await runWine(windowsNode(), ['-p', 'require("v8").getHeapStatistics().heap_size_limit / 2 ** 20']);
    const flagged = await runWine(windowsNode(), ['-p', 'require("v8").getHeapStatistics().heap_size_limit / 2 ** 20'], { env: { NODE_OPTIONS: nodeOptions } });
    t.equal((status.runtime as { heapSizeLimitMB: number }).heapSizeLimitMB, Math.round(Number(flagged.stdout) * 10) / 10, 'the heap limit node.exe has with those flags');
    t.not(Number(flagged.stdout), Number(plain.stdout), 'which is not the default one');

    // ---- assign and release over the pipe, from the CLI executable
    const assigned = await runWine(exe.cli, ['ipam', '--daemon', '--json', 'assign', '--handle', 'cli1.eth0']);
    t.equal(assigned.code, 0, assigned.stderr);
    const a = json(t, assigned);
    const cliAddr = JSON.stringify(a).match(/10\.244\.\d+\.\d+/)?.[0];
    t.ok(cliAddr, `an address from the pool: ${assigned.stdout}`);

    // ---- CNI ADD for two pods at once; CHECK one; the CLI's address and the pods' differ
    const [add1, add2, released] = await Promise.all([
      cni('ADD', 'pod1', netConf()),
      cni('ADD', 'pod2', netConf()),
      runWine(exe.cli, ['ipam', '--daemon', '--json', 'release', '--handle', 'cli1.eth0']),
    ]);
    t.equal(released.code, 0, released.stderr);
    t.equal(add1.code, 0, add1.stdout + add1.stderr);
    t.equal(add2.code, 0, add2.stdout + add2.stderr);
    const r1 = json(t, add1);
    const r2 = json(t, add2);
    t.match(r1, { cniVersion: '1.1.0', ips: [{ address: /^10\.244\.\d+\.\d+\/\d+$/, gateway: /^10\.244\./ }] });
    t.not(r1.ips[0].address, r2.ips[0].address, 'two pods, two addresses');

    // CHECK with the ADD's result as prevResult: holds. The CLI's released handle: no longer held.
    const cliPrev = { cniVersion: '1.1.0', ips: [{ address: `${cliAddr}/26` }] };
    const [check1, checkCli] = await Promise.all([
      cni('CHECK', 'pod1', netConf({ prevResult: r1 })),
      cni('CHECK', 'cli1', netConf({ prevResult: cliPrev })),
    ]);
    t.equal(check1.code, 0, check1.stdout + check1.stderr);
    t.equal(check1.stdout, '', 'CHECK prints nothing when all is well');
    t.not(checkCli.code, 0, 'the address the CLI released is no longer held');
    t.match(json(t, checkCli).msg, /differs from prevResult/);

    // ---- DEL pod1 (twice: DEL is idempotent); GC with only pod1's attachment valid releases pod2
    const del = await cni('DEL', 'pod1', netConf({ prevResult: r1 }));
    t.equal(del.code, 0, del.stdout + del.stderr);
    const [delAgain, gc] = await Promise.all([
      cni('DEL', 'pod1', netConf()),
      runWine(exe.cni, [], {
        stdin: netConf({ 'cni.dev/valid-attachments': [{ containerID: 'pod1', ifname: 'eth0' }] }),
        env: { CNI_COMMAND: 'GC', CNI_PATH: 'C:\\Program Files\\containerd\\cni\\bin' },
      }),
    ]);
    t.equal(delAgain.code, 0, 'a second DEL succeeds');
    t.equal(gc.code, 0, gc.stdout + gc.stderr);
    const [check1After, check2After] = await Promise.all([
      cni('CHECK', 'pod1', netConf({ prevResult: r1 })),
      cni('CHECK', 'pod2', netConf({ prevResult: r2 })),
    ]);
    t.not(check1After.code, 0, 'DEL released pod1');
    t.not(check2After.code, 0, 'GC released pod2, whose attachment was not valid');
    t.notMatch(d.output().stderr, /\n\s+at /, 'no stack trace in the daemon log');
  });
}
