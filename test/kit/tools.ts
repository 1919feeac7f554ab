// System tools the tests run, and the Debian package each comes from. A test that needs one asks `missingTools`
// and reports the answer (skip by hand, failure under REQUIRE_PEERS=1), so a missing tool is named, never a
// mysterious ENOENT or a "ping failed". `.ci/run` installs every package listed here (test/ci/tools.test.ts checks).
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export const TOOLS = {
  ip: { pkg: 'iproute2', paths: ['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip'] },
  ping: { pkg: 'iputils-ping', paths: ['/usr/bin/ping', '/bin/ping'] },
  curl: { pkg: 'curl', paths: ['/usr/bin/curl'] },
  openssl: { pkg: 'openssl', paths: ['/usr/bin/openssl'] },
  nsenter: { pkg: 'util-linux', paths: ['/usr/bin/nsenter'] },
  script: { pkg: 'util-linux', paths: ['/usr/bin/script'] },
  etcd: { pkg: 'etcd-server', paths: ['/usr/bin/etcd'] },
  etcdctl: { pkg: 'etcd-client', paths: ['/usr/bin/etcdctl'] },
  bird: { pkg: 'bird2', paths: ['/usr/sbin/bird'] },
  birdc: { pkg: 'bird2', paths: ['/usr/sbin/birdc'] },
  gobgpd: { pkg: 'gobgpd', paths: ['/usr/bin/gobgpd'] },
  iptables: { pkg: 'iptables', paths: ['/usr/sbin/iptables', '/sbin/iptables'] },
  'host-local': { pkg: 'containernetworking-plugins', paths: ['/usr/lib/cni/host-local'] },
  bridge: { pkg: 'containernetworking-plugins', paths: ['/usr/lib/cni/bridge'] },
  loopback: { pkg: 'containernetworking-plugins', paths: ['/usr/lib/cni/loopback'] },
  // The test-only stand-ins of computenetwork.dll, vmcompute.dll and IP Helper (test/kit/windows-standin).
  'x86_64-w64-mingw32-gcc': { pkg: 'gcc-mingw-w64-x86-64', paths: ['/usr/bin/x86_64-w64-mingw32-gcc'] },
} as const;

export type Tool = keyof typeof TOOLS;

/** Full path of a tool: its usual place, else the first on PATH; null when absent. */
export function toolPath(tool: Tool): string | null {
  for (const p of TOOLS[tool].paths) if (existsSync(p)) return p;
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, tool))) return join(dir, tool);
  }
  return null;
}

/** One message per missing tool: "ping not found: apt-get install iputils-ping". */
export function missingTools(tools: readonly Tool[]): string[] {
  return tools.filter((x) => toolPath(x) === null).map((x) => `${x} not found: apt-get install ${TOOLS[x].pkg}`);
}

interface GateTest {
  fail(message: string): unknown;
  comment(...args: unknown[]): unknown;
}

/**
 * true when every tool is present. Otherwise false, with a failure on t under REQUIRE_PEERS=1 (CI), else a
 * comment saying what is skipped and why.
 */
export function toolsGate(t: GateTest, tools: readonly Tool[]): boolean {
  const missing = missingTools(tools);
  if (!missing.length) return true;
  const why = missing.join('; ');
  if (process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true') t.fail(`${why} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else t.comment(`skipping: ${why} (set REQUIRE_PEERS=1 to make this a failure)`);
  return false;
}

