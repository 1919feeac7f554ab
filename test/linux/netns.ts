// A throwaway network namespace for the Linux programmer tests: `bs-linux-<pid>-<n>` with lo up and one veth pair
// (the dummy module is not always available) carrying 192.0.2.1/24 and 2001:db8::1/64, so `via 192.0.2.x` and
// `via 2001:db8::x` next hops resolve. Only namespaces created here are ever touched.
import { execFileSync, spawnSync } from 'node:child_process';

export const requireNetns = (): boolean => process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true';

/** Why namespace tests cannot run here, or null when they can. */
export function netnsUnavailable(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'not root (ip netns add needs CAP_SYS_ADMIN)';
  const v = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (v.error || v.status !== 0) return 'ip(8) not found: apt-get install iproute2';
  return null;
}

let seq = 0;

export interface TestNetns {
  name: string;
  dev: string;
  /** Run ip inside the namespace; returns stdout, throws with stderr on failure. */
  ip(...args: string[]): string;
  /** `ip route show table T` (or -6), as sorted trimmed lines. */
  routes(table: number | string, family?: 4 | 6): string[];
  remove(): void;
}

export function createNetns(): TestNetns {
  const name = `bs-linux-${process.pid}-${seq++}`;
  const run = (args: string[]): string => {
    try {
      return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`ip ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
    }
  };
  // A leftover from a killed run of this very pid would make `add` fail; it is ours by name.
  spawnSync('ip', ['netns', 'del', name]);
  run(['netns', 'add', name]);
  const ip = (...args: string[]): string => run(['-n', name, ...args]);
  try {
    ip('link', 'set', 'lo', 'up');
    ip('link', 'add', 'bs0', 'type', 'veth', 'peer', 'name', 'bs1');
    ip('link', 'set', 'bs0', 'up');
    ip('link', 'set', 'bs1', 'up');
    ip('addr', 'add', '192.0.2.1/24', 'dev', 'bs0');
    ip('addr', 'add', '2001:db8::1/64', 'dev', 'bs0', 'nodad');
  } catch (err) {
    spawnSync('ip', ['netns', 'del', name]);
    throw err;
  }
  return {
    name,
    dev: 'bs0',
    ip,
    routes: (table, family = 4) =>
      ip(`-${family}`, 'route', 'show', 'table', String(table))
        .split('\n').map((l) => l.trim()).filter((l) => l !== '').sort(),
    remove: () => void spawnSync('ip', ['netns', 'del', name]),
  };
}
